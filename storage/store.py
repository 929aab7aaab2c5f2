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

LMDB settings, chosen here and only here:
  sync=True, metasync=True  durable on commit (the default).  With
                            ``durable=False`` (``--no-sync`` / XS_NO_SYNC)
                            commits skip fsync: a crash of the *machine*
                            may lose the last commits, never corrupt the
                            store; a crash of xs alone loses nothing.
  writemap=False            a stray pointer cannot scribble on the file,
                            and nested transactions (savepoints) work.
  lock=True                 many processes share one store.
  max_dbs                   the fixed set in ``codec.DATABASES``.
  map_size                  1 GiB of address space to start (the file
                            grows only as data is written), doubled on
                            demand.
  max_readers               510 (a 32 KiB lock file).

Private files (SPEC §4).  A store is its owner's alone: the directory and
every directory in it are 0700, every file 0600, whatever the umask
(files are created by xs with O_EXCL | O_NOFOLLOW and their mode set
exactly; LMDB only ever opens files that already exist).  Opening a
store refuses, with a one-line reason, a store directory owned by
another user, and any entry inside it (data.mdb, lock.mdb, notify/, its
files and queue directories) that is a symbolic link, a hard link, not
of the expected kind or owned by another user; nothing inside a store
is ever reached through a link.  Once the directory is checked to be
ours and made 0700, nobody else can add, remove or replace entries in
it, so checks made at open stay true.  A store made by an older xs
(modes from the umask) is made private when it is opened.

The path the user gives is the user's own business: its parent
directories may be symbolic links (/tmp -> /private/tmp), and so may the
store directory itself, if the link belongs to the user.  LMDB opens
the files through /proc/self/fd/N, the directory that was checked, so
the path cannot be switched between the check and the open.

The store lock.  Every Store holds ``<store>/lock`` (0600) with a shared
flock(2) from before it looks at data.mdb until its environment is
closed (read-only opens too); ``xs compact`` (storage.ops.compact) holds it
exclusively while it replaces data.mdb with a compacted copy, so no
process ever keeps writing to a replaced file.  An open waits while a
compaction runs.  Cost: one open and two lock calls per open.

Creating a store cannot leave half a store behind, nor die of SIGBUS on
a full disk: data.mdb is made complete (its named databases and format
version committed) under a temporary name by a lock-free LMDB
environment, and lock.mdb is allocated in full (posix_fallocate; LMDB
would extend it sparsely and then write it through a shared mapping,
which a full file system answers with SIGBUS); each is then hard-linked
into place, so another process sees either no file or a complete one.
A full disk is reported as such ("no space left on device while ...");
LMDB reports a short write as EIO, which counts as a full disk when the
file system has next to no space left.

