"""xs worker: at-least-once processing by an external command, through
real subprocesses: acknowledgement, retries and dead letters, crashes
(SIGKILL) and stops (SIGTERM), data that must reach the command intact,
usage errors, and the example of docs/workers.md."""
import base64
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, XS, run_xs

TIMEOUT = 30
PY = sys.executable

# CMD that records each run (XS_ID XS_DELIVERIES) in $LOG and exits with $RC
RECORD = ("import os, sys; sys.stdin.read(); "
          "open(os.environ['LOG'], 'a').write('%s %s\\n' % (os.environ['XS_ID'], os.environ['XS_DELIVERIES'])); "
          "sys.stderr.write('boom %s\\n' % os.environ['XS_ID']); "
          "sys.exit(int(os.environ.get('RC', '0')))")
# CMD that says it started (its pid in $MARK) and then hangs
HANG = ("import os, sys, time; sys.stdin.read(); "
        "open(os.environ['MARK'], 'a').write('%d %s\\n' % (os.getpid(), os.environ['XS_DELIVERIES'])); "
        "time.sleep(120)")


@pytest.fixture
def db(tmp_path):
    return tmp_path / "db"


def fill(db, lines):
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def xs_json(db, line):
    p = run_xs(db, [line])
    return json.loads(p.stdout.decode("utf-8", "surrogateescape"))


def worker_argv(db, *args, cmd=(PY, "-c", RECORD)):
    return XS + ["--db", str(db), "worker"] + list(args) + ["--"] + list(cmd)


def run_worker(db, *args, cmd=(PY, "-c", RECORD), env=None, timeout=TIMEOUT):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(worker_argv(db, *args, cmd=cmd), capture_output=True, timeout=timeout, env=e,
                          cwd=ROOT)


