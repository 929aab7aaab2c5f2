"""storage.codec: key layouts and record encodings."""
import hashlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import codec

U64 = (1 << 64) - 1
seqs = st.one_of(st.integers(0, U64), st.integers(0xFFFFFF00, 0x1000000FF),
                 st.sampled_from([0, 0xFFFFFFFE, 0xFFFFFFFF, 0x100000000, U64]))
ids = st.tuples(st.integers(0, U64), seqs)
u64 = st.integers(0, U64)


# ------------------------------------------------------------ entry keys

def test_entry_key_is_sid_then_ms_then_a_four_byte_seq_big_endian():
    k = codec.entry_key(7, (1, 2))
    assert k == struct.pack(">QQI", 7, 1, 2)
    assert len(k) == 20


def test_a_sequence_number_of_0xffffffff_or_more_widens_the_key():
    assert codec.entry_key(7, (1, 0xFFFFFFFE)) == struct.pack(">QQI", 7, 1, 0xFFFFFFFE)
    assert codec.entry_key(7, (1, 0xFFFFFFFF)) == struct.pack(">QQIQ", 7, 1, 0xFFFFFFFF, 0xFFFFFFFF)
    assert codec.entry_key(7, (1, U64)) == struct.pack(">QQIQ", 7, 1, 0xFFFFFFFF, U64)


def test_entry_key_round_trips_through_id_from_entry_key():
    assert codec.id_from_entry_key(codec.entry_key(3, (U64, U64))) == (U64, U64)
    assert codec.id_from_entry_key(codec.entry_key(3, (0, 0))) == (0, 0)


@settings(max_examples=500)
@given(u64, ids, ids)
def test_entry_key_byte_order_equals_id_order(sid, a, b):
    ka, kb = codec.entry_key(sid, a), codec.entry_key(sid, b)
    assert (ka < kb) == (a < b)
    assert (ka == kb) == (a == b)


@given(u64, ids)
def test_entry_key_round_trip_property(sid, i):
    k = codec.entry_key(sid, i)
    assert codec.id_from_entry_key(k) == i
    assert k.startswith(codec.sid_prefix(sid))


@given(st.integers(0, U64 - 1), ids, ids)
def test_entries_of_one_stream_sort_before_the_next_streams(sid, a, b):
    assert codec.entry_key(sid, a) < codec.entry_key(sid + 1, b)


@settings(max_examples=300)
@given(u64, ids, ids)
def test_pel_key_byte_order_equals_id_order(gid, a, b):
    assert (codec.pel_key(gid, a) < codec.pel_key(gid, b)) == (a < b)
    assert codec.id_from_pel_key(codec.pel_key(gid, a)) == a


@settings(max_examples=300)
@given(u64, u64, ids, ids)
def test_cpel_key_orders_by_id_within_one_consumer(gid, cid, a, b):
    ka, kb = codec.cpel_key(gid, cid, a), codec.cpel_key(gid, cid, b)
    assert (ka < kb) == (a < b)
    assert codec.id_from_cpel_key(ka) == a
    assert ka.startswith(codec.cpel_prefix(gid, cid))


@settings(max_examples=300)
@given(u64, u64, u64, ids, ids)
def test_ptime_key_orders_by_delivery_time_then_id(gid, t1, t2, a, b):
    k1, k2 = codec.ptime_key(gid, t1, a), codec.ptime_key(gid, t2, b)
    assert (k1 < k2) == ((t1, a) < (t2, b))
    assert codec.ptime_from_key(k1) == (t1, a)


# ------------------------------------------------------------- name keys

def test_short_name_key_is_zero_byte_plus_name():
    assert codec.name_key(b"events") == b"\x00events"
    assert codec.name_from_key(b"\x00events") == b"events"
    assert not codec.name_is_hashed(codec.name_key(b"events"))


def test_empty_name_has_a_key():
    assert codec.name_key(b"") == b"\x00"
    assert codec.name_from_key(b"\x00") == b""


def test_name_at_the_short_limit_is_kept_verbatim():
    n = b"x" * codec.SHORT_NAME
    assert codec.name_key(n) == b"\x00" + n


