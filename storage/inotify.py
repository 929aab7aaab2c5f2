"""Linux inotify(7) through ctypes: one instance per process (``Hub``),
kept open and shared by every waiter, with a thread that wakes only the
waiters of the file that changed.  (Closing an inotify descriptor would
cost the kernel an RCU grace period, ~10 ms, and a user has few
instances: 128 by default, fewer than xs serve may have blocked clients.)

Errors are OSErrors with the errno (EMFILE: out of instances, ENOSPC:
out of watches); storage.blocking then polls instead, and says so.

Who imports it: storage.blocking alone.
"""
import _thread
import os

# inotify(7) constants
IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_IGNORED = 0x8000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
IN_DONT_FOLLOW = 0x02000000
WATCH_MASK = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW

_libc = None              # ctypes libc (False: inotify unavailable)
_lock = _thread.allocate_lock()   # guards _libc's loading and the shared instance (xs serve's threads)


def available():
    """libc with inotify, or None.  Loaded once, under the lock: a thread
    that comes while another loads it waits for the answer instead of
    being told there is none."""
    global _libc
    if _libc is None:
        with _lock:
            if _libc is None:
                _libc = _load_libc()
    return _libc or None


def _load_libc():
    try:
        import ctypes
        import ctypes.util
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        return libc
    except (OSError, AttributeError, ImportError):
        return False


class Instance:
    """An inotify instance and its watches (the Hub's)."""

    def __init__(self):
        libc = available()
        if libc is None:
            raise OSError("inotify is not available")
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            import ctypes
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self.libc = libc      # available()'s, loaded once per process
        self.fd = fd
        self.wds: set[int] = set()      # watch descriptors in use
        self.busy = False     # a Waiter is using it

    def watch(self, path):
        """Watch the file ``path`` (not following a link); returns the
        watch descriptor (the same one again for the same file)."""
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), WATCH_MASK)
        if wd < 0:
            import ctypes
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)
        self.wds.add(wd)
        return wd

    def events(self):
        """Read the pending events: [(wd, mask)] (wd -1: queue overflow)."""
        out: list[tuple[int, int]] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            except InterruptedError:
                continue
            if not data:
                return out
            i = 0
            while i + 16 <= len(data):
                wd = int.from_bytes(data[i:i + 4], "little", signed=True)
                mask = int.from_bytes(data[i + 4:i + 8], "little")
                ln = int.from_bytes(data[i + 12:i + 16], "little")
                out.append((wd, mask))
                if mask & IN_IGNORED:   # the file went away: the watch is gone
                    self.wds.discard(wd)
                i += 16 + ln

    def close(self):
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


class Hub:
    """The process's one inotify instance, shared by every waiter at once
    (xs serve's blocked clients are threads of one process; a system has
    few inotify instances, 128 a user by default).  A daemon thread reads
    its events and rings only the waiters subscribed to the watch that
    fired, so a change wakes the waiters of that file and no other.

    ``watch(path, waiter)`` adds a watch (the same descriptor for the same
    file) and subscribes ``waiter``; ``unwatch(wd, waiter)`` unsubscribes,
    and removes the watch when nobody is left.  ``waiter.ring(mask)`` is
    called under the hub's lock (so a waiter that unsubscribed is never
    rung after): it must only set flags and write to a descriptor."""

    def __init__(self):
        self.ino = Instance()
        self._subs = {}       # wd -> {waiter}
        self._mutex = _thread.allocate_lock()
        _thread.start_new_thread(self._run, ())

    def watch(self, path, waiter):
        with self._mutex:
            wd = self.ino.watch(path)
            self._subs.setdefault(wd, set()).add(waiter)
            return wd

    def unwatch(self, wd, waiter):
        with self._mutex:
            subs = self._subs.get(wd)
            if subs is None:
                return
            subs.discard(waiter)
            if not subs:
                del self._subs[wd]
                self.ino.wds.discard(wd)
                self.ino.libc.inotify_rm_watch(self.ino.fd, wd)   # EINVAL if already gone: ignored

    def _run(self):
        import select
        p = select.poll()
        p.register(self.ino.fd, select.POLLIN)
        while True:
            try:
                p.poll()
            except InterruptedError:     # pragma: no cover (retried by Python since 3.5)
                continue
            with self._mutex:
                events = self.ino.events()
                for wd, mask in events:
                    if wd == -1:             # the queue overflowed: anything may have changed
                        rung = set().union(*self._subs.values()) if self._subs else ()
                    else:
                        rung = self._subs.get(wd, ())
                        if mask & IN_IGNORED:    # the file went away: the watch is gone
                            self._subs.pop(wd, None)
                    for w in rung:
                        w.ring(mask)


_hub = None               # the process's Hub


def _forget_hub():
    """In a forked child: the hub's thread did not survive the fork."""
    global _hub
    _hub = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_hub)


def hub():
    """The process's Hub (made on first use).  OSError when no inotify
    instance can be had (EMFILE: out of instances)."""
    global _hub
    if _hub is None:
        with _lock:
            if _hub is None:
                _hub = Hub()
    return _hub
