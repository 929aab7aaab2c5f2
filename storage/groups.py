"""Consumer groups: XGROUP, XREADGROUP, XACK, XACKDEL, XNACK, XPENDING,
XCLAIM, XAUTOCLAIM, XINFO GROUPS / CONSUMERS (``GroupOps``, a mixin of
the transaction).

A pending entry is kept in three indexes, always changed together by
``_pel_put`` / ``_pel_del``:

  pel    gid + ID             -> [owner cid, time key, delivery count]
  cpel   gid + cid + ID       -> ""   (the owner's PEL: history reads)
  ptime  gid + time key + ID  -> ""   (oldest delivery first: claiming)

The time key is the last delivery time in ms.  An entry NACKed by XNACK
has no owner (cid 0) and a time key drawn from a small counter, so the
NACKed entries sit, in NACK order, before every delivered one: claiming
walks ``ptime`` from the start and meets them first, in O(log n + k).

Group and consumer records are cached per transaction and written back
by ``flush_groups`` before commit.
"""
from storage import codec, errors
from storage.ids import MAX_ID, MIN_ID, fmt
from storage.options import ACKED, DELREF

LLONG_MAX = (1 << 63) - 1
_PEL = codec.PEL
_CPEL = codec.CPEL
_ID_FROM = codec.ID.unpack_from
_U64 = codec.U64
_unpack = codec.PENDING.unpack
_pend = codec.PENDING.pack


