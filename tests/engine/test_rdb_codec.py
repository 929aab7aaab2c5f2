"""Redis's own serialization (issue 26, items 7 and 8) through the engine:
the codec (storage.codec.rdb: CRC-64, LZF, lengths and strings,
listpacks), DUMP / RESTORE on a store (storage.verbs.serialized), and RDB
files written and read by storage.ops.rdbfile.  The payloads marked
"redis-server 7.0.15" were made by one (DUMP), so these tests hold the
format without a server; tests/compat/test_dump_restore_vs_redis.py and
tests/cli/test_rdb_files.py check against a live one; RESTORE's
arguments as typed, in Redis's order of checks:
tests/cli/test_restore_command.py."""
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.codec import rdb as R
from storage.codec.keys import listpack_int
from storage.errors import RedisError
from storage.ids import MAX_ID, MIN_ID
from storage.options import (
    AddOptions,
    ClaimOptions,
    GroupOptions,
    IdsOptions,
    NackOptions,
    RangeOptions,
    ReadOptions,
    RestoreOptions,
    StreamInfoOptions,
    TrimOptions,
)
from tests.harness.stores import add, read, write

# redis-server 7.0.15, DUMP of SET a ("abc" * 100), SET b ("a" * 5000), SET c (200 words): LZF strings
LZF_A = bytes.fromhex("00c30e412c0361626361e0ff02e115070162630a00d25733cec044e12b")
LZF_B = bytes.fromhex("00c33f5388016161e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0"
                      "ff00e0ff00e0ff00e0ff00e0ff00e0ff00e0eb000161610a0033b8160147ed814c")
LZF_C_TEXT = " ".join("word%d" % (i % 37) for i in range(200)).encode()
LZF_C = bytes.fromhex(
    "00c340c1453b06776f726430207720050031600500326005003360050034600500356005003660050037600500386005003960050031"
    "a03c803d0031803e0031803f0031804000318041003180420031804300318044003180450032804500328045003280450032804500"
    "328045003280450032804500328045003280450032804500338045003380450033804500338045003380450033804500338045802f"
    "802ea02d60d4802b802a8029806e806d806ce0fff88137e1fff18233e2ffea832fe3cde30131340a0060b05f468c484016")

# redis-server 7.0.15: XADD s 1-1 .. 1-7 f <i> name n<i>, XADD s 2-0 other x, XDEL s 1-1 1-4,
# XGROUP CREATE s g 0, XREADGROUP GROUP g alice COUNT 2 STREAMS s >, XCLAIM s g bob 0 1-2,
# XGROUP CREATECONSUMER s g carol, XGROUP CREATE s h $; DUMP s (its listpack LZF-compressed)
STREAM_70 = bytes.fromhex(
    "13011000000000000000010000000000000001c3407c408f088f000000370006010220010d816602846e616d650500010301002001"
    "060101826e310305201a400b0002200d0032a00d0002202102826e33200d402902030104200d0034200d402902040105200d0035a0"
    "0d02050106200d0036a00d02060107200d0037200d405111dfff020101856f74686572068178020601ff06020001020104080201670"
    "10381ffffffffffffffff0200000000000000010000000000000002339f5016a20100000200000000000000010000000000000003"
    "339f5016a2010000010305616c696365339f5016a2010000010000000000000001000000000000000303626f62339f5016a201000"
    "00100000000000000010000000000000002056361726f6c339f5016a2010000000168020081ffffffffffffffff00000a004678a7"
    "e32e5af35f")
T70 = 1795670712115          # the delivery and seen times in it

# redis-server 7.0.15: XADD events 1700000000000-0 user alice action login; DUMP events
EVENTS_70 = bytes.fromhex(
    "1301100000018bcfe56800000000000000000033330000000c0001010001020184757365720586616374696f6e0700010201000100"
    "0185616c69636506856c6f67696e060501ff01810000018bcfe5680000810000018bcfe5680000000001000a0070c3c490592bd98d")


def dump(store, name):
    """DUMP: the payload, or None."""
    return read(store, lambda tx: tx.dump_value(name))