def test_long_name_key_is_one_byte_plus_sha256():
    n = b"x" * (codec.SHORT_NAME + 1)
    k = codec.name_key(n)
    assert k == b"\x01" + hashlib.sha256(n).digest()
    assert codec.name_is_hashed(k)
    assert codec.name_from_key(k) is None


def test_name_keys_fit_lmdb_key_limit_for_any_length():
    for n in (0, 1, 399, 400, 401, 511, 10000, 1 << 20):
        k = codec.name_key(b"a" * n)
        assert len(k) <= 511 - 24   # room for the longest prefix used with it


@given(st.binary(max_size=1000), st.binary(max_size=1000))
def test_distinct_names_have_distinct_keys(a, b):
    if a != b:
        assert codec.name_key(a) != codec.name_key(b)


def test_group_and_consumer_keys_are_prefixed_by_their_owner_number():
    assert codec.group_key(5, b"g") == struct.pack(">Q", 5) + b"\x00g"
    assert codec.consumer_key(9, b"alice") == struct.pack(">Q", 9) + b"\x00alice"
    assert codec.group_key(5, b"g").startswith(codec.sid_prefix(5))


def _iid_key(sid, pid, iid):
    p = codec.idmp_pid_prefix(sid, pid)
    return codec.idmp_iid_key(p, codec.idmp_iid_part(p, iid))


def test_idmp_keys_of_one_producer_share_its_prefix_and_producers_do_not_collide():
    a = _iid_key(1, b"p", b"i1")
    assert a.startswith(codec.idmp_pid_prefix(1, b"p"))
    # "p" + iid "x" must not look like producer "px"
    assert not _iid_key(1, b"p", b"x").startswith(codec.idmp_pid_prefix(1, b"px"))
    assert not _iid_key(1, b"px", b"").startswith(codec.idmp_pid_prefix(1, b"p") + b"\x00")


@pytest.mark.parametrize("plen,ilen", [(400, 400), (400, 98), (400, 99), (10, 400), (401, 401), (5000, 5000)])
def test_idmp_keys_always_fit_lmdbs_key_limit(plen, ilen):
    p = codec.idmp_pid_prefix(1, b"p" * plen)
    assert len(codec.idmp_iid_key(p, codec.idmp_iid_part(p, b"i" * ilen))) <= 511
    assert len(codec.idmp_order_key(p, (2 ** 64 - 1, 2 ** 64 - 1))) <= 511
    assert len(codec.idmp_count_key(p)) <= 511


def test_idmp_iid_key_is_the_same_for_the_same_producer_and_iid():
    p = codec.idmp_pid_prefix(7, b"p" * 400)
    assert codec.idmp_iid_part(p, b"x" * 300) == codec.idmp_iid_part(p, b"x" * 300)
    assert codec.idmp_iid_part(p, b"x" * 300) != codec.idmp_iid_part(p, b"y" * 300)


# ---------------------------------------------------------------- records

fields = st.lists(st.binary(max_size=20), max_size=10).map(lambda l: l + l[:len(l) % 2])


@given(ids, fields)
def test_entry_value_round_trips_with_field_order_and_duplicates(i, f):
    f = f + [b"dup", b"1", b"dup", b"2"]
    t = b"%d-%d" % i
    assert codec.decode_entry(codec.encode_entry(t, f)) == [t, f]


def test_entry_value_keeps_non_utf8_bytes():
    f = [b"\xff\xfe", b"\x00", b"", b"caf\xc3\xa9"]
    assert codec.decode_entry(codec.encode_entry(b"1-1", f)) == [b"1-1", f]


@given(u64, st.integers(0, (1 << 63) - 1), ids, ids, st.booleans(),
       st.one_of(st.none(), st.binary(min_size=401, max_size=500)))
