"""Hostile DUMP payloads and RDB values (issue 37, item 5): every
expansion is bounded before it is done, listpacks are walked in place
(never an object per element), strings of the types xs does not hold
are skipped without being decompressed, and a refused payload is
"ERR Bad data format" -- with peak memory measured (tracemalloc) against
the payload's size.  The payloads are made here: LZF "bombs" (a short
literal, then back references of 264 bytes for 3), listpacks whose
header claims more than they hold, counts claiming 2^32 items."""
import io
import tracemalloc

import pytest

from storage.codec import rdb as R
from storage.codec.rdb.base import _U16LE, _U32LE
from storage.errors import RedisError
from storage.options import RestoreOptions

MB = 1 << 20


def lzf_repeat(prefix, unit, reps, suffix=b""):
    """LZF data (as lzf_d.c reads it) of ``prefix + unit * reps + suffix``:
    literals, and back references at the distance of ``unit``, each
    copying up to 264 bytes for 3 -- LZF's largest ratio, 88."""
    out = bytearray()

    def literal(b):
        for k in range(0, len(b), 32):
            c = b[k:k + 32]
            out.extend(bytes((len(c) - 1,)) + c)

    literal(prefix + unit)
    dist = len(unit)
    off = dist - 1
    rest = dist * (reps - 1)
    done = dist
    while rest:
        if rest < 3:
            literal((unit * 3)[done % dist:done % dist + rest])
            break
        n = min(264, rest)
        if rest - n in (1, 2):
            n -= 3
        ln = n - 2
        if ln < 7:
            out.extend(bytes(((ln << 5) | (off >> 8), off & 0xFF)))
        else:
            out.extend(bytes(((7 << 5) | (off >> 8), ln - 7, off & 0xFF)))
        rest -= n
        done += n
    if suffix:
        literal(suffix)
    return bytes(out)


def test_lzf_repeat_is_lzf():
    for unit, reps in ((b"\x01\x01", 1000), (b"abcdefghij", 777), (b"xyz", 2)):
        data = lzf_repeat(b"HEAD", unit, reps, b"\xff")
        want = b"HEAD" + unit * reps + b"\xff"
        assert R.rdb_lzf_decompress(data, len(want)) == want


def lzf_string(data, ulen):
    return b"\xc3" + R.rdb_len(len(data)) + R.rdb_len(ulen) + data


def lp_header(total, count):
    return _U32LE.pack(total) + _U16LE.pack(min(count, 65535))


def stream_value(node_blob_encoded, meta=(0, 5, 5, 0, 0, 0, 0, 0), groups=b"\x00", nodes=1):
    """A type-19 value with one node keyed 5-5 (its listpack string given
    encoded, raw or LZF) and ``meta``."""
    return (bytes((R.RDB_TYPE_STREAM_LISTPACKS_2,)) + R.rdb_len(nodes) + R.rdb_string(R.rdb_raw_id((5, 5)))
            + node_blob_encoded + b"".join(R.rdb_len(v) for v in meta) + groups)


def deleted_node(k):
    """(listpack size, LZF string) of a valid stream node: no live entry,
    ``k`` deleted ones (SAMEFIELDS, at the master ID) -- ten bytes each,
    the same ten bytes: LZF's best case."""
    unit = b"\x03\x01\x00\x01\x00\x01\x01\x01\x04\x01"          # flags 3, 0, 0, value 1, lp-count 4
    body = b"\x00\x01" + b"\xf3" + k.to_bytes(4, "little") + b"\x05" + b"\x01\x01" + b"\x81f\x02" + b"\x00\x01"
    total = 6 + len(body) + 10 * k + 1
    head = lp_header(total, 5 + 4 * k)
    return total, lzf_string(lzf_repeat(head + body, unit, k, b"\xff"), total)


def bad_node(k):
    """(listpack size, LZF string) of a valid listpack of ``k`` small
    integers that is no stream node (its master entry has no terminator):
    refused at its fifth element."""
    total = 6 + 2 * k + 1
    return total, lzf_string(lzf_repeat(lp_header(total, k), b"\x01\x01", k, b"\xff"), total)


SLACK = 256 * 1024            # what any RESTORE allocates, whatever its payload


@pytest.fixture
def db(tmp_path):
    """A store that has already restored a small payload (so its caches
    and tables are made and do not count)."""
    from storage.store import Store
    from tests.engine.test_rdb_codec import STREAM_70
    s = Store(str(tmp_path / "db"), durable=False)
    o = RestoreOptions(replace=True)
    for _ in range(2):
        s.run(lambda tx: tx.restore_value(b"warm", STREAM_70, o), write=True)
    yield s
    s.close()


