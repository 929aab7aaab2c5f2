"""Who serves a consumer group, among processes: the fair queue of the
readers blocked on one group (``Queue``: Redis serves the client blocked
longest) and the one live process per consumer (``ConsumerLock``: two
``xs worker`` with one consumer name would run one entry twice at once).

Both keep small private files in the store's notification directory
(storage.blocking), opened relative to it without following a link.

Who imports it: xstream_cli.execution.blocked (the queue) and the
porcelain ``xs worker`` (the lock).
"""
import os
import time

from storage.blocking import NOTIFY_DIR, notify_dir, notify_name, refused


class Queue:
    """First come, first served among the consumers of one group blocked
    on one stream (Redis serves the client blocked longest).

    Each blocked reader holds a ticket, an empty file
    ``notify/<stream hash>.<group hash>.q/<wait start ns>.<pid>``; a new
    block takes a new ticket, so a reader just served goes to the back.
    ``first()`` tells whether no live reader has waited longer; tickets
    of processes that died are removed when seen; ``ahead()`` tells who
    is just before us.  ``path`` is the ticket's path, for a waiter to
    watch (storage.blocking.wait_until's ``turn``): a reader that leaves
    touches the ticket of the next live one, whose turn it may now be.  Errors make every
    reader "first": fairness is best effort, progress is not.  The
    directory is opened once (no link followed) and every operation is
    relative to it; a link or another user's directory there is refused
    (StoreFailure)."""

    def __init__(self, store, key, group):
        from storage.files import UnsafeEntry, make_private_file, open_private_dir
        self.fd = None             # the queue directory
        self.name = None           # our ticket
        self.path = None           # ... its path, to watch (None: no ticket)
        try:
            d = notify_dir(store)
        except OSError:
            return
        label = "%s/%s.%s.q" % (NOTIFY_DIR, notify_name(key), notify_name(group))
        try:
            self.fd = open_private_dir(d, label.rsplit("/", 1)[1], label)
            name = "%020d.%d" % (time.time_ns(), os.getpid())
            make_private_file(self.fd, name, "%s/%s" % (label, name), exclusive=True)
            self.name = name
            base = "/proc/self/fd/%d/" % self.fd
            if not os.path.isdir(base):
                base = os.path.join(store.root, label, "")
            self.path = base + name
        except UnsafeEntry as e:
            self.leave()
            raise refused(store, e)
        except OSError:
            self.leave()
        finally:
            os.close(d)

    def first(self):
        return self.ahead() is None

    def ahead(self):
        """None if no live reader has waited longer than us, else the pid
        of the one just before us in line."""
        if self.name is None:
            return None
        try:
            names = sorted(os.listdir(self.fd))
        except OSError:
            return None
        for n in reversed(names):       # the nearest first
            if n < self.name and _alive(self.fd, n):
                return _ticket_pid(n)   # an older, live waiter
        return None

    def leave(self):
        """Give the ticket back and touch the next live reader's ticket
        (its waiter watches it): it may now be first in line, or have
        another reader just before it."""
        fd, self.fd = self.fd, None
        name, self.name = self.name, None
        self.path = None
        if fd is None:
            return
        try:
            if name is not None:
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    pass
                _pass_turn(fd, name)
        finally:
            os.close(fd)


def _pass_turn(fd, ours):
    """After ticket ``ours`` left the queue directory ``fd``: touch the
    first live one after it."""
    try:
        names = sorted(os.listdir(fd))
    except OSError:
        return
    for n in names:
        if n <= ours or not _alive(fd, n):
            continue
        try:
            os.utime(n, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        return


def _alive(fd, n):
    """Whether ticket ``n`` of the queue directory ``fd`` is a live
    reader's; a dead one's is removed.  (Not a ticket: "not alive", and
    never removed.)"""
    pid = _ticket_pid(n)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        try:
            os.unlink(n, dir_fd=fd)
        except OSError:
            pass
        return False
    except OSError:
        return True                     # another user's process: alive


def _ticket_pid(name):
    """The pid of a queue ticket ``<ns>.<pid>`` (ASCII digits, a pid a
    process can have), or None for any other name."""
    stamp, dot, pid = name.partition(".")
    if not (dot and stamp.isascii() and stamp.isdigit() and pid.isascii() and pid.isdigit()):
        return None
    if len(pid) > 10:
        return None
    pid = int(pid)
    return pid if 0 < pid < (1 << 31) else None


class ConsumerBusy(Exception):
    """Another live process serves this consumer (``pid``: its pid, or None)."""

    def __init__(self, pid):
        Exception.__init__(self, pid)
        self.pid = pid


class ConsumerLock:
    """Held by the one process that serves a consumer of a group (``xs
    worker``): an exclusive ``flock`` on the private file
    ``notify/<stream hash>.<group hash>.<consumer hash>.w``, which holds
    the holder's pid.  The kernel releases it when that process ends,
    however it ends (SIGKILL included); a second process gets
    ConsumerBusy.  A link or another user's file there is refused
    (StoreFailure)."""

    def __init__(self, store, stream, group, consumer):
        import fcntl

        from storage.files import UnsafeEntry, open_private_file
        d = notify_dir(store)
        name = "%s.%s.%s.w" % (notify_name(stream), notify_name(group), notify_name(consumer))
        try:
            fd = open_private_file(d, name, "%s/%s" % (NOTIFY_DIR, name))
        except UnsafeEntry as e:
            raise refused(store, e)
        finally:
            os.close(d)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                raw = os.pread(fd, 32, 0)
            except OSError:
                raw = b""
            os.close(fd)
            raise ConsumerBusy(_ticket_pid("0." + raw.strip().decode("ascii", "replace")))
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"%d\n" % os.getpid(), 0)
        except OSError:
            pass                        # the lock holds; only the pid in the message is lost
        self.fd = fd

    def close(self):
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)                # releases the flock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
