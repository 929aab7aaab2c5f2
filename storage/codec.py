"""Every key and value layout of the store (and of the snapshot file),
and nothing else.  No other module packs or unpacks a layout: they call
the paired helpers here (``entry_key(sid, id)`` / ``id_from_entry_key``).

The environment holds these named databases (the main database is never
used for data):

  keys      name key -> stream record        one per stream (the keyspace)
  log       sid + ms + seq -> entry          stream entries, in ID order
                                             (format 4: see "entries" below)
  shapes    sid + T -> field names           field sets a stream interns
  groups    sid + name key -> group record   consumer groups of a stream
  consumers gid + name key -> consumer rec.  consumers of a group
  cnames    gid + cid -> consumer name       owner lookups (PEL -> name)
  pel       gid + ms + seq -> pending rec.   the group PEL, by entry ID
  cpel      gid + cid + ms + seq -> ""       per-consumer PEL index
  ptime     gid + time + ms + seq -> ""      PEL by last delivery time
  idmp      sid + pid key + ...              idempotent-producer history
  nodes     sid + ms + seq -> node record    the stream's listpack nodes as
                                             Redis would have them, by master
                                             ID (storage.parts.nodes)
  meta      name -> value                    format version, counters,
                                             per-stream change counters

``sid``, ``gid`` and ``cid`` are 64-bit numbers handed out once from
counters in ``meta``: a stream's entries and groups hang off its number,
not its name, so RENAME moves one record, and a stream deleted and
created again never sees old data.  Integers in keys are big-endian so
that byte order is numeric order: entries iterate in ID order and the
time index in delivery-time order.

Names (streams, groups, consumers, producers) can be of any length.
LMDB keys cannot (511 bytes), so a "name key" is ``0x00 + name`` for
names up to ``SHORT_NAME`` bytes and ``0x01 + sha256(name)`` beyond; the
full name is then kept in the record.

Format versions (``meta["format"]``; storage.migrate upgrades a store):
  1  records are positional msgpack arrays; the consumer-by-id index
     lives in ``consumers`` under ``gid + 0x02 + cid``.
  2  records are msgpack maps that decode with a default for any field
     they lack (a field can be added without a migration); the
     consumer-by-id index has its own database, ``cnames``.
  3  the ``nodes`` database: where Redis's listpack nodes would begin and
     what they hold (approximate trimming removes whole nodes).
  4  entries move from ``entries`` (24-byte keys, every entry a record)
     to ``log`` (20-byte keys; an entry whose field names the stream
     interns in ``shapes`` keeps only its values): about 60 bytes for an
     event of four short fields instead of 108.
"""
import struct
from operator import itemgetter

import msgpack

FORMAT_VERSION = 4          # what this code writes
OLDEST_FORMAT = 1           # the oldest format storage.migrate upgrades

SHORT_NAME = 400
LMDB_KEY_MAX = 511

DATABASES = (b"keys", b"log", b"shapes", b"groups", b"consumers", b"cnames", b"pel", b"cpel", b"ptime",
             b"idmp", b"meta", b"nodes")

U64 = struct.Struct(">Q")
ID = struct.Struct(">QQ")            # ms, seq
_KEY3 = struct.Struct(">QQQ")        # number, ms, seq (pel; format-3 entries)
_KEY4 = struct.Struct(">QQQQ")       # gid, cid|time, ms, seq (cpel, ptime)
_PENDING = struct.Struct(">QQQ")     # owner cid, time key, delivery count

packb = msgpack.Packer(use_bin_type=True).pack


def unpackb(b):
    return msgpack.unpackb(b, raw=False)


# ============================================================ plain values

def encode_id(i):
    """A stream ID as a 16-byte value (IDMP records)."""
    return ID.pack(i[0], i[1])


def decode_id(b, offset=0):
    return ID.unpack_from(b, offset)


def encode_count(n):
    """A counter value (decimal text: readable with mdb_dump)."""
    return b"%d" % n


def decode_count(b):
    return int(b) if b is not None else 0


def number_prefix(n):
    """The key prefix of everything hanging off number ``n`` (a sid or a gid)."""
    return U64.pack(n)


def prefix_end(p):
    """The smallest key greater than every key starting with ``p``
    (b"" when there is none: ``p`` is all 0xff)."""
    p = p.rstrip(b"\xff")
    return p[:-1] + bytes([p[-1] + 1]) if p else b""


# =================================================================== names

