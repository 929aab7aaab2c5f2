"""The snapshot file's format (storage.ops.snapshot: ``xs save`` and
``xs restore``): its layout, the record types and their grammar, the
limits, and the framing of records -- written through a 1 MiB buffer
that hashes what it writes (``_Writer``), read back a chunk at a time,
hashing every byte it hands out (``_Reader``).  What a record holds,
and the checks of every record and of the grammar, are
storage.ops.snapshot's (``save``, ``records``); the byte layouts of
records are codec's (``codec.SNAP_*``).

A snapshot is one file in our own versioned binary format (described
for implementers in docs/snapshot-format.md):

    MAGIC (10 bytes)  VERSION (u16 big-endian)
    record*           each: type (u8) + payload length (u32 BE) + payload
    END record
    SHA-256 (32 bytes) of every byte before it

Records come in a fixed grammar, one stream after another:

    HEADER STREAM-BLOCK* END
    STREAM-BLOCK = STREAM ENTRY* (PRODUCER IID*)* GROUP-BLOCK*
    GROUP-BLOCK  = GROUP (CONSUMER PENDING*)* NACKED*

Payloads are length-prefixed and capped at ``MAX_RECORD``; nothing is
ever evaluated (msgpack data and fixed-width integers only, no pickle).
"""
import hashlib
from typing import Any, Dict, Optional, Set

from storage import codec

MAGIC = b"\x89XSNAP\r\n\x1a\n"      # PNG-style: catches text-mode mangling
VERSION = 1
MAX_RECORD = 1 << 30                 # hard cap on one record's payload
CHUNK = 1 << 20                      # write buffer / read chunk size
DIGEST = 32                          # SHA-256 trailer

HEADER, STREAM, ENTRY, PRODUCER, IID, GROUP, CONSUMER, PENDING, NACKED, END = (
    0x01, 0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x22, 0x23, 0x7F)
NAMES: Dict[Optional[int], str] = {
    HEADER: "HEADER", STREAM: "STREAM", ENTRY: "ENTRY", PRODUCER: "PRODUCER", IID: "IID",
    GROUP: "GROUP", CONSUMER: "CONSUMER", PENDING: "PENDING", NACKED: "NACKED", END: "END"}

# which record may follow which (the grammar in the module docstring)
_IN_STREAM = {STREAM, ENTRY, PRODUCER, IID, GROUP, CONSUMER, PENDING, NACKED}
FOLLOWS: Dict[int, Set[Any]] = {
    HEADER: {None},
    STREAM: {HEADER} | _IN_STREAM,
    END: {HEADER} | _IN_STREAM,
    ENTRY: {STREAM, ENTRY},
    PRODUCER: {STREAM, ENTRY, PRODUCER, IID},
    IID: {PRODUCER, IID},
    GROUP: _IN_STREAM,
    CONSUMER: {GROUP, CONSUMER, PENDING},
    PENDING: {CONSUMER, PENDING},
    NACKED: {GROUP, CONSUMER, PENDING, NACKED},
}


class SnapshotError(Exception):
    """A snapshot cannot be written, read or applied (the message says
    why, for a person)."""


# ============================================================ writing records

class _Writer:
    """Frames records into a 1 MiB buffer, hashing what it writes."""

    def __init__(self, f, progress):
        self.f = f
        self.buf = bytearray()
        self.h = hashlib.sha256()
        self.written = 0
        self.progress = progress
        self.entries = 0

    def raw(self, data):
        self.buf += data

    def rec(self, t, payload):
        if len(payload) > MAX_RECORD:
            raise SnapshotError("a %s record of %d bytes is over the %d-byte limit"
                                % (NAMES[t], len(payload), MAX_RECORD))
        buf = self.buf
        buf += codec.snap_frame(t, len(payload))
        buf += payload
        if len(buf) >= CHUNK:
            self.flush()

    def flush(self):
        if self.buf:
            data = bytes(self.buf)
            self.buf.clear()
            self.h.update(data)
            self.f.write(data)
            self.written += len(data)
            if self.progress is not None:
                self.progress("save", self.entries, None)

    def finish(self):
        self.flush()
        d = self.h.digest()
        self.f.write(d)
        self.written += len(d)


# ============================================================ reading records

class _Reader:
    """Reads framed records in chunks, hashing every byte it hands out
    (lazily, a chunk at a time), never holding more than one record plus
    one chunk."""

    def __init__(self, f, progress=None, total=None):
        self.f = f
        self.buf = b""
        self.pos = 0          # next byte to hand out, in buf
        self.hpos = 0         # bytes of buf already hashed
        self.h = hashlib.sha256()
        self.offset = 0       # file offset of buf[0]
        self.progress = progress
        self.total = total

    def _fill(self, need):
        """Make ``need`` bytes available at pos (or raise: truncated)."""
        avail = len(self.buf) - self.pos
        if avail >= need:
            return
        self.h.update(memoryview(self.buf)[self.hpos:self.pos])
        parts = [self.buf[self.pos:]]
        self.offset += self.pos
        self.buf = parts[0]                  # tell() stays right if the file ends here
        self.pos = self.hpos = 0
        while avail < need:
            chunk = self.f.read(max(CHUNK, min(need - avail, CHUNK * 16)))
            if not chunk:
                raise SnapshotError("the file is truncated (ends at byte %d)" % (self.offset + avail))
            parts.append(chunk)
            avail += len(chunk)
        self.buf = b"".join(parts)
        if self.progress is not None:
            self.progress(self.offset)

    def take(self, n):
        self._fill(n)
        p = self.pos
        self.pos = p + n
        return self.buf[p:p + n]

    def digest(self):
        """SHA-256 of everything handed out so far."""
        self.h.update(memoryview(self.buf)[self.hpos:self.pos])
        self.hpos = self.pos
        return self.h.digest()

    def at_eof(self):
        if len(self.buf) > self.pos:
            return False
        return not self.f.read(1)

    def tell(self):
        return self.offset + self.pos
