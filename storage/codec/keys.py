"""The vocabulary of the layouts: format versions, the databases, integer
and ID packing, name keys, meta keys (storage.codec says what each
database holds)."""
import struct

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


def number_of(key):
    """The number (a sid or a gid) a key hanging off one starts with."""
    return U64.unpack_from(key)[0]


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
META_IDMP_DEFAULTS = b"idmp-defaults"  # "duration maxsize" of new streams (verbs.settings); absent: 100 100


def encode_node_limits(max_bytes, max_entries):
    return b"%d %d" % (max_bytes, max_entries)


def encode_pair(a, b):
    return b"%d %d" % (a, b)


def decode_pair(raw, defaults):
    """Two integers stored as ``raw`` by encode_pair (None: ``defaults``)."""
    if raw is None:
        return defaults
    a, b = raw.split()
    return int(a), int(b)


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


EXPIRY_PREFIX = b"e"


def expiry_key(at, name):
    """meta: the expiry index, one key per stream with a TTL: ``e``, the
    time (Unix ms, big-endian, so the keys run in time order), the name
    key (the value is the full name)."""
    return EXPIRY_PREFIX + U64.pack(at) + name_key(name)


def expiry_time(key):
    """The time of an expiry index key."""
    return U64.unpack_from(key, 1)[0]


def listpack_int(b):
    """The int64 a listpack stores the string ``b`` as (lpStringToInt64:
    canonical decimal, at most 20 bytes, no sign but '-', no leading zero,
    no "-0"), or None if it is stored as a string (storage.parts.nodes,
    storage.codec.rdb)."""
    n = len(b)
    if n == 0 or n >= 21:
        return None
    if n == 1:
        return b[0] - 48 if 48 <= b[0] <= 57 else None
    neg = b[0] == 45
    digits = b[1:] if neg else b
    if not digits.isdigit() or digits[0] == 48:
        return None
    v = int(digits)
    if neg:
        v = -v
        return v if v >= -(1 << 63) else None
    return v if v <= (1 << 63) - 1 else None
