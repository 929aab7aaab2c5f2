"""xs worker: at-least-once processing of a stream by an external command.

    xs worker STREAM -g GROUP -c CONSUMER [OPTIONS] -- CMD [ARG...]

Reads STREAM through consumer group GROUP as CONSUMER (the group is
created if missing, at --start, default 0; a missing stream is created
with it, as XGROUP CREATE ... MKSTREAM does) and runs CMD once per entry.
Where entries come from, in order: this consumer's own pending entries
(a previous run stopped before acknowledging them), then entries other
consumers left idle longer than --claim-idle ms and entries given back
with XNACK (XREADGROUP ... CLAIM), then new ones; when there is nothing,
it waits (the BLOCK machinery: no polling).

CMD is run without a shell (an argv list: entry data never becomes part
of a command line) with
  stdin   the entry as one JSON line, the shape of xs export / xs tail
          --json: {"stream": "s", "id": "1-0", "fields": ["f", "v", ...]}
          (a name or value that is not UTF-8 is {"b64": "..."}); with
          --batch N, up to N entries, one JSON line each;
  env     XS_STREAM, XS_GROUP, XS_CONSUMER, XS_ID (the first entry's ID),
          XS_IDS (all IDs, space-separated), XS_COUNT, XS_DELIVERIES (the
          delivery count, this one included; with --batch the highest);
  stdout  xs worker's stdout (its stderr with --json, which owns stdout);
  stderr  passed through to xs worker's stderr; the last 2 KiB are kept
          for a dead letter.

Exit status 0: the entries are acknowledged (XACK, committed before it is
reported).  Anything else, or --timeout exceeded (CMD's process group
gets SIGTERM, then SIGKILL a second later): they stay pending and are
delivered again -- with --retry-delay 0 at once (XNACK FAIL gives them
back to the group, the next CLAIM takes them); otherwise after the delay
(this worker keeps them and takes them back with XCLAIM; a worker that
restarts takes its own pending entries at once, and other workers take
them once idle longer than --claim-idle).  While CMD runs, the worker
resets its entries' idle time every third of --claim-idle, so a slow
command is not taken over by other workers; a worker that dies stops
doing so, and its entries are claimed.

With --max-deliveries N --dead-letter DL: an entry whose delivery count
reaches N and fails again is added to DL and acknowledged in one
transaction; an entry delivered more than N times (a worker died during
the Nth run) is dead-lettered without running CMD again.  A dead letter
holds seven origin pairs, always first and in this order -- xs-stream,
xs-id, xs-group, xs-consumer, xs-deliveries, xs-exit ("exit 3",
"signal 9", "timeout", "exec failed: ...", "not run: ..."), xs-stderr
-- then the entry's own fields.

--concurrency N runs up to N commands at once (the store is used from
one thread only).  --once processes what is there and exits when nothing
is left (each entry is run at most once per --once run; a failed one
stays pending for the next run).  SIGTERM / SIGINT: CMD's process groups
get SIGTERM (SIGKILL after 5 s), their entries are given back to the
group uncounted (XNACK SILENT: still pending, claimable at once) and xs
worker exits 0.

Progress on stderr when it is a terminal (CMD's output to that terminal
passes through the worker, which clears the status line first); a line
on stderr per failed entry ("1795...-0 failed (exit 3), attempt 2/3,
retry in 200ms") and per dead letter; a summary line on stderr at exit.
-q drops the progress and the summary, never a failure's line.
--once exits 1 when an entry failed (cron can alert), else 0.
--json: one JSON object per event on stdout:
  {"event": "acked" | "failed" | "dead-lettered" | "released" | "skipped",
   "stream": ..., "id": ..., "deliveries": n, ...}
("failed" has "status"; "dead-lettered" has "dead-letter": {"stream",
"id"}; "skipped": deleted from the stream while pending, acknowledged).
"""
import os
import signal
import sys
import time

import click

from xstream_cli import context

