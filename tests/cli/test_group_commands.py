"""The consumer-group commands as typed (XGROUP, XREADGROUP [CLAIM],
XACK, XACKDEL, XNACK, XCLAIM, XAUTOCLAIM, XPENDING): each parsed and run
on a store in this process, as single-command mode runs it; their
replies and error texts, and the three PEL indexes (pel, cpel, ptime)
plus pel counters as stored.  These left tests/engine/test_storage_groups.py,
whose tier calls the engine's verbs (Txn) only."""
import pytest

from storage import codec
from tests.harness.commands import cmd
from tests.harness.stores import check_pel_indexes, consumers, dump, frozen_clock, group_meta, pel_view, rows

T0 = 1_700_000_000_000
LLONG_MAX = (1 << 63) - 1


@pytest.fixture
def clock(monkeypatch):
    return frozen_clock(monkeypatch, T0)


def setup(store, n=3, key="s", group="g"):
    for i in range(1, n + 1):
        cmd(store, "XADD", key, "%d-0" % i, "f", "v%d" % i)
    assert cmd(store, "XGROUP", "CREATE", key, group, "0") == "OK"


def read(store, consumer, *opts, key="s", group="g", id=">"):
    return cmd(store, "XREADGROUP", "GROUP", group, consumer, *opts, "STREAMS", key, id)


def ids_of(r, key="s"):
    return [e[0] for e in r[key]] if r else []


# ================================================================= XGROUP

def test_xgroup_create_duplicate_is_busygroup(store):
    setup(store)
    assert cmd(store, "XGROUP", "CREATE", "s", "g", "0") == {"error": "BUSYGROUP Consumer Group name already exists"}