def start_worker(db, *args, cmd=(PY, "-c", RECORD), env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen(worker_argv(db, *args, cmd=cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=e, cwd=ROOT)


def events_until(p, pred, timeout=TIMEOUT):
    """Read --json events from a running worker until ``pred(event)``."""
    fd = p.stdout.fileno()
    buf = b""
    seen = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if not r:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            ev = json.loads(line)
            seen.append(ev)
            if pred(ev):
                return seen
    raise AssertionError("no such event; saw %r" % seen)


def wait_for(path, lines=1, timeout=TIMEOUT):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if path.exists() and path.read_text().count("\n") >= lines:
            return path.read_text().splitlines()
        time.sleep(0.02)
    raise AssertionError("%s never got %d lines" % (path, lines))


def stop(p, sig=signal.SIGTERM):
    p.send_signal(sig)
    out, err = p.communicate(timeout=TIMEOUT)
    return p.returncode, out, err


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is not alive: it has exited
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def pending(db, stream="s", group="g"):
    return xs_json(db, "XPENDING %s %s - + 100" % (stream, group))


# ------------------------------------------------------------------ acking

def _commits(db):
    import lmdb
    env = lmdb.open(str(db), readonly=True, max_dbs=64, subdir=True)
    try:
        return env.info()["last_txnid"]
    finally:
        env.close()


@pytest.mark.parametrize("ack_alone", [False, True])
def test_an_ack_rides_in_the_commit_that_reads_the_next_entry(db, tmp_path, ack_alone):
    # issue 9: a busy worker pays one durable commit per entry, not two
    # (read, then ack); --ack-alone keeps the old way
    n = 12
    ids = fill(db, ["XADD s * n %d" % i for i in range(n)] + ["XGROUP CREATE s g 0"])
    before = _commits(db)
    args = ["--once", "--json"] + (["--ack-alone"] if ack_alone else [])
    p = run_worker(db, "s", "-g", "g", "-c", "c", *args, env={"LOG": str(tmp_path / "log")})
    assert p.returncode == 0, p.stderr
    events = [json.loads(l) for l in p.stdout.decode().splitlines()]
    assert [e["id"] for e in events if e["event"] == "acked"] == ids[:n]
    assert xs_json(db, "XPENDING s g")[0] == 0
    commits = _commits(db) - before
    if ack_alone:
        assert commits >= 2 * n
    else:
        assert n <= commits <= n + 2


def test_successful_entries_are_acknowledged_exactly_once(db, tmp_path):
    ids = fill(db, ["XADD s * n %d" % i for i in range(6)])
    log = tmp_path / "log"
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", "--json", "--concurrency", "3",
                   env={"LOG": str(log)})
    assert p.returncode == 0, p.stderr
    runs = log.read_text().splitlines()
    assert sorted(runs) == sorted("%s 1" % i for i in ids)
    events = [json.loads(l) for l in p.stdout.decode().splitlines()]
    assert sorted(e["id"] for e in events if e["event"] == "acked") == sorted(ids)
    assert all(e["event"] == "acked" and e["deliveries"] == 1 for e in events)
    assert pending(db) == []
    assert xs_json(db, "XPENDING s g")[0] == 0
    assert re.search(rb"xs worker: 6 processed, 0 failed, 0 dead-lettered in [\d.]+s", p.stderr.splitlines()[-1])
    # nothing is run twice: a second run finds nothing
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", env={"LOG": str(log)})
    assert p.returncode == 0
    assert len(log.read_text().splitlines()) == 6


def test_group_is_created_at_start_and_a_missing_stream_works(db, tmp_path):
    ids = fill(db, ["XADD s * n 1", "XADD s * n 2"])
    log = tmp_path / "log"
    p = run_worker(db, "s", "-g", "late", "-c", "c", "--once", "--start", "$", env={"LOG": str(log)})
    assert p.returncode == 0 and not log.exists()           # $: only new entries
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", "--start", ids[0], env={"LOG": str(log)})
    assert log.read_text().splitlines() == ["%s 1" % ids[1]]
    p = run_worker(db, "nosuch", "-g", "g", "-c", "c", "--once", env={"LOG": str(log)})
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines()[-1].startswith(b"xs worker: 0 processed")
    assert xs_json(db, "XLEN nosuch") == 0                   # XGROUP CREATE ... MKSTREAM


def test_batch_hands_many_entries_as_json_lines(db, tmp_path):
    ids = fill(db, ["XADD s * n %d" % i for i in range(5)])
    out = tmp_path / "out"
    cmd = (PY, "-c", "import os, sys; open(sys.argv[1], 'a').write(os.environ['XS_COUNT'] + ' ' "
                     "+ os.environ['XS_IDS'] + '\\n' + sys.stdin.read())", str(out))
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", "--batch", "10", cmd=cmd)
    assert p.returncode == 0, p.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "5 " + " ".join(ids)
    assert [json.loads(l) for l in lines[1:]] == [{"stream": "s", "id": i, "fields": ["n", str(n)]}
                                                  for n, i in enumerate(ids)]
    assert pending(db) == []


# ------------------------------------------------------------------ failures

def test_a_failing_command_ends_in_the_dead_letter_stream_after_exactly_n_deliveries(db, tmp_path):
    fill(db, ["XADD s * n 1", "XADD s * n 2 n 3"])
    log = tmp_path / "log"
    cmd = (PY, "-c", RECORD)
    p = start_worker(db, "s", "-g", "g", "-c", "c", "--json", "--retry-delay", "0", "--max-deliveries", "3",
                     "--dead-letter", "dead", cmd=cmd,
                     env={"LOG": str(log), "RC": "0"})
    try:
        acked = []
        events_until(p, lambda e: acked.append(e) or len(acked) == 2)   # the first two succeed...
    finally:
        code, out, err = stop(p)
    assert code == 0
    # ...then a failing one: a new worker whose command always fails
    fill(db, ["XADD s * x y"])
    p = start_worker(db, "s", "-g", "g", "-c", "c", "--json", "--retry-delay", "0", "--max-deliveries", "3",
                     "--dead-letter", "dead", cmd=cmd, env={"LOG": str(log), "RC": "3"})
    try:
        seen = events_until(p, lambda e: e["event"] == "dead-lettered")
        time.sleep(0.3)                                      # and nothing more happens to it
    finally:
        code, out, err = stop(p)
    assert code == 0, err
    failing = [e for e in seen if e["event"] == "failed"]
    assert [e["deliveries"] for e in failing] == [1, 2, 3]
    assert all(e["status"] == "exit 3" for e in failing)
    bad_id = failing[0]["id"]
    runs = [l for l in log.read_text().splitlines() if l.startswith(bad_id)]
    assert runs == ["%s 1" % bad_id, "%s 2" % bad_id, "%s 3" % bad_id]
    assert pending(db) == []                                 # acknowledged
    dead = xs_json(db, "XRANGE dead - +")
    assert len(dead) == 1
    fields = dead[0][1]
    assert fields[:12] == ["xs-stream", "s", "xs-id", bad_id, "xs-group", "g", "xs-consumer", "c",
                           "xs-deliveries", "3", "xs-exit", "exit 3"]
    assert fields[12] == "xs-stderr" and fields[13].endswith("boom %s\n" % bad_id)
    assert fields[14:] == ["x", "y"]
    assert seen[-1]["dead-letter"] == {"stream": "dead", "id": dead[0][0]}


def test_a_child_left_holding_stderr_does_not_hold_up_the_next_entry(db, tmp_path):
    """CMD starts a background child that keeps its stderr open, writes
    to stderr and fails: the worker settles each entry as soon as CMD has
    exited and its stderr is read (it used to wait 1 s for the child), and
    the dead-letter record still holds all CMD wrote (issue 29, item 16)."""
    ids = fill(db, ["XADD s * n %d" % k for k in range(8)])
    cmd = ("sh", "-c", 'cat >/dev/null; sleep 5 >/dev/null & echo "boom $XS_ID" >&2; exit 3')
    t = time.monotonic()
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", "--max-deliveries", "1", "--dead-letter", "dead",
                   cmd=cmd)
    elapsed = time.monotonic() - t
    assert p.returncode == 1, p.stderr    # --once: a failed entry is exit 1
    dead = xs_json(db, "XRANGE dead - +")
    assert [f[3] for _, f in dead] == ids
    assert [f[13] for _, f in dead] == ["boom %s\n" % i for i in ids]
    assert elapsed < 6, elapsed                 # 8 entries: at least 8 s when each waited for the child