def name_key(name):
    """Key of a name in any name-keyed database (see module docstring)."""
    if len(name) <= SHORT_NAME:
        return b"\x00" + name
    import hashlib
    return b"\x01" + hashlib.sha256(name).digest()


def name_is_hashed(key):
    return key[:1] == b"\x01"


def name_from_key(key):
    """The name for a short name key; None for a hashed one (read the record)."""
    if key[:1] == b"\x00":
        return key[1:]
    return None


def name_key_parts(k):
    """(name, None) for a short name key, (None, sha256 digest) for a
    hashed one (exports carry keys of names they cannot spell)."""
    return (k[1:], None) if k[:1] == b"\x00" else (None, k[1:])


def hashed_name_key(digest):
    """The name key of a long name, from its SHA-256 digest."""
    return b"\x01" + digest


def valid_name_key(k):
    """Whether ``k`` is a well-formed name key (snapshot and import checks)."""
    return (k[:1] == b"\x00" and len(k) <= SHORT_NAME + 1) or (k[:1] == b"\x01" and len(k) == 33)


def scan_cursor(key):
    """The SCAN cursor that resumes at name key ``key``: 1 + its first 8
    bytes (zero-padded) as a big-endian number (0 means "done")."""
    return int.from_bytes(key[:8].ljust(8, b"\x00"), "big") + 1


def scan_start(cursor):
    """Where SCAN resumes for ``cursor``: its 8 bytes without the zero
    padding, so a key shorter than 8 bytes is found again (SCAN may
    repeat keys, never miss one)."""
    return b"" if cursor == 0 else (cursor - 1).to_bytes(8, "big").rstrip(b"\x00")


# ==================================================================== meta

META_FORMAT = b"format"
META_NODE_LIMITS = b"node-limits"     # "max-bytes max-entries" (storage.verbs.settings); absent: Redis's defaults
META_STORE_ID = b"store-id"           # 32 hex digits, made on first need (verbs.settings.identity)


def encode_node_limits(max_bytes, max_entries):
    return b"%d %d" % (max_bytes, max_entries)


def decode_node_limits(raw, defaults):
    """(stream-node-max-bytes, stream-node-max-entries) stored as ``raw``
    (None: ``defaults``, Redis's, which storage.parts.nodes owns)."""
    if raw is None:
        return defaults
    b, e = raw.split()
    return int(b), int(e)
COUNTER_SID, COUNTER_GID, COUNTER_CID, COUNTER_NACK = b"next-sid", b"next-gid", b"next-cid", b"next-nack"


def change_counter_key(name):
    """meta: the change counter of stream ``name`` (blocking readers)."""
    return b"v" + name_key(name)


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


def id_from_entry_key(key):
    ms, seq = _KEY_ID.unpack_from(key)
    if seq == SEQ_WIDE:
        seq = U64.unpack_from(key, SHORT_KEY)[0]
    return ms, seq


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


def decode_stored(key, value, shapes):
    """A stored value -> ``[id_text, fields]`` (``shapes``: tag -> Shape
    of the entry's stream)."""
    t = value[0]
    if 0 < t <= MAX_SHAPES:
        return [b"%d-%d" % id_from_entry_key(key), shapes[t].fields(value)]
    return decode_entry(value)


def stored_fields(value, shapes):
    t = value[0]
    if 0 < t <= MAX_SHAPES:
        return shapes[t].fields(value)
    return decode_entry(value)[1]


