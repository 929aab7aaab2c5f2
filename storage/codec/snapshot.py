"""The frames of the snapshot file (docs/snapshot-format.md)."""
import struct

import msgpack

from storage.codec.keys import ID, packb

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
