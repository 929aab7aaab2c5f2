"""Opening a store: the directory and its files checked and made
private, data.mdb and lock.mdb made complete under a temporary name, the
LMDB environment opened on them with the settings chosen here and only
here, beside the environments a forked child inherited; the map's
headroom; a failure to open told in words (a full disk told apart); and
opening again after stepping aside for a compaction (``_come_back``).
Used by storage.store alone (``Store.__init__``, ``Store.step_aside``,
the first use after fork()); the primitives it uses (the rule of
private entries, the store directory, the store lock) are
storage.files'.  What a Store does once open -- transactions, the map's
growth, the format check -- is storage.store's.

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
import errno
import os
import stat
import time

import lmdb

from storage import codec
from storage.files import (
    NOTIFY_DIR,
    TEMP_MARK,
    ReadOnlyStore,
    StoreError,
    UnsafeEntry,
    _lstat,
    _mark_writer,
    _narrowed,
    _no_writer,
    _store_dir,
    open_private_dir,
    take_store_lock,
    unsafe_reason,
)

if False:  # typing only (not imported at run time)
    from typing import Any

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


INITIAL_MAP = 1 << 30
MAX_DBS = len(codec.DATABASES) + 2
MAX_READERS = 510
# LMDB's lock file for MAX_READERS readers (mdb.c: a reader slot is one
# 64-byte cache line, the header two lines plus the first slot)
LOCK_SIZE = (MAX_READERS - 1) * 64 + 192
LOW_SPACE = 1 << 20       # free bytes below which an EIO from LMDB means "disk full"


# ====================================================== the store's files

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


def _pinned(fd, path):
    """A path to the directory open as ``fd`` that cannot be switched
    under us: /proc/self/fd/N where /proc exists."""
    p = "/proc/self/fd/%d" % fd
    return p if os.path.isdir(p) else path


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


def check_entry(dir_fd, name, label, kind, strict=True):
    """Check the entry ``name`` of the directory ``dir_fd`` (``kind``:
    "file" or "dir"), if it exists, and make it private; raises
    UnsafeEntry naming it ``label``.  Returns its lstat or None."""
    st = _lstat(dir_fd, name)
    if st is None:
        return None
    why = unsafe_reason(st, kind)
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


# ======================================================== the environment

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
            _make_file(fd, "data.mdb", lambda f, name: _fill_data(self, f, name), self.durable)
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
        raise _open_error(self, e, made or creating)


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


def _come_back(self: "Any", after_aside: bool) -> None:
    """Open ``self``'s environment again in the kept directory
    (Store.step_aside; ``self``: the storage.store.Store, which imports
    this module)."""
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
