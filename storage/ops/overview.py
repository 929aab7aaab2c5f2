"""The store at a glance, and what a trim would remove: read-only helpers
for the porcelain (xs info, xs ls, xs metrics, xs check, xs trim
--dry-run), kept out of the Txn surface because no Redis command needs
them.

THE overview of a store (SPEC section 6): ``snapshot(store, args)``
reads, in ONE read transaction, every number xs ls, xs metrics and
xs check show -- per stream its length, entries added, last entry age,
expiry and dead letters, per group its lag in entries and in seconds,
pending, NACKed and the age of its oldest pending entry, per consumer
its pending count and idle time -- and adds the store's facts
(``store_overview``: data.mdb's size, the bytes in use, the map, the
reader slots).  None of those commands computes a number its own way.
Times are ms; "now" is read once, before the transaction's first verb.

``trim_preview(tx, ...)`` is the transaction's verb of that name
(storage.verbs.preview); the records are storage.info's;
``store_overview(store)`` adds what LMDB says about the environment
(map size, pages, reader slots) and the size of data.mdb.  Nothing here
writes, and nothing here knows about output.
"""
import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from storage import codec
from storage.info import GroupWork, TrimPreview

__all__ = ["ConsumerView", "DeadLetters", "GroupView", "GroupWork", "Overview", "Snapshot", "StreamView",
           "TrimPreview", "is_pattern", "select_streams", "snapshot", "store_overview", "trim_preview"]


@dataclass(slots=True, eq=True)
class Overview:
    """xs info.  Sizes are bytes: ``used_size`` counts the live pages
    (live_bytes), ``free_size`` the pages of the file LMDB reuses (what
    xs compact gives back); ``readers`` are the LMDB reader slots
    held by other live processes, ``reading`` those of them inside a
    read transaction now, ``stale_readers`` slots left by processes that
    died (LMDB clears them when a writer needs the space)."""
    path: str
    format: Optional[int]
    code_format: int
    streams: int
    entries: int
    file_size: Optional[int]
    disk_usage: Optional[int]
    used_size: int
    free_size: int
    map_size: int
    page_size: int
    last_txn: int
    max_readers: int
    readers: int
    reading: int
    stale_readers: int
    fs_available: Optional[int] = None      # bytes the file system still gives this user (statvfs)

    @property
    def map_used_ratio(self):
        """Bytes in use / the map size (the map doubles by itself when a
        write finds it full)."""
        return self.used_size / self.map_size if self.map_size else 0.0

    @property
    def full_ratio(self):
        """How full the store is: bytes in use / the room it can ever
        have (data.mdb's size plus what the file system still gives);
        1.0 is a store whose next growing write fails."""
        if self.file_size is None or self.fs_available is None:
            return self.map_used_ratio
        room = self.file_size + self.fs_available
        return min(1.0, self.used_size / room) if room else 1.0


# ------------------------------------------------------------------ the overview of streams and groups

@dataclass(slots=True, eq=True)
class ConsumerView:
    """One consumer (XINFO CONSUMERS): ``idle_ms`` since its last read or
    claim attempt, ``inactive_ms`` since its last successful one (None:
    never)."""
    name: bytes
    pending: int
    idle_ms: int
    inactive_ms: Optional[int]


@dataclass(slots=True, eq=True)
class GroupView:
    """One consumer group.  ``lag``: entries not yet delivered to it
    (XINFO GROUPS; None when Redis's counters cannot tell); ``lag_ms``:
    the age of the oldest entry not yet delivered (0 when none; IDs are
    ms timestamps, an ID ahead of the clock counts 0); ``pending``: its
    PEL, of which ``nacked`` given back by XNACK (unowned);
    ``oldest_pending_ms``: since the oldest delivery of a pending entry
    that has an owner (PEL delivery times; None when none), the NACKed
    ones have no delivery time; ``consumers``: filled when asked."""
    name: bytes
    consumer_count: int
    pending: int
    last_delivered_id: Optional[Tuple[int, int]]
    entries_read: Optional[int]
    lag: Optional[int]
    lag_ms: int = 0
    nacked: int = 0
    oldest_pending_ms: Optional[int] = None
    consumers: List[ConsumerView] = field(default_factory=list)


@dataclass(slots=True, eq=True)
class DeadLetters:
    """The dead letters ``xs worker --dead-letter`` wrote to one stream
    from one origin stream and group (storage.ops.worker's seven origin
    pairs: xs-stream, xs-id, xs-group, ...)."""
    origin_stream: bytes
    origin_group: bytes
    count: int


