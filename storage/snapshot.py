"""Snapshots: ``xs save`` and ``xs restore`` (no click, no rich).

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

Saving walks the store in ONE read transaction (a consistent view while
writers go on) and writes through a 1 MiB buffer, so memory does not
grow with the store.  Restoring reads the file twice: the first pass
checks magic, version, every record, the grammar and the checksum
without touching the store; the second pass applies the same records in
ONE write transaction, which also re-checks everything (a file changed
between the passes aborts it), so a refused or interrupted restore
leaves the target exactly as it was.  Payloads are length-prefixed and
capped at ``MAX_RECORD``; nothing is ever evaluated (msgpack data and
fixed-width integers only, no pickle).
"""
import hashlib
import os
import struct
import tempfile
import time

import lmdb
import msgpack

from storage import codec
from storage.ids import MAX_ID, MIN_ID, U64, fmt

MAGIC = b"\x89XSNAP\r\n\x1a\n"      # PNG-style: catches text-mode mangling
VERSION = 1
MAX_RECORD = 1 << 30                 # hard cap on one record's payload
CHUNK = 1 << 20                      # write buffer / read chunk size
DIGEST = 32                          # SHA-256 trailer

HEADER, STREAM, ENTRY, PRODUCER, IID, GROUP, CONSUMER, PENDING, NACKED, END = (
    0x01, 0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x22, 0x23, 0x7F)
NAMES = {HEADER: "HEADER", STREAM: "STREAM", ENTRY: "ENTRY", PRODUCER: "PRODUCER", IID: "IID",
         GROUP: "GROUP", CONSUMER: "CONSUMER", PENDING: "PENDING", NACKED: "NACKED", END: "END"}

