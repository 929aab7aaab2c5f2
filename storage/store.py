"""The store: one LMDB environment, opened once per process.

``Store.run(fn, write)`` runs ``fn(txn)`` in one LMDB transaction
(storage.txn.Txn) and commits it if ``fn`` returns: every command (or,
in script mode, every batch of commands) is all or nothing.  The map
grows by itself: a write that finds the map full is aborted, the map
doubled, and the work run again from the start, so callers never see
"map full".  A process whose map was outgrown by another process adopts
the new size and retries.

Opening a store checks its format version (storage.codec): a newer one
is refused; an older one is migrated (storage.migrate) in the same
write transaction that opens it, under LMDB's write lock, so it happens
once, whoever opens the store first.

Opening it -- the directory and every file in it checked and private,
the store lock, data.mdb and lock.mdb made complete, the LMDB settings
(chosen in one place), the environments a forked child inherits -- is
storage.opening's (its docstring: "Private files", "The store lock",
"After fork()"); the rule and the locks themselves, storage.files'.
"""
import _thread
import os
import time

import lmdb

from storage import codec
from storage.codec.changes import META_CHANGELOG
from storage.files import (  # noqa: F401 (re-exported: storage.store's names before storage.files)
    _O_DIR,
    NOTIFY_DIR,
    STORE_LOCK,
    NeedsWriteAccess,
    NoSuchStore,
    NotAStore,
    ReadOnlyStore,
    StoreError,
    UnsafeEntry,
    aside_requested,
    hold_write,
    make_private_file,
    open_private_dir,
    release_write,
    take_store_lock,
)
from storage.opening import (  # noqa: F401 (re-exported: storage.store's names before storage.opening)
    _INHERITED,
    INITIAL_MAP,
    MAX_DBS,
    MAX_READERS,
    _come_back,
    _disk_full,
    _lmdb_reason,
    _open_env,
    _reason,
    check_entry,
    check_notify_dir,
)
from storage.txn import Retry, StoreFailure, Txn

if False:  # typing only (not imported at run time)
    from typing import Any, Callable, Dict, Literal, Optional, TypeVar

    T = TypeVar("T")

READER_CHECK_S = 10.0     # a long-running process clears dead readers' slots this often


def _notify(store: "Store", names: "Any") -> None:
    """storage.blocking.notify, imported by the first commit that changed
    a stream: a read never needs the module."""
    from storage.blocking import notify
    notify(store, names)