def test_once_leaves_a_failed_entry_pending_for_the_next_run(db, tmp_path):
    (i,) = fill(db, ["XADD s * n 1"])
    log = tmp_path / "log"
    args = ("s", "-g", "g", "-c", "c", "--once", "--max-deliveries", "2", "--dead-letter", "dead")
    p = run_worker(db, *args, env={"LOG": str(log), "RC": "1"})
    assert p.returncode == 1    # --once: a failed entry is exit 1
    assert [r[0] for r in pending(db)] == [i] and pending(db)[0][3] == 1
    assert xs_json(db, "XLEN dead") == 0
    p = run_worker(db, *args, env={"LOG": str(log), "RC": "1"})
    assert p.returncode == 1    # --once: a failed entry is exit 1
    assert pending(db) == [] and xs_json(db, "XLEN dead") == 1
    assert log.read_text().splitlines() == ["%s 1" % i, "%s 2" % i]


def test_timeout_kills_the_command_and_counts_as_a_failure(db, tmp_path):
    (i,) = fill(db, ["XADD s * n 1"])
    mark = tmp_path / "mark"
    t0 = time.monotonic()
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", "--json", "--timeout", "0.5",
                   "--max-deliveries", "1", "--dead-letter", "dead", cmd=(PY, "-c", HANG),
                   env={"MARK": str(mark)})
    assert p.returncode == 1, p.stderr    # --once: a failed entry is exit 1
    assert time.monotonic() - t0 < 15
    pid = int(mark.read_text().split()[0])
    assert not alive(pid)
    events = [json.loads(l) for l in p.stdout.decode().splitlines()]
    assert [(e["event"], e.get("status")) for e in events] == [("failed", "timeout"), ("dead-lettered", "timeout")]
    assert pending(db) == []
    assert xs_json(db, "XRANGE dead - +")[0][1][10:12] == ["xs-exit", "timeout"]


# ------------------------------------------------------------------ crashes and stops

