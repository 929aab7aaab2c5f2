"""The engine's parts, bound to one LMDB transaction for one verb.

Each part owns one invariant and is tested on its own:

  kv       storage.kv.KV                    get / put / prefix walks
  streams  storage.stream_records.StreamTable stream records, counters,
                                            change counters
  log      storage.log.EntryLog             entries; ``length`` agrees
  idmp     storage.idmp.Idmp                idempotent-producer history
  groups   storage.group_records.GroupTable group and consumer records
  pel      storage.pel.Pel                  the three PEL indexes and counts
  refs     storage.refs.References          KEEPREF / DELREF / ACKED

The verbs (storage/streams.py, groups.py, delivery.py, keyspace.py,
load.py) are functions of a ``Parts``.  Records are cached by the parts
for the verb and written back by ``flush`` when it succeeds.
"""
from storage.kv import KV
from storage.log import EntryLog
from storage.stream_records import StreamTable


class Parts:
    """Every part, over one transaction.  ``kv``, ``streams`` and ``log``
    are made at once; the group-side parts (``groups``, ``pel``,
    ``refs``) and ``idmp`` on first use, so a one-shot stream command
    does not import them."""

    __slots__ = ("kv", "streams", "log", "now", "_idmp", "_groups", "_pel", "_refs")

    def __init__(self, lt, dbs, now, tails=None):
        kv = self.kv = KV(lt, dbs)
        self.streams = StreamTable(kv)
        self.log = EntryLog(kv, tails)     # tails: the transaction's node cache
        self.now = now            # the verb's clock reading, ms
        self._idmp = self._groups = self._pel = self._refs = None

    @property
    def idmp(self):
        if self._idmp is None:
            from storage.idmp import Idmp
            self._idmp = Idmp(self.kv)
        return self._idmp

    @property
    def groups(self):
        if self._groups is None:
            from storage.group_records import GroupTable
            self._groups = GroupTable(self.kv, self.streams)
        return self._groups

    @property
    def pel(self):
        if self._pel is None:
            from storage.pel import Pel
            self._pel = Pel(self.kv, self.groups, self.streams)
        return self._pel

    @property
    def refs(self):
        if self._refs is None:
            from storage.refs import References
            self._refs = References(self.log, self.groups, self.pel)
        return self._refs

    def flush(self):
        """Write back changed records; returns the names of the streams
        the verb changed (whose blocked readers to wake)."""
        if self._groups is not None:
            self._groups.flush()
        return self.streams.flush()