def restore(store, name, payload, **opts):
    """RESTORE with RestoreOptions(**opts) (no TTL, no REPLACE by default)."""
    return write(store, lambda tx: tx.restore_value(name, payload, RestoreOptions(**opts)))


def length(store, name):
    return read(store, lambda tx: tx.length(name))


def exists(store, name):
    return read(store, lambda tx: tx.exists([name]))


def read_group(store, name, group, consumer, count=0):
    opts = ReadOptions(keys=(name,), ids=(b">",), count=count, group=group, consumer=consumer)
    return write(store, lambda tx: tx.read_group(opts))


def records(store, name, active=True):
    """Everything stream ``name`` holds (storage.verbs.dump), with the
    consumers' active-time made their seen-time unless ``active``
    (Redis 7.0's type has no active-time: RESTORE takes the seen-time)."""
    out = []
    for r in store.run(lambda tx: list(tx.dump(name))):
        if r[0] == "consumer" and not active:
            r = (r[0], r[1], r[2], r[2])
        out.append(r)
    return out


def nodes(store, name, body=True):
    def get(tx):
        from storage.verbs.serialized import _nodes  # noqa: F401 (the Node class)
        return tx._read(lambda p: [(n.master, n.live, n.deleted, n.last, n.names) + ((n.body,) if body else ())
                                   for n in p.log.node_list(p.streams.get(name))])
    return store.run(get)


def everything(store):
    """Every stream's records and nodes: a store changed by nothing compares equal."""
    names = store.run(lambda tx: tx.stream_names())
    return [(n, records(store, n), nodes(store, n)) for n in names]


# ===================================================================== codec

def test_crc64_is_redis_jones_crc():
    assert R.rdb_crc64(b"123456789") == 0xE9C6D914C4B8D9CA          # crc64.c's own test
    data = bytes(range(256)) * 3 + b"tail"
    assert R.rdb_crc64(data[100:], R.rdb_crc64(data[:100])) == R.rdb_crc64(data)
    assert R.rdb_payload_valid(STREAM_70) and R.rdb_payload_valid(EVENTS_70) and R.rdb_payload_valid(LZF_A)


@pytest.mark.parametrize("payload,text", [(LZF_A, b"abc" * 100), (LZF_B, b"a" * 5000), (LZF_C, LZF_C_TEXT)])
def test_lzf_strings_of_redis_read_back(payload, text):
    r = R.rdb_payload_reader(payload)
    assert r.byte() == R.RDB_TYPE_STRING
    assert r.string() == text


def test_lzf_refuses_what_lzf_d_refuses():
    with pytest.raises(R.RdbError):
        R.rdb_lzf_decompress(b"\x20\x05", 10)              # a back reference before the start
    with pytest.raises(R.RdbError):
        R.rdb_lzf_decompress(b"\x05ab", 6)                 # a literal run past the end
    with pytest.raises(R.RdbError):
        R.rdb_lzf_decompress(b"\x01ab", 3)                 # shorter than announced
    with pytest.raises(R.RdbError):
        R.rdb_lzf_decompress(b"\x00a\xe0", 300)            # ends inside a back reference
    assert R.rdb_lzf_decompress(b"\x00a\xe0\x0b\x00", 21) == b"a" * 21     # long, overlapping


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_lengths_round_trip(n):
    r = R.RdbReader(R.rdb_len(n))
    assert r.length() == n and r.at_end()


@given(st.one_of(st.binary(max_size=40), st.integers(-(1 << 40), 1 << 40).map(lambda v: str(v).encode())))
def test_strings_round_trip_with_redis_integer_encoding(b):
    enc = R.rdb_string(b)
    assert R.RdbReader(enc).string() == b
    if b in (b"0", b"127", b"-128"):
        assert len(enc) == 2 and enc[0] == 0xC0                   # INT8, as rdbTryIntegerEncoding


ELEMENT = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.binary(max_size=70),
                    st.binary(min_size=4090, max_size=4100))


