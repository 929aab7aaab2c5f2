"""Stream, group and consumer records, the PEL's three indexes and the
idempotent-producer history."""


from storage.codec.keys import _KEY3, _KEY4, _PENDING, ID, LMDB_KEY_MAX, U64, name_key, packb, unpackb

# ================================================================= records
#
# Format 2: a msgpack map per record.  ``decode`` gives every field its
# default when the map lacks it, so a later version can add a field
# without a migration (and without touching stores that never use it).

def _pair(v):
    return (v[0], v[1])


IDMP_DEFAULTS = (100, 100)  # IDMP-DURATION (s), IDMP-MAXSIZE of a stream: Redis's stream-idmp-* defaults


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
                 "expire_at",      # when the key expires, Unix ms (EXPIRE ...), or None
                 "name")           # full name, kept only for hashed name keys

    def __init__(self, sid, name=None):
        self.sid = sid
        self.length = 0
        self.last_id = (0, 0)
        self.max_deleted = (0, 0)
        self.entries_added = 0
        self.idmp_duration, self.idmp_maxsize = IDMP_DEFAULTS
        self.idmp_stats = [0, 0, 0, 0]
        self.idmp_cfg = False
        self.nodes_from = None
        self.expire_at = None
        self.name = name

    def encode(self):
        d = {"sid": self.sid, "length": self.length, "last-id": self.last_id,
             "max-deleted": self.max_deleted, "entries-added": self.entries_added,
             "idmp-duration": self.idmp_duration, "idmp-maxsize": self.idmp_maxsize,
             "idmp-stats": self.idmp_stats, "idmp-cfg": self.idmp_cfg, "name": self.name}
        if self.nodes_from is not None:
            d["nodes-from"] = self.nodes_from
        if self.expire_at is not None:
            d["expire-at"] = self.expire_at
        return packb(d)

    @classmethod
    def decode(cls, value):
        d = unpackb(value)
        m = cls(d["sid"], d.get("name"))
        m.length = d.get("length", 0)
        m.last_id = _pair(d.get("last-id", (0, 0)))
        m.max_deleted = _pair(d.get("max-deleted", (0, 0)))
        m.entries_added = d.get("entries-added", 0)
        m.idmp_duration = d.get("idmp-duration", IDMP_DEFAULTS[0])
        m.idmp_maxsize = d.get("idmp-maxsize", IDMP_DEFAULTS[1])
        m.idmp_stats = list(d.get("idmp-stats", (0, 0, 0, 0)))
        m.idmp_cfg = d.get("idmp-cfg", False)
        nf = d.get("nodes-from")
        m.nodes_from = _pair(nf) if nf is not None else None
        m.expire_at = d.get("expire-at")
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


def cname_ids(key):
    """(gid, cid) of a cnames key."""
    return ID.unpack(key)


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
