"""Entry keys and values (format 4: shapes, compact entries), decoding runs
of entries, the fields of a run of new ones as one text (``AddBlock``),
and the node records of storage.parts.nodes."""
import struct
from collections import namedtuple
from itertools import repeat as _repeat
from operator import itemgetter

import msgpack

from storage.codec.keys import _KEY3, ID, U64, packb

# ================================================================= entries
# Format 4: the ``log`` database.  The key is the stream's number (8
# bytes), the ID's milliseconds (8) and its sequence number in 4 bytes,
# or 0xffffffff and then 8 bytes for a sequence number of 0xffffffff or
# more: 20 bytes for nearly every entry (a bulk ingest numbers a whole
# batch within one millisecond), still in ID order.
#
# The value is one of three forms, told apart by its first byte:
#
#   a digit          the entry's record: ``ms-seq\nfield\nvalue...``, the
#                    lines redis-cli --raw prints for it (format 3's text
#                    form, kept for entries that cannot be shaped)
#   0x00 + msgpack   ``[id text, fields]`` (a field contains a newline;
#                    format 3's binary form)
#   T in 0x01-0x08   a shaped entry: field set T of the stream (a
#                    ``shapes`` record, ``Shape``) gives the field names,
#                    the key gives the ID, and the value holds only the
#                    field values, each after a separator byte: T before
#                    the first, SEPARATORS[j - 1] before the j-th.
#
# A stream interns up to ``MAX_SHAPES`` field sets, the way Redis's
# listpack nodes share their master entry's names; an entry is shaped
# when its names are one of them (or room is left for a new one) and
# neither a name nor a value contains a byte of ``UNSAFE`` (the tag and
# separator bytes, NUL and newline).  Everything else is stored as a
# record.  Shaped entries are what makes an event of four short fields
# take about 60 bytes of store instead of 108: no ID text, no names.
#
# A range read turns stored values back into records or redis-cli lines
# a run of entries at a time with a few C-level bytes operations
# (``Entries``): each separator byte stands for "newline, name, newline".

_KEY_SHORT = struct.Struct(">QQI")      # sid, ms, seq (< SEQ_WIDE)
_KEY_WIDE = struct.Struct(">QQIQ")      # sid, ms, SEQ_WIDE, seq
_KEY_ID = struct.Struct(">8xQI")        # ms, seq|SEQ_WIDE from a key
SEQ_WIDE = 0xFFFFFFFF
SHORT_KEY = _KEY_SHORT.size
# the fields of a SHORT_KEY-byte entry key, as a numpy structured dtype
# spec (numpy.dtype(SHORT_KEY_DTYPE)): column readers decode a run of
# keys in one frombuffer call (storage.spark)
SHORT_KEY_DTYPE = [("sid", ">u8"), ("ms", ">u8"), ("seq", ">u4")]

MAX_SHAPES = 8
SEPARATORS = bytes(range(0x0E, 0x20))            # before field values 2..19
UNSAFE = bytes(range(0, MAX_SHAPES + 1)) + b"\n" + SEPARATORS
UNSAFE_BUT_NEWLINE = UNSAFE.replace(b"\n", b"")
# every tag and separator byte -> newline: a shaped value's field boundaries
TO_NEWLINE = bytes.maketrans(bytes(range(1, MAX_SHAPES + 1)) + SEPARATORS,
                             b"\n" * (MAX_SHAPES + len(SEPARATORS)))
SHAPE_MAX_FIELDS = len(SEPARATORS) + 1
SHAPE_MAX_BYTES = 16384                            # of names, in all


pack_entry_key = _KEY_SHORT.pack         # (sid, ms, seq) for seq < SEQ_WIDE: the bulk loops


def entry_key(sid, i):
    seq = i[1]
    if seq < SEQ_WIDE:
        return _KEY_SHORT.pack(sid, i[0], seq)
    return _KEY_WIDE.pack(sid, i[0], SEQ_WIDE, seq)


def entry_keys(sid, ids):
    """``entry_key`` of each of ``ids``: one C-level pass when every
    sequence number is short (a bulk ingest's)."""
    seqs = list(map(_second_item, ids))
    if seqs and max(seqs) < SEQ_WIDE:
        return list(map(_KEY_SHORT.pack, _repeat(sid), map(_first_byte, ids), seqs))
    return [entry_key(sid, i) for i in ids]


def run_keys(sid, ms, seq, n):
    """``entry_keys`` of the ``n`` IDs ``ms-seq``, ``ms-(seq+1)`` ... (a
    bulk ingest's run): one C-level pass when they are all short."""
    if seq + n <= SEQ_WIDE:
        return list(map(_KEY_SHORT.pack, _repeat(sid, n), _repeat(ms, n), range(seq, seq + n)))
    return [entry_key(sid, (ms, s)) for s in range(seq, seq + n)]