def test_xgroup_create_missing_key_needs_mkstream(store):
    assert cmd(store, "XGROUP", "CREATE", "s", "g", "$") == {
        "error": "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to "
                 "use the MKSTREAM option to create an empty stream automatically."}
    assert cmd(store, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM") == "OK"
    assert cmd(store, "XLEN", "s") == 0
    assert group_meta(store, b"s", b"g").last_id == (0, 0)


def test_xgroup_create_entriesread_is_clamped_to_entries_added(store):
    setup(store, 3, group="x")
    cmd(store, "XGROUP", "CREATE", "s", "g", "0", "ENTRIESREAD", "99")
    assert group_meta(store, b"s", b"g").entries_read == 3
    assert cmd(store, "XGROUP", "CREATE", "s", "h", "0", "ENTRIESREAD", "-2") == {
        "error": "ERR value for ENTRIESREAD must be positive or -1"}


def test_xgroup_destroy_removes_pel_indexes_and_consumers(store):
    setup(store)
    read(store, "c")
    assert cmd(store, "XGROUP", "DESTROY", "s", "g") == 1
    assert cmd(store, "XGROUP", "DESTROY", "s", "g") == 0
    assert rows(store, b"pel") == rows(store, b"cpel") == rows(store, b"ptime") == rows(store, b"consumers") == []


def test_del_of_stream_removes_group_data(store):
    setup(store)
    read(store, "c")
    assert cmd(store, "DEL", "s") == 1
    for db in (b"keys", b"log", b"shapes", b"groups", b"consumers", b"pel", b"cpel", b"ptime"):
        assert rows(store, db) == [], db


def test_xgroup_createconsumer_and_delconsumer(store):
    setup(store)
    assert cmd(store, "XGROUP", "CREATECONSUMER", "s", "g", "c") == 1
    assert cmd(store, "XGROUP", "CREATECONSUMER", "s", "g", "c") == 0
    read(store, "c", "COUNT", "2")
    assert cmd(store, "XGROUP", "DELCONSUMER", "s", "g", "c") == 2
    assert cmd(store, "XPENDING", "s", "g") == [0, None, None, None]
    assert check_pel_indexes(store) == 0
    assert consumers(store, group_meta(store, b"s", b"g").gid) == {}
    assert cmd(store, "XGROUP", "DELCONSUMER", "s", "nog", "c") == {
        "error": "NOGROUP No such consumer group 'nog' for key name 's'"}


def test_xgroup_setid_accepts_dollar_and_nonstrict_ids(store):
    setup(store)
    assert cmd(store, "XGROUP", "SETID", "s", "g", "$") == "OK"
    assert group_meta(store, b"s", b"g").last_id == (3, 0)
    assert cmd(store, "XGROUP", "SETID", "s", "g", "-") == "OK"
    assert group_meta(store, b"s", b"g").last_id == (0, 0)


# ============================================================= XREADGROUP

def test_xreadgroup_new_entries_go_into_all_three_pel_indexes(store, clock):
    setup(store)
    r = read(store, "alice", "COUNT", "2")
    assert r == {"s": [["1-0", ["f", "v1"]], ["2-0", ["f", "v2"]]]}
    g = group_meta(store, b"s", b"g")
    assert (g.last_id, g.entries_read, g.pel_count) == ((2, 0), 2, 2)
    c = consumers(store, g.gid)[b"alice"]
    assert c.pel_count == 2 and c.active_time == T0 and c.seen_time == T0
    pel = rows(store, b"pel", codec.gid_prefix(g.gid))
    assert [(codec.id_from_pel_key(k), codec.decode_pending(v)) for k, v in pel] == [
        ((1, 0), (c.cid, T0, 1)), ((2, 0), (c.cid, T0, 1))]
    assert [k for k, _ in rows(store, b"cpel")] == [codec.cpel_key(g.gid, c.cid, (1, 0)),
                                                    codec.cpel_key(g.gid, c.cid, (2, 0))]
    assert [k for k, _ in rows(store, b"ptime")] == [codec.ptime_key(g.gid, T0, (1, 0)),
                                                     codec.ptime_key(g.gid, T0, (2, 0))]


def test_xreadgroup_noack_does_not_touch_the_pel(store):
    setup(store)
    assert ids_of(read(store, "c", "NOACK")) == ["1-0", "2-0", "3-0"]
    assert rows(store, b"pel") == rows(store, b"cpel") == rows(store, b"ptime") == []
    assert group_meta(store, b"s", b"g").last_id == (3, 0)


def test_xreadgroup_nothing_new_is_null_but_consumer_is_created(store):
    cmd(store, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    assert read(store, "c") is None
    assert b"c" in consumers(store, group_meta(store, b"s", b"g").gid)


def test_xreadgroup_history_read_bumps_delivery_but_not_of_deleted_entries(store, clock):
    setup(store)
    read(store, "c")
    cmd(store, "XDEL", "s", "2-0")
    clock.advance(100)
    r = read(store, "c", id="0")
    assert r == {"s": [["1-0", ["f", "v1"]], ["2-0", None], ["3-0", ["f", "v3"]]]}
    # redis-server: a deleted entry is shown as nil and not redelivered
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"c", 2), (2, 0): (b"c", 1), (3, 0): (b"c", 2)}
    check_pel_indexes(store)
    with store.env.begin() as t:
        g = group_meta(store, b"s", b"g")
        assert codec.decode_pending(t.get(codec.pel_key(g.gid, (1, 0)), db=store.dbs[b"pel"]))[1] == T0 + 100


def test_xreadgroup_history_of_other_consumer_is_empty(store):
    setup(store)
    read(store, "a")
    assert read(store, "b", id="0") == {"s": []}


def test_xreadgroup_errors(store):
    setup(store)
    assert cmd(store, "XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">") == {
        "error": "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"}
    assert read(store, "c", id="$")["error"].startswith("ERR The $ ID is meaningless")
    assert read(store, "c", id="+")["error"].startswith("ERR The + ID is meaningless")
    assert cmd(store, "XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s") == {
        "error": "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be specified."}
    assert cmd(store, "XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", "s", ">") == {
        "error": "ERR Missing GROUP option for XREADGROUP"}
    assert read(store, "c", "CLAIM", "x") == {"error": "ERR min-idle-time is not an integer or out of range"}
    assert read(store, "c", "CLAIM", "-1") == {"error": "ERR min-idle-time must be a positive integer"}
    assert rows(store, b"pel") == []


