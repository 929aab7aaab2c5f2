"""The health of a stream's consumer groups at a glance (the overview of
xs ls, xs metrics, xs check, xs top: storage.ops.overview), without a
walk of any PEL: Txn.group_health.

Per group, from its record, its consumers' records and two seeks:

* consumers, pending, last-delivered ID, entries-read and lag: XINFO
  GROUPS's (storage.verbs.lag);
* NACKed: the PEL less what the consumers own (each consumer's
  ``pel_count``; storage.parts.pel keeps both counts exact);
* the oldest delivery of an owned pending entry: the PEL's time index
  from its start, past the NACKed entries, which sort first
  (Pel.oldest_owned_time: O(log n + NACKed));
* the first entry after the last-delivered ID (its ID's ms give the lag
  in seconds): one seek in the log, shared by the groups at the same ID.

So O(groups + consumers + log n) a stream (plus the NACKed entries),
where XINFO STREAM FULL reads every PEL row.
"""
from storage import errors
from storage.ids import incr
from storage.info import ConsumerDetail, GroupHealth
from storage.verbs import lag


def group_health(p, name, with_consumers=False):
    """[GroupHealth] of stream ``name``'s groups, in name order
    (``with_consumers``: each consumer's record too); ERR no such key
    when it does not exist."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    log, pel, groups = p.log, p.pel, p.groups
    last = log.last_id(m) if m.length else None
    after: dict = {}           # last-delivered ID -> the first entry after it (or None)
    out = []
    for g in groups.list(m):
        cs = groups.consumers(g)
        owned = sum(c.pel_count for c in cs)
        nacked = g.pel_count - owned
        ld = g.last_id
        nxt = None
        if last is not None and last > ld:
            if ld not in after:
                after[ld] = next(log.ids(m, start=incr(ld), count=1), None)
            nxt = after[ld]
        out.append(GroupHealth(
            name=g.name, consumers=len(cs), pending=g.pel_count, last_delivered_id=ld,
            entries_read=None if g.entries_read == -1 else g.entries_read, lag=lag.lag(log, m, g),
            nacked=nacked, oldest_pending_time=pel.oldest_owned_time(g, nacked) if owned else None,
            next_id=nxt,
            consumer_details=[ConsumerDetail(name=c.name, seen_time=c.seen_time, active_time=c.active_time,
                                             pel_count=c.pel_count) for c in cs] if with_consumers else None))
    return out
