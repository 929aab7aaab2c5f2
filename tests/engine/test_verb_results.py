"""What the engine's verbs return, used as a library: IDs as (ms, seq)
and entries as storage.info.Entry rows from every verb that gives
entries, never Redis's ``ms-seq`` text; and ``Txn.dirty``, the changes a
transaction's kept verbs made, counted as Redis's dirty counter counts
them (xs serve's INFO rdb_changes_since_last_save reads it)."""
import pytest

from storage.errors import RedisError
from storage.info import AutoClaimed, ClaimedEntry, Entry
from storage.options import (
    AddOptions,
    AutoClaimOptions,
    ClaimOptions,
    GroupOptions,
    IdsOptions,
    RangeOptions,
    ReadOptions,
    StreamInfoOptions,
    TrimOptions,
)

ALL = RangeOptions((0, 0), (2 ** 64 - 1, 2 ** 64 - 1))


def _fill(tx, n=3, name=b"s"):
    return [tx.add(name, [b"f", b"%d" % k], AddOptions(id=(k + 1, 0))) for k in range(n)]


def _group_read(group=b"g", consumer=b"c", ids=(b">",), keys=(b"s",), count=None, claim=None):
    return ReadOptions(tuple(keys), tuple(ids), count, None, 0, 0, group, consumer, False, claim)


def test_every_verb_that_gives_entries_gives_entry_rows_with_tuple_ids(store):
    with store.write() as tx:
        assert _fill(tx) == [(1, 0), (2, 0), (3, 0)]
        assert list(tx.range(b"s", ALL)) == [Entry((1, 0), [b"f", b"0"]), Entry((2, 0), [b"f", b"1"]),
                                             Entry((3, 0), [b"f", b"2"])]
        assert tx.range(b"s", ALL)[1].id == (2, 0)
        [(key, got)] = tx.read_streams(ReadOptions((b"s",), ((1, 0),), None))
        assert key == b"s" and [e.id for e in got] == [(2, 0), (3, 0)]
        tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
        [(key, got)] = tx.read_group(_group_read(count=2))
        assert got == [Entry((1, 0), [b"f", b"0"]), Entry((2, 0), [b"f", b"1"])]
        assert tx.claim(b"s", b"g", b"d", ClaimOptions(min_idle=0, ids=((1, 0),))) == [Entry((1, 0), [b"f", b"0"])]
        assert tx.claim(b"s", b"g", b"e", ClaimOptions(min_idle=0, ids=((1, 0),), justid=True)) == [(1, 0)]
        got = tx.autoclaim(b"s", b"g", b"x", AutoClaimOptions(min_idle=0, start=(0, 0), count=1))
        assert isinstance(got, AutoClaimed)
        assert got.next == (2, 0) and got.claimed == [Entry((1, 0), [b"f", b"0"])] and got.deleted == []
        info = tx.stream_info(b"s", StreamInfoOptions())
        assert info.first_entry == Entry((1, 0), [b"f", b"0"]) and info.last_entry.id == (3, 0)
        full = tx.stream_info(b"s", StreamInfoOptions(full=True, count=10))
        assert [e.id for e in full.entries] == [(1, 0), (2, 0), (3, 0)]
        assert tx.add_auto_many([(b"t", [b"a", b"1"]), (b"t", [b"a", b"2"])]) == [
            tx.last_generated_id(b"t")[:1] + (0,), tx.last_generated_id(b"t")]


def test_a_claim_through_xreadgroup_gives_its_idle_time_and_deliveries(store):
    with store.write() as tx:
        _fill(tx, 2)
        tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
        tx.read_group(_group_read(count=1))
        [(_, got)] = tx.read_group(_group_read(consumer=b"d", claim=0))
    assert [type(e) for e in got] == [ClaimedEntry, ClaimedEntry]
    assert (got[0].id, got[0].deliveries) == ((1, 0), 1) and got[1] == ClaimedEntry((2, 0), [b"f", b"1"], 0, 0)


