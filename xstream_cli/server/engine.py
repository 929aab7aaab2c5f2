"""The served store: where each job runs, with group commit.

Group commit.  Connections hand the engine ``Job``s (the commands one
client sent together, in order); the jobs of one event-loop iteration
are run together in ONE LMDB transaction and committed (one fsync), then
each job is answered: every reply leaves only after the commit that
made it durable.  The transaction has savepoints (storage.txn): each
write verb is atomic on its own, so a command that fails changes nothing
and does not affect the other commands of the batch (script mode's rule,
xstream_cli.execution.session).  A batch of reads only is run in a read
transaction (no fsync).

Threads and locks.  A batch runs in one of four places, and one
method decides which, ``Engine.run``: the server's connections
(Server._hand_over, Server._pump) and the in-process client's threads
(xstream_cli.client, whose thread plays the loop's part below, except
that it may wait and read long) all call it:

* the event loop's thread, when the engine thread has nothing queued and
  xs's write lock is free (storage.store.hold_write, tried without
  waiting): run, committed and answered at once, with no hand-off, as
  redis-server does under ``appendfsync always`` (its fsync in its loop
  too).  Reads only (a client's reads, sent at once by Server._pump)
  likewise, whatever the engine thread has queued, when no transaction
  of this process is open (the StoreLock);
* the engine thread, when the lock is not free: another process writes
  (an import, a compaction, a writer stopped with Ctrl-Z) and may hold
  it for long.  There only the batch waits -- for the write lock first,
  holding nothing else -- while the loop goes on reading, parsing,
  answering PING and reads, and handling SIGTERM.  While it commits,
  requests pile up and make its next batch; when that commit took long,
  the next one waits a little for the clients it answered
  (``Engine._gather``), so that clients do not split into two halves
  taking turns;
* the readers' thread (``Engine.read_heavy``), for a read that may pass
  a page (Item.heavy: XRANGE of a whole stream, XINFO STREAM FULL ...;
  xstream_cli.server.paged), which would hold the loop for as long as it
  reads and must not wait behind a write waiting for the lock.  A big
  XREADGROUP writes: the engine thread runs it;
* a thread of the blocking pool, for a blocked read's wait (below).

The locks, always taken in this order: xs's write lock (a write; its
gate for this process's threads, then its byte of <store>/lock for other
processes), then the ``StoreLock`` (every transaction of this process:
LMDB may only resize its map when none is open), then LMDB's own.

A MULTI ... EXEC is one job run with ``exec_``: its commands share the
batch's transaction, so they are committed together or not at all; its
blocking reads do not block (as in Redis); its WATCHed keys are checked
first (their change counters, storage.blocking) and a change makes EXEC
answer null and run nothing.

Blocking.  A command that must wait (XREAD / XREADGROUP ... BLOCK with
nothing to serve, xstream_cli.execution.blocked.waits) stops its job there; the
connection then waits in a thread of the blocking pool with the same
code as the CLI (xstream_cli.execution.blocked.serve over storage.blocking's one
wait loop: notification files, the process's one inotify instance, a
group's readers taking turns), so it
wakes on a write by a served client and by any ``xs`` process alike,
and never holds up the event loop or other clients.  A wait is
cancelled (client gone, server stopping) through its Canceller: a pipe
the wait polls, so it ends at once even when it polls for lack of
inotify.

One lock (``StoreLock``) serialises the transactions of this process
(engine and blocked readers' re-checks): LMDB may only resize its map
when no transaction of the process is open.

Compaction.  ``xs compact`` asks the store's users to step aside
(storage.ops.compact): the engine thread, idle on its queue or between
two batches, takes the StoreLock, closes the store, waits for the
compaction and opens the new file (``StoreLock.step_aside``); meanwhile
clients' jobs wait in the queue (the event loop never blocks on the
lock: it hands its job over), and a blocked client's wait, woken by the
same request, steps aside through the same lock or finds it done.  Its
wake-up: a watch on <store>/lock in the process's inotify hub
(``_AsideWatch``), or a look every ASIDE_CHECK_S without inotify.

What the engine runs (``Item``, ``Job``, ``item_for``) is
xstream_cli.server.jobs; the ``StoreLock``, xstream_cli.server.storelock.
"""
import logging
import os
import queue
import threading
import time
from functools import partial

