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
from storage.group_records import GroupTable
from storage.idmp import Idmp
from storage.kv import KV
from storage.log import EntryLog
from storage.pel import Pel
from storage.refs import References
from storage.stream_records import StreamTable


class Parts:
    __slots__ = ("kv", "streams", "log", "idmp", "groups", "pel", "refs", "now")

    def __init__(self, lt, dbs, now):
        kv = self.kv = KV(lt, dbs)
        self.streams = StreamTable(kv)
        self.log = EntryLog(kv)
        self.idmp = Idmp(kv)
        self.groups = GroupTable(kv, self.streams)
        self.pel = Pel(kv, self.groups, self.streams)
        self.refs = References(self.log, self.groups, self.pel)
        self.now = now            # the verb's clock reading, ms

    def flush(self):
        """Write back changed records; returns the names of the streams
        the verb changed (whose blocked readers to wake)."""
        self.groups.flush()
        return self.streams.flush()
