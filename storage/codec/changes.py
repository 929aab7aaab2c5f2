"""The layouts of the change log (issue 41: replication and point-in-time
restore): its records in the store, its state in ``meta``, and the
segment files of a replica directory (storage.changelog,
storage.ops.replicate; docs/replication.md).

In the store:

  meta ``changelog``                 the log's state (a msgpack map: next
                                     sequence number, oldest kept, bytes
                                     kept, the size bound, the log's id
                                     and generation); absent: no log (a
                                     store without replicas pays one get)
  meta ``changelog.replica.`` + id   a registered replica's position
  changelog  seq (u64 BE) -> record  one per logged commit: msgpack
                                     ``[time_ms, ops]``, or
                                     ``[time_ms, CODEC_ZLIB, zlib(ops)]``
                                     (ops packed, then compressed: records
                                     of COMPRESS_MIN..COMPRESS_MAX bytes);
                                     a record with MULTI ops:
                                     ``[time_ms, CODEC_PAIRS, ops]`` or
                                     ``[time_ms, CODEC_ZLIB_PAIRS, zlib(ops)]``

An op is ``[code, database name, a, b]``: PUT key value, DEL key, MULTI
pairs, BELOW prefix bound (delete the keys with the prefix
below bound; None: all), FIRST prefix count (delete the first count keys
from prefix on; written by older versions only: a count is now logged as
the BELOW range it removed).  MULTI's pairs are a map {key: value, ...}
in the PAIRS forms (its pairs in the order put, a key twice if it was
put twice: packed without an array per pair, twice as fast; a version
that knows only the first two forms refuses these records as of an
unknown form), an array [[key, value], ...] in the others (older
versions).  Replayed in order on the store as it was before the
commit, they give the store as it was after it.  The ops come in commit
order, but for the ``nodes`` database: each node a commit wrote is
logged once, with its final value (PUT, or DEL if it went), at the end
of the record (older records have them in place); its range deletes
stay in place.  The point writes of some databases are logged once per
key and commit (storage.changelog.merge).  Every form of a record, both
orders and both forms of MULTI decode and replay alike:
``decode_record`` gives ``(time_ms, ops)``, MULTI's pairs as a tuple of
(key, value).

A segment file is a sequence of frames: length (u32 BE, of what follows
the 8-byte header), CRC-32 of it (u32 BE), then seq (u64 BE), time_ms
(u64 BE) and the record's bytes.  A torn last frame (a replicator killed
mid-write) fails its length or CRC and is cut off when the segment is
opened again.
"""
import struct
from operator import itemgetter

import msgpack

CHANGELOG_DB = b"changelog"
META_CHANGELOG = b"changelog"
REPLICA_PREFIX = b"changelog.replica."

OP_PUT, OP_DEL, OP_MULTI, OP_BELOW, OP_FIRST = 1, 2, 3, 4, 5

CODEC_ZLIB = 1                 # a record's ops, compressed (zlib)
CODEC_PAIRS = 2                # a record's ops, MULTI's pairs as a map
CODEC_ZLIB_PAIRS = 3           # both
COMPRESS_MIN = 1 << 10         # packed ops this size or more are compressed ...
COMPRESS_MAX = 64 << 10        # ... up to this size (bulk records, mostly entries, are not)

_code = itemgetter(0)        # an op's code
_SEQ = struct.Struct(">Q")
_FRAME = struct.Struct(">II")
_HEAD = struct.Struct(">QQ")
FRAME_HEADER = _FRAME.size


def seq_key(seq):
    """The changelog key of commit ``seq``."""
    return _SEQ.pack(seq)


def seq_of(key):
    return _SEQ.unpack(key)[0]


def encode_log_state(d):
    return msgpack.packb(d, use_bin_type=True)


def decode_log_state(raw):
    d = msgpack.unpackb(raw, raw=False)
    if not isinstance(d, dict):
        raise ValueError("bad changelog state")
    return d


def replica_key(rid):
    """meta: the position of replica ``rid`` (text)."""
    return REPLICA_PREFIX + rid.encode()


