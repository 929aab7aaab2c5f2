"""The change log (storage.changelog, issue 41): off, a store pays one
get and makes nothing; on, every write transaction records what it
changed, savepoints included, and replaying the records on a copy taken
before them gives the store byte for byte."""
import os
import random

import lmdb
import pytest

from storage import changelog, codec
from storage.codec import changes
from storage.errors import RedisError
from storage.options import AddOptions, AutoClaimOptions, GroupOptions, IdsOptions, ReadOptions, TrimOptions
from storage.parts.kv import KV
from storage.store import Store
from tests.harness.stores import attempt


def _all(env, dbs):
    """Every database's pairs, the log's own bookkeeping left out."""
    out = {}
    with env.begin() as t:
        for name in codec.DATABASES:
            out[name] = [(k, v) for k, v in t.cursor(db=dbs[name])
                         if not (name == b"meta" and k.startswith(changes.META_CHANGELOG))]
    return out


def _base(store, path):
    with open(path, "wb") as f:
        store.env.copyfd(f.fileno(), compact=True)


def _replay(base, store, tmp_path, after=0):
    """The copy ``base`` with the store's records after ``after`` replayed."""
    d = tmp_path / "replayed"
    d.mkdir()
    os.replace(base, d / "data.mdb")
    env = lmdb.open(str(d), max_dbs=20)
    dbs = {n: env.open_db(n) for n in codec.DATABASES}
    _, recs = changelog.records(store, after, 1 << 40)
    with env.begin(write=True) as t:
        kv = KV(t, dbs)
        for _, _, rec in recs:
            changelog.apply(kv, changes.decode_record(rec)[1])
    return env, dbs, recs


def test_a_store_without_replicas_logs_nothing_and_makes_no_database(store):
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    attempt(store, lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=(0, 0))))
    attempt(store, lambda tx: tx.read_group(ReadOptions(keys=(b"s",), ids=(b">",), group=b"g", consumer=b"c")))
    seen = []
    store.run(lambda tx: seen.append(type(tx._lt)), write=True)
    assert seen == [lmdb.Transaction]
    with store.env.begin() as t:
        assert t.get(changes.META_CHANGELOG, db=store.dbs[b"meta"]) is None
    with pytest.raises(lmdb.NotFoundError):
        store.env.open_db(changes.CHANGELOG_DB, create=False)
    assert changelog.state(store) is None