def restore(db, payload, name=b"x"):
    """RESTORE x 0 payload REPLACE through the engine (Txn.restore_value):
    (outcome, peak bytes Python allocated while doing it)."""
    o = RestoreOptions(replace=True)
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        db.run(lambda tx: tx.restore_value(name, payload, o), write=True)
        out = "OK"
    except RedisError as e:
        out = e.text
    finally:
        peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
    return out, peak


BAD = "ERR Bad data format"


# ====================================================== refused before expanding

def test_an_lzf_string_claiming_more_than_lzf_can_expand_is_refused_unread(db):
    """ulen over 88 times clen: refused before any allocation -- here a real
    LZF bomb of 100 kB (8.8 MB) announcing up to 264 times that (the old
    bound let it be decompressed before finding it short)."""
    data = lzf_repeat(lp_header(0, 0), b"\x01\x01", 4_400_000)
    for ulen in (len(data) * 264, len(data) * 88 + 1, 1 << 30, (1 << 64) - 1):
        payload = R.rdb_dump_payload(stream_value(lzf_string(data, ulen)))
        out, peak = restore(db, payload)
        assert out == BAD
        assert peak < 10 * len(payload) + SLACK, (ulen, peak)


def test_an_lzf_string_of_1gb_from_a_few_bytes_is_refused(db):
    payload = R.rdb_dump_payload(stream_value(lzf_string(b"\x00a\xe0\xff\x00", 1 << 30)))
    out, peak = restore(db, payload)
    assert out == BAD and peak < SLACK


def test_lengths_past_the_end_of_the_payload_are_refused_unread(db):
    for enc in (R.rdb_len(1 << 40), R.rdb_len((1 << 64) - 1), R.rdb_len((1 << 30) + 1),
                lp_header(0xFFFFFFFF, 65535)):
        payload = R.rdb_dump_payload(stream_value(enc + b"\x00" * 1000))
        out, peak = restore(db, payload)
        assert out == BAD and peak < SLACK, (enc, peak)


def test_a_listpack_whose_header_claims_more_bytes_than_it_holds(db):
    blob = bytearray(R.rdb_listpack([1, 0, 1, b"f", 0, 2, 0, 1, b"v", 4]))
    for total in (len(blob) + 1, 0xFFFFFFFF, len(blob) - 1):
        blob[0:4] = _U32LE.pack(total)
        out, _ = restore(db, R.rdb_dump_payload(stream_value(R.rdb_string(bytes(blob)))))
        assert out == BAD


@pytest.mark.parametrize("where", ["nodes", "groups", "pel", "consumers", "consumer-pel", "live"])
def test_counts_claiming_2_to_the_32_items_are_refused_at_the_end_of_the_data(db, where):
    big = R.rdb_len(1 << 32)
    node = R.rdb_string(R.rdb_listpack([1, 0, 1, b"f", 0, 2, 0, 0, b"v", 4]))
    meta = (1, 5, 5, 5, 5, 0, 0, 1)
    pel = R.rdb_raw_id((5, 5)) + R.rdb_ms_time(1) + R.rdb_len(1)
    groups = {
        "nodes": b"\x00",
        "groups": big + R.rdb_string(b"g") + b"\x05\x05\x01" + b"\x00\x00",
        "pel": b"\x01" + R.rdb_string(b"g") + b"\x05\x05\x01" + big + pel * 1000,
        "consumers": b"\x01" + R.rdb_string(b"g") + b"\x05\x05\x01" + b"\x00" + big
                     + (R.rdb_string(b"c") + R.rdb_ms_time(1) + b"\x00") * 3,
        "consumer-pel": b"\x01" + R.rdb_string(b"g") + b"\x05\x05\x01" + b"\x01" + pel + b"\x01"
                        + R.rdb_string(b"c") + R.rdb_ms_time(1) + big + R.rdb_raw_id((5, 5)),
        "live": b"\x00",
    }[where]
    if where == "live":
        node = R.rdb_string(R.rdb_listpack([(1 << 32), 0, 1, b"f", 0] + [2, 0, 0, b"v", 4] * 100))
    value = stream_value(node, meta, groups, nodes=(1 << 32) if where == "nodes" else 1)
    payload = R.rdb_dump_payload(value)
    out, peak = restore(db, payload)
    assert out == BAD
    assert peak < 10 * len(payload) + SLACK, peak


# ============================================================ walked in place