from storage import errors
from storage.blocking import Cancelled, Canceller
from storage.errors import RedisError
from storage.txn import Aborted, Retry, StoreFailure
from xstream_cli.execution.batch import Batch
from xstream_cli.server import paged
from xstream_cli.server.jobs import Item, Job, item_for  # noqa: F401 (re-exported: xstream_cli.client)
from xstream_cli.server.resp import Raw, encode
from xstream_cli.server.storelock import StoreLock

log = logging.getLogger("xs.serve")
MAX_BATCH_JOBS = 1024          # jobs in one group commit at most
GATHER_MIN_S = 0.0005          # a write batch that took this long makes the next one gather (Engine._gather) ...
GATHER_FRACTION = 0.25         # ... waiting at most this fraction of its time
GATHER_MAX_S = 0.002           # ... and at most this long
GATHER_BACKOFF = 16            # batches that do not wait after a wait that brought nobody
ASIDE_CHECK_S = 1.0            # the engine looks for a compaction's request at least this often
_ASIDE = object()              # in the job queue: a compaction asks the server to step aside


class Engine:
    """The engine thread and the blocking pool over one store."""

    def __init__(self, store):
        self.raw_store = store
        self.store = StoreLock(store)
        self.jobs = queue.SimpleQueue()  # Jobs, lists of Jobs (a loop iteration's), None to stop
        self.commands_processed = 0
        self.commits = 0
        self.dirty = 0               # changes committed (INFO rdb_changes_since_last_save: storage.txn.Txn.dirty)
        self.blocked = 0             # clients in a blocked wait now
        self._waits = set()          # the _BlockCall's running
        self._waits_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="xs-engine", daemon=True)
        self._reads = None           # the readers' thread's queue (read_heavy), made on first use
        self.submitted = 0           # jobs handed to the engine thread (submit) ...
        self.finished = 0            # ... and run by it (written by the engine thread only): idle()
        self._counting = threading.Lock()
        self.deliver = None          # fn([(done, result), ...]) called once per batch, or None
        self.last_commit = 0.0       # seconds the last batch took, if it wrote (_gather)
        self.last_owners = set()     # the clients it answered
        self._gather_skip = 0        # batches to start without gathering
        self._asked = False          # a compaction touched the store lock (_AsideWatch)
        self._aside_next = 0.0       # when to look for a request anyway (no inotify, a busy engine)
        self._aside_watch = None     # (hub, watch descriptor, subscriber)
        self.asides = 0              # times the server stepped aside for a compaction
        self.run_here = os.environ.get("XS_SERVE_ENGINE_ONLY") != "1"   # run (1: always the engine thread)

    def start(self):
        self._watch_aside()
        self._thread.start()

    # ------------------------------------------------------ compaction

    def _watch_aside(self):
        """Wake the engine thread when a compaction asks the store's users
        to step aside (its touch of <store>/lock, storage.ops.compact);
        without inotify the thread looks every ASIDE_CHECK_S."""
        raw = self.raw_store
        if getattr(raw, "pending", False) or getattr(raw, "lock_fd", None) is None:
            return
        from storage import inotify
        if inotify.available() is None:
            return
        try:
            hub = inotify.hub()
            sub = _AsideWatch(self)
            wd = hub.watch("%s/%s" % (raw.root, "lock"), sub)
        except OSError:
            return
        self._aside_watch = (hub, wd, sub)
        self._aside_next = float("inf")        # inotify rings: no need to look
        if raw.aside_requested():              # arm, then check: a request made before the watch
            sub.ring(0x4)

    def _unwatch_aside(self):
        w, self._aside_watch = self._aside_watch, None
        if w is not None:
            w[0].unwatch(w[1], w[2])

    def _step_aside(self):
        """Between batches, no transaction open: if a compaction asks for
        it, let go of the store until it is over (clients' commands wait
        meanwhile, as a one-shot command's open waits)."""
        self._asked = False
        if self._aside_watch is None:
            self._aside_next = time.monotonic() + ASIDE_CHECK_S
        if getattr(self.raw_store, "pending", False):
            return
        try:
            if self.raw_store.aside_requested() and self.store.step_aside():
                self.asides += 1
                log.info("stepped aside for a compaction of the store; opened it again")
        except StoreFailure as e:        # the store could not be opened again: every command says so
            log.error("%s", e)
        except Exception:
            log.exception("stepping aside for a compaction failed")

    def _next(self):
        """The next job from the queue, stepping aside for a compaction
        while idle (woken by _AsideWatch, or looking every ASIDE_CHECK_S
        without inotify)."""
        every = None if self._aside_watch is not None else ASIDE_CHECK_S
        while True:
            try:
                x = self.jobs.get(timeout=every)
            except queue.Empty:
                x = _ASIDE
            if x is _ASIDE or self._asked or time.monotonic() >= self._aside_next:
                self._step_aside()
            if x is not _ASIDE:
                return x

    def read_heavy(self, job):
        """A job of reads only, one of them big (Item.heavy): run in the
        readers' thread, so that it neither holds the event loop nor
        waits in the engine's queue behind a write that waits for
        another process's write lock."""
        if self._reads is None:
            self._reads = queue.SimpleQueue()
            threading.Thread(target=self._read_loop, name="xs-reads", daemon=True).start()
        self._reads.put(job)

    def _read_loop(self):
        while True:
            job = self._reads.get()
            if job is None:
                return
            self._answer([(job.done, self.execute([job], engine=False)[0])])

    def stop(self, timeout=None):
        """Finish the jobs queued, then end the engine thread; False if it
        is still running after ``timeout`` seconds (waiting for the
        store's write lock, which another process holds)."""
        self.jobs.put(None)
        if self._reads is not None:
            self._reads.put(None)
        self._thread.join(timeout)
        self._unwatch_aside()
        return not self._thread.is_alive()

    def run(self, jobs, loop=True):
        """Where ``jobs`` (a list of Jobs, in the order their clients sent
        them) run: the one place that decides, for the server's connections
        (Server._hand_over, Server._pump) and the in-process client's
        threads (xstream_cli.client) alike.  Returns [(job, (replies,
        blocked))] for the jobs run here, in the calling thread, committed
        (the caller answers them); every other job was handed over, and its
        ``done`` is called after its commit.

        * ``loop``: the caller is the event loop's thread, which must not
          wait, nor read long: a job of reads only with a big one among
          them (Item.heavy) goes to the readers' thread (``read_heavy``);
          with a big read that writes (XREADGROUP), the jobs go to the
          engine thread.  A caller that may wait (an in-process client's
          thread) runs a big read itself;
        * the rest run here when nothing forbids it: the StoreLock free
          (no transaction of this process open) and, for a write, xs's
          write lock free too (both tried without waiting), every job
          handed to the engine thread already run (``idle``: the order
          clients sent them in stays the order they run in) and
          ``run_here`` (XS_SERVE_ENGINE_ONLY=1 sends every write to the
          engine thread);
        * else the engine thread, which waits for them."""
        if loop and any(it.heavy for j in jobs for it in j.items):
            rest = []
            for j in jobs:
                if not j.write and any(it.heavy for it in j.items):
                    self.read_heavy(j)
                else:
                    rest.append(j)
            if rest:
                self.submit(rest if len(rest) > 1 else rest[0])
            return []
        if not any(j.write for j in jobs) or (self.run_here and self.idle()):
            res = self.execute(jobs, engine=False, nowait=True)
            if res is not None:
                return list(zip(jobs, res))
        self.submit(jobs if len(jobs) > 1 else jobs[0])
        return []

    def submit(self, job):
        """Queue a Job, or a list of Jobs (they cross to the engine thread
        in one hand-over)."""
        with self._counting:
            self.submitted += len(job) if type(job) is list else 1
        self.jobs.put(job)

    def idle(self):
        """Whether every job handed to the engine thread has run: only then
        may another thread run a later one first (Server._hand_over) --
        the engine may hold a job it took, gathering others (_gather),
        with its queue empty and no lock held."""
        return self.submitted == self.finished

    # ------------------------------------------------------------ the thread

    def _loop(self):
        jobs = self.jobs
        while True:
            batch = []
            x = self._next()
            missing = None           # clients of the last commit being waited for (_gather)
            while True:
                if x is _ASIDE:
                    x = []           # a compaction's request: seen after this batch
                if x is None:
                    if batch:
                        self._run_batch(batch)
                    return
                if type(x) is list:
                    batch += x
                    if missing:
                        missing.difference_update([j.owner for j in x])
                else:
                    batch.append(x)
                    if missing:
                        missing.discard(x.owner)
                if len(batch) >= MAX_BATCH_JOBS:
                    break
                if not jobs.empty():
                    x = jobs.get_nowait()
                    continue
                if missing is None:
                    missing, deadline = self._gather(batch)
                    waited = len(batch)
                if not missing:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    x = jobs.get(timeout=left)
                except queue.Empty:
                    break
            if missing and len(batch) == waited:
                self._gather_skip = GATHER_BACKOFF      # waited for nobody: not again for a while
            self._run_batch(batch)
            if self._asked or time.monotonic() >= self._aside_next:
                self._step_aside()           # a busy server steps aside between two batches

    def _gather(self, batch):
        """Group commit that gathers.  The clients a commit answers send
        again soon (a worker's next read, a producer's next XADD); taking
        at once only the jobs that came during that commit splits the
        clients into two halves that take turns, each with a commit (an
        fsync) of its own.  So when the last commit took long (the disk),
        wait a little -- a fraction of its time, at most GATHER_MAX_S --
        for its clients that have not sent again yet, and serve everyone
        with one commit.  A lone client never waits; after a wait that
        brought nobody, none for GATHER_BACKOFF batches.  Returns (the
        client ids waited for, deadline), or (None, 0) not to wait."""
        if self.last_commit < GATHER_MIN_S or not self.last_owners:
            return None, 0
        if self._gather_skip:
            self._gather_skip -= 1
            return None, 0
        missing = self.last_owners.difference([j.owner for j in batch])
        if not missing:
            return None, 0
        return missing, time.monotonic() + min(GATHER_MAX_S, GATHER_FRACTION * self.last_commit)

    def _run_batch(self, batch):
        done = [(j.done, r) for j, r in zip(batch, self.execute(batch))]
        self.finished += len(batch)        # (this thread only) before the answers: run and committed
        self._answer(done)

    def _answer(self, done):
        """Answer a batch's jobs: in one wake-up of the event loop
        (``deliver``), or here when there is none."""
        if self.deliver is not None:
            try:
                self.deliver(done)
            except Exception:
                log.exception("answering the clients failed")
        else:
            answer(done)

    def execute(self, batch, engine=True, nowait=False):
        """Run ``batch`` (Jobs) in one transaction, committed before this
        returns; each job's (replies, blocked).  In the engine thread, or
        (``engine=False``) in another (``run``: the event loop's, a thread
        of the in-process client, the readers' thread), which do not touch
        the engine's gathering.
        xs's write lock (a write) and the store's lock are held
        throughout, counters included.  ``nowait``: None at once, nothing
        run, if another thread or process holds either."""
        write = any(j.write for j in batch)
        lock = self.store.lock
        if write and not self.store.hold_write(not nowait):
            return None
        if not lock.acquire(not nowait):
            if write:
                self.store.release_write()
            return None
        try:
            return self._execute(batch, write, engine)
        finally:
            lock.release()
            if write:
                self.store.release_write()

    def _execute(self, batch, write, engine):
        t = time.monotonic()
        dirty = [0]

        def run(tx):
            out = _run_jobs(tx, batch)
            dirty[0] = tx.dirty
            return out
        try:
            results = self.store.run(run, write=write, savepoints=write)
            self.dirty += dirty[0]
        except (StoreFailure, Aborted, Retry) as e:
            log.error("transaction failed: %s", e)
            err = RedisError("ERR %s" % (e,))
            results = [([err if it.reply is None else it.reply for it in j.items], None) for j in batch]
        except Exception as e:        # a bug: nothing was committed
            log.exception("engine failure")
            err = errors.internal(e)
            results = [([err for _ in j.items], None) for j in batch]
        if write:
            self.commits += 1
        for replies, blocked in results:
            self.commands_processed += len(replies or ()) + (blocked is not None)
        if not engine:
            pass
        elif write:
            self.last_commit = time.monotonic() - t
            # the clients answered (not those now waiting in a blocked read)
            self.last_owners = {j.owner for j, r in zip(batch, results) if j.owner is not None and r[1] is None}
        else:
            self.last_commit = 0.0
        return results

    # ------------------------------------------------------------ blocking

    def block(self, cmd, args, w, call):
        """Wait (in a pool thread) for a blocked read; returns its reply
        (None on timeout).  ``call`` is the _BlockCall (for cancelling)."""
        call.keys = list(w.keys)
        with self._waits_lock:
            self._waits.add(call)
            self.blocked += 1
        try:
            return call.block(cmd, args, w)
        except Cancelled:
            if call.unblocked == "error":
                return RedisError("UNBLOCKED client unblocked via CLIENT UNBLOCK")
            return None
        except RedisError as e:
            return e
        except (StoreFailure, Aborted) as e:
            return RedisError("ERR %s" % (e,))
        finally:
            with self._waits_lock:
                self._waits.discard(call)
                self.blocked -= 1

    def new_call(self):
        return _BlockCall(self)

    def blocking_keys(self):
        """INFO's total_blocking_keys: the distinct keys blocked clients wait on."""
        with self._waits_lock:
            return len({k for call in self._waits for k in call.keys})

    def cancel_all(self):
        with self._waits_lock:
            calls = list(self._waits)
        for c in calls:
            c.cancel()


