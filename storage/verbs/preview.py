"""Verbs no Redis command has, for the porcelain's looks at the store
(xs info, xs ls, xs trim --dry-run): what a trim would remove and whose
work is among it, and the store's counts.  Read-only; records from
storage.info.  Who imports it: storage.txn (Txn.trim_preview,
Txn.counts)."""
from storage import codec
from storage.info import GroupWork, TrimPreview
from storage.verbs.trim import NODE_ENTRIES


def trim_preview(p, name, minid, maxlen, approx):
    """What a KEEPREF trim of stream ``name`` to ``minid`` and/or
    ``maxlen`` would remove (``approx``: whole nodes, as repeated ``~``
    trims), and the work among it no group has done: a TrimPreview."""
    m = p.streams.get(name)
    if m is None:
        return TrimPreview(length=None, removed=0, unacked=0, groups=[])
    n = m.length
    heads = [0]
    if minid is not None:
        below = 0
        for _ in p.log.ids(m, below=minid):
            below += 1
        heads.append(_whole(below, n) if approx else below)
    if maxlen is not None and n > maxlen:
        heads.append(_whole(n - maxlen, n) if approx else n - maxlen)
    removed = max(heads)
    unacked, groups = _unacked(p, m, removed)
    return TrimPreview(length=n, removed=removed, unacked=unacked, groups=groups)


def _unacked(p, m, k):
    """(entries of the first ``k`` of stream ``m`` that some group still
    needs, [GroupWork]): one pass over those IDs, with each group's
    pending IDs in a set (a PEL is the work in flight, small beside the
    stream)."""
    groups = p.groups.list(m) if k else []
    if not groups:
        return 0, []
    pending = [{i for i, _ in p.pel.items(g, (0, 0), m.last_id)} for g in groups]
    undelivered = [0] * len(groups)
    held = [0] * len(groups)
    needed = 0
    for seen, i in enumerate(p.log.ids(m)):
        if seen == k:
            break
        need = False
        for j, g in enumerate(groups):
            if g.last_id < i:
                undelivered[j] += 1
                need = True
            elif i in pending[j]:
                held[j] += 1
                need = True
        needed += need
    return needed, [GroupWork(group=g.name, undelivered=undelivered[j], pending=held[j])
                    for j, g in enumerate(groups) if undelivered[j] or held[j]]


def _whole(k, n):
    """Of a head of ``k`` of ``n`` entries, what ``~`` removes: whole
    nodes, or everything when the whole stream may go (the last node
    may be short)."""
    return n if k >= n else k - k % NODE_ENTRIES




def counts(p):
    """(the store's format version or None, streams, entries)."""
    raw = p.kv.get(p.kv.db(b"meta"), codec.META_FORMAT)
    fmt = codec.decode_count(raw) if raw is not None else None
    streams = entries = 0
    for _, m in p.streams.records():
        streams += 1
        entries += m.length
    return fmt, streams, entries
