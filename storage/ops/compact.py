"""Compaction: give a store's free pages back to the file system
(``xs compact``).  No click, no rich.

LMDB never shrinks data.mdb: pages freed by XTRIM / XDEL / DEL are
reused by later writes, but a store trimmed from 200,000 entries to none
keeps its 12.8 MB.  The only way to give the space back is a compacting
copy (``mdb_env_copy2(MDB_CP_COMPACT)``: live pages only, renumbered)
that then replaces data.mdb.

The exclusion.  Replacing data.mdb under a process that has it open is
the danger: that process keeps reading and writing the old, unlinked
inode, and every write it acknowledges after the copy is lost.  So every
process that opens a store (storage.store.Store, read-only opens too)
holds ``<store>/lock`` (0600) shared with flock(2) from before it looks
at data.mdb until after its environment is closed, and compaction holds
it exclusively from before the copy until after the rename.  Whoever
opens the store while compaction runs waits for it (flock blocks) and
then opens the new file; whoever had it open before makes compaction
wait, unless it steps aside (below).  LMDB's own lock file needs nothing: when the last process closed
the environment, the next one to open it finds itself alone (LMDB's
exclusive fcntl probe of lock.mdb) and resets the reader table and the
transaction counter from the new data.mdb.

Long-running processes step aside.  ``xs tail -f``, ``xs worker``, a
blocked ``XREAD ... BLOCK 0`` and ``xs serve`` keep the store open (and
so the shared lock) for as long as they run; a compaction that only
waited for them would wait for ever (the weekly cron would fail every
week).  So compaction asks them to let go, and they do so at a safe
point:

* The request.  Compaction holds an exclusive POSIX lock on byte 2 of
  ``<store>/lock`` (storage.files.request_aside) from before it first
  tries the exclusive flock until it closes the file, and right after
  taking it touches the file (utime: IN_ATTRIB).  A lock, not a file:
  the kernel drops it when the compaction ends, fails or is killed, so
  a request never outlives its compaction.  Asking costs a process one
  fcntl(F_GETLK) (``Store.aside_requested``).
* The wake-up.  Every waiter of storage.blocking also watches
  ``<store>/lock`` with the process's one inotify instance (only
  IN_ATTRIB rings: every process closing the store makes IN_CLOSE_WRITE
  there); a waiter that polls instead (no inotify) asks at each poll.
  So an idle ``tail -f``, worker or blocked read wakes at once.
* The safe point.  Only ``storage.blocking.wait_until``, the one wait
  loop of tail -f, the worker and every blocked read, steps aside: at
  the top of each round, before the attempt, when no transaction of the
  process is open and the watches are armed.  A process busy elsewhere
  (in a transaction, a long history being printed, a pipe whose reader
  stalls) makes compaction wait, up to ``--wait`` as before, and steps
  aside when it comes back to the loop within it; otherwise compaction
  fails naming it (pids from /proc/locks), having changed nothing.
* Stepping aside (``Store.step_aside``, the same object, so callers'
  references stay valid): close the LMDB environment, close the lock
  file (the shared flock goes, and this process's POSIX locks on the
  file with it, the writer mark included), keep the store directory's
  descriptor (``root`` and the inotify watches on notify/ stay valid);
  block until the request is withdrawn (a shared POSIX lock on byte 2,
  taken and given back), then take the store lock as any open does
  (the gate, the shared flock: it waits while the compaction still
  holds it), check data.mdb and lock.mdb again, open the new data.mdb
  and its named databases (``env`` and ``dbs`` are new; a Txn never
  outlives a transaction, so nothing holds the old ones).
* The race rule still holds.  The watches of the streams stay armed
  while the process is aside (they are on notify/ files, which
  compaction leaves alone), and the round that follows re-checks the
  store in a fresh transaction on the new file: arm, check, wait.
  Nobody can write while compaction holds the lock exclusively; a write
  committed before it (or after it) touched the notify files and wakes
  the waiter as always.
* xs serve.  Its engine thread, blocking pool and event loop share one
  Store, serialised by the server's StoreLock.  The engine thread steps
  aside while idle (woken by its own inotify watch of the lock file, or
  looking every second without inotify) and between two group commits
  when busy, holding the StoreLock throughout: the pool's blocked reads
  and the event loop's reads wait for it (the loop never blocks on it:
  it hands its job to the engine).  A blocked client's wait steps aside
  itself through the same StoreLock (whoever comes second finds the
  request gone).  Clients' commands wait while the compaction runs, as a
  one-shot command's open does.
* Commands started while compaction runs wait for it (the gate, then
  the flock), as before; one-shot commands that were running finish
  first (compaction waits for them, GATE_S holding new ones back).
* A failed return (data.mdb gone, a store made unsafe, a full disk): the
  store stays closed and every later transaction fails with one line,
  ``the store PATH was closed for a compaction and could not be opened
  again: REASON``; ``tail -f``, a blocked read and the worker exit 1
  with it, xs serve logs it and answers each command with it.  A signal
  while aside (Ctrl-C, a worker's SIGTERM) first takes the store back
  (the worker still acknowledges what it finished) and then goes on.
* Not stepping aside: the interactive prompt and script mode reading a
  pipe, idle waiting for input rather than in the wait loop; the
  in-process client's threads other than its blocked reads and engine.
  Compaction names them after ``--wait``.

Durability is unchanged: the processes that step aside close their
environment before they give back the lock, and open the store again
only after taking the lock back, which compaction gives up only after
the rename; nobody reads or writes a replaced file.  With the request,
compaction waits ASIDE_S before telling the caller it waits (the
holders normally go within milliseconds).  Note that a pending
exclusive flock does not hold new shared ones back: a store opened by
one-shot commands without pause could keep compaction waiting, which
the gate below handles.

Durability: the copy is written to a private temporary file in the
store directory (``data.mdb.compact-<pid>-<ns>``, O_EXCL, 0600),
checked (every database has as many records as in the store), fsync'ed,
renamed over data.mdb, and the directory fsync'ed.  A compaction killed
at any point leaves either the old data.mdb or the complete new one;
its temporary file is removed by the next compaction.  The copy keeps
everything in the file: every named database, the format version.  The
map size needs nothing: a store is opened with headroom computed from
the size of its data file (storage.opening._headroom).
"""
import errno
import fcntl
import os
import stat
import time

