"""What the verbs return when it is more than a number or a name.

* Entries: named tuples.  ``Entry`` (ID and fields) from every verb that
  gives entries -- a range is a storage.codec.Entries, a sequence of
  Entry rows decoded from the store as they are needed --, and
  ``ClaimedEntry`` and ``AutoClaimed`` from the claiming verbs.
* Introspection records (XINFO, XPENDING's summary, a trim's preview):
  dataclasses with slots, one attribute per fact, comparing by value,
  not hashable; a field left out when one is made gets its default
  (None, or the empty name or count).

IDs are ``(ms, seq)``; times are ms.  How a fact is named, ordered or
written in a Redis reply (an ID's ``ms-seq`` text) is the command
line's business (xstream_cli/commands/ and output/), not the engine's.
"""
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Tuple, Union

# Entry, the verbs' row, is a namedtuple defined with the codec that decodes it (off the
# one-shot path's imports: this module's dataclasses are not)
from storage.codec.entries import Entry  # noqa: F401

StreamID = Tuple[int, int]


class ClaimedEntry(NamedTuple):
    """An entry XREADGROUP ... CLAIM delivered: ``idle`` ms since its
    last delivery and ``deliveries`` before this one (0 and 0 for a new
    entry)."""
    id: StreamID
    fields: Optional[List[bytes]]
    idle: int
    deliveries: int


class AutoClaimed(NamedTuple):
    """XAUTOCLAIM: the cursor to go on from (``(0, 0)``: the scan is
    done), the claimed entries (Entry each, or their IDs with JUSTID)
    and the IDs of the pending entries found deleted and dropped."""
    next: StreamID
    claimed: list
    deleted: List[StreamID]


@dataclass(slots=True)
class IdmpInfo:
    """A stream's idempotent-producer settings and counters."""
    duration: Optional[int] = None
    maxsize: Optional[int] = None
    pids_tracked: Optional[int] = None
    iids_tracked: Optional[int] = None
    iids_added: Optional[int] = None
    iids_duplicates: Optional[int] = None


@dataclass(slots=True)
class GroupDetail:
    """One group in XINFO STREAM FULL: ``pending`` rows are (ID, owner
    name or b"" when NACKed, delivery time or 0, delivery count)."""
    name: bytes = b""
    last_delivered_id: Optional[StreamID] = None
    entries_read: Optional[int] = None
    lag: Optional[int] = None
    pel_count: Optional[int] = None
    nacked_count: Optional[int] = None
    pending: Optional[list] = None
    consumers: Optional[list] = None


@dataclass(slots=True)
class StreamInfo:
    """XINFO STREAM [FULL].  ``idmp`` is None for a stream that never
    used IDMP or XCFGSET.  Without FULL: ``groups`` is a count and
    ``first_entry`` / ``last_entry`` are entries or None; with FULL:
    ``entries`` is a list and ``groups`` a list of GroupDetail."""
    length: Optional[int] = None
    nodes: Optional[int] = None
    last_generated_id: Optional[StreamID] = None
    max_deleted_entry_id: Optional[StreamID] = None
    entries_added: Optional[int] = None
    recorded_first_entry_id: Optional[StreamID] = None
    idmp: Optional[IdmpInfo] = None
    groups: Union[None, int, List[GroupDetail]] = None
    first_entry: Optional[tuple] = None
    last_entry: Optional[tuple] = None
    entries: Optional[list] = None
    full: Optional[bool] = None


@dataclass(slots=True)
class GroupInfo:
    """One group in XINFO GROUPS (``entries_read`` and ``lag`` None when unknown)."""
    name: bytes = b""
    consumers: Optional[int] = None
    pending: Optional[int] = None
    last_delivered_id: Optional[StreamID] = None
    entries_read: Optional[int] = None
    lag: Optional[int] = None


@dataclass(slots=True)
class ConsumerInfo:
    """One consumer in XINFO CONSUMERS (``inactive`` -1: never active)."""
    name: bytes = b""
    pending: Optional[int] = None
    idle: Optional[int] = None
    inactive: Optional[int] = None


@dataclass(slots=True)
class ConsumerDetail:
    """One consumer in XINFO STREAM FULL: ``pending`` rows are (ID,
    delivery time, delivery count)."""
    name: bytes = b""
    seen_time: Optional[int] = None
    active_time: Optional[int] = None
    pel_count: Optional[int] = None
    pending: Optional[list] = None


@dataclass(slots=True)
class GroupHealth:
    """One group at a glance (storage.verbs.health: O(log n) a group, no
    walk of its PEL): XINFO GROUPS's facts, plus ``nacked`` (pending
    entries given back by XNACK, unowned), ``oldest_pending_time`` (the
    oldest last delivery, ms, of a pending entry that has an owner;
    None when none has), ``next_id`` (the first entry after
    ``last_delivered_id``; None when none: the group is not behind) and,
    when asked, ``consumer_details`` (ConsumerDetail each, in name
    order, their ``pending`` rows None)."""
    name: bytes = b""
    consumers: Optional[int] = None
    pending: Optional[int] = None
    last_delivered_id: Optional[StreamID] = None
    entries_read: Optional[int] = None
    lag: Optional[int] = None
    nacked: int = 0
    oldest_pending_time: Optional[int] = None
    next_id: Optional[StreamID] = None
    consumer_details: Optional[List[ConsumerDetail]] = None


@dataclass(slots=True)
class GroupWork:
    """Of some entries of a stream (those a trim or an archive would
    remove), what the group ``group`` has not acknowledged:
    ``undelivered`` (after its last-delivered ID: never read by it) and
    ``pending`` (delivered, not acknowledged)."""
    group: bytes = b""
    undelivered: int = 0
    pending: int = 0


@dataclass(slots=True)
class TrimPreview:
    """What trimming one stream would do: ``removed`` of ``length``
    entries (``length`` None: no such stream) by a KEEPREF trim;
    ``unacked``: how many of those some group has not acknowledged (an
    ACKED trim keeps them); ``groups``: a GroupWork for each group with
    such entries among them, in name order."""
    length: Optional[int] = None
    removed: int = 0
    unacked: int = 0
    groups: Optional[List[GroupWork]] = None


@dataclass(slots=True)
class PendingSummary:
    """XPENDING key group: ``first`` / ``last`` None and ``consumers``
    empty when nothing is pending; ``consumers`` is [(name, count)]
    for consumers that own entries."""
    count: int = 0
    first: Optional[StreamID] = None
    last: Optional[StreamID] = None
    consumers: Optional[List[Tuple[bytes, int]]] = None


@dataclass(slots=True)
class PendingRow:
    """XPENDING's extended form (``consumer`` b"" and ``idle`` -1 for a
    NACKed entry)."""
    id: Optional[StreamID] = None
    consumer: bytes = b""
    idle: Optional[int] = None
    deliveries: Optional[int] = None
