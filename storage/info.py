"""What the introspection verbs return (XINFO, XPENDING's summary): plain
records with one attribute per fact.  How a fact is named and ordered
in a Redis reply is the command line's business (xstream_cli/commands/),
not the engine's.  IDs are ``(ms, seq)``; times are ms.
"""


class _Record:
    __slots__ = ()

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.pop(k, None))
        if kw:
            raise TypeError("%s has no field %s" % (type(self).__name__, ", ".join(kw)))

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__))

    def __eq__(self, other):
        return type(other) is type(self) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable


class IdmpInfo(_Record):
    """A stream's idempotent-producer settings and counters."""
    __slots__ = ("duration", "maxsize", "pids_tracked", "iids_tracked", "iids_added", "iids_duplicates")


class StreamInfo(_Record):
    """XINFO STREAM [FULL].  ``idmp`` is None for a stream that never
    used IDMP or XCFGSET.  Without FULL: ``groups`` is a count and
    ``first_entry`` / ``last_entry`` are entries or None; with FULL:
    ``entries`` is a list and ``groups`` a list of GroupDetail."""
    __slots__ = ("length", "nodes", "last_generated_id", "max_deleted_entry_id", "entries_added",
                 "recorded_first_entry_id", "idmp", "groups", "first_entry", "last_entry", "entries", "full")


class GroupInfo(_Record):
    """One group in XINFO GROUPS (``entries_read`` and ``lag`` None when unknown)."""
    __slots__ = ("name", "consumers", "pending", "last_delivered_id", "entries_read", "lag")


class GroupDetail(_Record):
    """One group in XINFO STREAM FULL: ``pending`` rows are (ID, owner
    name or b"" when NACKed, delivery time or 0, delivery count)."""
    __slots__ = ("name", "last_delivered_id", "entries_read", "lag", "pel_count", "nacked_count",
                 "pending", "consumers")


class ConsumerInfo(_Record):
    """One consumer in XINFO CONSUMERS (``inactive`` -1: never active)."""
    __slots__ = ("name", "pending", "idle", "inactive")


class ConsumerDetail(_Record):
    """One consumer in XINFO STREAM FULL: ``pending`` rows are (ID,
    delivery time, delivery count)."""
    __slots__ = ("name", "seen_time", "active_time", "pel_count", "pending")


class GroupWork(_Record):
    """Of some entries of a stream (those a trim or an archive would
    remove), what the group ``group`` has not acknowledged:
    ``undelivered`` (after its last-delivered ID: never read by it) and
    ``pending`` (delivered, not acknowledged)."""
    __slots__ = ("group", "undelivered", "pending")


class TrimPreview(_Record):
    """What trimming one stream would do: ``removed`` of ``length``
    entries (``length`` None: no such stream) by a KEEPREF trim;
    ``unacked``: how many of those some group has not acknowledged (an
    ACKED trim keeps them); ``groups``: a GroupWork for each group with
    such entries among them, in name order."""
    __slots__ = ("length", "removed", "unacked", "groups")


class PendingSummary(_Record):
    """XPENDING key group: ``first`` / ``last`` None and ``consumers``
    empty when nothing is pending; ``consumers`` is [(name, count)]
    for consumers that own entries."""
    __slots__ = ("count", "first", "last", "consumers")


class PendingRow(_Record):
    """XPENDING's extended form (``consumer`` b"" and ``idle`` -1 for a
    NACKed entry)."""
    __slots__ = ("id", "consumer", "idle", "deliveries")
