"""Reference policies: what deleting an entry does to the consumer
groups that still refer to it (XADD / XTRIM / XDELEX / XACKDEL with
KEEPREF, DELREF or ACKED).

  KEEPREF  delete the entry; PEL references stay (they then point at a
           deleted entry, which readers see as such)
  DELREF   delete the entry and remove it from every group's PEL
  ACKED    delete the entry only if no group still needs it: every group
           has delivered it (last-delivered-id at or past it) and none
           holds it pending

``References.delete`` is the one place that applies a policy to one
entry; every verb that deletes under a policy calls it.
"""
from storage.options import ACKED, DELREF

DELETED, KEPT, MISSING = 1, 2, -1      # the per-ID replies of XDELEX / XACKDEL


class References:
    """The policies, over the entry log and the groups' PELs."""

    __slots__ = ("_log", "_groups", "_pel")

    def __init__(self, log, groups, pel):
        self._log = log
        self._groups = groups
        self._pel = pel

    def groups_for(self, m, policy):
        """The groups a policy has to look at (none for KEEPREF)."""
        return self._groups.list(m) if policy in (ACKED, DELREF) else ()

    def referenced(self, groups, i):
        """True if a group still needs entry ``i``: not yet delivered to
        it, or pending in it."""
        for g in groups:
            if g.last_id < i:
                return True
        for g in groups:
            if self._pel.contains(g, i):
                return True
        return False

    def release(self, groups, i):
        """Remove ``i`` from every group's PEL; True if it was in one."""
        hit = False
        for g in groups:
            hit |= self._pel.discard(g, i)
        return hit

    def delete(self, m, groups, i, policy):
        """Delete entry ``i`` of stream ``m`` under ``policy``
        (``groups``: ``groups_for(m, policy)``).  Returns DELETED, KEPT
        (ACKED, still referenced) or MISSING (no such entry)."""
        if policy == ACKED and self.referenced(groups, i):
            return KEPT
        if policy == DELREF:
            self.release(groups, i)
        return DELETED if self._log.delete(m, i) else MISSING

    def delete_noted(self, m, groups, i, policy):
        """``delete``, and a deleted ID counts for max-deleted-entry-id
        (XDELEX, XACKDEL; trimming does not count)."""
        r = self.delete(m, groups, i, policy)
        if r == DELETED and i > m.max_deleted:
            m.max_deleted = i
        return r
