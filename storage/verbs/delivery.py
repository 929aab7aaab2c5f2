"""Delivering entries to consumers: XREADGROUP (new entries, history,
CLAIM of idle ones), XCLAIM, XAUTOCLAIM.  Functions of ``p``
(storage.parts.Parts), called through the facade.
"""
from storage import errors
from storage.ids import MAX_ID, MIN_ID, incr
from storage.info import AutoClaimed, ClaimedEntry, Entry
from storage.options import raise_deferred
from storage.parts.pel import bump, shown
from storage.verbs import lag
from storage.verbs.budget import Budget
from storage.verbs.groups import need_group

# ============================================================ XREADGROUP


class Span:
    """New entries delivered to a consumer, as the IDs of the first and
    the last (both delivered, with every entry between them) and their
    number: ``read_group(..., spans=True)``."""
    __slots__ = ("first", "last", "n")

    def __init__(self, first, last, n):
        self.first, self.last, self.n = first, last, n

    def __len__(self):
        return self.n


def read_group(p, o, spans=False):
    """XREADGROUP without blocking: ``[(key, entries)]``.  Each entry is
    an Entry -- fields None for a deleted pending entry -- or, with
    CLAIM, a ClaimedEntry (storage.info).

    ``spans``: for a read of new entries only (every ID ``>``, no CLAIM,
    MAXCOUNT or MAXSIZE), ``[(key, Span)]`` instead: the same delivery,
    without holding the entries (the caller reads them from a snapshot
    taken before the commit, a page at a time)."""
    if spans and (o.claim is not None or o.maxcount or o.maxsize or any(w != b">" for w in o.ids)):
        raise ValueError("spans: a read of new entries only")
    found = []
    for key, want in zip(o.keys, o.ids):
        m = p.streams.get(key)
        g = p.groups.get(m, o.group) if m is not None else None
        if g is None:
            raise errors.nogroup_xreadgroup(key, o.group)
        if isinstance(want, errors.RedisError):
            raise want
        found.append((m, g))
    now = p.now
    out = []
    total = 0
    budget = Budget(o.maxsize)
    for (m, g), key, want in zip(found, o.keys, o.ids):
        if (o.maxcount and total >= o.maxcount) or budget.spent:
            break
        count = o.count
        if o.maxcount:
            left = o.maxcount - total
            count = left if not count or left < count else count
        c = p.groups.seen(g, o.consumer, now)
        if want == b">":
            ents = []
            if o.claim is not None:
                ents = _claim_idle(p, m, g, c, o.claim, count, budget)
            left = (count - len(ents)) if count else 0
            if spans:
                ents = _deliver_span(p, m, g, c, count, o.noack)
            elif (not count or left > 0) and not budget.spent:
                news = _deliver_new(p, m, g, c, left, o.noack, budget)
                if o.claim is not None:
                    news = [ClaimedEntry(i, f, 0, 0) for i, f in news]
                ents += news
            if not ents:
                continue
            c.active_time = now
            p.dirty += 1                # new entries delivered: one change a stream (t_stream.c's propCount)
        else:
            ents = _history(p, m, g, c, want, count, budget)
        p.streams.touch(key)
        total += len(ents)
        out.append((key, ents))
    return out


def read_group_run(p, reads):
    """XREADGROUPs run one after another, their entries read at once:
    each a read of new entries (``>``) of the same one stream and group,
    with a COUNT, the same NOACK, and no CLAIM, MAXCOUNT or MAXSIZE (a
    pool of clients reading the same stream, or one client's pipeline;
    the consumers may differ).  Each read's result as ``read_group``
    gives it, except that each entry is its ``((ms, seq), fields)`` row,
    not an Entry (the caller makes the replies at once), and the store
    and counters those of running them in turn:
    the entries after the group's last ID, ``count`` of them to each
    read in order while there are any."""
    o = reads[0]
    key = o.keys[0]
    m = p.streams.get(key)
    g = p.groups.get(m, o.group) if m is not None else None
    if g is None:
        raise errors.nogroup_xreadgroup(key, o.group)
    now = p.now
    rows = []
    if m.length and g.last_id < m.last_id:
        rows = p.log.rows(m, incr(g.last_id), sum(r.count for r in reads))
    if not rows:
        for r in reads:
            p.groups.seen(g, r.consumer, now)       # each read makes its consumer, as alone
        return [[] for _ in reads]
    newest = None if o.noack else p.pel.newest(g)
    if newest is not None and rows[0][0] <= newest:     # XGROUP SETID moved back: some may be pending
        deliver = _deliverer(p, m, g, o.noack, True)
    else:
        deliver = None
    out: list = []
    owners: list = []
    k = 0
    seen = p.groups.seen
    for r in reads:
        c = seen(g, r.consumer, now)
        got = rows[k:k + r.count]
        if not got:
            out.append([])
            continue
        k += len(got)
        if deliver is not None:
            for i, _ in got:
                deliver(i, c)
        elif not o.noack:
            owners += [c] * len(got)
        c.active_time = now
        p.dirty += 1
        out.append([(key, got)])
    if deliver is None:
        ids = [i for i, _ in rows[:k]]
        _advance_all(p.log, m, g, ids)
        if owners:
            p.pel.add_new(g, list(zip(ids, owners)), now)
    p.streams.touch(key)
    return out