def test_stream_record_round_trips(sid, added, last, maxdel, cfg, name):
    m = codec.StreamMeta(sid, name)
    m.length = 3
    m.last_id = last
    m.max_deleted = maxdel
    m.entries_added = added
    m.idmp_duration = 7
    m.idmp_maxsize = 9
    m.idmp_stats = [1, 2, 3, 4]
    m.idmp_cfg = cfg
    d = codec.StreamMeta.decode(m.encode())
    for f in codec.StreamMeta.__slots__:
        assert getattr(d, f) == getattr(m, f), f


def test_new_stream_record_has_redis_defaults():
    m = codec.StreamMeta(1)
    assert (m.length, m.last_id, m.max_deleted, m.entries_added) == (0, (0, 0), (0, 0), 0)
    assert (m.idmp_duration, m.idmp_maxsize) == (100, 100)


@given(u64, st.binary(max_size=50), ids, st.integers(-1, 1 << 62))
def test_group_record_round_trips(gid, name, last, er):
    g = codec.GroupMeta(gid, name, last, er)
    g.pel_count = 17
    d = codec.GroupMeta.decode(g.encode())
    assert (d.gid, d.name, d.last_id, d.entries_read, d.pel_count) == (gid, name, last, er, 17)


@given(u64, st.binary(max_size=50), u64, st.integers(-1, 1 << 62))
def test_consumer_record_round_trips(cid, name, now, active):
    c = codec.ConsumerMeta(cid, name, now)
    assert c.active_time == -1
    c.active_time = active
    c.pel_count = 4
    d = codec.ConsumerMeta.decode(c.encode())
    assert (d.cid, d.name, d.seen_time, d.active_time, d.pel_count) == (cid, name, now, active, 4)


@given(u64, u64, st.integers(0, (1 << 63) - 1))
def test_pending_record_round_trips(cid, t, n):
    assert codec.decode_pending(codec.encode_pending(cid, t, n)) == (cid, t, n)


def test_database_set_is_fixed_and_named():
    assert set(codec.DATABASES) == {b"keys", b"log", b"shapes", b"groups", b"consumers", b"cnames", b"pel", b"cpel",
                                    b"ptime", b"idmp", b"meta", b"nodes"}


def test_records_decode_with_defaults_for_fields_they_lack():
    """Format 2: a field added in a later version needs no migration."""
    m = codec.StreamMeta.decode(codec.packb({"sid": 7}))
    assert (m.sid, m.length, m.last_id, m.idmp_duration, m.idmp_stats, m.name) == (7, 0, (0, 0), 100, [0, 0, 0, 0],
                                                                                   None)
    g = codec.GroupMeta.decode(codec.packb({"gid": 3, "name": b"g"}), sid=9)
    assert (g.gid, g.name, g.last_id, g.entries_read, g.pel_count, g.sid) == (3, b"g", (0, 0), -1, 0, 9)
    c = codec.ConsumerMeta.decode(codec.packb({"cid": 4, "name": b"c"}))
    assert (c.cid, c.name, c.seen_time, c.active_time, c.pel_count) == (4, b"c", 0, -1, 0)


def test_format_1_records_decode_to_the_same_values():
    m = codec.StreamMeta.decode_v1(codec.packb([5, 2, 9, 1, 3, 0, 4, 60, 7, [1, 2, 3, 4], True, None]))
    assert (m.sid, m.length, m.last_id, m.max_deleted, m.entries_added) == (5, 2, (9, 1), (3, 0), 4)
    assert (m.idmp_duration, m.idmp_maxsize, m.idmp_stats, m.idmp_cfg) == (60, 7, [1, 2, 3, 4], True)
    g = codec.GroupMeta.decode_v1(codec.packb([3, b"g", 5, 6, -1, 2]))
    assert (g.gid, g.name, g.last_id, g.entries_read, g.pel_count) == (3, b"g", (5, 6), -1, 2)
    c = codec.ConsumerMeta.decode_v1(codec.packb([4, b"c", 10, -1, 1]))
    assert (c.cid, c.name, c.seen_time, c.active_time, c.pel_count) == (4, b"c", 10, -1, 1)
    assert codec.v1_cname_index(codec.U64.pack(3) + b"\x02" + codec.U64.pack(4)) == (3, 4)
    assert codec.v1_cname_index(codec.consumer_key(3, b"c")) is None
