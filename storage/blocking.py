"""Waiting for streams to change (XREAD / XREADGROUP ... BLOCK, xs tail -f).

Writers bump a per-stream change counter in the same transaction as the
change (storage.parts.stream_table) and, after the commit, call ``notify(store, names)``.
Readers wait on per-stream notification files and re-check in a fresh
transaction when woken.

Notification files
  ``<store>/notify/<hash>``: one empty file per stream that somebody has
  waited on, named by a hash of the stream name (blake2b, 128 bits; a
  collision only causes a spurious wake-up, which callers re-check).
  Readers create the directory and their streams' files; writers never
  create anything.  ``notify`` touches (``utime``) the files of the
  changed streams that exist: one failed ``open`` of the directory when
  nobody ever waited on this store; otherwise the directory, opened once
  and kept open by the store, is checked with one ``fstat`` (made anew
  if it was removed), and one ``utime`` per changed stream (about 2 us
  each).

Private, and no links followed (storage.opening): the directory is 0700
and its files 0600 whatever the umask; every operation is relative to
the store's checked directory descriptor, opens with O_NOFOLLOW and
touches with ``utime(..., follow_symlinks=False)``, and inotify watches
are added with IN_DONT_FOLLOW through /proc/self/fd.  An entry that is a
link or another user's makes the blocked command fail with a message
(StoreFailure) instead of being used.

Waiting
  ``Waiter(store, keys)`` arms Linux inotify watches (storage.inotify:
  ctypes, imported only there) on the streams' files; ``wait(timeout)`` sleeps in
  ``poll`` on the inotify descriptor: no CPU while idle, woken within
  microseconds of the writer's ``utime``.  Where inotify is unavailable
  (not Linux, no libc, out of inotify instances, read-only store) the
  waiter polls the change counters instead, every ``POLL_S`` seconds at
  first, backing off to ``POLL_MAX_S`` while nothing changes; running
  out of inotify instances or watches is said once per process on
  stderr (it is a system limit the user can raise).

One inotify instance per process is shared by all its waiters
(storage.inotify.Hub): xs serve's hundreds of blocked clients need one
instance, not one each, and a change rings only the waiters of the
stream that changed.

A group's blocked readers take turns (``wait_until``'s ``turn``, a
storage.consumers.Queue): only the one first in line watches the
stream; the others watch their own queue ticket, which the one before
them touches when it leaves.  A new entry wakes one reader of each
group, not all of them.

Stepping aside for a compaction (storage.ops.compact).  Every waiter
also watches ``<store>/lock``, which ``xs compact`` touches when it asks
the store's users to let go (only IN_ATTRIB rings; a polling waiter asks
at each look).  ``wait_until`` is where they do: at the top of each
round, no transaction open, the watches armed, ``step_aside(store)``
closes the store, waits for the compaction and opens the new file
(storage.store.Store.step_aside), and the round's attempt then looks at
it.  The watches stay armed throughout, so the race rule below holds
across the reopening.

The race rule: arm first, then check, then wait.  A change committed
after the watch is armed always wakes the waiter, so a caller that
re-checks after arming (``wait_until`` does) never misses one.
"""
import _thread
import os
import sys
import time

from storage.files import NOTIFY_DIR, STORE_LOCK  # inside the store directory

if False:  # typing only (not imported at run time)
    from storage.inotify import Hub

POLL_S = 0.005            # fallback poll interval (no inotify): the first one ...
POLL_MAX_S = 0.1          # ... doubled while nothing changes, up to this
MAX_POLL_MS = (1 << 31) - 1   # poll(2) takes an int: longer waits are made of several


_blake2b = None           # hash of stream names (imported on first use)
_IN_IGNORED = 0x8000      # inotify(7): the watched file went away (storage.inotify.IN_IGNORED)
_IN_ATTRIB = 0x4          # ... its attributes changed: a compaction's touch (storage.inotify.IN_ATTRIB)
_ONE = (1).to_bytes(8, sys.byteorder)   # what the hub writes to a waiter's eventfd (or pipe)
_notify_names: dict = {}        # stream name -> notification file name