GRACE_S = 5.0              # SIGTERM -> SIGKILL when stopping
TIMEOUT_GRACE_S = 1.0      # SIGTERM -> SIGKILL after --timeout
STDERR_KEEP = 2048


class _Stop(Exception):
    """A signal asked the worker to stop (raised only inside a wait)."""


# ================================================================ children

class Job:
    """One run of CMD over one or more deliveries."""

    def __init__(self, deliveries):
        self.deliveries = deliveries
        self.child = None                    # the started CMD (a _Child)
        self.rc = None
        self.timed_out = False
        self.exec_error = None
        self.tail = b""
        self.cancelled = False
        import threading
        self.lock = threading.Lock()
        self.lifeline = None                 # the worker's _Lifeline (starts CMD; its group dies with the worker)
        self.exited = False                  # CMD has exited (its stderr may still be open)
        self.drained = threading.Event()     # its stderr holds nothing CMD wrote any more

    @property
    def ok(self):
        return self.rc == 0 and not self.timed_out and self.exec_error is None

    def status(self):
        if self.exec_error is not None:
            return b"exec failed: " + self.exec_error.encode("utf-8", "replace")
        if self.timed_out:
            return b"timeout"
        if self.rc is not None and self.rc < 0:
            return b"signal %d" % -self.rc
        return b"exit %d" % (self.rc if self.rc is not None else -1)

    def kill(self, sig):
        """Signal CMD's process group (it runs in a session of its own)."""
        with self.lock:
            c = self.child
            if c is None or c.returncode is not None:
                return
            try:
                os.killpg(c.pid, sig)
            except OSError:
                pass

    def cancel(self, sig=signal.SIGTERM):
        with self.lock:
            self.cancelled = True
        self.kill(sig)


class _Stderr:
    """xs worker's stderr, shared by the progress line and the commands'
    stderr (passed through)."""

    def __init__(self):
        import threading
        self.lock = threading.Lock()
        try:
            self.tty = os.isatty(2)
        except OSError:
            self.tty = False
        self.shown = False

    def _put(self, data, fd=2):
        try:
            while data:
                n = os.write(fd, data)
                data = data[n:]
        except OSError:
            pass

    def passthrough(self, data, fd=2):
        """A command's output, to ``fd``, after clearing the status line."""
        with self.lock:
            if self.shown:
                self._put(b"\r\x1b[K")
                self.shown = False
            self._put(data, fd)

    def progress(self, text):
        with self.lock:
            self._put(b"\r\x1b[K" + text.encode("utf-8", "replace"))
            self.shown = True

    def line(self, text):
        with self.lock:
            self._put((b"\r\x1b[K" if self.shown else b"") + text.encode("utf-8", "replace") + b"\n")
            self.shown = False


def _feed(pipe, data):
    try:
        pipe.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass
    try:
        pipe.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _drain(job, fd, err):
    """Pass CMD's stderr through, keeping its last STDERR_KEEP bytes in
    ``job.tail``.  Once CMD has exited (``job.exited``) and the pipe holds
    nothing more (all CMD wrote is in it by then), ``job.drained`` is set:
    a child CMD left behind that still holds stderr does not hold up the
    worker; what it writes later is still passed through, until EOF."""
    import select
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    keep = b""
    try:
        while True:
            try:
                ready = poller.poll(20)
            except InterruptedError:
                continue
            if not ready:
                if job.exited:
                    job.drained.set()
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            err.passthrough(chunk)
            if not job.drained.is_set():
                keep = (keep + chunk)[-STDERR_KEEP:]
                job.tail = keep
    finally:
        job.drained.set()
        try:
            os.close(fd)
        except OSError:
            pass


def _isatty(fd):
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _copy_out(fd, to, err):
    """Pass CMD's stdout to ``to`` (the terminal that shows the status
    line), clearing the status line before each piece, so the two never
    share a line."""
    try:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except InterruptedError:
                continue
            except OSError:
                return
            if not chunk:
                return
            err.passthrough(chunk, to)
    finally:
        os.close(fd)