class Store:
    """An xs store on disk: ``Store(path)``; then ``run`` or the
    ``read()`` / ``write()`` context managers giving a ``Txn``.

    ``dir_fd``: the store directory, opened and checked (kept open until
    ``close``); ``root``: a path to that same directory (/proc/self/fd/N
    where /proc exists, else ``path``)."""

    def __init__(self, path: str, durable: bool = True, readonly: bool = False, create: bool = True,
                 shared_lock: bool = True,
                 upgrade_notice: "Optional[Callable[[int, int, int], object]]" = None) -> None:
        self.path = path
        # fn(old format, new format, entries) called once before an older
        # store is upgraded (a big one takes a while: the CLI says so)
        self._upgrade_notice = upgrade_notice
        self.readonly = readonly
        self.durable = durable
        self.dir_fd: Optional[int] = None
        self.lock_fd: Optional[int] = None     # <store>/lock, held shared while open (see take_store_lock)
        self.notify_fd: Optional[int] = None   # <store>/notify, once a commit opened it (storage.blocking.notify)
        self._shared_lock = shared_lock
        self.root: str = path
        self._broken: Optional[str] = None     # why the environment had to be closed
        self.why_read_only: Optional[str] = None  # why this user cannot write (ReadOnlyStore.reason; by the opener)
        self._readers_checked = 0.0
        self.created = False      # this open made the store (there was no data.mdb)
        self.pid = os.getpid()    # the process whose environment this is (see "After fork()")
        self._writing: list = [_thread.allocate_lock(), None, 0]   # the write lock: gate, owner thread, depth
        self.env = _open_env(self, create and not readonly)
        self.dbs: Dict[bytes, Any] = {}       # name -> LMDB database handle (codec.DATABASES)
        while True:
            try:
                self._open_dbs()
                self.check_readers(force=True)
                return
            except (lmdb.MapFullError, lmdb.MapResizedError) as grown:
                # full: grow the map; resized: another process grew it
                # between our open and our first transaction -- adopt it
                try:
                    self._grow() if isinstance(grown, lmdb.MapFullError) else self._set_mapsize(0)
                except StoreFailure as e:
                    self.close()
                    raise StoreError("cannot open store %s: %s" % (path, e))
            except lmdb.NotFoundError:
                self.close()
                raise (NeedsWriteAccess if readonly else StoreError)("cannot open store %s: not an xs store" % path)
            except StoreError:
                self.close()
                raise
            except lmdb.Error as e:
                self.close()
                full = _disk_full(e, path)
                if full:
                    raise StoreError("%s while opening store %s (nothing was written)" % (full, path))
                raise StoreError("cannot open store %s: %s" % (path, _lmdb_reason(e)))

    def _open_dbs(self):
        """Open the named databases; create, check or migrate the format."""
        if self.readonly:
            # handles opened in a read transaction die with it: open them
            # outside any transaction
            meta = self.env.open_db(b"meta", create=False)
            with self.env.begin() as t:
                self._check_format(t.get(codec.META_FORMAT, db=meta), writable=False)
            for name in codec.DATABASES:
                self.dbs[name] = self.env.open_db(name, create=False)
            return
        hold_write(self)           # xs's write lock before LMDB's, as every writer (an upgrade may be long)
        try:
            self._open_dbs_writable()
        finally:
            release_write(self)

    def _open_dbs_writable(self):
        with self.env.begin(write=True) as t:
            for name in codec.DATABASES:
                self.dbs[name] = self.env.open_db(name, txn=t)
            meta = self.dbs[b"meta"]
            raw = t.get(codec.META_FORMAT, db=meta)
            if raw is None:
                if t.stat(self.dbs[b"keys"])["entries"]:
                    raise StoreError("cannot open store %s: it has streams but no format version" % self.path)
                t.put(codec.META_FORMAT, codec.encode_count(codec.FORMAT_VERSION), db=meta)
            elif self._check_format(raw, writable=True) < codec.FORMAT_VERSION:
                from storage.migrate import migrate
                notice, self._upgrade_notice = self._upgrade_notice, None     # once, even if the open is retried
                migrate(self.env, t, self.dbs, int(raw), notice)

    def _check_format(self, raw, writable):
        """The store's format version, if this code can use it."""
        try:
            version = int(raw) if raw is not None else codec.FORMAT_VERSION
        except ValueError:
            raise StoreError("cannot open store %s: bad format version %r" % (self.path, raw))
        if version > codec.FORMAT_VERSION:
            raise StoreError("store %s has format %d; this xs reads format %d or older (upgrade xs)"
                             % (self.path, version, codec.FORMAT_VERSION))
        if version < codec.OLDEST_FORMAT:
            raise StoreError("store %s has format %d, older than any this xs can upgrade" % (self.path, version))
        if version < codec.FORMAT_VERSION and not writable:
            raise NeedsWriteAccess("store %s has format %d; open it once with write access to upgrade it to "
                             "format %d" % (self.path, version, codec.FORMAT_VERSION))
        return version

    def check_readers(self, force: bool = False) -> int:
        """Free the reader slots of processes that died in a read
        transaction (LMDB's ``reader_check``) and return how many were
        freed.  A killed reader's slot otherwise stays while any process
        keeps the store open, and pins every page freed since its
        snapshot: the file would grow without bound.  Done when a store
        is opened for writing and, in a long-running process, at most
        every READER_CHECK_S seconds (``Store.run`` of a write, blocked
        waits); a read-only open leaves it to writers."""
        if self.readonly or self._broken is not None or self.dir_fd is None:
            return 0
        now = time.monotonic()
        if not force and now - self._readers_checked < READER_CHECK_S:
            return 0
        self._readers_checked = now
        try:
            return self.env.reader_check()
        except lmdb.Error:
            return 0

    # ---------------------------------------------------------- transactions

    def run(self, fn: "Callable[[Txn], T]", write: bool = False, savepoints: bool = False) -> "T":
        """Run ``fn(txn)`` in one transaction and return its result;
        commit if ``write`` and ``fn`` returned, abort otherwise.  With
        ``savepoints`` every write verb is atomic on its own (script
        mode).  Run again from scratch if the map must grow.  A write
        holds xs's write lock throughout (``hold_write``)."""
        if self.pid != os.getpid():
            self._reopen_after_fork()
        if not write:
            return self._run(fn, False, savepoints)
        if self.readonly:
            raise StoreFailure(self._read_only_failure())
        if time.monotonic() - self._readers_checked >= READER_CHECK_S:
            self.check_readers()
        hold_write(self)
        try:
            return self._run(fn, True, savepoints)
        finally:
            release_write(self)

    def _run(self, fn: "Callable[[Txn], T]", write: bool, savepoints: bool) -> "T":
        while True:
            try:
                lt = self.env.begin(write=write)
            except lmdb.MapResizedError:
                self._set_mapsize(0)
                continue
            except lmdb.Error as e:
                raise StoreFailure(self._failure(e, write, savepoints))
            lt = _logging(self, lt) if write else lt     # the change log (issue 41): one get
            tx = Txn(self, lt, write, savepoints)
            try:
                result = fn(tx)
                tx.check_committable()
                if write:
                    lt.commit()
                else:
                    lt.abort()
            except Retry as e:
                lt.abort()
                self._grow() if e.grow else self._set_mapsize(0)
                continue
            except lmdb.MapFullError:
                lt.abort()
                self._grow()
                continue
            except lmdb.MapResizedError:
                lt.abort()
                self._set_mapsize(0)
                continue
            except (lmdb.Error, StoreFailure) as e:
                lt.abort()
                raise StoreFailure(self._failure(e, write, savepoints))
            except BaseException:
                lt.abort()
                raise
            if tx.changed:
                _notify(self, tx.changed)
            return result

    def _failure(self, e, write, batch):
        """What to tell about a transaction that failed with ``e`` (an
        I/O error, a full disk): it was rolled back, so nothing of it
        was written (``batch``: script mode's batch; None: a library
        user's transaction)."""
        if self._broken is not None:
            return self._broken
        reason = _lmdb_reason(e) if isinstance(e, lmdb.Error) else str(e)
        if not write:
            return "the store %s failed: %s" % (self.path, reason)
        lost = {False: "nothing was written by this command", True: "nothing since the last reply was written",
                None: "the transaction was rolled back"}[batch]
        full = _disk_full(e, self.path)
        if full:
            return "%s while writing %s (%s)" % (full, self.path, lost)
        return "the store %s failed: %s (%s)" % (self.path, reason, lost)

    def _read_only_failure(self):
        return "cannot write to store %s: %s (nothing was written)" % (
            self.path, self.why_read_only or "it is open read-only")

    def read(self) -> "_TxnContext":
        """``with store.read() as tx:`` a read transaction."""
        return _TxnContext(self, False)

    def write(self) -> "_TxnContext":
        """``with store.write() as tx:`` a write transaction, committed at
        the end of the block unless it raises; each verb in it is atomic
        on its own (a verb that raises changes nothing)."""
        return _TxnContext(self, True)

    def _grow(self):
        self._set_mapsize(self.env.info()["map_size"] * 2)

    def _short_of_room(self) -> bool:
        """Whether the pages in use (as of the last commit) fill more than
        half of this process's map."""
        info = self.env.info()
        return (info["last_pgno"] + 1) * self.env.stat()["psize"] * 2 > info["map_size"]

    def _set_mapsize(self, size):
        """Map ``size`` bytes of the store (0: the size another process
        chose).  If that fails (address space exhausted), LMDB has
        already unmapped the store: the environment is closed, and this
        and every later transaction fail with a message."""
        try:
            self.env.set_mapsize(size)
        except lmdb.Error as e:
            self._broken = ("cannot map store %s%s: %s (nothing was written by this command)"
                            % (self.path, " at %d MiB" % (size >> 20) if size else "", _lmdb_reason(e)))
            self.env.close()
            raise StoreFailure(self._broken)

    def _reopen_after_fork(self) -> None:
        """First use in a forked child of a store its parent opened: keep
        the parent's environment (never closed here), open the store's
        files anew for this process (see "After fork()")."""
        _INHERITED.append(self.env)
        self._close_dir()         # our copies; the parent's descriptors (and its flock) stay
        self.pid = os.getpid()
        self._writing = [_thread.allocate_lock(), None, 0]   # the parent's threads are not here
        self.dbs = {}
        self.env = _open_env(self, False)
        self._open_dbs()

    # ------------------------------------------------- stepping aside (xs compact)

    def aside_requested(self) -> bool:
        """Whether a compaction asks this process to step aside (see
        storage.ops.compact, "Long-running processes"): one fcntl."""
        fd = self.lock_fd
        return fd is not None and self.pid == os.getpid() and aside_requested(fd)

    def step_aside(self) -> bool:
        """If a compaction asks for it, let go of the store while it runs
        and come back to the new data.mdb: close the environment, give
        back the store lock, wait until the compaction is over (or gone),
        take the lock again and open the environment anew.  The object
        stays the same (callers keep their references); the directory
        stays open (its descriptor, ``root``, watches on notify/ stay
        valid); ``env`` and ``dbs`` are new.  False if nothing was asked.

        Only at a safe point: no transaction of this process open on this
        store (storage.blocking.wait_until between two attempts; under xs
        serve, with the StoreLock held).  If the store cannot be opened
        again, StoreFailure with the reason, and every later transaction
        fails with it.  Interrupted (a signal) while waiting, it comes
        back at once, then lets the interruption go on."""
        if not self.aside_requested():
            return False
        self.env.close()
        lock, self.lock_fd = self.lock_fd, None
        if lock is not None:
            os.close(lock)          # the shared store lock, and this process's POSIX locks on the file
        self.dbs = {}
        self._broken = "the store %s was closed for a compaction and could not be opened again" % self.path
        try:
            _come_back(self, after_aside=True)
        except BaseException as e:
            if not isinstance(e, (StoreError, lmdb.Error, OSError, UnsafeEntry)):
                try:                # interrupted while waiting: back at once (a compaction waits for us)
                    self.env.close()
                    _come_back(self, after_aside=False)
                except Exception:
                    pass
                raise
            try:
                self.env.close()    # a new environment opened before the failure
            except Exception:
                pass
            lock, self.lock_fd = self.lock_fd, None
            if lock is not None:
                os.close(lock)
            self._broken = "%s: %s" % (self._broken, _reason(e, self.path))
            raise StoreFailure(self._broken)
        return True

    def close(self) -> None:
        """Close the environment, then give back the store lock and the
        directory.  In a forked child, for a store its parent opened: let
        go of the files only (see "After fork()")."""
        if self.pid != os.getpid():
            _INHERITED.append(self.env)
        else:
            self.env.close()
        self._close_dir()

    def notify_dir(self) -> "Optional[int]":
        """The notification directory (storage.blocking.notify), open, or
        None while no reader made it: kept open from the commit that first
        found it until ``close`` (a server at its descriptor limit needs
        none a commit), opened anew once removed (``fstat``: no link left)."""
        d = self.notify_fd
        if d is not None:
            try:
                if os.fstat(d).st_nlink:
                    return d
                os.close(d)
            except OSError:
                pass
            self.notify_fd = None
        if self.dir_fd is not None:        # (None: closed)
            try:
                self.notify_fd = os.open(NOTIFY_DIR, _O_DIR | os.O_NOFOLLOW, dir_fd=self.dir_fd)
            except OSError:
                pass
        return self.notify_fd

    def _close_dir(self):
        nfd, self.notify_fd = self.notify_fd, None
        if nfd is not None:
            os.close(nfd)
        lock, self.lock_fd = self.lock_fd, None
        if lock is not None:
            os.close(lock)          # releases the shared store lock (after the environment is closed)
        fd, self.dir_fd = self.dir_fd, None
        if fd is not None:
            os.close(fd)


