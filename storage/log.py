"""The entry log: a stream's entries in the ``entries`` database, under
``sid + ms + seq``, so a range is one cursor walk.

Invariant: ``m.length`` (the stream record) is the number of entries
stored under the stream's number.  Every method that adds or removes
entries updates it; nothing else changes entries.  The first entry's ID
is not stored anywhere: it is the first key under the prefix, one
cursor step away.  What an addition means for ``last_id`` and
``entries_added``, and a deletion for ``max_deleted``, is the verbs'
business (XADD, XDEL and trimming differ).
"""
from storage import codec
from storage.ids import MAX_ID, MIN_ID, fmt


class EntryLog:
    """Entries of every stream, in one transaction."""

    __slots__ = ("_kv", "_db")

    def __init__(self, kv):
        self._kv = kv
        self._db = kv.db(b"entries")

    # ---------------------------------------------------------------- ends

    def first_id(self, m):
        """ID of the first entry of stream ``m``, or 0-0 if empty."""
        k = self._kv.first_key(self._db, codec.sid_prefix(m.sid))
        return codec.id_from_entry_key(k) if k is not None else MIN_ID

    def last_id(self, m):
        """ID of the last entry (not ``m.last_id``, which may be deleted),
        or None if empty."""
        k = self._kv.last_key(self._db, codec.sid_prefix(m.sid))
        return codec.id_from_entry_key(k) if k is not None else None

    def nth_id(self, m, n):
        """ID of the ``n``-th entry (0-based), or None."""
        k = self._kv.nth_key(self._db, codec.sid_prefix(m.sid), n)
        return codec.id_from_entry_key(k) if k is not None else None

    # --------------------------------------------------------------- reads

    def values(self, m, start, end, count=0, rev=False):
        """Stored values of the entries with ``start <= ID <= end``, at
        most ``count`` (0: all), in reverse order with ``rev``."""
        if start > end or m.length == 0:
            return []
        n = m.length if not count or count > m.length else count
        p = codec.sid_prefix(m.sid)
        if start == MIN_ID and end == MAX_ID:
            # the whole stream: exactly m.length values under the prefix
            return self._kv.values_from(self._db, p, p, n, rev)
        out = []
        append = out.append
        for _, v in self._kv.iter_range(self._db, codec.entry_key(m.sid, start), codec.entry_key(m.sid, end),
                                        reverse=rev):
            append(v)
            if len(out) >= n:
                break
        return out

    def entries(self, m, start, end, count=0, rev=False):
        """Like ``values``, decoded: ``[id_text, fields]`` each."""
        return list(map(codec.decode_entry, self.values(m, start, end, count, rev)))

    def rows(self, m, start, count=0):
        """Entries from ``start`` on as ``((ms, seq), fields)``."""
        out = []
        if m.length == 0:
            return out
        p = codec.sid_prefix(m.sid)
        for k, v in self._kv.iter_prefix(self._db, p, start=codec.entry_key(m.sid, start)):
            out.append((codec.id_from_entry_key(k), codec.entry_fields(v)))
            if count and len(out) >= count:
                break
        return out

    def ids(self, m, below=None):
        """IDs from the first on, ascending (``below``: only IDs under it)."""
        p = codec.sid_prefix(m.sid)
        hi = codec.entry_key(m.sid, below) if below is not None else None
        for k in self._kv.iter_prefix(self._db, p, values=False):
            if hi is not None and k >= hi:
                return
            yield codec.id_from_entry_key(k)

    def stored(self, m):
        """(ID, stored value) of every entry, ascending (snapshots)."""
        return codec.ids_and_values(self._kv.iter_prefix(self._db, codec.sid_prefix(m.sid)))

    def get(self, m, i):
        """The stored value of entry ``i``, or None."""
        return self._kv.get(self._db, codec.entry_key(m.sid, i))

    def fields(self, m, i):
        """Fields of entry ``i``, or None if it is not there."""
        v = self._kv.get(self._db, codec.entry_key(m.sid, i))
        return None if v is None else codec.entry_fields(v)

    def exists(self, m, i):
        return self._kv.get(self._db, codec.entry_key(m.sid, i)) is not None

    def getter(self, m):
        """For hot loops: fn(ID) -> the stored value of that entry of
        ``m``, or None."""
        get, pack, sid = self._kv.getter(self._db), codec.pack_key3, m.sid
        return lambda i: get(pack(sid, i[0], i[1]))

    # -------------------------------------------------------------- writes

    def append(self, m, i, fields):
        """Store entry ``i`` (above every ID of the stream)."""
        self._kv.put(self._db, codec.entry_key(m.sid, i), codec.encode_entry(fmt(i), fields))
        m.length += 1

    def append_stored(self, m, items):
        """Store many ``(ID, stored value)`` pairs, ascending and above
        every ID of the stream; returns how many."""
        sid = m.sid
        n = self._kv.putmulti(self._db, [(codec.entry_key(sid, i), v) for i, v in items], append=False)
        m.length += n
        return n

    def append_keyed(self, m, pairs):
        """Store ready-made ``(entry key, stored value)`` pairs of stream
        ``m`` (the bulk-ingest path, which packs keys in its loop)."""
        n = self._kv.putmulti(self._db, pairs)
        m.length += n
        return n

    def delete(self, m, i):
        """Remove entry ``i``; True if it was there."""
        if self._kv.delete(self._db, codec.entry_key(m.sid, i)):
            m.length -= 1
            return True
        return False

    def delete_first(self, m, n):
        """Remove the first ``n`` entries (``n <= m.length``)."""
        done = self._kv.delete_first(self._db, codec.sid_prefix(m.sid), n)
        m.length -= done
        return done

    def delete_below(self, m, bound):
        """Remove every entry with an ID below ``bound``; returns the count."""
        done = self._kv.delete_below(self._db, codec.sid_prefix(m.sid), codec.entry_key(m.sid, bound))
        m.length -= done
        return done

    def drop(self, m):
        """Remove every entry of ``m`` (DEL)."""
        self._kv.delete_prefix(self._db, codec.sid_prefix(m.sid))
        m.length = 0
