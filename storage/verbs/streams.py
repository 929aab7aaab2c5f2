"""Stream verbs: XADD, XRANGE, XLEN, XDEL, XDELEX, XTRIM, XSETID, XCFGSET,
XREAD, XINFO STREAM.  Each is a function of ``p`` (storage.parts.Parts)
called through the transaction facade (storage.txn.Txn), which makes it
all or nothing.

Every verb checks what can fail before its first change, in Redis's
order (see storage.options on deferred errors), and returns a value,
never a rendered reply.
"""
from itertools import repeat
from operator import itemgetter

from storage import codec, errors
from storage.ids import MAX_ID, MIN_ID, U64, incr
from storage.options import raise_deferred

_first, _second = itemgetter(0), itemgetter(1)

# =================================================================== XADD


def add(p, name, fields, o):
    """XADD: append ``fields`` (a flat field/value list) to ``name``.

    Returns the new ID, the ID recorded earlier for a duplicate IDMP
    request, or None when NOMKSTREAM and the stream does not exist.
    Trimming, if asked for, happens after the append."""
    if o.id is not None and o.seq_given and o.id == MIN_ID:
        raise errors.xadd_zero_id()
    m = p.streams.get(name)
    if m is None and o.nomkstream:
        return None
    iid = None
    if o.idmp_pid is not None:
        iid = o.idmp_iid if o.idmp_iid is not None else codec.idmp_auto_iid(fields)
        if m is not None:
            dup = p.idmp.find(m, o.idmp_pid, iid, p.now)
            if dup is not None:
                m.idmp_stats[3] += 1
                m.idmp_cfg = True
                p.dirty += 1
                return dup
    last = m.last_id if m is not None else MIN_ID
    if last == MAX_ID:
        raise errors.xadd_exhausted()
    new = next_id(last, o.id, o.seq_given, p.now)
    if m is None:
        m = p.streams.create(name)
    p.log.append(m, new, fields)
    m.last_id = new
    m.entries_added += 1
    if iid is not None:
        p.idmp.record(m, o.idmp_pid, iid, new, p.now)
    if o.trim is not None:
        from storage.verbs.trim import trim as _trim
        _trim(p.log, p.refs, m, o.trim)
    p.dirty += 1
    return new


def add_auto_many(p, items):
    """Many ``XADD name * field value ...`` (no options) at once: bulk
    ingest runs this for every run of such lines, so it is kept tight.
    ``items`` are (name, fields) pairs, where fields is the field/value
    list or, already in text form, those fields joined by newlines (none
    of them containing one).  Returns the new IDs, in order.
    Raises the exhausted-ID error if any item cannot be added, its
    ``item`` the index of the first refused (Txn.add_auto_many decides
    what follows).  The cyclic collector is paused throughout (see
    storage.parts.log.no_cycle_collection): the IDs made here die with
    the call."""
    from storage.parts.log import no_cycle_collection
    with no_cycle_collection():
        return _add_auto_many(p, items)


def _add_auto_many(p, items):
    if type(items) is codec.AddBlock:
        ids = _add_run(p, items.key, items)          # script mode's bulk: one stream's
        if ids is not None:
            return ids
        items = items.pairs()
    if len(items) > 1:
        name = items[0][0]
        if list(map(_first, items)).count(name) == len(items):
            ids = _add_run(p, name, items)          # one stream: the usual bulk ingest
            if ids is not None:
                return ids
    out: list[tuple[int, int]] = []
    app = out.append
    now = p.now
    last_name = m = None
    pairs = []
    ms = seq = 0
    for name, f in items:
        if name != last_name:
            if m is not None:
                _finish_run(p, m, ms, seq, pairs)
                pairs = []
            m = p.streams.get_or_create(name)
            last_name = name
            ms, seq = m.last_id
        if now > ms:
            ms, seq = now, 0
        elif seq != U64:
            seq += 1
        elif ms != U64:
            ms, seq = ms + 1, 0
        else:
            e = errors.xadd_exhausted()
            e.item = len(out)           # which item was refused (Txn.add_auto_many)
            raise e
        new = (ms, seq)
        pairs.append((new, f))
        app(new)
    if m is not None:
        _finish_run(p, m, ms, seq, pairs)
    return out


