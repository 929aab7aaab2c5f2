"""Linux inotify(7) through ctypes: one instance per process kept open
and shared by successive waiters (closing an inotify descriptor costs the
kernel an RCU grace period, ~10 ms, which would delay every blocked
read's answer); a second waiter at the same time gets a private one.

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
    """An inotify instance and its watches.  One per process is kept open
    and shared by successive waiters (``shared_instance``): closing an inotify
    descriptor makes the kernel wait for an RCU grace period (~10 ms),
    which would otherwise delay every blocked read's answer."""

    def __init__(self):
        libc = available()
        if libc is None:
            raise OSError("inotify is not available")
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            import ctypes
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        self.fd = fd
        self.wds = set()      # watch descriptors in use
        self.busy = False     # a Waiter is using it

    def watch(self, path):
        """Watch the file ``path`` (not following a link); returns the
        watch descriptor (the same one again for the same file)."""
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), WATCH_MASK)
        if wd < 0:
            import ctypes
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e), path)
        self.wds.add(wd)
        return wd

    def forget(self):
        """Drop every watch (when many streams were watched over time)."""
        for w in self.wds:
            _libc.inotify_rm_watch(self.fd, w)
        self.wds.clear()

    def events(self):
        """Read the pending events: [(wd, mask)] (wd -1: queue overflow)."""
        out = []
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


_shared = None            # the process's Instance (kept open)


def shared_instance():
    """The shared inotify instance if free (then marked busy), else a
    private one: two waiters never read one instance's events."""
    global _shared
    with _lock:
        if _shared is None or _shared.fd is None:
            _shared = Instance()
        if not _shared.busy:
            _shared.busy = True
            return _shared
    ino = Instance()
    ino.busy = True
    return ino


def release(ino):
    """A waiter is done with ``ino``: the shared instance is kept for the
    next one, a private one closed."""
    if ino is _shared:
        ino.busy = False
    else:
        ino.close()