def test_xreadgroup_maxcount_caps_total_across_streams(store):
    for k in ("s1", "s2", "s3"):
        setup(store, 3, key=k)
    r = cmd(store, "XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "MAXCOUNT", "3",
            "STREAMS", "s1", "s2", "s3", ">", ">", ">")
    assert {k: [e[0] for e in v] for k, v in r.items()} == {"s1": ["1-0", "2-0"], "s2": ["1-0"]}
    # only what was delivered is pending / consumed
    assert group_meta(store, b"s2", b"g").last_id == (1, 0)
    assert group_meta(store, b"s3", b"g").last_id == (0, 0)
    assert check_pel_indexes(store) == 3


def test_xreadgroup_maxsize_delivers_first_entry_and_only_what_is_returned(store):
    cmd(store, "XADD", "s", "1-0", "f", "x" * 1000)
    cmd(store, "XADD", "s", "2-0", "f", "y")
    cmd(store, "XGROUP", "CREATE", "s", "g", "0")
    r = read(store, "c", "MAXSIZE", "10")
    assert ids_of(r) == ["1-0"]
    g = group_meta(store, b"s", b"g")
    assert g.last_id == (1, 0), "an entry cut by MAXSIZE must stay undelivered"
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"c", 1)}
    assert ids_of(read(store, "c")) == ["2-0"]


# ============================================================ XREADGROUP CLAIM

def test_claim_serves_idle_entries_first_as_four_element_entries(store, clock):
    setup(store, 3)
    read(store, "alice", "COUNT", "2")
    clock.advance(1000)
    cmd(store, "XADD", "s", "4-0", "f", "v4")
    r = read(store, "bob", "CLAIM", "500")
    assert r == {"s": [["1-0", ["f", "v1"], 1000, 1], ["2-0", ["f", "v2"], 1000, 1],
                       ["3-0", ["f", "v3"], 0, 0], ["4-0", ["f", "v4"], 0, 0]]}
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"bob", 2), (2, 0): (b"bob", 2),
                                           (3, 0): (b"bob", 1), (4, 0): (b"bob", 1)}
    g = group_meta(store, b"s", b"g")
    cs = consumers(store, g.gid)
    assert (cs[b"alice"].pel_count, cs[b"bob"].pel_count) == (0, 4)
    check_pel_indexes(store)


def test_claim_ignores_entries_not_yet_idle_enough(store, clock):
    setup(store, 2)
    read(store, "alice")
    clock.advance(100)
    assert read(store, "bob", "CLAIM", "500") is None
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"alice", 1), (2, 0): (b"alice", 1)}


def test_claim_longest_idle_first(store, clock):
    setup(store, 3)
    read(store, "a", id=">", *())
    clock.advance(10)
    cmd(store, "XCLAIM", "s", "g", "a", "0", "3-0", "IDLE", "5000")   # 3-0 now the oldest
    clock.advance(10)
    r = read(store, "b", "CLAIM", "0", "COUNT", "1")
    assert ids_of(r) == ["3-0"]


def test_claim_count_is_shared_between_claimed_and_new(store, clock):
    setup(store, 3)
    read(store, "a", "COUNT", "2")
    clock.advance(1000)
    r = read(store, "b", "CLAIM", "100", "COUNT", "2")
    assert ids_of(r) == ["1-0", "2-0"]
    assert group_meta(store, b"s", b"g").last_id == (2, 0)
    r = read(store, "b", "CLAIM", "100", "COUNT", "2")
    assert ids_of(r) == ["3-0"]


def test_claim_skips_deleted_entries_and_leaves_them_pending(store, clock):
    setup(store, 3)
    read(store, "a")
    cmd(store, "XDEL", "s", "1-0")
    clock.advance(1000)
    r = read(store, "b", "CLAIM", "100")
    assert ids_of(r) == ["2-0", "3-0"]
    assert pel_view(store, b"s", b"g")[(1, 0)] == (b"a", 1)
    check_pel_indexes(store)