def id_from_entry_key(key):
    ms, seq = _KEY_ID.unpack_from(key)
    if seq == SEQ_WIDE:
        seq = U64.unpack_from(key, SHORT_KEY)[0]
    return ms, seq


def is_entry_key(key):
    """Whether ``key`` has an entry key's layout: SHORT_KEY bytes, or 8
    more after the SEQ_WIDE marker (keys from elsewhere: XS.PAGE's reader)."""
    n = len(key)
    if n != SHORT_KEY and n != SHORT_KEY + 8:
        return False
    return (_KEY_ID.unpack_from(key)[1] == SEQ_WIDE) == (n != SHORT_KEY)


def sid_prefix(sid):
    return U64.pack(sid)


def v3_id_from_entry_key(key):
    """The ID of a format-3 ``entries`` key (sid, ms, seq: 8 bytes each)."""
    return ID.unpack_from(key, 8)


def encode_entry(id_text, fields):
    """An entry's record (the form of an entry outside the store: range
    replies, snapshots, exports; and the stored value of an entry that is
    not shaped).  Normally its text form, the lines redis-cli --raw
    prints for it: ``b"ms-seq\nfield\nvalue..."`` -- decoding is one
    split.  If a field contains a newline, ``0x00 + msgpack([id,
    fields])`` instead (a text record starts with a digit, never 0x00).
    Fields keep their order and duplicates; the key stays the authority
    on the ID."""
    body = b"\n".join(fields)
    if body.count(b"\n") == len(fields) - 1:
        return id_text + b"\n" + body
    return b"\x00" + packb([id_text, fields])


class AddBlock:
    """The fields of ``n`` new entries of stream ``key`` (a bulk ingest's
    lines ``XADD key * field value ...``: xstream_cli.execution.script),
    each of ``c`` words (``c`` even), in text form as a whole: ``text``
    holds the words of each entry joined by newlines, the entries
    joined by a NUL word (``b"\\n\\0\\n"``; no word holds a newline
    or a NUL, none is empty), and ``words`` is its split -- entry j's
    fields are ``words[j * (c + 1):j * (c + 1) + c]``.

    Txn.add_auto_many takes it where it takes a list of (key, fields
    joined by newlines) pairs, and it reads as that list (``len``,
    indexing and iteration make the pairs, once), so a path that needs
    them one by one (a refused ID, several field sets) sees what the
    lines would have given; the bulk path (storage.parts.shapes)
    encodes the entries from ``words``."""

    __slots__ = ("key", "text", "words", "c", "n", "_pairs")

    def __init__(self, key, text, words, c, n):
        self.key = key
        self.text = text
        self.words = words
        self.c = c
        self.n = n
        self._pairs = None

    def pairs(self):
        """The (key, fields joined by newlines) pairs, made once."""
        if self._pairs is None:
            fs = self.text.split(b"\n\0\n")
            self._pairs = list(zip([self.key] * len(fs), fs))
        return self._pairs

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.pairs()[i]

    def __iter__(self):
        return iter(self.pairs())


def decode_entry(value):
    """Record -> ``[id_text, fields]``."""
    if value[:1] != b"\x00":
        parts = value.split(b"\n")
        return [parts[0], parts[1:]]
    return msgpack.unpackb(value[1:], raw=False)


def entry_fields(value):
    return decode_entry(value)[1]


def is_shaped(value):
    return 0 < value[0] <= MAX_SHAPES


