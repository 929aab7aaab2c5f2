"""Consumer-group and consumer records (``groups``, ``consumers`` and
``cnames`` databases).

``GroupTable`` hands out decoded records, cached for the verb, and
``flush`` writes back the ones whose encoding changed, as
storage.parts.stream_table does for streams.  Records only: a group's PEL
is storage.parts.pel's, and the PEL counts in these records are changed by it.

Invariants: a group hangs off its stream's number (key ``sid + name
key``), a consumer off its group's number; every consumer has an entry
in ``cnames`` (``gid + cid -> name``) so that a PEL record, which names
its owner by number, leads back to it; a group's name is unique in its
stream, a consumer's in its group.
"""
from storage import codec

_ABSENT = object()


class GroupTable:
    """Group and consumer records of one verb."""

    __slots__ = ("_kv", "_streams", "_gdb", "_cdb", "_ndb", "_groups", "_graw", "_cons", "_craw", "_names", "made")

    def __init__(self, kv, streams):
        self._kv = kv
        self._streams = streams      # StreamTable (for counters)
        self._gdb = kv.db(b"groups")
        self._cdb = kv.db(b"consumers")
        self._ndb = kv.db(b"cnames")
        self._groups = {}            # (sid, name) -> GroupMeta or None
        self._graw = {}              # (sid, name) -> stored bytes (None: absent)
        self._cons = {}              # (gid, name) -> ConsumerMeta or None
        self._craw = {}              # (gid, name) -> stored bytes (None: absent)
        self._names = {}             # (gid, cid) -> consumer name
        self.made = 0                # consumers created by their first use (seen): Redis's dirty counts them

    # ================================================================ groups

    def _load(self, cache, raws, k, db, key, decode):
        """A record through the verb's cache: decoded once, its stored
        bytes kept for the write-back comparison."""
        rec = cache.get(k, _ABSENT)
        if rec is _ABSENT:
            raw = self._kv.get(db, key)
            rec = cache[k] = decode(raw) if raw is not None else None
            raws[k] = raw
        return rec

    def get(self, m, name):
        """Group ``name`` of stream ``m``, or None."""
        k = (m.sid, name)
        g = self._groups.get(k, _ABSENT)      # a run of reads of one group (Txn.shared): looked up once
        if g is not _ABSENT:
            return g
        return self._load(self._groups, self._graw, k, self._gdb, codec.group_key(m.sid, name),
                          lambda raw: codec.GroupMeta.decode(raw, m.sid))

    def list(self, m):
        """Every group of stream ``m``, in name order."""
        out = []
        seen = set()
        for key, v in self._kv.iter_prefix(self._gdb, codec.sid_prefix(m.sid)):
            g = codec.GroupMeta.decode(v, m.sid)
            k = (m.sid, g.name)
            seen.add(k)
            cached = self._groups.get(k, _ABSENT)
            if cached is _ABSENT:
                self._groups[k], self._graw[k] = g, v
            else:
                g = cached
            if g is not None:
                out.append(g)
        for k, g in self._groups.items():
            if k[0] == m.sid and g is not None and k not in seen:
                out.append(g)
        out.sort(key=lambda g: g.name)
        return out

    def create(self, m, name, last_id, entries_read):
        """A new group ``name`` of ``m`` (the caller made sure there is none)."""
        self.get(m, name)
        g = codec.GroupMeta(self._streams.counter(codec.COUNTER_GID), name, last_id, entries_read, m.sid)
        self._groups[(m.sid, name)] = g
        return g

    def remove(self, g):
        """Forget group ``g`` and its consumers (its PEL is the caller's)."""
        self._groups[(g.sid, g.name)] = None
        self._kv.delete_prefix(self._cdb, codec.gid_prefix(g.gid))
        self._kv.delete_prefix(self._ndb, codec.gid_prefix(g.gid))
        for k in [k for k in self._cons if k[0] == g.gid]:
            self._cons[k] = None
            self._craw[k] = None

    # ============================================================= consumers

    def consumer(self, g, name):
        """Consumer ``name`` of group ``g``, or None."""
        k = (g.gid, name)
        c = self._cons.get(k, _ABSENT)
        if c is _ABSENT:
            c = self._load(self._cons, self._craw, k, self._cdb, codec.consumer_key(g.gid, name),
                           codec.ConsumerMeta.decode)
            if c is not None:
                self._names[(g.gid, c.cid)] = name
        return c

    def create_consumer(self, g, name, now):
        """A new consumer ``name`` of ``g``, seen at ``now``."""
        self.consumer(g, name)
        c = codec.ConsumerMeta(self._streams.counter(codec.COUNTER_CID), name, now)
        self._cons[(g.gid, name)] = c
        self._names[(g.gid, c.cid)] = name
        self._kv.put(self._ndb, codec.cname_key(g.gid, c.cid), name)
        return c

    def seen(self, g, name, now):
        """Consumer ``name``, created if missing, its seen-time ``now``
        (every XREADGROUP / XCLAIM by a consumer)."""
        c = self.consumer(g, name)
        if c is None:
            self.made += 1
            return self.create_consumer(g, name, now)
        c.seen_time = now
        return c

    def consumer_name(self, g, cid):
        """The name of the consumer numbered ``cid`` (None if gone)."""
        k = (g.gid, cid)
        n = self._names.get(k)
        if n is None:
            n = self._names[k] = self._kv.get(self._ndb, codec.cname_key(g.gid, cid))
        return n

    def consumer_by_cid(self, g, cid):
        name = self.consumer_name(g, cid)
        return None if name is None else self.consumer(g, name)

    def consumers(self, g):
        """Consumers of group ``g``, in name order."""
        names = set()
        for _, v in self._kv.iter_prefix(self._cdb, codec.gid_prefix(g.gid)):
            names.add(codec.ConsumerMeta.decode(v).name)
        for (gid, name), c in self._cons.items():
            if gid == g.gid and c is not None:
                names.add(name)
        out = []
        for name in sorted(names):
            c = self.consumer(g, name)
            if c is not None:
                out.append(c)
        return out

    def delete_consumer(self, g, c):
        """Forget consumer ``c`` (its PEL entries are the caller's)."""
        self._kv.delete(self._ndb, codec.cname_key(g.gid, c.cid))
        self._cons[(g.gid, c.name)] = None

    # ================================================================= flush

    def flush(self):
        """Write back changed group and consumer records."""
        kv = self._kv
        _write_back(kv, self._gdb, self._groups, self._graw, lambda k: codec.group_key(*k),
                    lambda raw, k: codec.GroupMeta.decode(raw, k[0]))
        _write_back(kv, self._cdb, self._cons, self._craw, lambda k: codec.consumer_key(*k),
                    lambda raw, k: codec.ConsumerMeta.decode(raw))


def _write_back(kv, db, cache, raws, key, decode):
    """Put records whose encoding changed; delete the ones gone."""
    for k, rec in cache.items():
        raw = raws[k]
        if rec is None:
            if raw is not None:
                kv.delete(db, key(k))
                raws[k] = None
            continue
        enc = rec.encode()
        if enc != raw and (raw is None or decode(raw, k).encode() != enc):
            kv.put(db, key(k), enc)
            raws[k] = enc