class GroupOps:
    """Mixin of ``storage.txn.Txn``: consumer-group verbs."""

    # ================================================= group / consumer records

    def _gcache(self):
        try:
            return self._groups
        except AttributeError:
            self._groups = {}        # (sid, name) -> GroupMeta or None
            self._gdirty = set()
            self._consumers = {}     # (gid, name) -> ConsumerMeta or None
            self._cdirty = set()
            self._cnames = {}        # (gid, cid) -> name
            return self._groups

    def get_group(self, m, name):
        """The group ``name`` of stream ``m``, or None."""
        cache = self._gcache()
        k = (m.sid, name)
        if k in cache:
            return cache[k]
        raw = self.lt.get(codec.group_key(m.sid, name), db=self.db_groups)
        g = codec.GroupMeta.decode(raw) if raw is not None else None
        if g is not None:
            g.sid = m.sid
        cache[k] = g
        return g

    def group_list(self, m):
        """All groups of stream ``m``, in name order."""
        self._gcache()
        out = []
        p = _U64.pack(m.sid)
        c = self.lt.cursor(db=self.db_groups)
        seen = set()
        if c.set_range(p):
            for k, v in c.iternext():
                if k[:8] != p:
                    break
                g = codec.GroupMeta.decode(v)
                g.sid = m.sid
                ck = (m.sid, g.name)
                if ck in self._groups:
                    g = self._groups[ck]
                    if g is None:
                        continue
                else:
                    self._groups[ck] = g
                seen.add(ck)
                out.append(g)
        for (sid, name), g in self._groups.items():
            if sid == m.sid and g is not None and (sid, name) not in seen:
                out.append(g)
        out.sort(key=lambda g: g.name)
        return out

    def _group_dirty(self, m, g):
        self._gdirty.add((g.sid, g.name))

    def get_consumer(self, g, name):
        cache = self._consumers
        k = (g.gid, name)
        if k in cache:
            return cache[k]
        raw = self.lt.get(codec.consumer_key(g.gid, name), db=self.db_consumers)
        c = codec.ConsumerMeta.decode(raw) if raw is not None else None
        cache[k] = c
        if c is not None:
            self._cnames[(g.gid, c.cid)] = name
        return c

    def _create_consumer(self, g, name, now):
        c = codec.ConsumerMeta(self.counter(b"next-cid"), name, now)
        self._consumers[(g.gid, name)] = c
        self._cdirty.add((g.gid, name))
        self._cnames[(g.gid, c.cid)] = name
        self.lt.put(_consumer_name_key(g.gid, c.cid), name, db=self.db_consumers)
        return c

    def _consumer_for(self, g, name, now):
        """Look up (refreshing seen-time) or create a consumer."""
        c = self.get_consumer(g, name)
        if c is None:
            c = self._create_consumer(g, name, now)
        else:
            c.seen_time = now
            self._cdirty.add((g.gid, name))
        return c

    def consumer_name(self, g, cid):
        k = (g.gid, cid)
        n = self._cnames.get(k)
        if n is None:
            n = self.lt.get(_consumer_name_key(g.gid, cid), db=self.db_consumers)
            self._cnames[k] = n
        return n

    def consumer_by_cid(self, g, cid):
        return self.get_consumer(g, self.consumer_name(g, cid))

    def consumer_list(self, g):
        """Consumers of group ``g`` in name order."""
        out = []
        p = _U64.pack(g.gid)
        c = self.lt.cursor(db=self.db_consumers)
        names = []
        if c.set_range(p):
            for k, v in c.iternext():
                if k[:8] != p or k[8:9] == b"\x02":
                    break
                names.append(codec.ConsumerMeta.decode(v).name)
        for (gid, name), cm in self._consumers.items():
            if gid == g.gid and cm is not None and name not in names:
                names.append(name)
        for name in sorted(set(names)):
            cm = self.get_consumer(g, name)
            if cm is not None:
                out.append(cm)
        return out

    def flush_groups(self):
        """Write back changed group and consumer records."""
        if not hasattr(self, "_groups"):
            return
        put, delete = self.lt.put, self.lt.delete
        for sid, name in self._gdirty:
            g = self._groups.get((sid, name))
            if g is None:
                delete(codec.group_key(sid, name), db=self.db_groups)
            else:
                put(codec.group_key(sid, name), g.encode(), db=self.db_groups)
        for gid, name in self._cdirty:
            c = self._consumers.get((gid, name))
            if c is None:
                delete(codec.consumer_key(gid, name), db=self.db_consumers)
            else:
                put(codec.consumer_key(gid, name), c.encode(), db=self.db_consumers)
        self._gdirty.clear()
        self._cdirty.clear()

    # ============================================================ PEL indexes

    def _pel_get(self, g, i):
        v = self.lt.get(_PEL.pack(g.gid, i[0], i[1]), db=self.db_pel)
        return None if v is None else _unpack(v)

    def _pel_put(self, g, i, cid, tkey, count, old):
        """Write pending entry ``i`` (owner, time key, count), replacing
        ``old`` (its previous record, or None) in all three indexes."""
        lt, gid = self.lt, g.gid
        ms, seq = i
        self._gdirty.add((g.sid, g.name))
        if old is not None:
            ocid, otk, _ = old
            if otk != tkey:
                lt.delete(_CPEL.pack(gid, otk, ms, seq), db=self.db_ptime)
            if ocid != cid and ocid:
                lt.delete(_CPEL.pack(gid, ocid, ms, seq), db=self.db_cpel)
                oc = self.consumer_by_cid(g, ocid)
                if oc is not None:
                    oc.pel_count -= 1
                    self._cdirty.add((gid, oc.name))
        else:
            g.pel_count += 1
        lt.put(_PEL.pack(gid, ms, seq), _pend(cid, tkey, count), db=self.db_pel)
        if old is None or old[1] != tkey:
            lt.put(_CPEL.pack(gid, tkey, ms, seq), b"", db=self.db_ptime)
        if cid and (old is None or old[0] != cid):
            lt.put(_CPEL.pack(gid, cid, ms, seq), b"", db=self.db_cpel)
            nc = self.consumer_by_cid(g, cid)
            if nc is not None:
                nc.pel_count += 1
                self._cdirty.add((gid, nc.name))

    def _pel_del(self, g, i, old):
        """Remove pending entry ``i`` (record ``old``) from all indexes."""
        lt, gid = self.lt, g.gid
        ms, seq = i
        self._gdirty.add((g.sid, g.name))
        cid, tkey, _ = old
        lt.delete(_PEL.pack(gid, ms, seq), db=self.db_pel)
        lt.delete(_CPEL.pack(gid, tkey, ms, seq), db=self.db_ptime)
        if cid:
            lt.delete(_CPEL.pack(gid, cid, ms, seq), db=self.db_cpel)
            c = self.consumer_by_cid(g, cid)
            if c is not None:
                c.pel_count -= 1
                self._cdirty.add((gid, c.name))
        g.pel_count -= 1

    def _nack_key(self):
        """Time key for a NACKed entry: below any real delivery time, in
        NACK order."""
        return self.counter(b"next-nack")

    # ============================================= restoring saved state
    # (snapshots, JSON-lines import): put back exactly what was saved.

    def restore_group(self, m, name, last_id, entries_read):
        """Create group ``name`` of stream ``m`` as saved; returns it."""
        g = codec.GroupMeta(self.counter(b"next-gid"), name, last_id, entries_read)
        g.sid = m.sid
        self._gcache()[(m.sid, name)] = g
        self._gdirty.add((m.sid, name))
        return g

    def restore_consumer(self, g, name, seen_time, active_time):
        """Create (or update) consumer ``name`` of ``g`` with its times."""
        c = self.get_consumer(g, name)
        if c is None:
            c = self._create_consumer(g, name, seen_time)
        c.seen_time, c.active_time = seen_time, active_time
        self._cdirty.add((g.gid, name))
        return c

    def restore_pending(self, g, i, consumer, delivery_time, count):
        """Put entry ``i`` in the PEL of ``g``: owned by ``consumer`` (a
        ConsumerMeta) with its delivery time, or NACKed (consumer None,
        appended to the NACK order).  Replaces any pending record."""
        old = self._pel_get(g, i)
        if consumer is None:
            self._pel_put(g, i, 0, self._nack_key(), count, old)
        else:
            self._pel_put(g, i, consumer.cid, delivery_time, count, old)

    def is_pending(self, g, i):
        return self._pel_get(g, i) is not None

    # ======================================================= referenced entries

    def entry_referenced(self, m, groups, i):
        """True if some group still needs entry ``i``: not yet delivered to
        it, or in its PEL (the ACKED policy keeps such entries)."""
        if not groups:
            return False
        for g in groups:
            if g.last_id < i:
                return True
        for g in groups:
            if self.lt.get(_PEL.pack(g.gid, i[0], i[1]), db=self.db_pel) is not None:
                return True
        return False

    def drop_references(self, groups, i):
        """Remove ``i`` from every group's PEL (DELREF).  True if any."""
        hit = False
        for g in groups or ():
            old = self._pel_get(g, i)
            if old is not None:
                self._pel_del(g, i, old)
                hit = True
        return hit

    def _drop_group_data(self, g):
        """Delete a group's PEL indexes and consumers."""
        from storage.stream import delete_prefix
        p = _U64.pack(g.gid)
        for db in (self.db_pel, self.db_cpel, self.db_ptime, self.db_consumers):
            c = self.lt.cursor(db=db)
            if c.set_range(p):
                delete_prefix(c, p)
        for k in [k for k in self._consumers if k[0] == g.gid]:
            self._consumers[k] = None
            self._cdirty.discard(k)

    def drop_all_groups(self, m):
        """Delete every group of stream ``m`` (DEL of the stream)."""
        for g in self.group_list(m):
            self._drop_group_data(g)
            self._groups[(m.sid, g.name)] = None
            self._gdirty.add((m.sid, g.name))

    # ==================================================================== XGROUP

    def create_group(self, name, group, start, mkstream=False, entries_read=-1):
        """XGROUP CREATE; ``start`` is an ID or b"$"."""
        m = self.meta(name)
        if m is None and not mkstream:
            raise errors.xgroup_mkstream_needed()
        if m is not None and self.get_group(m, group) is not None:
            raise errors.busygroup()
        if start == b"$":
            start = m.last_id if m is not None else MIN_ID
        if m is None:
            m = self.create_meta(name)
        if entries_read != -1 and entries_read > m.entries_added:
            entries_read = m.entries_added
        g = codec.GroupMeta(self.counter(b"next-gid"), group, start, entries_read)
        g.sid = m.sid
        self._gcache()[(m.sid, group)] = g
        self._group_dirty(m, g)
        self.mark(name)

    def _need_group(self, name, group):
        """(stream, group) for XGROUP subcommands that need both."""
        m = self.meta(name)
        if m is None:
            raise errors.xgroup_mkstream_needed()
        g = self.get_group(m, group)
        if g is None:
            raise errors.nogroup_for_key(name, group)
        return m, g

    def set_group_id(self, name, group, start, entries_read=-1):
        """XGROUP SETID."""
        m, g = self._need_group(name, group)
        if start == b"$":
            start = m.last_id
        if entries_read != -1 and entries_read > m.entries_added:
            entries_read = m.entries_added
        g.last_id = start
        g.entries_read = entries_read
        self._group_dirty(m, g)
        self.mark(name)

    def destroy_group(self, name, group):
        """XGROUP DESTROY: 1 if the group existed."""
        m = self.meta(name)
        if m is None:
            raise errors.xgroup_mkstream_needed()
        g = self.get_group(m, group)
        if g is None:
            return 0
        self._drop_group_data(g)
        self._groups[(m.sid, group)] = None
        self._gdirty.add((m.sid, group))
        self.mark(name)
        return 1

    def create_consumer(self, name, group, consumer):
        """XGROUP CREATECONSUMER: 1 if created, 0 if it existed."""
        m, g = self._need_group(name, group)
        if self.get_consumer(g, consumer) is not None:
            return 0
        self._create_consumer(g, consumer, self.now())
        self.mark(name)
        return 1

    def delete_consumer(self, name, group, consumer):
        """XGROUP DELCONSUMER: how many pending entries it had (they are
        removed from the group PEL too)."""
        m, g = self._need_group(name, group)
        c = self.get_consumer(g, consumer)
        if c is None:
            return 0
        ids = self._consumer_pel(g, c.cid, MIN_ID, MAX_ID, 0)
        for i in ids:
            self._pel_del(g, i, self._pel_get(g, i))
        self.lt.delete(_consumer_name_key(g.gid, c.cid), db=self.db_consumers)
        self._consumers[(g.gid, consumer)] = None
        self._cdirty.add((g.gid, consumer))
        self._group_dirty(m, g)
        self.mark(name)
        return len(ids)

    def _consumer_pel(self, g, cid, start, end, count):
        """IDs in a consumer's PEL within [start, end], at most count (0: all)."""
        out = []
        c = self.lt.cursor(db=self.db_cpel)
        lo = _CPEL.pack(g.gid, cid, start[0], start[1])
        hi = _CPEL.pack(g.gid, cid, end[0], end[1])
        if c.set_range(lo):
            for k in c.iternext(values=False):
                if k > hi:
                    break
                out.append(codec.ID.unpack_from(k, 16))
                if count and len(out) >= count:
                    break
        return out

    # =============================================================== lag & co

    def _has_tombstones(self, m, start, first=None):
        """streamRangeHasTombstones(s, start, +inf)."""
        if m.length == 0 or m.max_deleted == MIN_ID:
            return False
        if first is None:
            first = self.first_id(m)
        if first > m.max_deleted:
            return False
        return start <= m.max_deleted

    def _estimate_read(self, m, i, first=None):
        """streamEstimateDistanceFromFirstEverEntry: entries-read for a
        group whose last-delivered-id is ``i``, or -1 if unknowable."""
        if not m.entries_added:
            return 0
        if not m.length and i <= m.last_id:
            return m.entries_added
        if i != MIN_ID and i < m.max_deleted:
            return -1
        if i == m.last_id:
            return m.entries_added
        if i > m.last_id:
            return -1
        if first is None:
            first = self.first_id(m)
        if m.max_deleted == MIN_ID or m.max_deleted < first:
            if i < first:
                return m.entries_added - m.length
            if i == first:
                return m.entries_added - m.length + 1
        return -1

    def _lag(self, m, g):
        """XINFO's lag of group ``g``, or None when unknowable."""
        if not m.entries_added or not m.length:
            return 0
        first = self.first_id(m)
        if g.last_id < first and m.max_deleted < first:
            return m.length
        if g.entries_read != -1 and not self._has_tombstones(m, g.last_id, first):
            return m.entries_added - g.entries_read
        er = self._estimate_read(m, g.last_id, first)
        return None if er == -1 else m.entries_added - er

    def _advance_group(self, m, g, i):
        """The group delivered entry ``i`` (newer than its last ID): count
        it when the counter is known, the group was not behind the first
        entry and no tombstone lies ahead; otherwise estimate it."""
        if g.entries_read != -1 and g.last_id >= self.first_id(m) and not self._has_tombstones(m, i):
            g.entries_read += 1
        elif m.entries_added:
            g.entries_read = self._estimate_read(m, i)
        g.last_id = i

    # ================================================================ XREADGROUP

    def read_group(self, o, ids=None):
        """XREADGROUP without blocking: ``[(key, entries)]``.  Each entry
        is (id, fields) -- fields None for a deleted pending entry -- or,
        with CLAIM, (id, fields, idle ms, delivery count)."""
        now = self.now()
        found = []
        for key in o.keys:
            m = self.meta(key)
            g = self.get_group(m, o.group) if m is not None else None
            if g is None:
                raise errors.nogroup_xreadgroup(key, o.group)
            found.append((m, g))
        out = []
        total = 0
        size = 0
        claim = o.claim
        for (m, g), key, want in zip(found, o.keys, ids or o.ids):
            if o.maxcount and total >= o.maxcount:
                break
            if o.maxsize and size >= o.maxsize:
                break
            count = o.count
            if o.maxcount:
                left = o.maxcount - total
                count = left if not count or left < count else count
            c = self._consumer_for(g, o.consumer, now)
            budget = [size, o.maxsize]   # reply bytes so far, cap (0: none)
            if want == b">":
                ents = []
                if claim is not None:
                    ents = self._claim_idle(m, g, c, claim, count, now, budget)
                left = (count - len(ents)) if count else 0
                if (not count or left > 0) and not (o.maxsize and budget[0] >= o.maxsize):
                    news = self._deliver_new(m, g, c, left, o.noack, now, budget)
                    if claim is not None:
                        news = [[i, f, 0, 0] for i, f in news]
                    ents += news
                if not ents:
                    continue
                c.active_time = now
            else:
                ents = self._history(m, g, c, want, count, now, budget)
            size = budget[0]
            self._group_dirty(m, g)
            self.mark(key)
            total += len(ents)
            out.append((key, ents))
        return out

    def _deliver_new(self, m, g, c, count, noack, now, budget=None):
        """Entries after the group's last ID, now delivered to ``c``
        (no more than fit in ``budget``: [reply bytes so far, MAXSIZE])."""
        if m.length == 0 or g.last_id >= m.last_id:
            return []
        from storage.ids import incr
        out = []
        for i, fields in _fit(self.entry_rows(m, incr(g.last_id), count), budget):
            self._advance_group(m, g, i)
            if not noack:
                old = self._pel_get(g, i)
                self._pel_put(g, i, c.cid, now, 1, old)
            out.append([fmt(i), fields])
        return out

    def _history(self, m, g, c, after, count, now, budget=None):
        """A consumer's own pending entries after ``after`` (history read):
        delivery time and count are updated, deleted entries give None."""
        from storage.ids import incr
        if after == MAX_ID:
            return []
        out = []
        rows = [(i, self.entry_fields(m, i)) for i in self._consumer_pel(g, c.cid, incr(after), MAX_ID, count)]
        for i, fields in _fit(rows, budget):
            if fields is not None:  # a deleted entry is shown, not redelivered
                old = self._pel_get(g, i)
                self._pel_put(g, i, c.cid, now, _inc(old[2]), old)
            out.append([fmt(i), fields])
        return out

    def _claim_idle(self, m, g, c, min_idle, count, now, budget=None):
        """XREADGROUP ... CLAIM: move entries idle for ``min_idle`` ms to
        ``c``, longest idle first (NACKed first), at most ``count``
        (0: all).  Entries deleted from the stream are skipped.  Returns
        (id, fields, idle, delivery count before this delivery).  Walks
        the time index from its start: O(log n + k)."""
        lt = self.lt
        get = lt.get
        db_entries, db_pel = self.db_entries, self.db_pel
        epack, ppack = codec.ENTRY.pack, _PEL.pack
        sid, gid = m.sid, g.gid
        cur = lt.cursor(db=self.db_ptime)
        p = _U64.pack(gid)
        cutoff = now - min_idle
        cand = []
        if cur.set_range(p):
            for k in cur.iternext(values=False):
                if k[:8] != p:
                    break
                _, t, ms, seq = _CPEL.unpack(k)
                if t > cutoff:
                    break
                v = get(epack(sid, ms, seq), db=db_entries)
                if v is None:       # deleted from the stream: skipped
                    continue
                cand.append(((ms, seq), v))
                if count and len(cand) >= count:
                    break
        decode = codec.decode_entry
        rows = [(i, decode(v)[1]) for i, v in cand]
        if budget and budget[1]:
            rows = _fit(rows, budget)
        out = []
        moves = []
        for i, fields in rows:
            old = _unpack(get(ppack(gid, i[0], i[1]), db=db_pel))
            idle = now - old[1] if old[0] else now
            moves.append((i, old))
            out.append([b"%d-%d" % i, fields, idle if idle > 0 else 0, old[2]])
        self._move_pending(g, moves, c, now)
        return out

    def _move_pending(self, g, moves, c, now):
        """Deliver pending entries to consumer ``c`` at ``now``, counting
        one more delivery each: ``moves`` is [(id, old record)].  The same
        index updates as ``_pel_put``, done in bulk (claiming)."""
        lt, gid, cid = self.lt, g.gid, c.cid
        delete = lt.delete
        db_cpel, db_ptime = self.db_cpel, self.db_ptime
        pack, ppack = _CPEL.pack, _PEL.pack
        lost = {}
        new_ptime, new_cpel, new_pel = [], [], []
        for (ms, seq), (ocid, otk, cnt) in moves:
            if otk != now:
                delete(pack(gid, otk, ms, seq), db=db_ptime)
                new_ptime.append((pack(gid, now, ms, seq), b""))
            if ocid != cid:
                if ocid:
                    delete(pack(gid, ocid, ms, seq), db=db_cpel)
                    lost[ocid] = lost.get(ocid, 0) + 1
                new_cpel.append((pack(gid, cid, ms, seq), b""))
            new_pel.append((ppack(gid, ms, seq), _pend(cid, now, cnt if cnt == LLONG_MAX else cnt + 1)))
        # key order makes the inserts cheap (neighbouring B-tree leaves)
        new_pel.sort()
        new_cpel.sort()
        new_ptime.sort()
        lt.cursor(db=self.db_pel).putmulti(new_pel)
        lt.cursor(db=db_cpel).putmulti(new_cpel)
        lt.cursor(db=db_ptime).putmulti(new_ptime)
        for ocid, n in lost.items():
            oc = self.consumer_by_cid(g, ocid)
            if oc is not None:
                oc.pel_count -= n
                self._cdirty.add((gid, oc.name))
        c.pel_count += len(new_cpel)
        self._cdirty.add((gid, c.name))
        self._gdirty.add((g.sid, g.name))

    def claim_wait_ms(self, keys, group, min_idle):
        """For a blocked XREADGROUP CLAIM: ms until the oldest pending entry
        of these streams becomes claimable (None: nothing pending)."""
        now = self.now()
        best = None
        for key in keys:
            m = self.meta(key)
            g = self.get_group(m, group) if m is not None else None
            if g is None:
                continue
            c = self.lt.cursor(db=self.db_ptime)
            p = _U64.pack(g.gid)
            if c.set_range(p):
                # the oldest pending entry that still exists in the stream
                for k in c.iternext(values=False):
                    if k[:8] != p:
                        break
                    _, t, ms, seq = _CPEL.unpack(k)
                    if self.entry_exists(m, (ms, seq)):
                        w = max(0, t + min_idle - now)
                        best = w if best is None else min(best, w)
                        break
        return best

    # ====================================================================== XACK

    def ack(self, name, group, ids):
        """XACK: how many of ``ids`` were pending."""
        m = self.meta(name)
        g = self.get_group(m, group) if m is not None else None
        if g is None:
            return 0
        n = 0
        for i in ids:
            old = self._pel_get(g, i)
            if old is not None:
                self._pel_del(g, i, old)
                n += 1
        if n:
            self._group_dirty(m, g)
            self.mark(name)
        return n

    def ack_delete(self, name, group, ids, policy):
        """XACKDEL: per ID -1 (not pending in this group), 1 (acked and
        deleted) or 2 (acked, kept: another group still needs it)."""
        m = self.meta(name)
        g = self.get_group(m, group) if m is not None else None
        if g is None:
            return [-1] * len(ids)
        groups = self.group_list(m)
        out = []
        for i in ids:
            old = self._pel_get(g, i)
            if old is None:
                out.append(-1)
                continue
            self._pel_del(g, i, old)
            if policy == ACKED and self.entry_referenced(m, groups, i):
                out.append(2)
                continue
            if policy == DELREF:
                self.drop_references(groups, i)
            if self._delete_entry(m, i) and i > m.max_deleted:
                m.max_deleted = i
            out.append(1)
        self._group_dirty(m, g)
        self.mark(name)
        return out

    # ===================================================================== XNACK

    def nack(self, name, group, o):
        """XNACK: give entries back (unowned, claimable at once)."""
        m = self.meta(name)
        g = self.get_group(m, group) if m is not None else None
        if g is None:
            raise errors.nogroup_key(name, group)
        n = 0
        for i in o.ids:
            old = self._pel_get(g, i)
            if old is None:
                if not o.force or not self.entry_exists(m, i):
                    continue
                count = 0
            else:
                count = old[2]
            if o.retrycount is not None:
                count = o.retrycount
            elif o.mode == "silent":
                count = count - 1 if count > 0 else 0
            elif o.mode == "fatal":
                count = LLONG_MAX
            self._pel_put(g, i, 0, self._nack_key(), count, old)
            n += 1
        if n:
            self._group_dirty(m, g)
            self.mark(name)
        return n

    # ================================================================== XPENDING

    def _need_pending_group(self, name, group):
        m = self.meta(name)
        g = self.get_group(m, group) if m is not None else None
        if g is None:
            raise errors.nogroup_key(name, group)
        return m, g

    def pending_summary(self, name, group):
        """XPENDING key group: (count, first, last, [(consumer, n)])."""
        m, g = self._need_pending_group(name, group)
        if g.pel_count == 0:
            return 0, None, None, None
        c = self.lt.cursor(db=self.db_pel)
        p = _U64.pack(g.gid)
        c.set_range(p)
        first = _ID_FROM(c.key(), 8)
        if c.set_range(_U64.pack(g.gid + 1)):
            c.prev()
        else:
            c.last()
        last = _ID_FROM(c.key(), 8)
        owners = [(cm.name, cm.pel_count) for cm in self.consumer_list(g) if cm.pel_count > 0]
        return g.pel_count, fmt(first), fmt(last), owners

    def pending_range(self, name, group, o):
        """XPENDING key group [IDLE ms] start end count [consumer]:
        [(id, consumer, idle, count)]; NACKed entries: consumer b"",
        idle -1."""
        m, g = self._need_pending_group(name, group)
        now = self.now()
        out = []
        if o.count <= 0:
            return out
        if o.consumer is not None:
            cm = self.get_consumer(g, o.consumer)
            if cm is None:
                return out
            ids = self._consumer_pel(g, cm.cid, o.start, o.end, 0 if o.min_idle else o.count)
            recs = ((i, self._pel_get(g, i)) for i in ids)
        else:
            recs = self._pel_iter(g, o.start, o.end)
        for i, rec in recs:
            cid, t, cnt = rec
            if cid:
                idle = max(0, now - t)
                if o.min_idle and idle < o.min_idle:
                    continue
                out.append((fmt(i), self.consumer_name(g, cid), idle, cnt))
            else:
                out.append((fmt(i), b"", -1, cnt))
            if len(out) >= o.count:
                break
        return out

    def _pel_iter(self, g, start, end):
        c = self.lt.cursor(db=self.db_pel)
        lo = _PEL.pack(g.gid, start[0], start[1])
        hi = _PEL.pack(g.gid, end[0], end[1])
        if c.set_range(lo):
            for k, v in c.iternext():
                if k > hi:
                    break
                yield _ID_FROM(k, 8), _unpack(v)

    # ==================================================================== XCLAIM

    def claim(self, name, group, consumer, min_idle, ids, o):
        """XCLAIM: entries (or IDs with JUSTID) now owned by ``consumer``."""
        m, g = self._need_pending_group(name, group)
        now = self.now()
        t = now
        if o.idle is not None:
            t = now - o.idle
        elif o.time is not None:
            t = o.time
        if t < 0 or t > now:
            t = now
        if o.lastid is not None and o.lastid > g.last_id:
            g.last_id = o.lastid
            self._group_dirty(m, g)
            self.mark(name)
        out = []
        c = None
        for i in ids:
            old = self._pel_get(g, i)
            if not self.entry_exists(m, i):
                if old is not None:
                    self._pel_del(g, i, old)
                    self._group_dirty(m, g)
                    self.mark(name)
                continue
            if old is None:
                if not o.force:
                    continue
                cur = None
                count = 1          # streamCreateNACK starts at 1
            else:
                cur = old
                count = old[2]
                if old[0] and min_idle and now - old[1] < min_idle:
                    continue
            if c is None:
                c = self._consumer_for(g, consumer, now)
            if o.retrycount is not None:
                count = o.retrycount
            elif not o.justid:
                count = _inc(count)
            self._pel_put(g, i, c.cid, t, count, cur)
            c.active_time = now
            out.append(fmt(i) if o.justid else [fmt(i), self.entry_fields(m, i)])
            self._group_dirty(m, g)
            self.mark(name)
        return out

    def autoclaim(self, name, group, consumer, min_idle, start, count, justid):
        """XAUTOCLAIM: (next cursor, claimed, deleted IDs)."""
        m, g = self._need_pending_group(name, group)
        now = self.now()
        attempts = count * 10
        claimed, deleted = [], []
        c = None
        nxt = MIN_ID
        it = self._pel_iter(g, start, MAX_ID)
        for i, rec in it:
            if not attempts or not count:
                nxt = i
                break
            attempts -= 1
            if not self.entry_exists(m, i):
                self._pel_del(g, i, rec)
                deleted.append(fmt(i))
                count -= 1
                continue
            if rec[0] and min_idle and now - rec[1] < min_idle:
                continue
            if c is None:
                c = self._consumer_for(g, consumer, now)
            self._pel_put(g, i, c.cid, now, rec[2] if justid else _inc(rec[2]), rec)
            c.active_time = now
            claimed.append(fmt(i) if justid else [fmt(i), self.entry_fields(m, i)])
            count -= 1
        if claimed or deleted or c is not None:
            self._group_dirty(m, g)
            self.mark(name)
        return fmt(nxt), claimed, deleted

    # ===================================================================== XINFO

    def groups_info(self, name):
        """XINFO GROUPS: per group, ordered (field, value) pairs."""
        m = self.meta(name)
        if m is None:
            raise errors.no_such_key()
        out = []
        for g in self.group_list(m):
            out.append([("name", g.name), ("consumers", len(self.consumer_list(g))),
                        ("pending", g.pel_count), ("last-delivered-id", fmt(g.last_id)),
                        ("entries-read", None if g.entries_read == -1 else g.entries_read),
                        ("lag", self._lag(m, g))])
        return out

    def consumers_info(self, name, group):
        """XINFO CONSUMERS."""
        m = self.meta(name)
        if m is None:
            raise errors.no_such_key()
        g = self.get_group(m, group)
        if g is None:
            raise errors.nogroup_for_key(name, group)
        now = self.now()
        return [[("name", c.name), ("pending", c.pel_count), ("idle", max(0, now - c.seen_time)),
                 ("inactive", -1 if c.active_time == -1 else max(0, now - c.active_time))]
                for c in self.consumer_list(g)]

    def groups_full_info(self, m, count):
        """XINFO STREAM FULL's groups."""
        out = []
        for g in self.group_list(m):
            pend = []
            nacked = 0
            for i, (cid, t, cnt) in self._pel_iter(g, MIN_ID, MAX_ID):
                if not cid:
                    nacked += 1
                if not count or len(pend) < count:
                    pend.append([fmt(i), self.consumer_name(g, cid) if cid else b"", t if cid else 0, cnt])
            consumers = []
            for c in self.consumer_list(g):
                cp = []
                for i in self._consumer_pel(g, c.cid, MIN_ID, MAX_ID, count):
                    _, t, cnt = self._pel_get(g, i)
                    cp.append([fmt(i), t, cnt])
                consumers.append([("name", c.name), ("seen-time", c.seen_time),
                                  ("active-time", c.active_time), ("pel-count", c.pel_count),
                                  ("pending", cp)])
            out.append([("name", g.name), ("last-delivered-id", fmt(g.last_id)),
                        ("entries-read", None if g.entries_read == -1 else g.entries_read),
                        ("lag", self._lag(m, g)), ("pel-count", g.pel_count),
                        ("nacked-count", nacked), ("pending", pend), ("consumers", consumers)])
        return out


def _fit(rows, budget):
    """Leading ((ms, seq), fields) rows that fit the MAXSIZE budget
    [bytes so far, cap]; the budget is updated.  Soft, as in Redis: the
    first entry of a reply always fits."""
    if not budget or not budget[1]:
        return rows
    from storage.stream import entry_size
    size, cap = budget
    kept = []
    for i, f in rows:
        n = entry_size(i, f)
        if size and size + n > cap:
            break
        kept.append((i, f))
        size += n
        if size >= cap:
            break
    budget[0] = size
    return kept


def _inc(n):
    return n if n == LLONG_MAX else n + 1


def _consumer_name_key(gid, cid):
    """consumers db: gid + 0x02 + cid -> consumer name (owner lookups)."""
    return _U64.pack(gid) + b"\x02" + _U64.pack(cid)