class Shape:
    """A field set a stream interns (``shapes`` database: key ``sid +
    T``, value the names as a msgpack array): how its entries are
    stored and read back."""

    __slots__ = ("tag", "names", "_enc", "_subs", "_t")

    def __init__(self, tag, names):
        self.tag = tag
        self.names = names = tuple(names)
        t = bytes((tag,))
        self._enc = t + b"%b" + b"".join(SEPARATORS[j:j + 1] + b"%b" for j in range(len(names) - 1))
        self._t = t
        self._subs = [(SEPARATORS[j - 1:j], b"\n" + names[j] + b"\n") for j in range(1, len(names))]

    @staticmethod
    def eligible(names):
        """Whether a stream may intern field set ``names``."""
        if not 0 < len(names) <= SHAPE_MAX_FIELDS:
            return False
        joined = b"".join(names)
        return len(joined) <= SHAPE_MAX_BYTES and len(joined.translate(None, UNSAFE)) == len(joined)

    def record(self):
        return packb(list(self.names))

    def encode(self, values):
        """The stored value of an entry with these names and ``values``,
        or None if a value has an unsafe byte (store a record then)."""
        v = self._enc % tuple(values)
        if len(v.translate(None, UNSAFE)) != len(v) - len(values):
            return None
        return v

    def encode_safe(self, values):
        """``encode`` of values known to hold no unsafe byte."""
        return self._enc % tuple(values)

    def encode_columns(self, cols):
        """``encode_safe`` of many entries at once, in one formatting
        pass: ``cols[c][j]`` is the value of ``names[c]`` in entry j, no
        value holding an unsafe byte (nor a newline, which the stored
        values never hold either: it cuts them apart)."""
        n = len(cols[0])
        k = len(cols)
        if k == 1:
            flat = cols[0]
        else:
            flat = [None] * (k * n)
            for c, col in enumerate(cols):
                flat[c::k] = col
        out = ((self._enc + b"\n") * n % tuple(flat)).split(b"\n")
        out.pop()
        return out

    def fields(self, value):
        vals = value[1:].translate(TO_NEWLINE).split(b"\n")
        out = [None] * (2 * len(vals))
        out[0::2] = self.names                     # ValueError if the counts differ (a damaged value)
        out[1::2] = vals
        return out

    def expand(self, keys, values, sep):
        """Shaped ``values`` (all of this shape) with their ``keys`` as
        records or redis-cli lines: one bytes object, ``sep`` between
        entries; each entry's ID and fields separated by newlines.  A
        handful of C-level passes over the run: the tag and separator
        bytes occur nowhere else."""
        n = len(keys)
        try:
            # the IDs and values in one formatting call (20-byte keys)
            ints = struct.unpack(">" + "8xQI" * n, b"".join(keys))
            flat = [None] * (3 * n)
            flat[0::3] = ints[0::2]
            flat[1::3] = ints[1::2]
            flat[2::3] = values
            joined = ((b"%d-%d%b" + sep) * n % tuple(flat))[:-len(sep)]
        except struct.error:                      # a wide key in the run: one entry at a time
            joined = sep.join(b"%d-%d%b" % (*id_from_entry_key(k), v) for k, v in zip(keys, values))
        joined = joined.replace(self._t, b"\n" + self.names[0] + b"\n")
        for s, r in self._subs:
            joined = joined.replace(s, r)
        return joined


def shape_key(sid, tag):
    return U64.pack(sid) + bytes((tag,))


def decode_shape(key, value):
    return Shape(key[8], msgpack.unpackb(value, raw=True))


Entry = namedtuple("Entry", ("id", "fields"))
Entry.__doc__ = """An entry as the verbs give it: its ID ``(ms, seq)`` and its fields,
``[field, value, ...]`` (None for a pending entry deleted from the stream)."""


def decode_stored(key, value, shapes):
    """A stored value -> Entry (``shapes``: tag -> Shape of the entry's
    stream)."""
    t = value[0]
    if 0 < t <= MAX_SHAPES:
        return Entry(id_from_entry_key(key), shapes[t].fields(value))
    return Entry(id_from_entry_key(key), decode_entry(value)[1])


def stored_fields(value, shapes):
    t = value[0]
    if 0 < t <= MAX_SHAPES:
        return shapes[t].fields(value)
    return decode_entry(value)[1]


_first_byte = itemgetter(0)
_second_item = itemgetter(1)


def _id_texts(ints, n):
    """The ``ms-seq`` texts of ``n`` IDs (``ints``: ms, seq, ms, seq
    ...), one formatting pass; one millisecond's (a bulk add's) with
    the millisecond formatted once."""
    ms = ints[0::2]
    if ms.count(ms[0]) == n:
        ids = ((b"%d-" % ms[0]) + b"%d\n") * n % ints[1::2]
    else:
        ids = b"%d-%d\n" * n % ints
    out = ids.split(b"\n")
    out.pop()
    return out


def runs(keys, values):
    """(tag, keys, values) runs of consecutive entries stored alike
    (tag 0: records, text or binary), in order."""
    kinds = set(map(_first_byte, values))
    if len(kinds) == 1 or not any(0 < t <= MAX_SHAPES for t in kinds):
        t = values[0][0]
        yield (t if 0 < t <= MAX_SHAPES else 0), keys, values
        return
    start = 0
    cur = None
    for n, v in enumerate(values):
        t = v[0]
        if not 0 < t <= MAX_SHAPES:
            t = 0
        if t != cur:
            if n > start:
                yield cur, keys[start:n], values[start:n]
            start, cur = n, t
    yield cur, keys[start:], values[start:]