# which record may follow which (the grammar in the module docstring)
_IN_STREAM = {STREAM, ENTRY, PRODUCER, IID, GROUP, CONSUMER, PENDING, NACKED}
FOLLOWS = {
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

_FRAME = struct.Struct(">BI")
_VER = struct.Struct(">H")
_ID = codec.ID
_PEND = struct.Struct(">QQqQ")       # ms, seq, delivery time, delivery count
_NACK = struct.Struct(">QQQ")        # ms, seq, delivery count
_IIDREC = _ID                        # ms, seq, then the IID key
I64 = (1 << 63) - 1


class SnapshotError(Exception):
    """A snapshot cannot be written, read or applied (the message says
    why, for a person)."""


class Stats:
    """What a save or restore handled."""

    __slots__ = ("streams", "entries", "bytes", "seconds")

    def __init__(self):
        self.streams = self.entries = self.bytes = 0
        self.seconds = 0.0

    def __repr__(self):
        return "Stats(streams=%d, entries=%d, bytes=%d, seconds=%.3f)" % (
            self.streams, self.entries, self.bytes, self.seconds)


# ====================================================================== save

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
        buf += _FRAME.pack(t, len(payload))
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


def _pack_map(d):
    return codec.packb(d)


def _fields_blob(v):
    """The fields of a stored entry value as a msgpack array (the stored
    layout is codec's business: always go through ``decode_entry``)."""
    return codec.packb(codec.decode_entry(v)[1])


def save(store, f, streams=None, progress=None):
    """Write a snapshot of ``store`` (or of the named ``streams``) to the
    binary file object ``f``.  One read transaction; memory does not
    grow with the store.  ``progress(phase, done, total)`` is called now
    and then with entry counts.  Returns Stats."""
    t0 = time.monotonic()
    st = Stats()
    with store.read() as tx:
        lt = tx.lt
        if streams is None:
            todo = None
            total = 0
            for k, v in lt.cursor(db=tx.db_keys):
                total += codec.StreamMeta.decode(v).length
        else:
            todo = []
            seen = set()
            for name in streams:
                if name in seen:
                    continue
                seen.add(name)
                m = tx.meta(name)
                if m is None:
                    raise SnapshotError("no such stream: %s" % name.decode("utf-8", "replace"))
                todo.append((name, m))
            total = sum(m.length for _, m in todo)
        w = _Writer(f, None if progress is None else (lambda ph, d, _t: progress(ph, d, total)))
        w.raw(MAGIC + _VER.pack(VERSION))
        w.rec(HEADER, _pack_map({"created-ms": int(time.time() * 1000), "writer": "xs",
                                 "entries": total}))
        it = todo if todo is not None else _all_streams(tx)
        for name, m in it:
            _save_stream(tx, w, name, m)
            st.streams += 1
        w.rec(END, _pack_map({"streams": st.streams, "entries": w.entries}))
        w.finish()
        st.entries = w.entries
    if hasattr(f, "flush"):
        f.flush()
    st.bytes = w.written
    st.seconds = time.monotonic() - t0
    if progress is not None:
        progress("save", st.entries, total)
    return st


def _all_streams(tx):
    """(name, StreamMeta) of every stream, in key order."""
    c = tx.lt.cursor(db=tx.db_keys)
    for k, v in c:
        m = codec.StreamMeta.decode(v)
        name = codec.name_from_key(k)
        yield (name if name is not None else m.name), m


def stream_records(tx, name, m):
    """Everything of stream ``m`` as logical records, in snapshot order
    (shared with the JSON-lines export).  Yields ``(type, value)``:

      STREAM    the stream record (a dict, as written to a snapshot)
      ENTRY     (entry key, stored value) -- raw, decoded by the caller
      PRODUCER  the producer key (name key: 0x00 + name or 0x01 + sha256)
      IID       ((ms, seq), iid key)
      GROUP     {"name", "last-id", "entries-read"}
      CONSUMER  {"name", "seen-time", "active-time"}
      PENDING   ((ms, seq), delivery time, delivery count), owned by the
                last CONSUMER
      NACKED    ((ms, seq), delivery count), in NACK order
    """
    lt = tx.lt
    yield STREAM, {
        "name": name, "length": m.length,
        "last-id": list(m.last_id), "max-deleted-id": list(m.max_deleted),
        "entries-added": m.entries_added,
        "idmp-configured": bool(m.idmp_cfg), "idmp-duration": m.idmp_duration,
        "idmp-maxsize": m.idmp_maxsize,
        "iids-added": m.idmp_stats[2], "iids-duplicates": m.idmp_stats[3]}
    p = codec.sid_prefix(m.sid)
    # entries, in ID order
    c = lt.cursor(db=tx.db_entries)
    n = 0
    if c.set_range(p):
        for kv in c.iternext():
            if kv[0][:8] != p:
                break
            yield ENTRY, kv
            n += 1
    if n != m.length:
        raise SnapshotError("stream %s: its record says %d entries but %d are stored"
                            % (_show(name), m.length, n))
    # idempotent-producer history: per producer, its IIDs in insertion order
    c = lt.cursor(db=tx.db_idmp)
    cur = None
    if c.set_range(p):
        for k, v in c.iternext():
            if k[:8] != p:
                break
            ln = (k[8] << 8) | k[9]
            pk = k[10:10 + ln]
            if pk != cur:
                yield PRODUCER, pk
                cur = pk
            if k[10 + ln:11 + ln] == b"o":
                yield IID, (_ID.unpack_from(k, 11 + ln), v)
    # groups, consumers, PEL
    for g in tx.group_list(m):
        yield GROUP, {"name": g.name, "last-id": list(g.last_id), "entries-read": g.entries_read}
        gp = codec.gid_prefix(g.gid)
        for cm in tx.consumer_list(g):
            yield CONSUMER, {"name": cm.name, "seen-time": cm.seen_time, "active-time": cm.active_time}
            cp = codec.cpel_prefix(g.gid, cm.cid)
            cc = lt.cursor(db=tx.db_cpel)
            if cc.set_range(cp):
                for k in cc.iternext(values=False):
                    if k[:16] != cp:
                        break
                    i = _ID.unpack_from(k, 16)
                    _, t, cnt = codec.decode_pending(lt.get(codec.pel_key(g.gid, i), db=tx.db_pel))
                    yield PENDING, (i, t, cnt)
        # NACKed entries (no owner), in NACK order: the time index order
        cc = lt.cursor(db=tx.db_ptime)
        if cc.set_range(gp):
            for k in cc.iternext(values=False):
                if k[:8] != gp:
                    break
                _, _, ms, seq = codec.PTIME.unpack(k)
                cid, _, cnt = codec.decode_pending(lt.get(codec.pel_key(g.gid, (ms, seq)), db=tx.db_pel))
                if not cid:
                    yield NACKED, ((ms, seq), cnt)


def _save_stream(tx, w, name, m):
    rec = w.rec
    pack = _pack_map
    for t, v in stream_records(tx, name, m):
        if t == ENTRY:
            rec(ENTRY, v[0][8:24] + _fields_blob(v[1]))
            w.entries += 1
        elif t == PENDING:
            i, tm, cnt = v
            rec(PENDING, _PEND.pack(i[0], i[1], tm, cnt))
        elif t == NACKED:
            i, cnt = v
            rec(NACKED, _NACK.pack(i[0], i[1], cnt))
        elif t == IID:
            rec(IID, _ID.pack(*v[0]) + v[1])
        elif t == PRODUCER:
            rec(PRODUCER, v)
        else:
            rec(t, pack(v))


def save_to_path(store, path, streams=None, progress=None):
    """``save`` into ``path`` through a temporary file in the same
    directory, fsynced and renamed into place: readers of ``path`` see
    the old file or the complete new one, never a partial one."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=d)
    except OSError as e:
        raise SnapshotError("cannot write %s: %s" % (path, e.strerror or e))
    try:
        with os.fdopen(fd, "wb") as f:
            st = save(store, f, streams, progress)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        try:
            dfd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
        return st
    except OSError as e:
        _unlink(tmp)
        raise SnapshotError("cannot write %s: %s" % (path, e.strerror or e))
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(p):
    try:
        os.unlink(p)
    except OSError:
        pass


# ===================================================================== read

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
        while avail < need:
            chunk = self.f.read(max(CHUNK, min(need - avail, CHUNK * 16)))
            if not chunk:
                raise SnapshotError("the file is truncated (ends at byte %d)" % (self.offset + avail))
            parts.append(chunk)
            avail += len(chunk)
        self.buf = b"".join(parts)
        self.pos = self.hpos = 0
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


def _bad(what, *args):
    return SnapshotError("not a valid snapshot: " + (what % args if args else what))


def _unmap(payload, t):
    try:
        d = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception:
        raise _bad("undecodable %s record", NAMES[t])
    if not isinstance(d, dict):
        raise _bad("%s record is not a map", NAMES[t])
    return d


def _int(d, key, t, lo=0, hi=U64, default=None):
    v = d.get(key, default)
    if type(v) is not int or v < lo or v > hi:
        raise _bad("%s record: bad or missing %r", NAMES[t], key)
    return v


def _bytes(d, key, t):
    v = d.get(key)
    if not isinstance(v, bytes):
        raise _bad("%s record: bad or missing %r", NAMES[t], key)
    return v


def _idpair(d, key, t):
    v = d.get(key)
    if (not isinstance(v, list) or len(v) != 2 or any(type(x) is not int or x < 0 or x > U64 for x in v)):
        raise _bad("%s record: bad or missing %r", NAMES[t], key)
    return (v[0], v[1])


def _name_key_ok(k):
    return (k[:1] == b"\x00" and len(k) <= codec.SHORT_NAME + 1) or (k[:1] == b"\x01" and len(k) == 33)


def _decode_fields(blob):
    try:
        fields = msgpack.unpackb(blob, raw=False)
    except Exception:
        raise _bad("undecodable ENTRY record")
    if (not isinstance(fields, list) or not fields or len(fields) % 2
            or not all(isinstance(x, bytes) for x in fields)):
        raise _bad("ENTRY record: fields must be a non-empty even list of byte strings")
    return fields


def records(f, progress=None, total=None):
    """Parse a snapshot from the binary file ``f``, yielding ``(type,
    value)`` for every record after checking it on its own and in the
    grammar; the END record is yielded only after the checksum matched
    and the file ended there.  Raises SnapshotError on anything else.

    Values: STREAM a dict (name, length, last_id, max_deleted,
    entries_added, idmp_*), ENTRY ((ms, seq), fields), PRODUCER
    the producer key, IID ((ms, seq), iid key), GROUP (name, last_id,
    entries_read), CONSUMER (name, seen_time, active_time), PENDING
    ((ms, seq), time, count), NACKED ((ms, seq), count), END a dict."""
    r = _Reader(f, progress, total)
    try:
        head = r.take(len(MAGIC))
    except SnapshotError:
        raise _bad("the file is too short to be a snapshot")
    if head != MAGIC:
        raise _bad("wrong magic (this is not an xs snapshot)")
    ver = _VER.unpack(r.take(2))[0]
    if ver != VERSION:
        raise SnapshotError("snapshot format version %d is not supported (this xs reads version %d)"
                            % (ver, VERSION))
    prev = None
    nstreams = nentries = 0
    s = None            # current stream dict
    s_entries = 0
    last_entry = MIN_ID
    last_pk = None
    last_iid = MIN_ID
    last_group = last_consumer = None
    last_pend = MIN_ID
    while True:
        at = r.tell()
        t, n = _FRAME.unpack(r.take(_FRAME.size))
        if t not in FOLLOWS:
            raise _bad("unknown record type 0x%02x at byte %d", t, at)
        if prev not in FOLLOWS[t]:
            raise _bad("%s record out of place at byte %d (after %s)", NAMES[t], at,
                       NAMES.get(prev, "the file header"))
        if n > MAX_RECORD:
            raise _bad("%s record at byte %d declares %d bytes (limit %d)", NAMES[t], at, n, MAX_RECORD)
        payload = r.take(n)
        if t == ENTRY:
            if n < 17:
                raise _bad("short ENTRY record at byte %d", at)
            i = _ID.unpack_from(payload)
            if i <= last_entry:
                raise _bad("ENTRY IDs out of order at byte %d", at)
            if i > s["last_id"]:
                raise _bad("ENTRY %s is after the stream's last ID", fmt(i).decode())
            fields = _decode_fields(payload[16:])
            last_entry = i
            s_entries += 1
            nentries += 1
            value = (i, fields)
        elif t == STREAM or t == END:
            if s is not None and s_entries != s["length"]:
                raise _bad("stream declares %d entries but holds %d", s["length"], s_entries)
            if t == END:
                d = _unmap(payload, t)
                if d.get("streams") != nstreams or d.get("entries") != nentries:
                    raise _bad("END record counts do not match the file")
                want = r.digest()
                got = r.take(DIGEST)
                if got != want:
                    raise SnapshotError("checksum mismatch: the snapshot is corrupt")
                if not r.at_eof():
                    raise _bad("unexpected data after the checksum")
                yield END, d
                return
            d = _unmap(payload, t)
            s = {"name": _bytes(d, "name", t),
                 "length": _int(d, "length", t),
                 "last_id": _idpair(d, "last-id", t),
                 "max_deleted": _idpair(d, "max-deleted-id", t),
                 "entries_added": _int(d, "entries-added", t),
                 "idmp_cfg": bool(d.get("idmp-configured", False)),
                 "idmp_duration": _int(d, "idmp-duration", t, 1, I64, 100),
                 "idmp_maxsize": _int(d, "idmp-maxsize", t, 1, I64, 100),
                 "iids_added": _int(d, "iids-added", t, 0, I64, 0),
                 "iids_duplicates": _int(d, "iids-duplicates", t, 0, I64, 0)}
            if s["entries_added"] < s["length"]:
                raise _bad("stream has more entries than it ever added")
            if s["max_deleted"] > s["last_id"]:
                raise _bad("stream's max deleted ID is after its last ID")
            nstreams += 1
            s_entries = 0
            last_entry = MIN_ID
            last_pk = last_group = None
            value = s
        elif t == HEADER:
            value = _unmap(payload, t)
        elif t == PRODUCER:
            if not _name_key_ok(payload):
                raise _bad("bad producer key at byte %d", at)
            k = (len(payload), payload)
            if last_pk is not None and k <= last_pk:
                raise _bad("PRODUCER records out of order at byte %d", at)
            last_pk = k
            last_iid = MIN_ID
            value = payload
        elif t == IID:
            if n < 17 or not _name_key_ok(payload[16:]):
                raise _bad("bad IID record at byte %d", at)
            i = _ID.unpack_from(payload)
            if i <= last_iid:
                raise _bad("IID records out of order at byte %d", at)
            last_iid = i
            value = (i, payload[16:])
        elif t == GROUP:
            d = _unmap(payload, t)
            name = _bytes(d, "name", t)
            if last_group is not None and name <= last_group:
                raise _bad("GROUP records out of order or repeated at byte %d", at)
            last_group = name
            last_consumer = None
            value = (name, _idpair(d, "last-id", t), _int(d, "entries-read", t, -1, I64))
        elif t == CONSUMER:
            d = _unmap(payload, t)
            name = _bytes(d, "name", t)
            if last_consumer is not None and name <= last_consumer:
                raise _bad("CONSUMER records out of order or repeated at byte %d", at)
            last_consumer = name
            last_pend = MIN_ID
            value = (name, _int(d, "seen-time", t, -I64, I64), _int(d, "active-time", t, -1, I64))
        elif t == PENDING:
            if n != _PEND.size:
                raise _bad("bad PENDING record at byte %d", at)
            ms, seq, tm, cnt = _PEND.unpack(payload)
            if (ms, seq) <= last_pend and last_pend != MIN_ID or (ms, seq) == MIN_ID:
                raise _bad("PENDING records out of order at byte %d", at)
            if tm < 0 or cnt > I64:
                raise _bad("bad PENDING record at byte %d", at)
            last_pend = (ms, seq)
            value = ((ms, seq), tm, cnt)
        else:  # NACKED
            if n != _NACK.size:
                raise _bad("bad NACKED record at byte %d", at)
            ms, seq, cnt = _NACK.unpack(payload)
            if (ms, seq) == MIN_ID or cnt > I64:
                raise _bad("bad NACKED record at byte %d", at)
            value = ((ms, seq), cnt)
        prev = t
        yield t, value


def _open_snapshot(path):
    try:
        return open(path, "rb")
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))


def verify(path, store=None, replace=False, progress=None):
    """First pass of a restore (and ``xs restore --check``): read the
    whole file, checking structure and checksum.  With ``store``, also
    refuse if a stream in the snapshot exists there (unless
    ``replace``).  Changes nothing.  Returns Stats."""
    st = Stats()
    t0 = time.monotonic()
    size = _size(path)
    cb = None if progress is None else (lambda off: progress("verify", off, size))
    tx_ctx = store.read() if store is not None else None
    tx = tx_ctx.__enter__() if tx_ctx is not None else None
    try:
        with _open_snapshot(path) as f:
            try:
                for t, v in records(f, cb, size):
                    if t == STREAM:
                        st.streams += 1
                        if tx is not None and not replace and tx.meta(v["name"]) is not None:
                            raise SnapshotError("stream %s already exists in the target store "
                                                "(use --replace to overwrite it)" % _show(v["name"]))
                    elif t == ENTRY:
                        st.entries += 1
            except OSError as e:
                raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    finally:
        if tx_ctx is not None:
            tx_ctx.__exit__(None, None, None)
    st.bytes = size or 0
    st.seconds = time.monotonic() - t0
    return st


def _size(path):
    try:
        return os.stat(path).st_size
    except OSError:
        return None


def _show(name):
    return name.decode("utf-8", "backslashreplace")


# ================================================================== restore

def restore(store, path, replace=False, progress=None):
    """Restore the snapshot at ``path`` into ``store``: verify it fully
    (nothing changes if that fails), then apply it in one write
    transaction.  A stream that exists is an error unless ``replace``
    (then it is deleted first, in the same transaction).  Returns Stats."""
    t0 = time.monotonic()
    verify(path, store, replace, progress)
    size = _size(path)
    cb = None if progress is None else (lambda off: progress("restore", off, size))

    def apply(tx):
        with _open_snapshot(path) as f:
            return _apply(tx, records(f, cb, size), replace)
    try:
        st = store.transact(apply, write=True)
    except lmdb.Error as e:
        raise SnapshotError("cannot apply the snapshot: %s" % e)
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    st.bytes = size or 0
    st.seconds = time.monotonic() - t0
    if progress is not None:
        progress("restore", size, size)
    return st


class _Applier:
    """Per-stream state of the second pass."""

    def __init__(self, tx):
        self.tx = tx
        self.m = None
        self.name = None
        self.batch = []
        self.pk = None          # current producer's key prefix
        self.pn = 0             # its IID count
        self.g = None
        self.c = None

    def flush_entries(self):
        if self.batch:
            c = self.tx.lt.cursor(db=self.tx.db_entries)
            _, added = c.putmulti(self.batch, append=True)
            if added != len(self.batch):
                raise _bad("ENTRY records could not be appended")
            self.batch = []

    def end_producer(self):
        if self.pk is not None:
            if self.pn:
                self.tx.lt.put(self.pk + b"n", b"%d" % self.pn, db=self.tx.db_idmp)
                self.m.idmp_stats[0] += 1
                self.m.idmp_stats[1] += self.pn
            self.pk = None
            self.pn = 0

    def end_stream(self):
        self.flush_entries()
        self.end_producer()
        self.g = self.c = None


def _apply(tx, recs, replace):
    st = Stats()
    a = _Applier(tx)
    lt = tx.lt
    restored = set()
    now = tx.now()
    ENTRY_ = codec.ENTRY
    encode = codec.encode_entry
    for t, v in recs:
        if t == ENTRY:
            i, fields = v
            a.batch.append((ENTRY_.pack(a.m.sid, i[0], i[1]), encode(b"%d-%d" % i, fields)))
            a.m.length += 1
            st.entries += 1
            if len(a.batch) >= 10000:
                a.flush_entries()
        elif t == STREAM or t == END:
            if a.m is not None:
                a.end_stream()
            if t == END:
                break
            name = v["name"]
            if name in restored:
                raise _bad("stream %s appears twice", _show(name))
            restored.add(name)
            if tx.meta(name) is not None:
                if not replace:
                    raise SnapshotError("stream %s already exists in the target store "
                                        "(use --replace to overwrite it)" % _show(name))
                tx.delete_keys([name])
            m = tx.create_meta(name)
            m.last_id = v["last_id"]
            m.max_deleted = v["max_deleted"]
            m.entries_added = v["entries_added"]
            m.idmp_duration = v["idmp_duration"]
            m.idmp_maxsize = v["idmp_maxsize"]
            m.idmp_cfg = v["idmp_cfg"]
            m.idmp_stats = [0, 0, v["iids_added"], v["iids_duplicates"]]
            tx.mark(name)
            a.m, a.name = m, name
            st.streams += 1
        elif t == PRODUCER:
            a.flush_entries()
            a.end_producer()
            a.pk = codec.sid_prefix(a.m.sid) + bytes([len(v) >> 8, len(v) & 255]) + v
        elif t == IID:
            i, ik = v
            key = a.pk + b"i" + ik
            if lt.get(key, db=tx.db_idmp) is not None:
                raise _bad("an IID appears twice for one producer")
            lt.put(key, _ID.pack(*i), db=tx.db_idmp)
            lt.put(a.pk + b"o" + _ID.pack(*i), ik, db=tx.db_idmp)
            a.pn += 1
        elif t == GROUP:
            a.flush_entries()
            a.end_producer()
            name, last_id, er = v
            a.g, a.c = tx.restore_group(a.m, name, last_id, er), None
        elif t == CONSUMER:
            name, seen, active = v
            a.c = tx.restore_consumer(a.g, name, seen, active)
        elif t == PENDING or t == NACKED:
            i = v[0]
            if tx.is_pending(a.g, i):
                raise _bad("entry %s is pending twice in group %s", fmt(i).decode(), _show(a.g.name))
            if t == PENDING:
                tx.restore_pending(a.g, i, a.c, v[1], v[2])
            else:
                tx.restore_pending(a.g, i, None, 0, v[1])
    return st
