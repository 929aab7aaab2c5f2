"""Idempotent producers (XADD IDMP / IDMPAUTO, XCFGSET): per stream and
producer, the IIDs recently added and the entry ID each got.

Layout (storage.codec): per producer, ``i``-keys (IID -> ID), ``o``-keys
(ID -> IID, insertion order, for eviction of the oldest and for expiry)
and an ``n``-key (how many IIDs the producer holds).

Invariants: the ``i`` and ``o`` keys of a producer are in one-to-one
correspondence and ``n`` counts them; a producer holds at most
IDMP-MAXSIZE IIDs; the stream record's ``idmp_stats`` counts producers
and IIDs tracked (pids-tracked, iids-tracked) and IIDs ever added and
duplicates seen (iids-added, iids-duplicates).  History expires lazily:
when a producer is used again, IIDs older than IDMP-DURATION go first;
XINFO leaves them out of its counts (``live_counts``), as Redis's
background expiry has removed them by then.
"""
from storage import codec


class Idmp:
    """IDMP history of every stream, in one transaction."""

    __slots__ = ("_kv", "_db")

    def __init__(self, kv):
        self._kv = kv
        self._db = kv.db(b"idmp")

    def find(self, m, pid, iid, now):
        """The ID recorded for (pid, iid), after dropping the producer's
        expired history; None if there is none."""
        p = codec.idmp_pid_prefix(m.sid, pid)
        self._expire(m, p, now)
        v = self._kv.get(self._db, codec.idmp_iid_key(p, codec.idmp_iid_part(p, iid)))
        return None if v is None else codec.decode_id(v)

    def record(self, m, pid, iid, i, now):
        """Remember (pid, iid) -> ``i``; evict the producer's oldest IID
        beyond IDMP-MAXSIZE."""
        p = codec.idmp_pid_prefix(m.sid, pid)
        self._expire(m, p, now)
        self._add(m, p, codec.idmp_iid_part(p, iid), i)
        m.idmp_stats[2] += 1
        m.idmp_cfg = True
        if self._held(p) > m.idmp_maxsize:
            oldest = self._kv.first_key(self._db, codec.idmp_order_prefix(p))
            if oldest is not None:
                self._drop(m, p, oldest)

    def put(self, m, pid, iid, i, now):
        """XIDMPRECORD: make (pid, iid) -> ``i`` part of the producer's
        history (after dropping what has expired) unless it is there;
        returns the ID it already maps to, or None if it was added.  The
        oldest IID beyond IDMP-MAXSIZE goes, as for XADD; iids-added
        counts XADDs only."""
        p = codec.idmp_pid_prefix(m.sid, pid)
        self._expire(m, p, now)
        ik = codec.idmp_iid_part(p, iid)
        v = self._kv.get(self._db, codec.idmp_iid_key(p, ik))
        if v is not None:
            return codec.decode_id(v)
        self._add(m, p, ik, i)
        m.idmp_cfg = True
        if self._held(p) > m.idmp_maxsize:
            oldest = self._kv.first_key(self._db, codec.idmp_order_prefix(p))
            if oldest is not None:
                self._drop(m, p, oldest)
        return None

    def restore(self, m, pid_key, iid_key, i):
        """Put back one saved (producer, IID) -> ID (snapshots, imports):
        False if the IID is already there."""
        p = codec.idmp_prefix_for_key(m.sid, pid_key)
        if self._kv.get(self._db, codec.idmp_iid_key(p, iid_key)) is not None:
            return False
        self._add(m, p, iid_key, i)
        return True

    def clear(self, m):
        """Forget every producer's history (XCFGSET changing a setting)."""
        self._kv.delete_prefix(self._db, codec.sid_prefix(m.sid))
        m.idmp_stats[0] = m.idmp_stats[1] = 0

    def drop(self, m):
        """Remove the stream's history (DEL)."""
        self._kv.delete_prefix(self._db, codec.sid_prefix(m.sid))

    def live_counts(self, m, now):
        """(pids-tracked, iids-tracked) as Redis reports them: without the
        IIDs older than IDMP-DURATION, which its background expiry (10
        times a second) has removed by then, while xs drops them when
        their producer is used again.  Read only."""
        if m.idmp_stats[1] == 0:
            return 0, 0
        cutoff = now - m.idmp_duration * 1000
        pids, iids, last = 0, 0, None
        for k in self._kv.iter_prefix(self._db, codec.sid_prefix(m.sid), values=False):
            pk, kind, rest = codec.idmp_split_key(k)
            if kind == b"o" and codec.decode_id(rest)[0] > cutoff:
                iids += 1
                if pk != last:
                    pids += 1
                    last = pk
        return pids, iids

    def history(self, m):
        """(producer key, ID, iid key) of every IID, grouped by producer
        in key order, each producer's IIDs in insertion order."""
        for k, v in self._kv.iter_prefix(self._db, codec.sid_prefix(m.sid)):
            pk, kind, rest = codec.idmp_split_key(k)
            if kind == b"o":
                yield pk, codec.decode_id(rest), v

    # -------------------------------------------------------------- private

    def _held(self, p):
        return codec.decode_count(self._kv.get(self._db, codec.idmp_count_key(p)))

    def _add(self, m, p, ik, i):
        kv, db = self._kv, self._db
        n = self._held(p)
        if n == 0:
            m.idmp_stats[0] += 1
        kv.put(db, codec.idmp_iid_key(p, ik), codec.encode_id(i))
        kv.put(db, codec.idmp_order_key(p, i), ik)
        kv.put(db, codec.idmp_count_key(p), codec.encode_count(n + 1))
        m.idmp_stats[1] += 1

    def _drop(self, m, p, order_key):
        """Forget the IID behind ``order_key``."""
        kv, db = self._kv, self._db
        kv.delete(db, codec.idmp_iid_key(p, kv.get(db, order_key)))
        kv.delete(db, order_key)
        m.idmp_stats[1] -= 1
        n = self._held(p) - 1
        if n <= 0:
            kv.delete(db, codec.idmp_count_key(p))
            m.idmp_stats[0] -= 1
        else:
            kv.put(db, codec.idmp_count_key(p), codec.encode_count(n))

    def _expire(self, m, p, now):
        """Drop IIDs whose entry ID is older than IDMP-DURATION (Redis
        measures from the entry ID's milliseconds)."""
        cutoff = now - m.idmp_duration * 1000
        old = []
        for k in self._kv.iter_prefix(self._db, codec.idmp_order_prefix(p), values=False):
            if codec.idmp_id_from_order_key(p, k)[0] > cutoff:
                break
            old.append(k)
        for k in old:
            self._drop(m, p, k)
