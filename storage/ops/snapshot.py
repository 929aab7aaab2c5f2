"""Snapshots: ``xs save`` and ``xs restore`` (no click, no rich).

A snapshot is one file in our own versioned binary format: its layout,
record types and grammar are storage.ops.snapshot_format's (described
for implementers in docs/snapshot-format.md).

Saving walks the store in ONE read transaction (a consistent view while
writers go on) and writes through a 1 MiB buffer, so memory does not
grow with the store.  Restoring reads the file twice: the first pass
checks magic, version, every record, the grammar and the checksum
without touching the store; the second pass applies the same records in
ONE write transaction through the engine's load path (storage.verbs.load,
which checks every value again), so a refused or interrupted restore
leaves the target exactly as it was.

A snapshot carries the live entries, not the listpack nodes Redis would
keep them in (storage.parts.nodes): a restore appends the entries, so their
nodes are rebuilt as if they had been added in ID order with nothing
deleted -- exact for a stream that never saw XDEL or trimming; for one
that did, approximate trimming after a restore may free other whole
nodes than it would have on the saved store (Redis's RDB, by contrast,
keeps its listpacks).  Keeping the snapshot format (version 1) free of
a detail of Redis's memory layout was preferred to carrying nodes.
"""
import os
import time
from itertools import chain
from typing import Any, Optional

import msgpack

from storage import codec
from storage.errors import RedisError
from storage.files import write_atomically
from storage.ids import MIN_ID, U64, fmt
from storage.ops.snapshot_format import (  # noqa: F401 (re-exported: storage.ops.snapshot's names before the split)
    CHUNK,
    CONSUMER,
    DIGEST,
    END,
    ENTRY,
    FOLLOWS,
    GROUP,
    HEADER,
    IID,
    MAGIC,
    MAX_RECORD,
    NACKED,
    NAMES,
    PENDING,
    PRODUCER,
    STREAM,
    VERSION,
    SnapshotError,
    _Reader,
    _Writer,
)
from storage.txn import StoreFailure
from storage.verbs.dump import CorruptStore
from storage.verbs.load import LoadError, Stats, all_bytes

I64 = (1 << 63) - 1


# ====================================================================== save

def _pack_map(d):
    return codec.packb(d)


def save(store, f, streams=None, progress=None):
    """Write a snapshot of ``store`` (or of the named ``streams``) to the
    binary file object ``f``.  One read transaction; memory does not
    grow with the store.  ``progress(phase, done, total)`` is called now
    and then with entry counts.  Returns Stats."""
    t0 = time.monotonic()
    st = Stats()
    with store.read() as tx:
        if streams is None:
            names = tx.stream_names()
        else:
            names = list(dict.fromkeys(streams))
            for name in names:
                if not tx.exists([name]):
                    raise SnapshotError("no such stream: %s" % name.decode("utf-8", "replace"))
        total = sum(tx.length(n) for n in names)
        w = _Writer(f, None if progress is None else (lambda ph, d, _t: progress(ph, d, total)))
        w.raw(MAGIC + codec.snap_version(VERSION))
        w.rec(HEADER, _pack_map({"created-ms": int(time.time() * 1000), "writer": "xs",
                                 "entries": total}))
        for name in names:
            if _save_stream(tx, w, name):
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