@dataclass(slots=True, eq=True)
class StreamView:
    """One stream.  ``last_entry_age_ms``: now less its last entry's ID
    milliseconds (None: no entry; negative for an ID ahead of the
    clock); ``ttl_ms``: until it expires (EXPIRE; None: no TTL);
    ``dead_letters``: when it holds dead letters, one DeadLetters per
    origin stream and group."""
    name: bytes
    length: int
    entries_added: int
    first_id: Optional[Tuple[int, int]]
    last_id: Optional[Tuple[int, int]]
    last_generated_id: Optional[Tuple[int, int]]
    last_entry_age_ms: Optional[int]
    ttl_ms: Optional[int]
    groups: List[GroupView] = field(default_factory=list)
    dead_letters: List[DeadLetters] = field(default_factory=list)

    @property
    def pending(self):
        return sum(g.pending for g in self.groups)

    @property
    def max_lag(self):
        """The largest group lag (None: no group, or a lag unknown)."""
        lags = [g.lag for g in self.groups if g.lag is not None]
        return None if not lags or len(lags) < len(self.groups) else max(lags)

    @property
    def dead_letter_count(self):
        return sum(d.count for d in self.dead_letters)


@dataclass(slots=True, eq=True)
class Snapshot:
    """What ``snapshot`` read: ``now`` (ms), the streams selected, in
    store order, the names given literally that do not exist, and the
    store's facts (None when not asked); ``replication``: the store's
    change log and its replicas (storage.ops.replicate.status), with the
    store's facts, when the store logs (issue 41)."""
    now: int
    streams: List[StreamView]
    missing: List[bytes]
    store: Optional[Overview] = None
    replication: Optional[dict] = None


_GLOB_CHARS = frozenset(b"*?[\\")


def is_pattern(arg):
    """True for a KEYS pattern (it has * ? [ or \\), False for a name."""
    return any(c in _GLOB_CHARS for c in arg)


def select_streams(tx, args):
    """The streams ``args`` (bytes: names or globs) select, in store
    order, each once (no args: all), and the names given literally that
    do not exist."""
    from storage.glob import match
    names = tx.stream_names()
    if not args:
        return names, []
    have = set(names)
    literal = [a for a in args if not is_pattern(a)]
    patterns = [a for a in args if is_pattern(a)]
    missing = list(dict.fromkeys(a for a in literal if a not in have))
    wanted = set(literal)
    chosen = [n for n in names if n in wanted or any(match(p, n) for p in patterns)]
    return chosen, missing


_MAX_ID = (2 ** 64 - 1, 2 ** 64 - 1)
_PAGE = 1000


def snapshot(store, args=(), groups=True, detail=True, consumers=True, dead_letters=True, store_facts=True):
    """THE overview (a Snapshot) of the streams ``args`` select (bytes:
    names or KEYS globs; none: all), in one read transaction of
    ``store``.  ``groups``: read the groups; ``detail``: their lag in
    seconds, NACKed count and oldest pending age (a walk of each
    non-empty PEL); ``consumers``: each group's consumers;
    ``dead_letters``: count the dead letters of the streams that hold
    them; ``store_facts``: the store's Overview too.  A name given
    literally that does not exist is in ``missing`` and nothing else is
    read."""
    now = int(time.time() * 1000)

    def look(tx):
        names, missing = select_streams(tx, list(args))
        if missing:
            return [], missing
        ttl = tx.expires() > 0            # no stream has a TTL: none is asked
        return [_stream(tx, n, now, groups, detail, consumers, dead_letters, ttl) for n in names], []

    streams, missing = store.run(look)
    facts = store_overview(store) if store_facts and not missing else None
    repl = None
    if facts is not None:
        from storage.ops.replicate import status
        repl = status(store)
        repl = repl if repl["logging"] else None
    return Snapshot(now=now, streams=[s for s in streams if s is not None], missing=missing, store=facts,
                    replication=repl)


def _stream(tx, name, now, with_groups, detail, with_consumers, with_dead, with_ttl=True):
    """One StreamView, in a few verbs: XINFO STREAM (its counters, first
    and last entries) and, for its groups, Txn.group_health
    (storage.verbs.health: no walk of any PEL, O(log n) a group): XINFO
    GROUPS's facts, the NACKed count, the oldest owned delivery and the
    first entry after each last-delivered ID (whose ms give the lag in
    seconds)."""
    from storage.errors import RedisError
    from storage.options import StreamInfoOptions
    try:
        info = tx.stream_info(name, StreamInfoOptions())
    except RedisError:            # gone since the names were read (cannot happen in one txn)
        return None
    health = tx.group_health(name, with_consumers) if with_groups and info.groups else []
    first = info.first_entry.id if info.first_entry else None
    last = info.last_entry.id if info.last_entry else None
    expires = tx.expire_time(name) if with_ttl else -1
    s = StreamView(name=name, length=info.length or 0, entries_added=info.entries_added or 0,
                   first_id=first, last_id=last, last_generated_id=info.last_generated_id,
                   last_entry_age_ms=None if last is None else now - last[0],
                   ttl_ms=None if expires < 0 else max(0, expires - now))
    for h in health:
        g = GroupView(name=h.name, consumer_count=h.consumers or 0, pending=h.pending or 0,
                      last_delivered_id=h.last_delivered_id, entries_read=h.entries_read, lag=h.lag)
        if detail:
            if h.next_id is not None:
                g.lag_ms = max(0, now - h.next_id[0])
            g.nacked = h.nacked
            t = h.oldest_pending_time
            g.oldest_pending_ms = None if t is None else max(0, now - t)
        if with_consumers:
            g.consumers = [ConsumerView(name=c.name, pending=c.pel_count or 0,
                                        idle_ms=max(0, now - (c.seen_time or 0)),
                                        inactive_ms=None if c.active_time == -1 else max(0, now - (c.active_time or 0)))
                           for c in h.consumer_details or ()]
        s.groups.append(g)
    if with_dead and (_is_dead_letter(info.first_entry) or _is_dead_letter(info.last_entry)):
        s.dead_letters = _count_dead_letters(tx, name)
    return s