def _random_work(store, rng, n):
    """A mix of every kind of write, single commands and batches with
    savepoints in which some commands fail."""
    for i in range(n):
        k = rng.randrange(12)
        s = b"s%d" % rng.randrange(3)
        if k < 4:
            fields = [b"f", b"%d" % i, b"g", b"x" * rng.randrange(30)]
            attempt(store, lambda tx: tx.add(s, fields, AddOptions(trim=TrimOptions("maxlen", 20, approx=True,
                                                                                  limit=None))))
        elif k == 4:
            attempt(store, lambda tx: tx.create_group(s, b"g", GroupOptions(start=(0, 0), mkstream=True)))
        elif k == 5:
            opts = ReadOptions(keys=(s,), ids=(b">",), count=3, group=b"g", consumer=b"c%d" % rng.randrange(3))
            attempt(store, lambda tx: tx.read_group(opts))
        elif k == 6:
            attempt(store, lambda tx: tx.autoclaim(s, b"g", b"c9", AutoClaimOptions(min_idle=0, start=(0, 0), count=2)))
        elif k == 7:
            n_ = rng.randrange(10)
            attempt(store, lambda tx: tx.trim(s, TrimOptions("maxlen", n_)))
        elif k == 8:
            iid = b"i%d" % rng.randrange(4)
            attempt(store, lambda tx: tx.add(s, [b"a", b"b"], AddOptions(idmp_pid=b"p", idmp_iid=iid)))
        elif k == 9:
            attempt(store, lambda tx: tx.expire(s, 100000, True, 0, "pexpire"))
        elif k == 10:
            with store.write() as tx:          # savepoints: a failing verb is rolled back alone
                tx.add(s, [b"a", b"1"], AddOptions())
                with pytest.raises(RedisError):
                    tx.add(s, [b"a", b"2"], AddOptions(id=(1, 1)))
                tx.add_auto_many([(s, b"x\n1"), (s, b"y\n2")])
        else:
            attempt(store, lambda tx: tx.delete_entries(s, IdsOptions(ids=((0, 1),), given=1)))
            attempt(store, lambda tx: tx.ack(s, b"g", IdsOptions(ids=((0, 1),), given=1)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_replaying_the_log_on_the_base_gives_the_store_byte_for_byte(store, tmp_path, seed):
    rng = random.Random(seed)
    _random_work(store, rng, 20)
    changelog.enable(store, "r")
    base = str(tmp_path / "base.mdb")
    _base(store, base)
    _random_work(store, rng, 150)
    attempt(store, lambda tx: tx.configure({"stream-node-max-entries": 7}))
    attempt(store, lambda tx: tx.rename(b"s0", b"t0"))
    attempt(store, lambda tx: tx.delete_keys([b"s1"]))
    env, dbs, recs = _replay(base, store, tmp_path)
    assert recs and [r[0] for r in recs] == list(range(1, len(recs) + 1))
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()


def test_a_failed_command_logs_nothing(store):
    changelog.enable(store, "r")
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(5, 0))))
    before = changelog.state(store)["seq"]
    assert isinstance(attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, 0)))), RedisError)
    attempt(store, lambda tx: tx.length(b"s"))      # a write transaction that wrote nothing
    assert changelog.state(store)["seq"] == before


def test_a_savepoint_rolled_back_takes_its_changes_out_of_the_record(store):
    changelog.enable(store, "r")
    with store.write() as tx:
        tx.add(b"s", [b"a", b"1"], AddOptions())
        with pytest.raises(RedisError):
            tx.create_group(b"nope", b"g", GroupOptions(start=(0, 0)))
    _, recs = changelog.records(store, 0)
    assert len(recs) == 1
    ops = changes.decode_record(recs[0][2])[1]
    assert all(op[1] != b"groups" for op in ops)


def test_ack_trims_behind_the_slowest_replica_and_the_bound_drops_the_oldest(store):
    changelog.enable(store, "a")
    changelog.enable(store, "b")
    for i in range(10):
        attempt(store, lambda tx: tx.add(b"s", [b"f", b"%d" % i], AddOptions()))
    changelog.ack(store, "a", 8)
    changelog.ack(store, "b", 3)
    assert [r[0] for r in changelog.records(store, 0)[1]] == [4, 5, 6, 7, 8, 9, 10]
    changelog.ack(store, "b", 9)
    assert [r[0] for r in changelog.records(store, 0)[1]] == [9, 10]
    changelog.enable(store, "a", bound=1)         # a tiny backlog: only the newest record stays
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"x"], AddOptions()))
    st, recs = changelog.records(store, 0)
    assert [r[0] for r in recs] == [11] and st["first"] == 11


def test_disabling_the_last_replica_stops_the_log(store):
    changelog.enable(store, "a")
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    assert changelog.disable(store, "a")
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    assert changelog.state(store) is None
    with store.env.begin() as t:
        assert t.stat(store.env.open_db(changes.CHANGELOG_DB, txn=t, create=False))["entries"] == 0


