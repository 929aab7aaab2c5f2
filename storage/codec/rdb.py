"""Redis's own serialization: DUMP / RESTORE payloads and RDB files
(pure functions and one reader class; no store).

What is here, in Redis's terms (rdb.c, listpack.c, lzf_d.c, crc64.c,
t_stream.c):

* lengths (``rdbSaveLen`` / ``rdbLoadLen``: 6-, 14-, 32- and 64-bit
  forms) and strings (raw, integer-encoded INT8/16/32, LZF-compressed);
  strings are written as ``rdbSaveRawString`` does with
  ``rdbcompression no`` (integer encoding, never LZF), read in every form;
* LZF decompression (lzf_d.c), written here;
* CRC-64 with the Jones polynomial, reflected, as crc64.c (the check
  value of "123456789" is 0xe9c6d914c4b8d9ca);
* listpacks (listpack.c): every element encoding, back-lengths checked
  on reading; strings that are canonical 64-bit integers are written as
  integers, as ``lpAppend`` does;
* the stream value (RDB_TYPE_STREAM_LISTPACKS 15, _2 19, _3 21): the
  listpack nodes keyed by master ID (16 bytes, ms and seq big-endian),
  each node's master entry and entries (flags, ID deltas, SAMEFIELDS),
  then length, last ID, [first ID, max-deleted ID, entries-added], the
  groups (name, last ID, [entries-read], the PEL with delivery times and
  counts) and their consumers (name, seen-time, [active-time in 21],
  their PEL IDs).  Written as type 19, which Redis 7.0 reads;
* a DUMP payload: type byte, value, RDB version (2 bytes LE), CRC-64
  (8 bytes LE) of everything before it;
* an RDB file: "REDIS" + 4-digit version, aux fields, SELECTDB,
  RESIZEDB, expiry / LRU / LFU opcodes, FUNCTION2, key-value pairs, EOF,
  CRC-64; values of the types xs does not hold are read through (checked
  as far as their framing goes) so they can be skipped and counted.

Anything malformed raises ``RdbError`` with a message for a person; no
reader ever trusts a length before checking it against what is there.
Public names begin with ``rdb_`` / ``RDB_`` / ``Rdb`` (storage.codec
re-exports them on first use).
"""
import io
import os
import stat
import struct

from storage.codec.keys import listpack_int

RDB_VERSION = 10              # what xs writes: Redis 7.0 refuses anything newer
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


# ================================================================= listpacks

