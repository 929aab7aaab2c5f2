"""A group's pending entries list (PEL), kept in three indexes that
always change together:

  pel    gid + ID             -> (owner cid, time key, delivery count)
  cpel   gid + cid + ID       -> ""   (the owner's PEL: history reads)
  ptime  gid + time key + ID  -> ""   (oldest delivery first: claiming)

The time key is the last delivery time in ms.  An entry NACKed by XNACK
has no owner (cid 0) and a time key drawn from a small counter, so the
NACKed entries sit, in NACK order, before every delivered one: claiming
walks ``ptime`` from the start and meets them first, in O(log n + k).

Invariants (tests/test_pel.py checks them after random operations): the
three indexes hold the same entries; ``g.pel_count`` is the size of the
group's PEL and each consumer's ``pel_count`` the size of its part.
Only this class writes the three databases or those two counts.
"""
from storage import codec

LLONG_MAX = (1 << 63) - 1
_U64 = (1 << 64) - 1


def bump(n):
    """One more delivery.  Redis keeps the count in a uint64_t and
    increments it without a check, so it wraps at 2^64."""
    return (n + 1) & _U64


def shown(n):
    """A delivery count as Redis replies with it (addReplyLongLong of
    the uint64_t): counts of 2^63 and over come out negative."""
    return n - (1 << 64) if n > LLONG_MAX else n


