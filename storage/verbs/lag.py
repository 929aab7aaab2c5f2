"""A group's entries-read counter and lag (Redis 7+ ``XINFO GROUPS``),
as t_stream.c computes them: exact when the counter is known and no
deleted entry lies ahead of the group, estimated from the stream's
counters otherwise, unknown (None / -1) when it cannot be told.
"""
from storage.ids import MIN_ID


def has_tombstones(log, m, start, first=None):
    """streamRangeHasTombstones(s, start, +inf)."""
    if m.length == 0 or m.max_deleted == MIN_ID:
        return False
    if first is None:
        first = log.first_id(m)
    if first > m.max_deleted:
        return False
    return start <= m.max_deleted


def estimate_read(log, m, i, first=None):
    """streamEstimateDistanceFromFirstEverEntry: entries-read for a group
    whose last-delivered-id is ``i``, or -1 if unknowable."""
    if not m.entries_added:
        return 0
    if not m.length and i <= m.last_id:
        return m.entries_added
    if i != MIN_ID and i < m.max_deleted:
        return -1
    if i == m.last_id:
        return m.entries_added
    if i > m.last_id:
        return -1
    if first is None:
        first = log.first_id(m)
    if m.max_deleted == MIN_ID or m.max_deleted < first:
        if i < first:
            return m.entries_added - m.length
        if i == first:
            return m.entries_added - m.length + 1
    return -1


def lag(log, m, g):
    """XINFO's lag of group ``g``, or None when unknowable."""
    if not m.entries_added or not m.length:
        return 0
    first = log.first_id(m)
    if g.last_id < first and m.max_deleted < first:
        return m.length
    if g.entries_read != -1 and not has_tombstones(log, m, g.last_id, first):
        return m.entries_added - g.entries_read
    er = estimate_read(log, m, g.last_id, first)
    return None if er == -1 else m.entries_added - er


def advance(log, m, g, i, first=None):
    """The group delivered entry ``i`` (newer than its last ID): count it
    when the counter is known, the group was not behind the first entry
    and no tombstone lies ahead; otherwise estimate it.  ``first``: the
    stream's first ID, when the caller read it already (a delivery of
    many entries reads it once: delivering changes no entry)."""
    if first is None:
        first = log.first_id(m)
    if g.entries_read != -1 and g.last_id >= first and not has_tombstones(log, m, i, first):
        g.entries_read += 1
    elif m.entries_added:
        g.entries_read = estimate_read(log, m, i, first)
    g.last_id = i


def clamp_entries_read(m, entries_read):
    """ENTRIESREAD above entries-added is clamped to it (Redis 8)."""
    return m.entries_added if entries_read != -1 and entries_read > m.entries_added else entries_read
