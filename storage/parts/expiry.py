"""Key expiry (EXPIRE and its family): the index of streams with a TTL.

A stream's expiry time is in its record (``StreamMeta.expire_at``, Unix
ms); ``Expiry`` owns the index beside it in ``meta``: one key per stream
with a TTL, time first, so the streams whose time has passed are the
first keys of the index.

Invariant: a record has ``expire_at`` set exactly when the index holds
(``expire_at``, its name).  ``set`` is the one way to change it.

An expired stream is gone at once for every reader (StreamTable.get
answers None once its time has passed); its record and data stay on disk
until a writer removes them (``Parts.flush``): the writer that touched
it, or any writer, a few at a time (``due``), as Redis's active expiry
does.
"""
from storage import codec

_PREFIX = codec.EXPIRY_PREFIX


class Expiry:
    """The expiry index of one verb."""

    __slots__ = ("_kv", "_db")

    def __init__(self, kv):
        self._kv = kv
        self._db = kv.db(b"meta")

    def set(self, name, m, at):
        """Give stream ``m`` (named ``name``) the expiry time ``at`` (Unix
        ms), or none (``at`` None)."""
        if m.expire_at is not None:
            self._kv.delete(self._db, codec.expiry_key(m.expire_at, name))
        m.expire_at = at
        if at is not None:
            self._kv.put(self._db, codec.expiry_key(at, name), name)

    def due(self, now, limit):
        """Up to ``limit`` (index key, name) whose expiry time is ``now`` or
        earlier, earliest first."""
        out: list[tuple[bytes, bytes]] = []
        for k, name in self._kv.iter_prefix(self._db, _PREFIX):
            if len(out) >= limit or codec.expiry_time(k) > now:
                break
            out.append((k, name))
        return out

    def discard(self, key):
        """Remove an index key that does not agree with its record."""
        self._kv.delete(self._db, key)

    def expired_names(self, now):
        """Every name whose expiry time has passed (the walkers leave
        them out)."""
        return {name for _, name in self.due(now, 1 << 62)}

    def count(self):
        """How many streams have a TTL (INFO keyspace's ``expires``),
        expired ones not yet removed included."""
        return sum(1 for _ in self._kv.iter_prefix(self._db, _PREFIX, values=False))
