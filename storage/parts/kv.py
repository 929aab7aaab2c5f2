"""One LMDB transaction and the store's databases, as the engine's parts
use them: get, put, delete, and walks over key prefixes and ranges.

Every part of the engine reads and writes through a ``KV``, never
through py-lmdb directly, so the prefix and range walks are written once
(``iter_prefix``, ``iter_range``, ``delete_prefix``, ``last_key``).
Keys and values are bytes produced by storage.codec.

The change log (storage.changelog).  When the store logs its changes,
the transaction (or savepoint) has a ``log`` (a ``storage.changelog.Logged``)
whose ``ops`` list takes every write made here, as the ops of
storage.codec.changes (a bulk put's pairs already packed), and a
``KV`` over it appends them (``ops`` None otherwise: one test per
write).  The database ``late_db`` (the node index, whose record of a
stream's last node every XADD rewrites) is not logged write by write:
the keys written are gathered in ``late`` and their final values logged
once, at commit; its range deletes are logged in place.  Nothing else
in the engine writes to the store, so the log is complete by
construction.
"""
from _functools import partial  # the C class functools re-exports, without functools' own imports (types ...)
from itertools import islice

from storage.codec import prefix_end
from storage.codec.changes import OP_BELOW, OP_DEL, OP_MULTI, OP_PUT, pack_pairs