# ------------------------------------------------------------------ writers

def notify_name(name):
    """File name of the notification file of stream ``name`` (bytes)."""
    global _blake2b
    if _blake2b is None:
        try:
            from _blake2 import blake2b
        except ImportError:  # pragma: no cover
            from hashlib import blake2b
        _blake2b = blake2b
    return _blake2b(name, digest_size=16).hexdigest()


def notify(store, names):
    """Called after a commit that changed the streams ``names``: touch the
    notification files of those that readers watch.  Never raises, never
    creates files, never follows a link."""
    d = store.notify_dir()
    if d is None:
        return
    cache, utime = _notify_names, os.utime
    for name in names:
        n = cache.get(name)
        if n is None:
            if len(cache) > 4096:
                cache.clear()
            n = cache[name] = notify_name(name)
        try:
            utime(n, dir_fd=d, follow_symlinks=False)
        except OSError:
            pass


def refused(store, e):
    """A StoreFailure for an entry of the store that must not be used."""
    from storage.txn import StoreFailure
    return StoreFailure("refusing to use store %s: %s" % (store.path, e))


def notify_dir(store):
    """The store's notification directory (made if missing), open: the
    caller closes it.  Raises StoreFailure for a link or another user's
    directory, OSError otherwise."""
    from storage.files import UnsafeEntry, open_private_dir
    if store.dir_fd is None:
        raise OSError("the store is closed")
    try:
        return open_private_dir(store.dir_fd, NOTIFY_DIR, NOTIFY_DIR)
    except UnsafeEntry as e:
        raise refused(store, e)


# ------------------------------------------------------------------ readers

def versions(store, keys):
    """The change counters of ``keys`` (None for never-changed)."""
    return store.run(lambda tx: tx.change_counters(keys), write=False)


_warned = False           # the "out of inotify" warning was given


def _out_of_inotify(err):
    """Say once per process that a system limit on inotify made blocked
    reads poll (EMFILE: instances, ENOSPC: watches)."""
    global _warned
    import errno
    if _warned or err not in (errno.EMFILE, errno.ENOSPC):
        return
    _warned = True
    what = "instances (fs.inotify.max_user_instances)" if err == errno.EMFILE \
        else "watches (fs.inotify.max_user_watches)"
    try:
        import sys
        sys.stderr.write("xs: warning: out of inotify %s; blocked reads poll every %g to %g ms\n"
                         % (what, POLL_S * 1000, POLL_MAX_S * 1000))
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