import lmdb

from storage import codec
from storage.files import (
    NeedsWriteAccess,
    StoreError,
    _lstat,
    _store_dir,
    request_aside,
    take_store_lock,
    unsafe_reason,
)
from storage.ops.overview import live_bytes
from storage.store import MAX_DBS, Store

TEMP_PREFIX = "data.mdb.compact-"
POLL_S = 0.05
GATE_S = 1.0             # longest time compaction holds new opens back
ASIDE_S = 1.0            # how long the holders have to step aside before compaction says it waits


class CompactError(Exception):
    """Compaction did not happen (the message is for a person); the store
    is as it was."""


class Result:
    """What a compaction did (or, with dry_run, would do)."""

    __slots__ = ("path", "dry_run", "before", "after", "seconds", "waited", "holders")

    def __init__(self, path, dry_run):
        self.path = path
        self.dry_run = dry_run
        self.before = self.after = 0
        self.seconds = self.waited = 0.0
        self.holders = []

    def as_dict(self):
        return {"path": self.path, "dry_run": self.dry_run, "before": self.before, "after": self.after,
                "freed": max(0, self.before - self.after), "seconds": round(self.seconds, 3),
                "waited": round(self.waited, 3), "holders": self.holders}


def compact(path, wait=30.0, dry_run=False, durable=True, on_wait=None):
    """Compact the store at ``path``; returns a Result.  ``on_wait(holders)``
    is called once if the store is in use (holders: a list of (pid,
    command line) pairs, perhaps empty where /proc/locks is missing);
    after ``wait`` seconds of that, CompactError.  With ``dry_run`` only
    measure: data.mdb's size and about what it would be after."""
    res = Result(path, dry_run)
    t0 = time.monotonic()
    try:
        dir_fd, _ = _store_dir(path, create=False)
    except NeedsWriteAccess:
        raise CompactError("no such store: %s" % path)
    except StoreError as e:
        raise CompactError(str(e))
    except OSError as e:
        raise CompactError("cannot open store %s: %s" % (path, e.strerror or e))
    except Exception as e:                     # UnsafeEntry
        raise CompactError("refusing to open store %s: %s" % (path, e))
    try:
        if _lstat(dir_fd, "data.mdb") is None:
            raise CompactError("no such store: %s (no data.mdb)" % path)
        if dry_run:
            return _measure(path, dir_fd, res, t0)
        lock = _exclusive(path, dir_fd, wait, on_wait, res)
        try:
            kill_point("locked")
            _sweep(dir_fd)
            _copy_and_replace(path, dir_fd, durable, res)
        finally:
            os.close(lock)
    finally:
        os.close(dir_fd)
    res.seconds = time.monotonic() - t0
    return res


