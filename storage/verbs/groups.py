"""Consumer-group verbs: XGROUP, XACK, XACKDEL, XNACK, XPENDING, XINFO
GROUPS / CONSUMERS (delivery and claiming are in storage/verbs/delivery.py).
Functions of ``p`` (storage.parts.Parts), called through the facade.

Group-only changes do not alter the stream record, so these verbs
``touch`` the stream: its change counter moves and its blocked readers
re-check.
"""
from storage import errors
from storage.ids import MAX_ID, MIN_ID
from storage.info import ConsumerDetail, ConsumerInfo, GroupDetail, GroupInfo, PendingRow, PendingSummary
from storage.options import raise_deferred
from storage.parts.pel import LLONG_MAX, shown
from storage.parts.refs import KEPT
from storage.verbs import lag

# ============================================================== lookups


def need_stream(p, name):
    """XGROUP's first check: the key must exist."""
    m = p.streams.get(name)
    if m is None:
        raise errors.xgroup_mkstream_needed()
    return m


def need_group(p, name, group):
    """(stream, group), or NOGROUP as XPENDING, XCLAIM, XNACK word it."""
    m = p.streams.get(name)
    g = p.groups.get(m, group) if m is not None else None
    if g is None:
        raise errors.nogroup_key(name, group)
    return m, g


def need_xgroup(p, name, group):
    """(stream, group) for XGROUP subcommands: the key must exist, then
    the group (NOGROUP as XGROUP words it)."""
    m = need_stream(p, name)
    g = p.groups.get(m, group)
    if g is None:
        raise errors.nogroup_for_key(name, group)
    return m, g


def find_group(p, name, group):
    """(stream, group), or (None, None) when either is missing."""
    m = p.streams.get(name)
    g = p.groups.get(m, group) if m is not None else None
    return (m, g) if g is not None else (None, None)


# =============================================================== XGROUP


def create_group(p, name, group, o):
    """XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD n]."""
    m = p.streams.get(name)
    if m is None and not o.mkstream:
        raise errors.xgroup_mkstream_needed()
    raise_deferred(o)
    if m is not None and p.groups.get(m, group) is not None:
        raise errors.busygroup()
    start = o.start
    if start == b"$":
        start = m.last_id if m is not None else MIN_ID
    if m is None:
        m = p.streams.create(name)
    p.groups.create(m, group, start, lag.clamp_entries_read(m, o.entries_read))
    p.streams.touch(name)
    p.dirty += 1


def set_group_id(p, name, group, o):
    """XGROUP SETID key group <id | $> [ENTRIESREAD n]."""
    m, g = need_xgroup(p, name, group)
    raise_deferred(o)
    g.last_id = m.last_id if o.start == b"$" else o.start
    g.entries_read = lag.clamp_entries_read(m, o.entries_read)
    p.streams.touch(name)
    p.dirty += 1


def destroy_group(p, name, group):
    """XGROUP DESTROY: 1 if the group existed."""
    m = need_stream(p, name)
    g = p.groups.get(m, group)
    if g is None:
        return 0
    drop_group(p, g)
    p.streams.touch(name)
    p.dirty += 1
    return 1


def drop_group(p, g):
    """Remove group ``g``: its PEL, consumers and record."""
    p.pel.drop(g)
    p.groups.remove(g)


def create_consumer(p, name, group, consumer):
    """XGROUP CREATECONSUMER: 1 if created, 0 if it existed."""
    m, g = need_xgroup(p, name, group)
    if p.groups.consumer(g, consumer) is not None:
        return 0
    p.groups.create_consumer(g, consumer, p.now)
    p.streams.touch(name)
    p.dirty += 1
    return 1


def delete_consumer(p, name, group, consumer):
    """XGROUP DELCONSUMER: how many pending entries it had (they leave
    the group PEL too)."""
    m, g = need_xgroup(p, name, group)
    p.dirty += 1                      # as Redis, also for a consumer that does not exist
    c = p.groups.consumer(g, consumer)
    if c is None:
        return 0
    ids = p.pel.owned(g, c.cid, MIN_ID, MAX_ID)
    p.pel.discard_many(g, ids)
    p.groups.delete_consumer(g, c)
    p.streams.touch(name)
    return len(ids)


# ============================================================ XACK & co


def ack(p, name, group, o):
    """XACK: how many of the IDs were pending."""
    m, g = find_group(p, name, group)
    if g is None:
        return 0
    raise_deferred(o)
    n = p.pel.discard_many(g, o.ids)
    if n:
        p.streams.touch(name)
    p.dirty += n
    return n


def ack_delete(p, name, group, o):
    """XACKDEL: per ID -1 (not pending in this group), 1 (acked and
    deleted) or 2 (acked, kept: another group still needs it)."""
    m, g = find_group(p, name, group)
    if g is None:
        return [-1] * o.given
    raise_deferred(o)
    groups = p.refs.groups_for(m, o.policy)
    # acked (or not pending: -1), then deleted under the policy: 2 if
    # kept, else 1 -- also when the entry was already gone
    out = [-1 if not p.pel.discard(g, i) else (2 if p.refs.delete_noted(m, groups, i, o.policy) == KEPT else 1)
           for i in o.ids]
    p.streams.touch(name)
    p.dirty += len(out) - out.count(-1)
    return out


