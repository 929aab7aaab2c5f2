"""Waiting for streams to change (XREAD / XREADGROUP ... BLOCK).

Writers bump a per-stream change counter in the same transaction as the
change (``Txn.flush``); a blocked reader sleeps until one of the counters
it watches moves, then re-checks in a fresh transaction.

This is the portable fallback: a short poll of the counters in a read
transaction (microseconds each).  Waking by inotify on per-stream
notification files replaces the poll where Linux allows it.
"""
import time

from storage import codec

POLL_S = 0.005


def notify(store, names):
    """Called after a commit that changed the streams ``names``.  The
    change counters were already bumped inside the transaction; the
    polling waiter needs nothing more."""


def versions(store, keys):
    """The change counters of ``keys`` (None for never-changed)."""
    def read(tx):
        get = tx.lt.get
        db = tx.db_meta
        return [get(b"v" + codec.name_key(k), db=db) for k in keys]
    return store.transact(read, write=False)


def wait_for_change(store, keys, timeout_s=None):
    """Return when a stream in ``keys`` changed, or after ``timeout_s``
    seconds (None: no limit).  May return early; callers re-check."""
    start = time.monotonic()
    before = versions(store, keys)
    while True:
        if timeout_s is not None:
            left = timeout_s - (time.monotonic() - start)
            if left <= 0:
                return False
            time.sleep(min(POLL_S, left))
        else:
            time.sleep(POLL_S)
        if versions(store, keys) != before:
            return True