def test_a_bad_node_of_many_elements_costs_its_bytes_not_an_object_each(db):
    """A listpack of 300,000 small integers (600 kB, from a 7 kB payload):
    before, a tuple per element (~30 MB); now the listpack itself."""
    total, s = bad_node(300_000)
    payload = R.rdb_dump_payload(stream_value(s))
    out, peak = restore(db, payload)
    assert out == BAD
    assert peak < 3 * total + SLACK, (peak, total, len(payload))


def test_a_valid_node_of_many_deleted_entries_is_restored_in_place(db):
    """A valid payload (Redis takes it too): one node, 50,000 deleted
    entries, 500 kB of listpack from 6 kB.  Kept, node and counts, at
    the cost of the listpack's bytes, not a million objects."""
    total, s = deleted_node(50_000)
    payload = R.rdb_dump_payload(stream_value(s))
    out, peak = restore(db, payload)
    assert out == "OK"
    assert peak < 3 * total + SLACK, (peak, total, len(payload))
    value, _ = db.run(lambda tx: tx.rdb_value(b"x"))
    r = R.RdbReader(value)
    evs = list(R.rdb_stream_events(r, r.byte()))
    assert evs[0][3:5] == (0, 50_000) and evs[1][1] == 0          # no live entry, 50,000 deleted


def test_the_entries_of_a_node_are_read_one_at_a_time():
    blob = R.rdb_listpack([3, 1, 1, b"f", 0, 2, 0, 0, b"v0", 4, 2, 0, 1, 7, 4, 0, 0, 2, 2, b"a", b"b", b"c", b"d", 8,
                           3, 0, 3, b"x", 4])
    entries, live, deleted, body, last, names = R.rdb_stream_node((5, 5), blob)
    assert (live, deleted, last, names) == (3, 1, (5, 8), (b"f",))
    assert len(entries) == 3
    assert entries == [((5, 5), [b"f", b"v0"]), ((5, 6), [b"f", b"7"]), ((5, 7), [b"a", b"b", b"c", b"d"])]
    assert list(entries) == list(entries)           # walked again, the same


# ===================================================== other types: not expanded

def test_a_string_payload_is_skipped_without_decompressing_it(db):
    """SET's DUMP of a 64 MB string (LZF, 760 kB): refused as a string, at
    the cost of the payload only."""
    data = lzf_repeat(b"", b"a", 1 << 26)
    payload = R.rdb_dump_payload(b"\x00" + lzf_string(data, 1 << 26))
    out, peak = restore(db, payload)
    assert out.startswith(BAD) and "string" in out
    assert peak < 3 * len(payload) + SLACK, (peak, len(payload))


def test_skipping_checks_the_lzf_lengths_and_the_end_of_the_data():
    for enc in (lzf_string(b"\x00a", 1000), lzf_string(b"\x00a\xe0\xff\x00", 10 ** 9),
                b"\xc3" + R.rdb_len(1 << 40) + R.rdb_len(1 << 41)):
        with pytest.raises(R.RdbError):
            R.RdbReader(enc + b"\x00" * 10).skip_string()
    r = R.RdbReader(lzf_string(b"\x00a\xe0\xff\x00", 265) + b"!")
    r.skip_string()
    assert r.read(1) == b"!"


def test_a_file_reader_refuses_a_length_past_the_end_of_the_file_before_reading(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(R.rdb_len(1 << 33) + b"x" * 100)
    with open(p, "rb") as f:
        r = R.RdbReader(f=f)
        with pytest.raises(R.RdbError) as e:
            r.string(limit=1 << 40)
        assert e.value.offset == 109 and r.offset() == 9
    r = R.RdbReader(f=io.BytesIO(b"\x05abc"))          # not a file: its size is not known
    with pytest.raises(R.RdbError) as e:
        r.string()
    assert e.value.offset == 4 and r.offset() == 1


def test_valid_payloads_read_as_before():
    from tests.engine.test_rdb_codec import EVENTS_70, LZF_A, LZF_B, LZF_C, LZF_C_TEXT, STREAM_70
    for payload, text in ((LZF_A, b"abc" * 100), (LZF_B, b"a" * 5000), (LZF_C, LZF_C_TEXT)):
        r = R.rdb_payload_reader(payload)
        r.byte()
        assert r.string() == text
        r = R.rdb_payload_reader(payload)
        r.byte()
        r.skip_string()
        assert r.at_end()
    for payload in (STREAM_70, EVENTS_70):
        r = R.rdb_payload_reader(payload)
        evs = list(R.rdb_stream_events(r, r.byte()))
        assert evs[-1] == ("end",) and r.at_end()