class Waiter:
    """Watches on the notification files of ``keys``, armed on creation.

    ``wait(timeout_s)`` returns True when a watched stream may have
    changed since the watch was armed (or since the last ``wait``), False
    on timeout.  ``watch_fds``: extra file descriptors (e.g. stdout) whose
    error/hang-up ends a wait early and sets ``hangup``.  ``wake_fds``:
    descriptors (a Doorbell's) whose data ends a wait early (the data is
    read and dropped).  ``files``: other files to watch, by path (a group
    reader's queue ticket, storage.consumers).  ``add(keys)`` watches more
    streams.  Use as a context manager, or call ``close``.

    The watches are the process's one inotify instance's
    (storage.inotify.Hub): its thread rings this waiter, through a
    descriptor of its own, only for a file it watches."""

    def __init__(self, store, keys, watch_fds=(), wake_fds=(), files=()):
        import select
        self.store = store
        self.keys = list(dict.fromkeys(keys))
        self.hangup = False
        self._files = list(files)
        self._hub: Hub | None = None    # storage.inotify.Hub (None: polling)
        self._bell: int | None = None   # the descriptor the hub rings (an eventfd, or a pipe's read end)
        self._bell_w: int | None = None  # ... and its write end (a pipe's; the eventfd itself)
        self._wds: set[int] = set()     # our watch descriptors
        self._lost = False         # a watched file went away: watch again
        self._before = None        # change counters (polling fallback)
        self._step = POLL_S        # the next poll interval (polling fallback)
        self._watch_fds = tuple(watch_fds)
        self._wake_fds = tuple(wake_fds)
        self._aside: _AsideBell | None = None    # our subscription to <store>/lock (a compaction's request)
        try:
            self._arm()
        except OSError:
            self._release()
        except BaseException:
            self._release()
            raise
        if self._hub is None:
            self._before = versions(store, self.keys)
        self._poll = select.poll()
        if self._hub is not None:
            self._poll.register(self._bell, select.POLLIN)
        for fd in self._watch_fds:
            self._poll.register(fd, 0)   # POLLERR / POLLHUP are always reported
        for fd in self._wake_fds:
            self._poll.register(fd, select.POLLIN)

    @property
    def uses_inotify(self):
        return self._hub is not None

    def _arm(self):
        from storage import inotify  # only a waiter needs it (not a one-shot write's notify)
        if inotify.available() is None or self.store.readonly:
            return
        try:
            hub = inotify.hub()
        except OSError as e:
            _out_of_inotify(e.errno)
            raise
        if hasattr(os, "eventfd"):
            self._bell = self._bell_w = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        else:                                              # pragma: no cover (Python < 3.10)
            self._bell, self._bell_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._hub = hub
        self._watch(self.keys)
        self._watch_lock()

    def _watch_lock(self):
        """Watch ``<store>/lock`` for a compaction's touch (its request to
        step aside, storage.ops.compact): only its IN_ATTRIB rings us
        (every process closing the store makes IN_CLOSE_WRITE there)."""
        assert self._hub is not None
        if getattr(self.store, "lock_fd", None) is None:
            return                  # no store lock: nothing can be compacted under us
        bell = _AsideBell(self)
        try:
            wd = self._hub.watch(os.path.join(self.store.root, STORE_LOCK), bell)
        except OSError as e:
            _out_of_inotify(e.errno)
            raise
        self._aside = bell
        bell.wd = wd

    def ring(self, mask):
        """The hub's thread: a watched file changed (called under the
        hub's lock, never after ``_release``)."""
        if mask & _IN_IGNORED:
            self._lost = True
        assert self._bell_w is not None     # armed before the first watch, never rung after _release
        try:
            os.write(self._bell_w, _ONE)
        except OSError:             # full: a wake-up is pending anyway
            pass

    def _watch(self, keys):
        """Make the notification files of ``keys`` (private, no link
        followed) and watch them, and ``files``."""
        from storage.files import UnsafeEntry, make_private_file
        assert self._hub is not None        # only while inotify is in use
        d = notify_dir(self.store)
        try:
            names = [notify_name(k) for k in keys]
            for n in names:
                try:
                    make_private_file(d, n, "%s/%s" % (NOTIFY_DIR, n))
                except UnsafeEntry as e:
                    raise refused(self.store, e)
            base = "/proc/self/fd/%d/" % d
            if not os.path.isdir(base):
                base = os.path.join(self.store.root, NOTIFY_DIR, "")
            try:
                for path in [base + n for n in names] + self._files:
                    self._wds.add(self._hub.watch(path, self))
            except OSError as e:
                _out_of_inotify(e.errno)
                raise
        finally:
            os.close(d)

    def add(self, keys):
        """Watch the streams ``keys`` too (armed when this returns)."""
        new = [k for k in dict.fromkeys(keys) if k not in self.keys]
        self.keys.extend(new)
        if self._hub is None:
            self._before = versions(self.store, self.keys)
            return
        try:
            self._watch(new)
        except OSError:
            self._fallback()

    def wait(self, timeout_s=None):
        """Sleep until a watched stream changes or ``timeout_s`` passes
        (any length: a wait longer than poll(2) can take is made of
        several)."""
        self.store.check_readers()
        if self._hub is None:
            return self._poll_wait(timeout_s)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if deadline is None:
                ms = -1
            else:  # never wake before the deadline
                ms = max(0, int((deadline - time.monotonic()) * 1000.0 + 0.999))
                ms = min(ms, MAX_POLL_MS)
            ready = self._poll.poll(ms)
            if not ready:
                if deadline is not None and time.monotonic() < deadline:
                    continue
                return False
            for fd, ev in ready:
                if fd != self._bell and self._other(fd):
                    return True
            self._drain()
            return True

    def _drain(self):
        """Take the hub's rings; watch again a file that went away (a
        spurious wake-up, re-checked by the caller)."""
        assert self._bell is not None       # only while inotify is in use
        try:
            os.read(self._bell, 4096)
        except OSError:
            pass
        if self._lost:
            self._lost = False
            try:
                self._watch(self.keys)
            except OSError:
                self._fallback()

    def _other(self, fd):
        """A descriptor other than inotify's is ready: a wake-up (its data
        dropped) or a hang-up (``hangup`` set).  True either way."""
        if fd in self._wake_fds:
            try:
                os.read(fd, 4096)
            except OSError:
                pass
            return True
        self.hangup = True
        return True

    def _fallback(self):
        """Give up inotify (e.g. out of watches): poll from now on."""
        if self._hub is not None:
            assert self._bell is not None   # armed before the hub is set
            try:
                self._poll.unregister(self._bell)
            except (KeyError, ValueError):
                pass
        self._release()
        self._before = versions(self.store, self.keys)

    def _poll_wait(self, timeout_s):
        """Poll the change counters: every POLL_S at first, twice as
        long after each look that found nothing, up to POLL_MAX_S (many
        blocked readers out of inotify instances must not keep the
        machine busy); back to POLL_S after a change."""
        start = time.monotonic()
        while True:
            step = self._step
            if timeout_s is not None:
                left = timeout_s - (time.monotonic() - start)
                if left <= 0:
                    return False
                step = min(step, left)
            if self._watch_fds or self._wake_fds:
                ready = self._poll.poll(int(step * 1000) or 1)
                if ready:
                    for fd, _ in ready:
                        self._other(fd)
                    return True
            else:
                time.sleep(step)
            if _asked(self.store):
                return True          # a compaction asks us to step aside (the caller does)
            now = versions(self.store, self.keys)
            if now != self._before:
                self._before = now
                self._step = POLL_S
                return True
            self._step = min(self._step * 2, POLL_MAX_S)

    def _release(self):
        hub, self._hub = self._hub, None
        aside, self._aside = self._aside, None
        if hub is not None:
            for wd in self._wds:
                hub.unwatch(wd, self)      # never rung after this
            if aside is not None:
                hub.unwatch(aside.wd, aside)
        self._wds = set()
        bells = {fd for fd in (self._bell, self._bell_w) if fd is not None}
        self._bell = self._bell_w = None
        for fd in bells:
            try:
                os.close(fd)
            except OSError:
                pass

    def close(self):
        self._release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class _AsideBell:
    """A Waiter's subscription to ``<store>/lock``: rings the waiter when a
    compaction touches the file (IN_ATTRIB), not when a process closes it."""
    __slots__ = ("waiter", "wd")

    def __init__(self, waiter):
        self.waiter = waiter
        self.wd = -1

    def ring(self, mask):
        if mask & _IN_ATTRIB:
            self.waiter.ring(0)


