"""The ``xstream`` data source's columns: its schemas, and the Arrow record batches its reads yield

Columns: ``stream`` string, ``id`` string (``ms-seq``, exact),
``ms`` and ``seq`` long (null for a part above 2**63-1, which a long cannot
hold), ``ts`` timestamp (the ms part; null past year 9999), ``fields``
map<string,string> (a field given twice keeps its last value), and with
``fields_list=true`` a ``fields_list`` array<struct<name,value>> with every
field in order, duplicates included.  Lossless by rule: a field name or
value that is not UTF-8 fails the read with a message naming the entry,
unless ``binary=true``, which makes ``fields`` map<string,binary> and
``fields_list``'s values (and names) binary; names must still be UTF-8
in ``fields``.  Stream names must be UTF-8.  With ``url`` (the stores
served over the network) rows gain a last column ``source``: the
endpoint as given, its password removed.

``_schema`` is the schema Spark is told; ``_arrow_schema`` the same as
Arrow, which Spark compares each batch with exactly.  A batch is built
column by column, never a Python object per entry or field: ``_batch``
from stored entries (the path mode), ``_page_batch`` from XRANGE
replies (the url mode), both through ``_assemble``, so ``binary`` and
``fields_list`` behave the same in both.  Nothing here imports pyspark,
pyarrow or numpy at import time: each function imports what it uses.
"""
from storage import codec
from storage.spark.options import XStreamError

LONG_MAX = (1 << 63) - 1


class Damaged(XStreamError):
    """A stored value that does not decode: a damaged store (the path
    mode), or a server that sent damaged entries (the url mode,
    storage.spark.reading._stored_batch says which)."""

    def __init__(self, detail):
        XStreamError.__init__(self, detail + ": the store is damaged")
        self.detail = detail
_MAX_TS_MS = 253402300799999                # 9999-12-31T23:59:59.999Z


def _schema(binary, fields_list, source=False):
    value = "binary" if binary else "string"
    cols = ["stream string", "id string", "ms long", "seq long", "ts timestamp",
            "fields map<string,%s>" % value]
    if fields_list:
        cols.append("fields_list array<struct<name:%s,value:%s>>" % (value, value))
    if source:
        cols.append("source string")
    return ", ".join(cols)


def _arrow_schema(binary, with_list, source=False):
    """The Arrow schema Spark expects for ``_schema(binary, with_list, source)``
    (pyspark's own conversion: it compares batches with it exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
    v = BinaryType() if binary else StringType()
    cols = [StructField("stream", StringType()), StructField("id", StringType()), StructField("ms", LongType()),
            StructField("seq", LongType()), StructField("ts", TimestampType()),
            StructField("fields", MapType(StringType(), v))]
    if with_list:
        cols.append(StructField("fields_list", ArrayType(StructType([StructField("name", v),
                                                                     StructField("value", v)]))))
    if source:
        cols.append(StructField("source", StringType()))
    return to_arrow_schema(StructType(cols), timezone="UTC")


def _batch(schema, stream, pairs, shapes, binary, with_list, name, source=None):
    """Stored entries ((entry key, stored value) pairs, ``shapes``: tag
    -> codec.Shape of the stream) -> one record batch of ``schema``,
    straight from the stored form, column by column: the IDs from the
    keys (one frombuffer for 20-byte keys), a run of shaped entries'
    values by one scan for separator bytes, their names repeated from
    the shape; runs of records as ``_record_fields`` splits them.  No
    Python object per entry or field beyond the pairs themselves.
    ``source``: the url mode's ``source`` column (pages from xs serve in
    stored form, storage.spark.stored), None in the path mode."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(pairs)
    ekeys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    ms_u, seq_u = _key_ids(ekeys)
    id_text = pc.binary_join_element_wise(ms_u.cast(pa.string()), seq_u.cast(pa.string()), "-")
    names, vals, counts = [], [], []
    unique = True          # no entry can name a field twice (then the map needs no last-wins pass)
    for t, _, vs in codec.runs(ekeys, values):
        if t == 0:
            _, nb, vb, foffs = _record_fields(vs)
            counts.append(np.diff(foffs))
            unique = False
        else:
            s = shapes[t]
            nb, vb = _shaped_fields(s, vs)
            counts.append(np.full(len(vs), len(s.names), dtype=np.int64))
            unique = unique and len(set(s.names)) == len(s.names)
        names.append(nb)
        vals.append(vb)
    pairs_n = np.concatenate(counts) if len(counts) > 1 else counts[0]
    foffs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(pairs_n, out=foffs[1:])
    keys_bin = pa.concat_arrays(names) if len(names) > 1 else names[0]
    vals_bin = pa.concat_arrays(vals) if len(vals) > 1 else vals[0]
    return _assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, pairs_n, binary, with_list,
                     lambda: codec.records(ekeys, values, shapes), name, unique, source)


