"""Everything a stream holds, as logical records: what ``xs save``,
``xs export`` and the Redis bridge write out, in an order storage.verbs.load
can take back.  Read-only; a function of ``p`` (storage.parts.Parts).

Records, per stream, in this order:

  ("stream", meta)                          a dict: length, last-id,
                                            max-deleted-id, entries-added,
                                            idmp-configured, idmp-duration,
                                            idmp-maxsize, iids-added,
                                            iids-duplicates
  ("entry", id, record)                     ascending; decode with
                                            codec.decode_entry
  ("iid", producer key, iid key, id)        grouped by producer, each in
                                            insertion order
  ("group", name, last id, entries read)    in name order, each followed by
  ("consumer", name, seen, active)            its consumers, each followed by
  ("pending", id, delivery time, count)         its pending entries
  ("nacked", id, count)                       and the NACKed ones, in NACK order
"""
from itertools import islice

from storage import errors
from storage.ids import MAX_ID, MIN_ID

ENTRY_BATCH = 1000


def stream_meta(m):
    d = {"length": m.length, "last-id": m.last_id, "max-deleted-id": m.max_deleted,
         "entries-added": m.entries_added, "idmp-configured": bool(m.idmp_cfg),
         "idmp-duration": m.idmp_duration, "idmp-maxsize": m.idmp_maxsize,
         "iids-added": m.idmp_stats[2], "iids-duplicates": m.idmp_stats[3]}
    if m.expire_at is not None:
        d["expire-at"] = m.expire_at
    return d


class CorruptStore(Exception):
    """The store contradicts itself (a record's count versus its data)."""


def stream_records(p, name, batched=False):
    """The records of stream ``name`` (see the module docstring);
    ``batched``: the entries as ("entries", [(id, record), ...])
    records of up to ENTRY_BATCH each (bulk writers: one record per
    thousand entries)."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    yield "stream", stream_meta(m)
    n = 0
    if batched:
        stored = p.log.records(m)
        while True:
            chunk = list(islice(stored, ENTRY_BATCH))
            if not chunk:
                break
            n += len(chunk)
            yield "entries", chunk
    else:
        for i, v in p.log.records(m):
            yield "entry", i, v
            n += 1
    if n != m.length:
        raise CorruptStore("stream %s: its record says %d entries but %d are stored"
                           % (name.decode("utf-8", "backslashreplace"), m.length, n))
    for pk, i, ik in p.idmp.history(m):
        yield "iid", pk, ik, i
    for g in p.groups.list(m):
        yield "group", g.name, g.last_id, g.entries_read
        for c in p.groups.consumers(g):
            yield "consumer", c.name, c.seen_time, c.active_time
            for i in p.pel.owned(g, c.cid, MIN_ID, MAX_ID):
                _, t, cnt = p.pel.get(g, i)
                yield "pending", i, t, cnt
        for i, cnt in p.pel.nacked(g):
            yield "nacked", i, cnt