class _TxnContext:
    """``with store.write() as tx:`` for library users.  Its block cannot
    be run again, as ``run`` runs its function again when the map is
    full, so a write block begins with at least half of the map free
    (``Store._short_of_room``: the headroom a store is opened with),
    however full another process's writes left it; a block that fills
    it all the same raises ``Retry`` ("map full") with nothing written
    and the map doubled, so that the block can be run again."""

    def __init__(self, store: Store, write: bool) -> None:
        self.store, self.write = store, write

    def __enter__(self) -> Txn:
        if self.store.pid != os.getpid():
            self.store._reopen_after_fork()
        if self.write and self.store.readonly:
            raise StoreFailure(self.store._read_only_failure())
        if self.write:
            hold_write(self.store)
        try:
            while True:
                try:
                    lt = self.store.env.begin(write=self.write)
                    if self.write and self.store._short_of_room():
                        lt.abort()                 # (no transaction open: the map may change)
                        self.store._grow()
                        continue
                    self.lt = _logging(self.store, lt) if self.write else lt
                    break
                except lmdb.MapResizedError:       # another process grew the map
                    self.store._set_mapsize(0)
        except BaseException:
            if self.write:
                release_write(self.store)
            raise
        self.tx = Txn(self.store, self.lt, self.write, savepoints=self.write)
        return self.tx

    def __exit__(self, et: object, ev: object, tb: object) -> "Literal[False]":
        try:
            if et is None and self.write:
                self.tx.check_committable()
                try:
                    self.lt.commit()
                except lmdb.Error as e:
                    raise StoreFailure(self.store._failure(e, True, None))
                if self.tx.changed:
                    _notify(self.store, self.tx.changed)
            else:
                self.lt.abort()
                if isinstance(ev, Retry) and ev.grow:
                    self.store._grow()             # for the block's next run
        finally:
            if self.write:
                release_write(self.store)
        return False


def _logging(store: Store, lt: "Any") -> "Any":
    """Write transaction ``lt``, logged (storage.changelog.Logged) when the
    store logs its changes for a replica: meta ``changelog`` read in
    ``lt``, one get (all a store without replicas pays)."""
    raw = lt.get(META_CHANGELOG, db=store.dbs[b"meta"])
    if raw is None:
        return lt
    from storage.changelog import logged
    return logged(store, lt, raw)