def _save_stream(tx, w, name):
    """One stream's records (storage.verbs.dump) as snapshot records;
    False if the stream is gone: it expired after the names were listed
    (each verb reads the clock anew), and a snapshot then leaves it out,
    as one taken a moment later would."""
    rec = w.rec
    pack = _pack_map
    producer = None
    entry_payload = codec.snap_entry_from_stored
    frame = codec.snap_frame
    records = tx.dump(name, batched=True)
    try:
        first = next(records)        # the stream's record, or no such key: nothing written yet
    except RedisError:
        return False
    try:
        for r in chain((first,), records):
            kind = r[0]
            if kind == "entries":      # the bulk of a snapshot: w.rec inlined
                buf = w.buf
                for i, v in r[1]:
                    payload = entry_payload(i, v)
                    if len(payload) > MAX_RECORD:
                        rec(ENTRY, payload)          # raises
                    buf += frame(ENTRY, len(payload))
                    buf += payload
                    if len(buf) >= CHUNK:
                        w.flush()
                w.entries += len(r[1])
            elif kind == "stream":
                meta = r[1]
                smap = {
                    "name": name, "length": meta["length"], "last-id": list(meta["last-id"]),
                    "max-deleted-id": list(meta["max-deleted-id"]), "entries-added": meta["entries-added"],
                    "idmp-configured": meta["idmp-configured"], "idmp-duration": meta["idmp-duration"],
                    "idmp-maxsize": meta["idmp-maxsize"], "iids-added": meta["iids-added"],
                    "iids-duplicates": meta["iids-duplicates"]}
                if "expire-at" in meta:
                    smap["expire-at"] = meta["expire-at"]
                rec(STREAM, pack(smap))
            elif kind == "iid":
                _, pk, ik, i = r
                if pk != producer:
                    rec(PRODUCER, pk)
                    producer = pk
                rec(IID, codec.snap_iid(i, ik))
            elif kind == "group":
                rec(GROUP, pack({"name": r[1], "last-id": list(r[2]), "entries-read": r[3]}))
            elif kind == "consumer":
                rec(CONSUMER, pack({"name": r[1], "seen-time": r[2], "active-time": r[3]}))
            elif kind == "pending":
                _, i, tm, cnt = r
                rec(PENDING, codec.snap_pending(i, tm, cnt))
            elif kind == "nacked":
                _, i, cnt = r
                rec(NACKED, codec.snap_nacked(i, cnt))
    except CorruptStore as e:
        raise SnapshotError(str(e))
    return True


def save_to_path(store, path, streams=None, progress=None):
    """``save`` into ``path`` through a temporary file in the same
    directory, fsynced and renamed into place: readers of ``path`` see
    the old file or the complete new one, never a partial one."""
    return write_to_path(path, lambda f: save(store, f, streams, progress))


def write_to_path(path, write):
    """``write(f)`` into ``path`` through a temporary file (mode 0600) in
    the same directory, fsynced and renamed into place, the directory
    fsynced (storage.files.write_atomically); its result.  Any failure
    leaves ``path`` as it was and no temporary file (xs save, xs save
    --format rdb)."""
    try:
        return write_atomically(path, write)
    except OSError as e:
        raise SnapshotError("cannot write %s: %s" % (path, e.strerror or e))


# ===================================================================== read

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


def _decode_fields(blob):
    try:
        fields = msgpack.unpackb(blob, raw=False)
    except Exception:
        raise _bad("undecodable ENTRY record")
    if type(fields) is not list or not fields or len(fields) % 2 or not all_bytes(fields):
        raise _bad("ENTRY record: fields must be a non-empty even list of byte strings")
    return fields