def test_claim_serves_nacked_entries_first(store, clock):
    setup(store, 3)
    read(store, "a")
    clock.advance(1000)
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "1", "3-0") == 1
    r = read(store, "b", "CLAIM", "100")
    assert ids_of(r) == ["3-0", "1-0", "2-0"]
    assert r["s"][0][2] == clock.t and r["s"][0][3] == 1      # idle = now for NACKed
    check_pel_indexes(store)


def test_claim_applies_only_to_new_id_reads(store, clock):
    setup(store, 2)
    read(store, "a")
    clock.advance(1000)
    assert read(store, "b", "CLAIM", "100", id="0") == {"s": []}
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"a", 1), (2, 0): (b"a", 1)}


def test_claim_with_noack_still_keeps_claimed_entries_pending(store, clock):
    setup(store, 2)
    read(store, "a", "COUNT", "1")
    clock.advance(1000)
    r = read(store, "b", "CLAIM", "100", "NOACK")
    assert ids_of(r) == ["1-0", "2-0"]
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"b", 2)}


def test_claim_only_claimable_entries_when_nothing_new(store, clock):
    setup(store, 1)
    read(store, "a")
    clock.advance(1000)
    assert read(store, "b", "CLAIM", "1000") == {"s": [["1-0", ["f", "v1"], 1000, 1]]}


# =================================================================== XACK

def test_xack_removes_from_all_three_indexes(store):
    setup(store)
    read(store, "c")
    assert cmd(store, "XACK", "s", "g", "1-0", "3-0", "9-0") == 2
    assert pel_view(store, b"s", b"g") == {(2, 0): (b"c", 1)}
    assert check_pel_indexes(store) == 1


def test_xack_missing_group_is_zero_without_checking_ids(store):
    setup(store)
    assert cmd(store, "XACK", "s", "nog", "bad") == 0
    assert cmd(store, "XACK", "s", "g", "1-0", "bad") == {
        "error": "ERR Invalid stream ID specified as stream command argument"}


# ================================================================= XACKDEL

def two_groups(store):
    setup(store, 3, group="g1")
    cmd(store, "XGROUP", "CREATE", "s", "g2", "0")
    read(store, "c", group="g1")
    read(store, "c", group="g2")


def test_xackdel_missing_key_or_group_gives_minus_ones(store):
    assert cmd(store, "XACKDEL", "nokey", "g", "IDS", "2", "1-1", "x") == [-1, -1]
    setup(store)
    assert cmd(store, "XACKDEL", "s", "nog", "IDS", "2", "1-1", "2-2") == [-1, -1]


def test_xackdel_keepref_acks_and_deletes_keeping_other_groups_refs(store):
    two_groups(store)
    assert cmd(store, "XACKDEL", "s", "g1", "IDS", "2", "1-0", "9-0") == [1, -1]
    assert cmd(store, "XLEN", "s") == 2
    assert set(pel_view(store, b"s", b"g1")) == {(2, 0), (3, 0)}
    assert set(pel_view(store, b"s", b"g2")) == {(1, 0), (2, 0), (3, 0)}
    check_pel_indexes(store)


def test_xackdel_does_not_delete_entries_not_pending_in_this_group(store):
    setup(store)
    assert cmd(store, "XACKDEL", "s", "g", "IDS", "1", "1-0") == [-1]
    assert cmd(store, "XLEN", "s") == 3


def test_xackdel_delref_drops_all_groups_refs(store):
    two_groups(store)
    assert cmd(store, "XACKDEL", "s", "g1", "DELREF", "IDS", "1", "2-0") == [1]
    assert (2, 0) not in pel_view(store, b"s", b"g2")
    assert cmd(store, "XLEN", "s") == 2
    check_pel_indexes(store)


def test_xackdel_acked_keeps_entry_referenced_by_another_group(store):
    two_groups(store)
    assert cmd(store, "XACKDEL", "s", "g1", "ACKED", "IDS", "1", "1-0") == [2]
    assert cmd(store, "XLEN", "s") == 3
    assert (1, 0) not in pel_view(store, b"s", b"g1")
    assert cmd(store, "XACKDEL", "s", "g2", "ACKED", "IDS", "1", "1-0") == [1]
    assert cmd(store, "XLEN", "s") == 2
    check_pel_indexes(store)


