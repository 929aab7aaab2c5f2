"""The store shared by the threads of one process (``StoreLock``): its
transactions serialised by one lock, xs's write lock taken before it.

LMDB may only resize its map when no transaction of the process is
open, so every transaction of xs serve's threads (the event loop's, the
engine thread, the readers' thread, blocked reads' re-checks) and of the
in-process client runs under this one lock; a compaction's step aside
takes it too.  The order, always: xs's write lock, this lock, LMDB's
(xstream_cli.server.engine says where each thread runs).

Who imports it: xstream_cli.server.engine (and, through it, xs web's
server and the in-process client).
"""
import threading

from storage.store import Store, hold_write, release_write


class StoreLock:
    """The store with ``run`` serialised across this process's threads
    (everything else passes through)."""

    def __init__(self, store):
        self._store = store
        self.lock = threading.RLock()
        # xs's write lock (storage.store.hold_write) is taken before this
        # lock, never under it: a thread waiting for another process's
        # writer then holds nothing the loop's reads need.  (The in-process
        # client's store made on first write takes it inside, as any Store.)
        self._writes = isinstance(store, Store)

    def run(self, fn, write=False, savepoints=False):
        if write:
            self.hold_write()
        try:
            with self.lock:
                return self._store.run(fn, write=write, savepoints=savepoints)
        finally:
            if write:
                self.release_write()

    def hold_write(self, wait=True):
        """Hold xs's write lock on the store (storage.store.hold_write);
        False without ``wait`` if another thread or process holds it."""
        return hold_write(self._store, wait) if self._writes else True

    def release_write(self):
        if self._writes:
            release_write(self._store)

    def step_aside(self):
        """Let go of the store while a compaction runs (storage.store.Store.
        step_aside), with no other thread of this process in a transaction
        meanwhile: they wait for the lock, then use the store opened again."""
        with self.lock:
            return self._store.step_aside()

    def check_readers(self, force=False):
        """Store.check_readers, never while another thread closes the
        environment (a wait's look, storage.blocking; skipped if busy)."""
        if not self.lock.acquire(blocking=False):
            return 0
        try:
            return self._store.check_readers(force)
        finally:
            self.lock.release()

    def __getattr__(self, name):
        return getattr(self._store, name)