After fork().  A child inherits its parent's environments, but LMDB's
locks (fcntl, per process) and reader slots (marked with the parent's
pid) do not come along: the child must open the store anew and must
never close an inherited environment, because closing aborts its
transactions, and an aborted read transaction frees the *parent's*
reader slot in the shared lock file (a writer may then reuse the pages
the parent is reading).  So a Store remembers the pid that opened it:
``close`` in another process lets go of its files and leaves the
environment alone (referenced in ``_INHERITED``; py-lmdb's own
finaliser does nothing in a process that did not open it).  And
py-lmdb 3 refuses to open "an environment already open in this
process", keyed by the files' device and inode in a set that fork
copies; in a forked process the new environment is registered under
keys qualified by the child's pid (``_open_env``), which keeps the
guard for two opens in the child itself.
"""
import _thread
import os
import time

import lmdb

from storage import codec
from storage.blocking import notify
from storage.codec.changes import META_CHANGELOG
from storage.files import (  # noqa: F401 (re-exported: storage.store's names before storage.files)
    MAX_READERS,
    STORE_LOCK,
    NeedsWriteAccess,
    NoSuchStore,
    NotAStore,
    ReadOnlyStore,
    StoreError,
    UnsafeEntry,
    _disk_full,
    _fill_lock,
    _make_file,
    _mark_writer,
    _no_writer,
    _pinned,
    _read_only,
    _store_dir,
    aside_requested,
    check_entry,
    check_notify_dir,
    hold_write,
    make_private_file,
    open_private_dir,
    release_write,
    take_store_lock,
)
from storage.txn import Retry, StoreFailure, Txn

_INHERITED: "list" = []        # environments a forked child got from its parent: never closed here
_forked = False                # this process is a fork() child (of a process that may hold stores)
_fork_open = _thread.allocate_lock()   # _thread: threading is 2 ms off the one-shot path


def _after_fork() -> None:
    global _forked, _fork_open
    _forked = True
    _fork_open = _thread.allocate_lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _lmdb_open(path: str, **kwargs: "Any") -> "Any":
    """``lmdb.open``; in a forked child, beside the environments of the
    same files inherited from the parent (see the module's text)."""
    if not _forked:
        return lmdb.open(path, **kwargs)
    try:
        from lmdb import _envid  # py-lmdb >= 3: the guard's keys
    except ImportError:
        return lmdb.open(path, **kwargs)      # older py-lmdb: no guard across fork
    with _fork_open:
        keys = _envid.env_keys
        pid = os.getpid()
        _envid.env_keys = lambda p, subdir: tuple(("forked", pid) + k for k in keys(p, subdir))
        try:
            return lmdb.open(path, **kwargs)
        finally:
            _envid.env_keys = keys

if False:  # typing only (not imported at run time)
    from typing import Any, Callable, Dict, Literal, Optional, TypeVar

    T = TypeVar("T")

INITIAL_MAP = 1 << 30
MAX_DBS = len(codec.DATABASES) + 2
READER_CHECK_S = 10.0     # a long-running process clears dead readers' slots this often
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


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
        self._shared_lock = shared_lock
        self.root: str = path
        self._broken: Optional[str] = None     # why the environment had to be closed
        self.why_read_only: Optional[str] = None  # why this user cannot write (ReadOnlyStore.reason; by the opener)
        self._readers_checked = 0.0
        self.created = False      # this open made the store (there was no data.mdb)
        self.pid = os.getpid()    # the process whose environment this is (see "After fork()")
        self._writing: list = [_thread.allocate_lock(), None, 0]   # the write lock: gate, owner thread, depth
        self.env = self._open_env(create and not readonly)
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

    def _open_env(self, create):
        """Open (with ``create``, make) the store directory and its files,
        checked and private, then the LMDB environment on them."""
        path = self.path
        made = False          # this call made the store directory
        creating = False      # ... or is making data.mdb
        try:
            self.dir_fd, made = _store_dir(path, create, not self.readonly)
            fd = self.dir_fd
            self.root = _pinned(fd, path)
            if self._shared_lock:
                self.lock_fd = take_store_lock(fd)
            strict = not self.readonly
            data = check_entry(fd, "data.mdb", "data.mdb", "file", strict)
            lock = check_entry(fd, "lock.mdb", "lock.mdb", "file", strict)
            check_notify_dir(fd, strict)
            why = _read_only(fd) if data is not None else None
            if why and not self.readonly:
                raise ReadOnlyStore(path, why)
            lockless = bool(why)
            if lockless:
                _no_writer(self.lock_fd, path, why)
            elif not self.readonly:
                _mark_writer(self.lock_fd)
            if create and data is None:
                creating = True
                _make_file(fd, "data.mdb", self._fill_data, self.durable)
                self.created = True
            if lock is None and (create or data is not None):
                try:
                    _make_file(fd, "lock.mdb", _fill_lock, self.durable)
                except OSError:
                    if create:
                        raise
            return _lmdb_open(self.root, map_size=_headroom(data), max_dbs=MAX_DBS, sync=self.durable,
                             metasync=self.durable, writemap=False, lock=not lockless, readonly=self.readonly,
                             create=create, max_readers=MAX_READERS, mode=0o600)
        except BaseException as e:
            self._close_dir()
            if made:
                try:
                    os.rmdir(path)      # only if still empty: nothing is left behind
                except OSError:
                    pass
            if isinstance(e, (StoreError, KeyboardInterrupt, SystemExit)):
                raise
            raise self._open_error(e, made or creating)

    def _open_error(self, e, creating):
        """The StoreError for a failure ``e`` while opening the store."""
        path = self.path
        if isinstance(e, UnsafeEntry):
            return StoreError("refusing to open store %s: %s" % (path, e))
        full = _disk_full(e, path)
        if full:
            return StoreError("%s while %s store %s (nothing was written)"
                              % (full, "creating" if creating else "opening", path))
        if isinstance(e, NotADirectoryError):
            return StoreError("cannot open store %s: a path component is not a directory" % path)
        if isinstance(e, PermissionError):
            return StoreError("cannot open store %s: permission denied" % path)
        if isinstance(e, lmdb.Error):
            return StoreError("cannot open store %s: %s" % (path, _lmdb_reason(e)))
        if isinstance(e, OSError):
            return StoreError("cannot open store %s: %s" % (path, e.strerror or e))
        return e

    def _fill_data(self, fd, name):
        """Make the temporary file ``name`` a complete, empty store:
        its named databases and its format version, committed."""
        env = lmdb.open("%s/%s" % (self.root, name), subdir=False, lock=False, map_size=INITIAL_MAP,
                        max_dbs=MAX_DBS, sync=self.durable, metasync=self.durable, writemap=False,
                        mode=0o600)
        try:
            with env.begin(write=True) as t:
                for db in codec.DATABASES:
                    env.open_db(db, txn=t)
                t.put(codec.META_FORMAT, codec.encode_count(codec.FORMAT_VERSION), db=env.open_db(b"meta", txn=t))
        finally:
            env.close()

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
                notify(self, tx.changed)
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
        self.env = self._open_env(False)
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

    def _close_dir(self):
        lock, self.lock_fd = self.lock_fd, None
        if lock is not None:
            os.close(lock)          # releases the shared store lock (after the environment is closed)
        fd, self.dir_fd = self.dir_fd, None
        if fd is not None:
            os.close(fd)


class _TxnContext:
    """``with store.write() as tx:`` for library users (no automatic
    retry on map growth: use ``run`` for that)."""

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
                    self.lt = self.store.env.begin(write=self.write)
                    self.lt = _logging(self.store, self.lt) if self.write else self.lt
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
                    notify(self.store, self.tx.changed)
            else:
                self.lt.abort()
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


def _come_back(self: Store, after_aside: bool) -> None:
    """Open ``self``'s environment again in the kept directory
    (Store.step_aside)."""
    fd = self.dir_fd
    if fd is None:
        raise StoreError("the store is closed")
    if self.lock_fd is None and self._shared_lock:
        self.lock_fd = take_store_lock(fd, after_aside=after_aside)
    strict = not self.readonly
    data = check_entry(fd, "data.mdb", "data.mdb", "file", strict)
    if data is None:
        raise StoreError("data.mdb is gone")
    if check_entry(fd, "lock.mdb", "lock.mdb", "file", strict) is None:
        _make_file(fd, "lock.mdb", _fill_lock, self.durable)
    why = _read_only(fd)
    if why and not self.readonly:
        raise ReadOnlyStore(self.path, why)
    lockless = bool(why)
    if lockless:
        _no_writer(self.lock_fd, self.path, why)
    elif not self.readonly:
        _mark_writer(self.lock_fd)
    self.env = _lmdb_open(self.root, map_size=_headroom(data), max_dbs=MAX_DBS, sync=self.durable,
                          metasync=self.durable, writemap=False, lock=not lockless, readonly=self.readonly,
                          create=False, max_readers=MAX_READERS, mode=0o600)
    self.dbs = {}
    while True:
        try:
            self._open_dbs()
            break
        except lmdb.MapResizedError:
            self.env.set_mapsize(0)
        except lmdb.MapFullError:
            self.env.set_mapsize(self.env.info()["map_size"] * 2)
    self._broken = None
    self.check_readers(force=True)


def _headroom(data_stat):
    """The map size to open with: twice the data file (address space is
    free on 64-bit), at least INITIAL_MAP, so that a process opening a
    big store does not fail its first write with "map full" and redo it."""
    size = data_stat.st_size if data_stat is not None else 0
    want = max(INITIAL_MAP, 2 * size)
    return (want + INITIAL_MAP - 1) // INITIAL_MAP * INITIAL_MAP if want > INITIAL_MAP else want


def _reason(e, path):
    """A failure to open the store again (Store.step_aside), in words."""
    if isinstance(e, StoreError):
        text = str(e)
        return text.replace("cannot open store %s: " % path, "")
    if isinstance(e, UnsafeEntry):
        return "refusing it: %s" % e
    full = _disk_full(e, path)
    if full:
        return full
    if isinstance(e, lmdb.Error):
        return _lmdb_reason(e)
    return getattr(e, "strerror", None) or str(e)


def _lmdb_reason(e):
    text = str(e)
    return text.split(": ", 1)[-1] if ": " in text else text