def _page_batch(schema, stream, entries, binary, with_list, name, source):
    """XRANGE replies' entries ([ID, [field, value, ...]] each) -> one
    record batch of ``schema``: the same columns, by the same
    ``_assemble``, as the path mode's stored entries give."""
    import itertools

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(entries)
    id_text = pa.array([e[0] for e in entries], pa.binary()).cast(pa.string())
    halves = pc.split_pattern(id_text, pattern="-", max_splits=1).flatten()
    if len(halves) != 2 * n:
        raise XStreamError("%s stream %r: the server sent an entry ID that is not ms-seq" % (source, stream))
    ms_u = halves.take(pa.array(np.arange(0, 2 * n, 2))).cast(pa.uint64())
    seq_u = halves.take(pa.array(np.arange(1, 2 * n, 2))).cast(pa.uint64())
    pairs = np.fromiter((len(e[1]) for e in entries), dtype=np.int64, count=n) // 2
    foffs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(pairs, out=foffs[1:])
    m = int(foffs[-1])
    flat = pa.array(list(itertools.chain.from_iterable(e[1] for e in entries)), pa.binary())
    keys_bin = flat.take(pa.array(np.arange(0, 2 * m, 2)))
    vals_bin = flat.take(pa.array(np.arange(1, 2 * m, 2)))
    return _assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, pairs, binary, with_list,
                     lambda: [codec.encode_entry(bytes(i), [bytes(f) for f in fs]) for i, fs in entries], name,
                     False, source)


def _key_ids(ekeys):
    """Entry keys -> (ms, seq) as two uint64 Arrow arrays."""
    import numpy as np
    import pyarrow as pa
    n = len(ekeys)
    joined = b"".join(ekeys)
    if len(joined) == codec.SHORT_KEY * n:            # every key short (a wide one is longer)
        a = np.frombuffer(joined, dtype=np.dtype(codec.SHORT_KEY_DTYPE))
        return pa.array(a["ms"].astype(np.uint64)), pa.array(a["seq"].astype(np.uint64))
    both = np.array([codec.id_from_entry_key(k) for k in ekeys], dtype=np.uint64).reshape(n, 2)
    return pa.array(both[:, 0]), pa.array(both[:, 1])