def test_a_worker_killed_mid_entry_has_it_redelivered_to_the_next_worker(db, tmp_path):
    (i,) = fill(db, ["XADD s * n 1"])
    mark = tmp_path / "mark"
    p = start_worker(db, "s", "-g", "g", "-c", "a", "--claim-idle", "300", cmd=(PY, "-c", HANG),
                     env={"MARK": str(mark)})
    pid = int(wait_for(mark)[0].split()[0])
    p.kill()                                                 # SIGKILL: no chance to release anything
    p.wait(timeout=TIMEOUT)
    end = time.monotonic() + TIMEOUT                         # its command dies with it (the lifeline),
    while alive(pid) and time.monotonic() < end:             # though it runs in a session of its own
        time.sleep(0.02)
    assert not alive(pid), "the command outlived its SIGKILLed worker"
    p.communicate(timeout=TIMEOUT)                           # (it held the worker's stdout)
    rows = pending(db)
    assert [(r[0], r[1], r[3]) for r in rows] == [(i, "a", 1)]
    time.sleep(0.4)                                          # idle longer than --claim-idle
    log = tmp_path / "log"
    q = run_worker(db, "s", "-g", "g", "-c", "b", "--once", "--claim-idle", "300", "--json",
                   env={"LOG": str(log)})
    assert q.returncode == 0, q.stderr
    assert log.read_text().splitlines() == ["%s 2" % i]     # second delivery
    assert [json.loads(l)["event"] for l in q.stdout.decode().splitlines()] == ["acked"]
    assert pending(db) == []


# CMD for the window test: never twice at once (an flock its child shares,
# or "overlap" in $LOG); records each run in $LOG; the first delivery
# starts a child, writes "PID CHILD_PID" to $MARK and hangs, before it
# reads stdin (the paused worker feeds nothing); the next one exits 0
GROUP_CMD = ("import fcntl, os, subprocess, sys, time\n"
             "lock = open(os.environ['LOCK'], 'a')\n"
             "try:\n"
             "    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError:\n"
             "    open(os.environ['LOG'], 'a').write('overlap\\n')\n"
             "    sys.exit(1)\n"
             "open(os.environ['LOG'], 'a').write('%s %s\\n' % (os.environ['XS_ID'], os.environ['XS_DELIVERIES']))\n"
             "if os.environ['XS_DELIVERIES'] != '1':\n"
             "    sys.exit(0)\n"
             "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], pass_fds=[lock.fileno()])\n"
             "open(os.environ['MARK'], 'a').write('%d %d\\n' % (os.getpid(), child.pid))\n"
             "time.sleep(120)\n")


def test_a_worker_killed_just_after_starting_a_command_takes_its_whole_group_with_it(db, tmp_path):
    """The window of issue 29 item 14: a worker SIGKILLed right after
    CMD started, before it could record it anywhere, must not leave CMD
    (nor the child CMD started) running, or the entry's next delivery
    runs beside it.  _XS_WORKER_TEST_PAUSE (a test-only hook) holds the
    worker at that very point, so the kill lands there every time."""
    (i,) = fill(db, ["XADD s * n 1"])
    mark, log, paused = tmp_path / "mark", tmp_path / "log", tmp_path / "paused"
    env = {"MARK": str(mark), "LOG": str(log), "LOCK": str(tmp_path / "lock")}
    p = start_worker(db, "s", "-g", "g", "-c", "a", "--claim-idle", "300", cmd=(PY, "-c", GROUP_CMD),
                     env=dict(env, _XS_WORKER_TEST_PAUSE=str(paused)))
    pids = []
    try:
        pids = [int(x) for x in wait_for(mark)[0].split()]
        until = time.monotonic() + TIMEOUT
        while not paused.exists() and time.monotonic() < until:
            time.sleep(0.01)
        assert paused.exists()                               # the worker is held in the window
        p.kill()                                             # SIGKILL there
        p.wait(timeout=TIMEOUT)
        end = time.monotonic() + 5
        while any(alive(x) for x in pids) and time.monotonic() < end:
            time.sleep(0.02)
        assert [x for x in pids if alive(x)] == [], "CMD or its child outlived the SIGKILLed worker"
    finally:
        for x in pids:                                       # what a failure leaves behind
            if alive(x):
                os.kill(x, signal.SIGKILL)
        p.kill()
        p.communicate(timeout=TIMEOUT)
    assert [(r[0], r[1], r[3]) for r in pending(db)] == [(i, "a", 1)]
    time.sleep(0.4)                                          # idle longer than --claim-idle
    q = run_worker(db, "s", "-g", "g", "-c", "b", "--once", "--claim-idle", "300", cmd=(PY, "-c", GROUP_CMD),
                   env=env)
    assert q.returncode == 0, q.stderr
    assert log.read_text().splitlines() == ["%s 1" % i, "%s 2" % i]      # not twice at once
    assert pending(db) == []