def nack(p, name, group, o):
    """XNACK: give entries back (unowned, claimable at once)."""
    m, g = need_group(p, name, group)
    raise_deferred(o)
    n = 0
    for i in o.ids:
        old = p.pel.get(g, i)
        if old is None:
            if not o.force or not p.log.exists(m, i):
                continue
            count = 0
        else:
            count = old[2]
        if o.retrycount is not None:
            count = o.retrycount
        elif o.mode == "silent":
            count = count - 1 if count > 0 else 0
        elif o.mode == "fatal":
            count = LLONG_MAX
        p.pel.nack(g, i, count, old)
        n += 1
    if n:
        p.streams.touch(name)
    p.dirty += n
    return n


# ============================================================= XPENDING


def pending_summary(p, name, group):
    """XPENDING key group (storage.info.PendingSummary)."""
    m, g = need_group(p, name, group)
    ends = p.pel.first_last(g) if g.pel_count else None
    if ends is None:
        return PendingSummary(count=0, first=None, last=None, consumers=[])
    owners = [(c.name, c.pel_count) for c in p.groups.consumers(g) if c.pel_count > 0]
    return PendingSummary(count=g.pel_count, first=ends[0], last=ends[1], consumers=owners)


def pending_range(p, name, group, o):
    """XPENDING key group [IDLE ms] start end count [consumer]:
    [PendingRow]; NACKed entries: consumer b"", idle -1."""
    m, g = need_group(p, name, group)
    out: list[PendingRow] = []
    if o.count <= 0:
        return out
    if o.consumer is not None:
        c = p.groups.consumer(g, o.consumer)
        if c is None:
            return out
        ids = p.pel.owned(g, c.cid, o.start, o.end, 0 if o.min_idle else o.count)
        recs = ((i, p.pel.get(g, i)) for i in ids)
    else:
        recs = p.pel.items(g, o.start, o.end)
    for i, (cid, t, cnt) in recs:
        if cid:
            idle = max(0, p.now - t)
            if o.min_idle and idle < o.min_idle:
                continue
            out.append(PendingRow(id=i, consumer=p.groups.consumer_name(g, cid), idle=idle, deliveries=shown(cnt)))
        else:
            out.append(PendingRow(id=i, consumer=b"", idle=-1, deliveries=shown(cnt)))
        if len(out) >= o.count:
            break
    return out


# ================================================================ XINFO


def groups_info(p, name):
    """XINFO GROUPS: [GroupInfo]."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    return [GroupInfo(name=g.name, consumers=len(p.groups.consumers(g)), pending=g.pel_count,
                      last_delivered_id=g.last_id,
                      entries_read=None if g.entries_read == -1 else g.entries_read,
                      lag=lag.lag(p.log, m, g))
            for g in p.groups.list(m)]


def consumers_info(p, name, group):
    """XINFO CONSUMERS: [ConsumerInfo]."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    g = p.groups.get(m, group)
    if g is None:
        raise errors.nogroup_for_key(name, group)
    now = p.now
    return [ConsumerInfo(name=c.name, pending=c.pel_count, idle=max(0, now - c.seen_time),
                         inactive=-1 if c.active_time == -1 else max(0, now - c.active_time))
            for c in p.groups.consumers(g)]


def group_details(p, m, count):
    """XINFO STREAM FULL's groups: [GroupDetail], at most ``count`` PEL
    rows per group and per consumer (0: all)."""
    out = []
    for g in p.groups.list(m):
        pend: list[tuple[tuple[int, int], bytes, int, int]] = []
        nacked = 0
        for i, (cid, t, cnt) in p.pel.items(g, MIN_ID, MAX_ID):
            if not cid:
                nacked += 1
            if not count or len(pend) < count:
                pend.append((i, p.groups.consumer_name(g, cid) if cid else b"", t if cid else 0, shown(cnt)))
        consumers = []
        for c in p.groups.consumers(g):
            rows = []
            for i in p.pel.owned(g, c.cid, MIN_ID, MAX_ID, count):
                _, t, cnt = p.pel.get(g, i)
                rows.append((i, t, shown(cnt)))
            consumers.append(ConsumerDetail(name=c.name, seen_time=c.seen_time, active_time=c.active_time,
                                            pel_count=c.pel_count, pending=rows))
        out.append(GroupDetail(name=g.name, last_delivered_id=g.last_id,
                               entries_read=None if g.entries_read == -1 else g.entries_read,
                               lag=lag.lag(p.log, m, g), pel_count=g.pel_count, nacked_count=nacked,
                               pending=pend, consumers=consumers))
    return out
