"""Trimming: XTRIM, and XADD's MAXLEN / MINID option.

Exact trimming (``=``) removes every entry beyond the threshold.
Approximate trimming (``~``) removes only whole nodes of ``NODE_ENTRIES``
entries from the head (Redis stores entries in listpack nodes and frees
whole ones), never more than LIMIT entries per call.  With DELREF or
ACKED, entries are looked at one by one (Redis ignores ``~`` for them)
and the reference policy (storage.refs) decides each.
"""
from storage.options import KEEPREF
from storage.refs import DELETED

# Redis's stream-node-max-entries: approximate trimming removes whole
# chunks of this many entries.
NODE_ENTRIES = 100


def trim(log, refs, m, t):
    """Trim stream ``m`` as ``t`` (TrimOptions) says; returns how many
    entries went."""
    if m.length == 0:
        return 0
    maxlen = t.threshold if t.strategy == "maxlen" else None
    minid = t.threshold if maxlen is None else None
    if t.policy == KEEPREF and t.approx:
        return _whole_nodes(log, m, maxlen, minid, t.limit)
    if t.policy == KEEPREF:
        if maxlen is not None:
            return log.delete_first(m, m.length - maxlen) if m.length > maxlen else 0
        return log.delete_below(m, minid)
    # DELREF / ACKED: look at no more than the entries MAXLEN would
    # remove (or those below MINID)
    scan = (m.length - maxlen) if maxlen is not None else None
    if scan is not None and scan <= 0:
        return 0
    groups = refs.groups_for(m, t.policy)
    candidates = []
    for seen, i in enumerate(log.ids(m, below=minid)):
        if scan is not None and seen >= scan:
            break
        candidates.append(i)
    deleted = 0
    for i in candidates:
        if t.limit and t.approx and deleted >= t.limit:
            break
        if refs.delete(m, groups, i, t.policy) == DELETED:
            deleted += 1
    return deleted


def _whole_nodes(log, m, maxlen, minid, limit):
    """KEEPREF with ``~``: whole chunks from the head while one can go
    entirely, at most ``limit`` entries (0: no limit)."""
    deleted = 0
    while m.length:
        chunk = min(NODE_ENTRIES, m.length)
        if limit and deleted + chunk > limit:
            break
        if maxlen is not None:
            if m.length - chunk < maxlen:
                break
        elif log.nth_id(m, chunk - 1) >= minid:   # the chunk's last ID must be below MINID
            break
        log.delete_first(m, chunk)
        deleted += chunk
    return deleted