class _AsideWatch:
    """The engine's subscription to <store>/lock in the process's inotify
    hub: a compaction's touch (IN_ATTRIB) wakes the idle engine thread."""
    __slots__ = ("engine",)

    def __init__(self, engine):
        self.engine = engine

    def ring(self, mask):
        if mask & 0x4:               # IN_ATTRIB (storage.inotify), not a process closing the file
            self.engine._asked = True
            self.engine.jobs.put(_ASIDE)


def answer(done):
    """Call each job's ``done`` with its result."""
    for fn, result in done:
        try:
            fn(result)
        except Exception:
            log.exception("answering a client failed")


def _run_jobs(tx, batch):
    """The jobs of one group commit, run through one Batch (the one
    driver, xstream_cli.execution.batch): runs of plain XADDs and of
    XREADGROUP/XACK span jobs.  Returns each job's (replies, blocked)."""
    b = Batch(tx, log=log)
    out = []
    clock = time.perf_counter_ns
    for j in batch:
        t = clock()
        tx.tick()                        # each job its own clock reading (an EXEC one for all its commands)
        out.append(_job(b, tx, j))
        usec = (clock() - t) // (1000 * (len(j.items) or 1))     # an empty EXEC's job has none
        for it in j.items:
            it.usec = usec
    b.flush()
    return out