def _shaped_fields(shape, values):
    """A run of entries stored in field set ``shape`` -> (names, values)
    as binary Arrow arrays, ``len(shape.names)`` pairs per entry.  The
    tag and separator bytes occur only before each value: their
    positions give the values, the bytes between them their contents."""
    import numpy as np
    import pyarrow as pa
    k, n = len(shape.names), len(values)
    joined = b"".join(values)
    raw = np.frombuffer(joined, dtype=np.uint8)
    cut = np.frombuffer(joined.translate(codec.TO_NEWLINE), dtype=np.uint8) == 10
    at = np.flatnonzero(cut)
    if len(at) != n * k or (raw[at[::k]] != shape.tag).any():
        raise Damaged("a stored entry of field set %d does not hold %d values" % (shape.tag, k))
    data = raw[~cut]
    if len(data) > 0x7FFFFFFF:                        # Arrow binary offsets are 32-bit
        raise XStreamError("%d entries of %d bytes in one batch: more than an Arrow batch holds" % (n, len(data)))
    offs = np.empty(n * k + 1, dtype=np.int32)
    offs[:-1] = at - np.arange(n * k)
    offs[-1] = len(data)
    vals = pa.BinaryArray.from_buffers(pa.binary(), n * k, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    names = pa.array(shape.names, pa.binary()).take(pa.array(np.tile(np.arange(k, dtype=np.int32), n)))
    return names, vals


def _record_fields(values):
    """Records (codec.encode_entry) -> (ID texts, field names, field
    values: binary Arrow arrays; the first pair of each entry, plus one
    past the last, as an int64 array)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(values)
    raw = pa.array(values, pa.binary())
    starts = np.frombuffer(raw.buffers()[1], dtype=np.int32, count=n)
    if (np.frombuffer(raw.buffers()[2], dtype=np.uint8)[starts] == 0).any():
        # some entry is in msgpack form (a field with a newline): split in Python
        flat, offsets = [], [0]
        for v in values:
            i, f = codec.decode_entry(v)
            flat.append(bytes(i))
            flat.extend(bytes(x) for x in f)
            offsets.append(len(flat))
        parts = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.binary()))
    else:
        # text form: "ms-seq\nfield\nvalue..." -> [id, field, value, ...]
        parts = pc.split_pattern(raw, pattern=b"\n")
    offs = parts.offsets.to_numpy().astype(np.int64)
    flat = parts.values
    foffs = (offs - np.arange(n + 1)) // 2                   # per entry: its field pairs
    m = int(foffs[-1])
    # the k-th pair of entry i: its name at offs[i] + 1 + 2k, its value next
    kpos = np.repeat(offs[:-1] + 1 - 2 * foffs[:-1], np.diff(foffs)) + 2 * np.arange(m)
    return flat.take(pa.array(offs[:-1])), flat.take(pa.array(kpos)), flat.take(pa.array(kpos + 1)), foffs


def _assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, pairs, binary, with_list,
              records, name, unique, source=None):
    """The record batch from its parts: IDs (text, and ms / seq as
    uint64), every field's name and value (binary, in order), the first
    pair of each entry (``foffs``, n + 1) and its pair count; ``records``
    gives the entries' records for an error message; ``unique``: no
    entry names a field twice; ``source``: the url mode's ``source``
    column (its one value)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(id_text)
    null = pa.scalar(None, pa.uint64())

    def at_most(a, top):
        return pc.if_else(pc.greater(a, pa.scalar(top, pa.uint64())), null, a).cast(pa.int64())
    ts = pc.multiply(at_most(ms_u, _MAX_TS_MS), 1000).cast(pa.timestamp("us", tz="UTC"))
    try:
        keys = keys_bin.cast(pa.string())
        vals = vals_bin if binary else vals_bin.cast(pa.string())
    except pa.ArrowInvalid:
        _raise_not_utf8(records(), binary, name)
        raise
    if unique:
        mkeys, mvals, moffs = keys, vals, foffs
    else:
        mkeys, mvals, moffs = _last_wins(keys, vals, foffs, pairs)
    cols = [_repeated(stream, n), id_text, at_most(ms_u, LONG_MAX), at_most(seq_u, LONG_MAX), ts,
            pa.MapArray.from_arrays(pa.array(moffs.astype(np.int32)), mkeys, mvals, type=schema.field("fields").type)]
    if with_list:
        ltype = schema.field("fields_list").type
        fl = pa.StructArray.from_arrays([keys_bin if binary else keys, vals], fields=list(ltype.value_type))
        cols.append(pa.ListArray.from_arrays(pa.array(foffs.astype(np.int32)), fl, type=ltype))
    if source is not None:
        cols.append(_repeated(source, n))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _repeated(text, n):
    """A string column of ``n`` times ``text``."""
    import numpy as np
    import pyarrow as pa
    one = text.encode("utf-8")
    return pa.StringArray.from_buffers(n, pa.py_buffer((np.arange(n + 1) * len(one)).astype(np.int32)),
                                       pa.py_buffer(one * n))


def _last_wins(keys, vals, offs, pairs):
    """The ``fields`` map's entries: a name given twice in an entry keeps
    its first place and its last value (like a Python dict)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    m, n = len(keys), len(pairs)
    if m == 0:
        return keys, vals, offs
    enc = pc.dictionary_encode(keys)
    codes = enc.indices.to_numpy().astype(np.int64)
    if len(enc.dictionary) <= 62 and pairs.min() > 0:
        # one bit per name: an entry's bits add up to their OR unless a name repeats
        bits = np.left_shift(np.int64(1), codes)
        starts = offs[:-1]
        if (np.add.reduceat(bits, starts) == np.bitwise_or.reduceat(bits, starts)).all():
            return keys, vals, offs
    entry = np.repeat(np.arange(n, dtype=np.int64), pairs)
    pair = entry * (int(codes.max()) + 1) + codes
    uniq, first = np.unique(pair, return_index=True)
    if len(uniq) == m:
        return keys, vals, offs
    _, rlast = np.unique(pair[::-1], return_index=True)
    order = np.argsort(first)
    kpos, vpos = first[order], (m - 1 - rlast)[order]
    new_offs = np.concatenate(([0], np.cumsum(np.bincount(entry[kpos], minlength=n))))
    return keys.take(pa.array(kpos)), vals.take(pa.array(vpos)), new_offs


def _raise_not_utf8(values, binary, name):
    """The error of the first entry with a field name (or, without
    ``binary``, a value) that is not UTF-8."""
    for v in values:
        id_text, fields = codec.decode_entry(v)
        for f in fields[0::2]:
            _text(f, "field name", name, id_text)
        if not binary:
            for f in fields[1::2]:
                _text(f, "field value", name, id_text)


def _text(b, what, stream, id_text):
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        where = "stream %r" % (stream,) if id_text is None else "entry %s of stream %r" % (
            bytes(id_text).decode(), stream)
        hint = " (read it with option binary=true)" if what == "field value" else ""
        raise XStreamError("%s %r in %s is not UTF-8%s" % (what, bytes(b), where, hint))