def _add_run(p, name, items):
    """``add_auto_many`` of items all to stream ``name``, whose IDs are
    one millisecond's consecutive sequence numbers (the first one's
    rules, then one more each: what the loop would give them): the IDs
    made in C-level passes.  None (nothing done) when
    the sequence numbers would run out within the run."""
    m = p.streams.get_or_create(name)
    ms, seq = m.last_id
    if p.now > ms:
        ms, seq = p.now, 0
    else:
        seq += 1
    n = len(items)
    if seq + n - 1 > U64:
        return None
    ids = list(zip(repeat(ms, n), range(seq, seq + n)))
    if type(items) is codec.AddBlock:
        _finish_run(p, m, ms, seq + n - 1, ids, items)
    else:
        _finish_run(p, m, ms, seq + n - 1, list(zip(ids, map(_second, items))))
    return ids


def _finish_run(p, m, ms, seq, pairs, block=None):
    """``pairs``: (ID, fields) pairs, or with ``block`` (a codec.AddBlock)
    the IDs of its entries (EntryLog.append_many)."""
    p.log.append_many(m, pairs, block)
    m.last_id = (ms, seq)
    m.entries_added += len(pairs)
    p.dirty += len(pairs)


def next_id(last, req, seq_given, now):
    """The ID XADD gives the next entry (``streamAppendItem``)."""
    if req is None:
        if now > last[0]:
            return (now, 0)
        return incr(last)
    if seq_given:
        new = req
    elif req[0] == last[0]:
        if last[1] == U64:
            raise errors.xadd_id_too_small()
        new = (last[0], last[1] + 1)
    else:
        new = req
    if new <= last:
        raise errors.xadd_id_too_small()
    return new


# ========================================================== XRANGE, XLEN


def range_(p, name, o):
    """XRANGE / XREVRANGE: entries between two inclusive bounds
    (codec.Entries); None for COUNT 0 on an existing stream."""
    m = p.streams.get(name)
    if m is None:
        return codec.Entries()
    if o.count == 0:
        return None
    return p.log.range(m, o.start, o.end, o.count or 0, o.rev)


def length(p, name):
    """XLEN."""
    m = p.streams.get(name)
    return 0 if m is None else m.length


# ========================================================= XDEL, XDELEX


def delete_entries(p, name, o):
    """XDEL: delete entries by ID; returns how many were there."""
    m = p.streams.get(name)
    if m is None:
        return 0
    raise_deferred(o)
    n = 0
    for i in o.ids:
        if p.log.delete(m, i):
            n += 1
            if i > m.max_deleted:
                m.max_deleted = i
    p.dirty += n
    return n


def delete_entries_ex(p, name, o):
    """XDELEX: per ID 1 (deleted), -1 (no such entry) or 2 (kept, still
    referenced by a group: ACKED only)."""
    m = p.streams.get(name)
    if m is None:
        return [-1] * o.given
    raise_deferred(o)
    groups = p.refs.groups_for(m, o.policy)
    out = [p.refs.delete_noted(m, groups, i, o.policy) for i in o.ids]
    p.dirty += out.count(1)
    return out


# ================================================================ XTRIM


def trim(p, name, o):
    """XTRIM: returns the number of entries deleted."""
    m = p.streams.get(name)
    if m is None:
        return 0
    from storage.verbs.trim import trim as _trim
    n = _trim(p.log, p.refs, m, o)
    p.dirty += n
    return n


# =============================================================== XSETID


def set_id(p, name, o):
    """XSETID."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    if o.id < m.max_deleted:
        raise errors.xsetid_smaller_than_maxdel()
    if m.length > 0:
        top = p.log.last_id(m)
        if top is not None and o.id < top:
            raise errors.xsetid_smaller_than_top()
        if o.entries_added != -1 and m.length > o.entries_added:
            raise errors.xsetid_entries_added_small()
    m.last_id = o.id
    if o.entries_added != -1:
        m.entries_added = o.entries_added
    if o.max_deleted is not None and o.max_deleted != MIN_ID:
        m.max_deleted = o.max_deleted
    p.dirty += 1


# ========================================================== XIDMPRECORD

def record_idmp(p, name, pid, iid, o):
    """XIDMPRECORD: (pid, iid) -> the existing entry ``o.ids[0]`` in the
    stream's IDMP history (replaying a history, as Redis's AOF does).
    Checks in the order the Redis docs list the errors."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    raise_deferred(o)
    i = o.ids[0]
    if not p.log.exists(m, i):
        raise errors.xidmprecord_no_entry()
    if not pid:
        raise errors.xidmprecord_empty("producer ID")
    if not iid:
        raise errors.xidmprecord_empty("idempotent ID")
    had = p.idmp.put(m, pid, iid, i, p.now)
    if had is not None and had != i:
        raise errors.xidmprecord_other_id()
    p.dirty += 1


