"""The constants of Redis's serialization, its errors and bounds, CRC-64,
LZF and the primitive encodings (lengths, strings, times, IDs).
"""
import struct

from storage.codec.keys import listpack_int

RDB_VERSION = 10              # what xs writes: Redis 7.0 refuses anything newer
RDB_VERSION_7_2 = 11          # Redis 7.2's, the first with RDB_TYPE_STREAM_LISTPACKS_3 (xs writes it for a replica)
RDB_VERSION_MAX = 12          # the newest version xs reads (Redis 7.4 / 8.0)
RDB_MAGIC = b"REDIS"

# object types (rdb.h)
RDB_TYPE_STRING, RDB_TYPE_LIST, RDB_TYPE_SET, RDB_TYPE_ZSET, RDB_TYPE_HASH, RDB_TYPE_ZSET_2 = 0, 1, 2, 3, 4, 5
RDB_TYPE_MODULE_PRE_GA, RDB_TYPE_MODULE_2 = 6, 7
RDB_TYPE_HASH_ZIPMAP, RDB_TYPE_LIST_ZIPLIST, RDB_TYPE_SET_INTSET, RDB_TYPE_ZSET_ZIPLIST = 9, 10, 11, 12
RDB_TYPE_HASH_ZIPLIST, RDB_TYPE_LIST_QUICKLIST, RDB_TYPE_STREAM_LISTPACKS = 13, 14, 15
RDB_TYPE_HASH_LISTPACK, RDB_TYPE_ZSET_LISTPACK, RDB_TYPE_LIST_QUICKLIST_2 = 16, 17, 18
RDB_TYPE_STREAM_LISTPACKS_2, RDB_TYPE_SET_LISTPACK, RDB_TYPE_STREAM_LISTPACKS_3 = 19, 20, 21
RDB_TYPE_HASH_METADATA_PRE_GA, RDB_TYPE_HASH_LISTPACK_EX_PRE_GA = 22, 23
RDB_TYPE_HASH_METADATA, RDB_TYPE_HASH_LISTPACK_EX = 24, 25
RDB_STREAM_TYPES = frozenset((RDB_TYPE_STREAM_LISTPACKS, RDB_TYPE_STREAM_LISTPACKS_2, RDB_TYPE_STREAM_LISTPACKS_3))

# opcodes of an RDB file
RDB_OPCODE_SLOT_INFO, RDB_OPCODE_FUNCTION2, RDB_OPCODE_FUNCTION_PRE_GA = 244, 245, 246
RDB_OPCODE_MODULE_AUX, RDB_OPCODE_IDLE, RDB_OPCODE_FREQ, RDB_OPCODE_AUX = 247, 248, 249, 250
RDB_OPCODE_RESIZEDB, RDB_OPCODE_EXPIRETIME_MS, RDB_OPCODE_EXPIRETIME = 251, 252, 253
RDB_OPCODE_SELECTDB, RDB_OPCODE_EOF = 254, 255

_TYPE_NAMES = {0: "string", 1: "list", 2: "set", 3: "zset", 4: "hash", 5: "zset", 6: "module", 7: "module",
               9: "hash", 10: "list", 11: "set", 12: "zset", 13: "hash", 14: "list", 15: "stream", 16: "hash",
               17: "zset", 18: "list", 19: "stream", 20: "set", 21: "stream", 22: "hash", 23: "hash",
               24: "hash", 25: "hash"}

STREAM_ITEM_FLAG_DELETED = 1
STREAM_ITEM_FLAG_SAMEFIELDS = 2

_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1
_I64_MIN = -(1 << 63)
_ID = struct.Struct(">QQ")
_U32BE = struct.Struct(">I")
_U64BE = struct.Struct(">Q")
_I64LE = struct.Struct("<q")
_U64LE = struct.Struct("<Q")
_U16LE = struct.Struct("<H")
_U32LE = struct.Struct("<I")
_I8 = struct.Struct("<b")
_I16LE = struct.Struct("<h")
_I32LE = struct.Struct("<i")


class RdbError(Exception):
    """Not valid Redis serialization (the message says what, for a person;
    ``offset``: the byte it is about, when the message is not about the
    reader's position)."""

    def __init__(self, message, offset=None):
        super().__init__(message)
        self.offset = offset


# Bounds on what a reader expands, checked before it expands anything.
#
# * LZF: a back reference is at most 3 bytes (control, length, offset)
#   and copies at most 7 + 255 + 2 = 264 bytes; a literal run of n bytes
#   costs n + 1.  No LZF data expands more than 88-fold, so an announced
#   length over 88 times the compressed one is refused before anything
#   is allocated (Redis would try the allocation and fail).
# * A stream node's listpack: at most 1 GB, LISTPACK_MAX_SAFETY_SIZE of
#   listpack.c -- lpSafeToAdd refuses to grow a listpack past it, so no
#   Redis makes a larger node (stream-node-max-bytes, default 4096, can
#   be set higher, but a node only passes it by its one last entry, and
#   an entry is bounded by that same 1 GB).  A smaller bound would refuse
#   valid payloads (one entry with a 100 MB field is a node over 64 MB).
#   What a node costs here beyond its own bytes is its master field
#   names and one entry at a time: listpacks are walked in place, never
#   turned into an object per element.
# * Strings of the types xs does not hold are never decompressed: an LZF
#   string is skipped by its compressed length.
RDB_LZF_MAX_RATIO = 88
RDB_LISTPACK_MAX = 1 << 30