def holders(dir_fd):
    """The processes holding ``<store>/lock`` (pid, command line), from
    /proc/locks; [] where it cannot be read."""
    try:
        st = os.stat("lock", dir_fd=dir_fd, follow_symlinks=False)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    want = "%02x:%02x:%d" % (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    pids = []
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or parts[1] == "->" or parts[1] != "FLOCK":
            continue
        if parts[5] == want:
            try:
                pid = int(parts[4])
            except ValueError:
                continue
            if pid != os.getpid() and pid not in pids:
                pids.append(pid)
    return [(pid, _cmdline(pid)) for pid in sorted(pids)]


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return ""
    words = [a.decode("utf-8", "replace") for a in args if a]
    # python3 -m xstream_cli ... / .../bin/xs ...: show it as "xs ..."
    for i, a in enumerate(words):
        if a == "xstream_cli" and i and words[i - 1] == "-m":
            words = ["xs"] + words[i + 1:]
            break
        if os.path.basename(a) == "xs":
            words = ["xs"] + words[i + 1:]
            break
    text = " ".join(" ".join(words).split())     # one line: newlines in an argument too
    return text if len(text) <= 100 else text[:97] + "..."


def describe(hs):
    """"pid 123 (xs tail -f s), pid 456" for a message."""
    return ", ".join("pid %d (%s)" % (p, c) if c else "pid %d" % p for p, c in hs)


def _exclusive(path, dir_fd, wait, on_wait, res):
    """The store lock, held exclusively, or CompactError after ``wait`` s.

    Linux grants a shared flock while an exclusive one waits, so a store
    opened by one short-lived command after another could keep the lock
    shared for ever.  So while it is held, compaction closes the gate
    that every open passes first (a POSIX lock on byte 0 of the lock
    file, see storage.store.take_store_lock) for up to GATE_S: new opens
    wait, the short-lived users finish, the lock is ours.  If that does
    not do it, the holders are long-running (tail -f, a worker, the
    prompt): the gate is opened again at once, so that the others are
    held up for GATE_S at most, and compaction waits without it, closing
    it again only if those holders go and others come."""
    t0 = time.monotonic()
    deadline = t0 + wait
    told = False
    long_running = None          # pids that held the lock through a closed gate
    try:
        lock = take_store_lock(dir_fd, exclusive=True, wait=False, open_only=True)
    except OSError as e:
        raise CompactError("cannot lock store %s: %s" % (path, e.strerror or e))
    except Exception as e:                     # UnsafeEntry
        raise CompactError("refusing to compact store %s: %s" % (path, e))
    ok = False
    asked = False                # our request to step aside is out (held until the lock is closed)
    try:
        while True:
            if not asked:
                asked = request_aside(lock)    # another compaction may hold it: again next time
            if _try_flock(lock):
                ok = True
                return lock
            now = time.monotonic()
            res.waited = now - t0
            hs = holders(dir_fd)
            if not told and (not asked or now - t0 >= min(ASIDE_S, wait)):
                told = True
                res.holders = hs
                if on_wait is not None:
                    on_wait(hs)
            if now >= deadline:
                break
            pids = {p for p, _ in hs}
            if long_running is None or (pids and not pids & long_running):
                if _gated(lock, min(GATE_S, deadline - now)):
                    ok = True
                    return lock
                long_running = {p for p, _ in holders(dir_fd)}
                continue
            time.sleep(POLL_S)
        hs = holders(dir_fd) or res.holders
        res.waited = time.monotonic() - t0
        n = len(hs)
        who = ("%d process%s using it: %s" % (n, "" if n == 1 else "es", describe(hs)) if hs
               else "other processes using it")
        raise CompactError("cannot compact store %s: %s (waited %gs; nothing was changed: stop them, or "
                           "give --wait more seconds)" % (path, who, wait))
    finally:
        if not ok:
            os.close(lock)


def _try_flock(lock):
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _gated(lock, seconds):
    """Close the gate for up to ``seconds`` while trying for the lock;
    whether it was got.  The gate is open again when this returns."""
    fcntl.lockf(lock, fcntl.LOCK_EX, 1, 0)
    try:
        end = time.monotonic() + max(0.0, seconds)
        while True:
            if _try_flock(lock):
                return True
            if time.monotonic() >= end:
                return False
            time.sleep(POLL_S / 5)
    finally:
        fcntl.lockf(lock, fcntl.LOCK_UN, 1, 0)


def _measure(path, dir_fd, res, t0):
    st = _lstat(dir_fd, "data.mdb")
    res.before = st.st_size
    res.holders = holders(dir_fd)
    try:
        store = Store(path, readonly=True, create=False)
    except StoreError as e:
        raise CompactError(str(e))
    try:
        res.after = min(res.before, live_bytes(store.env))
    finally:
        store.close()
    res.seconds = time.monotonic() - t0
    return res


def _counts(env):
    """{database name: records} of every named database, and b"" for the
    main one (which lists them)."""
    out = {b"": env.stat()["entries"]}
    with env.begin() as t:
        names = [k for k, _ in t.cursor()]
    for name in names:
        db = env.open_db(name, create=False)
        with env.begin() as t:
            out[name] = t.stat(db)["entries"]
    return out


def _copy_and_replace(path, dir_fd, durable, res):
    try:
        store = Store(path, durable=durable, create=False, shared_lock=False)
    except StoreError as e:
        raise CompactError(str(e))
    tmp = "%s%d-%d" % (TEMP_PREFIX, os.getpid(), time.monotonic_ns())
    made = False
    try:
        try:
            res.before = os.stat("data.mdb", dir_fd=dir_fd, follow_symlinks=False).st_size
            want = _counts(store.env)
            f = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                        dir_fd=dir_fd)
            made = True
            try:
                if stat.S_IMODE(os.fstat(f).st_mode) != 0o600:
                    os.fchmod(f, 0o600)
                store.env.copyfd(f, compact=True)
                os.fsync(f)
                res.after = os.fstat(f).st_size
            finally:
                os.close(f)
            kill_point("copied")
            got = _copy_counts(store.root, tmp)
            if got != want:
                raise CompactError("compacting store %s: the copy does not match the store (nothing was "
                                   "changed)" % path)
            kill_point("verified")
        except lmdb.Error as e:
            raise CompactError("compacting store %s failed: %s (nothing was changed)" % (path, _reason(e)))
        except OSError as e:
            what = "no space left on device" if e.errno in (errno.ENOSPC, errno.EDQUOT) else (e.strerror or e)
            raise CompactError("compacting store %s failed: %s (nothing was changed)" % (path, what))
        finally:
            store.close()
        # nobody has data.mdb open (the lock is ours alone): replace it
        st = _lstat(dir_fd, "data.mdb")
        why = unsafe_reason(st, "file") if st is not None else "is missing"
        if why:
            raise CompactError("refusing to compact store %s: data.mdb %s" % (path, why))
        os.rename(tmp, "data.mdb", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        made = False
        kill_point("replaced")
        if durable:
            os.fsync(dir_fd)
    finally:
        if made:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except OSError:
                pass


KILL_ENV = "XS_COMPACT_KILL_AT"
KILL_POINTS = ("locked", "copied", "verified", "replaced")


def kill_point(step):
    """SIGKILL this process at ``step`` when XS_COMPACT_KILL_AT names it
    (the kill-safety test): locked (the store lock held, nothing written),
    copied (the copy written and synced), verified (the copy checked, not
    yet renamed), replaced (renamed over data.mdb, the directory not yet
    synced)."""
    if os.environ.get(KILL_ENV) == step:
        import signal
        os.kill(os.getpid(), signal.SIGKILL)


def _copy_counts(root, name):
    env = lmdb.open("%s/%s" % (root, name), subdir=False, lock=False, readonly=True, max_dbs=MAX_DBS)
    try:
        with env.begin() as t:
            raw = t.get(codec.META_FORMAT, db=env.open_db(b"meta", txn=t, create=False))
        if raw is None:
            return None
        return _counts(env)
    finally:
        env.close()


def _reason(e):
    text = str(e)
    return text.split(": ", 1)[-1] if ": " in text else text


def _sweep(dir_fd):
    """Remove the temporary files of compactions that were killed."""
    for name in os.listdir(dir_fd):
        if not name.startswith(TEMP_PREFIX):
            continue
        try:
            pid = int(name[len(TEMP_PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        try:
            os.kill(pid, 0)
            continue                           # its compaction is still running
        except ProcessLookupError:
            pass
        except OSError:
            continue
        st = _lstat(dir_fd, name)
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError:
                pass