# ============================================================== XCFGSET


def configure_idmp(p, name, o):
    """XCFGSET: a changed setting clears every producer's history."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    raise_deferred(o)
    changed = False
    if o.duration is not None and o.duration != m.idmp_duration:
        m.idmp_duration = o.duration
        changed = True
    if o.maxsize is not None and o.maxsize != m.idmp_maxsize:
        m.idmp_maxsize = o.maxsize
        changed = True
    if changed:
        p.idmp.clear(m)
    m.idmp_cfg = True
    p.dirty += 1


# ================================================================ XREAD


def resolve_read_ids(p, keys, ids):
    """XREAD's IDs at command start: ``$`` becomes the stream's last ID
    (0-0 if absent); ``+`` stays (it means "the last entry")."""
    out = []
    for k, i in zip(keys, ids):
        if i == b"$":
            m = p.streams.get(k)
            out.append(m.last_id if m is not None else MIN_ID)
        else:
            out.append(i)
    return tuple(out)


def read_streams(p, o):
    """XREAD without blocking: ``[(key, entries), ...]`` for the streams
    that have entries after their ID (``+``: the last entry; ``$``:
    none, unless resolved first by ``resolve_read_ids``)."""
    out = []
    total = 0
    from storage.verbs.budget import Budget
    budget = Budget(o.maxsize)
    for k, after in zip(o.keys, o.ids):
        if (o.maxcount and total >= o.maxcount) or budget.spent:
            break
        m = p.streams.get(k)
        if m is None or m.length == 0:
            continue
        if after == b"+":
            last = p.log.last_id(m)
            ents = p.log.entries(m, last, last, 1)
        else:
            if after == b"$":
                after = m.last_id
            if after == MAX_ID:
                continue
            n = o.count
            if o.maxcount:
                left = o.maxcount - total
                n = left if not n or left < n else n
            ents = p.log.entries(m, incr(after), MAX_ID, n)
        ents = budget.fit(ents, id_text=True)
        if ents:
            total += len(ents)
            out.append((k, ents))
    return out


# ========================================================== XINFO STREAM


def stream_info(p, name, o):
    """XINFO STREAM [FULL [COUNT n]] (storage.info.StreamInfo)."""
    m = p.streams.get(name)
    if m is None:
        raise errors.no_such_key()
    raise_deferred(o)
    from storage.info import IdmpInfo, StreamInfo
    from storage.verbs.groups import group_details
    log = p.log
    info = StreamInfo(length=m.length, nodes=log.node_count(m),
                      last_generated_id=m.last_id, max_deleted_entry_id=m.max_deleted,
                      entries_added=m.entries_added, recorded_first_entry_id=log.first_id(m),
                      full=o.full)
    pids, iids = p.idmp.live_counts(m, p.now)   # shown for every stream (Redis 8.6+)
    added, dups = m.idmp_stats[2], m.idmp_stats[3]
    info.idmp = IdmpInfo(duration=m.idmp_duration, maxsize=m.idmp_maxsize, pids_tracked=pids,
                         iids_tracked=iids, iids_added=added, iids_duplicates=dups)
    if not o.full:
        first = log.entries(m, MIN_ID, MAX_ID, 1)
        last = log.entries(m, MIN_ID, MAX_ID, 1, rev=True)
        info.groups = len(p.groups.list(m))
        info.first_entry = first[0] if first else None
        info.last_entry = last[0] if last else None
    else:
        info.entries = log.entries(m, MIN_ID, MAX_ID, o.count)
        info.groups = group_details(p, m, o.count)
    return info