def _advance_all(log, m, g, ids):
    """``lag.advance`` over ``ids``, in order."""
    first = log.first_id(m)
    advance = lag.advance
    for i in ids:
        advance(log, m, g, i, first)


def _deliverer(p, m, g, noack, many=False):
    """``deliver(i, c)``: entry ``i`` (after the group's last ID, each
    newer than the one before) is delivered to consumer ``c``: the
    group's counters move past it and, unless NOACK, it is pending with
    ``c``.  What it needs is looked up once for the whole delivery (the
    stream's first ID: delivering changes no entry).  An entry may be
    pending already (XGROUP SETID moved the last ID back); one above the
    group's newest pending ID is not, so with ``many`` deliveries to come
    (or an empty PEL) that ID is looked up once and only entries up to it
    have their record looked up."""
    log, now = p.log, p.now
    first = log.first_id(m)
    advance = lag.advance
    if noack:
        return lambda i, c: advance(log, m, g, i, first)
    pel = p.pel
    get, put = pel.get, pel.put
    newest = pel.newest(g) if many or not g.pel_count else MAX_ID

    def deliver(i, c):
        advance(log, m, g, i, first)
        put(g, i, c.cid, now, 1, get(g, i) if newest is not None and i <= newest else None, c)
    return deliver


def _deliver_new(p, m, g, c, count, noack, budget):
    """Entries after the group's last ID, now delivered to ``c``."""
    if m.length == 0 or g.last_id >= m.last_id:
        return []
    rows = budget.fit(p.log.rows(m, incr(g.last_id), count))
    deliver = _deliverer(p, m, g, noack, len(rows) > 1)
    for i, _ in rows:
        deliver(i, c)
    return [Entry(i, fields) for i, fields in rows]


def _deliver_span(p, m, g, c, count, noack):
    """``_deliver_new`` without the entries: a Span, or [] for none."""
    if m.length == 0 or g.last_id >= m.last_id:
        return []
    first = i = None
    n = 0
    deliver = _deliverer(p, m, g, noack, count != 1)
    for i in p.log.ids(m, start=incr(g.last_id), count=count):
        deliver(i, c)
        if first is None:
            first = i
        n += 1
    return Span(first, i, n) if n else []


def _history(p, m, g, c, after, count, budget):
    """A consumer's own pending entries after ``after`` (history read):
    delivery time and count are updated; a deleted entry is shown with
    no fields, not redelivered."""
    if after == MAX_ID:
        return []
    out = []
    rows = [(i, p.log.fields(m, i)) for i in p.pel.owned(g, c.cid, incr(after), MAX_ID, count)]
    for i, fields in budget.fit(rows):
        if fields is not None:
            old = p.pel.get(g, i)
            p.pel.put(g, i, c.cid, p.now, bump(old[2]), old)
        out.append(Entry(i, fields))
    return out


def _claim_idle(p, m, g, c, min_idle, count, budget):
    """XREADGROUP ... CLAIM: move entries idle for ``min_idle`` ms to
    ``c``, longest idle first (NACKed first), at most ``count`` (0: all).
    Entries deleted from the stream are skipped.  Returns ClaimedEntry
    rows (the delivery count before this delivery).  Walks the time index
    from its start: O(log n + k)."""
    now = p.now
    cutoff = now - min_idle
    cand = []
    fields_of = p.log.fields_getter(m)
    for t, i in p.pel.by_time(g):
        if t > cutoff:
            break
        f = fields_of(i)
        if f is None:
            continue
        cand.append((i, f))
        if count and len(cand) >= count:
            break
    rows = budget.fit(cand)
    out = []
    moves = []
    record = p.pel.record_of(g)
    for i, fields in rows:
        old = record(i)
        idle = now - old[1] if old[0] else now
        moves.append((i, old))
        out.append(ClaimedEntry(i, fields, idle if idle > 0 else 0, shown(old[2])))
    p.pel.deliver_many(g, moves, c, now)
    return out


