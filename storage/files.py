"""The store's files: the errors of opening a store; the rule every
entry of a store is held to (private to its owner, opened without
following links, checked before use: ``unsafe_reason``,
``open_private_dir``, ``open_private_file``); the store directory, found
or made and checked to hold only a store's files; and the store lock
with the POSIX locks on its bytes (the gate, the writer mark, stepping
aside, xs's write lock: ``hold_write``).  Used by storage.opening and
storage.store (opening a store, writing), storage.blocking and
storage.consumers (notification and queue files), storage.changelog and
storage.ops.compact; imports nothing of the engine but posixlock (where a
byte's lock holder is asked for or the writer mark taken: a one-shot read
never does) and storage.atomicfile (below), so it sits below all of them.
What the rules are and why: storage.opening's docstring ("Private
files", "The store lock").

Temporary files and atomic writes (``AtomicFile``, ``write_atomically``,
``temp_file``, ``sweep_temp``: the one way xs replaces a file) are
storage.atomicfile's, and storage.files' names too: they are loaded when
first asked for (``__getattr__`` below), so that the one-shot path, which
imports this module, does not import them.
"""
import _thread
import errno
import fcntl
import os
import stat

if False:  # typing only: the names of storage.atomicfile given here (see __getattr__)
    from storage.atomicfile import STALE_TEMP_S, AtomicFile, sweep_temp, temp_file, write_atomically  # noqa: F401

TEMP_MARK = ".new-"       # data.mdb.new-<pid>-<ns>: a store file being made
NOTIFY_DIR = "notify"     # inside the store directory (storage.blocking)
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class StoreError(Exception):
    """The store cannot be opened or used (not a Redis error reply)."""


class NeedsWriteAccess(StoreError):
    """A read-only open is not enough: the store does not exist yet, lacks
    a database, or must be upgraded.  An open for writing may succeed."""


class NoSuchStore(NeedsWriteAccess):
    """There is no store at the path (no directory, or a directory
    without data.mdb): an open that may create one would make it."""


class NotAStore(StoreError):
    """The path is a directory that holds files a store never has: it is
    refused, unchanged (neither its mode nor its contents are touched)."""


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
            raise NoSuchStore("cannot open store %s: no such store" % path)
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
        if not made:
            _only_store_files(fd, path)
            if not create and _lstat(fd, "data.mdb") is None:
                raise NoSuchStore("cannot open store %s: no such store" % path)
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
# what a store directory may hold: its files (and their temporaries, see
# storage.opening._make_file and storage.ops.compact), the notification directory, the
# default socket of xs serve, and lost+found (a store on a file system of
# its own).  Anything else means the directory is not a store.
STORE_NAMES = frozenset(("data.mdb", "lock.mdb", STORE_LOCK, NOTIFY_DIR, "serve.sock", "lost+found"))
STORE_TEMPORARIES = ("data.mdb" + TEMP_MARK, "lock.mdb" + TEMP_MARK, "data.mdb.compact-")


def _only_store_files(fd, path):
    """Refuse (NotAStore) a directory that holds anything a store does
    not: ``xs --db www`` on a web root, or ``--db .`` in a checkout, must
    neither make it private nor put a lock file in it."""
    others = sorted(n for n in os.listdir(fd)
                    if n not in STORE_NAMES and not n.startswith(STORE_TEMPORARIES))
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise NotAStore("%s is not an xs store: it holds other files (%s)" % (path, shown))



def take_store_lock(dir_fd, create=True, exclusive=False, wait=True, open_only=False, after_aside=False):
    """Open ``<store>/lock`` (made 0600 if missing and ``create``) and
    flock it shared (``exclusive``: exclusively); returns the descriptor,
    which holds the lock until it is closed.  Every Store holds it shared
    from before it looks at data.mdb until after its environment is
    closed, so ``xs compact`` (storage.ops.compact), holding it exclusively,
    may replace data.mdb: no process has the old file open.  Without
    ``wait`` a lock held by others raises BlockingIOError.  Read-only
    opens make the file too (a store made by an older xs has none); None
    if it is missing and cannot be made (a store on a read-only file
    system: nothing can replace data.mdb there either).  ``open_only``:
    open the file and lock nothing (compaction takes its locks itself).
    ``after_aside``: a process that stepped aside for a compaction
    (Store.step_aside) first waits until the compaction's request is
    withdrawn (``wait_aside_over``), so that it does not take the lock
    back before the compaction had it."""
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
        if after_aside:
            wait_aside_over(f)
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


# Stepping aside (storage.ops.compact, "Long-running processes").  A
# compaction asks the processes that hold the store lock to let go by
# holding an exclusive POSIX lock on byte 2 of <store>/lock (the request:
# the kernel drops it when the compaction ends or dies, so a request never
# outlives its compaction) and then touching the file (utime: IN_ATTRIB,
# which the waiters of storage.blocking watch).  A process idle in
# storage.blocking.wait_until sees the request, closes its environment and
# its lock, waits for the request to go and opens the store again.
ASIDE_BYTE = 2


def request_aside(lock_fd):
    """Hold the request (the lock file open for writing, as compaction
    opens it); False if another compaction holds it, or it cannot be had.
    Then touch the file: every waiter watching it wakes."""
    try:
        fcntl.lockf(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, ASIDE_BYTE)
    except OSError:
        return False
    try:
        os.utime(lock_fd)
    except OSError:
        pass
    return True


def aside_requested(lock_fd):
    """Whether a compaction (another process) asks the store's users to
    step aside.  One fcntl(F_GETLK); False where that cannot be asked."""
    from storage import posixlock
    return posixlock.holder(lock_fd, ASIDE_BYTE) is not None


