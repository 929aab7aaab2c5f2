"""Key expiry through the engine (issue 26, item 4), on a clock the tests
move: a stream past its TTL is gone for every command at once, its data
is removed by the next writer (the one that touches it, or any writer, a
few at a time), nothing is orphaned, and the TTL travels with RENAME,
COPY, snapshots and exports.  Replies and errors against redis-server:
tests/diffcases/13-expire.txt; with a real clock, across processes and
against redis-server: tests/compat/test_expire_vs_redis.py; TTL and
the other commands on an expired stream, as typed:
tests/cli/test_expire_commands.py."""
import pytest

from storage import codec
from storage.ids import MAX_ID, MIN_ID
from storage.options import AddOptions, GroupOptions, RangeOptions, ReadOptions
from storage.txn import Txn
from tests.harness.stores import add, entries_text, frozen_clock, read, write

T0 = 1_800_000_000_000


@pytest.fixture
def clock(monkeypatch):
    return frozen_clock(monkeypatch, T0)


def pexpire(store, name, ms):
    return write(store, lambda tx: tx.expire(name, ms, True, 0, "pexpire"))


def keys(store):
    return read(store, lambda tx: tx.keys(b"*"))


def exists(store, name):
    return read(store, lambda tx: tx.exists([name]))


def raw(store):
    """Every key of every database, as stored."""
    with store.env.begin() as t:
        return {db: [k for k, _ in t.cursor(db=store.dbs[db])] for db in codec.DATABASES}


def index(store):
    return [k for k in raw(store)[b"meta"] if k.startswith(codec.EXPIRY_PREFIX)]


def busy_stream(store, name):
    for i in range(1, 4):
        add(store, name, (i, 0), [b"f", b"%d" % i])
    write(store, lambda tx: tx.add(name, [b"f", b"x"], AddOptions(idmp_pid=b"p", idmp_iid=b"i1")))
    write(store, lambda tx: tx.create_group(name, b"g", GroupOptions(start=(0, 0))))
    write(store, lambda tx: tx.read_group(ReadOptions(keys=(name,), ids=(b">",), count=2, group=b"g",
                                                      consumer=b"alice")))



def test_the_writer_that_meets_an_expired_stream_removes_all_of_it(store, clock):
    before = raw(store)
    busy_stream(store, b"s")
    pexpire(store, b"s", 5)
    assert len(index(store)) == 1
    clock.advance(5)
    add(store, b"s", (9, 0), [b"f", b"new"])          # a new stream under the old name
    assert read(store, lambda tx: entries_text(tx.range(b"s", RangeOptions(MIN_ID, MAX_ID)))) == [
        ["9-0", [b"f", b"new"]]]
    assert read(store, lambda tx: tx.groups_info(b"s")) == [] and read(store, lambda tx: tx.expire_time(b"s")) == -1
    assert store.run(lambda tx: list(tx.dump(b"s")))[0][1]["entries-added"] == 1
    after = raw(store)
    for db in (b"groups", b"consumers", b"cnames", b"pel", b"cpel", b"ptime", b"idmp"):
        assert after[db] == before[db], db                 # nothing of the old stream is left
    assert len(after[b"log"]) == 1 and index(store) == []


def test_any_writer_removes_expired_streams_a_few_at_a_time(store, clock):
    for i in range(25):
        busy_stream(store, b"s%d" % i)
        pexpire(store, b"s%d" % i, 10 + i)
    add(store, b"keep", (1, 0), [b"f", b"v"])
    clock.advance(1000)
    assert keys(store) == [b"keep"]                                             # gone at once for readers
    assert len(raw(store)[b"keys"]) == 26                                      # still on disk
    add(store, b"other", (1, 0), [b"f", b"v"])                                  # an unrelated writer
    assert len(raw(store)[b"keys"]) == 26 - 20 + 1
    assert len(index(store)) == 5
    add(store, b"other", (2, 0), [b"f", b"v"])
    assert len(raw(store)[b"keys"]) == 2 and index(store) == []
    assert sorted(keys(store)) == [b"keep", b"other"]
    stored = raw(store)
    assert all(len(stored[db]) == 0 for db in (b"groups", b"pel", b"idmp"))


def test_a_reader_never_writes_and_a_read_only_store_still_hides_expired_streams(store, clock, tmp_path):
    busy_stream(store, b"s")
    pexpire(store, b"s", 5)
    clock.advance(10)
    before = raw(store)
    assert exists(store, b"s") == 0 and keys(store) == []
    assert store.run(lambda tx: tx.reap_expired(100)) == 1                   # a read transaction counts
    assert raw(store) == before
    assert store.run(lambda tx: tx.reap_expired(100), write=True) == 1
    assert raw(store)[b"keys"] == [] and index(store) == []