def _show(name):
    from xstream_cli.porcelain.ls import show
    return show(name)


def _run_job(job, argv, env, data, timeout, stdout_fd, err, done):
    """Thread body: run CMD for ``job``; then ``done(job)``."""
    import subprocess
    import threading
    try:
        with job.lock:
            if job.cancelled:
                return
            through = err.tty and _isatty(stdout_fd)      # the status line is on that terminal
            try:
                c = _spawn(job.lifeline, argv, env, stdout_fd, through)
            except (OSError, ValueError, subprocess.SubprocessError) as e:
                job.exec_error = getattr(e, "strerror", None) or str(e)
                return
            job.child = c
            if _TEST_PAUSE:
                _test_pause()
        if c.out_fd is not None:
            threading.Thread(target=_copy_out, args=(c.out_fd, stdout_fd, err), daemon=True).start()
        reader = threading.Thread(target=_drain, args=(job, c.err_fd, err), daemon=True)
        reader.start()
        threading.Thread(target=_feed, args=(c.stdin, data), daemon=True).start()
        try:
            c.wait(timeout)
        except subprocess.TimeoutExpired:
            job.timed_out = True
            job.kill(signal.SIGTERM)
            try:
                c.wait(TIMEOUT_GRACE_S)
            except subprocess.TimeoutExpired:
                job.kill(signal.SIGKILL)
                c.wait()
        job.rc = c.returncode
        job.exited = True
        job.drained.wait(1.0)     # what CMD wrote is read; a child left holding stderr is not waited for
    except BaseException as e:    # never leave the main thread waiting for a job
        if job.exec_error is None and job.rc is None:
            job.exec_error = "worker thread: %s" % e
    finally:
        done(job)


# Tests only: _XS_WORKER_TEST_PAUSE=FILE makes the thread that started a
# command create FILE and sleep (60 s) right after the start, before it
# even records the command's pid: the moment in which, before the watchdog
# started the commands itself, a SIGKILL of the worker left the command
# running (tests/cli/test_worker.py kills the worker there).  Unset, it
# costs one test of a constant per command.
_TEST_PAUSE = os.environ.get("_XS_WORKER_TEST_PAUSE")


def _test_pause():
    with open(_TEST_PAUSE, "a"):
        pass
    time.sleep(60)


class _Child:
    """A started CMD: ``pid`` (also its process group: it leads a session
    of its own), ``stdin`` (a file), the fds ``out_fd`` (its stdout, when
    it is a pipe) and ``err_fd`` (its stderr), ``wait(timeout)`` (raises
    subprocess.TimeoutExpired) and ``returncode`` (None while the worker
    does not know it exited: until then its group may be signalled)."""

    pid = 0
    stdin = None
    out_fd = None
    err_fd = -1


class _Here(_Child):
    """CMD started by this process (no watchdog)."""

    def __init__(self, argv, env, stdout_fd, through):
        import subprocess
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE if through else stdout_fd,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
        self.p, self.pid, self.stdin = p, p.pid, p.stdin
        if p.stdout is not None:
            self.out_fd = os.dup(p.stdout.fileno())
            p.stdout.close()
        self.err_fd = os.dup(p.stderr.fileno())
        p.stderr.close()

    @property
    def returncode(self):
        return self.p.returncode

    def wait(self, timeout=None):
        return self.p.wait(timeout)


class _Gone(Exception):
    """The watchdog is not there any more (it was killed)."""


