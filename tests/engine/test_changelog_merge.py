"""The change log's cost cuts (issue 41, item 1): a commit's point writes
of the merged databases are logged once per key (storage.changelog.merge),
and bulk puts are packed as a map (storage.codec.changes).  Neither may
change what a record replays to, nor what the Redis translator
(storage.ops.replica_redis) makes of it: the records of random group
commits are translated both as the engine wrote them and as merged, and
must give the same commands; replayed on the store as it was, they give
it byte for byte."""
import os
import random

import lmdb
import msgpack
import pytest

from storage import changelog, codec
from storage.codec import changes
from storage.errors import RedisError
from storage.ops.replica_redis import Model, Translator
from storage.options import (
    AddOptions,
    AutoClaimOptions,
    ClaimOptions,
    GroupOptions,
    IdsOptions,
    ReadOptions,
    TrimOptions,
)
from storage.parts.kv import KV
from tests.engine.test_changelog import _all

PUT, DEL, MULTI, BELOW = changes.OP_PUT, changes.OP_DEL, changes.OP_MULTI, changes.OP_BELOW


# ------------------------------------------------------------------ merge

def test_a_key_written_again_is_logged_once_with_its_last_value_in_the_place_of_the_first():
    ops = [(PUT, "keys", b"a", b"1"), (PUT, "log", b"e1", b"x"), (PUT, "keys", b"b", b"1"),
           (PUT, "keys", b"a", b"2"), (PUT, "log", b"e2", b"y"), (DEL, "keys", b"b"), (PUT, "keys", b"a", b"3")]
    assert changelog.merge(ops, ["keys"]) == [(PUT, "keys", b"a", b"3"), (PUT, "log", b"e1", b"x"),
                                              (DEL, "keys", b"b"), (PUT, "log", b"e2", b"y")]


def test_deleted_then_made_again_is_a_put_and_other_databases_keep_every_op():
    ops = [(DEL, "keys", b"a"), (PUT, "log", b"e", b"1"), (DEL, "log", b"e"), (PUT, "keys", b"a", b"new"),
           (PUT, "log", b"e", b"2")]
    assert changelog.merge(ops, ["keys"]) == [(PUT, "keys", b"a", b"new")] + ops[1:3] + ops[4:]


def test_a_range_delete_or_bulk_put_of_the_database_starts_a_new_run():
    ops = [(PUT, "pel", b"k1", b"1"), (BELOW, "pel", b"k", None), (PUT, "pel", b"k1", b"2"),
           (PUT, "pel", b"k1", b"3"), (MULTI, "pel", [(b"k1", b"4")]), (DEL, "pel", b"k1"),
           (BELOW, "log", b"k", None), (DEL, "pel", b"k1")]
    assert changelog.merge(ops, ["pel"]) == [ops[0], ops[1], ops[3], ops[4], ops[7], ops[6]]


def _model_apply(ops, state):
    """What replaying ``ops`` does to ``state`` ({(db, key): value})."""
    for op in ops:
        if op[0] == PUT:
            state[(op[1], op[2])] = op[3]
        elif op[0] == DEL:
            state.pop((op[1], op[2]), None)
        elif op[0] == MULTI:
            state.update({(op[1], k): v for k, v in op[2]})
        else:
            for k in [k for k in state if k[0] == op[1] and k[1].startswith(op[2])]:
                del state[k]
    return state


def _last_wins(ops, db):
    """The Redis translator's reading of a merged database: a table in
    order of first appearance, the last op of each key winning, range
    deletes skipped."""
    t = {}
    for op in ops:
        if op[1] == db and op[0] in (PUT, DEL):
            t[op[2]] = op[3] if op[0] == PUT else None
    return list(t.items())


