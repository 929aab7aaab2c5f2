"""Key expiry through the engine (issue 26, item 4), on a clock the tests
move: a stream past its TTL is gone for every command at once, its data
is removed by the next writer (the one that touches it, or any writer, a
few at a time), nothing is orphaned, and the TTL travels with RENAME,
COPY, snapshots and exports.  Replies and errors against redis-server:
tests/diffcases/13-expire.txt; with a real clock, across processes and
against redis-server: tests/compat/test_expire_vs_redis.py."""
import shlex

import pytest

from storage import codec
from storage.txn import Txn
from xstream_cli.commands import lookup

T0 = 1_800_000_000_000


@pytest.fixture
def clock(monkeypatch):
    now = [T0]
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: now[0]))
    return now


def run(store, line):
    argv = [a.encode() for a in shlex.split(line)]
    cmd = lookup(argv)
    args = cmd.parse(argv)
    return store.run(lambda tx: cmd.run(tx, *args), write=cmd.write)


def raw(store):
    """Every key of every database, as stored."""
    with store.env.begin() as t:
        return {db: [k for k, _ in t.cursor(db=store.dbs[db])] for db in codec.DATABASES}


def index(store):
    return [k for k in raw(store)[b"meta"] if k.startswith(codec.EXPIRY_PREFIX)]


def busy_stream(store, name):
    for i in range(1, 4):
        run(store, "XADD %s %d-0 f %d" % (name, i, i))
    run(store, "XADD %s IDMP p i1 * f x" % name)
    run(store, "XGROUP CREATE %s g 0" % name)
    run(store, "XREADGROUP GROUP g alice COUNT 2 STREAMS %s >" % name)


def test_ttl_counts_down_and_the_stream_is_gone_for_every_command_when_it_passes(store, clock):
    busy_stream(store, "s")
    assert run(store, "EXPIRE s 10") == 1
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (10, 10000)
    clock[0] += 4501
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (5, 5499)        # seconds rounded, as Redis
    clock[0] += 1
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (5, 5498)
    clock[0] += 5497
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (0, 1)
    assert run(store, "EXPIRETIME s") == (T0 + 10000 + 500) // 1000
    assert run(store, "PEXPIRETIME s") == T0 + 10000
    clock[0] += 1                                                          # the time itself: expired
    assert run(store, "EXISTS s") == 0
    assert run(store, "TTL s") == -2 and run(store, "PEXPIRETIME s") == -2
    assert run(store, "XLEN s") == 0 and run(store, "XRANGE s - +") == []
    assert str(run(store, "TYPE s")) == "none"
    assert run(store, "KEYS *") == [] and run(store, "SCAN 0")[1] == []
    assert run(store, "XREAD STREAMS s 0") is None
    with pytest.raises(Exception, match="no such key"):
        run(store, "XINFO STREAM s")
    with pytest.raises(Exception, match="NOGROUP"):
        run(store, "XREADGROUP GROUP g alice STREAMS s >")
    with pytest.raises(Exception, match="no such key"):
        run(store, "RENAME s t")
    assert run(store, "PERSIST s") == 0 and run(store, "EXPIRE s 100") == 0 and run(store, "DEL s") == 0


def test_the_writer_that_meets_an_expired_stream_removes_all_of_it(store, clock):
    before = raw(store)
    busy_stream(store, "s")
    run(store, "PEXPIRE s 5")
    assert len(index(store)) == 1
    clock[0] += 5
    run(store, "XADD s 9-0 f new")                   # a new stream under the old name
    assert run(store, "XRANGE s - +") == [[b"9-0", [b"f", b"new"]]]
    assert run(store, "XINFO GROUPS s") == [] and run(store, "TTL s") == -1
    assert store.run(lambda tx: list(tx.dump(b"s")))[0][1]["entries-added"] == 1
    after = raw(store)
    for db in (b"groups", b"consumers", b"cnames", b"pel", b"cpel", b"ptime", b"idmp"):
        assert after[db] == before[db], db                 # nothing of the old stream is left
    assert len(after[b"log"]) == 1 and index(store) == []


def test_any_writer_removes_expired_streams_a_few_at_a_time(store, clock):
    for i in range(25):
        busy_stream(store, "s%d" % i)
        run(store, "PEXPIRE s%d %d" % (i, 10 + i))
    run(store, "XADD keep 1-0 f v")
    clock[0] += 1000
    assert run(store, "KEYS *") == [b"keep"]                                    # gone at once for readers
    assert len(raw(store)[b"keys"]) == 26                                      # still on disk
    run(store, "XADD other 1-0 f v")                                            # an unrelated writer
    assert len(raw(store)[b"keys"]) == 26 - 20 + 1
    assert len(index(store)) == 5
    run(store, "XADD other 2-0 f v")
    assert len(raw(store)[b"keys"]) == 2 and index(store) == []
    assert sorted(run(store, "KEYS *")) == [b"keep", b"other"]
    stored = raw(store)
    assert all(len(stored[db]) == 0 for db in (b"groups", b"pel", b"idmp"))