def _job(b, tx, job):
    replies = []
    if job.exec_ and job.watched:
        b.flush()
        now = tx.change_counters(list(job.watched), watch=True)
        if list(job.watched.values()) != list(now):
            return None, None            # EXEC answers null
    items = job.items
    if len(items) > 1:
        adds = [it.plain_add for it in items]
        if None not in adds:                 # a pipeline of plain XADDs: one run, added at once
            replies = [None] * len(items)
            b.add_all(replies, adds)
            return replies, None
    for i, it in enumerate(items):
        replies.append(it.reply)
        if it.reply is not None:
            continue
        if it.plain_add is not None:
            b.add(replies, i, *it.plain_add)
        elif it.heavy and _paged(b, tx, replies, i, it, job.proto):
            continue
        elif it.fn is not None:
            b.call(replies, i, it.fn)
        else:
            w = b.run(replies, i, it.cmd, it.args, wait=not job.exec_, share=not job.exec_)
            if w is not None:
                replies.pop()
                return replies, (i,) + w
            if it.heavy and not job.exec_ and not isinstance(replies[i], RedisError):
                # XINFO STREAM FULL of a long stream: encoded here, not in the loop's thread
                replies[i] = Raw(encode(replies[i], job.proto, it.array_null))
    return replies, None


def _paged(b, tx, replies, i, it, proto):
    """A big read encoded a page at a time (xstream_cli.server.paged):
    True when ``replies[i]`` has its reply, False to go the usual way."""
    if it.cmd.write and b.read_only is not None:
        return False                     # the usual way refuses it
    b.flush()
    r = b.alone(partial(paged.run, tx, it.cmd, it.args, proto))
    if r is None:
        return False
    replies[i] = r
    return True


class _BlockCall:
    """One blocked wait (xstream_cli.execution.blocked.serve) that another thread
    can end: a client gone, CLIENT KILL, the server stopping.  The
    Canceller wakes the wait at once, whether it sleeps on inotify or
    polls, and the wait ends with Cancelled before any further attempt."""

    def __init__(self, engine):
        self.store = engine.store
        self.canceller = Canceller()
        self.keys = ()
        self.unblocked = None         # CLIENT UNBLOCK's "timeout" or "error"

    def block(self, cmd, args, w):
        from xstream_cli.execution import blocked
        self.keys = list(w.keys)
        try:
            return blocked.serve(self.store, cmd, args, w, cancel=self.canceller)
        finally:
            self.canceller.close()

    def cancel(self):
        """End the wait (at once, or before it starts)."""
        self.canceller.cancel()

    def unblock(self, how):
        """CLIENT UNBLOCK: end the wait as if it timed out (null) or with
        the UNBLOCKED error.  False if it had already ended or been ended."""
        if self.unblocked is not None or self.canceller.is_set():
            return False
        self.unblocked = how
        self.cancel()
        return True