class _There(_Child):
    """CMD started by the watchdog: it answers on a pipe of this command's
    own, "PID\\n" (or "!why\\n": it could not be started), then "RC\\n"
    once it reaped it (a signal sent between the two would need its pid
    to have come round again in that time)."""

    returncode = None

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""

    def line(self, end=None):
        """The next line, or None at EOF (the watchdog died); waits until
        ``end`` (monotonic) at most."""
        import select
        import subprocess
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        while b"\n" not in self.buf:
            if end is not None:
                left = end - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired("CMD", 0)
                if not poller.poll(max(1, int(left * 1000 + 0.999))):
                    continue
            try:
                chunk = os.read(self.fd, 512)
            except InterruptedError:
                continue
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def wait(self, timeout=None):
        if self.returncode is None:
            line = self.line(None if timeout is None else time.monotonic() + timeout)
            os.close(self.fd)
            if line is None:                 # the watchdog was killed: CMD may still run, orphaned
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.returncode = -signal.SIGKILL
            else:
                self.returncode = int(line)
        return self.returncode


def _spawn(lifeline, argv, env, stdout_fd, through):
    """Start CMD: by the watchdog while there is one, else here."""
    if lifeline is not None and lifeline.alive:
        try:
            return lifeline.spawn(argv, env, stdout_fd, through)
        except _Gone:
            pass
    return _Here(argv, env, stdout_fd, through)


