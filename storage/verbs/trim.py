"""Trimming: XTRIM, and XADD's MAXLEN / MINID option.

With KEEPREF (the default) this is Redis's ``streamTrim``, node by node
over the stream's listpack nodes (storage.parts.nodes, kept by storage.parts.log):
from the first node, a node goes whole if it can (MAXLEN: the stream
keeps at least MAXLEN entries without it; MINID: its last ID, deleted
entries included, is below MINID), never beyond LIMIT entries (counted
in whole nodes' live entries; ``~`` defaults to 100 x
stream-node-max-entries, as in Redis: ``approx_limit``).  Approximate
trimming (``~``) stops at the first node that cannot go whole; exact
trimming (``=``) then flags the entries beyond the threshold deleted in
that node, which stays.  With DELREF or ACKED, entries are looked at one
by one (Redis ignores ``~`` for them) and the reference policy
(storage.parts.refs) decides each.
"""
from storage.options import KEEPREF
from storage.parts.nodes import MAX_ENTRIES
from storage.parts.refs import DELETED

# Entries per node (stream-node-max-entries; nodes also close at 4096
# bytes, so with big entries a node holds fewer).
NODE_ENTRIES = MAX_ENTRIES


def approx_limit(log):
    """LIMIT of a ``~`` trim that gives none: 100 x stream-node-max-entries,
    10,000 when that is 0 (no limit), at most 1,000,000 (Redis's
    streamParseAddOrTrimArgsOrReply)."""
    n = log.node_limits()[1] * 100
    return 10000 if n <= 0 else min(n, 1000000)


def trim(log, refs, m, t):
    """Trim stream ``m`` as ``t`` (TrimOptions) says; returns how many
    entries went."""
    maxlen = t.threshold if t.strategy == "maxlen" else None
    minid = t.threshold if maxlen is None else None
    limit = t.limit
    if limit is None:
        limit = approx_limit(log) if t.approx else 0
    if t.policy == KEEPREF:
        # also on an empty stream: a node whose entries were all flagged
        # deleted by an exact MINID trim may still go
        return log.trim_nodes(m, maxlen, minid, t.approx, limit)
    if m.length == 0:
        return 0
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
        if limit and t.approx and deleted >= limit:
            break
        if refs.delete(m, groups, i, t.policy) == DELETED:
            deleted += 1
    return deleted
