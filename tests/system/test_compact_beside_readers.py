"""xs compact beside long-lived readers (issue 38, item 7): a worker,
``xs tail -f``, a blocked ``XREAD ... BLOCK 0`` and ``xs serve`` (an idle
client and one blocked in XREAD) step aside when compaction asks
(storage.ops.compact, "Long-running processes"), compaction succeeds and
shrinks data.mdb, and every reader goes on with the new file: the entries
added after it reach each of them, and no acknowledged write is lost.
A process busy in a transaction still makes compaction wait and fail
cleanly; a compaction killed mid-way leaves the readers working.

Several real processes, as a user runs them; every wait is bounded."""
import json
import os
import queue
import signal
import socket
import subprocess
import threading
import time

import pytest

from tests.conftest import ROOT, XS

redis = pytest.importorskip("redis")

ENV = dict(os.environ, XS_NO_PROGRESS="1")
ENV.pop("XS_DB", None)
T = 20                     # seconds: the bound of every wait here


def xs(db, *args, input=None, env=None, timeout=120):
    return subprocess.run(XS + ["--db", str(db)] + list(args), input=input, capture_output=True, cwd=ROOT,
                          env=env or ENV, timeout=timeout)


def data(db):
    return os.stat(os.path.join(str(db), "data.mdb"))


def holder_pids(db):
    from storage.ops.compact import holders
    fd = os.open(str(db), os.O_RDONLY | os.O_DIRECTORY)
    try:
        return {p for p, _ in holders(fd)}
    finally:
        os.close(fd)


