"""The reader of Redis's encodings (a payload's bytes or an RDB file),
and the skipping of values of the types xs does not hold.
"""
import io
import os
import stat

from storage.codec.rdb.base import (
    _I8,
    _I16LE,
    _I32LE,
    _I64LE,
    _ID,
    _U32BE,
    _U64BE,
    RDB_STREAM_TYPES,
    RDB_TYPE_HASH,
    RDB_TYPE_HASH_LISTPACK,
    RDB_TYPE_HASH_LISTPACK_EX,
    RDB_TYPE_HASH_LISTPACK_EX_PRE_GA,
    RDB_TYPE_HASH_METADATA,
    RDB_TYPE_HASH_METADATA_PRE_GA,
    RDB_TYPE_HASH_ZIPLIST,
    RDB_TYPE_HASH_ZIPMAP,
    RDB_TYPE_LIST,
    RDB_TYPE_LIST_QUICKLIST,
    RDB_TYPE_LIST_QUICKLIST_2,
    RDB_TYPE_LIST_ZIPLIST,
    RDB_TYPE_MODULE_2,
    RDB_TYPE_MODULE_PRE_GA,
    RDB_TYPE_SET,
    RDB_TYPE_SET_INTSET,
    RDB_TYPE_SET_LISTPACK,
    RDB_TYPE_STRING,
    RDB_TYPE_ZSET,
    RDB_TYPE_ZSET_2,
    RDB_TYPE_ZSET_LISTPACK,
    RDB_TYPE_ZSET_ZIPLIST,
    RdbError,
    _lzf_lengths,
    rdb_crc64,
    rdb_lzf_decompress,
)
from storage.codec.rdb.stream import rdb_stream_events

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