def test_a_second_live_worker_with_the_same_consumer_name_is_refused(db, tmp_path):
    """Two workers under one consumer name would run one entry twice at
    once: the second is refused (exit 1, naming the first's pid) and
    changes nothing; another name runs beside it; once the first is
    gone, even by SIGKILL, the name is free (issue 29, item 15)."""
    (i,) = fill(db, ["XADD s * n 1"])
    mark = tmp_path / "mark"
    p = start_worker(db, "s", "-g", "g", "-c", "a", cmd=(PY, "-c", HANG), env={"MARK": str(mark)})
    try:
        cmd_pid = int(wait_for(mark)[0].split()[0])
        q = run_worker(db, "s", "-g", "g", "-c", "a", "--once", env={"LOG": str(tmp_path / "log")})
        assert q.returncode == 1
        assert q.stderr.decode() == ("xs: worker: consumer a of group g on stream s is already served by a "
                                     "live xs worker (pid %d); give this one another --consumer\n" % p.pid)
        assert not (tmp_path / "log").exists()
        assert [(r[0], r[1], r[3]) for r in pending(db)] == [(i, "a", 1)]
        other = run_worker(db, "s", "-g", "g", "-c", "b", "--once", env={"LOG": str(tmp_path / "log")})
        assert other.returncode == 0, other.stderr              # another consumer name: no conflict
    finally:
        p.kill()                                             # SIGKILL: the lock goes with the process
        p.wait(timeout=TIMEOUT)
        try:
            os.kill(cmd_pid, signal.SIGKILL)
        except (ProcessLookupError, NameError):
            pass
        p.communicate(timeout=TIMEOUT)
    again = run_worker(db, "s", "-g", "g", "-c", "a", "--once", env={"LOG": str(tmp_path / "log")})
    assert again.returncode == 0, again.stderr


def test_a_slow_command_is_not_taken_over_while_its_worker_lives(db, tmp_path):
    fill(db, ["XADD s * n 1"])
    mark = tmp_path / "mark"
    p = start_worker(db, "s", "-g", "g", "-c", "a", "--claim-idle", "1000", cmd=(PY, "-c", HANG),
                     env={"MARK": str(mark)})
    try:
        wait_for(mark)
        time.sleep(2.5)                                      # > --claim-idle: kept alive by worker a
        log = tmp_path / "log"
        q = run_worker(db, "s", "-g", "g", "-c", "b", "--once", "--claim-idle", "1000", env={"LOG": str(log)})
        assert q.returncode == 0 and not log.exists()
    finally:
        code, _, err = stop(p)
    assert code == 0, err


def test_sigterm_leaves_the_in_flight_entry_pending_and_exits_0(db, tmp_path):
    (i,) = fill(db, ["XADD s * n 1"])
    mark = tmp_path / "mark"
    p = start_worker(db, "s", "-g", "g", "-c", "c", "--json", cmd=(PY, "-c", HANG), env={"MARK": str(mark)})
    pid = int(wait_for(mark)[0].split()[0])
    t0 = time.monotonic()
    code, out, err = stop(p)
    assert code == 0, err
    assert time.monotonic() - t0 < 10
    assert not alive(pid)                                    # its command was stopped
    assert [json.loads(l)["event"] for l in out.decode().splitlines()] == ["released"]
    assert b"Traceback" not in err
    assert re.search(rb"0 processed, 0 failed, 0 dead-lettered, 1 released", err.splitlines()[-1])
    rows = pending(db)
    assert [r[0] for r in rows] == [i]                       # still pending (given back, uncounted)
    # the next worker gets it at once
    log = tmp_path / "log"
    q = run_worker(db, "s", "-g", "g", "-c", "other", "--once", env={"LOG": str(log)})
    assert q.returncode == 0
    assert log.read_text().splitlines() == ["%s 1" % i]
    assert pending(db) == []


