"""Every key and value layout of the store, and nothing else.

The environment holds these named databases (the main database is never
used for data):

  keys      name key -> stream record        one per stream (the keyspace)
  entries   sid + ms + seq -> fields         stream entries, in ID order
  groups    sid + name key -> group record   consumer groups of a stream
  consumers gid + name key -> consumer rec.  consumers of a group
  pel       gid + ms + seq -> pending rec.   the group PEL, by entry ID
  cpel      gid + cid + ms + seq -> ""       per-consumer PEL index
  ptime     gid + time + ms + seq -> ""      PEL by last delivery time
  idmp      sid + pid key + iid -> idmp rec. idempotent-producer history
  meta      name -> value                    counters and format version

``sid``, ``gid`` and ``cid`` are 64-bit numbers handed out once from
counters in ``meta``: the stream's entries and groups hang off the number,
not off the name, so RENAME moves one record, and a stream deleted and
created again never sees old data.  All integers are big-endian so that
byte order is numeric order: entries iterate in ID order and the time
index in delivery-time order.

Names (streams, groups, consumers, producers) can be of any length.
LMDB keys cannot (511 bytes), so a "name key" is ``0x00 + name`` for
names up to ``SHORT_NAME`` bytes and ``0x01 + sha256(name)`` beyond; the
full name is then kept in the record.
"""
import struct

import msgpack

SHORT_NAME = 400

U64 = struct.Struct(">Q")
ID = struct.Struct(">QQ")            # ms, seq
ENTRY = struct.Struct(">QQQ")        # sid, ms, seq
PEL = ENTRY                          # gid, ms, seq
CPEL = struct.Struct(">QQQQ")        # gid, cid, ms, seq
PTIME = CPEL                         # gid, delivery time, ms, seq

DATABASES = (b"keys", b"entries", b"groups", b"consumers", b"pel", b"cpel", b"ptime", b"idmp", b"meta")
FORMAT_VERSION = 1

packb = msgpack.Packer(use_bin_type=True).pack


def unpackb(b):
    return msgpack.unpackb(b, raw=False)


# ------------------------------------------------------------------ names

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


# ----------------------------------------------------------------- entries

def entry_key(sid, i):
    return ENTRY.pack(sid, i[0], i[1])


def id_from_entry_key(key):
    return ID.unpack_from(key, 8)


def sid_prefix(sid):
    return U64.pack(sid)


def encode_entry(id_text, fields):
    """An entry's stored value.  Normally its text form, the lines
    redis-cli --raw prints for it: ``b"ms-seq\nfield\nvalue..."`` -- so a
    raw XRANGE is one join of stored values, and decoding is one split.
    If a field contains a newline, ``0x00 + msgpack([id, fields])``
    instead (a text value starts with a digit, never 0x00).  Fields keep
    their order and duplicates; the key stays the authority on the ID."""
    body = b"\n".join(fields)
    if body.count(b"\n") == len(fields) - 1:
        return id_text + b"\n" + body
    return b"\x00" + packb([id_text, fields])


def decode_entry(value):
    """Stored value -> ``[id_text, fields]``."""
    if value[:1] != b"\x00":
        parts = value.split(b"\n")
        return [parts[0], parts[1:]]
    return msgpack.unpackb(value[1:], raw=False)