_first_byte = itemgetter(0)
_second_item = itemgetter(1)


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
    """A range of entries as stored (XRANGE / XREVRANGE replies): the
    (key, stored value) pairs and the stream's shapes; decoded only when
    needed.  ``text()`` gives the redis-cli --raw lines a run at a time,
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
        """[[id_text, fields], ...]"""
        return list(self)

    def _split(self):
        pairs = self.pairs
        return list(map(_first_byte, pairs)), list(map(_second_item, pairs))

    @property
    def values(self):
        """The records of the entries (``encode_entry``), in reply order."""
        if self._records is None:
            self._records = records(*self._split(), self.shapes) if self.pairs else []
        return self._records

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


# ================================================================= records
#
# Format 2: a msgpack map per record.  ``decode`` gives every field its
# default when the map lacks it, so a later version can add a field
# without a migration (and without touching stores that never use it).

def _pair(v):
    return (v[0], v[1])


class StreamMeta:
    """The stream record: everything Redis keeps in ``struct stream`` but
    the entries themselves."""

    __slots__ = ("sid",            # number the stream's data hangs off
                 "length",         # live entries
                 "last_id",        # last generated ID, (ms, seq)
                 "max_deleted",    # max-deleted-entry-id (largest XDELeted ID)
                 "entries_added",  # entries ever added (entries-added)
                 "idmp_duration",  # IDMP-DURATION, seconds
                 "idmp_maxsize",   # IDMP-MAXSIZE, IIDs kept per producer
                 "idmp_stats",     # [pids tracked, iids tracked, iids added, duplicates]
                 "idmp_cfg",       # True once XCFGSET or IDMP touched the stream
                 "nodes_from",     # first entry ID not yet in the ``nodes`` table, or None
                 "name")           # full name, kept only for hashed name keys

    def __init__(self, sid, name=None):
        self.sid = sid
        self.length = 0
        self.last_id = (0, 0)
        self.max_deleted = (0, 0)
        self.entries_added = 0
        self.idmp_duration = 100
        self.idmp_maxsize = 100
        self.idmp_stats = [0, 0, 0, 0]
        self.idmp_cfg = False
        self.nodes_from = None
        self.name = name

    def encode(self):
        d = {"sid": self.sid, "length": self.length, "last-id": self.last_id,
             "max-deleted": self.max_deleted, "entries-added": self.entries_added,
             "idmp-duration": self.idmp_duration, "idmp-maxsize": self.idmp_maxsize,
             "idmp-stats": self.idmp_stats, "idmp-cfg": self.idmp_cfg, "name": self.name}
        if self.nodes_from is not None:
            d["nodes-from"] = self.nodes_from
        return packb(d)

    @classmethod
    def decode(cls, value):
        d = unpackb(value)
        m = cls(d["sid"], d.get("name"))
        m.length = d.get("length", 0)
        m.last_id = _pair(d.get("last-id", (0, 0)))
        m.max_deleted = _pair(d.get("max-deleted", (0, 0)))
        m.entries_added = d.get("entries-added", 0)
        m.idmp_duration = d.get("idmp-duration", 100)
        m.idmp_maxsize = d.get("idmp-maxsize", 100)
        m.idmp_stats = list(d.get("idmp-stats", (0, 0, 0, 0)))
        m.idmp_cfg = d.get("idmp-cfg", False)
        nf = d.get("nodes-from")
        m.nodes_from = _pair(nf) if nf is not None else None
        return m

    @classmethod
    def decode_v1(cls, value):
        """A format-1 record (a positional array)."""
        (sid, length, lms, lseq, dms, dseq, added, dur, maxsize, stats, cfg, name) = unpackb(value)
        m = cls(sid, name)
        m.length, m.last_id, m.max_deleted, m.entries_added = length, (lms, lseq), (dms, dseq), added
        m.idmp_duration, m.idmp_maxsize, m.idmp_stats, m.idmp_cfg = dur, maxsize, list(stats), cfg
        return m


def group_key(sid, name):
    return U64.pack(sid) + name_key(name)


class GroupMeta:
    """A consumer group (``struct streamCG``)."""

    __slots__ = ("gid",           # number the group's PEL and consumers hang off
                 "name",          # group name
                 "last_id",       # last-delivered-id
                 "entries_read",  # entries-read counter, -1 when unknown
                 "pel_count",     # entries in the group PEL
                 "sid")           # the stream's number (not stored: known from the key)

    def __init__(self, gid, name, last_id, entries_read, sid=0):
        self.gid = gid
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel_count = 0
        self.sid = sid

    def encode(self):
        return packb({"gid": self.gid, "name": self.name, "last-id": self.last_id,
                      "entries-read": self.entries_read, "pel-count": self.pel_count})

    @classmethod
    def decode(cls, value, sid=0):
        d = unpackb(value)
        g = cls(d["gid"], d["name"], _pair(d.get("last-id", (0, 0))), d.get("entries-read", -1), sid)
        g.pel_count = d.get("pel-count", 0)
        return g

    @classmethod
    def decode_v1(cls, value):
        gid, name, ms, seq, er, pc = unpackb(value)
        g = cls(gid, name, (ms, seq), er)
        g.pel_count = pc
        return g


def consumer_key(gid, name):
    return U64.pack(gid) + name_key(name)


def gid_prefix(gid):
    return U64.pack(gid)


class ConsumerMeta:
    """A consumer of a group (``struct streamConsumer``)."""

    __slots__ = ("cid",           # number the consumer's PEL index hangs off
                 "name",          # consumer name
                 "seen_time",     # last interaction, ms
                 "active_time",   # last successful read or claim, ms (-1: never)
                 "pel_count")     # entries it owns in the group PEL

    def __init__(self, cid, name, now):
        self.cid = cid
        self.name = name
        self.seen_time = now
        self.active_time = -1
        self.pel_count = 0

    def encode(self):
        return packb({"cid": self.cid, "name": self.name, "seen-time": self.seen_time,
                      "active-time": self.active_time, "pel-count": self.pel_count})

    @classmethod
    def decode(cls, value):
        d = unpackb(value)
        c = cls(d["cid"], d["name"], d.get("seen-time", 0))
        c.active_time = d.get("active-time", -1)
        c.pel_count = d.get("pel-count", 0)
        return c

    @classmethod
    def decode_v1(cls, value):
        cid, name, seen, active, pc = unpackb(value)
        c = cls(cid, name, seen)
        c.active_time, c.pel_count = active, pc
        return c


def cname_key(gid, cid):
    """cnames: the consumer numbered ``cid`` in group ``gid``."""
    return ID.pack(gid, cid)


def v1_cname_index(key):
    """Format 1 kept the consumer-by-id index in ``consumers`` under
    ``gid + 0x02 + cid``: (gid, cid) for such a key, else None."""
    if len(key) == 17 and key[8:9] == b"\x02":
        return U64.unpack_from(key)[0], U64.unpack_from(key, 9)[0]
    return None


# ============================================================ PEL records

def pel_key(gid, i):
    return _KEY3.pack(gid, i[0], i[1])


def id_from_pel_key(key):
    return ID.unpack_from(key, 8)


def encode_pending(cid, delivery_time, delivery_count):
    """A PEL record, 24 bytes: owner (0: unowned, after XNACK), time key
    (last delivery time; the NACK order for unowned entries), delivery
    count (a uint64, as in Redis)."""
    return _PENDING.pack(cid, delivery_time, delivery_count)


def decode_pending(value):
    """-> (cid, time key, delivery count)"""
    return _PENDING.unpack(value)


def cpel_key(gid, cid, i):
    return _KEY4.pack(gid, cid, i[0], i[1])


def cpel_prefix(gid, cid):
    return ID.pack(gid, cid)


def id_from_cpel_key(key):
    return ID.unpack_from(key, 16)


def ptime_key(gid, t, i):
    return _KEY4.pack(gid, t, i[0], i[1])


def ptime_from_key(key):
    """(delivery time, (ms, seq)) of a time-index key."""
    _, t, ms, seq = _KEY4.unpack(key)
    return t, (ms, seq)


# ------------------------------------------------------ bulk-path helpers
# The hot loops (claiming, bulk ingest) bind these once instead of
# calling the paired helpers per key.

pack_key3 = _KEY3.pack                # (number, ms, seq) -> pel key
pack_key4 = _KEY4.pack                # (gid, cid|time, ms, seq) -> cpel / ptime key
unpack_key4 = _KEY4.unpack


def ptimes_from_keys(keys):
    """Time-index keys -> (delivery time, (ms, seq)) pairs."""
    unpack = _KEY4.unpack
    return ((t, (ms, seq)) for _, t, ms, seq in map(unpack, keys))


def pel_items(pairs):
    """(pel key, record) pairs -> ((ms, seq), (cid, time key, count))."""
    unpack_id, unpack_rec = ID.unpack_from, _PENDING.unpack
    return ((unpack_id(k, 8), unpack_rec(v)) for k, v in pairs)


# ======================================================== idempotency (IDMP)
#
# Per producer P = sid + 2-byte length + name key of the producer id:
#   P + "i" + iid key    -> ID the IID was first recorded with (16 bytes)
#   P + "o" + ID         -> iid key  (insertion order = ID order: eviction
#                                     of the oldest, expiry by ID time)
#   P + "n"              -> number of IIDs the producer holds (decimal)
# An iid key is the IID's name key, or 0x01 + sha256(IID) when the whole
# key would not fit LMDB's 511-byte limit.

def idmp_pid_prefix(sid, pid):
    """P for producer ``pid`` (bytes) of stream ``sid``."""
    return idmp_prefix_for_key(sid, name_key(pid))


def idmp_prefix_for_key(sid, pk):
    """P for a producer given by its name key (snapshots carry keys)."""
    return U64.pack(sid) + bytes([len(pk) >> 8, len(pk) & 255]) + pk


def idmp_iid_part(prefix, iid):
    """The iid key used under producer ``prefix``."""
    k = name_key(iid)
    if len(prefix) + 1 + len(k) > LMDB_KEY_MAX:
        import hashlib
        k = b"\x01" + hashlib.sha256(iid).digest()
    return k


def idmp_iid_key(prefix, iid_part):
    return prefix + b"i" + iid_part


def idmp_order_key(prefix, i):
    return prefix + b"o" + ID.pack(i[0], i[1])


def idmp_order_prefix(prefix):
    return prefix + b"o"


def idmp_id_from_order_key(prefix, key):
    return ID.unpack_from(key, len(prefix) + 1)


def idmp_count_key(prefix):
    return prefix + b"n"


def idmp_auto_iid(fields):
    """IDMPAUTO's IID: 16 bytes hashing the field/value pairs, independent
    of their order (Redis: XXH3-128 per pair, summed and xored; xs uses
    BLAKE2b, so the bytes differ from Redis's, the behaviour does not)."""
    import hashlib
    lo = hi = xlo = xhi = 0
    mask = (1 << 64) - 1
    for j in range(0, len(fields), 2):
        f, v = fields[j], fields[j + 1]
        h = hashlib.blake2b(f + len(f).to_bytes(8, "little") + v, digest_size=16).digest()
        a = int.from_bytes(h[:8], "little")
        b = int.from_bytes(h[8:], "little")
        lo = (lo + a) & mask
        hi = (hi + b) & mask
        xlo ^= a
        xhi ^= b

    def rotl(x):
        return ((x << 1) | (x >> 63)) & mask
    return (lo ^ rotl(xhi)).to_bytes(8, "little") + (hi ^ rotl(xlo)).to_bytes(8, "little")


def idmp_split_key(key):
    """(producer name key, kind, rest) of any IDMP key (kind b"i", b"o"
    or b"n")."""
    ln = (key[8] << 8) | key[9]
    pk = key[10:10 + ln]
    return pk, key[10 + ln:11 + ln], key[11 + ln:]


# ============================================================ snapshot file
# The binary snapshot format (docs/snapshot-format.md): framed records.

_SNAP_FRAME = struct.Struct(">BI")         # record type, payload length
_SNAP_VERSION = struct.Struct(">H")
_SNAP_PENDING = struct.Struct(">QQqQ")     # ms, seq, delivery time, delivery count
_SNAP_NACKED = struct.Struct(">QQQ")       # ms, seq, delivery count
SNAP_FRAME_SIZE = _SNAP_FRAME.size
SNAP_VERSION_SIZE = _SNAP_VERSION.size
SNAP_PENDING_SIZE = _SNAP_PENDING.size
SNAP_NACKED_SIZE = _SNAP_NACKED.size


def snap_frame(t, n):
    return _SNAP_FRAME.pack(t, n)


def snap_split_frame(b):
    """-> (record type, payload length)"""
    return _SNAP_FRAME.unpack(b)


def snap_version(v):
    return _SNAP_VERSION.pack(v)


def snap_split_version(b):
    return _SNAP_VERSION.unpack(b)[0]


def snap_pending(i, t, count):
    """PENDING payload (the time is signed in the file: at most 2^63-1)."""
    return _SNAP_PENDING.pack(i[0], i[1], t, count)


def snap_split_pending(b):
    """-> ((ms, seq), delivery time, count)"""
    ms, seq, t, n = _SNAP_PENDING.unpack(b)
    return (ms, seq), t, n


def snap_nacked(i, count):
    return _SNAP_NACKED.pack(i[0], i[1], count)


def snap_split_nacked(b):
    ms, seq, n = _SNAP_NACKED.unpack(b)
    return (ms, seq), n


def snap_entry_from_stored(i, value):
    """ENTRY payload of entry ``i`` from its stored value: the ID, then
    the fields as a msgpack array."""
    if value[:1] != b"\x00":
        fields = value.split(b"\n")
        del fields[0]
    else:
        fields = msgpack.unpackb(value[1:], raw=False)[1]
    return ID.pack(i[0], i[1]) + packb(fields)


def snap_split_entry(payload):
    """-> ((ms, seq), fields blob)"""
    return ID.unpack_from(payload), payload[16:]


def snap_iid(i, iid_key):
    return ID.pack(i[0], i[1]) + iid_key


def snap_split_iid(payload):
    return ID.unpack_from(payload), payload[16:]