def test_sigint_while_idle_exits_0(db):
    from tests.cli.test_blocking_cli import wait_blocked
    p = start_worker(db, "s", "-g", "g", "-c", "c", cmd=("true",))
    wait_blocked(p)                      # idle: waiting for entries (a SIGINT before that is exit 130)
    code, out, err = stop(p, signal.SIGINT)
    assert code == 0 and b"Traceback" not in err
    assert err.splitlines()[-1].startswith(b"xs worker: 0 processed")


def test_a_worker_waits_for_new_entries(db, tmp_path):
    log = tmp_path / "log"
    p = start_worker(db, "s", "-g", "g", "-c", "c", "--json", env={"LOG": str(log)})
    try:
        time.sleep(0.5)
        (i,) = fill(db, ["XADD s * n 1"])
        ev = events_until(p, lambda e: e["event"] == "acked", timeout=10)
    finally:
        code, _, err = stop(p)
    assert code == 0, err
    assert ev[-1]["id"] == i


# ------------------------------------------------------------------ data

def test_shell_metacharacters_and_non_utf8_reach_the_command_intact(db, tmp_path):
    pwned = tmp_path / "pwned"
    evil = "$(touch %s) `touch %s` ' \" ; | & > <" % (pwned, pwned)
    line = b'XADD s * "%s" "\\xff\\xfe\\x00end" na\\xefme "\\n"' % evil.replace('"', '\\"').encode()
    (i,) = fill(db, [line])
    out = tmp_path / "out"
    envout = tmp_path / "env"
    cmd = (PY, "-c", "import os, sys; open(sys.argv[1], 'wb').write(sys.stdin.buffer.read()); "
                     "open(sys.argv[2], 'w').write(repr({k: v for k, v in os.environ.items() "
                     "if k.startswith('XS_')}))", str(out), str(envout))
    p = run_worker(db, "s", "-g", "g", "-c", "c", "--once", cmd=cmd)
    assert p.returncode == 0, p.stderr
    assert not pwned.exists()
    data = out.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 1   # one JSON line
    rec = json.loads(data)
    assert rec["stream"] == "s" and rec["id"] == i
    f = rec["fields"]
    assert f[0] == evil
    assert base64.b64decode(f[1]["b64"]) == b"\xff\xfe\x00end"
    assert f[2] == "na\\xefme"                               # not a script-mode escape outside quotes
    assert f[3] == "\n"
    env = eval(envout.read_text())
    assert env["XS_STREAM"] == "s" and env["XS_GROUP"] == "g" and env["XS_CONSUMER"] == "c"
    assert env["XS_ID"] == i and env["XS_DELIVERIES"] == "1" and env["XS_COUNT"] == "1"


# ------------------------------------------------------------------ usage

@pytest.mark.parametrize("args,message", [
    (["s", "-g", "g", "-c", "c", "true"], "missing -- before CMD"),
    (["s", "-g", "g", "-c", "c", "--"], "missing CMD after --"),
    (["-g", "g", "-c", "c", "--", "true"], "Missing argument 'STREAM'"),
    (["s", "-c", "c", "--", "true"], "Missing option '-g'"),
    (["s", "-g", "g", "--", "true"], "Missing option '-c'"),
    (["s", "-g", "g", "-c", "c", "--", "no-such-command-xs"], "command not found: no-such-command-xs"),
    (["s", "-g", "g", "-c", "c", "--max-deliveries", "3", "--", "true"], "go together"),
    (["s", "-g", "g", "-c", "c", "--max-deliveries", "0", "--dead-letter", "d", "--", "true"], "--max-deliveries"),
    (["s", "-g", "g", "-c", "c", "--dead-letter", "s", "--max-deliveries", "2", "--", "true"], "another stream"),
    (["s", "-g", "g", "-c", "c", "--start", "nope", "--", "true"], "bad --start ID"),
    (["s", "-g", "g", "-c", "c", "--bogus", "--", "true"], "--bogus"),
])
def test_usage_errors_are_one_line_and_exit_2(db, args, message):
    p = subprocess.run(XS + ["--db", str(db), "worker"] + args, capture_output=True, timeout=TIMEOUT, cwd=ROOT)
    assert p.returncode == 2, p.stderr
    assert p.stdout == b""
    lines = p.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("xs: worker: ") and message in lines[0], lines
    assert not os.path.exists(db / "data.mdb")               # nothing was opened