@pytest.mark.parametrize("seed", range(30))
def test_merged_ops_replay_alike_and_read_alike_as_a_last_wins_table(seed):
    rng = random.Random(seed)
    dbs, keys = ["keys", "pel", "log"], [b"a", b"ab", b"b", b"c"]
    ops = []
    for _ in range(rng.randrange(1, 60)):
        d, k, r = rng.choice(dbs), rng.choice(keys), rng.random()
        if r < 0.55:
            ops.append((PUT, d, k, b"%d" % rng.randrange(1000)))
        elif r < 0.85:
            ops.append((DEL, d, k))
        elif r < 0.93:
            ops.append((BELOW, d, rng.choice([b"a", b""]), None))
        else:
            ops.append((MULTI, d, [(rng.choice(keys), b"m%d" % rng.randrange(9)) for _ in range(2)]))
    before = {(d, k): b"old" for d in dbs for k in keys if rng.random() < 0.5}
    merged = changelog.merge(ops, ["keys", "pel"])
    assert _model_apply(merged, dict(before)) == _model_apply(ops, dict(before))
    assert [op for op in merged if op[1] == "log"] == [op for op in ops if op[1] == "log"]
    if not any(op[0] in (BELOW, MULTI) for op in ops):
        assert _last_wins(merged, "keys") == _last_wins(ops, "keys")
        assert _last_wins(merged, "pel") == _last_wins(ops, "pel")
        for d in ("keys", "pel"):
            written = [op[2] for op in merged if op[1] == d]
            assert len(written) == len(set(written))


# ------------------------------------------------------------------ codec

def test_bulk_puts_pack_as_a_map_and_decode_as_before_duplicates_and_order_kept():
    pairs = [(b"k%05d" % i, b"value %d" % (i % 7) * 3) for i in range(8000)] + [(b"k00002", b"again")]
    ops = [(PUT, b"meta", b"a", b"1"), (MULTI, b"log", pairs), (BELOW, b"log", b"k", None), (DEL, b"keys", b"x")]
    new = changes.encode_record(77, ops)
    old = msgpack.packb((77, ops), use_bin_type=True)          # as older versions wrote it
    form = msgpack.unpackb(new, raw=True)
    assert form[1] == changes.CODEC_PAIRS != changes.CODEC_ZLIB    # a form older versions refuse, not misread
    assert form[2][1][2] == dict(pairs)                            # a map
    assert changes.decode_record(new) == changes.decode_record(old)
    t, got = changes.decode_record(new)
    assert t == 77 and changes.record_time(new) == 77
    assert got[1] == (MULTI, b"log", tuple(pairs)) and got[3] == (DEL, b"keys", b"x")
    small = [(MULTI, b"log", pairs[:40])] + [(PUT, b"keys", b"n%d" % i, b"x" * 30) for i in range(20)]
    z = changes.encode_record(5, small)
    assert msgpack.unpackb(z)[1] == changes.CODEC_ZLIB_PAIRS     # compressed, as a group commit's record
    assert changes.decode_record(z) == changes.decode_record(msgpack.packb((5, small), use_bin_type=True))


# ------------------------------------------------------- the engine's records

def _verb(tx, rng, i):
    """One random write verb, on a few streams, groups and consumers, so
    that a commit writes the same records again and again."""
    s, s2 = rng.choice([b"s0", b"s1", b"s2"]), rng.choice([b"s0", b"s1", b"t"])
    g, c = rng.choice([b"g", b"h"]), rng.choice([b"c0", b"c1", b"c2"])
    k = rng.randrange(16)
    if k < 5:
        trim = TrimOptions("maxlen", rng.randrange(3, 12), approx=False, limit=None) if rng.random() < 0.3 else None
        tx.add(s, [b"f", b"%d" % i] + ([b"g", b"y"] if rng.random() < 0.3 else []), AddOptions(trim=trim))
    elif k == 5:
        tx.create_group(s, g, GroupOptions(start=(0, 0), mkstream=True))
    elif k in (6, 7):
        tx.read_group(ReadOptions(keys=(s,), ids=(b">",), count=rng.randrange(1, 4), group=g, consumer=c))
    elif k == 8:
        ids = [p.id for p in tx.pending_range(s, g, _pending())][:2]
        tx.ack(s, g, IdsOptions(ids=tuple(ids), given=len(ids)))
    elif k == 9:
        tx.autoclaim(s, g, c, AutoClaimOptions(min_idle=0, start=(0, 0), count=2))
    elif k == 10:
        ids = [p.id for p in tx.pending_range(s, g, _pending())][:2]
        tx.claim(s, g, c, ClaimOptions(min_idle=0, ids=tuple(ids)))
    elif k == 11:
        tx.delete_consumer(s, g, c) if rng.random() < 0.5 else tx.create_consumer(s, g, c)
    elif k == 12:
        tx.destroy_group(s, g)
    elif k == 13:
        tx.delete_keys([s])
    elif k == 14:
        tx.rename(s, s2)
    else:
        tx.expire(s, 100000, True, 0, "pexpire") if rng.random() < 0.5 else tx.trim(s, TrimOptions("maxlen", 2))