def wait_holding(db, pids, timeout=T):
    """Until every process of ``pids`` has the store open (holds db/lock)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if set(pids) <= holder_pids(db):
            return
        time.sleep(0.05)
    raise AssertionError("not all of %s opened the store (holders: %s)" % (pids, holder_pids(db)))


def make_store_with_much_deleted(db):
    """A store whose data.mdb is mostly free pages (60,000 entries added,
    then trimmed away), with stream ``s`` and its group ``g``."""
    lines = "".join("XADD big * n %d pad %s\n" % (i, "y" * 200) for i in range(60000))
    p = subprocess.run(XS + ["--db", str(db)], input=lines.encode(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=ROOT, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr
    assert xs(db, "XTRIM", "big", "MAXLEN", "0").returncode == 0
    assert xs(db, "XADD", "s", "1-1", "before", "1").returncode == 0
    assert xs(db, "XGROUP", "CREATE", "s", "g", "$").returncode == 0
    assert data(db).st_size > 8 << 20


class Lines:
    """The lines a process writes on stdout, read by a thread."""

    def __init__(self, proc):
        self.proc = proc
        self.q = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.q.put(line)
        self.q.put(None)

    def wait_for(self, text, timeout=T):
        """Until a line containing ``text`` (bytes) came."""
        end = time.monotonic() + timeout
        while not any(text in x for x in self.seen):
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("no line with %r in %r" % (text, self.seen))
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("ended (%s) before a line with %r: %r" % (self.proc.poll(), text, self.seen))
            self.seen.append(line)


def wait_file_has(path, texts, timeout=T):
    end = time.monotonic() + timeout
    got = b""
    while time.monotonic() < end:
        try:
            with open(path, "rb") as f:
                got = f.read()
        except FileNotFoundError:
            got = b""
        if all(t in got for t in texts):
            return got
        time.sleep(0.05)
    raise AssertionError("%s lacks some of %r: %r" % (path, texts, got[-500:]))


class Readers:
    """The long-lived readers of the deployment the docs describe: a
    worker, ``xs tail -f s``, ``xs XREAD BLOCK 0 STREAMS s $``, and
    ``xs serve`` on the store's Unix socket with a client blocked in XREAD
    through it."""

    def __init__(self, db, tmp_path):
        self.db = db
        self.procs = []
        self.worked = str(tmp_path / "worked.txt")
        self.worker = self._start(["worker", "s", "-g", "g", "-c", "w1", "--", "sh", "-c",
                                   "cat >> '%s'; echo >> '%s'" % (self.worked, self.worked)], stdout=False)
        self.tail = Lines(self._start(["tail", "-f", "s"]))
        self.xread = self._start(["--json", "XREAD", "BLOCK", "0", "STREAMS", "s", "$"])
        self.serve = self._start(["serve"], stdout=False)
        self.sock = os.path.join(str(db), "serve.sock")
        self.client = self._connect()
        self.blocked = queue.Queue()
        threading.Thread(target=self._blocked_read, daemon=True).start()

    def _start(self, argv, stdout=True):
        p = subprocess.Popen(XS + ["--db", str(self.db)] + argv, stdout=subprocess.PIPE if stdout else
                             subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
        self.procs.append(p)
        return p

    def _connect(self):
        end = time.monotonic() + T
        while True:
            try:
                r = redis.Redis(unix_socket_path=self.sock, socket_timeout=T)
                r.ping()
                return r
            except (redis.ConnectionError, socket.error, FileNotFoundError):
                if time.monotonic() > end or self.serve.poll() is not None:
                    raise AssertionError("xs serve did not start: %r" % self.serve.stderr.read())
                time.sleep(0.05)

    def _blocked_read(self):
        r = redis.Redis(unix_socket_path=self.sock, socket_timeout=3 * T)
        try:
            self.blocked.put(r.xread({"s": "$"}, block=0))
        except Exception as e:          # the assertion names it
            self.blocked.put(e)

    def all_open(self):
        """Until each of them has the store open (the served client blocked)."""
        wait_holding(self.db, [self.worker.pid, self.tail.proc.pid, self.xread.pid, self.serve.pid])
        end = time.monotonic() + T
        while self.client.info("clients")["blocked_clients"] < 1:
            assert time.monotonic() < end, "the served XREAD did not block"
            time.sleep(0.05)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=T)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def deployment(tmp_path):
    db = tmp_path / "events.xs"
    make_store_with_much_deleted(db)
    r = Readers(db, tmp_path)
    try:
        r.all_open()
        yield r
    finally:
        r.stop()


def check_each_reader_gets(r, fields):
    """Entries added now (one by a one-shot command, one through serve)
    reach every long-lived reader."""
    a = xs(r.db, "XADD", "s", "*", *fields[0])
    assert a.returncode == 0, a.stderr
    id_a = a.stdout.strip()
    id_b = r.client.xadd("s", {fields[1][0]: fields[1][1]})
    r.tail.wait_for(id_a)
    r.tail.wait_for(id_b)
    wait_file_has(r.worked, [id_a, id_b])
    got = r.blocked.get(timeout=T)
    assert not isinstance(got, Exception), got
    assert got[0][1][0][0] == id_a
    out, err = r.xread.communicate(timeout=T)
    assert r.xread.returncode == 0, err
    assert json.loads(out)["s"][0][0] == id_a.decode()
    assert [e[0] for e in r.client.xrange("s", "-", "+")][-2:] == [id_a, id_b]


def test_the_weekly_cron_compacts_beside_a_worker_tail_f_a_blocked_xread_and_serve(deployment):
    r = deployment
    db = r.db
    before = data(db)
    kept = xs(db, "export", "--meta").stdout
    # the documented crontab line (docs/guide.md), as cron runs it: sh -c, XS_DB
    bindir = os.path.dirname(XS[0])
    env = dict(ENV, XS_DB=str(db), PATH=bindir + os.pathsep + ENV.get("PATH", ""))
    argv = ["sh", "-c", "xs compact -q"] if os.path.exists(os.path.join(bindir, "xs")) else XS + ["compact", "-q"]
    t0 = time.monotonic()
    p = subprocess.run(argv, capture_output=True, cwd=ROOT, timeout=60, env=env)
    took = time.monotonic() - t0
    assert p.returncode == 0 and p.stdout == b"" and p.stderr == b"", p.stderr
    assert took < 15
    after = data(db)
    assert after.st_ino != before.st_ino
    assert after.st_size < before.st_size / 20
    assert xs(db, "export", "--meta").stdout == kept          # nothing lost by the copy
    # every reader is back, on the new file
    wait_holding(db, [r.worker.pid, r.tail.proc.pid, r.xread.pid, r.serve.pid])
    check_each_reader_gets(r, [("after", "1"), ("after", "2")])
    # and the next compaction (and the one after) too: nothing left behind
    for _ in range(2):
        p = xs(db, "compact", "--json", "--wait", "10")
        assert p.returncode == 0, p.stderr
    b = r.client.xadd("s", {"after": "3"})
    r.tail.wait_for(b)
    wait_file_has(r.worked, [b])


def test_writes_through_serve_and_one_shot_commands_during_compactions_are_all_kept_and_seen(deployment):
    r = deployment
    db = r.db
    acked = []
    stop = threading.Event()
    errors = []

    def produce():
        c = redis.Redis(unix_socket_path=r.sock, socket_timeout=T)
        i = 0
        while not stop.is_set():
            try:
                acked.append(c.xadd("s", {"n": str(i)}))
            except Exception as e:
                errors.append(e)
                return
            i += 1
            time.sleep(0.002)
    t = threading.Thread(target=produce)
    t.start()
    one_shot = []
    try:
        for k in range(3):
            p = xs(db, "compact", "--wait", "15")
            assert p.returncode == 0, p.stderr
            a = xs(db, "XADD", "s", "*", "k", str(k))
            assert a.returncode == 0, a.stderr
            one_shot.append(a.stdout.strip())
    finally:
        stop.set()
        t.join(T)
    assert not errors, errors
    assert len(acked) > 10
    stored = [e[0] for e in r.client.xrange("s", "-", "+")]
    lost = [i for i in acked + one_shot if i not in set(stored)]
    assert not lost, "acknowledged entries lost: %s" % lost[:10]
    # the tail saw every one of them, in order, and the worker handled them
    # wait for the newest of them all: the last one-shot XADD may come after
    # the producer's last reply
    ours = set(acked + one_shot)
    expected = [i for i in stored if i in ours]
    r.tail.wait_for(expected[-1])
    printed = [line.split()[1] for line in r.tail.seen if line.startswith(b"s ")]
    assert [i for i in printed if i in ours] == expected
    wait_file_has(r.worked, [acked[-1], one_shot[-1]])


def test_a_process_in_a_transaction_still_makes_compaction_wait_and_fail_cleanly(deployment, tmp_path):
    r = deployment
    db = r.db
    import sys
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, %r)\n"
                               "from storage.store import Store\n"
                               "s = Store(sys.argv[1], create=False)\n"
                               "with s.read() as tx:\n"
                               "    print('open', flush=True)\n"
                               "    time.sleep(60)\n" % ROOT, str(db)], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout.readline() == b"open\n"
        ino = data(db).st_ino
        t0 = time.monotonic()
        p = xs(db, "compact", "--wait", "1.5")
        took = time.monotonic() - t0
        err = p.stderr.decode()
        assert p.returncode == 1 and "Traceback" not in err and err.count("\n") == 1, err
        # only the busy process is named: the idle readers stepped aside
        assert "1 process using it: pid %d (" % holder.pid in err, err
        assert "nothing was changed" in err
        assert 1.5 <= took < 12
        assert data(db).st_ino == ino
    finally:
        holder.kill()
        holder.wait()
    # the readers came back to the old file, and work
    wait_holding(db, [r.worker.pid, r.tail.proc.pid, r.xread.pid, r.serve.pid])
    check_each_reader_gets(r, [("x", "1"), ("x", "2")])
    # with the busy process gone, compaction runs beside them
    p = xs(db, "compact", "--wait", "10")
    assert p.returncode == 0, p.stderr
    assert data(db).st_ino != ino


def test_sigkill_of_compaction_at_each_step_leaves_the_readers_working(deployment):
    r = deployment
    db = r.db
    from storage.ops.compact import KILL_ENV, KILL_POINTS
    first = True
    for step in KILL_POINTS:
        p = subprocess.run(XS + ["--db", str(db), "compact", "--wait", "10"], capture_output=True, cwd=ROOT,
                           env=dict(ENV, **{KILL_ENV: step}), timeout=60)
        assert p.returncode == -signal.SIGKILL, (step, p.returncode, p.stderr)
        wait_holding(db, [r.worker.pid, r.tail.proc.pid, r.serve.pid] + ([r.xread.pid] if first else []))
        if first:
            check_each_reader_gets(r, [("killed", step), ("served", step)])
            first = False
        else:
            a = xs(db, "XADD", "s", "*", "killed", step)
            assert a.returncode == 0, a.stderr
            b = r.client.xadd("s", {"served": step})
            r.tail.wait_for(a.stdout.strip())
            r.tail.wait_for(b)
            wait_file_has(r.worked, [a.stdout.strip(), b])
    assert xs(db, "compact", "--wait", "10").returncode == 0
    assert not [n for n in os.listdir(str(db)) if n.startswith("data.mdb.compact-")]


FAKE_COMPACTION = """
import fcntl, os, sys, time
sys.path.insert(0, %r)
from storage.files import request_aside
d = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
f = os.open("lock", os.O_RDWR | os.O_CLOEXEC, dir_fd=d)
assert request_aside(f)
end = time.monotonic() + 15
while True:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except BlockingIOError:
        assert time.monotonic() < end, "the readers did not step aside"
        time.sleep(0.02)