def _asked(store):
    """Whether a compaction asks ``store``'s process to step aside (False
    for a store that cannot tell: not a storage.store.Store)."""
    asked = getattr(store, "aside_requested", None)
    return asked is not None and asked()


def step_aside(store):
    """At a safe point (no transaction open): let go of the store while a
    compaction that asks for it runs, then open it again
    (storage.store.Store.step_aside; xs serve's StoreLock takes its lock
    first).  True if it did."""
    if not _asked(store):
        return False
    return bool(store.step_aside())


# ------------------------------------------------------------ the wait loop

class Cancelled(Exception):
    """A wait ended by its Canceller (a client gone, a server stopping)."""


class Canceller:
    """Ends a wait from another thread at once, whether the waiter sleeps
    on inotify or polls: the wait also watches the read end of a pipe,
    and ``cancel`` closes the write end, which the waiter's poll sees as
    a hang-up."""

    def __init__(self):
        self.fd: int | None
        self._w: int | None
        self.fd, self._w = os.pipe()
        self._set = False
        self._mutex = _thread.allocate_lock()      # cancel and close may race (two threads)

    def cancel(self):
        with self._mutex:
            self._set = True
            w, self._w = self._w, None
        if w is not None:
            os.close(w)

    def is_set(self):
        return self._set

    def close(self):
        """Cancel, and give the pipe back (the wait is over)."""
        self.cancel()
        with self._mutex:
            fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)