def _pending():
    from storage.ids import MAX_ID
    from storage.options import PendingOptions
    return PendingOptions(start=(0, 0), end=MAX_ID, count=10)


def _outcome(translator, ops):
    """The commands for ``ops``, or the error the translator raised."""
    try:
        return translator.record(ops)
    except Exception as e:          # noqa: BLE001 (Diverged, NeedsCommand: both must raise alike)
        return (type(e).__name__, str(e))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_group_commits_merged_translate_and_replay_as_written(store, tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    changelog.enable(store, "r")
    base = str(tmp_path / "base.mdb")
    with open(base, "wb") as f:
        store.env.copyfd(f.fileno(), compact=True)
    with store.env.begin() as t:
        models = (Model.load(t, store.dbs), Model.load(t, store.dbs))
    written = []            # each record as the engine wrote it, unmerged
    merge = changelog.merge

    def spy(ops, dbs):
        names = {h: n for n, h in store.dbs.items()}
        written.append(changes.decode_record(changes.encode_record(0, ops, names))[1])
        return merge(ops, dbs)
    monkeypatch.setattr(changelog, "merge", spy)
    i = 0
    for _ in range(60):
        with store.write() as tx:          # a group commit: a savepoint each
            for _ in range(rng.randrange(1, 25)):
                i += 1
                try:
                    _verb(tx, rng, i)
                except RedisError:
                    pass
    recs = [changes.decode_record(r[2])[1] for r in changelog.records(store, 0, 1 << 40)[1]]
    assert len(recs) == len(written) > 40
    assert sum(map(len, recs)) < sum(map(len, written))     # merged: the records are smaller
    as_written, merged = Translator(models[0]), Translator(models[1])
    for ops, got in zip(written, recs):
        assert _outcome(merged, got) == _outcome(as_written, ops)
    d = tmp_path / "replayed"
    d.mkdir()
    os.replace(base, d / "data.mdb")
    env = lmdb.open(str(d), max_dbs=20)
    dbs = {n: env.open_db(n) for n in codec.DATABASES}
    with env.begin(write=True) as t:
        kv = KV(t, dbs)
        for ops in recs:
            changelog.apply(kv, ops)
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()


def test_a_group_commit_of_xadds_logs_the_stream_record_once(store):
    changelog.enable(store, "r")
    with store.write() as tx:
        for i in range(40):
            tx.add(b"s", [b"f", b"%d" % i], AddOptions())
    _, recs = changelog.records(store, 0)
    (ops,) = [changes.decode_record(r[2])[1] for r in recs]
    dbs = [op[1] for op in ops]
    assert dbs.count(b"log") == 40 and dbs.count(b"keys") == 1 and dbs.count(b"meta") <= 2
    with store.env.begin() as t:
        key = next(op for op in ops if op[1] == b"keys")
        assert key[3] == t.get(key[2], db=store.dbs[b"keys"])      # the last value


def test_a_logged_transaction_is_freed_when_done_not_by_the_garbage_collector(store):
    import gc
    changelog.enable(store, "r")
    gc.collect()
    gc.disable()
    try:
        for i in range(3):
            store.run(lambda tx: tx.add(b"s", [b"f", b"%d" % i], AddOptions()), write=True)
        assert [o for o in gc.get_objects() if type(o) is changelog.Logged] == []
    finally:
        gc.enable()