def _norm(v):
    if isinstance(v, bytes):
        i = listpack_int(v)
        return i if i is not None else v
    return v


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ELEMENT, max_size=12))
def test_listpacks_round_trip(elements):
    blob = R.rdb_listpack(elements)
    assert [v for v, _ in R.rdb_listpack_items(blob)] == [_norm(e) for e in elements]
    assert sum(size for _, size in R.rdb_listpack_items(blob)) == len(blob) - 7


@settings(max_examples=150)
@given(st.lists(st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.binary(max_size=70)), min_size=1, max_size=8),
       st.data())
def test_a_damaged_listpack_is_refused_or_reads_as_another(elements, data):
    blob = bytearray(R.rdb_listpack(elements))
    i = data.draw(st.integers(0, len(blob) - 1))
    blob[i] ^= data.draw(st.integers(1, 255))
    try:
        R.rdb_listpack_items(bytes(blob))
    except R.RdbError:
        pass


@settings(max_examples=300)
@given(st.lists(st.one_of(st.integers(-3, 8), st.sampled_from([b"f", b"g", b"", b"x" * 70, 1 << 62, -(1 << 63)])),
                max_size=24))
def test_any_stream_listpack_is_read_or_refused(tail):
    """rdb_stream_node on arbitrary elements after a plausible master
    entry: a node, or RdbError -- never another exception."""
    for head in ([1, 0, 1, b"f", 0], [2, 1, 2, b"f", b"g", 0], []):
        try:
            R.rdb_stream_node((5, 5), R.rdb_listpack(head + tail))
        except R.RdbError:
            pass


# =========================================================== RESTORE of Redis

def test_restore_of_a_redis_7_0_payload_keeps_everything(store):
    restore(store, b"s", STREAM_70)
    assert length(store, b"s") == 6
    recs = records(store, b"s")
    meta = recs[0][1]
    assert (meta["length"], meta["last-id"], meta["max-deleted-id"], meta["entries-added"]) == (6, (2, 0), (1, 4), 8)
    assert [r[1] for r in recs if r[0] == "entry"] == [(1, 2), (1, 3), (1, 5), (1, 6), (1, 7), (2, 0)]
    groups = [r for r in recs if r[0] != "entry" and r[0] != "stream"]
    assert groups == [
        ("group", b"g", (1, 3), -1),
        ("consumer", b"alice", T70, T70), ("pending", (1, 3), T70, 1),
        ("consumer", b"bob", T70, T70), ("pending", (1, 2), T70, 2),
        ("consumer", b"carol", T70, T70),
        ("group", b"h", (2, 0), -1)]
    # the listpack kept: one node from 1-1, six live entries and the two deleted, last 2-0
    assert nodes(store, b"s", body=False) == [((1, 1), 6, 2, (2, 0), (b"f", b"name"))]


def test_dump_is_byte_for_byte_what_redis_7_0_dumps(store):
    add(store, b"events", (1700000000000, 0), [b"user", b"alice", b"action", b"login"])
    assert dump(store, b"events") == EVENTS_70
    restore(store, b"again", EVENTS_70)
    assert dump(store, b"again") == EVENTS_70


def test_dump_of_a_missing_key_is_nil(store):
    assert dump(store, b"nosuch") is None


# ================================================================ xs to xs

