"""The store at a glance, and what a trim would remove: read-only helpers
for the porcelain (xs info, xs ls, xs trim --dry-run), kept out of the
Txn surface because no Redis command needs them.

``trim_preview(tx, ...)`` runs in a read transaction through the
transaction's read path (the same error handling as every read verb);
``store_overview(store)`` adds what LMDB says about the environment
(map size, pages, reader slots) and the size of data.mdb.  Nothing here
writes, and nothing here knows about output.
"""
import os

from storage import codec
from storage.info import GroupWork, _Record
from storage.verbs.trim import NODE_ENTRIES


class Overview(_Record):
    """xs info.  Sizes are bytes; ``readers`` are the LMDB reader slots
    held by other live processes, ``reading`` those of them inside a
    read transaction now, ``stale_readers`` slots left by processes that
    died (LMDB clears them when a writer needs the space)."""
    __slots__ = ("path", "format", "code_format", "streams", "entries", "file_size", "disk_usage",
                 "used_size", "map_size", "page_size", "last_txn", "max_readers", "readers", "reading",
                 "stale_readers")


class TrimPreview(_Record):
    """What trimming one stream would do: ``removed`` of ``length``
    entries (``length`` None: no such stream) by a KEEPREF trim;
    ``unacked``: how many of those some group has not acknowledged (an
    ACKED trim keeps them); ``groups``: a GroupWork for each group with
    such entries among them, in name order."""
    __slots__ = ("length", "removed", "unacked", "groups")


# ------------------------------------------------------------------ trimming

def trim_preview(tx, name, minid=None, maxlen=None, approx=False):
    """How many entries of stream ``name`` a KEEPREF trim to ``minid``
    (entries with smaller IDs go) and/or ``maxlen`` would remove, with
    ``approx`` as repeated ``~`` trims with no overall limit (whole
    nodes of NODE_ENTRIES from the head, as storage.verbs.trim does).  Both
    criteria remove a head of the stream, so together they remove the
    longer head.  Also counts, group by group, the work among them that
    is not done (TrimPreview.groups)."""
    return tx._read(_trim_preview, name, minid, maxlen, approx)


def _trim_preview(p, name, minid, maxlen, approx):
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


# ------------------------------------------------------------------ the store

def store_overview(store):
    """An Overview of ``store`` (a storage.store.Store)."""
    fmt, streams, entries = store.run(lambda tx: tx._read(_counts))
    env = store.env
    info = env.info()
    stat = env.stat()
    try:
        st = os.stat("data.mdb", dir_fd=store.dir_fd, follow_symlinks=False)
        size, usage = st.st_size, st.st_blocks * 512
    except (OSError, TypeError):
        size = usage = None
    readers, reading, stale = _readers(env)
    return Overview(path=os.path.abspath(store.path), format=fmt, code_format=codec.FORMAT_VERSION,
                    streams=streams, entries=entries, file_size=size, disk_usage=usage,
                    used_size=(info["last_pgno"] + 1) * stat["psize"], map_size=info["map_size"],
                    page_size=stat["psize"], last_txn=info["last_txnid"], max_readers=info["max_readers"],
                    readers=readers, reading=reading, stale_readers=stale)


def _counts(p):
    raw = p.kv.get(p.kv.db(b"meta"), codec.META_FORMAT)
    fmt = codec.decode_count(raw) if raw is not None else None
    streams = entries = 0
    for _, m in p.streams.records():
        streams += 1
        entries += m.length
    return fmt, streams, entries


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