# The watchdog, started once per worker in a session of its own, starts the
# commands itself.  It reads requests from a socket of which only the worker
# holds the other end: "LENGTH\n", then pickle.dumps((argv, env)), sent with
# four fds (CMD's stdin, stdout, stderr, and a pipe for the answers: "PID\n"
# or "!why\n", then "RC\n").  A command is in its set before the watchdog
# reads anything more; when the socket ends (the worker exited, or was
# SIGKILLed) it kills the process groups of the commands still running.
_WATCHDOG = r"""# xs worker: the watchdog that starts its commands
import os, pickle, select, signal, socket, subprocess
sock = socket.socket(fileno=0)
wake, bell = os.pipe()
os.set_blocking(wake, False)
os.set_blocking(bell, False)
signal.set_wakeup_fd(bell)
signal.signal(signal.SIGCHLD, lambda signum, frame: None)
running = {}
buf, fds = b"", []


def tell(fd, line):
    try:
        os.write(fd, line)
    except OSError:
        pass


def reap():
    for p, fd in list(running.items()):
        if p.poll() is not None:
            del running[p]
            tell(fd, b"%d\n" % p.returncode)
            os.close(fd)


def start(argv, env, io, answer):
    try:
        p = subprocess.Popen(argv, stdin=io[0], stdout=io[1], stderr=io[2], env=env, start_new_session=True)
    except Exception as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        tell(answer, b"!" + why.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n")
        os.close(answer)
    else:
        running[p] = answer
        tell(answer, b"%d\n" % p.pid)
    finally:
        for fd in io:
            os.close(fd)


while True:
    try:
        ready = select.select([sock, wake], [], [])[0]
    except InterruptedError:
        continue
    if wake in ready:
        try:
            os.read(wake, 4096)
        except OSError:
            pass
        reap()
    if sock not in ready:
        continue
    data, got, _, _ = socket.recv_fds(sock, 65536, 16)
    fds += got
    if not data:
        break
    buf += data
    while b"\n" in buf:
        head, rest = buf.split(b"\n", 1)
        if len(rest) < int(head):
            break
        msg, buf, four, fds = rest[:int(head)], rest[int(head):], fds[:4], fds[4:]
        try:
            argv, env = pickle.loads(msg)
        except Exception:
            for fd in four:
                os.close(fd)
            continue
        start(argv, env, four[:3], four[3])
reap()
for p in running:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Lifeline:
    """CMD runs in a session of its own (its process group is killed on
    --timeout and on stop), so it would outlive a worker killed by
    SIGKILL, and the entry, redelivered to the next worker, would run
    twice at once.  So the commands are started by a watchdog process,
    which keeps each in its set from the moment it starts it until it
    reaps it, and kills the groups in its set once the socket to the
    worker ends -- the kernel closes the worker's end whatever ends the
    worker.  A command is registered by the process that starts it, before
    that process can learn of the worker's end: there is no moment in
    which a SIGKILL of the worker leaves a command running (nor its
    children: the whole group is killed).  Portable (a Unix socket and
    SCM_RIGHTS, no prctl); if the watchdog cannot start, or is killed,
    the worker starts the commands itself, which then outlive a SIGKILL
    of the worker."""

    def __init__(self, proc, sock):
        import threading
        self.proc = proc
        self.sock = sock
        self.lock = threading.Lock()     # one request at a time on the socket
        self.alive = True

    @classmethod
    def start(cls):
        """The watchdog, or None where it cannot start."""
        import socket
        import subprocess
        import sys
        try:
            mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", _WATCHDOG], stdin=its,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
            except BaseException:
                mine.close()
                raise
            finally:
                its.close()
        except (OSError, AttributeError, subprocess.SubprocessError):
            return None
        return cls(proc, mine)

    def spawn(self, argv, env, stdout_fd, through):
        """Have the watchdog start CMD: a _There, once it answered; raises
        _Gone if it does not (this request started nothing), or
        subprocess.SubprocessError when CMD could not be started."""
        import pickle
        import socket
        import subprocess
        msg = pickle.dumps((argv, env), protocol=pickle.HIGHEST_PROTOCOL)
        msg = b"%d\n" % len(msg) + msg
        r_in, w_in = os.pipe()
        r_err, w_err = os.pipe()
        r_out, w_out = os.pipe() if through else (None, stdout_fd)
        r_ans, w_ans = os.pipe()
        theirs = [r_in, w_out, w_err, w_ans]
        ours = [w_in, r_err, r_ans] + ([r_out] if through else [])
        try:
            with self.lock:
                sock = self.sock
                if sock is None:
                    raise OSError("closed")
                n = socket.send_fds(sock, [msg], theirs)
                if n < len(msg):
                    sock.sendall(msg[n:])
        except OSError:
            self.alive = False
            for fd in ours:
                os.close(fd)
            raise _Gone()
        finally:
            for fd in theirs:
                if fd != stdout_fd:
                    os.close(fd)
        c = _There(r_ans)
        line = c.line()
        if line is None or line[:1] == b"!":
            for fd in ours:
                os.close(fd)
            if line is None:
                self.alive = False
                raise _Gone()
            raise subprocess.SubprocessError(line[1:].decode("utf-8", "replace"))
        c.pid = int(line)
        c.stdin = os.fdopen(w_in, "wb")
        c.out_fd = r_out
        c.err_fd = r_err
        return c

    def close(self):
        """The worker ends: the watchdog exits (killing what still runs:
        nothing, once the commands were stopped)."""
        sock, self.sock = self.sock, None
        self.alive = False
        if sock is not None:
            sock.close()
            try:
                self.proc.wait(5)
            except Exception:
                pass


# ================================================================ the loop

class Worker:
    """One xs worker run over an open store (used from this thread only)."""

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

    # ------------------------------------------------------------ events

    def _event(self, kind, d, **extra):
        if not self.json or self.stdout_gone:
            return
        from storage.ops.exchange import dumps, enc
        rec = {"event": kind, "stream": enc(self.stream), "id": d.id.decode("ascii"),
               "deliveries": d.deliveries}
        rec.update(extra)
        try:
            sys.stdout.buffer.write((dumps(rec) + "\n").encode("utf-8"))
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            self.stdout_gone = True
            self.stopping = True
        except OSError as e:
            self.stdout_gone = True
            self.stopping = True
            self.err.line("xs: cannot write output: %s" % (e.strerror or e))

    def _summary(self, final=False):
        s = self.stats
        took = time.monotonic() - self.started
        rate = s["acked"] / took if took > 0 else 0.0
        text = "xs worker: %d processed, %d failed, %d dead-lettered" % (s["acked"], s["failed"], s["dead"])
        if final:
            if s["released"]:
                text += ", %d released" % s["released"]
            return text + " in %.1fs (%.1f/s)" % (took, rate)
        return text + ", %.1f/s, %d running" % (rate, len(self.running))

    def _progress(self, force=False):
        if not self.err.tty or self.quiet:
            return
        now = time.monotonic()
        if force or now - self.last_progress >= 0.25:
            self.last_progress = now
            self.err.progress(self._summary())

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

    def _failure_line(self, d, status, last):
        """``1795...-0 failed (exit 3), attempt 2/3, retry in 200ms``: one
        line per failed entry, for a person and for cron's mail."""
        text = "xs worker: %s failed (%s), attempt %d" % (d.id.decode("ascii"), status.decode("utf-8", "replace"),
                                                         d.deliveries)
        if self.max_deliveries:
            text += "/%d" % self.max_deliveries
        if last:
            return text + ", to the dead-letter stream %s" % _show(self.dl)
        if self.once:
            return text + ", stays pending for the next run"
        if self.retry_delay == 0:
            return text + ", given back to the group"
        return text + ", retry in %dms" % self.retry_delay

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