def wait_aside_over(lock_fd):
    """Block until no compaction holds the request (a shared POSIX lock on
    its byte, taken and given back at once)."""
    try:
        fcntl.lockf(lock_fd, fcntl.LOCK_SH, 1, ASIDE_BYTE)
    except OSError:
        return
    fcntl.lockf(lock_fd, fcntl.LOCK_UN, 1, ASIDE_BYTE)


# xs's own write lock (issue 42): every write transaction of an xs
# process holds an exclusive POSIX lock on byte 3 of <store>/lock, taken
# before LMDB's write lock and given back after the commit.  LMDB's lock
# cannot be tried without waiting; this one can, so xs serve runs a batch
# in its event loop's thread when no other process writes, and hands it to
# its engine thread (which waits) when one does.  It is advisory: LMDB's
# lock still serialises writers (a process whose threads write at once can
# drop it early, POSIX locks belonging to the process, which only makes a
# try answer "free" too soon).
WRITE_BYTE = 3


def take_write_lock(lock_fd, wait=True):
    """Hold the write lock (waiting for it with ``wait``): False if another
    process holds it and ``wait`` is false."""
    try:
        fcntl.lockf(lock_fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB), 1, WRITE_BYTE)
    except OSError as e:
        if not wait and e.errno in (errno.EAGAIN, errno.EACCES):
            return False
        return True     # it cannot be had (a descriptor open read-only; EDEADLK): LMDB's lock still serialises
    return True


def drop_write_lock(lock_fd):
    try:
        fcntl.lockf(lock_fd, fcntl.LOCK_UN, 1, WRITE_BYTE)
    except OSError:
        pass


def hold_write(store, wait=True):
    """Hold xs's write lock on ``store`` (a storage.store.Store: its
    ``_writing`` and ``lock_fd``; ``take_write_lock``)
    for this thread: the process's other threads wait (a gate), other
    processes wait on the lock file's byte.  Re-entrant: a thread that
    holds it takes it again at once.  Without ``wait``, False (nothing
    held) if another thread or process holds it."""
    w = store._writing
    me = _thread.get_ident()
    if w[1] == me:
        w[2] += 1
        return True
    if not w[0].acquire(wait):
        return False
    fd = store.lock_fd
    if fd is not None and not take_write_lock(fd, wait):
        w[0].release()
        return False
    w[1], w[2] = me, 1
    return True


def release_write(store):
    """Give back what ``hold_write`` took."""
    w = store._writing
    w[2] -= 1
    if w[2] == 0:
        w[1] = None
        if store.lock_fd is not None:
            drop_write_lock(store.lock_fd)
        w[0].release()


# byte 1 of <store>/lock.  A reader that cannot write lock.mdb opens the
# store without LMDB's reader table, which is safe only while nobody
# writes: it checks that no process holds that lock.  (A process with two
# stores open on one path can lose its mark early: see storage.posixlock.)
_WRITER_BYTE = 1


def _mark_writer(lock_fd):
    if lock_fd is not None and fcntl.fcntl(lock_fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDWR:
        from storage import posixlock
        posixlock.hold_shared(lock_fd, _WRITER_BYTE)


def _no_writer(lock_fd, path, why):
    """Raise StoreError if a process has the store open for writing (a
    read without LMDB's lock table could then see pages being reused);
    ``why``: why this reader cannot write (_read_only)."""
    from storage import posixlock
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


def _lstat(dir_fd, name):
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def unsafe_reason(st, kind, own=True):
    """Why an entry (its lstat or fstat; ``kind`` "file" or "dir") must
    not be used, or None: a link is never followed, a file has one name,
    and (``own``) the entry is this user's.  The rule of the store's
    files, and of what xs archive keeps in its directory."""
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if own and st.st_uid != os.geteuid():
        return "belongs to another user (uid %d)" % st.st_uid
    if kind == "file" and st.st_nlink > 1:
        return "has another hard link"
    return None


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
            raise UnsafeEntry("%s %s" % (label, unsafe_reason(st, kind) or "cannot be opened"))


def _check_opened(fd, label, kind, strict=True, made=False):
    """Check an opened store entry (raises UnsafeEntry named ``label``)
    and make it private (``strict``: a failure to do so is an error;
    ``made``: this process just created it, whatever the umask left)."""
    st = os.fstat(fd)
    why = unsafe_reason(st, kind)
    if why:
        raise UnsafeEntry("%s %s" % (label, why))
    mode = _narrowed(st.st_mode, kind, made)
    if mode is not None:
        try:
            os.fchmod(fd, mode)
        except OSError:
            if strict:
                raise


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
    os.close(open_private_file(dir_fd, name, label, os.O_WRONLY, exclusive))


def open_private_file(dir_fd, name, label, flags=os.O_RDWR, exclusive=False):
    """The file ``name`` in ``dir_fd`` (made 0600 if missing), opened with
    ``flags`` without following a link, checked (this user's, one name)
    and made private; the caller closes the descriptor.  Raises
    UnsafeEntry (named ``label``) or OSError."""
    flags |= os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        f = os.open(name, flags | (os.O_EXCL if exclusive else 0), 0o600, dir_fd=dir_fd)
    except OSError as e:
        _refuse_unsafe(dir_fd, name, label, "file", e)
        raise
    try:
        _check_opened(f, label, "file")
    except BaseException:
        os.close(f)
        raise
    return f


_ATOMIC = frozenset(("STALE_TEMP_S", "temp_file", "sweep_temp", "AtomicFile", "write_atomically"))


def __getattr__(name: str) -> object:
    """storage.atomicfile's names, imported on first use (as the package
    gives ``storage.Store``)."""
    if name in _ATOMIC:
        from storage import atomicfile
        return getattr(atomicfile, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