def test_a_reader_never_writes_and_a_read_only_store_still_hides_expired_streams(store, clock, tmp_path):
    busy_stream(store, "s")
    run(store, "PEXPIRE s 5")
    clock[0] += 10
    before = raw(store)
    assert run(store, "EXISTS s") == 0 and run(store, "KEYS *") == []
    assert store.run(lambda tx: tx.reap_expired(100)) == 1                   # a read transaction counts
    assert raw(store) == before
    assert store.run(lambda tx: tx.reap_expired(100), write=True) == 1
    assert raw(store)[b"keys"] == [] and index(store) == []


def test_rename_moves_the_ttl_and_its_index_key(store, clock):
    run(store, "XADD a 1-0 f v")
    run(store, "PEXPIRE a 100")
    run(store, "RENAME a b")
    assert run(store, "PTTL b") == 100 and run(store, "EXISTS a") == 0
    assert index(store) == [codec.expiry_key(T0 + 100, b"b")]
    clock[0] += 100
    assert run(store, "EXISTS b") == 0
    run(store, "XADD x 1-0 f v")
    assert raw(store)[b"keys"] == [codec.name_key(b"x")] and index(store) == []


def test_long_names_expire_too(store, clock):
    name = "n" * 1000                                  # a hashed name key
    run(store, "XADD %s 1-0 f v" % name)
    run(store, "PEXPIRE %s 5" % name)
    assert run(store, "KEYS *") == [name.encode()]
    clock[0] += 5
    assert run(store, "KEYS *") == [] and run(store, "SCAN 0")[1] == []
    run(store, "XADD x 1-0 f v")
    assert raw(store)[b"keys"] == [codec.name_key(b"x")]


def test_copy_carries_the_ttl_and_copies_expire_apart(store, clock):
    busy_stream(store, "a")
    run(store, "PEXPIRE a 100")
    assert run(store, "COPY a b") == 1
    assert run(store, "PTTL b") == 100
    run(store, "PERSIST a")
    clock[0] += 100
    assert run(store, "EXISTS a") == 1 and run(store, "EXISTS b") == 0


def test_a_stale_index_key_is_dropped_and_hides_nothing(store, clock):
    run(store, "XADD s 1-0 f v")
    with store.env.begin(write=True) as t:
        t.put(codec.expiry_key(T0 - 1, b"s"), b"s", db=store.dbs[b"meta"])
    assert run(store, "KEYS *") == [b"s"]                         # the record has no TTL: it counts
    run(store, "XADD t 1-0 f v")
    assert index(store) == [] and sorted(run(store, "KEYS *")) == [b"s", b"t"]


def test_the_ttl_travels_in_dump_and_load_records(store, clock):
    """The records xs save, xs export and COPY are made of (their files:
    tests/compat/test_expire_vs_redis.py)."""
    busy_stream(store, "s")
    run(store, "PEXPIREAT s %d" % (T0 + 5000))
    recs = store.run(lambda tx: list(tx.dump(b"s")))
    assert recs[0][0] == "stream" and recs[0][1]["expire-at"] == T0 + 5000
    run(store, "RENAME s old")
    store.run(lambda tx: tx.load(_as_loads(store.run(lambda tx: list(tx.dump(b"old", True))), b"s")), write=True)
    assert run(store, "PEXPIRETIME s") == T0 + 5000
    clock[0] += 5000
    assert run(store, "KEYS *") == []


def _as_loads(recs, name):
    """Dump records (batched) as load records of stream ``name``."""
    from storage.verbs.copy import _as_loaded
    return list(_as_loaded(recs, name))


def test_a_load_of_a_time_already_past_leaves_nothing(store, clock):
    run(store, "XADD s 1-0 f v")
    recs = store.run(lambda tx: list(tx.dump(b"s", True)))
    recs[0][1]["expire-at"] = T0 - 1
    store.run(lambda tx: tx.load(_as_loads(recs, b"n")), write=True)
    assert run(store, "EXISTS n") == 0 and index(store) == []
    assert raw(store)[b"keys"] == [codec.name_key(b"s")]


def test_a_snapshot_is_of_one_moment_even_when_a_stream_expires_while_it_is_written(store, clock, monkeypatch,
                                                                                    tmp_path):
    # the save's transaction reads the clock once (Txn.tick): a stream
    # alive when the names are listed is still alive for its dump, though
    # the clock moves past its TTL in between; restored later, it has
    # expired, as a snapshot taken a moment before its TTL must say
    from storage.ops import snapshot
    from storage.store import Store
    busy_stream(store, "a")
    busy_stream(store, "b")
    run(store, "PEXPIRE a 5")
    names = Txn.stream_names

    def listed_then_later(tx):
        got = names(tx)
        clock[0] += 10
        return got
    monkeypatch.setattr(Txn, "stream_names", listed_then_later)
    st = snapshot.save_to_path(store, str(tmp_path / "s.snap"))
    assert (st.streams, st.entries) == (2, 8)
    monkeypatch.setattr(Txn, "stream_names", names)
    other = Store(str(tmp_path / "other"))
    snapshot.restore(other, str(tmp_path / "s.snap"))
    assert (run(other, "EXISTS a"), run(other, "XLEN b")) == (0, 4)
    other.close()
