"""Loading saved state: the one write path of ``xs restore`` (snapshots),
``xs import`` (JSON lines) and the Redis bridge.

A loader consumes records -- tuples ``(kind, where, stream name, ...)``
-- and puts them into the store through the engine's parts, checking
every value's type and range and every record against the store first:
a file can hold anything, and what it holds must never become state the
engine cannot live with (a counter that overflows on the next XADD, a
delivery time the snapshot format cannot write back).  ``where`` says
where a record came from, for the error: a text ("line 12") or a
``(unit, number)`` pair (``("byte", 4096)``), formatted only on error.

Kinds and their fields:

  ("begin", where, name)                 a snapshot's stream starts: the
                                         stream must not exist (replace:
                                         it is deleted first)
  ("entry", where, name, id, fields)     an entry with its ID (above the
                                         stream's last ID); creates the
                                         stream if needed
  ("stream", where, name, meta)          the stream's counters (a dict:
                                         last-id, max-deleted-id,
                                         entries-added, idmp-configured,
                                         idmp-duration, idmp-maxsize,
                                         iids-added, iids-duplicates,
                                         expire-at: Unix ms, optional);
                                         after its entries
  ("iid", where, name, pid key, iid key, id)         IDMP history
  ("group", where, name, group, last id, entries read)
  ("consumer", where, name, group, consumer, seen, active)
  ("pending", where, name, group, consumer, id, delivery time, count)
  ("nacked", where, name, group, id, count)           in NACK order

Loading runs as one verb (``Txn.load``): a refused record aborts it and
leaves the store as it was.
"""
from storage import codec
from storage.ids import MIN_ID, U64, fmt
from storage.verbs.keyspace import drop_stream

if False:  # typing only (not imported at run time)
    from typing import Callable, NoReturn

I64 = (1 << 63) - 1
BATCH = 10000             # entries buffered per putmulti


class LoadError(Exception):
    """A record the store cannot take (the message names it)."""


class Stats:
    """What a load (or a save) handled."""

    __slots__ = ("streams", "entries", "bytes", "seconds")

    def __init__(self):
        self.streams = self.entries = self.bytes = 0
        self.seconds = 0.0

    def __repr__(self):
        return "Stats(streams=%d, entries=%d, bytes=%d, seconds=%.3f)" % (
            self.streams, self.entries, self.bytes, self.seconds)


# ================================================================ checks

def _fail(where, msg, *args) -> "NoReturn":
    text = msg % args if args else msg
    if type(where) is tuple:          # (unit, number), formatted only here
        where = "%s %d" % where
    raise LoadError("%s: %s" % (where, text) if where else text)


def _int(where, what, v, lo, hi):
    if type(v) is not int or not lo <= v <= hi:
        _fail(where, "%s must be an integer from %d to %d, not %s", what, lo, hi, _show(v))
    return v


def _id(where, what, v):
    if (type(v) not in (tuple, list) or len(v) != 2 or type(v[0]) is not int or type(v[1]) is not int
            or not 0 <= v[0] <= U64 or not 0 <= v[1] <= U64):
        _fail(where, "%s must be a stream ID, not %s", what, _show(v))
    return (v[0], v[1])


def _bytes(where, what, v):
    if type(v) is not bytes:
        _fail(where, "%s must be a byte string, not %s", what, _show(v))
    return v


def _name_key(where, what, v):
    if type(v) is not bytes or not codec.valid_name_key(v):
        _fail(where, "bad %s", what)
    return v


def _fields(where, v):
    if type(v) not in (list, tuple) or not v or len(v) % 2 or not all_bytes(v):
        _fail(where, "fields must be a non-empty list of field, value, ... byte strings")
    return list(v)


def all_bytes(v):
    """Every item a byte string (a join refuses anything else; the
    records handed to a loader hold bytes or decoded text, never other
    buffers).  Faster than a per-item type test on the bulk path."""
    try:
        b"".join(v)
    except TypeError:
        return False
    return True