def records(keys, values, shapes):
    """Stored values (with their keys) -> records (``encode_entry``)."""
    out = []
    for t, ks, vs in runs(keys, values):
        if t == 0:
            out.extend(vs)
        else:
            out.extend(shapes[t].expand(ks, vs, b"\x00").split(b"\x00"))
    return out


class Entries:
    """A range of entries as stored (XRANGE, XREVRANGE, XREAD): the (key,
    stored value) pairs and the stream's shapes, decoded only when
    needed: a sequence of Entry rows.  For writers that format many
    entries at once, ``text()`` gives the redis-cli --raw lines a run at
    a time, ``columns()`` the runs laid out for the RESP encoder and
    ``values`` the records."""

    __slots__ = ("pairs", "shapes", "_records")

    def __init__(self, pairs=(), shapes=None):
        self.pairs = pairs            # (entry key, stored value), in reply order
        self.shapes = shapes or {}
        self._records = None

    def __len__(self):
        return len(self.pairs)

    def __iter__(self):
        shapes = self.shapes
        return (decode_stored(k, v, shapes) for k, v in self.pairs)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [decode_stored(k, v, self.shapes) for k, v in self.pairs[i]]
        k, v = self.pairs[i]
        return decode_stored(k, v, self.shapes)

    def __eq__(self, other):
        if isinstance(other, Entries):
            other = other.decoded()
        return self.decoded() == other

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable

    def decoded(self):
        """[Entry, ...]"""
        return list(self)

    def _split(self) -> "tuple[list, list]":
        pairs = self.pairs
        return list(map(_first_byte, pairs)), list(map(_second_item, pairs))

    @property
    def values(self):
        """The records of the entries (``encode_entry``), in reply order."""
        if self._records is None:
            self._records = records(*self._split(), self.shapes) if self.pairs else []
        return self._records

    def columns(self):
        """The entries a run at a time, for writers that format many at
        once (the RESP encoder): ``(names, ids, values)`` for a run of one
        shape -- ``ids`` the ID texts, ``values`` the field values of all
        its entries in order, ``len(names)`` per entry -- and ``(None,
        entries, None)`` for a run of records (``[id_text, fields]``
        each).  A shaped run costs a few C-level passes, not a decode per
        entry."""
        if not self.pairs:
            return
        keys, values = self._split()
        for t, ks, vs in runs(keys, values):
            if t == 0:
                yield None, [decode_entry(v) for v in vs], None
                continue
            n = len(ks)
            try:
                ids = _id_texts(struct.unpack(">" + "8xQI" * n, b"".join(ks)), n)
            except struct.error:                  # a wide key in the run
                ids = [b"%d-%d" % id_from_entry_key(k) for k in ks]
            flat = b"".join(vs).translate(TO_NEWLINE).split(b"\n")
            del flat[0]                           # before the first entry's tag
            yield self.shapes[t].names, ids, flat

    def text(self):
        """The raw lines (no trailing newline), or None if some entry is
        in binary form or a field starts with NUL (then decode)."""
        if not self.pairs:
            return None
        keys, values = self._split()
        parts = []
        for t, ks, vs in runs(keys, values):
            if t == 0:
                joined = b"\n".join(vs)
                if joined[:1] == b"\x00" or b"\n\x00" in joined:
                    return None
                parts.append(joined)
            else:
                parts.append(self.shapes[t].expand(ks, vs, b"\n"))
        return b"\n".join(parts)


# =================================================================== nodes
# A stream's listpack nodes (storage.parts.nodes.Node), keyed like entries by
# the node's master ID; the record is the fixed part (live, deleted, body
# bytes, last ID) followed by the master field names as a msgpack array.

_NODE = struct.Struct(">IIQQQ")      # live, deleted, body bytes, last ms, last seq


def node_key(sid, i):
    return _KEY3.pack(sid, i[0], i[1])


def encode_node_names(names):
    """The tail of a node record: the master field names (packed once per
    node, kept by the caller)."""
    return packb(list(names))


def encode_node(live, deleted, body, last, names_blob):
    return _NODE.pack(live, deleted, body, last[0], last[1]) + names_blob


def node_live(value):
    """The live-entry count of a node record."""
    return _NODE.unpack_from(value)[0]


def decode_node(key, value):
    """-> (master ID, live, deleted, body, last ID, names tuple, names blob)"""
    live, deleted, body, lms, lseq = _NODE.unpack_from(value)
    blob = value[_NODE.size:]
    return (ID.unpack_from(key, 8), live, deleted, body, (lms, lseq),
            tuple(msgpack.unpackb(blob, raw=True)), blob)