def _env(b):
    return b.decode("utf-8", "surrogateescape")


# ================================================================ command

class _WorkerCommand(click.Command):
    """Everything after ``--`` is CMD, untouched; a usage error is one
    line (``xs: worker: ...``) and exit status 2."""

    def parse_args(self, ctx, args):
        args = list(args)
        if "--" in args:
            i = args.index("--")
            ctx.meta["xs.worker.cmd"] = args[i + 1:]
            args = args[:i]
        elif not any(a in ("-h", "--help") for a in args):
            _usage("missing -- before CMD (xs worker STREAM -g GROUP -c CONSUMER [OPTIONS] -- CMD [ARG]...)")
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            _usage(e.format_message())

    def collect_usage_pieces(self, ctx):
        return ["STREAM", "-g GROUP", "-c CONSUMER", "[OPTIONS]", "-- CMD [ARG]..."]


def _usage(message):
    context.fail("worker: %s" % message, context.EXIT_USAGE)


def _executable(cmd):
    """Why CMD cannot be run, or None."""
    name = cmd[0]
    if not name:
        return "empty command name"
    if "/" in name:
        if not os.path.isfile(name) or not os.access(name, os.X_OK):
            return "cannot execute %s" % name
        return None
    import shutil
    if shutil.which(name) is None:
        return "command not found: %s" % name
    return None