def _show(v):
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _text(name):
    return name.decode("utf-8", "backslashreplace")


# ================================================================ loader

class Loader:
    """Applies records to the store through the parts ``p`` of one verb."""

    def __init__(self, p, replace=False):
        self.p = p
        self.replace = replace
        self.stats = Stats()
        self._begun = set()       # streams a "begin" record started
        self._batch = []          # buffered (key, value) entries of _batch_m
        self._batch_m: codec.StreamMeta | None = None
        self._batch_name = None
        self._names = set()

    def load(self, records):
        handlers: dict[str, Callable[..., None]] = {
            "begin": self._begin, "entry": self._entry, "stream": self._stream,
            "iid": self._iid, "group": self._group, "consumer": self._consumer,
            "pending": self._pending, "nacked": self._nacked}
        for rec in records:
            h = handlers.get(rec[0])
            if h is None:
                _fail(rec[1], "unknown record type %s", _show(rec[0]))
            if rec[0] != "entry":
                self._flush_entries()
            h(*rec[1:])
        self._flush_entries()
        self.stats.streams = len(self._names)
        return self.stats

    # --------------------------------------------------------------- streams

    def _stream_of(self, where, name, create=False) -> "codec.StreamMeta":
        name = _bytes(where, "stream name", name)
        m = self.p.streams.get(name)
        if m is None:
            if not create:
                _fail(where, "stream %s has no entries or stream record before this", _text(name))
            m = self.p.streams.create(name)
        self._names.add(name)
        return m

    def _begin(self, where, name):
        name = _bytes(where, "stream name", name)
        if name in self._begun:
            _fail(where, "stream %s appears twice", _text(name))
        self._begun.add(name)
        m = self.p.streams.get(name)
        if m is not None:
            if not self.replace:
                _fail(where, "stream %s already exists in the target store (use --replace to overwrite it)",
                      _text(name))
            drop_stream(self.p, m, name)
            self.p.streams.forget(name)
        self.p.streams.create(name)
        self._names.add(name)

    def _entry(self, where, name, i, fields):
        m = self._batch_m
        if m is None or name != self._batch_name:
            m = self._stream_of(where, name, create=True)
        i = _id(where, "entry ID", i)
        fields = _fields(where, fields)
        if i == MIN_ID:
            _fail(where, "entry ID 0-0 is not allowed")
        if i <= m.last_id:
            _fail(where, "ID %s is equal or smaller than the stream's last ID %s",
                  fmt(i).decode(), fmt(m.last_id).decode())
        if m.entries_added >= I64:
            _fail(where, "stream %s has added too many entries", _text(name))
        if self._batch_m is not m:
            self._flush_entries()
            self._batch_m, self._batch_name = m, name
        self._batch.append((i, fields))
        m.last_id = i
        m.entries_added += 1
        self.stats.entries += 1
        if len(self._batch) >= BATCH:
            self._flush_entries()

    def _flush_entries(self):
        if self._batch:
            self.p.log.append_many(self._batch_m, self._batch)
            self._batch = []
        self._batch_m = None

    def _stream(self, where, name, meta):
        m = self._stream_of(where, name, create=True)
        if not isinstance(meta, dict):
            _fail(where, "stream metadata must be a map")
        last = _id(where, "last-id", meta.get("last-id"))
        maxdel = _id(where, "max-deleted-id", meta.get("max-deleted-id", (0, 0)))
        added = _int(where, "entries-added", meta.get("entries-added"), 0, I64)
        top = self.p.log.last_id(m) if m.length else None
        if top is not None and last < top:
            _fail(where, "last-id %s is below the stream's last entry %s", fmt(last).decode(), fmt(top).decode())
        if maxdel > last:
            _fail(where, "max-deleted-id is after last-id")
        if added < m.length:
            _fail(where, "entries-added %d is below the stream's length %d", added, m.length)
        m.last_id, m.max_deleted, m.entries_added = last, maxdel, added
        cfg = meta.get("idmp-configured", False)
        if type(cfg) is not bool:
            _fail(where, "idmp-configured must be true or false")
        m.idmp_cfg = cfg
        m.idmp_duration = _int(where, "idmp-duration", meta.get("idmp-duration", m.idmp_duration), 1, 86400)
        m.idmp_maxsize = _int(where, "idmp-maxsize", meta.get("idmp-maxsize", m.idmp_maxsize), 1, 10000)
        m.idmp_stats[2] = _int(where, "iids-added", meta.get("iids-added", m.idmp_stats[2]), 0, I64)
        m.idmp_stats[3] = _int(where, "iids-duplicates", meta.get("iids-duplicates", m.idmp_stats[3]), 0, I64)
        if "expire-at" in meta:
            at = meta["expire-at"]
            self.p.expiry.set(_bytes(where, "stream name", name), m,
                              None if at is None else _int(where, "expire-at", at, 1, I64))

    def _iid(self, where, name, pid_key, iid_key, i):
        m = self._stream_of(where, name)
        pk = _name_key(where, "producer", pid_key)
        ik = _name_key(where, "iid", iid_key)
        i = _id(where, "iid's entry ID", i)
        if len(codec.idmp_iid_key(codec.idmp_prefix_for_key(m.sid, pk), ik)) > codec.LMDB_KEY_MAX:
            _fail(where, "iid key too long for this producer")
        if not self.p.idmp.restore(m, pk, ik, i):
            _fail(where, "an IID appears twice for one producer")

    # ---------------------------------------------------------------- groups

    def _group_of(self, where, name, group):
        m = self._stream_of(where, name)
        g = self.p.groups.get(m, _bytes(where, "group name", group))
        if g is None:
            _fail(where, "group %s of stream %s has no group record before this", _text(group), _text(name))
        return m, g

    def _group(self, where, name, group, last_id, entries_read):
        m = self._stream_of(where, name)
        group = _bytes(where, "group name", group)
        last_id = _id(where, "last-delivered-id", last_id)
        entries_read = _int(where, "entries-read", entries_read, -1, I64)
        if self.p.groups.get(m, group) is not None:
            _fail(where, "group %s of stream %s appears twice (BUSYGROUP)", _text(group), _text(name))
        self.p.groups.create(m, group, last_id, entries_read)
        self.p.streams.touch(name)

    def _consumer(self, where, name, group, consumer, seen, active):
        m, g = self._group_of(where, name, group)
        consumer = _bytes(where, "consumer name", consumer)
        seen = _int(where, "seen-time", seen, 0, I64)
        active = _int(where, "active-time", active, -1, I64)
        c = self.p.groups.consumer(g, consumer)
        if c is None:
            c = self.p.groups.create_consumer(g, consumer, seen)
        c.seen_time, c.active_time = seen, active

    def _pending_id(self, where, g, i):
        i = _id(where, "pending entry ID", i)
        if i == MIN_ID:
            _fail(where, "pending entry ID 0-0 is not allowed")
        if self.p.pel.contains(g, i):
            _fail(where, "entry %s is pending twice in group %s", fmt(i).decode(), _text(g.name))
        return i

    def _pending(self, where, name, group, consumer, i, time, count):
        m, g = self._group_of(where, name, group)
        i = self._pending_id(where, g, i)
        consumer = _bytes(where, "consumer name", consumer)
        time = _int(where, "delivery-time", time, 0, I64)
        count = _int(where, "delivery-count", count, 0, U64)
        c = self.p.groups.consumer(g, consumer)
        if c is None:
            c = self.p.groups.create_consumer(g, consumer, self.p.now)
        self.p.pel.put(g, i, c.cid, time, count, None)

    def _nacked(self, where, name, group, i, count):
        m, g = self._group_of(where, name, group)
        i = self._pending_id(where, g, i)
        count = _int(where, "delivery-count", count, 0, U64)
        self.p.pel.nack(g, i, count, None)


def load(p, records, replace=False):
    """The ``Txn.load`` verb: apply ``records``; returns Stats."""
    return Loader(p, replace).load(records)