def replica_id(key):
    return key[len(REPLICA_PREFIX):].decode()


def encode_record(time_ms, ops, names=None):
    """A record (see the module docstring): its ops' databases may be
    given as handles, ``names`` naming them (handle -> name).  A record
    of COMPRESS_MIN to COMPRESS_MAX bytes has its ops compressed."""
    default = names.__getitem__ if names else None
    if OP_MULTI not in map(_code, ops):
        rec = msgpack.packb((time_ms, ops), use_bin_type=True, default=default)
        form = CODEC_ZLIB
        head = 1 + len(msgpack.packb(time_ms))       # the array's header and the time: the ops follow
    else:
        rec, head = _pack_pairs(time_ms, ops, default)
        form = CODEC_ZLIB_PAIRS
    if COMPRESS_MIN <= len(rec) <= COMPRESS_MAX:
        import zlib
        return msgpack.packb((time_ms, form, zlib.compress(rec[head:], 1)), use_bin_type=True)
    return rec


def pack_pairs(pairs):
    """MULTI's pairs as the map of the PAIRS forms, packed: an op's pairs
    may be given so (storage.parts.kv packs a bulk put's when it is made,
    so the pairs do not live on until the commit, where the cyclic
    collector would walk them at every collection)."""
    return msgpack.Packer(use_bin_type=True).pack_map_pairs(pairs)


def _pack_pairs(time_ms, ops, default):
    """A record with MULTI ops in the CODEC_PAIRS form, and where its ops
    begin in it.  MULTI's pairs: (key, value) pairs, or ``pack_pairs``'s
    bytes."""
    p = msgpack.Packer(use_bin_type=True, autoreset=False, default=default)
    p.pack_array_header(3)
    p.pack(time_ms)
    p.pack(CODEC_PAIRS)
    head = 2 + len(msgpack.packb(time_ms))
    p.pack_array_header(len(ops))
    parts = []
    for op in ops:
        if op[0] == OP_MULTI:
            p.pack_array_header(3)
            p.pack(OP_MULTI)
            p.pack(op[1])
            pairs = op[2]
            if type(pairs) is bytes:        # packed already
                parts.append(p.bytes())
                p.reset()
                parts.append(pairs)
            else:
                p.pack_map_pairs(pairs)
        else:
            p.pack(op)
    if not parts:
        return p.bytes(), head
    parts.append(p.bytes())
    return b"".join(parts), head


def _unpack(b):
    # a map (MULTI's pairs) as a tuple of pairs, in order, none dropped
    return msgpack.unpackb(b, raw=True, use_list=False, object_pairs_hook=tuple)


def decode_record(raw):
    """(time_ms, ops) of a changelog record, whatever its form."""
    rec = _unpack(raw)
    if len(rec) == 2:
        return rec
    t, form, body = rec
    if form == CODEC_PAIRS:
        return t, body
    if form not in (CODEC_ZLIB, CODEC_ZLIB_PAIRS):
        raise ValueError("change-log record in an unknown form %r" % (form,))
    import zlib
    return t, _unpack(zlib.decompress(body))


def record_time(raw):
    """The commit time (ms) of a record, without decoding its ops."""
    u = msgpack.Unpacker(raw=True)
    u.feed(raw[:32])
    u.read_array_header()
    return u.unpack()


def frame(seq, time_ms, payload):
    """One segment frame."""
    import zlib
    body = _HEAD.pack(seq, time_ms) + payload
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


def frames(buf, start=0):
    """(seq, time_ms, payload, end offset) of each whole frame of
    ``buf`` from ``start``; stops at the first torn or damaged one."""
    import zlib
    n = len(buf)
    pos = start
    while pos + FRAME_HEADER <= n:
        size, crc = _FRAME.unpack_from(buf, pos)
        end = pos + FRAME_HEADER + size
        if size < _HEAD.size or end > n:
            return
        body = bytes(buf[pos + FRAME_HEADER:end])
        if zlib.crc32(body) != crc:
            return
        seq, t = _HEAD.unpack_from(body, 0)
        yield seq, t, body[_HEAD.size:], end
        pos = end