def test_xackdel_acked_counts_undelivered_as_referenced(store):
    setup(store, 3, group="g1")
    cmd(store, "XGROUP", "CREATE", "s", "late", "0")
    read(store, "c", group="g1")
    assert cmd(store, "XACKDEL", "s", "g1", "ACKED", "IDS", "1", "1-0") == [2]


def test_xackdel_of_pending_but_deleted_entry_is_still_one(store):
    setup(store)
    read(store, "c")
    cmd(store, "XDEL", "s", "1-0")
    assert cmd(store, "XACKDEL", "s", "g", "IDS", "1", "1-0") == [1]
    assert (1, 0) not in pel_view(store, b"s", b"g")


def test_xackdel_invalid_id_changes_nothing(store):
    setup(store)
    read(store, "c")
    before = dump(store)
    assert cmd(store, "XACKDEL", "s", "g", "IDS", "2", "1-0", "x") == {
        "error": "ERR Invalid stream ID specified as stream command argument"}
    assert dump(store) == before


# =================================================================== XNACK

def nacked(store, mode, *extra, count_before=1):
    setup(store, 2)
    read(store, "c")
    return cmd(store, "XNACK", "s", "g", mode, "IDS", "1", "1-0", *extra)


def test_xnack_fail_keeps_count_and_unowns_entry(store):
    assert nacked(store, "FAIL") == 1
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"", 1), (2, 0): (b"c", 1)}
    g = group_meta(store, b"s", b"g")
    assert consumers(store, g.gid)[b"c"].pel_count == 1 and g.pel_count == 2
    check_pel_indexes(store)


def test_xnack_silent_decrements_and_floors_at_zero(store):
    assert nacked(store, "silent") == 1
    assert pel_view(store, b"s", b"g")[(1, 0)] == (b"", 0)
    assert cmd(store, "XNACK", "s", "g", "SILENT", "IDS", "1", "1-0") == 1
    assert pel_view(store, b"s", b"g")[(1, 0)] == (b"", 0)


def test_xnack_fatal_sets_llong_max(store):
    assert nacked(store, "FATAL") == 1
    assert pel_view(store, b"s", b"g")[(1, 0)] == (b"", LLONG_MAX)


def test_xnack_retrycount_overrides_mode(store):
    assert nacked(store, "FATAL", "RETRYCOUNT", "7") == 1
    assert pel_view(store, b"s", b"g")[(1, 0)] == (b"", 7)


def test_xnack_skips_ids_not_pending_unless_forced_and_existing(store):
    setup(store, 3)
    read(store, "c", "COUNT", "1")
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "2", "2-0", "9-0") == 0
    assert cmd(store, "XNACK", "s", "g", "FATAL", "IDS", "2", "2-0", "9-0", "FORCE") == 1
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"c", 1), (2, 0): (b"", LLONG_MAX)}
    assert group_meta(store, b"s", b"g").last_id == (1, 0)
    check_pel_indexes(store)


def test_xpending_shows_nacked_with_empty_consumer_and_idle_minus_one(store, clock):
    nacked(store, "FAIL")
    assert cmd(store, "XPENDING", "s", "g", "-", "+", "10")[0] == ["1-0", "", -1, 1]
    assert cmd(store, "XPENDING", "s", "g", "IDLE", "999999", "-", "+", "10") == [["1-0", "", -1, 1]]
    assert cmd(store, "XPENDING", "s", "g", "-", "+", "10", "c") == [cmd(store, "XPENDING", "s", "g", "-", "+",
                                                                          "10")[1]]
    assert cmd(store, "XPENDING", "s", "g") == [2, "1-0", "2-0", [["c", "1"]]]


def test_nacked_entries_are_excluded_from_history_reads(store):
    nacked(store, "FAIL")
    assert ids_of(read(store, "c", id="0")) == ["2-0"]


def test_xclaim_ignores_min_idle_for_nacked_entries(store, clock):
    nacked(store, "FAIL")
    r = cmd(store, "XCLAIM", "s", "g", "d", "999999", "1-0")
    assert r == [["1-0", ["f", "v1"]]]
    assert pel_view(store, b"s", b"g")[(1, 0)] == (b"d", 2)
    check_pel_indexes(store)


