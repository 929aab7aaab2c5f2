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
closed (read-only opens too); ``xs compact`` (storage.compact) holds it
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
"""
import errno
import fcntl
import os
import stat
import time

import lmdb

from storage import codec, posixlock
from storage.blocking import NOTIFY_DIR, notify
from storage.txn import Retry, StoreFailure, Txn

INITIAL_MAP = 1 << 30
MAX_READERS = 510
MAX_DBS = len(codec.DATABASES) + 2
# LMDB's lock file for MAX_READERS readers (mdb.c: a reader slot is one
# 64-byte cache line, the header two lines plus the first slot)
LOCK_SIZE = (MAX_READERS - 1) * 64 + 192
LOW_SPACE = 1 << 20       # free bytes below which an EIO from LMDB means "disk full"
TEMP_MARK = ".new-"       # data.mdb.new-<pid>-<ns>: a store file being made
READER_CHECK_S = 10.0     # a long-running process clears dead readers' slots this often
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class StoreError(Exception):
    """The store cannot be opened or used (not a Redis error reply)."""


class NeedsWriteAccess(StoreError):
    """A read-only open is not enough: the store does not exist yet, lacks
    a database, or must be upgraded.  An open for writing may succeed."""


class ReadOnlyStore(StoreError):
    """The store exists and may be read, but this user may not write it:
    its files are not writable (``chmod -R a-w``) or it is on a read-only
    file system.  A read-only open works (``Store(path, readonly=True)``).
    ``reason``: why, in a few words ("data.mdb is not writable by this
    user")."""

    def __init__(self, path, reason):
        StoreError.__init__(self, "cannot write to store %s: %s" % (path, reason))
        self.reason = reason


class UnsafeEntry(Exception):
    """An entry of a store that must not be used: a link, another user's,
    or not of the kind it should be.  The text names it: ``lock.mdb is a
    symbolic link``."""


class Store:
    """An xs store on disk: ``Store(path)``; then ``run`` or the
    ``read()`` / ``write()`` context managers giving a ``Txn``.

    ``dir_fd``: the store directory, opened and checked (kept open until
    ``close``); ``root``: a path to that same directory (/proc/self/fd/N
    where /proc exists, else ``path``)."""

    def __init__(self, path, durable=True, readonly=False, create=True, shared_lock=True, upgrade_notice=None):
        self.path = path
        # fn(old format, new format, entries) called once before an older
        # store is upgraded (a big one takes a while: the CLI says so)
        self._upgrade_notice = upgrade_notice
        self.readonly = readonly
        self.durable = durable
        self.dir_fd = None
        self.lock_fd = None       # <store>/lock, held shared while open (see take_store_lock)
        self._shared_lock = shared_lock
        self.root = path
        self._broken = None       # why the environment had to be closed
        self.why_read_only = None  # why this user cannot write (ReadOnlyStore.reason; set by the opener)
        self._readers_checked = 0.0
        self.env = self._open_env(create and not readonly)
        self.dbs = {}
        while True:
            try:
                self._open_dbs()
                self.check_readers(force=True)
                return
            except lmdb.MapFullError:
                try:
                    self._grow()
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
            if lock is None and (create or data is not None):
                try:
                    _make_file(fd, "lock.mdb", _fill_lock, self.durable)
                except OSError:
                    if create:
                        raise
            return lmdb.open(self.root, map_size=_headroom(data), max_dbs=MAX_DBS, sync=self.durable,
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

    def check_readers(self, force=False):
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

    def run(self, fn, write=False, savepoints=False):
        """Run ``fn(txn)`` in one transaction and return its result;
        commit if ``write`` and ``fn`` returned, abort otherwise.  With
        ``savepoints`` every write verb is atomic on its own (script
        mode).  Run again from scratch if the map must grow."""
        if write and self.readonly:
            raise StoreFailure(self._read_only_failure())
        if write and time.monotonic() - self._readers_checked >= READER_CHECK_S:
            self.check_readers()
        while True:
            try:
                lt = self.env.begin(write=write)
            except lmdb.MapResizedError:
                self._set_mapsize(0)
                continue
            except lmdb.Error as e:
                raise StoreFailure(self._failure(e, write, savepoints))
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

    def read(self):
        """``with store.read() as tx:`` a read transaction."""
        return _TxnContext(self, False)

    def write(self):
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

    def close(self):
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

    def __init__(self, store, write):
        self.store, self.write = store, write

    def __enter__(self):
        if self.write and self.store.readonly:
            raise StoreFailure(self.store._read_only_failure())
        while True:
            try:
                self.lt = self.store.env.begin(write=self.write)
                break
            except lmdb.MapResizedError:       # another process grew the map
                self.store._set_mapsize(0)
        self.tx = Txn(self.store, self.lt, self.write, savepoints=self.write)
        return self.tx

    def __exit__(self, et, ev, tb):
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
        return False


def _headroom(data_stat):
    """The map size to open with: twice the data file (address space is
    free on 64-bit), at least INITIAL_MAP, so that a process opening a
    big store does not fail its first write with "map full" and redo it."""
    size = data_stat.st_size if data_stat is not None else 0
    want = max(INITIAL_MAP, 2 * size)
    return (want + INITIAL_MAP - 1) // INITIAL_MAP * INITIAL_MAP if want > INITIAL_MAP else want


def _lmdb_reason(e):
    text = str(e)
    return text.split(": ", 1)[-1] if ": " in text else text


# ============================================================ private files

def _store_dir(path, create, strict=True):
    """(fd, made): the store directory, opened and checked to be the
    user's own, made 0700 (``made``: this call created it).  The path's
    last component may be a symbolic link if it is the user's own."""
    made = False
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise NeedsWriteAccess("cannot open store %s: no such store" % path)
        _mkdirs(os.path.dirname(os.path.abspath(path)))
        try:
            os.mkdir(path, 0o700)
            made = True
        except FileExistsError:
            pass
        st = os.lstat(path)
    euid = os.geteuid()
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid != euid:
            raise UnsafeEntry("it is a symbolic link that belongs to another user (uid %d)" % st.st_uid)
        try:
            os.stat(path)
        except FileNotFoundError:
            raise StoreError("cannot open store %s: it is a symbolic link to a missing path (%s)"
                             % (path, _link_target(path)))
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise StoreError("cannot open store %s: it is a symbolic link that loops" % path)
        flags = _O_DIR
    elif stat.S_ISDIR(st.st_mode):
        flags = _O_DIR | os.O_NOFOLLOW
    else:
        raise StoreError("cannot open store %s: a file is in the way (a store is a directory)" % path)
    try:
        fd = os.open(path, flags)
    except NotADirectoryError:
        raise StoreError("cannot open store %s: a file is in the way (a store is a directory)" % path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeEntry("it was replaced by a symbolic link")
        raise
    try:
        st = os.fstat(fd)
        if st.st_uid != euid:
            raise UnsafeEntry("it belongs to another user (uid %d)" % st.st_uid)
        mode = _narrowed(st.st_mode, "dir", made)
        if mode is not None:
            try:
                os.fchmod(fd, mode)
            except OSError:
                if strict:
                    raise
    except BaseException:
        os.close(fd)
        raise
    return fd, made


STORE_LOCK = "lock"        # <store>/lock: every open holds it shared, xs compact exclusive


def take_store_lock(dir_fd, create=True, exclusive=False, wait=True, open_only=False):
    """Open ``<store>/lock`` (made 0600 if missing and ``create``) and
    flock it shared (``exclusive``: exclusively); returns the descriptor,
    which holds the lock until it is closed.  Every Store holds it shared
    from before it looks at data.mdb until after its environment is
    closed, so ``xs compact`` (storage.compact), holding it exclusively,
    may replace data.mdb: no process has the old file open.  Without
    ``wait`` a lock held by others raises BlockingIOError.  Read-only
    opens make the file too (a store made by an older xs has none); None
    if it is missing and cannot be made (a store on a read-only file
    system: nothing can replace data.mdb there either).  ``open_only``:
    open the file and lock nothing (compaction takes its locks itself)."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    try:
        f = os.open(STORE_LOCK, flags | (os.O_CREAT if create else 0), 0o600, dir_fd=dir_fd)
    except OSError as e:
        _refuse_unsafe(dir_fd, STORE_LOCK, STORE_LOCK, "file", e)
        if create and e.errno in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT):
            return take_store_lock(dir_fd, False, exclusive, wait, open_only)
        if not create and e.errno in (errno.ENOENT, errno.EROFS, errno.EACCES, errno.EPERM):
            if e.errno == errno.ENOENT or _lstat(dir_fd, STORE_LOCK) is None:
                return None
            f = os.open(STORE_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        else:
            raise
    try:
        _check_opened(f, STORE_LOCK, "file", strict=False)
        if open_only:
            return f
        if not exclusive:
            # pass the gate (a POSIX lock on byte 0, held exclusively by a
            # compaction draining the store of short-lived users, so that
            # they cannot starve it): wait while it is closed, hold nothing
            fcntl.lockf(f, fcntl.LOCK_SH, 1, 0)
            fcntl.lockf(f, fcntl.LOCK_UN, 1, 0)
        fcntl.flock(f, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | (0 if wait else fcntl.LOCK_NB))
    except BaseException:
        os.close(f)
        raise
    return f


def _read_only(dir_fd):
    """Why this user cannot write the store open as ``dir_fd`` (its files
    exist), or None."""
    try:
        if os.fstatvfs(dir_fd).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        pass
    for name in ("data.mdb", "lock.mdb"):
        if _lstat(dir_fd, name) is not None and not os.access(name, os.W_OK, dir_fd=dir_fd, effective_ids=True):
            return "%s is not writable by this user" % name
    return None


# A process with the store open for writing holds a shared POSIX lock on
# byte 1 of <store>/lock.  A reader that cannot write lock.mdb opens the
# store without LMDB's reader table, which is safe only while nobody
# writes: it checks that no process holds that lock.  (A process with two
# stores open on one path can lose its mark early: see storage.posixlock.)
_WRITER_BYTE = 1


def _mark_writer(lock_fd):
    if lock_fd is not None and fcntl.fcntl(lock_fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR:
        posixlock.hold_shared(lock_fd, _WRITER_BYTE)


def _no_writer(lock_fd, path, why):
    """Raise StoreError if a process has the store open for writing (a
    read without LMDB's lock table could then see pages being reused);
    ``why``: why this reader cannot write (_read_only)."""
    pid = posixlock.holder(lock_fd, _WRITER_BYTE) if lock_fd is not None else None
    if pid is not None:
        raise StoreError("cannot read store %s without write access while process %d has it open for "
                         "writing (%s)" % (path, pid, why))


def _link_target(path):
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _mkdirs(path):
    """Make the missing directories of ``path``, 0700 (XDG's advice)."""
    if os.path.isdir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path:
        _mkdirs(parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass


def _pinned(fd, path):
    """A path to the directory open as ``fd`` that cannot be switched
    under us: /proc/self/fd/N where /proc exists."""
    p = "/proc/self/fd/%d" % fd
    return p if os.path.isdir(p) else path


def _lstat(dir_fd, name):
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _unsafe(st, kind):
    """Why an entry of a store (its lstat) must not be used, or None."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if st.st_uid != os.geteuid():
        return "belongs to another user (uid %d)" % st.st_uid
    if kind == "file" and st.st_nlink > 1:
        return "has another hard link"
    return None


def _private(dir_fd, name, st, kind, strict):
    """Take away what a checked entry grants beyond 0700 / 0600
    (``strict``: a failure to do so is an error)."""
    mode = _narrowed(st.st_mode, kind)
    if mode is not None:
        try:
            os.chmod(name, mode, dir_fd=dir_fd)
        except OSError:
            if strict:
                raise


_PRIVATE = {"dir": 0o700, "file": 0o600}


def _narrowed(st_mode, kind, made=False):
    """The mode a store entry should have, if it is not the one it has:
    0700 / 0600 for one this process just ``made`` (whatever the umask
    left); for an existing one, its own bits less any for group and
    others (and execute, for a file) -- never more: an owner who took
    away their own write bits (``chmod -R a-w``) keeps a read-only store."""
    mode = stat.S_IMODE(st_mode)
    want = _PRIVATE[kind] if made else mode & _PRIVATE[kind]
    return want if want != mode else None
# what a no-follow open of an entry that is a link or of the wrong kind fails with
_REFUSED_OPEN = {"dir": (errno.ELOOP, errno.ENOTDIR), "file": (errno.ELOOP, errno.ENXIO, errno.EISDIR)}


def _refuse_unsafe(dir_fd, name, label, kind, err):
    """After a no-follow open of ``name`` failed with ``err``: raise
    UnsafeEntry (named ``label``) if the entry is a link or of the wrong
    kind; otherwise return (the caller decides about ``err``)."""
    if err.errno in _REFUSED_OPEN[kind]:
        st = _lstat(dir_fd, name)
        if st is not None:
            raise UnsafeEntry("%s %s" % (label, _unsafe(st, kind) or "cannot be opened"))


def _check_opened(fd, label, kind, strict=True, made=False):
    """Check an opened store entry (raises UnsafeEntry named ``label``)
    and make it private (``strict``: a failure to do so is an error;
    ``made``: this process just created it, whatever the umask left)."""
    st = os.fstat(fd)
    why = _unsafe(st, kind)
    if why:
        raise UnsafeEntry("%s %s" % (label, why))
    mode = _narrowed(st.st_mode, kind, made)
    if mode is not None:
        try:
            os.fchmod(fd, mode)
        except OSError:
            if strict:
                raise


def check_entry(dir_fd, name, label, kind, strict=True):
    """Check the entry ``name`` of the directory ``dir_fd`` (``kind``:
    "file" or "dir"), if it exists, and make it private; raises
    UnsafeEntry naming it ``label``.  Returns its lstat or None."""
    st = _lstat(dir_fd, name)
    if st is None:
        return None
    why = _unsafe(st, kind)
    if why == "has another hard link" and _being_made(dir_fd, name, st):
        why = None
    if why:
        raise UnsafeEntry("%s %s" % (label, why))
    _private(dir_fd, name, st, kind, strict)
    return st


def check_notify_dir(dir_fd, strict=True):
    """Check notify/.  If it is not 0700 it was made by an older xs, and
    others may have written in it: make it private first, then check
    everything in it (once: it is 0700 from then on)."""
    st = check_entry(dir_fd, NOTIFY_DIR, NOTIFY_DIR, "dir", strict)
    if st is None or not stat.S_IMODE(st.st_mode) & 0o077:
        return
    nfd = open_private_dir(dir_fd, NOTIFY_DIR, NOTIFY_DIR, create=False, strict=strict)
    try:
        for name in os.listdir(nfd):
            label = "%s/%s" % (NOTIFY_DIR, name)
            sub = _lstat(nfd, name)
            if sub is not None and stat.S_ISDIR(sub.st_mode):
                qfd = open_private_dir(nfd, name, label, create=False, strict=strict)
                try:
                    for ticket in os.listdir(qfd):
                        check_entry(qfd, ticket, "%s/%s" % (label, ticket), "file", strict)
                finally:
                    os.close(qfd)
            else:
                check_entry(nfd, name, label, "file", strict)
    finally:
        os.close(nfd)


def open_private_dir(dir_fd, name, label, create=True, strict=True):
    """The directory ``name`` in ``dir_fd`` (made if missing and
    ``create``), opened without following a link, checked and made
    0700; the caller closes the descriptor.  Raises UnsafeEntry (named
    ``label``) or OSError."""
    made = False
    if create:
        try:
            os.mkdir(name, 0o700, dir_fd=dir_fd)
            made = True
        except FileExistsError:
            pass
    try:
        fd = os.open(name, _O_DIR | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as e:
        _refuse_unsafe(dir_fd, name, label, "dir", e)
        raise
    try:
        _check_opened(fd, label, "dir", strict, made)
    except BaseException:
        os.close(fd)
        raise
    return fd


def make_private_file(dir_fd, name, label, exclusive=False):
    """Create (or, unless ``exclusive``, open) the empty file ``name`` in
    ``dir_fd``, 0600, without following a link.  Raises UnsafeEntry
    (named ``label``) or OSError."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        f = os.open(name, flags | (os.O_EXCL if exclusive else 0), 0o600, dir_fd=dir_fd)
    except OSError as e:
        _refuse_unsafe(dir_fd, name, label, "file", e)
        raise
    try:
        _check_opened(f, label, "file")
    finally:
        os.close(f)


def _make_file(dir_fd, name, fill, durable):
    """Make the store file ``name`` if it is missing: made complete under
    a temporary name by ``fill(fd, temporary name)``, then hard-linked
    into place, so that no process sees it half made.  If another
    process linked its own first, theirs stands."""
    if _lstat(dir_fd, name) is not None:
        return
    _sweep(dir_fd, name)
    tmp = "%s%s%d-%d" % (name, TEMP_MARK, os.getpid(), time.monotonic_ns())
    f = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        if stat.S_IMODE(os.fstat(f).st_mode) != 0o600:
            os.fchmod(f, 0o600)
        fill(f, tmp)
        try:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            if _lstat(dir_fd, name) is None:       # no hard links here
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        if durable:
            os.fsync(dir_fd)
    finally:
        os.close(f)
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass


def _fill_lock(fd, name):
    """Allocate the whole lock file, so that LMDB never writes through
    its shared mapping into a page the file system must still find
    room for (SIGBUS on a full disk)."""
    try:
        os.posix_fallocate(fd, 0, LOCK_SIZE)
        return
    except AttributeError:              # not on this system
        pass
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
    os.pwrite(fd, bytes(LOCK_SIZE), 0)  # a new file nobody else has open


def _being_made(dir_fd, name, st):
    """Whether the second link of ``name`` is only the temporary name
    ``_make_file`` removes right after linking: wait a moment for it to
    go (remove it if the process that made it is gone)."""
    for _ in range(100):
        _sweep(dir_fd, name)
        now = _lstat(dir_fd, name)
        if now is None or now.st_ino != st.st_ino:
            return False
        if now.st_nlink == 1:
            return True
        time.sleep(0.001)
    return False


def _sweep(dir_fd, name):
    """Remove the temporary files of ``name`` whose maker is gone (killed
    while making it)."""
    prefix = name + TEMP_MARK
    for other in os.listdir(dir_fd):
        if other.startswith(prefix):
            try:
                os.kill(int(other[len(prefix):].split("-", 1)[0]), 0)
            except ProcessLookupError:
                try:
                    os.unlink(other, dir_fd=dir_fd)
                except OSError:
                    pass
            except (ValueError, OSError):
                pass


def _disk_full(e, path):
    """"no space left on device" (or "disk quota exceeded") if the error
    ``e`` (OSError or lmdb.Error) says the file system holding ``path``
    is full, else None.  LMDB reports a short write as EIO: that counts
    when the file system has next to no space left."""
    code = getattr(e, "errno", None)
    text = str(e)
    if code == errno.ENOSPC or os.strerror(errno.ENOSPC) in text:
        return "no space left on device"
    if code == errno.EDQUOT or os.strerror(errno.EDQUOT) in text:
        return "disk quota exceeded"
    if code == errno.EIO or os.strerror(errno.EIO) in text:
        p = os.path.abspath(path)
        while True:
            try:
                st = os.statvfs(p)
                break
            except OSError:
                if os.path.dirname(p) == p:
                    return None
                p = os.path.dirname(p)
        free = (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize
        if free < LOW_SPACE:
            return "no space left on device"
    return None