def build(store, name, big=False):
    """A stream with most of what a stream holds."""
    n = 260 if big else 12
    for i in range(1, n + 1):
        if i % 9 == 0:
            add(store, name, (1000 + i // 5, i), [b"other", b"%d" % (i * 12345), b"extra", b"-%d" % i])
        else:
            add(store, name, (1000 + i // 5, i), [b"f", b"%d" % i, b"g", b"v" * (i % 20)])
    # the first entry and one in the middle
    write(store, lambda tx: tx.delete_entries(name, IdsOptions(ids=((1000, 1), (1001, 5)), given=2)))
    write(store, lambda tx: tx.create_group(name, b"g", GroupOptions(start=(0, 0))))
    write(store, lambda tx: tx.create_group(name, b"empty", GroupOptions(start=b"$")))
    write(store, lambda tx: tx.create_group(name, b"late", GroupOptions(start=(0, 0), entries_read=3)))
    read_group(store, name, b"g", b"alice", 3)
    read_group(store, name, b"g", b"bob", 2)
    for _ in range(2):                  # delivery count 2, then 3
        write(store, lambda tx: tx.claim(name, b"g", b"bob", ClaimOptions(min_idle=0, ids=((1000, 2),))))
    write(store, lambda tx: tx.create_consumer(name, b"g", b"idle"))
    if big:
        write(store, lambda tx: tx.delete_entries(name, IdsOptions(ids=((1000 + 200 // 5, 200),), given=1)))


@pytest.mark.parametrize("big", [False, True])
def test_dump_and_restore_keep_a_stream(store, big):
    build(store, b"s", big)
    payload = dump(store, b"s")
    assert payload[:1] == b"\x13" and payload[-10:-8] == b"\x0a\x00"     # type 19, RDB version 10
    restore(store, b"t", payload)
    assert records(store, b"t") == records(store, b"s", active=False)
    assert nodes(store, b"t", body=False) == nodes(store, b"s", body=False)
    assert len(nodes(store, b"s")) > (2 if big else 0)
    assert dump(store, b"t") == payload
    # both go on the same way: the next entries fill the same nodes
    for name in (b"s", b"t"):
        for i in range(30):
            add(store, name, (5000, i), [b"k", b"%d" % i])
        write(store, lambda tx: tx.trim(name, TrimOptions("maxlen", 50, approx=True, limit=None)))
    assert length(store, b"s") == length(store, b"t")
    assert nodes(store, b"t", body=False) == nodes(store, b"s", body=False)



def test_dump_for_redis_7_2_carries_each_consumers_active_time(store):
    """The replica's DUMP to Redis 7.2 and later (and Valkey): type 21 in
    an RDB version 11 payload, whose consumers hold their active-time
    (-1 for one never active), so a restore keeps everything."""
    build(store, b"s")
    payload = read(store, lambda tx: tx.dump_value(b"s", True))
    assert payload[:1] == b"\x15" and payload[-10:-8] == b"\x0b\x00"     # type 21, RDB version 11
    restore(store, b"t", payload)
    assert records(store, b"t") == records(store, b"s")
    consumers = {r[1]: r for r in records(store, b"t") if r[0] == "consumer"}
    assert consumers[b"idle"][3] == -1 and consumers[b"alice"][3] > 0
    assert nodes(store, b"t", body=False) == nodes(store, b"s", body=False)
    assert read(store, lambda tx: tx.dump_value(b"t", True)) == payload
    assert dump(store, b"t") == dump(store, b"s")                          # and type 19 as before

def test_an_empty_stream_with_groups(store):
    write(store, lambda tx: tx.create_group(b"e", b"g", GroupOptions(start=b"$", mkstream=True)))
    write(store, lambda tx: tx.create_consumer(b"e", b"g", b"c"))
    add(store, b"e2", (5, 5), [b"a", b"b"])
    write(store, lambda tx: tx.delete_entries(b"e2", IdsOptions(ids=((5, 5),), given=1)))
    for name in (b"e", b"e2"):
        restore(store, name + b"-copy", dump(store, name))
        assert records(store, name + b"-copy") == records(store, name, active=False)
    assert nodes(store, b"e2-copy") == []


def test_dump_refuses_nacked_entries_rather_than_drop_them(store):
    build(store, b"s")
    write(store, lambda tx: tx.nack(b"s", b"g", NackOptions(mode="fail", ids=((1000, 3),))))
    with pytest.raises(RedisError) as e:
        dump(store, b"s")
    assert "NACKed" in e.value.text


def test_idmp_history_is_not_carried(store):
    write(store, lambda tx: tx.add(b"s", [b"f", b"x"], AddOptions(idmp_pid=b"p", idmp_iid=b"i1")))
    restore(store, b"t", dump(store, b"s"))
    assert [r for r in records(store, b"t") if r[0] == "iid"] == []
    assert [r for r in records(store, b"s") if r[0] == "iid"] != []


# ============================================================ RESTORE's rules

def test_restore_options(store):
    build(store, b"s")
    good = dump(store, b"s")
    add(store, b"t", (1, 1), [b"a", b"b"])
    restore(store, b"t", good, replace=True, absttl=True, idletime=100)    # IDLETIME: checked, then unused
    assert records(store, b"t") == records(store, b"s", active=False)
    restore(store, b"u", good, freq=255, replace=True)
    assert exists(store, b"u") == 1
    restore(store, b"t", good, ttl=1, absttl=True, replace=True)          # expired already: deleted
    assert exists(store, b"t") == 0
    restore(store, b"t", good, ttl=1000, absttl=True)                     # not made
    assert exists(store, b"t") == 0


def test_restore_with_a_ttl_sets_it(store):
    good = R.rdb_dump_payload(EVENTS_70[:-10])
    restore(store, b"t", good, ttl=100000)
    assert 99000 <= read(store, lambda tx: tx.expire_time(b"t") - tx.now()) <= 100000
    restore(store, b"u", good, ttl=99999999999999, absttl=True)
    assert read(store, lambda tx: tx.expire_time(b"u")) == 99999999999999
    restore(store, b"v", good)
    assert read(store, lambda tx: tx.expire_time(b"v")) == -1


# ========================================================= other producers

def _restream(payload, rdbtype):
    """The stream of a type-19 ``payload`` re-encoded as type 15 (Redis 5
    and 6) or 21 (Redis 7.2+, each consumer's active-time its seen-time
    plus 7), framing only: what those versions DUMP."""
    r = R.rdb_payload_reader(payload)
    assert r.byte() == 19
    out = [bytes((rdbtype,))]
    n = r.length()
    out.append(R.rdb_len(n))
    for _ in range(n):
        out += [R.rdb_string(r.string()), R.rdb_string(r.string())]
    lens = [r.length() for _ in range(8)]          # length, last id, first id, max-deleted id, entries-added
    out += [R.rdb_len(v) for v in (lens[:3] if rdbtype == 15 else lens)]
    ng = r.length()
    out.append(R.rdb_len(ng))
    for _ in range(ng):
        out += [R.rdb_string(r.string()), R.rdb_len(r.length()), R.rdb_len(r.length())]
        read = r.length()
        if rdbtype != 15:
            out.append(R.rdb_len(read))
        npel = r.length()
        out.append(R.rdb_len(npel))
        for _ in range(npel):
            out += [r.read(16), r.read(8), R.rdb_len(r.length())]
        nc = r.length()
        out.append(R.rdb_len(nc))
        for _ in range(nc):
            out.append(R.rdb_string(r.string()))
            seen = r.ms_time()
            out.append(R.rdb_ms_time(seen))
            if rdbtype == 21:
                out.append(R.rdb_ms_time(seen + 7))
            k = r.length()
            out += [R.rdb_len(k)] + [r.read(16) for _ in range(k)]
    return R.rdb_dump_payload(b"".join(out), version=11 if rdbtype == 21 else 9)


def test_restore_of_redis_7_2_payloads_keeps_active_time(store):
    p21 = _restream(STREAM_70, 21)
    restore(store, b"s", p21)
    restore(store, b"r", STREAM_70)
    got = records(store, b"s")
    assert ("consumer", b"bob", T70, T70 + 7) in got
    assert records(store, b"s", active=False) == records(store, b"r")


def test_restore_of_redis_6_payloads_estimates_the_counters(store):
    for i in range(1, 6):
        add(store, b"s", (i, 0), [b"f", b"%d" % i])
    for group, start in ((b"g", (2, 0)), (b"h", (0, 0)), (b"k", b"$")):
        write(store, lambda tx: tx.create_group(b"s", group, GroupOptions(start=start)))
    p15 = _restream(dump(store, b"s"), 15)
    restore(store, b"t", p15)
    recs = records(store, b"t")
    assert recs[0][1]["entries-added"] == 5 and recs[0][1]["max-deleted-id"] == (0, 0)
    # streamEstimateDistanceFromFirstEverEntry: 2-0 unknowable (-1), before the first 0, the last 5
    assert [r[3] for r in recs if r[0] == "group"] == [-1, 0, 5]


# ====================================================== hostile payloads

def _restore_outcome(store, payload):
    try:
        restore(store, b"x", payload, replace=True)
    except RedisError as e:
        return e.text
    # taken: the stream must be whole and readable
    read(store, lambda tx: tx.stream_info(b"x", StreamInfoOptions(full=True)))
    read(store, lambda tx: tx.range(b"x", RangeOptions(MIN_ID, MAX_ID)))
    read(store, lambda tx: tx.range(b"x", RangeOptions(MIN_ID, MAX_ID, rev=True)))
    assert sum(n[1] for n in nodes(store, b"x")) == length(store, b"x")
    write(store, lambda tx: tx.delete_keys([b"x"]))
    return "OK"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from([STREAM_70, EVENTS_70]), st.data())
def test_damaged_payloads_are_refused_with_one_error_and_change_nothing(store, payload, data):
    if not exists(store, b"keep"):
        add(store, b"keep", (1, 1), [b"a", b"b"])
    before = everything(store)
    body = bytearray(payload[:-10])
    how = data.draw(st.sampled_from(["flip", "truncate", "flip-raw"]))
    if how == "truncate":
        body = body[:data.draw(st.integers(0, len(body) - 1))]
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            i = data.draw(st.integers(0, len(body) - 1))
            body[i] ^= data.draw(st.integers(1, 255))
    bad = bytes(body) + payload[-10:] if how == "flip-raw" else R.rdb_dump_payload(bytes(body), 9)
    out = _restore_outcome(store, bad)
    if how == "flip-raw" and bytes(body) != payload[:-10]:     # (two flips may undo each other)
        assert out == "ERR DUMP payload version or checksum are wrong"
    else:
        assert out == "OK" or out.startswith("ERR Bad data format"), out
    assert everything(store) == before


# ==================================================================== files

def test_an_rdb_file_of_xs_reads_back_whole(tmp_path, store):
    from storage.ops.rdbfile import restore_rdb, save_rdb, save_rdb_to_path, verify_rdb
    from storage.store import Store
    build(store, b"s", big=True)
    build(store, b"t")
    write(store, lambda tx: tx.expire(b"t", 100000000, True, 0, "pexpire"))
    buf = io.BytesIO()
    st_, notes = save_rdb(store, buf)
    data = buf.getvalue()
    assert data[:9] == b"REDIS0010" and st_.streams == 2 and notes == {"idmp": 0}
    path = tmp_path / "dump.rdb"
    save_rdb_to_path(store, str(path))
    assert path.read_bytes()[:9] == b"REDIS0010" and (path.stat().st_mode & 0o777) == 0o600
    other = Store(str(tmp_path / "other"))
    try:
        st2, skipped = restore_rdb(other, str(path))
        assert (st2.streams, skipped.text()) == (2, "")
        for name in (b"s", b"t"):
            assert records(other, name, active=False) == records(store, name, active=False)
        assert 99000000 < read(other, lambda tx: tx.expire_time(b"t") - tx.now()) <= 100000000
        assert verify_rdb(str(path))[0].entries == st2.entries
    finally:
        other.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_a_damaged_rdb_file_is_refused_and_changes_nothing(tmp_path_factory, data):
    from storage.ops.rdbfile import restore_rdb, save_rdb
    from storage.ops.snapshot import SnapshotError
    from storage.store import Store
    d = tmp_path_factory.mktemp("rdb")
    s = Store(str(d / "store"), durable=False)
    try:
        add(s, b"s", (1, 1), [b"a", b"1", b"b", b"2"])
        add(s, b"s", (1, 2), [b"a", b"3", b"b", b"4"])
        write(s, lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=(0, 0))))
        read_group(s, b"s", b"g", b"c")
        buf = io.BytesIO()
        save_rdb(s, buf)
        good = bytearray(buf.getvalue())
        write(s, lambda tx: tx.delete_keys([b"s"]))
        add(s, b"keep", (1, 1), [b"x", b"y"])
        before = everything(s)
        if data.draw(st.booleans()):
            good = good[:data.draw(st.integers(0, len(good) - 1))]
        else:
            i = data.draw(st.integers(0, len(good) - 1))
            good[i] ^= data.draw(st.integers(1, 255))
        path = d / "bad.rdb"
        path.write_bytes(bytes(good))
        try:
            restore_rdb(s, str(path))
        except SnapshotError:
            assert everything(s) == before
        else:                                 # a flip the format cannot see (an aux value, say)
            assert length(s, b"s") == 2
    finally:
        s.close()


def test_every_type_and_opcode_of_an_rdb_file_is_read_over(tmp_path, store):
    """A file with a value of each RDB type (Redis 2.x encodings to the 7.4
    hashes with field TTLs), FUNCTION2, IDLE, FREQ and the old seconds
    EXPIRETIME: the stream is loaded, everything else counted."""
    import struct

    from storage.ops.rdbfile import restore_rdb, verify_rdb
    s, n = R.rdb_string, R.rdb_len
    lp = R.rdb_listpack([b"a", 1, b"b", -20000])
    parts = [R.rdb_file_header([(b"redis-ver", b"7.4.0"), (b"aof-base", b"0")], version=12),
             bytes((R.RDB_OPCODE_FUNCTION2,)) + s(b"#!lua name=x\nredis.register_function('f', function() end)"),
             R.rdb_file_db(0, 30, 1)]

    def key(t, name, body, before=b""):
        parts.append(before + bytes((t,)) + s(name) + body)
    key(0, b"string", s(b"v"))
    key(0, b"lzf", LZF_C[1:-10])
    key(0, b"int", R.rdb_string(b"-123456"))
    key(1, b"list-1", n(2) + s(b"a") + s(b"b"))
    key(2, b"set-2", n(1) + s(b"m"))
    key(3, b"zset-3", n(4) + s(b"a") + b"\x031.5" + s(b"b") + b"\xfd" + s(b"c") + b"\xfe" + s(b"d") + b"\xff")
    key(4, b"hash-4", n(1) + s(b"f") + s(b"v"))
    key(5, b"zset-5", n(1) + s(b"a") + struct.pack("<d", 2.5))
    for t in (9, 10, 11, 12, 13, 16, 17, 20, 23):
        key(t, b"blob-%d" % t, s(lp))
    key(14, b"list-14", n(1) + s(b"a ziplist"))
    key(18, b"list-18", n(2) + n(2) + s(lp) + n(1) + s(b"a plain node"))
    key(22, b"hash-22", n(1) + n(0) + s(b"f") + s(b"v"))
    key(24, b"hash-24", R.rdb_ms_time(1 << 40) + n(2) + n(0) + s(b"f") + s(b"v") + n(5) + s(b"g") + s(b"w"))
    key(25, b"hash-25", R.rdb_ms_time(1 << 40) + s(lp))
    key(0, b"gone", s(b"v"), before=R.rdb_file_expire(1000))
    value = R.rdb_dump_payload(EVENTS_70[:-10])[:-10]
    key(value[0], b"stream", value[1:], before=(bytes((R.RDB_OPCODE_IDLE,)) + n(5) + bytes((R.RDB_OPCODE_FREQ, 3))
                                                + bytes((R.RDB_OPCODE_EXPIRETIME,)) + struct.pack("<i", 2100000000)))
    body = b"".join(parts) + R.rdb_file_end()
    path = tmp_path / "all.rdb"
    path.write_bytes(body + R.rdb_file_crc(R.rdb_crc64(body)))
    st_, skipped = verify_rdb(str(path))
    assert (st_.streams, st_.entries) == (1, 1)
    assert skipped.text() == ("; skipped 8 hashes, 4 lists, 3 sets, 3 strings, 4 zsets, 1 expired key, "
                              "1 function library")
    restore_rdb(store, str(path))
    assert read(store, lambda tx: tx.expire_time(b"stream")) == 2100000000 * 1000
    assert dump(store, b"stream") == EVENTS_70
    path.write_bytes(body + b"\x00" * 8)                 # saved without a checksum: not checked
    assert verify_rdb(str(path))[0].streams == 1