class KV:
    """A transaction (``lt``, a py-lmdb Transaction) over the named
    databases ``dbs`` (name -> handle).  Every walk and bulk operation
    opens its own cursor, so a walk stays valid while the same database
    is written through another method (LMDB tracks the cursors of a
    write transaction)."""

    __slots__ = ("lt", "dbs", "ops", "late_db", "late")

    def __init__(self, lt, dbs):
        self.dbs = dbs
        log = getattr(lt, "log", None)   # the change log of this transaction (storage.changelog), if logging
        if log is None:
            self.lt = lt
            self.ops = None
        else:
            self.lt = lt.raw              # the py-lmdb transaction itself
            self.ops = log.ops            # the record's ops so far
            self.late_db = log.late_db    # the database logged at commit
            self.late = log.late          # its keys written so far

    def db(self, name):
        return self.dbs[name]

    def cursor(self, db):
        """A new cursor on ``db`` (for hot loops that walk by hand)."""
        return self.lt.cursor(db=db)

    # ------------------------------------------------------------- points

    def get(self, db, key):
        return self.lt.get(key, db=db)

    def getter(self, db):
        """``get`` bound to ``db``, for hot loops: fn(key) -> value or None."""
        return partial(self.lt.get, db=db)

    def deleter(self, db):
        """``delete`` bound to ``db``, for hot loops."""
        if self.ops is not None:
            return partial(self.delete, db)
        return partial(self.lt.delete, db=db)

    # The ops name their database by its handle (storage.changelog names
    # it when it encodes the record): no lookup per write.

    def put(self, db, key, value):
        self.lt.put(key, value, db=db)
        ops = self.ops
        if ops is not None:
            if db is not self.late_db:
                ops.append((OP_PUT, db, key, value))
            else:
                self.late.add(key)

    def put_last(self, db, key, value):
        """``put`` of a key that may be above every key in ``db``: then
        LMDB's append mode, which fills pages instead of splitting them in
        half (entries grow at the end of their stream, and the stream
        made last is usually the one written)."""
        c = self.cursor(db)
        c.put(key, value, append=not c.last() or c.key() < key)
        ops = self.ops
        if ops is not None:               # as in put, inline: a call per write is 1% of a group commit
            if db is not self.late_db:
                ops.append((OP_PUT, db, key, value))
            else:
                self.late.add(key)

    def putmulti_last(self, db, items):
        """``putmulti`` of ascending pairs, in append mode when the first
        is above every key in ``db`` (see ``put_last``)."""
        c = self.cursor(db)
        if self.ops is not None:
            items = self._log_multi(db, items)
        return c.putmulti(items, append=bool(items) and (not c.last() or c.key() < items[0][0]))[1]

    def delete(self, db, key):
        """True if ``key`` was there."""
        if self.lt.delete(key, db=db):
            ops = self.ops
            if ops is not None:
                if db is not self.late_db:
                    ops.append((OP_DEL, db, key))
                else:
                    self.late.add(key)
            return True
        return False

    def putmulti(self, db, items, append=False):
        """Store many (key, value) pairs (sorted keys make it cheap);
        with ``append``, keys must be above every key in ``db``.
        Returns how many were added."""
        if self.ops is not None:
            items = self._log_multi(db, items)
        return self.cursor(db).putmulti(items, append=append)[1]

    def _log_multi(self, db, items):
        """Log a bulk put of ``items``; returns them as a list.  Its pairs
        are logged packed (storage.codec.changes.pack_pairs): kept as they
        are until the commit, a bulk ingest's ten thousand tuples would
        be walked by every collection of the cyclic collector meanwhile."""
        if type(items) is not list:
            items = list(items)
        ops = self.ops
        if items and ops is not None:
            if db is not self.late_db:
                ops.append((OP_MULTI, db, pack_pairs(items)))
            else:
                self.late.update([k for k, _ in items])
        return items

    # -------------------------------------------------------------- walks

    def iter_prefix(self, db, prefix, start=None, values=True):
        """(key, value) pairs -- or keys, without ``values`` -- whose key
        starts with ``prefix``, in key order, from ``start`` (a key with
        that prefix) if given."""
        c = self.cursor(db)
        if not c.set_range(start if start is not None else prefix):
            return
        n = len(prefix)
        if values:
            for kv in c.iternext():
                if kv[0][:n] != prefix:
                    return
                yield kv
        else:
            for k in c.iternext(values=False):
                if k[:n] != prefix:
                    return
                yield k

    def iter_range(self, db, lo, hi, values=True, reverse=False):
        """Pairs (or keys) with ``lo <= key <= hi``, ascending, or
        descending with ``reverse``."""
        c = self.cursor(db)
        if not reverse:
            if not c.set_range(lo):
                return
            it = c.iternext(values=values)
            for x in it:
                if (x[0] if values else x) > hi:
                    return
                yield x
            return
        if c.set_range(hi):
            if c.key() != hi and not c.prev():
                return
        elif not c.last():
            return
        for x in c.iterprev(values=values):
            if (x[0] if values else x) < lo:
                return
            yield x

    def first_key(self, db, prefix):
        """The first key starting with ``prefix``, or None."""
        c = self.cursor(db)
        if c.set_range(prefix):
            k = c.key()
            if k[:len(prefix)] == prefix:
                return k
        return None

    def last_key(self, db, prefix):
        """The last key starting with ``prefix``, or None."""
        c = self.cursor(db)
        end = prefix_end(prefix)
        ok = c.prev() if (end and c.set_range(end)) else c.last()
        if ok:
            k = c.key()
            if k[:len(prefix)] == prefix:
                return k
        return None

    def pairs_from(self, db, start, prefix, count, reverse=False):
        """Up to ``count`` (key, value) pairs of keys with ``prefix``: from
        ``start`` upwards, or (``reverse``) from the last key of the
        prefix down.  The whole-stream fast path of XRANGE."""
        c = self.cursor(db)
        if not reverse:
            if not c.set_range(start):
                return []
            return list(islice(c.iternext(), count))
        end = prefix_end(prefix)
        ok = c.prev() if (end and c.set_range(end)) else c.last()
        if not ok:
            return []
        return list(islice(c.iterprev(), count))

    def pairs_between(self, db, lo, hi, count, reverse=False):
        """Up to ``count`` (key, value) pairs with ``lo <= key <= hi``,
        ascending (``reverse``: descending from ``hi``).  The bounded
        XRANGE path: entries are taken from the cursor in C (islice) in
        growing chunks, and only the chunk that passes the bound is
        searched, so no Python step is spent per entry."""
        c = self.cursor(db)
        if not reverse:
            if not c.set_range(lo):
                return []
            it = c.iternext()
            past = hi.__lt__                   # a key beyond the range
        else:
            if c.set_range(hi):
                if c.key() != hi and not c.prev():
                    return []
            elif not c.last():
                return []
            it = c.iterprev()
            past = lo.__gt__
        out: list[tuple[bytes, bytes]] = []
        step = 64
        while len(out) < count:
            got = list(islice(it, min(step, count - len(out))))
            if not got:
                break
            if past(got[-1][0]):
                a, b = 0, len(got) - 1             # the first key beyond the range is in got[a..b]
                while a < b:
                    mid = (a + b) // 2
                    if past(got[mid][0]):
                        b = mid
                    else:
                        a = mid + 1
                out.extend(got[:a])
                break
            out.extend(got)
            step = min(step * 4, 1 << 16)
        return out

    # ----------------------------------------------------------- deletion

    def delete_prefix(self, db, prefix):
        """Delete every key starting with ``prefix``; returns the count."""
        return self.delete_below(db, prefix, None)

    def delete_first(self, db, prefix, count):
        """Delete the first ``count`` keys starting with ``prefix`` (the
        caller knows there are that many); returns the count."""
        c = self.cursor(db)
        if count <= 0 or not c.set_range(prefix):
            return 0
        for _ in range(count):
            c.delete()
        if self.ops is not None:
            # logged as the range it removed (the keys below the first one
            # kept), so a reader of the log knows where it ends without the
            # store as it was (storage.ops.replica_redis)
            k = c.key()
            self.ops.append((OP_BELOW, db, prefix, k if k and k[:len(prefix)] == prefix else None))
        return count

    def delete_below(self, db, prefix, bound):
        """Delete keys starting with ``prefix`` that are below ``bound``
        (None: all of them); returns the count."""
        c = self.cursor(db)
        n = 0
        if not c.set_range(prefix):
            return 0
        ln = len(prefix)
        while True:
            k = c.key()
            if not k or k[:ln] != prefix or (bound is not None and k >= bound):
                if n and self.ops is not None:
                    self.ops.append((OP_BELOW, db, prefix, bound))
                return n
            c.delete()
            n += 1

    def nth_key(self, db, prefix, n):
        """The ``n``-th key (0-based) starting with ``prefix``, or None."""
        c = self.cursor(db)
        if not c.set_range(prefix):
            return None
        for _ in range(n):
            if not c.next():
                return None
        k = c.key()
        return k if k[:len(prefix)] == prefix else None