def test_a_deleted_pending_entry_is_an_entry_without_fields_in_a_history_read(store):
    with store.write() as tx:
        _fill(tx, 2)
        tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
        tx.read_group(_group_read())
        tx.delete_entries(b"s", IdsOptions(((1, 0),), 1))
        [(_, got)] = tx.read_group(_group_read(ids=((0, 0),)))
    assert got == [Entry((1, 0), None), Entry((2, 0), [b"f", b"1"])]


def _dirty(store, fn):
    out = []

    def run(tx):
        before = tx.dirty
        fn(tx)
        out.append(tx.dirty - before)
    store.run(run, write=True, savepoints=True)
    return out[0]


def test_the_dirty_counter_counts_each_change_as_redis_does(store):
    assert _dirty(store, lambda tx: _fill(tx, 3)) == 3
    assert _dirty(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(nomkstream=True))) == 1
    assert _dirty(store, lambda tx: tx.add(b"nope", [b"f", b"v"], AddOptions(nomkstream=True))) == 0
    assert _dirty(store, lambda tx: tx.add_auto_many([(b"s", [b"a", b"1"])] * 5)) == 5
    assert _dirty(store, lambda tx: tx.delete_entries(b"s", IdsOptions(((1, 0), (9, 9)), 2))) == 1
    assert _dirty(store, lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))) == 1
    # XREADGROUP: one per stream that delivered new entries, and one per consumer made by use
    assert _dirty(store, lambda tx: tx.read_group(_group_read(count=3))) == 2
    assert _dirty(store, lambda tx: tx.read_group(_group_read(ids=((0, 0),)))) == 0     # history: none
    assert _dirty(store, lambda tx: tx.ack(b"s", b"g", IdsOptions(((2, 0), (3, 0)), 2))) == 2
    assert _dirty(store, lambda tx: tx.trim(b"s", TrimOptions("maxlen", 2))) == 6         # of 8
    assert _dirty(store, lambda tx: tx.delete_keys([b"s", b"missing"])) == 1


def test_xclaim_counts_the_deleted_entries_it_drops_and_a_lastid_that_moved_the_group(store):
    with store.write() as tx:
        _fill(tx, 3)
        tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
        tx.read_group(_group_read())
        tx.delete_entries(b"s", IdsOptions(((1, 0),), 1))
    # claimed one, dropped one deleted entry: two changes (consumer c exists already)
    assert _dirty(store, lambda tx: tx.claim(b"s", b"g", b"c", ClaimOptions(min_idle=0, ids=((1, 0), (2, 0))))) == 2
    # nothing claimed, but LASTID moved the group: one change
    assert _dirty(store, lambda tx: tx.claim(b"s", b"g", b"c", ClaimOptions(min_idle=10 ** 9, ids=((3, 0),),
                                                                            lastid=(9, 0)))) == 1


def test_a_verb_rolled_back_counts_nothing(store):
    with store.write() as tx:
        _fill(tx, 1)
        before = tx.dirty
        with pytest.raises(RedisError):
            tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, 0), seq_given=True))      # ID too small
        assert tx.dirty == before


def test_xread_s_maxsize_counts_an_id_by_its_text_and_xreadgroup_s_by_21_bytes(store):
    # 41-byte ID texts: an entry is 75 bytes for XREAD's budget, 55 for XREADGROUP's
    big = 10 ** 19
    with store.write() as tx:
        for k in range(3):
            tx.add(b"s", [b"f", b"v"], AddOptions(id=(big, big + k), seq_given=True))
        tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
        [(_, read)] = tx.read_streams(ReadOptions((b"s",), ((0, 0),), None, None, 0, 110))
        [(_, delivered)] = tx.read_group(ReadOptions((b"s",), (b">",), None, None, 0, 110, b"g", b"c", False, None))
    assert [e.id for e in read] == [(big, big)]
    assert [e.id for e in delivered] == [(big, big), (big, big + 1)]