class Pel:
    """The PELs of every group, in one transaction."""

    __slots__ = ("_kv", "_groups", "_streams", "_pel", "_cpel", "_ptime")

    def __init__(self, kv, groups, streams):
        self._kv = kv
        self._groups = groups        # GroupTable (consumer PEL counts)
        self._streams = streams      # StreamTable (the NACK-order counter)
        self._pel = kv.db(b"pel")
        self._cpel = kv.db(b"cpel")
        self._ptime = kv.db(b"ptime")

    # ================================================================= reads

    def get(self, g, i):
        """(owner cid, time key, delivery count) of entry ``i``, or None."""
        v = self._kv.get(self._pel, codec.pel_key(g.gid, i))
        return None if v is None else codec.decode_pending(v)

    def contains(self, g, i):
        return self._kv.get(self._pel, codec.pel_key(g.gid, i)) is not None

    def items(self, g, start, end):
        """(ID, record) of pending entries with start <= ID <= end."""
        return codec.pel_items(self._kv.iter_range(self._pel, codec.pel_key(g.gid, start),
                                                   codec.pel_key(g.gid, end)))

    def record_of(self, g):
        """For hot loops: fn(ID) -> the record of a pending entry of
        ``g`` (it must be pending)."""
        get, pack, dec, gid = self._kv.getter(self._pel), codec.pack_key3, codec.decode_pending, g.gid
        return lambda i: dec(get(pack(gid, i[0], i[1])))

    def first_last(self, g):
        """(first ID, last ID) of the PEL, or None if it is empty."""
        p = codec.gid_prefix(g.gid)
        first = self._kv.first_key(self._pel, p)
        if first is None:
            return None
        return codec.id_from_pel_key(first), codec.id_from_pel_key(self._kv.last_key(self._pel, p))

    def newest(self, g):
        """The greatest pending ID of ``g``, or None when none is pending."""
        if not g.pel_count:
            return None
        k = self._kv.last_key(self._pel, codec.gid_prefix(g.gid))
        return None if k is None else codec.id_from_pel_key(k)

    def owned(self, g, cid, start, end, count=0):
        """IDs in consumer ``cid``'s PEL within [start, end], ascending, at
        most ``count`` (0: all)."""
        out = []
        for k in self._kv.iter_range(self._cpel, codec.cpel_key(g.gid, cid, start),
                                     codec.cpel_key(g.gid, cid, end), values=False):
            out.append(codec.id_from_cpel_key(k))
            if count and len(out) >= count:
                break
        return out

    def by_time(self, g):
        """(time key, ID) of every pending entry, oldest delivery first
        (NACKed entries, unowned, come before every delivered one)."""
        return codec.ptimes_from_keys(self._kv.iter_prefix(self._ptime, codec.gid_prefix(g.gid), values=False))

    def oldest_owned_time(self, g, nacked=None):
        """The time key (last delivery, ms) of the oldest pending entry
        that has an owner, or None when none has: the time index from its
        start, past the NACKed entries (unowned, they sort first), so
        O(log n + NACKed).  ``nacked``: how many NACKed entries ``g`` has,
        when known: once that many are passed, the next entry is owned
        without a look at its record."""
        if nacked == 0:
            k = self._kv.first_key(self._ptime, codec.gid_prefix(g.gid))
            return None if k is None else codec.ptime_from_key(k)[0]
        rec = self.record_of(g)
        passed = 0
        for t, i in self.by_time(g):
            if (nacked is not None and passed >= nacked) or rec(i)[0]:
                return t
            passed += 1
        return None

    def nacked(self, g):
        """(ID, delivery count) of the NACKed (unowned) entries, in NACK
        order.  The whole time index is walked: an owned entry can sort
        among them (XCLAIM ... TIME 0 gives a delivery time of 0)."""
        get, db, gid = self._kv.get, self._pel, g.gid
        for _, i in self.by_time(g):
            cid, _, cnt = codec.decode_pending(get(db, codec.pel_key(gid, i)))
            if not cid:
                yield i, cnt

    # ================================================================ writes

    def put(self, g, i, cid, tkey, count, old, owner=None):
        """Make entry ``i`` pending: owner ``cid`` (0: NACKed), time key,
        delivery count; ``old`` is its current record, or None.
        ``owner``: the consumer ``cid``, when the caller holds it."""
        kv, gid = self._kv, g.gid
        if old is not None:
            ocid, otk, _ = old
            if otk != tkey:
                kv.delete(self._ptime, codec.ptime_key(gid, otk, i))
            if ocid != cid and ocid:
                kv.delete(self._cpel, codec.cpel_key(gid, ocid, i))
                self._count(g, ocid, -1)
        else:
            g.pel_count += 1
        kv.put(self._pel, codec.pel_key(gid, i), codec.encode_pending(cid, tkey, count))
        if old is None or old[1] != tkey:
            kv.put(self._ptime, codec.ptime_key(gid, tkey, i), b"")
        if cid and (old is None or old[0] != cid):
            kv.put(self._cpel, codec.cpel_key(gid, cid, i), b"")
            if owner is not None:
                owner.pel_count += 1
            else:
                self._count(g, cid, 1)

    def add_new(self, g, pairs, tkey):
        """``put`` of entries not pending yet, each delivered once at
        ``tkey`` to its consumer: ``pairs`` is [(ID, consumer)], ascending
        by ID.  The three indexes are written a bulk put each, appended
        where their keys come last (new IDs and the newest time usually
        do)."""
        kv, gid = self._kv, g.gid
        pack3, pack4, enc = codec.pack_key3, codec.pack_key4, codec.encode_pending
        recs: dict = {}
        pel, ptime, cpel = [], [], []
        for (ms, seq), c in pairs:
            cid = c.cid
            rec = recs.get(cid)
            if rec is None:
                rec = recs[cid] = enc(cid, tkey, 1)
            pel.append((pack3(gid, ms, seq), rec))
            ptime.append((pack4(gid, tkey, ms, seq), b""))
            cpel.append((pack4(gid, cid, ms, seq), b""))
            c.pel_count += 1
        g.pel_count += len(pel)
        if len(recs) > 1:
            cpel.sort()
        kv.putmulti_last(self._pel, pel)
        kv.putmulti_last(self._ptime, ptime)
        kv.putmulti_last(self._cpel, cpel)

    def nack(self, g, i, count, old):
        """Give entry ``i`` back: unowned, at the end of the NACK order."""
        self.put(g, i, 0, self._streams.counter(codec.COUNTER_NACK), count, old)

    def remove(self, g, i, old):
        """Entry ``i`` (record ``old``) is no longer pending."""
        kv, gid = self._kv, g.gid
        cid, tkey, _ = old
        kv.delete(self._pel, codec.pel_key(gid, i))
        kv.delete(self._ptime, codec.ptime_key(gid, tkey, i))
        if cid:
            kv.delete(self._cpel, codec.cpel_key(gid, cid, i))
            self._count(g, cid, -1)
        g.pel_count -= 1

    def discard(self, g, i):
        """Remove ``i`` if pending; True if it was."""
        return self.discard_many(g, (i,)) == 1

    def discard_many(self, g, ids):
        """``discard`` of each of ``ids`` in turn (XACK, XGROUP
        DELCONSUMER): how many were pending.  The owners' counts are
        changed once each."""
        kv, gid = self._kv, g.gid
        get = kv.getter(self._pel)
        del_pel, del_ptime, del_cpel = kv.deleter(self._pel), kv.deleter(self._ptime), kv.deleter(self._cpel)
        pack3, pack4, decode = codec.pack_key3, codec.pack_key4, codec.decode_pending
        lost: dict = {}
        n = 0
        for ms, seq in ids:
            k = pack3(gid, ms, seq)
            v = get(k)
            if v is None:
                continue
            cid, tkey, _ = decode(v)
            del_pel(k)
            del_ptime(pack4(gid, tkey, ms, seq))
            if cid:
                del_cpel(pack4(gid, cid, ms, seq))
                lost[cid] = lost.get(cid, 0) + 1
            n += 1
        g.pel_count -= n
        for cid, k in lost.items():
            self._count(g, cid, -k)
        return n

    def deliver_many(self, g, moves, c, now):
        """Deliver pending entries to consumer ``c`` at ``now``, one more
        delivery each; ``moves`` is [(ID, old record)].  The updates of
        ``put``, done in bulk and in key order (claiming a thousand
        entries dirties neighbouring B-tree leaves, not random ones)."""
        kv, gid, cid = self._kv, g.gid, c.cid
        pack4, pack3 = codec.pack_key4, codec.pack_key3
        del_ptime, del_cpel = kv.deleter(self._ptime), kv.deleter(self._cpel)
        lost: dict[int, int] = {}      # old owner's cid -> entries it lost
        new_ptime, new_cpel, new_pel = [], [], []
        for (ms, seq), (ocid, otk, cnt) in moves:
            if otk != now:
                del_ptime(pack4(gid, otk, ms, seq))
                new_ptime.append((pack4(gid, now, ms, seq), b""))
            if ocid != cid:
                if ocid:
                    del_cpel(pack4(gid, ocid, ms, seq))
                    lost[ocid] = lost.get(ocid, 0) + 1
                new_cpel.append((pack4(gid, cid, ms, seq), b""))
            new_pel.append((pack3(gid, ms, seq), codec.encode_pending(cid, now, bump(cnt))))
        for db, items in ((self._pel, new_pel), (self._cpel, new_cpel), (self._ptime, new_ptime)):
            items.sort()
            kv.putmulti(db, items)
        for ocid, n in lost.items():
            self._count(g, ocid, -n)
        c.pel_count += len(new_cpel)

    def drop(self, g):
        """Remove the whole PEL of ``g`` (XGROUP DESTROY, DEL)."""
        p = codec.gid_prefix(g.gid)
        for db in (self._pel, self._cpel, self._ptime):
            self._kv.delete_prefix(db, p)
        g.pel_count = 0

    def _count(self, g, cid, delta):
        c = self._groups.consumer_by_cid(g, cid)
        if c is not None:
            c.pel_count += delta
