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
                                     ``[time_ms, ops]``

An op is ``[code, database name, a, b]``: PUT key value, DEL key, MULTI
[[key, value], ...], BELOW prefix bound (delete the keys with the prefix
below bound; None: all), FIRST prefix count (delete the first count keys
from prefix on; written by older versions only: a count is now logged as
the BELOW range it removed).  Replayed in order on the store as it was before the
commit, they give the store as it was after it.

A segment file is a sequence of frames: length (u32 BE, of what follows
the 8-byte header), CRC-32 of it (u32 BE), then seq (u64 BE), time_ms
(u64 BE) and the record's bytes.  A torn last frame (a replicator killed
mid-write) fails its length or CRC and is cut off when the segment is
opened again.
"""
import struct

import msgpack

CHANGELOG_DB = b"changelog"
META_CHANGELOG = b"changelog"
REPLICA_PREFIX = b"changelog.replica."

OP_PUT, OP_DEL, OP_MULTI, OP_BELOW, OP_FIRST = 1, 2, 3, 4, 5

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


def encode_record(time_ms, ops):
    return msgpack.packb((time_ms, ops), use_bin_type=True)


def decode_record(raw):
    """(time_ms, ops) of a changelog record."""
    t, ops = msgpack.unpackb(raw, raw=True, use_list=False)
    return t, ops


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