def test_help_shows_the_synopsis():
    p = subprocess.run(XS + ["worker", "--help"], capture_output=True, timeout=TIMEOUT, cwd=ROOT)
    assert p.returncode == 0
    assert p.stdout.startswith(b"Usage: xs worker STREAM -g GROUP -c CONSUMER [OPTIONS] -- CMD [ARG]...")


# ------------------------------------------------------- docs/workers.md

def readme_example():
    with open(os.path.join(ROOT, "docs", "workers.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## xs worker", 1)[1].split("\n#", 1)[0]
    block = [b for b in re.findall(r"\n\n((?:    .*\n)+)", section) if "    xs XADD" in b][0]
    return [l[4:] for l in block.splitlines() if l.startswith("    xs ")], section


def test_the_readme_worker_example_runs(tmp_path):
    commands, section = readme_example()
    assert any(" worker " in c for c in commands)
    xs = " ".join(shlex.quote(a) for a in XS)
    out = b""
    for c in commands:
        c = c.split("  #", 1)[0]
        p = subprocess.run(["bash", "-c", xs + c[2:]], capture_output=True, timeout=TIMEOUT, cwd=str(tmp_path),
                           env=dict(os.environ, XS_DB=str(tmp_path / "db")))
        assert p.returncode == 0, (c, p.stderr)
        out += p.stdout
    # the output docs/workers.md shows
    shown = re.search(r"prints\n\n((?:    .*\n)+)", section).group(1)
    expected = [l[4:] for l in shown.splitlines()]
    got = out.decode().splitlines()
    assert [re.sub(r"\d+-\d+", "ID", l) for l in got[-len(expected):]] == expected


# ------------------------------------------------------------ xs redrive

def redrive(db, *args):
    return subprocess.run(XS + ["--db", str(db), "redrive"] + list(args), capture_output=True, timeout=TIMEOUT,
                          cwd=ROOT)


def test_redrive_puts_dead_letters_back_once_and_the_group_runs_them_again(db, tmp_path):
    fill(db, ["XADD s 1-1 n 1", "XADD s 1-2 n 2", "XADD dead 0-1 not a-dead-letter"])
    log = tmp_path / "log"
    args = ("s", "-g", "g", "-c", "c", "--once", "--max-deliveries", "1", "--dead-letter", "dead")
    assert run_worker(db, *args, env={"LOG": str(log), "RC": "3"}).returncode == 1
    assert xs_json(db, "XLEN dead") == 3
    p = redrive(db, "dead", "--dry-run")
    assert p.stdout == b"s: would redrive 2\ntotal: would redrive 2 dead letters from dead; " \
                       b"1 entry that is not a dead letter left there\n"
    assert xs_json(db, "XLEN dead") == 3
    p = redrive(db, "dead", "--json")
    doc = json.loads(p.stdout)
    assert doc["redriven"] == 2 and [e["original"] for e in doc["entries"]] == ["1-1", "1-2"]
    assert xs_json(db, "XLEN dead") == 1                                 # only the foreign entry is left
    again = [e[1] for e in xs_json(db, "XRANGE s (1-2 +")]
    assert again == [["n", "1"], ["n", "2"]]                             # the entries' own fields, new IDs
    assert redrive(db, "dead").stdout.startswith(b"total: redrove 0 dead letters")   # a second run: nothing
    p = run_worker(db, *args, env={"LOG": str(log), "RC": "0"})
    assert p.returncode == 0
    assert len(log.read_text().splitlines()) == 4                        # 2 failed runs, then 2 good ones


def test_redrive_takes_only_the_origin_streams_asked_for_and_refuses_a_missing_stream(db):
    from storage.ops.worker import ORIGIN_NAMES
    letters = []
    for origin in ("a", "b"):
        pairs = [ORIGIN_NAMES[0], origin, ORIGIN_NAMES[1], "1-1"] + [x for n in ORIGIN_NAMES[2:] for x in (n, "x")]
        letters.append("XADD dead * %s f %s" % (" ".join(p if isinstance(p, str) else p.decode() for p in pairs),
                                                 origin))
    fill(db, letters)
    p = redrive(db, "dead", "--stream", "b")
    assert p.stdout == b"b: redrove 1\ntotal: redrove 1 dead letter from dead\n"
    assert xs_json(db, "XLEN a") == 0 and xs_json(db, "XRANGE b - +")[0][1] == ["f", "b"]
    p = redrive(db, "nosuch")
    assert p.returncode == 1 and p.stderr == b"xs: no such stream: nosuch\n"


def test_a_dead_letter_whose_origin_refuses_it_is_named_and_left_and_the_others_go_back(db):
    """An origin stream at the largest ID cannot take the letter back:
    it stays in the dead-letter stream, named on stderr (-q too), and
    the letters before and after it are redriven; exit 1."""
    from storage.ops.worker import ORIGIN_NAMES
    top = "18446744073709551615-18446744073709551615"
    letters = []
    for origin in ("a", "full", "b"):
        pairs = [ORIGIN_NAMES[0], origin, ORIGIN_NAMES[1], "1-1"] + [x for n in ORIGIN_NAMES[2:] for x in (n, "x")]
        letters.append("XADD dead * %s f %s" % (" ".join(p if isinstance(p, str) else p.decode() for p in pairs),
                                                 origin))
    fill(db, ["XADD full %s f v" % top] + letters)
    stuck_id = xs_json(db, "XRANGE dead - +")[1][0]
    for args in ((), ("-q",)):
        p = redrive(db, "dead", *args)
        assert p.returncode == 1
        assert p.stderr.decode() == ("xs: redrive: dead letter %s cannot go back to full: ERR The stream has "
                                     "exhausted the last possible ID, unable to add more items (left in dead)\n"
                                     % stuck_id)
    assert xs_json(db, "XRANGE a - +")[0][1] == ["f", "a"] and xs_json(db, "XRANGE b - +")[0][1] == ["f", "b"]
    assert [e[0] for e in xs_json(db, "XRANGE dead - +")] == [stuck_id]
    assert xs_json(db, "XLEN full") == 1
    doc = json.loads(redrive(db, "dead", "--json").stdout)
    assert doc["redriven"] == 0 and doc["stuck"] == [{"dead": stuck_id, "stream": "full", "error": (
        "ERR The stream has exhausted the last possible ID, unable to add more items")}]


def test_the_docs_redrive_example_runs_and_prints_what_it_shows(tmp_path):
    with open(os.path.join(ROOT, "docs", "workers.md"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("<!-- redrive example -->")[1]
    commands = [l[4:] for l in block.splitlines() if l.startswith("    xs ")]
    shown = re.search(r"lines print\n\n((?:    .*\n)+)", text).group(1)
    xs = " ".join(shlex.quote(a) for a in XS)
    env = dict(os.environ, XS_DB=str(tmp_path / "db"))
    out = b""
    for c in commands:
        p = subprocess.run(["bash", "-c", xs + c[2:]], capture_output=True, timeout=TIMEOUT, cwd=str(tmp_path),
                           env=env)
        assert p.returncode == (1 if "--dead-letter" in c else 0), (c, p.stderr)
        if " redrive " in c:
            out += p.stdout
    assert out.decode() == "".join(l[4:] + "\n" for l in shown.splitlines())
    assert xs_json(tmp_path / "db", "XPENDING jobs resizers")[0] == 0
    assert xs_json(tmp_path / "db", "XLEN jobs:dead") == 0
