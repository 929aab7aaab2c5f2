"""xs worker's loop: the ``Worker`` that reads entries through the
consumer group, hands them to children (children.py), acknowledges,
retries and dead-letters them (storage.ops.worker decides), and stops
cleanly on a signal.  No click."""
import os
import signal
import time

from xstream_cli.porcelain.worker.children import (
    GRACE_S,
    Job,
    _env,
    _Lifeline,
    _run_job,
    _show,
    _Stderr,
    _Stop,
)
from xstream_cli.porcelain.worker.report import Reports


class Worker(Reports):
    """One xs worker run over an open store (used from this thread only);
    what it tells the user is Reports' (report.py)."""

    def __init__(self, store, stream, group, consumer, argv, claim_idle=60000, timeout=None,
                 retry_delay=1000, max_deliveries=None, dead_letter=None, concurrency=1, batch=1,
                 once=False, json_events=False, err=None, ack_alone=False, quiet=False):
        import queue
        self.store = store
        self.stream, self.group, self.consumer = stream, group, consumer
        self.argv = argv
        self.claim_idle = claim_idle
        self.timeout = timeout
        self.retry_delay = retry_delay
        self.max_deliveries = max_deliveries
        self.dl = dead_letter
        self.concurrency = concurrency
        self.batch = batch
        self.once = once
        self.json = json_events
        self.quiet = quiet            # -q: no progress, no summary (failures are still told)
        self.err = err or _Stderr()
        self.done = queue.Queue()
        self.running = {}             # Job -> thread
        self.inflight = set()         # keys being processed
        self.retries = []             # heap of (due monotonic, key)
        self.retry_keys = set()
        self.seen = set()             # --once: keys run in this run
        self.stopping = False
        self.waiting = False          # in the wait: a signal raises _Stop there
        self.bell = None              # the Doorbell a finished job rings (while run() runs)
        self.lifeline = None          # the _Lifeline that kills CMDs if this process dies (while run() runs)
        self.stdout_gone = False
        self.stats = {"acked": 0, "failed": 0, "dead": 0, "released": 0}
        self.started = time.monotonic()
        self.hb_every = max(claim_idle / 3000.0, 0.05)
        self.next_hb = None
        self.last_progress = 0.0
        self.env = dict(os.environ)
        self.env.update({"XS_STREAM": _env(stream), "XS_GROUP": _env(group), "XS_CONSUMER": _env(consumer)})
        self.stdout_fd = 2 if json_events else 1
        # Entries whose command succeeded, acknowledged in the next write
        # transaction (normally the read of the next entries): one durable
        # commit per entry instead of two.  At-least-once holds: a crash
        # before that commit redelivers them.  --ack-alone commits each at once.
        self.ack_alone = ack_alone
        self.acks = []

    # ------------------------------------------------------------ store

    def _w(self, fn):
        """Run ``fn`` in a write transaction that also acknowledges the
        entries waiting in ``self.acks``; they are reported once it has
        committed."""
        if not self.acks:
            return self.store.run(fn, write=True)
        from storage.ops import worker as W
        done = list(self.acks)

        def both(tx):
            W.ack(tx, self.stream, self.group, [d.key for d in done])
            return fn(tx)
        r = self.store.run(both, write=True)
        del self.acks[:len(done)]
        for d in done:
            self.stats["acked"] += 1
            self._event("acked", d)
        self._progress()
        return r

    def _flush_acks(self):
        if self.acks:
            self._w(lambda tx: None)

    def _read_some(self, after, count, claim):
        """Deliveries, after a dry run in a read transaction (most
        wake-ups find nothing, and a write commits with an fsync)."""
        from storage.ops import worker as W
        from storage.txn import WouldWrite

        def take(tx):
            return W.take(tx, self.stream, self.group, self.consumer, after, count, claim)
        try:
            if not self.store.run(take, write=False):
                return []
        except WouldWrite:
            pass
        return self._w(take)

    # ------------------------------------------------------------ dispatch

    def _start(self, deliveries):
        from storage.ops.exchange import dumps, entry_record
        job = Job(deliveries)
        job.lifeline = self.lifeline
        data = b"".join((dumps(entry_record(self.stream, d.id, d.fields)) + "\n").encode("utf-8")
                        for d in deliveries)
        env = dict(self.env)
        ids = b" ".join(d.id for d in deliveries)
        env.update({"XS_ID": _env(deliveries[0].id), "XS_IDS": _env(ids), "XS_COUNT": str(len(deliveries)),
                    "XS_DELIVERIES": str(max(d.deliveries for d in deliveries))})
        for d in deliveries:
            self.inflight.add(d.key)
            if self.once:
                self.seen.add(d.key)
        import threading
        t = threading.Thread(target=_run_job, args=(job, self.argv, env, data, self.timeout,
                                                    self.stdout_fd, self.err, self._finished), daemon=True)
        self.running[job] = t
        if self.next_hb is None:
            self.next_hb = time.monotonic() + self.hb_every
        t.start()

    def _dispatch(self, ds):
        """Start jobs for fresh deliveries; returns True if anything was
        started or settled, False if every delivery was one this run had
        already seen (--once) or is in flight."""
        from storage.ops import worker as W
        fresh, deleted, past, again = [], [], [], []
        for d in ds:
            if d.key in self.inflight:
                continue                  # taken again while its command runs: it stays ours
            if d.key in self.retry_keys:
                self.retry_keys.discard(d.key)
            if d.fields is None:
                deleted.append(d)
            elif self.once and d.key in self.seen:
                again.append(d.key)
            elif self.max_deliveries and d.deliveries > self.max_deliveries:
                past.append(d)
            else:
                fresh.append(d)
        if deleted:
            self._w(lambda tx: W.ack(tx, self.stream, self.group, [d.key for d in deleted]))
            for d in deleted:
                self._event("skipped", d, reason="deleted from the stream")
        if again:                         # --once: not twice in one run; uncounted, for the next run
            self._w(lambda tx: W.release(tx, self.stream, self.group, again, "silent"))
        if past:
            self._dead_letter([(d, b"not run: delivered %d times, more than --max-deliveries" % d.deliveries, b"")
                               for d in past])
        for k in range(0, len(fresh), self.batch):
            self._start(fresh[k:k + self.batch])
        return bool(fresh or deleted or past)

    def _dead_letter(self, items):
        from storage.ops import worker as W
        ids = self._w(lambda tx: W.dead_letter(tx, self.stream, self.group, self.consumer, self.dl, items))
        from storage.ops.exchange import enc
        for (d, status, _), i in zip(items, ids):
            self.stats["dead"] += 1
            self._event("dead-lettered", d, status=status.decode("utf-8", "replace"),
                        **{"dead-letter": {"stream": enc(self.dl), "id": i.decode("ascii")}})
            self.err.line("xs worker: %s dead-lettered after %d attempt%s (%s): %s %s"
                          % (d.id.decode("ascii"), d.deliveries, "" if d.deliveries == 1 else "s",
                             status.decode("utf-8", "replace"), _show(self.dl), i.decode("ascii")))

    # ------------------------------------------------------------ results

    def _collect(self, timeout=0.0):
        """Settle finished jobs (waiting up to ``timeout`` s for the
        first); returns how many."""
        import queue
        n = 0
        while True:
            try:
                job = self.done.get(timeout=timeout) if timeout and not n else self.done.get_nowait()
            except queue.Empty:
                return n
            n += 1
            self.running.pop(job, None)
            self._settle(job)

    def _settle(self, job):
        from storage.ops import worker as W
        keys = [d.key for d in job.deliveries]
        if job.cancelled:
            self._release(job)
            return
        if job.ok:
            self.acks.extend(job.deliveries)                 # committed, then reported (_w)
            if self.ack_alone:
                self._flush_acks()
            self.inflight.difference_update(keys)
            return
        status = job.status()
        dead, rest = [], []
        for d in job.deliveries:
            self.stats["failed"] += 1
            self._event("failed", d, status=status.decode("utf-8", "replace"))
            last = self.max_deliveries and d.deliveries >= self.max_deliveries
            (dead if last else rest).append(d)
            self.err.line(self._failure_line(d, status, last))
        if dead:
            self._dead_letter([(d, status, job.tail) for d in dead])
        rest_keys = [d.key for d in rest]
        if rest_keys and not self.once:
            if self.retry_delay == 0:
                self._w(lambda tx: W.release(tx, self.stream, self.group, rest_keys, "fail"))
            else:
                import heapq
                due = time.monotonic() + self.retry_delay / 1000.0
                for k in rest_keys:
                    heapq.heappush(self.retries, (due, k))
                    self.retry_keys.add(k)
        self.inflight.difference_update(keys)
        self._progress()

    def _release(self, job):
        from storage.ops import worker as W
        keys = [d.key for d in job.deliveries]
        self._w(lambda tx: W.release(tx, self.stream, self.group, keys, "silent"))
        self.inflight.difference_update(keys)
        for d in job.deliveries:
            self.stats["released"] += 1
            self._event("released", d)

    # ------------------------------------------------------------ timers

    def _due_retries(self, want):
        import heapq
        now = time.monotonic()
        keys = []
        while self.retries and self.retries[0][0] <= now and len(keys) < want:
            _, k = heapq.heappop(self.retries)
            if k in self.retry_keys:
                self.retry_keys.discard(k)
                keys.append(k)
        return keys

    def _heartbeat(self):
        if not self.running:
            self.next_hb = None
            return
        now = time.monotonic()
        if self.next_hb is not None and now < self.next_hb:
            return
        from storage.ops import worker as W
        keys = sorted(self.inflight)
        if keys:
            self._w(lambda tx: W.keep_alive(tx, self.stream, self.group, self.consumer, keys))
        self.next_hb = now + self.hb_every

    # ------------------------------------------------------------ waiting

    def _on_signal(self, signum, frame):
        if self.stopping:                 # a second signal: do not wait for the commands
            for job in list(self.running):
                job.cancel(signal.SIGKILL)
        self.stopping = True
        if self.waiting:
            raise _Stop()

    # ------------------------------------------------------------ main

    def run(self):
        """Returns the exit status."""
        from storage.blocking import Doorbell
        from storage.ids import MIN_ID
        old = {}
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            old[s] = signal.signal(s, self._on_signal)
        self.bell = Doorbell()
        self.lifeline = _Lifeline.start()
        try:
            self._loop(MIN_ID)
            self._shutdown()
            self._flush_acks()
        except BaseException:
            for job in list(self.running):
                job.cancel(signal.SIGKILL)
            raise
        finally:
            self.bell.close()
            if self.lifeline is not None:
                self.lifeline.close()
            for s, h in old.items():
                signal.signal(s, h)
        if not self.quiet:
            self.err.line(self._summary(final=True))
        # --once from cron: an entry that failed must be seen (exit 1)
        return 1 if self.once and self.stats["failed"] else 0

    def _finished(self, job):
        """A job's thread is done with it (called in that thread)."""
        self.done.put(job)
        if self.bell is not None:
            self.bell.ring()

    def _loop(self, pos):
        """Rounds of work in storage.blocking's one wait loop: it wakes on
        a change of the stream, a finished job (the Doorbell), the next
        retry or heartbeat; a signal ends it (_Stop)."""
        from storage.blocking import wait_until
        st = {"pos": pos, "stale": 0, "hold": False, "timeout": None}

        def attempt(woken):
            self.waiting = False
            r = self._round(st)
            self.waiting = r is None
            return r
        try:
            wait_until(self.store, [self.stream], attempt, None, lambda: st["timeout"], bell=self.bell)
        except _Stop:
            pass
        finally:
            self.waiting = False

    def _round(self, st):
        """Settle finished jobs and start what can start; 0 to stop, or
        None to wait (at most ``st["timeout"]`` s, None: no limit)."""
        from storage.ops import worker as W
        while not self.stopping:
            if self._collect():
                st["hold"] = False
            if self.stopping:
                break
            self._heartbeat()
            free = self.concurrency - len(self.running)
            if free > 0 and not st["hold"]:
                want = free * self.batch
                due = self._due_retries(want)
                if due:
                    ds = self._w(lambda tx: W.retake(tx, self.stream, self.group, self.consumer, due,
                                                     self.retry_delay))
                    self._dispatch(ds)
                    continue
                if st["pos"] != b">":
                    ds = self._read_some(st["pos"], want, None)
                    if not ds:
                        st["pos"] = b">"
                        continue
                    st["pos"] = ds[-1].key
                    self._dispatch(ds)
                    continue
                ds = self._read_some(b">", want, self.claim_idle)
                if ds:
                    st["stale"] = 0
                    if self._dispatch(ds):
                        continue
                    st["hold"] = self.once    # --once: only seen entries came back; wait for a job first
            if self.once and not self.running:
                break
            timeout = None
            reading = free > 0 and not st["hold"]
            if self.retries and reading:
                timeout = max(0.0, self.retries[0][0] - time.monotonic())
            if self.running:
                hb = max(0.0, self.next_hb - time.monotonic()) if self.next_hb is not None else self.hb_every
                timeout = hb if timeout is None else min(timeout, hb)
            if reading:
                ms = self.store.run(lambda tx: W.claim_wait_ms(tx, self.stream, self.group, self.claim_idle),
                                    write=False)
                if ms is not None:
                    # a pending entry that claims nothing (deleted from the
                    # stream, or our own in flight) must not make us spin
                    st["stale"] = st["stale"] + 1 if ms <= 0 else 0
                    w = max(ms, 1) / 1000.0 if not st["stale"] else min(0.001 * 2 ** st["stale"], 1.0)
                    timeout = w if timeout is None else min(timeout, w)
            if self.err.tty:
                self._progress()
                timeout = 1.0 if timeout is None else min(timeout, 1.0)
            self._flush_acks()                # nothing to read with them: commit them alone
            if self.stopping:
                break
            st["timeout"] = timeout
            return None
        return 0

    def _shutdown(self):
        """Stop: settle what finished, stop the rest and give their
        entries back (XNACK SILENT: pending, uncounted, claimable)."""
        self._collect()
        for job in list(self.running):
            job.cancel()
        end = time.monotonic() + GRACE_S
        killed = False
        while self.running:
            left = end - time.monotonic()
            if left <= 0 and not killed:
                for job in list(self.running):
                    job.cancel(signal.SIGKILL)
                killed = True
            try:
                self._collect(timeout=max(left, 0.05) if not killed else 1.0)
            except _Stop:
                pass