def claim_wait_ms(p, keys, group, min_idle):
    """For a blocked XREADGROUP CLAIM: ms until the oldest pending entry
    of these streams becomes claimable (None: nothing pending)."""
    best = None
    for key in keys:
        m = p.streams.get(key)
        g = p.groups.get(m, group) if m is not None else None
        if g is None:
            continue
        for t, i in p.pel.by_time(g):
            if p.log.exists(m, i):      # the oldest that still exists
                w = max(0, t + min_idle - p.now)
                best = w if best is None else min(best, w)
                break
    return best


# ================================================================ XCLAIM


def claim(p, name, group, consumer, o):
    """XCLAIM: the entries (Entry each, or their IDs with JUSTID) now
    owned by ``consumer``."""
    m, g = need_group(p, name, group)
    raise_deferred(o)
    now = p.now
    t = now
    if o.idle is not None:
        t = now - o.idle
    elif o.time is not None:
        t = o.time
    if t < 0 or t > now:
        t = now
    lastid_moved = o.lastid is not None and o.lastid > g.last_id
    if lastid_moved:
        g.last_id = o.lastid
    # Redis (7.0.x backports of #11099 on): the consumer is created or
    # seen before the claiming, even when nothing is claimed
    c = p.groups.seen(g, consumer, now)
    out = []
    for i in o.ids:
        old = p.pel.get(g, i)
        if not p.log.exists(m, i):
            if old is not None:
                p.pel.remove(g, i, old)
                p.dirty += 1
                lastid_moved = False    # Redis: propagated with this change
            continue
        if old is None:
            if not o.force:
                continue
            count = 1          # streamCreateNACK starts at 1
        else:
            count = old[2]
            if old[0] and o.min_idle and now - old[1] < o.min_idle:
                continue
        if o.retrycount is not None:
            count = o.retrycount
        elif not o.justid:
            count = bump(count)
        p.pel.put(g, i, c.cid, t, count, old)
        c.active_time = now
        out.append(i if o.justid else Entry(i, p.log.fields(m, i)))
        lastid_moved = False
    if out:
        p.streams.touch(name)
    p.dirty += len(out) + lastid_moved
    return out


_MEMORY_LIMIT: list = []


def transient_memory_limit():
    """About the largest single allocation Redis could get on this
    machine, in bytes: XAUTOCLAIM allocates 16 bytes per COUNT up front
    and answers "COUNT too high" when that fails.  Where the kernel
    overcommits (vm.overcommit_memory 0 or 1) jemalloc maps without
    reserving and only the address space's free room bounds it:
    measured against redis-server 7.0.15 on x86-64 Linux, 2^41 entries
    (32 TiB) pass and 2^42 fail, the exact edge depending on the
    process's memory layout, so xs takes 32 TiB.  With strict accounting
    (2) it is the commit limit."""
    if not _MEMORY_LIMIT:
        limit = 1 << 45
        try:
            with open("/proc/sys/vm/overcommit_memory") as f:
                strict = f.read().strip() == "2"
            if strict:
                with open("/proc/meminfo") as f:
                    for line in f:
                        k, _, v = line.partition(":")
                        if k == "CommitLimit":
                            limit = int(v.split()[0]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        _MEMORY_LIMIT.append(limit)
    return _MEMORY_LIMIT[0]


def autoclaim(p, name, group, consumer, o):
    """XAUTOCLAIM: an AutoClaimed (next cursor, claimed, deleted IDs)."""
    m, g = need_group(p, name, group)
    if o.count * 16 > transient_memory_limit():
        raise errors.autoclaim_count_too_high()
    now = p.now
    attempts = o.count * 10
    count = o.count
    claimed, deleted = [], []
    c = p.groups.seen(g, consumer, now)   # created even if nothing is claimed
    nxt = MIN_ID
    exists = p.log.exists_getter(m)
    for i, rec in p.pel.items(g, o.start, MAX_ID):
        if not attempts or not count:
            nxt = i
            break
        attempts -= 1
        if not exists(i):
            p.pel.remove(g, i, rec)
            deleted.append(i)
            count -= 1
            continue
        if rec[0] and o.min_idle and now - rec[1] < o.min_idle:
            continue
        p.pel.put(g, i, c.cid, now, rec[2] if o.justid else bump(rec[2]), rec)
        c.active_time = now
        claimed.append(i if o.justid else Entry(i, p.log.fields(m, i)))
        count -= 1
    if claimed or deleted:
        p.streams.touch(name)
    p.dirty += len(claimed) + len(deleted)
    return AutoClaimed(nxt, claimed, deleted)