def _after(i):
    ms, seq = i
    return (ms, seq + 1) if seq < 2 ** 64 - 1 else (ms + 1, 0)


def _is_dead_letter(entry):
    from storage.ops.worker import ORIGIN_NAMES
    if not entry:
        return False
    f = entry[1]
    n = len(ORIGIN_NAMES)
    return f is not None and len(f) >= 2 * n and tuple(f[0:2 * n:2]) == ORIGIN_NAMES


def _count_dead_letters(tx, name):
    """Dead letters per (origin stream, origin group), walking the
    stream a page at a time."""
    from storage.options import RangeOptions
    counts: Dict[Tuple[bytes, bytes], int] = {}
    start = (0, 0)
    while True:
        page = tx.range(name, RangeOptions(start, _MAX_ID, _PAGE, False)) or []
        for e in page:
            if _is_dead_letter(e):
                k = (e[1][1], e[1][5])
                counts[k] = counts.get(k, 0) + 1
        if len(page) < _PAGE:
            break
        start = _after(page[-1].id)
    return [DeadLetters(origin_stream=s, origin_group=g, count=n) for (s, g), n in sorted(counts.items())]


# ------------------------------------------------------------------ trimming

def trim_preview(tx, name, minid=None, maxlen=None, approx=False):
    """How many entries of stream ``name`` a KEEPREF trim to ``minid``
    (entries with smaller IDs go) and/or ``maxlen`` would remove, with
    ``approx`` as repeated ``~`` trims with no overall limit (whole
    nodes of NODE_ENTRIES from the head, as storage.verbs.trim does).  Both
    criteria remove a head of the stream, so together they remove the
    longer head.  Also counts, group by group, the work among them that
    is not done (TrimPreview.groups)."""
    return tx.trim_preview(name, minid, maxlen, approx)


# ------------------------------------------------------------------ the store

def store_overview(store):
    """An Overview of ``store`` (a storage.store.Store)."""
    fmt, streams, entries = store.run(lambda tx: tx.counts())
    env = store.env
    info = env.info()
    stat = env.stat()
    try:
        st = os.stat("data.mdb", dir_fd=store.dir_fd, follow_symlinks=False)
        size: int | None = st.st_size
        usage: int | None = st.st_blocks * 512
    except (OSError, TypeError):
        size = usage = None
    readers, reading, stale = _readers(env)
    try:
        vfs = os.statvfs(store.dir_fd)
        avail: int | None = vfs.f_bavail * vfs.f_frsize
    except (OSError, TypeError):
        avail = None
    high = (info["last_pgno"] + 1) * stat["psize"]     # the file's pages ever used, live or free
    live = min(high, live_bytes(env))
    return Overview(path=os.path.abspath(store.path), format=fmt, code_format=codec.FORMAT_VERSION,
                    streams=streams, entries=entries, file_size=size, disk_usage=usage,
                    used_size=live, free_size=max(0, high - live), map_size=info["map_size"],
                    page_size=stat["psize"], last_txn=info["last_txnid"], max_readers=info["max_readers"],
                    readers=readers, reading=reading, stale_readers=stale, fs_available=avail)


def live_bytes(env):
    """Bytes of the live pages of ``env`` (branch, leaf and overflow pages
    of every database, and the two meta pages): what a compacting copy
    takes (xs compact), and what xs info calls in use; the rest of the
    file is free pages LMDB reuses."""
    import lmdb
    st = env.stat()
    psize = st["psize"]

    def pages(s):
        return s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]
    total = 2 + pages(st)
    with env.begin() as t:
        names = [k for k, _ in t.cursor()]
    for name in names:
        try:
            db = env.open_db(name, create=False)
        except lmdb.Error:
            continue
        with env.begin() as t:
            total += pages(t.stat(db))
    return total * psize


def _readers(env):
    """(live, reading, stale) reader slots of other processes, from
    LMDB's reader table (``pid thread txnid`` a line; txnid ``-`` when
    the slot is idle)."""
    me = os.getpid()
    live = reading = stale = 0
    for line in env.readers().splitlines()[1:]:
        parts = line.split()
        if len(parts) != 3 or not parts[0].isdigit():
            continue
        pid = int(parts[0])
        if pid == me:
            continue
        if not _alive(pid):
            stale += 1
            continue
        live += 1
        if parts[2] != "-":
            reading += 1
    return live, reading, stale


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return True
    return True
