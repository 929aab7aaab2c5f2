"""xs worker's children: running one job's command (its stdin fed,
its stdout copied, its stderr kept), and starting commands through the
watchdog (``_Lifeline``, the program in ``watchdog.py``) so that none
outlives its worker.  No store, no click."""
import os
import signal
import time


def _env(b):
    """An environment value of bytes (a name or an ID), as os.environ holds it."""
    return b.decode("utf-8", "surrogateescape")


WATCHDOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog.py")

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
                proc = subprocess.Popen([sys.executable, "-I", "-S", WATCHDOG], stdin=its,
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
