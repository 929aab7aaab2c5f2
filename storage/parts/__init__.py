"""The engine's parts, bound to one LMDB transaction for one verb.

Each part owns one invariant and is tested on its own:

  kv       kv.KV                     get / put / prefix walks
  streams  stream_table.StreamTable  stream records, counters, change counters
  log      log.EntryLog              entries (``nodes``: Redis's listpack
                                     nodes; ``shapes``: interned field sets);
                                     ``length`` agrees
  idmp     idmp.Idmp                 idempotent-producer history
  groups   group_table.GroupTable    group and consumer records
  pel      pel.Pel                   the three PEL indexes and counts
  refs     refs.References           KEEPREF / DELREF / ACKED
  expiry   expiry.Expiry             the index of streams with a TTL

The verbs (storage/verbs/) are functions of a ``Parts``.  Records are
cached by the parts for the verb and written back by ``flush`` when it
succeeds.

Parts import only the codec, the vocabulary (errors, ids, options) and
other parts (tests/unit/test_architecture.py).  Who imports them: the verbs,
``storage.txn`` (a ``Parts`` per verb) and ``storage.migrate``.
"""
from storage import codec
from storage.parts.kv import KV
from storage.parts.stream_table import StreamTable


class Parts:
    """Every part, over one transaction.  ``kv`` and ``streams`` are made
    at once; the entries (``log``), the group-side parts (``groups``,
    ``pel``, ``refs``) and ``idmp`` on first use, so a one-shot command
    does not import what it does not use (XLEN: no entries)."""

    __slots__ = ("kv", "streams", "now", "dirty", "_log", "_tails", "_idmp", "_groups", "_pel", "_refs",
                 "_expiry")

    def __init__(self, lt, dbs, now, tails=None):
        kv = self.kv = KV(lt, dbs)
        self.streams = StreamTable(kv, now)
        self.now = now            # the verb's clock reading, ms
        self.dirty = 0            # changes the verb made, as Redis's commands add them to server.dirty
                                  # (INFO rdb_changes_since_last_save); consumers made are counted apart
        self._tails = tails       # the transaction's node cache, for the log
        self._log = self._idmp = self._groups = self._pel = self._refs = self._expiry = None

    @property
    def log(self):
        if self._log is None:
            from storage.parts.log import EntryLog
            self._log = EntryLog(self.kv, self._tails)
        return self._log

    @property
    def idmp(self):
        if self._idmp is None:
            from storage.parts.idmp import Idmp
            self._idmp = Idmp(self.kv)
        return self._idmp

    @property
    def groups(self):
        if self._groups is None:
            from storage.parts.group_table import GroupTable
            self._groups = GroupTable(self.kv, self.streams)
        return self._groups

    @property
    def pel(self):
        if self._pel is None:
            from storage.parts.pel import Pel
            self._pel = Pel(self.kv, self.groups, self.streams)
        return self._pel

    @property
    def refs(self):
        if self._refs is None:
            from storage.parts.refs import References
            self._refs = References(self.log, self.groups, self.pel)
        return self._refs

    @property
    def expiry(self):
        if self._expiry is None:
            from storage.parts.expiry import Expiry
            self._expiry = Expiry(self.kv)
        return self._expiry

    def drop_stream(self, m, name):
        """Remove every entry, group and IDMP record of stream ``m`` (named
        ``name``) and its place in the expiry index; its record is the
        caller's."""
        self.log.drop(m)
        self.idmp.drop(m)
        groups, pel = self.groups, self.pel
        for g in groups.list(m):
            pel.drop(g)
            groups.remove(g)
        if m.expire_at is not None:
            self.expiry.set(name, m, None)

    REAP = 20       # expired streams any writer removes besides those it saw (Redis's active expiry: 20 a cycle)

    def reap(self):
        """Remove the expired streams the verb saw, and up to REAP more
        whose time has passed: their record goes at ``flush``, their data
        now."""
        streams = self.streams
        if self.kv.first_key(self.kv.db(b"meta"), codec.EXPIRY_PREFIX) is not None:
            for key, name in self.expiry.due(self.now, self.REAP):
                m = streams.get(name)             # an expired one lands in streams.expired
                if m is not None and m.expire_at is not None and m.expire_at <= self.now:
                    streams.expired[name] = m     # given a time already past by this verb (a load)
                elif name not in streams.expired:
                    self.expiry.discard(key)      # not the record's time: a stale index key
        for name, m in streams.expired.items():
            self.drop_stream(m, name)
            cur = streams.get(name)
            if cur is None or cur is m:           # not made again by the verb
                streams.forget(name)
        streams.expired.clear()

    def consumers_made(self):
        """Consumers this verb created by using them (GroupTable.seen)."""
        return 0 if self._groups is None else self._groups.made

    def flush(self):
        """Write back changed records; returns the names of the streams
        the verb changed (whose blocked readers to wake)."""
        self.reap()
        if self._groups is not None:
            self._groups.flush()
        return self.streams.flush()