def test_rename_moves_the_ttl_and_its_index_key(store, clock):
    add(store, b"a", (1, 0), [b"f", b"v"])
    pexpire(store, b"a", 100)
    write(store, lambda tx: tx.rename(b"a", b"b"))
    assert read(store, lambda tx: tx.expire_time(b"b")) == T0 + 100 and exists(store, b"a") == 0
    assert index(store) == [codec.expiry_key(T0 + 100, b"b")]
    clock.advance(100)
    assert exists(store, b"b") == 0
    add(store, b"x", (1, 0), [b"f", b"v"])
    assert raw(store)[b"keys"] == [codec.name_key(b"x")] and index(store) == []


def test_long_names_expire_too(store, clock):
    name = b"n" * 1000                                 # a hashed name key
    add(store, name, (1, 0), [b"f", b"v"])
    pexpire(store, name, 5)
    assert keys(store) == [name]
    clock.advance(5)
    assert keys(store) == [] and read(store, lambda tx: tx.scan(0, None, 10, None))[1] == []
    add(store, b"x", (1, 0), [b"f", b"v"])
    assert raw(store)[b"keys"] == [codec.name_key(b"x")]


def test_copy_carries_the_ttl_and_copies_expire_apart(store, clock):
    busy_stream(store, b"a")
    pexpire(store, b"a", 100)
    assert write(store, lambda tx: tx.copy(b"a", b"b")) == 1
    assert read(store, lambda tx: tx.expire_time(b"b")) == T0 + 100
    write(store, lambda tx: tx.persist(b"a"))
    clock.advance(100)
    assert exists(store, b"a") == 1 and exists(store, b"b") == 0


def test_a_stale_index_key_is_dropped_and_hides_nothing(store, clock):
    add(store, b"s", (1, 0), [b"f", b"v"])
    with store.env.begin(write=True) as t:
        t.put(codec.expiry_key(T0 - 1, b"s"), b"s", db=store.dbs[b"meta"])
    assert keys(store) == [b"s"]                                  # the record has no TTL: it counts
    add(store, b"t", (1, 0), [b"f", b"v"])
    assert index(store) == [] and sorted(keys(store)) == [b"s", b"t"]


def test_the_ttl_travels_in_dump_and_load_records(store, clock):
    """The records xs save, xs export and COPY are made of (their files:
    tests/compat/test_expire_vs_redis.py)."""
    busy_stream(store, b"s")
    write(store, lambda tx: tx.expire(b"s", T0 + 5000, False, 0, "pexpireat"))
    recs = store.run(lambda tx: list(tx.dump(b"s")))
    assert recs[0][0] == "stream" and recs[0][1]["expire-at"] == T0 + 5000
    write(store, lambda tx: tx.rename(b"s", b"old"))
    store.run(lambda tx: tx.load(_as_loads(store.run(lambda tx: list(tx.dump(b"old", True))), b"s")), write=True)
    assert read(store, lambda tx: tx.expire_time(b"s")) == T0 + 5000
    clock.advance(5000)
    assert keys(store) == []


def _as_loads(recs, name):
    """Dump records (batched) as load records of stream ``name``."""
    from storage.verbs.copy import _as_loaded
    return list(_as_loaded(recs, name))


def test_a_load_of_a_time_already_past_leaves_nothing(store, clock):
    add(store, b"s", (1, 0), [b"f", b"v"])
    recs = store.run(lambda tx: list(tx.dump(b"s", True)))
    recs[0][1]["expire-at"] = T0 - 1
    store.run(lambda tx: tx.load(_as_loads(recs, b"n")), write=True)
    assert exists(store, b"n") == 0 and index(store) == []
    assert raw(store)[b"keys"] == [codec.name_key(b"s")]


def test_a_snapshot_is_of_one_moment_even_when_a_stream_expires_while_it_is_written(store, clock, monkeypatch,
                                                                                    tmp_path):
    # the save's transaction reads the clock once (Txn.tick): a stream
    # alive when the names are listed is still alive for its dump, though
    # the clock moves past its TTL in between; restored later, it has
    # expired, as a snapshot taken a moment before its TTL must say
    from storage.ops import snapshot
    from storage.store import Store
    busy_stream(store, b"a")
    busy_stream(store, b"b")
    pexpire(store, b"a", 5)
    names = Txn.stream_names

    def listed_then_later(tx):
        got = names(tx)
        clock.advance(10)
        return got
    monkeypatch.setattr(Txn, "stream_names", listed_then_later)
    st = snapshot.save_to_path(store, str(tmp_path / "s.snap"))
    assert (st.streams, st.entries) == (2, 8)
    monkeypatch.setattr(Txn, "stream_names", names)
    other = Store(str(tmp_path / "other"))
    snapshot.restore(other, str(tmp_path / "s.snap"))
    assert (exists(other, b"a"), read(other, lambda tx: tx.length(b"b"))) == (0, 4)
    other.close()
