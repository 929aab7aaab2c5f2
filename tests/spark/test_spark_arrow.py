"""The Spark source's Arrow batches built straight from the stored form
(storage/spark/columns.py ``_batch``: IDs from the keys, shaped entries' values
by separator positions, names from the field set) are the batches the
record-based builder (``_records_batch``, fed ``codec.records``) makes
for the same entries: column for column, and the same error for a name
or value that is not UTF-8.  No Spark session: the builders are called
directly (and the partition reader, on a real store)."""
import os
import tempfile

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from storage import codec  # noqa: E402
from storage.options import AddOptions, RangeOptions  # noqa: E402
from storage.spark import columns as C  # noqa: E402
from storage.spark import reading as R  # noqa: E402
from storage.spark.options import XStreamError, _ReadPlan  # noqa: E402


def _records_batch(schema, stream, values, binary, with_list, name):
    """The reference: records (codec.encode_entry) -> one record batch,
    the IDs parsed from their text, through the module's record parser
    and assembler (what the source did before it read the stored form)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    id_bin, keys_bin, vals_bin, foffs = C._record_fields(values)
    id_text = id_bin.cast(pa.string())
    ms_seq = pc.split_pattern(id_text, pattern="-")
    ms_u = pc.list_element(ms_seq, 0).cast(pa.uint64())
    seq_u = pc.list_element(ms_seq, 1).cast(pa.uint64())
    return C._assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, np.diff(foffs), binary,
                       with_list, lambda: values, name, False)

U64 = (1 << 64) - 1
WIDE = codec.SEQ_WIDE

# names: UTF-8, empty, not UTF-8, and ones no field set can hold (an unsafe byte, a newline)
NAMES = st.sampled_from([b"user", b"action", b"a", b"b", b"", b"caf\xc3\xa9", b"n\xffx", b"k\x0fk", b"line\nname",
                         b"x" * 30])
# values: text, empty, not UTF-8, newlines (the msgpack record form), NUL first, separator and tag bytes
VALUES = st.one_of(st.text(max_size=6).map(lambda s: s.encode("utf-8")),
                   st.sampled_from([b"", b"\xff", b"two\nlines", b"\x00lead", b"a\x0fb", b"\x03", b"\xe2\x82"]),
                   st.binary(max_size=5))
MS = st.one_of(st.integers(0, 3), st.sampled_from([1700000000123, C._MAX_TS_MS, C._MAX_TS_MS + 1, C.LONG_MAX,
                                                   C.LONG_MAX + 1, U64]), st.integers(0, U64))
SEQ = st.one_of(st.integers(0, 3), st.sampled_from([WIDE - 1, WIDE, WIDE + 1, C.LONG_MAX, C.LONG_MAX + 1, U64]),
                st.integers(0, U64))


def _utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@st.composite
def stored_entries(draw):
    """(pairs, shapes, entries): entries stored as the engine stores them
    (up to MAX_SHAPES field sets interned in order of first use, an entry
    shaped when its names are one of them and no value has an unsafe
    byte, a record otherwise), with their (ID, fields)."""
    sets = draw(st.lists(st.lists(NAMES, min_size=1, max_size=5).map(tuple), min_size=1, max_size=11))
    ids = sorted(draw(st.sets(st.tuples(MS, SEQ), min_size=1, max_size=40)))
    clean = draw(st.booleans())         # half the examples: every name and value UTF-8 (no error)
    shapes, by_names, pairs, entries = {}, {}, [], []
    for i in ids:
        names = draw(st.sampled_from(sets))
        values = draw(st.lists(VALUES, min_size=len(names), max_size=len(names)))
        if clean:
            names = tuple(n if _utf8(n) else b"N" for n in names)
            values = [v if _utf8(v) else b"V" for v in values]
        fields = [None] * (2 * len(names))
        fields[0::2], fields[1::2] = names, values
        s = by_names.get(names)
        if names not in by_names:
            s = None
            if len(shapes) < codec.MAX_SHAPES and codec.Shape.eligible(names):
                s = shapes[len(shapes) + 1] = codec.Shape(len(shapes) + 1, names)
            by_names[names] = s
        v = s.encode(values) if s is not None else None
        if v is None:
            v = codec.encode_entry(b"%d-%d" % i, fields)
        pairs.append((codec.entry_key(7, i), v))
        entries.append((i, fields))
    return pairs, shapes, entries


def _outcome(build):
    try:
        return "batch", build()
    except XStreamError as e:
        return "error", str(e)


def _both(pairs, shapes, binary, with_list):
    schema = C._arrow_schema(binary, with_list)
    records = codec.records([k for k, _ in pairs], [v for _, v in pairs], shapes)
    new = _outcome(lambda: C._batch(schema, "s", pairs, shapes, binary, with_list, b"s"))
    ref = _outcome(lambda: _records_batch(schema, "s", records, binary, with_list, b"s"))
    return new, ref


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored_entries(), st.booleans(), st.booleans())
def test_batches_from_the_stored_form_equal_the_record_based_ones(data, binary, with_list):
    pairs, shapes, entries = data
    new, ref = _both(pairs, shapes, binary, with_list)
    assert new[0] == ref[0]
    if new[0] == "error":
        assert new[1] == ref[1]
        return
    assert new[1].schema == ref[1].schema
    for name in ref[1].schema.names:
        assert new[1].column(name).equals(ref[1].column(name)), name
    assert new[1].equals(ref[1])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stored_entries())
def test_the_batch_holds_every_entry_and_fails_only_on_text_that_is_not_utf8(data):
    """Not only equal to the old builder: right.  IDs, every field in
    order (duplicates too), and an error exactly when a name (or, without
    binary, a value) is not UTF-8."""
    pairs, shapes, entries = data
    for binary in (False, True):
        new, _ = _both(pairs, shapes, binary, True)
        bad = any(not _utf8(f) for _, fields in entries for f in (fields if not binary else fields[0::2]))
        assert new[0] == ("error" if bad else "batch")
        if bad:
            assert "is not UTF-8" in new[1]
            continue
        rows = new[1].to_pylist()
        assert [r["id"] for r in rows] == ["%d-%d" % i for i, _ in entries]
        assert [(r["ms"], r["seq"]) for r in rows] == [tuple(x if x <= C.LONG_MAX else None for x in i)
                                                       for i, _ in entries]
        conv = (lambda b: b) if binary else (lambda b: b.decode("utf-8"))
        assert [[(p["name"], p["value"]) for p in r["fields_list"]] for r in rows] == [
            [(conv(n), conv(v)) for n, v in zip(f[0::2], f[1::2])] for _, f in entries]
        assert [dict(r["fields"]) for r in rows] == [
            {n.decode("utf-8"): conv(v) for n, v in zip(f[0::2], f[1::2])} for _, f in entries]


@pytest.mark.parametrize("stored", [[b"\x01x\x0ey", b"\x01only"],
                                    [b"\x01x\x0ey\x0fz", b"\x01only"]])     # as many values in all, misplaced
def test_a_damaged_shaped_value_is_an_error_not_a_wrong_row(stored):
    s = codec.Shape(1, (b"a", b"b"))
    pairs = [(codec.entry_key(1, (1, j)), v) for j, v in enumerate(stored)]
    with pytest.raises(XStreamError, match="damaged"):
        C._batch(C._arrow_schema(False, False), "s", pairs, {1: s}, False, False, b"s")


# ------------------------------------------------- the partition reader, on a store


@st.composite
def store_entries(draw):
    """Entries to add with explicit IDs: many field sets (more than a
    stream interns), wide sequence numbers, newlines, duplicate names."""
    sets = draw(st.lists(st.lists(st.sampled_from([b"a", b"b", b"c", b"user", b"w\nx"]), min_size=1, max_size=4),
                         min_size=1, max_size=12))
    ids = sorted(draw(st.sets(st.tuples(st.integers(1, 5), st.sampled_from([0, 1, 2, WIDE - 1, WIDE, U64])),
                              min_size=1, max_size=30)))
    return [(i, [x for n in draw(st.sampled_from(sets))
                 for x in (n, draw(st.sampled_from([b"1", b"", b"v\nw", b"caf\xc3\xa9", b"\xff"])))])
            for i in ids]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(store_entries(), st.integers(1, 7), st.integers(1, 9), st.booleans())
def test_a_partition_read_from_a_store_equals_the_record_based_batches(entries, chunk, rows, with_list):
    import pyarrow as pa

    from storage.store import Store
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "db")
        st_ = Store(path, durable=False)
        try:
            st_.run(lambda tx: [tx.add(b"s", f, AddOptions(id=i)) for i, f in entries], write=True)
            with st_.read() as tx:
                records = tx.range(b"s", RangeOptions((0, 0), (U64, U64), len(entries))).values
        finally:
            st_.close()
        plan = _ReadPlan({"path": path, "stream": "s", "chunk": str(chunk), "binary": "true",
                          "fields_list": "true" if with_list else "false"})
        old = R._BATCH_ROWS
        R._BATCH_ROWS = rows             # batches that cut across range calls
        try:
            got = list(R._read_range(plan, R.XStreamPartition(b"s", (0, 0), (U64, U64))))
        finally:
            R._BATCH_ROWS = old
    target = max(chunk, rows)
    assert [b.num_rows for b in got] == [min(target, len(entries) - j) for j in range(0, len(entries), target)]
    ref = _records_batch(C._arrow_schema(True, with_list), "s", records, True, with_list, b"s")
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches([ref]))