def test_a_process_that_opened_the_store_before_logging_began_logs_too(tmp_path):
    path = str(tmp_path / "db")
    early = Store(path)
    attempt(early, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    changelog.enable(early, "r")        # as another process would: early's handles know nothing of it
    early.dbs.pop(changes.CHANGELOG_DB, None)
    attempt(early, lambda tx: tx.add(b"s", [b"f", b"w"], AddOptions()))
    assert [r[0] for r in changelog.records(early, 0)[1]] == [1]
    early.close()


def _ops(store, after=0):
    return [changes.decode_record(r[2])[1] for r in changelog.records(store, after, 1 << 40)[1]]


def test_a_record_names_each_database_and_logs_a_node_once_with_its_final_value(store):
    changelog.enable(store, "r")
    with store.write() as tx:            # a group commit: one savepoint per XADD
        for i in range(30):
            tx.add(b"s", [b"f", b"%d" % i], AddOptions())
    (ops,) = _ops(store)
    assert {op[1] for op in ops} <= set(codec.DATABASES)
    # the stream record, rewritten by each XADD, is logged once (storage.changelog.merge)
    assert [op[1] for op in ops].count(b"log") == 30 and [op[1] for op in ops].count(b"keys") == 1
    nodes = [op for op in ops if op[1] == b"nodes"]
    with store.env.begin() as t:
        assert nodes == [(changes.OP_PUT, b"nodes", k, v) for k, v in t.cursor(db=store.dbs[b"nodes"])]
    assert list(ops[-len(nodes):]) == nodes     # at the end of the record, after the commit's other ops


def test_group_commits_are_compressed_and_bulk_ones_are_not(store):
    changelog.enable(store, "r")
    with store.write() as tx:
        for i in range(30):
            tx.add(b"s", [b"f", b"%d" % i], AddOptions())
    store.run(lambda tx: tx.add_auto_many([(b"s", b"f\n%d" % i) for i in range(5000)]), write=True)
    small, bulk = [r[2] for r in changelog.records(store, 0, 1 << 40)[1]]
    import msgpack
    assert msgpack.unpackb(small)[1] == changes.CODEC_ZLIB and msgpack.unpackb(bulk)[1] == changes.CODEC_PAIRS
    assert len(bulk) > changes.COMPRESS_MAX
    assert changes.record_time(small) == changes.decode_record(small)[0]


def test_records_in_the_older_form_still_decode_and_replay(store, tmp_path):
    """Older versions wrote every record as msgpack [time, ops], node
    puts in place: such records (in a store, or in a replica directory's
    segments) still replay to the same bytes."""
    import msgpack
    changelog.enable(store, "r")
    base = str(tmp_path / "base.mdb")
    _base(store, base)
    with store.write() as tx:
        for i in range(30):
            tx.add(b"s", [b"f", b"%d" % i], AddOptions())
    (rec,) = [r[2] for r in changelog.records(store, 0)[1]]
    t, ops = changes.decode_record(rec)
    old = msgpack.packb((t, ops), use_bin_type=True)
    assert changes.decode_record(old) == (t, ops) and changes.record_time(old) == t
    d = tmp_path / "replayed"
    d.mkdir()
    os.replace(base, d / "data.mdb")
    env = lmdb.open(str(d), max_dbs=20)
    dbs = {n: env.open_db(n) for n in codec.DATABASES}
    with env.begin(write=True) as t_:
        changelog.apply(KV(t_, dbs), changes.decode_record(old)[1])
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()


def test_an_aborted_savepoint_takes_its_node_and_entry_ops_out_but_the_record_stays_exact(store, tmp_path):
    changelog.enable(store, "r")
    base = str(tmp_path / "base.mdb")
    _base(store, base)
    with store.write() as tx:
        tx.add(b"s", [b"a", b"1"], AddOptions(id=(5, 0)))
        with pytest.raises(RedisError):
            tx.add(b"s", [b"a", b"2"], AddOptions(id=(1, 0), trim=TrimOptions("maxlen", 0)))
        tx.add(b"s", [b"a", b"3"], AddOptions(id=(6, 0)))
    (ops,) = _ops(store)
    assert [codec.id_from_entry_key(op[2]) for op in ops if op[1] == b"log"] == [(5, 0), (6, 0)]
    env, dbs, _ = _replay(base, store, tmp_path)
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()
