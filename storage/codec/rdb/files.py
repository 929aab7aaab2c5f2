"""DUMP payloads (type, value, version, CRC-64) and RDB files (header,
opcodes, keys, end, checksum).
"""
from storage.codec.rdb.base import (
    _I32LE,
    _U16LE,
    _U64LE,
    RDB_MAGIC,
    RDB_OPCODE_AUX,
    RDB_OPCODE_EOF,
    RDB_OPCODE_EXPIRETIME,
    RDB_OPCODE_EXPIRETIME_MS,
    RDB_OPCODE_FREQ,
    RDB_OPCODE_FUNCTION2,
    RDB_OPCODE_FUNCTION_PRE_GA,
    RDB_OPCODE_IDLE,
    RDB_OPCODE_MODULE_AUX,
    RDB_OPCODE_RESIZEDB,
    RDB_OPCODE_SELECTDB,
    RDB_OPCODE_SLOT_INFO,
    RDB_VERSION,
    RDB_VERSION_MAX,
    RdbError,
    rdb_crc64,
    rdb_is_object_type,
    rdb_len,
    rdb_ms_time,
    rdb_string,
)
from storage.codec.rdb.reader import RdbReader

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