def rdb_type_name(t):
    """The Redis type an RDB object type holds ("string", "hash" ...), or None."""
    return _TYPE_NAMES.get(t)


def rdb_is_object_type(t):
    """rdbIsObjectType of Redis 7.4 / 8.0."""
    return 0 <= t <= 7 or 9 <= t <= 25


# ==================================================================== CRC-64

def _crc_tables():
    poly = 0x95AC9329AC4BC9B5            # 0xad93d23594c935a9 (Jones), reflected
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        t0.append(c)
    tables = [t0]
    for _ in range(7):                   # slicing-by-8: table k is table k-1 one byte further
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ t0[prev[i] & 0xFF] for i in range(256)])
    return tables


_CRC = None


def rdb_crc64(data, crc=0):
    """crc64.c's ``crc64(crc, data, len)``: CRC-64/Jones, reflected, no
    final xor; ``crc`` continues an earlier call."""
    global _CRC
    if _CRC is None:
        _CRC = _crc_tables()
    t0, t1, t2, t3, t4, t5, t6, t7 = _CRC
    mv = memoryview(data).cast("B")
    n = len(mv)
    n8 = n - n % 8
    if n8:
        for w in mv[:n8].cast("Q") if _LITTLE else _words_le(mv[:n8]):
            c = crc ^ w
            crc = (t7[c & 0xFF] ^ t6[(c >> 8) & 0xFF] ^ t5[(c >> 16) & 0xFF] ^ t4[(c >> 24) & 0xFF]
                   ^ t3[(c >> 32) & 0xFF] ^ t2[(c >> 40) & 0xFF] ^ t1[(c >> 48) & 0xFF] ^ t0[c >> 56])
    for b in mv[n8:]:
        crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


_LITTLE = struct.pack("=H", 1) == b"\x01\x00"


def _words_le(mv):
    return (_U64LE.unpack_from(mv, i)[0] for i in range(0, len(mv), 8))


# ====================================================================== LZF

def rdb_lzf_decompress(data, out_len):
    """lzf_d.c: ``data`` decompressed, which must come to exactly
    ``out_len`` bytes (RdbError otherwise)."""
    out = bytearray()
    ip, n = 0, len(data)
    try:
        while ip < n:
            ctrl = data[ip]
            ip += 1
            if ctrl < 32:                                  # a literal run of ctrl + 1 bytes
                ctrl += 1
                if ip + ctrl > n:
                    raise RdbError("LZF data ends inside a literal run")
                out += data[ip:ip + ctrl]
                ip += ctrl
            else:                                          # a back reference
                length = ctrl >> 5
                if length == 7:
                    length += data[ip]
                    ip += 1
                ref = len(out) - ((ctrl & 0x1F) << 8) - 1 - data[ip]
                ip += 1
                length += 2
                if ref < 0:
                    raise RdbError("LZF back reference before the start of the data")
                if len(out) + length > out_len:
                    raise RdbError("LZF data longer than announced")
                dist = len(out) - ref
                if dist >= length:
                    out += out[ref:ref + length]
                else:                                      # overlapping: the pattern repeats
                    chunk = out[ref:]
                    reps = -(-length // dist)
                    out += (chunk * reps)[:length]
            if len(out) > out_len:
                raise RdbError("LZF data longer than announced")
    except IndexError:
        raise RdbError("LZF data ends inside a back reference")
    if len(out) != out_len:
        raise RdbError("Invalid LZF compressed string")
    return bytes(out)


def _lzf_lengths(clen, ulen, limit=None):
    """Refuse (before anything is read or allocated) an LZF string whose
    announced length its compressed length cannot produce, or over
    ``limit``."""
    if limit is not None and ulen > limit:
        raise RdbError("a string of %d bytes is over the %d-byte limit" % (ulen, limit))
    if ulen == 0 or clen == 0 or ulen > clen * RDB_LZF_MAX_RATIO:
        raise RdbError("invalid LZF compressed string")


# ==================================================================== writing

def rdb_len(n):
    """rdbSaveLen."""
    if n < 64:
        return bytes((n,))
    if n < 16384:
        return bytes((((n >> 8) & 0x3F) | 0x40, n & 0xFF))
    if n <= 0xFFFFFFFF:
        return b"\x80" + _U32BE.pack(n)
    return b"\x81" + _U64BE.pack(n)


def rdb_string(b):
    """rdbSaveRawString without compression: an integer-encoded string
    when ``b`` is a canonical integer of at most 11 bytes within int32,
    else the length and the bytes."""
    if len(b) <= 11:
        v = listpack_int(b)
        if v is not None:
            if -128 <= v <= 127:
                return b"\xc0" + _I8.pack(v)
            if -32768 <= v <= 32767:
                return b"\xc1" + _I16LE.pack(v)
            if -(1 << 31) <= v < (1 << 31):
                return b"\xc2" + _I32LE.pack(v)
    return rdb_len(len(b)) + b


def rdb_ms_time(t):
    """rdbSaveMillisecondTime: int64, little-endian."""
    return _I64LE.pack(t)


def rdb_raw_id(i):
    """A stream ID as a radix-tree key: ms and seq, big-endian."""
    return _ID.pack(i[0], i[1])