# a compaction gone wrong (or a person meddling): no data.mdb to come back to
os.rename("data.mdb", "data.mdb.moved", src_dir_fd=d, dst_dir_fd=d)
""" % ROOT


def test_a_reader_that_cannot_open_the_store_again_fails_with_one_line(deployment):
    import sys
    r = deployment
    db = r.db
    p = subprocess.run([sys.executable, "-c", FAKE_COMPACTION, str(db)], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    why = "the store %s was closed for a compaction and could not be opened again: data.mdb is gone" % db
    for proc in (r.tail.proc, r.xread, r.worker):
        proc.wait(timeout=T)
        err = proc.stderr.read().decode()
        assert proc.returncode == 1, (proc.args, proc.returncode, err)
        assert why in err and "Traceback" not in err, err
    # xs serve stays up and answers each command with the reason
    with pytest.raises(redis.ResponseError, match="could not be opened again: data.mdb is gone"):
        r.client.xlen("s")
    assert r.serve.poll() is None


POLLING_WAITER = """
import sys, threading
sys.path.insert(0, %r)
from storage import inotify
inotify._libc = False                     # no inotify here: the waiter polls the change counters
from storage.blocking import wait_until
from storage.store import Store
s = Store(sys.argv[1], create=False)
env, dbs = s.env, s.dbs
before = s.run(lambda tx: tx.length(b"s"))
print("waiting", flush=True)

def attempt(woken):
    n = s.run(lambda tx: tx.length(b"s"))
    return n if n > before else None
n = wait_until(s, [b"s"], attempt, timeout_s=%d)
print("got", n, "new env", s.env is not env, "new dbs", s.dbs is not dbs, flush=True)
""" % (ROOT, 3 * T)


def test_a_waiter_without_inotify_steps_aside_too_and_keeps_its_store_object(tmp_path):
    import sys
    db = tmp_path / "db"
    make_store_with_much_deleted(db)
    w = subprocess.Popen([sys.executable, "-c", POLLING_WAITER, str(db)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
    try:
        assert w.stdout.readline() == b"waiting\n"
        wait_holding(db, [w.pid])
        before = data(db)
        p = xs(db, "compact", "--wait", "10")
        assert p.returncode == 0, p.stderr
        assert data(db).st_size < before.st_size / 20
        assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
        out, err = w.communicate(timeout=T)
        assert w.returncode == 0, err
        assert out == b"got 2 new env True new dbs True\n"
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()