def _lp_int(v):
    """lpEncodeIntegerGetType: the encoding of integer ``v``."""
    if 0 <= v <= 127:
        return bytes((v,))
    if -4096 <= v <= 4095:
        if v < 0:
            v += 1 << 13
        return bytes(((v >> 8) | 0xC0, v & 0xFF))
    if -32768 <= v <= 32767:
        return b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    if -8388608 <= v <= 8388607:
        return b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    if -2147483648 <= v <= 2147483647:
        return b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    return b"\xf4" + (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")


def _lp_backlen(n):
    """lpEncodeBacklen, in the order it is stored (after the element)."""
    if n <= 127:
        return bytes((n,))
    if n < 16383:
        return bytes((n >> 7, (n & 127) | 128))
    if n < 2097151:
        return bytes((n >> 14, ((n >> 7) & 127) | 128, (n & 127) | 128))
    if n < 268435455:
        return bytes((n >> 21, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128, (n & 127) | 128))
    return bytes((n >> 28, ((n >> 21) & 127) | 128, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128,
                  (n & 127) | 128))


_SMALL = [bytes((v, 1)) for v in range(128)]      # 0..127 with their back-length


def rdb_listpack(elements):
    """A listpack of ``elements`` (ints, or bytes: a canonical integer
    string is stored as an integer, as lpAppend does)."""
    out = [b"\x00" * 6]
    for e in elements:
        if type(e) is not int:
            v = listpack_int(e)
            if v is None:
                n = len(e)
                if n < 64:
                    enc = bytes((n | 0x80,)) + e
                elif n < 4096:
                    enc = bytes(((n >> 8) | 0xE0, n & 0xFF)) + e
                else:
                    enc = b"\xf0" + _U32LE.pack(n) + e
                out.append(enc)
                out.append(_lp_backlen(len(enc)))
                continue
            e = v
        if 0 <= e <= 127:
            out.append(_SMALL[e])
        else:
            enc = _lp_int(e)
            out.append(enc)
            out.append(bytes((len(enc),)))
    out.append(b"\xff")
    blob = bytearray(b"".join(out))
    count = len(elements)
    blob[0:6] = _U32LE.pack(len(blob)) + _U16LE.pack(count if count < 65535 else 65535)
    return bytes(blob)


_PAST = "listpack element runs past the end or has a wrong back-length"


def _lp_head(blob):
    """Check a listpack's header (total bytes) and end byte; its element
    count (65535: unknown)."""
    n = len(blob)
    if n < 7:
        raise RdbError("listpack shorter than its header")
    total = _U32LE.unpack_from(blob, 0)[0]
    if total != n:
        raise RdbError("listpack header says %d bytes, it has %d" % (total, n))
    if blob[n - 1] != 0xFF:
        raise RdbError("listpack does not end with its end byte")
    return _U16LE.unpack_from(blob, 4)[0]


def _lp_next(blob, p, end):
    """The element at ``p`` (< ``end``, the end byte's position) of a
    listpack: (value, position of the next), its encoding and back-length
    checked; value an int, or bytes."""
    b = blob[p]
    if b < 0x80:                             # the common small integer
        if p + 1 >= end or blob[p + 1] != 1:
            raise RdbError(_PAST)
        return b, p + 2
    if b < 0xC0:
        ln = b & 0x3F
        v, size = blob[p + 1:p + 1 + ln], 1 + ln
    elif b < 0xE0:
        if p + 1 >= end:
            raise RdbError("listpack element runs past the end")
        v = ((b & 0x1F) << 8) | blob[p + 1]
        if v >= 4096:
            v -= 8192
        size = 2
    elif b < 0xF0:
        if p + 1 >= end:
            raise RdbError("listpack element runs past the end")
        ln = ((b & 0x0F) << 8) | blob[p + 1]
        v, size = blob[p + 2:p + 2 + ln], 2 + ln
    elif b == 0xF0:
        if p + 5 > end:
            raise RdbError("listpack element runs past the end")
        ln = _U32LE.unpack_from(blob, p + 1)[0]
        if p + 5 + ln > end:
            raise RdbError(_PAST)
        v, size = blob[p + 5:p + 5 + ln], 5 + ln
    elif b <= 0xF4:
        w = (2, 3, 4, 8)[b - 0xF1]
        if p + 1 + w > end:
            raise RdbError("listpack element runs past the end")
        v = int.from_bytes(blob[p + 1:p + 1 + w], "little", signed=True)
        size = 1 + w
    else:
        raise RdbError("bad listpack element encoding 0x%02x" % b)
    q = p + size
    if size <= 127:
        if q >= end or blob[q] != size:
            raise RdbError(_PAST)
        return v, q + 1
    bl = _lp_backlen(size)
    if q + len(bl) > end or blob[q:q + len(bl)] != bl:
        raise RdbError(_PAST)
    return v, q + len(bl)


def _lp_skip(blob, p, end):
    """``_lp_next`` without the value: the position of the next element."""
    b = blob[p]
    if b < 0x80:
        if p + 1 >= end or blob[p + 1] != 1:
            raise RdbError(_PAST)
        return p + 2
    if b < 0xC0:
        size = 1 + (b & 0x3F)
    elif b < 0xF0:
        if p + 1 >= end:
            raise RdbError("listpack element runs past the end")
        size = 2 if b < 0xE0 else 2 + (((b & 0x0F) << 8) | blob[p + 1])
    elif b == 0xF0:
        if p + 5 > end:
            raise RdbError("listpack element runs past the end")
        size = 5 + _U32LE.unpack_from(blob, p + 1)[0]
    elif b <= 0xF4:
        size = 1 + (2, 3, 4, 8)[b - 0xF1]
    else:
        raise RdbError("bad listpack element encoding 0x%02x" % b)
    q = p + size
    if size <= 127:
        if q >= end or blob[q] != size:
            raise RdbError(_PAST)
        return q + 1
    bl = _lp_backlen(size)
    if q + len(bl) > end or blob[q:q + len(bl)] != bl:
        raise RdbError(_PAST)
    return q + len(bl)


def rdb_listpack_items(blob):
    """The elements of a listpack, each (value, encoded size with its
    back-length): value an int, or bytes.  Checks the header (total
    bytes, element count unless unknown), every element's encoding and
    back-length, and the end byte (lpValidateIntegrity, deep).  (A list:
    for small listpacks and tests; streams walk theirs in place.)"""
    count = _lp_head(blob)
    out = []
    p = 6
    end = len(blob) - 1
    while p < end:
        v, q = _lp_next(blob, p, end)
        out.append((v, q - p))
        p = q
    if count != 65535 and count != len(out):
        raise RdbError("listpack header says %d elements, it has %d" % (count, len(out)))
    return out


# ==================================================================== reading

def _file_size(f):
    """The size of a regular file ``f`` (None if it is not one)."""
    try:
        st = os.fstat(f.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


class RdbReader:
    """Reads Redis's encodings from bytes (a DUMP payload) or from a
    binary file, a chunk at a time, computing the CRC-64 of what it has
    handed out (``crc()``) when ``checksum``."""

    CHUNK = 1 << 20

    def __init__(self, data=None, f=None, checksum=False, progress=None):
        self.f = f
        self.buf = bytes(data) if data is not None else b""
        self.size = len(self.buf) if f is None else _file_size(f)    # None: not known
        self.pos = 0
        self.base = 0             # file offset of buf[0]
        self.checksum = checksum
        self._crc = 0
        self._crc_pos = 0         # bytes of buf already in _crc
        self.progress = progress
        self.db = 0               # the database SELECTDB chose (RDB files)

    def offset(self):
        """Bytes read so far."""
        return self.base + self.pos

    def _fill(self, need):
        have = len(self.buf) - self.pos
        if have >= need:
            return
        if self.size is not None and self.offset() + need > self.size:
            self._short(self.size)                    # before reading (or allocating) any of it
        if self.checksum:
            self._crc = rdb_crc64(memoryview(self.buf)[self._crc_pos:self.pos], self._crc)
        parts = [self.buf[self.pos:]]
        self.base += self.pos
        self.buf = parts[0]
        self.pos = self._crc_pos = 0
        while have < need:
            chunk = self.f.read(max(self.CHUNK, min(need - have, self.CHUNK * 16)))
            if not chunk:
                self.buf = b"".join(parts)
                self._short(self.base + have)
            parts.append(chunk)
            have += len(chunk)
        self.buf = b"".join(parts)
        if self.progress is not None:
            self.progress(self.base)

    def _short(self, end):
        raise RdbError("the %s ends early" % ("data" if self.f is None else "file"), offset=end)

    def read(self, n):
        self._fill(n)
        p = self.pos
        self.pos = p + n
        return self.buf[p:p + n]

    def byte(self):
        self._fill(1)
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def crc(self):
        """CRC-64 of every byte handed out so far."""
        if self.checksum:
            self._crc = rdb_crc64(memoryview(self.buf)[self._crc_pos:self.pos], self._crc)
            self._crc_pos = self.pos
        return self._crc

    def at_end(self):
        if self.pos < len(self.buf):
            return False
        return self.f is None or not self.f.read(1)

    # -------------------------------------------------------- encodings

    def length_or_encoding(self):
        """rdbLoadLen with ``isencoded``: (value, encoded)."""
        b = self.byte()
        kind = b >> 6
        if kind == 0:
            return b & 0x3F, False
        if kind == 1:
            return ((b & 0x3F) << 8) | self.byte(), False
        if kind == 3:
            return b & 0x3F, True
        if b == 0x80:
            return _U32BE.unpack(self.read(4))[0], False
        if b == 0x81:
            return _U64BE.unpack(self.read(8))[0], False
        raise RdbError("unknown length encoding 0x%02x" % b)

    def length(self):
        v, enc = self.length_or_encoding()
        if enc:
            raise RdbError("an encoded value where a length belongs")
        return v

    def string(self, limit=None):
        """rdbGenericLoadStringObject: the bytes of a string in any of its
        forms.  ``limit``: refuse a longer one (before reading it)."""
        v, enc = self.length_or_encoding()
        if enc:
            if v == 0:
                return str(_I8.unpack(self.read(1))[0]).encode()
            if v == 1:
                return str(_I16LE.unpack(self.read(2))[0]).encode()
            if v == 2:
                return str(_I32LE.unpack(self.read(4))[0]).encode()
            if v == 3:
                clen = self.length()
                ulen = self.length()
                _lzf_lengths(clen, ulen, limit)
                return rdb_lzf_decompress(self.read(clen), ulen)
            raise RdbError("unknown string encoding %d" % v)
        if limit is not None and v > limit:
            raise RdbError("a string of %d bytes is over the %d-byte limit" % (v, limit))
        return self.read(v)

    def skip_string(self):
        """Read over a string: its framing checked as ``string`` does, an
        LZF one not decompressed (its lengths checked, its compressed
        bytes skipped)."""
        v, enc = self.length_or_encoding()
        if not enc:
            self._skip(v)
            return
        if v == 3:
            clen = self.length()
            ulen = self.length()
            _lzf_lengths(clen, ulen)
            self._skip(clen)
        elif v in (0, 1, 2):
            self.read((1, 2, 4)[v])
        else:
            raise RdbError("unknown string encoding %d" % v)

    def _skip(self, n):
        if self.size is not None and self.offset() + n > self.size:
            self._short(self.size)
        while n:
            k = min(n, self.CHUNK)
            self.read(k)
            n -= k

    def ms_time(self):
        """rdbLoadMillisecondTime: int64 little-endian."""
        return _I64LE.unpack(self.read(8))[0]

    def raw_id(self):
        ms, seq = _ID.unpack(self.read(16))
        return (ms, seq)


# ============================================================ stream values

def _lp_integer(v):
    """lpGetIntegerIfValid: an integer element, or a string holding one."""
    if type(v) is int:
        return v
    i = listpack_int(v)
    if i is None:
        raise RdbError("a stream listpack holds a string where an integer belongs")
    return i


def _text(v):
    return v if type(v) is not int else str(v).encode()


def _add_delta(a, d):
    return (a + d) % _U64


def rdb_stream_node(master, blob):
    """One listpack node of a stream whose radix-tree key is ``master``:
    (live entries [(ID, fields)], live count, deleted count, body bytes
    (the listpack without its two count elements), ID of its last entry,
    deleted or not, master field names).  Checks the layout as
    streamValidateListpackIntegrity does (deep), that the counts agree
    with the entries, and that IDs ascend from the master ID -- all of it
    here, walking the listpack in place.  The entries are a
    ``RdbNodeEntries``: a sequence that walks the listpack again each time
    it is iterated, one entry at a time (the node's elements are never
    all objects at once)."""
    count = _lp_head(blob)
    end = len(blob) - 1
    if end <= 6:
        raise RdbError("stream listpack without a master entry")
    live, p = _lp_next(blob, 6, end)
    if p >= end:
        raise RdbError("stream listpack without a master entry")
    deleted, p = _lp_next(blob, p, end)
    body = len(blob) - (p - 6)
    if p >= end:
        raise RdbError("stream listpack without a master entry")
    nf, p = _lp_next(blob, p, end)
    live, deleted, nf = _lp_integer(live), _lp_integer(deleted), _lp_integer(nf)
    if live < 0 or deleted < 0 or nf < 0 or (end - p) // 2 <= nf:      # an element is at least 2 bytes
        raise RdbError("bad stream listpack master entry")
    names = []
    for _ in range(nf):
        v, p = _lp_next(blob, p, end)
        names.append(_text(v))
    if p >= end:
        raise RdbError("bad stream listpack master entry")
    v, p = _lp_next(blob, p, end)
    if _lp_integer(v) != 0:
        raise RdbError("stream listpack master entry without its terminator")
    first = p
    elements = 4 + nf
    seen_live = seen_deleted = 0
    last = prev_live = None
    mms, mseq = master
    for _ in range(live + deleted):
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            flags = b
            p += 2
        else:
            flags, p = _lp_next(blob, p, end)
        if type(flags) is not int:
            flags = _lp_integer(flags)
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            d = b
            p += 2
        else:
            d, p = _lp_next(blob, p, end)
        ms = (mms + (d if type(d) is int else _lp_integer(d))) % _U64
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            d = b
            p += 2
        else:
            d, p = _lp_next(blob, p, end)
        i = (ms, (mseq + (d if type(d) is int else _lp_integer(d))) % _U64)
        if flags & STREAM_ITEM_FLAG_SAMEFIELDS:
            n = nf
            want = n + 3
        else:
            if p >= end:
                raise RdbError("stream listpack ends inside an entry")
            n, p = _lp_next(blob, p, end)
            n = _lp_integer(n)
            if n < 0 or (end - p) // 2 <= 2 * n:
                raise RdbError("stream listpack ends inside an entry")
            n *= 2
            want = n + 4
            elements += 1
        for _ in range(n):
            if p >= end:
                raise RdbError("stream listpack ends inside an entry")
            if blob[p] < 0x80 and p + 1 < end and blob[p + 1] == 1:
                p += 2
            else:
                p = _lp_skip(blob, p, end)
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            v = b
            p += 2
        else:
            v, p = _lp_next(blob, p, end)
        if (v if type(v) is int else _lp_integer(v)) != want:
            raise RdbError("stream listpack entry with a wrong element count")
        elements += n + 4
        if i < master:
            raise RdbError("stream listpack entry before its node's master ID")
        last = i
        if flags & STREAM_ITEM_FLAG_DELETED:
            seen_deleted += 1
            continue
        if prev_live is not None and i <= prev_live:
            raise RdbError("stream listpack entries out of order")
        prev_live = i
        seen_live += 1
    if p != end:
        raise RdbError("stream listpack holds more than its entries")
    if count != 65535 and count != elements:
        raise RdbError("listpack header says %d elements, it has %d" % (count, elements))
    if seen_live != live or seen_deleted != deleted:
        raise RdbError("stream listpack counts do not match its entries")
    if last is None:
        last = master
    fixed = tuple(names)
    return RdbNodeEntries(master, blob, first, live + deleted, live, fixed), live, deleted, body, last, fixed


class RdbNodeEntries:
    """The live entries [(ID, fields)] of a checked stream node, read from
    its listpack as they are iterated (``rdb_stream_node``).  Compares
    equal to the list of them."""

    __slots__ = ("master", "blob", "start", "total", "live", "names")

    def __init__(self, master, blob, start, total, live, names):
        self.master, self.blob, self.start, self.total, self.live, self.names = master, blob, start, total, live, names

    def __len__(self):
        return self.live

    def __iter__(self):
        blob, p, names = self.blob, self.start, self.names
        end = len(blob) - 1
        mms, mseq = self.master
        nxt = _lp_next
        nf = len(names)
        for _ in range(self.total):
            flags, p = nxt(blob, p, end)
            flags = _lp_integer(flags)
            d, p = nxt(blob, p, end)
            ms = (mms + _lp_integer(d)) % _U64
            d, p = nxt(blob, p, end)
            i = (ms, (mseq + _lp_integer(d)) % _U64)
            if flags & STREAM_ITEM_FLAG_DELETED:
                n = nf if flags & STREAM_ITEM_FLAG_SAMEFIELDS else 2 * _lp_integer(nxt(blob, p, end)[0])
                if not flags & STREAM_ITEM_FLAG_SAMEFIELDS:
                    p = _lp_skip(blob, p, end)
                for _ in range(n + 1):
                    if blob[p] < 0x80:
                        p += 2
                    else:
                        p = _lp_skip(blob, p, end)
                continue
            if flags & STREAM_ITEM_FLAG_SAMEFIELDS:
                fields: list[bytes | None] = [None] * (2 * nf)
                fields[0::2] = names
                for k in range(1, 2 * nf, 2):
                    v, p = nxt(blob, p, end)
                    fields[k] = v if type(v) is not int else str(v).encode()
            else:
                n, p = nxt(blob, p, end)
                fields = []
                for _ in range(2 * _lp_integer(n)):
                    v, p = nxt(blob, p, end)
                    fields.append(v if type(v) is not int else str(v).encode())
            p = _lp_skip(blob, p, end)
            yield i, fields

    def __getitem__(self, k):
        return list(self)[k]

    def __eq__(self, other):
        if isinstance(other, (list, tuple, RdbNodeEntries)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self):
        return repr(list(self))


def rdb_stream_events(r, rdbtype):
    """The value of a stream (``rdbtype`` 15, 19 or 21) read from ``r``,
    as events, lazily (one listpack node in memory at a time):

      ("node", master ID, entries, live, deleted, body, last ID, names)
                                              per node, in key order
      ("meta", length, last ID, first ID or None, max-deleted ID or None,
               entries-added or None)         (None: not in type 15)
      ("group", name, last ID, entries-read or None, [(ID, delivery time,
               count)])                       entries-read -1: unknown
      ("consumer", name, seen-time, active-time or None, [IDs])
                                              after its group
      ("end",)

    Checks what can be checked locally (RdbError): node keys of 16
    bytes, in ascending order with entries that do not overlap; the
    PEL's IDs unique; every consumer's IDs in its group's PEL, each
    owned once and every PEL entry owned."""
    if rdbtype not in RDB_STREAM_TYPES:
        raise RdbError("RDB type %d is not a stream" % rdbtype)
    nodes = r.length()
    prev: tuple | None = None       # (master ID, last ID) of the node before
    for _ in range(nodes):
        key = r.string(limit=16)
        if len(key) != 16:
            raise RdbError("stream node key entry is not the size of a stream ID")
        master = _ID.unpack(key)
        blob = r.string(limit=RDB_LISTPACK_MAX)
        entries, live, deleted, body, last, names = rdb_stream_node(master, blob)
        if prev is not None and (master <= prev[0] or master <= prev[1]):
            raise RdbError("stream nodes out of order or overlapping")
        prev = master, last
        yield "node", master, entries, live, deleted, body, last, names
    length = r.length()
    last_id = (r.length(), r.length())
    first = maxdel = added = None
    if rdbtype >= RDB_TYPE_STREAM_LISTPACKS_2:
        first = (r.length(), r.length())
        maxdel = (r.length(), r.length())
        added = r.length()
    yield "meta", length, last_id, first, maxdel, added
    ngroups = r.length()
    names = set()
    for _ in range(ngroups):
        name = r.string()
        if name in names:
            raise RdbError("duplicated consumer group name")
        names.add(name)
        glast = (r.length(), r.length())
        read = None
        if rdbtype >= RDB_TYPE_STREAM_LISTPACKS_2:
            read = r.length()
            if read >= 1 << 63:
                read -= _U64               # SCG_INVALID_ENTRIES_READ (-1) saved as a uint64
        pel = {}
        for _ in range(r.length()):
            i = r.raw_id()
            t = r.ms_time()
            cnt = r.length()
            if i in pel:
                raise RdbError("duplicated global PEL entry")
            pel[i] = (t, cnt)
        owned = set()
        consumers = []
        cnames = set()
        for _ in range(r.length()):
            cname = r.string()
            if cname in cnames:
                raise RdbError("duplicate stream consumer")
            cnames.add(cname)
            seen = r.ms_time()
            active = r.ms_time() if rdbtype >= RDB_TYPE_STREAM_LISTPACKS_3 else None
            ids = []
            for _ in range(r.length()):
                i = r.raw_id()
                if i not in pel:
                    raise RdbError("consumer entry not found in group global PEL")
                if i in owned:
                    raise RdbError("duplicated consumer PEL entry")
                owned.add(i)
                ids.append(i)
            consumers.append((cname, seen, active, ids))
        if len(owned) != len(pel):
            raise RdbError("stream CG PEL entry without consumer")
        yield "group", name, glast, read, sorted((i, t, c) for i, (t, c) in pel.items())
        for c in consumers:
            yield ("consumer",) + c
    yield ("end",)


def rdb_stream_value(nodes, meta, groups):
    """The RDB_TYPE_STREAM_LISTPACKS_2 value (type byte first) of a stream:

      nodes   [(master ID, names, [(ID, fields)], deleted count, last ID)]
              (names: the master entry's field names; the deleted
              entries, whose data is gone, are written as empty
              SAMEFIELDS entries at the last ID, flagged deleted)
      meta    (length, last ID, first ID, max-deleted ID, entries-added)
      groups  [(name, last ID, entries-read, [(ID, time, count)],
               [(consumer, seen-time, [IDs])])]

    Groups and consumers are written in name order and PELs in ID order,
    as Redis's radix trees hold them."""
    out = [bytes((RDB_TYPE_STREAM_LISTPACKS_2,)), rdb_len(len(nodes))]
    for master, names, entries, deleted, last in nodes:
        out.append(rdb_string(rdb_raw_id(master)))
        out.append(rdb_string(_node_listpack(master, names, entries, deleted, last)))
    length, last_id, first, maxdel, added = meta
    for v in (length, last_id[0], last_id[1], first[0], first[1], maxdel[0], maxdel[1], added):
        out.append(rdb_len(v))
    out.append(rdb_len(len(groups)))
    for name, glast, read, pel, consumers in sorted(groups, key=lambda g: g[0]):
        out += [rdb_string(name), rdb_len(glast[0]), rdb_len(glast[1]), rdb_len(read % _U64)]
        out.append(rdb_len(len(pel)))
        for i, t, cnt in sorted(pel):
            out += [rdb_raw_id(i), rdb_ms_time(t), rdb_len(cnt)]
        out.append(rdb_len(len(consumers)))
        for cname, seen, ids in sorted(consumers, key=lambda c: c[0]):
            out += [rdb_string(cname), rdb_ms_time(seen), rdb_len(len(ids))]
            out += [rdb_raw_id(i) for i in sorted(ids)]
    return b"".join(out)


def _delta(a, b):
    d = (a - b) % _U64
    return d - _U64 if d > _I64_MAX else d


def _node_listpack(master, names, entries, deleted, last):
    """A stream node's listpack as streamAppendItem builds it."""
    names = list(names)
    nf = len(names)
    els = [len(entries), deleted, nf]
    els += names
    els.append(0)
    mms, mseq = master
    for (ms, seq), fields in entries:
        n = len(fields) >> 1
        same = n == nf and fields[0::2] == names
        els += [STREAM_ITEM_FLAG_SAMEFIELDS if same else 0, _delta(ms, mms), _delta(seq, mseq)]
        if same:
            els += fields[1::2]
            els.append(n + 3)
        else:
            els.append(n)
            els += fields
            els.append(2 * n + 4)
    if deleted:
        tomb = [STREAM_ITEM_FLAG_DELETED | STREAM_ITEM_FLAG_SAMEFIELDS, _delta(last[0], mms),
                _delta(last[1], mseq)] + [b""] * nf + [nf + 3]
        els += tomb * deleted
    return rdb_listpack(els)


# ============================================================ DUMP payloads

def rdb_dump_payload(value, version=RDB_VERSION):
    """createDumpPayload: ``value`` (type byte and object), the RDB
    version and the CRC-64, both little-endian."""
    body = value + _U16LE.pack(version)
    return body + _U64LE.pack(rdb_crc64(body))


def rdb_payload_valid(payload, max_version=RDB_VERSION_MAX):
    """verifyDumpPayload: at least the 10-byte footer, a version no newer
    than ``max_version``, a matching CRC-64."""
    if len(payload) < 10:
        return False
    if _U16LE.unpack_from(payload, len(payload) - 10)[0] > max_version:
        return False
    return _U64LE.unpack_from(payload, len(payload) - 8)[0] == rdb_crc64(memoryview(payload)[:-8])


def rdb_payload_reader(payload):
    """A reader of a verified payload's object (type byte first; the
    footer is not readable)."""
    return RdbReader(memoryview(payload)[:-10])


# ===================================================== other types, skipped

def rdb_skip_value(r, rdbtype):
    """Read over a value of a type xs does not hold, checking its framing
    (lengths, strings, LZF) but not the inside of its blobs.  Modules
    cannot be read over: RdbError."""
    t = rdbtype
    if t == RDB_TYPE_STRING or t in (RDB_TYPE_HASH_ZIPMAP, RDB_TYPE_LIST_ZIPLIST, RDB_TYPE_SET_INTSET,
                                     RDB_TYPE_ZSET_ZIPLIST, RDB_TYPE_HASH_ZIPLIST, RDB_TYPE_HASH_LISTPACK,
                                     RDB_TYPE_ZSET_LISTPACK, RDB_TYPE_SET_LISTPACK,
                                     RDB_TYPE_HASH_LISTPACK_EX_PRE_GA):
        r.skip_string()
    elif t == RDB_TYPE_HASH_LISTPACK_EX:
        r.ms_time()
        r.skip_string()
    elif t in (RDB_TYPE_LIST, RDB_TYPE_SET):
        for _ in range(r.length()):
            r.skip_string()
    elif t == RDB_TYPE_LIST_QUICKLIST:
        for _ in range(r.length()):
            r.skip_string()
    elif t == RDB_TYPE_LIST_QUICKLIST_2:
        for _ in range(r.length()):
            if r.length() not in (1, 2):
                raise RdbError("quicklist integrity check failed")
            r.skip_string()
    elif t == RDB_TYPE_ZSET:
        for _ in range(r.length()):
            r.skip_string()
            n = r.byte()
            if n < 253:
                r.read(n)
    elif t == RDB_TYPE_ZSET_2:
        for _ in range(r.length()):
            r.skip_string()
            r.read(8)
    elif t == RDB_TYPE_HASH:
        for _ in range(r.length()):
            r.skip_string()
            r.skip_string()
    elif t in (RDB_TYPE_HASH_METADATA, RDB_TYPE_HASH_METADATA_PRE_GA):
        if t == RDB_TYPE_HASH_METADATA:
            r.ms_time()
        for _ in range(r.length()):
            r.length()
            r.skip_string()
            r.skip_string()
    elif t in RDB_STREAM_TYPES:
        for _ in rdb_stream_events(r, t):
            pass
    elif t in (RDB_TYPE_MODULE_PRE_GA, RDB_TYPE_MODULE_2):
        raise RdbError("module data (a value of a Redis module's type) cannot be read without the module")
    else:
        raise RdbError("unknown RDB object type %d" % t)


# ================================================================ RDB files

def rdb_file_header(aux, version=RDB_VERSION):
    """The start of an RDB file: magic, version and ``aux`` fields (a
    list of (name, value) bytes)."""
    out = [RDB_MAGIC, b"%04d" % version]
    for k, v in aux:
        out += [bytes((RDB_OPCODE_AUX,)), rdb_string(k), rdb_string(v)]
    return b"".join(out)


def rdb_file_db(dbid, size, expires):
    """SELECTDB and RESIZEDB."""
    return (bytes((RDB_OPCODE_SELECTDB,)) + rdb_len(dbid) + bytes((RDB_OPCODE_RESIZEDB,)) + rdb_len(size)
            + rdb_len(expires))


def rdb_file_key(key, value):
    """A key and its value (``value``: type byte first, as
    ``rdb_stream_value`` makes it)."""
    return value[:1] + rdb_string(key) + value[1:]


def rdb_file_end():
    """The EOF opcode (the CRC-64 of the whole file follows: ``rdb_file_crc``)."""
    return bytes((RDB_OPCODE_EOF,))


def rdb_file_crc(crc):
    return _U64LE.pack(crc)


def rdb_read_header(r):
    """The magic and version of an RDB file (RdbError if not one xs reads)."""
    head = r.read(9)
    if head[:5] != RDB_MAGIC:
        raise RdbError("not an RDB file (no REDIS signature)")
    digits = head[5:9]
    if not digits.isdigit():
        raise RdbError("not an RDB file (bad version field %r)" % bytes(digits))
    version = int(digits)
    if version < 1 or version > RDB_VERSION_MAX:
        raise RdbError("RDB format version %d is not supported (xs reads versions 1 to %d)"
                       % (version, RDB_VERSION_MAX))
    return version


def rdb_next(r, version):
    """The next item of an RDB file after its header:

      ("aux", name, value)
      ("function",)                     a function library (FUNCTION2), read over
      ("key", db, type, key, expire ms or None)
                                        the reader is then at the value: the
                                        caller reads it (rdb_stream_events) or
                                        skips it (rdb_skip_value)
      ("eof", stored CRC, computed CRC) the CRC-64 stored at the end (None
                                        before version 5; 0: saved without
                                        one) and that of the bytes before it;
                                        the file must end there

    SELECTDB, RESIZEDB, SLOT_INFO, IDLE and FREQ are consumed on the
    way; module data is refused."""
    expire = None
    db = r.db
    while True:
        t = r.byte()
        if t == RDB_OPCODE_EXPIRETIME:
            expire = _I32LE.unpack(r.read(4))[0] * 1000
        elif t == RDB_OPCODE_EXPIRETIME_MS:
            expire = r.ms_time()
        elif t == RDB_OPCODE_FREQ:
            r.byte()
        elif t == RDB_OPCODE_IDLE:
            r.length()
        elif t == RDB_OPCODE_SELECTDB:
            r.db = db = r.length()
        elif t == RDB_OPCODE_RESIZEDB:
            r.length()
            r.length()
        elif t == RDB_OPCODE_SLOT_INFO:
            r.length()
            r.length()
            r.length()
        elif t == RDB_OPCODE_AUX:
            name = r.string(limit=1 << 20)
            return "aux", name, r.string(limit=1 << 30)
        elif t == RDB_OPCODE_FUNCTION2:
            r.skip_string()
            return ("function",)
        elif t == RDB_OPCODE_FUNCTION_PRE_GA:
            raise RdbError("function data of a Redis 7.0 release candidate is not supported")
        elif t == RDB_OPCODE_MODULE_AUX:
            raise RdbError("the file holds module data (a Redis module's auxiliary data), which xs cannot read")
        elif t == RDB_OPCODE_EOF:
            computed = r.crc()
            stored = _U64LE.unpack(r.read(8))[0] if version >= 5 else None
            return "eof", stored, computed
        elif rdb_is_object_type(t):
            key = r.string(limit=1 << 30)
            return "key", db, t, key, expire
        else:
            raise RdbError("unknown RDB opcode or object type %d" % t, offset=r.offset() - 1)


def rdb_file_expire(ms):
    """EXPIRETIME_MS: the next key's expiry, Unix ms."""
    return bytes((RDB_OPCODE_EXPIRETIME_MS,)) + rdb_ms_time(ms)