class Entries:
    """A range of entries as stored (XRANGE / XREVRANGE replies): decoded
    only when needed; ``text()`` gives the redis-cli --raw lines at the
    cost of one join when every entry is in text form."""

    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values          # stored values, in reply order

    def __len__(self):
        return len(self.values)

    def __iter__(self):
        return map(decode_entry, self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return list(map(decode_entry, self.values[i]))
        return decode_entry(self.values[i])

    def __eq__(self, other):
        if isinstance(other, Entries):
            other = other.decoded()
        return self.decoded() == other

    __hash__ = None

    def decoded(self):
        """[[id_text, fields], ...]"""
        return list(map(decode_entry, self.values))

    def text(self):
        """The raw lines (no trailing newline), or None if some entry is
        not in text form (then decode)."""
        if not self.values:
            return None
        joined = b"\n".join(self.values)
        if joined[:1] == b"\x00" or b"\n\x00" in joined:
            return None   # a binary-form entry (or a field starting with NUL): decode
        return joined


# ----------------------------------------------------------- stream record

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
        self.name = name

    def encode(self):
        return packb([self.sid, self.length, self.last_id[0], self.last_id[1],
                      self.max_deleted[0], self.max_deleted[1], self.entries_added,
                      self.idmp_duration, self.idmp_maxsize, self.idmp_stats,
                      self.idmp_cfg, self.name])

    @classmethod
    def decode(cls, value):
        v = msgpack.unpackb(value, raw=False)
        m = cls.__new__(cls)
        (m.sid, m.length, lms, lseq, dms, dseq, m.entries_added, m.idmp_duration,
         m.idmp_maxsize, m.idmp_stats, m.idmp_cfg, m.name) = v
        m.last_id = (lms, lseq)
        m.max_deleted = (dms, dseq)
        return m


# ------------------------------------------------------------ group records

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

    def __init__(self, gid, name, last_id, entries_read):
        self.gid = gid
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel_count = 0

    def encode(self):
        return packb([self.gid, self.name, self.last_id[0], self.last_id[1],
                      self.entries_read, self.pel_count])

    @classmethod
    def decode(cls, value):
        gid, name, ms, seq, er, pc = msgpack.unpackb(value, raw=False)
        g = cls.__new__(cls)
        g.gid, g.name, g.last_id, g.entries_read, g.pel_count = gid, name, (ms, seq), er, pc
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
        return packb([self.cid, self.name, self.seen_time, self.active_time, self.pel_count])

    @classmethod
    def decode(cls, value):
        c = cls.__new__(cls)
        c.cid, c.name, c.seen_time, c.active_time, c.pel_count = msgpack.unpackb(value, raw=False)
        return c


# ------------------------------------------------------------- PEL records

def pel_key(gid, i):
    return PEL.pack(gid, i[0], i[1])


def id_from_pel_key(key):
    return ID.unpack_from(key, 8)


PENDING = struct.Struct(">QQQ")      # owner cid, time key, delivery count


def encode_pending(cid, delivery_time, delivery_count):
    """A PEL record, 24 bytes: owner (0: unowned, after XNACK), time key
    (last delivery time; the NACK order for unowned entries), delivery
    count (up to LLONG_MAX)."""
    return PENDING.pack(cid, delivery_time, delivery_count)


def decode_pending(value):
    """-> (cid, time key, delivery count)"""
    return PENDING.unpack(value)


def cpel_key(gid, cid, i):
    return CPEL.pack(gid, cid, i[0], i[1])


def cpel_prefix(gid, cid):
    return ID.pack(gid, cid)


def id_from_cpel_key(key):
    return ID.unpack_from(key, 16)


def ptime_key(gid, t, i):
    return PTIME.pack(gid, t, i[0], i[1])


def ptime_from_key(key):
    """(delivery time, (ms, seq)) of a time-index key."""
    _, t, ms, seq = PTIME.unpack(key)
    return t, (ms, seq)


# -------------------------------------------------------- idempotency (IDMP)
#
# Per producer P = sid + 2-byte length + name key of the producer id:
#   P + "i" + iid key    -> ID the IID was first recorded with (16 bytes)
#   P + "o" + ID         -> iid key  (insertion order = ID order: eviction
#                                     of the oldest, expiry by ID time)
#   P + "n"              -> number of IIDs the producer holds (decimal)
# An iid key is the IID's name key, or 0x01 + sha256(IID) when the whole
# key would not fit LMDB's 511-byte limit.

LMDB_KEY_MAX = 511


def idmp_pid_prefix(sid, pid):
    pk = name_key(pid)
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


def idmp_count_key(prefix):
    return prefix + b"n"
