"""A transaction on the store, carrying every domain verb.

``Txn`` is what ``Store.transact`` hands to a command.  Its verbs come
from three mixins, one per data family:

  storage.stream.StreamOps     add, range, trim, delete_entries, set_id, ...
  storage.groups.GroupOps      create_group, read_group, ack, claim, ...
  storage.keyspace.KeyspaceOps delete_keys, exists, rename, scan, ...

Stream records are read once per transaction and cached; changed ones
are written back by ``flush`` just before commit, so a batch of a
thousand XADDs to one stream writes its record once.
"""
import time

from storage import codec
from storage.groups import GroupOps
from storage.keyspace import KeyspaceOps
from storage.stream import StreamOps


class Txn(StreamOps, GroupOps, KeyspaceOps):
    """One LMDB transaction plus the caches that make it fast."""

    def __init__(self, store, lt, write):
        self.store = store
        self.lt = lt                          # the lmdb.Transaction
        self.writable = write
        dbs = store.dbs
        self.db_keys = dbs[b"keys"]
        self.db_entries = dbs[b"entries"]
        self.db_groups = dbs[b"groups"]
        self.db_consumers = dbs[b"consumers"]
        self.db_pel = dbs[b"pel"]
        self.db_cpel = dbs[b"cpel"]
        self.db_ptime = dbs[b"ptime"]
        self.db_idmp = dbs[b"idmp"]
        self.db_meta = dbs[b"meta"]
        self._metas = {}          # stream name -> StreamMeta, or None if absent
        self._dirty = set()       # names whose record must be written back
        self._entries_cursor = None
        self.touched = set()      # streams changed (for waking blocked readers)

    # ------------------------------------------------------------ clock

    @staticmethod
    def now():
        """Wall-clock milliseconds (the clock of auto IDs and idle times)."""
        return int(time.time() * 1000)

    # ---------------------------------------------------- stream records

    def meta(self, name):
        """The stream record of ``name`` or None (cached per transaction)."""
        try:
            return self._metas[name]
        except KeyError:
            pass
        raw = self.lt.get(codec.name_key(name), db=self.db_keys)
        m = codec.StreamMeta.decode(raw) if raw is not None else None
        self._metas[name] = m
        return m

    def create_meta(self, name):
        """A new, empty stream record for ``name`` (marked dirty)."""
        sid = self.counter(b"next-sid")
        m = codec.StreamMeta(sid, name if len(name) > codec.SHORT_NAME else None)
        self._metas[name] = m
        self._dirty.add(name)
        return m

    def mark(self, name):
        """Note that the record of ``name`` changed."""
        self._dirty.add(name)
        self.touched.add(name)

    def forget_meta(self, name):
        """Remove the stream record of ``name`` (at flush)."""
        self._metas[name] = None
        self._dirty.add(name)
        self.touched.add(name)

    def flush(self):
        """Write back changed stream records (called before commit).
        Returns the names of the streams this transaction changed, for
        waking blocked readers once the commit is done."""
        self.flush_groups()
        put, delete, db = self.lt.put, self.lt.delete, self.db_keys
        for name in self._dirty:
            m = self._metas.get(name)
            if m is None:
                delete(codec.name_key(name), db=db)
            else:
                put(codec.name_key(name), m.encode(), db=db)
        self._dirty.clear()
        if self.touched:
            # change counters that blocked readers watch (storage.blocking)
            get, mdb = self.lt.get, self.db_meta
            for name in self.touched:
                k = b"v" + codec.name_key(name)
                v = get(k, db=mdb)
                put(k, b"%d" % (int(v) + 1 if v is not None else 1), db=mdb)
        changed = self.touched
        self.touched = set()
        return changed

    def counter(self, which):
        """Next value of a persistent counter (sids, gids, cids), from 1."""
        v = self.lt.get(which, db=self.db_meta)
        n = int(v) + 1 if v is not None else 1
        self.lt.put(which, b"%d" % n, db=self.db_meta)
        return n

    def entries_cursor(self):
        c = self._entries_cursor
        if c is None:
            c = self._entries_cursor = self.lt.cursor(db=self.db_entries)
        return c