def records(f, progress=None, total=None):
    """Parse a snapshot from the binary file ``f``, yielding ``(type,
    value, offset)`` for every record after checking it on its own and in the
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
    ver = codec.snap_split_version(r.take(codec.SNAP_VERSION_SIZE))
    if ver != VERSION:
        raise SnapshotError("snapshot format version %d is not supported (this xs reads version %d)"
                            % (ver, VERSION))
    prev: Optional[int] = None
    nstreams = nentries = 0
    s: Any = None       # current stream dict
    s_entries = 0
    last_entry = MIN_ID
    last_pk = None
    last_iid = MIN_ID
    last_group = last_consumer = None
    last_pend = MIN_ID
    while True:
        at = r.tell()
        t, n = codec.snap_split_frame(r.take(codec.SNAP_FRAME_SIZE))
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
            i, blob = codec.snap_split_entry(payload)
            if i <= last_entry:
                raise _bad("ENTRY IDs out of order at byte %d", at)
            if i > s["last_id"]:
                raise _bad("ENTRY %s is after the stream's last ID", fmt(i).decode())
            fields = _decode_fields(blob)
            last_entry = i
            s_entries += 1
            nentries += 1
            value: Any = (i, fields)
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
                yield END, d, at
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
                 "iids_duplicates": _int(d, "iids-duplicates", t, 0, I64, 0),
                 "expire_at": _int(d, "expire-at", t, 1, I64) if "expire-at" in d else None}
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
            if not codec.valid_name_key(payload):
                raise _bad("bad producer key at byte %d", at)
            k = (len(payload), payload)
            if last_pk is not None and k <= last_pk:
                raise _bad("PRODUCER records out of order at byte %d", at)
            last_pk = k
            last_iid = MIN_ID
            value = payload
        elif t == IID:
            if n < 17:
                raise _bad("bad IID record at byte %d", at)
            i, ik = codec.snap_split_iid(payload)
            if not codec.valid_name_key(ik):
                raise _bad("bad IID record at byte %d", at)
            if i <= last_iid:
                raise _bad("IID records out of order at byte %d", at)
            last_iid = i
            value = (i, ik)
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
            if n != codec.SNAP_PENDING_SIZE:
                raise _bad("bad PENDING record at byte %d", at)
            (ms, seq), tm, cnt = codec.snap_split_pending(payload)
            if (ms, seq) <= last_pend and last_pend != MIN_ID or (ms, seq) == MIN_ID:
                raise _bad("PENDING records out of order at byte %d", at)
            if tm < 0 or cnt > I64:
                raise _bad("bad PENDING record at byte %d", at)
            last_pend = (ms, seq)
            value = ((ms, seq), tm, cnt)
        else:  # NACKED
            if n != codec.SNAP_NACKED_SIZE:
                raise _bad("bad NACKED record at byte %d", at)
            (ms, seq), cnt = codec.snap_split_nacked(payload)
            if (ms, seq) == MIN_ID or cnt > I64:
                raise _bad("bad NACKED record at byte %d", at)
            value = ((ms, seq), cnt)
        prev = t
        yield t, value, at


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
                for t, v, _ in records(f, cb, size):
                    if t == STREAM:
                        st.streams += 1
                        if tx is not None and not replace and tx.exists([v["name"]]):
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
    """Restore the snapshot at ``path`` into ``store`` in one write
    transaction through the engine's load path, checking the file as it
    is read: a fault anywhere (the checksum is at the end) aborts the
    transaction, so nothing changes.  One pass, not a verify pass and
    then an apply pass: an aborted LMDB transaction costs nothing.  A
    stream that exists is an error unless ``replace`` (then it is
    deleted first, in the same transaction).  Returns Stats."""
    t0 = time.monotonic()
    size = _size(path)
    cb = None if progress is None else (lambda off: progress("restore", off, size))

    def apply(tx):
        with _open_snapshot(path) as f:
            return tx.load(load_records(records(f, cb, size)), replace)
    try:
        st = store.run(apply, write=True)
    except LoadError as e:
        raise SnapshotError("cannot apply the snapshot: %s" % e)
    except (StoreFailure, RedisError) as e:
        raise SnapshotError("cannot apply the snapshot: %s" % e)
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    st.bytes = size or 0
    st.seconds = time.monotonic() - t0
    if progress is not None:
        progress("restore", size, size)
    return st


def load_records(recs):
    """Snapshot records -> storage.verbs.load records (its one load path).  A
    stream's counters are loaded once its entries are in."""
    name = meta = group = consumer = producer = None
    for t, v, at in recs:
        where = ("byte", at)
        if t != ENTRY and meta is not None:
            yield "stream", meta[0], name, meta[1]
            meta = None
        if t == ENTRY:
            yield "entry", where, name, v[0], v[1]
        elif t == STREAM:
            name = v["name"]
            yield "begin", where, name
            meta = (where, {"last-id": v["last_id"], "max-deleted-id": v["max_deleted"],
                            "entries-added": v["entries_added"], "idmp-configured": v["idmp_cfg"],
                            "idmp-duration": v["idmp_duration"], "idmp-maxsize": v["idmp_maxsize"],
                            "iids-added": v["iids_added"], "iids-duplicates": v["iids_duplicates"],
                            "expire-at": v["expire_at"]})
        elif t == PRODUCER:
            producer = v
        elif t == IID:
            yield "iid", where, name, producer, v[1], v[0]
        elif t == GROUP:
            group = v[0]
            yield "group", where, name, group, v[1], v[2]
        elif t == CONSUMER:
            consumer = v[0]
            yield "consumer", where, name, group, consumer, v[1], v[2]
        elif t == PENDING:
            yield "pending", where, name, group, consumer, v[0], v[1], v[2]
        elif t == NACKED:
            yield "nacked", where, name, group, v[0], v[1]