def test_xinfo_full_counts_nacked_entries(store):
    nacked(store, "FAIL")
    g = cmd(store, "XINFO", "STREAM", "s", "FULL")["groups"][0]
    assert g["pel-count"] == 2 and g["nacked-count"] == 1
    assert g["pending"][0] == ["1-0", "", 0, 1]
    assert g["consumers"][0]["pel-count"] == 1


def test_xnack_errors(store):
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0") == {
        "error": "NOGROUP No such key 's' or consumer group 'g'"}
    setup(store)
    assert cmd(store, "XNACK", "s", "g", "LOUD", "IDS", "1", "1-0") == {"error": "ERR mode must be SILENT, FAIL, or FATAL"}
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "0", "1-0") == {"error": "ERR numids must be a positive integer"}
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "3", "1-0") == {"error": "ERR number of IDs doesn't match numids"}
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "-1") == {
        "error": "ERR Invalid RETRYCOUNT value, must be >= 0"}
    assert cmd(store, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-0", "BOGUS") == {
        "error": "ERR Unrecognized XNACK option 'BOGUS'"}
    assert cmd(store, "XNACK", "s", "g", "FAIL", "FORCE", "RETRYCOUNT", "1") == {
        "error": "ERR syntax error, expected IDS keyword"}


# ======================================================== XCLAIM, XAUTOCLAIM

def test_xclaim_moves_owner_in_all_indexes(store, clock):
    setup(store)
    read(store, "a")
    clock.advance(500)
    assert cmd(store, "XCLAIM", "s", "g", "b", "100", "1-0", "2-0", "JUSTID") == ["1-0", "2-0"]
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"b", 1), (2, 0): (b"b", 1), (3, 0): (b"a", 1)}
    cs = consumers(store, group_meta(store, b"s", b"g").gid)
    assert (cs[b"a"].pel_count, cs[b"b"].pel_count) == (1, 2)
    check_pel_indexes(store)


def test_xclaim_of_deleted_entry_drops_it_from_the_pel(store, clock):
    setup(store)
    read(store, "a")
    cmd(store, "XDEL", "s", "1-0")
    assert cmd(store, "XCLAIM", "s", "g", "b", "0", "1-0") == []
    assert (1, 0) not in pel_view(store, b"s", b"g")
    check_pel_indexes(store)


def test_xautoclaim_reports_deleted_ids_and_cleans_them(store, clock):
    setup(store)
    read(store, "a")
    cmd(store, "XDEL", "s", "2-0")
    clock.advance(100)
    assert cmd(store, "XAUTOCLAIM", "s", "g", "b", "50", "0-0") == [
        "0-0", [["1-0", ["f", "v1"]], ["3-0", ["f", "v3"]]], ["2-0"]]
    assert pel_view(store, b"s", b"g") == {(1, 0): (b"b", 2), (3, 0): (b"b", 2)}
    check_pel_indexes(store)


def test_xautoclaim_count_and_cursor(store, clock):
    setup(store)
    read(store, "a")
    assert cmd(store, "XAUTOCLAIM", "s", "g", "b", "0", "0-0", "COUNT", "1", "JUSTID") == ["2-0", ["1-0"], []]
    assert cmd(store, "XAUTOCLAIM", "s", "g", "b", "0", "0", "COUNT", "0") == {"error": "ERR COUNT must be > 0"}


def test_xpending_summary_and_extended(store, clock):
    setup(store)
    read(store, "alice", "COUNT", "2")
    read(store, "bob")
    clock.advance(8)
    assert cmd(store, "XPENDING", "s", "g") == [3, "1-0", "3-0", [["alice", "2"], ["bob", "1"]]]
    assert cmd(store, "XPENDING", "s", "g", "-", "+", "10", "bob") == [["3-0", "bob", 8, 1]]
    assert cmd(store, "XPENDING", "s", "g", "-", "+", "10", "nobody") == []
    assert cmd(store, "XPENDING", "s", "nog") == {"error": "NOGROUP No such key 's' or consumer group 'nog'"}
