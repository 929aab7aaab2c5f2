"""The store at a glance, and what a trim would remove: read-only helpers
for the porcelain (xs info, xs ls, xs trim --dry-run), kept out of the
Txn surface because no Redis command needs them.

``trim_preview(tx, ...)`` is the transaction's verb of that name
(storage.verbs.preview); the records are storage.info's;
``store_overview(store)`` adds what LMDB says about the environment
(map size, pages, reader slots) and the size of data.mdb.  Nothing here
writes, and nothing here knows about output.
"""
import os
from dataclasses import dataclass
from typing import Optional

from storage import codec
from storage.info import GroupWork, TrimPreview

__all__ = ["GroupWork", "Overview", "TrimPreview", "store_overview", "trim_preview"]


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
    high = (info["last_pgno"] + 1) * stat["psize"]     # the file's pages ever used, live or free
    live = min(high, live_bytes(env))
    return Overview(path=os.path.abspath(store.path), format=fmt, code_format=codec.FORMAT_VERSION,
                    streams=streams, entries=entries, file_size=size, disk_usage=usage,
                    used_size=live, free_size=max(0, high - live), map_size=info["map_size"],
                    page_size=stat["psize"], last_txn=info["last_txnid"], max_readers=info["max_readers"],
                    readers=readers, reading=reading, stale_readers=stale)


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