def register(cli):
    @cli.command("worker", cls=_WorkerCommand)
    @click.argument("stream")
    @click.option("-g", "--group", required=True, metavar="GROUP", help="Consumer group (created if missing).")
    @click.option("-c", "--consumer", required=True, metavar="CONSUMER", help="Consumer name within the group.")
    @click.option("--start", default="0", show_default=True, metavar="ID",
                  help="Where a new group starts: an ID, 0 (everything) or $ (new entries only).")
    @click.option("--claim-idle", type=click.IntRange(min=1), default=60000, show_default=True, metavar="MS",
                  help="Take entries other consumers left pending longer than MS.")
    @click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SEC",
                  help="Kill CMD after SEC seconds (the entry stays pending).")
    @click.option("--retry-delay", type=click.IntRange(min=0), default=1000, show_default=True, metavar="MS",
                  help="Deliver a failed entry again after MS (0: give it back to the group at once).")
    @click.option("--max-deliveries", type=click.IntRange(min=1), metavar="N",
                  help="After N failed deliveries move the entry to --dead-letter.")
    @click.option("--dead-letter", metavar="STREAM", help="Where entries go after --max-deliveries.")
    @click.option("--concurrency", type=click.IntRange(min=1, max=1024), default=1, show_default=True,
                  metavar="N", help="Run up to N commands at once.")
    @click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
                  help="Hand CMD up to N entries at once, one JSON line each (all acked on exit 0).")
    @click.option("--once", is_flag=True, help="Process what is there, then exit.")
    @click.option("--ack-alone", is_flag=True,
                  help="Commit each acknowledgement on its own (by default it rides in the transaction "
                       "that reads the next entries: half the disk syncs, still at least once).")
    @click.option("--json", "json_", is_flag=True, help="One JSON object per event on stdout.")
    @click.option("-q", "--quiet", is_flag=True,
                  help="No progress and no summary line; a failure still prints its line (for cron).")
    @click.pass_context
    def worker(ctx, stream, group, consumer, start, claim_idle, timeout, retry_delay, max_deliveries,
               dead_letter, concurrency, batch, once, ack_alone, json_, quiet):
        """Run CMD for each entry of STREAM, at least once (XACK on exit 0).

        \b
        The group is created if missing (at --start; a missing stream
        too).  Order: this consumer's own pending entries, then entries
        idle longer than --claim-idle (and NACKed ones), then new ones;
        then it waits for more (unless --once).
        \b
        CMD runs without a shell: stdin is the entry as one JSON line
        ({"stream", "id", "fields": [f, v, ...]}, as xs export writes;
        with --batch N, up to N lines), env XS_STREAM, XS_GROUP,
        XS_CONSUMER, XS_ID, XS_IDS, XS_COUNT, XS_DELIVERIES.  Exit 0:
        acknowledged, in the commit that reads the next entries (or
        alone before waiting; --ack-alone: at once).  Otherwise (or --timeout): pending, delivered again
        after --retry-delay; once an entry was delivered --max-deliveries
        times it is added to --dead-letter with its origin and
        acknowledged, in one transaction.
        \b
        SIGTERM / Ctrl-C: running commands are stopped and their entries
        given back to the group (still pending); exit 0.  --once: exit 1
        if an entry failed.  Each failure prints a line on stderr (which
        entry, why, which attempt, what happens next), also with -q.
        """
        from storage.errors import RedisError
        from storage.ids import parse_id
        cmd = ctx.meta.get("xs.worker.cmd")
        if not cmd:
            _usage("missing CMD after --")
        if (max_deliveries is None) != (dead_letter is None):
            _usage("--max-deliveries and --dead-letter go together (an entry is never dropped)")
        skey = os.fsencode(stream)
        if dead_letter is not None and os.fsencode(dead_letter) == skey:
            _usage("--dead-letter must be another stream than STREAM")
        if start == "$":
            start_id = b"$"
        else:
            try:
                start_id = parse_id(os.fsencode(start), strict=True)
            except RedisError:
                _usage("bad --start ID: %s" % start)
        why = _executable(cmd)
        if why:
            _usage(why)
        g = ctx.obj or context.Globals()
        json_events = json_ or g.mode in ("json", "jsonl")
        store = context.open_store(g)
        from storage.consumers import ConsumerBusy, ConsumerLock
        from storage.ops import worker as W
        try:
            held = ConsumerLock(store, skey, os.fsencode(group), os.fsencode(consumer))
        except ConsumerBusy as e:
            context.fail("worker: consumer %s of group %s on stream %s is already served by a live xs worker%s; "
                         "give this one another --consumer" % (consumer, group, stream,
                                                               " (pid %d)" % e.pid if e.pid else ""))
        try:
            W.ensure_group(store, skey, os.fsencode(group), start_id)
            w = Worker(store, skey, os.fsencode(group), os.fsencode(consumer), list(cmd),
                       claim_idle=claim_idle, timeout=timeout, retry_delay=retry_delay,
                       max_deliveries=max_deliveries,
                       dead_letter=None if dead_letter is None else os.fsencode(dead_letter),
                       concurrency=concurrency, batch=batch, once=once, json_events=json_events,
                       ack_alone=ack_alone, quiet=quiet)
            code = w.run()
        except RedisError as e:
            context.fail(e.text)
        finally:
            held.close()
        if w.stdout_gone:
            context.quiet_exit(0)
        sys.exit(code)