class Doorbell:
    """Wakes a wait_until from another thread so that its attempt runs
    again (``xs worker``: a command finished): ``ring`` writes a byte to
    a pipe the wait polls."""

    def __init__(self):
        self.fd, self._w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def ring(self):
        try:
            os.write(self._w, b"!")
        except OSError:             # full (a wake-up is pending anyway) or closed
            pass

    def close(self):
        for fd in (self._w, self.fd):
            try:
                os.close(fd)
            except OSError:
                pass


TURN_CHECK_S = 1.0        # a reader waiting behind another process's looks anyway this often


def wait_until(store, keys, attempt, timeout_s=None, next_wake=None, cancel=None, hangup_fds=(), bell=None,
               turn=None):
    """The one wait loop of xs: blocked reads (XREAD / XREADGROUP ...
    BLOCK, in script mode, at the prompt and under xs serve), ``xs tail
    -f`` and ``xs worker``.  Arm the watches of ``keys``, then call
    ``attempt(woken)`` until it returns something other than None, which
    is returned; None when ``timeout_s`` seconds (None: no limit) passed
    first.  ``woken`` is False on the first call.

    ``next_wake()`` (optional): seconds until a retry may succeed without
    any write (XREADGROUP ... CLAIM: an entry becoming idle enough; a
    worker's retry or heartbeat), or None.  ``cancel`` (a Canceller):
    raises Cancelled within one poll step of ``cancel.cancel()``, before
    any further attempt.  ``hangup_fds``: descriptors whose hang-up (the
    reader of a pipe gone) raises Cancelled.  ``bell`` (a Doorbell): its
    ring wakes the wait for another attempt.

    ``turn`` (a storage.consumers.Queue: the consumers of one group
    blocked on one stream): while others are before us in line, watch
    only our ticket, which the one before us touches when it leaves;
    once first, watch ``keys``.  So a new entry wakes one reader of the
    group, and the reader it serves wakes the next one as it goes.  When
    the one just before us is another process's, look anyway every
    TURN_CHECK_S: it may be stopped (Ctrl-Z) or have died.  (Our own
    process's readers are alive while we are, and each leaves with the
    same touch.)

    Arm, then attempt, then sleep: a change committed after the watches
    are armed always wakes the loop, so none is missed."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    fds = tuple(hangup_fds) + (() if cancel is None else (cancel.fd,))
    ticket = None if turn is None else turn.path
    with Waiter(store, keys if ticket is None else (), fds, () if bell is None else (bell.fd,),
                () if ticket is None else (ticket,)) as waiter:
        behind = ticket is not None          # not yet watching keys: waiting for our turn
        woken = False
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            # the safe point: no transaction open, the watches armed (they
            # stay armed while we are aside, and the attempt below looks
            # at the store opened again: arm, check, wait still holds)
            if step_aside(store):
                woken = True
            look = False                     # behind another process's reader: look anyway now and then
            if behind:
                ahead = turn.ahead() if waiter.uses_inotify else None
                if ahead is None:
                    waiter.add(keys)         # our turn: arm, then attempt
                    behind = False
                else:
                    look = ahead != os.getpid()
            r = attempt(woken)
            if r is not None:
                return r
            wake_in = next_wake() if next_wake is not None and not behind else None
            if look:
                wake_in = TURN_CHECK_S if wake_in is None else min(wake_in, TURN_CHECK_S)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wake_in = left if wake_in is None else min(wake_in, left)
            waiter.wait(wake_in)
            if waiter.hangup:
                raise Cancelled()
            woken = True
