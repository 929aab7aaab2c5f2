"""Ctrl-C, SIGTERM and SIGKILL in `xs archive`, with a real Spark job, as a
user meets them: xs runs as a job (a process group in the foreground) of
a minimal shell (SHELL) that owns a new pty, and Ctrl-C is the ^C byte
typed on that terminal (the line discipline sends SIGINT to the
foreground process group); SIGTERM and SIGKILL go to xs alone, as
``kill PID`` sends them.  xs is no session leader, so its end sends no
SIGHUP that would end a leaked JVM by chance.

At every stage ("starting Spark": the JVM is launching; "writing
Parquet": the job runs) the run's JVM, and every process it started,
must be gone soon after xs is (looked for in /proc: every process whose
environment holds this test's random marker, which xs, its JVM and the
JVM's Python workers inherit), nothing of py4j or pyspark may reach the
terminal, Ctrl-C ends xs with status 130 (exit 130, or killed by SIGINT:
$? is 130 either way) and one line, SIGTERM kills xs with
SIGTERM (after one line), the store keeps every entry, and a re-run
archives them.

The job is held in "writing Parquet" by a PYSPARK_PYTHON that starts
pyspark's worker daemon for the tasks (``-m pyspark.daemon
pyspark.worker``; the data source's planning runs at once) only after
600 s: the tasks run (the progress line counts them) and never finish by themselves, so the signal always
lands in the running job (a real run of that length needs millions of
entries).  Skipped without pyspark, pyarrow or java."""
import fcntl
import os
import pty
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import termios
import time
import uuid

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
    pytest.skip("needs java", allow_module_level=True)

from conftest import ROOT, XS, run_xs  # noqa: E402

ENTRIES = 40
STAGE_TIMEOUT = 300         # seconds for a stage to come (Spark starts slowly on a loaded machine)
EXIT_TIMEOUT = 60           # seconds for xs to exit after the signal
GONE_TIMEOUT = 30           # seconds for every process of the run to be gone after xs is


# ================================================================ processes of a run

def _environ(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def marked(marker, but=()):
    """{pid: cmdline} of the live processes whose environment holds
    ``marker`` (xs, its JVM, the JVM's workers ...; zombies have none),
    but not those in ``but``."""
    found = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid() and int(d) not in but and marker in _environ(int(d)):
            found[int(d)] = _cmdline(int(d))
    return found


def _kill_marked(marker):
    """Test cleanup: whatever a failed test left running."""
    for _ in range(50):
        left = marked(marker)
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.1)


def wait_gone(marker, but=(), timeout=GONE_TIMEOUT):
    """{} once no process of the run is left (``but`` those), else what is
    left after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        left = marked(marker, but)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def _jvms(procs):
    return {p: c for p, c in procs.items() if "java" in c.split(" ")[0]}


# ================================================================ the run on a terminal

# A login shell's part, as small as it gets: it owns the terminal (session
# leader), runs the command as a job of its own (a process group in the
# foreground), says its pid and, when it ends, its status (as
# os.waitstatus_to_exitcode: -N for killed by signal N), takes the
# terminal back and waits to be killed.  So xs is not a session leader
# (its end sends no SIGHUP to anything), as at a real prompt.
SHELL = r"""
import os, signal, sys
signal.signal(signal.SIGTTOU, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpid())
    signal.signal(signal.SIGTTOU, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execv(sys.argv[1], sys.argv[1:])
try:
    os.setpgid(pid, pid)
    os.tcsetpgrp(0, pid)
except OSError:
    pass
os.write(1, b"[job %d]\r\n" % pid)
_, status = os.waitpid(pid, 0)
os.tcsetpgrp(0, os.getpgrp())
os.write(1, b"\r\n[status %d]\r\n" % os.waitstatus_to_exitcode(status))
while True:
    signal.pause()
"""


class Run:
    """``xs archive`` as a job of a shell on a new pty (SHELL); everything
    written on the terminal is kept in ``out``."""

    def __init__(self, db, to, marker, env=None):
        self.marker = marker
        e = dict(os.environ)
        e.pop("PYSPARK_PYTHON", None)
        e.update(env or {})
        e[marker.split(b"=")[0].decode()] = marker.split(b"=")[1].decode()
        e["TERM"] = "xterm"
        self.master, slave = pty.openpty()

        def ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        argv = XS + ["--db", str(db), "archive", "ev", "--to", str(to), "--before", "9999999"]
        self.shell = subprocess.Popen([sys.executable, "-c", SHELL] + argv, stdin=slave, stdout=slave,
                                      stderr=slave, cwd=ROOT, env=e, start_new_session=True, preexec_fn=ctty)
        os.close(slave)
        self.out = b""
        self.eof = False
        self.wait_for(lambda: re.search(rb"\[job (\d+)\]", self.out), "the job's pid")
        self.pid = int(re.search(rb"\[job (\d+)\]", self.out).group(1))

    def pump(self, seconds):
        """Read what the terminal shows for up to ``seconds``."""
        end = time.monotonic() + seconds
        while not self.eof:
            left = end - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([self.master], [], [], min(left, 0.1))
            if r:
                try:
                    chunk = os.read(self.master, 65536)
                except OSError:         # EIO: every end of the slave is closed
                    chunk = b""
                if not chunk:
                    self.eof = True
                self.out += chunk

    def status(self):
        m = re.search(rb"\[status (-?\d+)\]", self.out)
        return int(m.group(1)) if m else None

    def text(self):
        """What xs wrote (the shell's own lines left out)."""
        t = re.sub(rb"\[job \d+\]\r*\n|\r*\n\[status -?\d+\]\r*\n", b"", self.out)
        return t.decode("utf-8", "replace")

    def wait_for(self, ready, what):
        deadline = time.monotonic() + STAGE_TIMEOUT
        while not ready():
            assert self.status() is None and self.shell.poll() is None, \
                "xs ended before %s: %s\n%s" % (what, self.status(), self.text())
            assert time.monotonic() < deadline, "no %s within %d s:\n%s" % (what, STAGE_TIMEOUT, self.text())
            self.pump(0.05)

    def ctrl_c(self):
        os.write(self.master, b"\x03")      # as typed: SIGINT to the terminal's foreground process group

    def finish(self):
        """xs's exit status as os.waitstatus_to_exitcode gives it (bounded:
        killed after EXIT_TIMEOUT)."""
        deadline = time.monotonic() + EXIT_TIMEOUT
        while self.status() is None and time.monotonic() < deadline and self.shell.poll() is None:
            self.pump(0.1)
        if self.status() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            pytest.fail("xs did not exit within %d s of the signal:\n%s" % (EXIT_TIMEOUT, self.text()))
        self.pump(0.2)
        return self.status()

    def close(self):
        """End the shell (after the checks: its end must not be what
        ends a leaked JVM)."""
        if self.shell.poll() is None:
            self.shell.kill()
        self.shell.wait()
        os.close(self.master)


def fill(db, n=ENTRIES):
    p = run_xs(db, ["XADD ev %d-0 n %d" % (1000 + i, i) for i in range(n)])
    assert p.returncode == 0, p.stderr


def xlen(db):
    p = run_xs(db, ["XLEN ev"])
    assert p.returncode == 0, p.stderr
    return int(p.stdout)


@pytest.fixture
def world(tmp_path):
    """(db, DIR, marker, env holding a PYSPARK_PYTHON whose worker daemon
    waits 600 s); kills what the test leaves."""
    db, to = tmp_path / "db", tmp_path / "arch"
    fill(db)
    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\ncase \" $* \" in *\" pyspark.daemon pyspark.worker \"*) sleep 600;; esac\n"
                    "exec %s \"$@\"\n" % sys.executable)
    slow.chmod(stat.S_IRWXU)
    marker = ("XS_TEST_RUN=%s" % uuid.uuid4().hex).encode()
    runs: list = []
    yield db, to, marker, {"PYSPARK_PYTHON": str(slow)}, runs
    _kill_marked(marker)
    for run in runs:
        run.close()


def at_stage(run, stage):
    """Wait until the run is in ``stage``: "starting" (a JVM of the run is
    launching, before its gateway answers) or "writing" (the Parquet
    job's tasks run)."""
    if stage == "starting":
        run.wait_for(lambda: "starting Spark" in run.text() and _jvms(marked(run.marker)), "a JVM being started")
        assert "writing Parquet" not in run.text()
    else:
        run.wait_for(lambda: re.search(r"writing Parquet: \d+/\d+ tasks", run.text()), "the job's tasks")


def clean(text):
    assert "Traceback" not in text and "py4j" not in text.lower() and "pyspark" not in text.lower(), text
    assert "ERROR" not in text and "WARN" not in text, text


def assert_nothing_lost(db, to):
    assert xlen(db) == ENTRIES
    assert not [p for p in to.glob("stream=*/**/*.parquet")]
    p = subprocess.run(XS + ["--db", str(db), "archive", "ev", "--to", str(to), "--before", "9999999"],
                       capture_output=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert p.stdout.decode().startswith("archived %d entries of 1 stream" % ENTRIES), p.stdout
    assert xlen(db) == 0
    assert not (to / "_staging").exists()


# ================================================================ the tests

@pytest.mark.parametrize("stage", ["starting", "writing"])
def test_ctrl_c_ends_the_jvm_with_one_line_and_status_130(world, stage):
    db, to, marker, env, runs = world
    run = Run(db, to, marker, env)
    runs.append(run)
    at_stage(run, stage)
    run.ctrl_c()
    rc = run.finish()
    left = wait_gone(marker, but={run.shell.pid})
    text = run.text()
    assert rc in (130, -signal.SIGINT), (rc, text)       # $? is 130 either way (exit 130, or killed by SIGINT)
    assert not left, "left running after Ctrl-C in %s: %s\n%s" % (stage, left, text)
    clean(text)
    lines = [l for l in re.split(r"[\r\n]", text) if l.strip()]
    assert lines[-1] == "xs: archive: interrupted (nothing is lost; run it again to finish)", text
    assert sum("interrupted" in l for l in lines) == 1 and "^C" not in lines[-1]
    if stage == "writing":
        assert_nothing_lost(db, to)
    else:
        assert xlen(db) == ENTRIES


@pytest.mark.parametrize("stage", ["starting", "writing"])
def test_sigterm_ends_the_jvm_and_xs_dies_of_it(world, stage):
    db, to, marker, env, runs = world
    run = Run(db, to, marker, env)
    runs.append(run)
    at_stage(run, stage)
    os.kill(run.pid, signal.SIGTERM)
    rc = run.finish()
    left = wait_gone(marker, but={run.shell.pid})
    text = run.text()
    assert rc == -signal.SIGTERM, (rc, text)
    assert not left, "left running after SIGTERM in %s: %s\n%s" % (stage, left, text)
    clean(text)
    assert text.rstrip().endswith("xs: archive: terminated (nothing is lost; run it again to finish)"), text
    assert xlen(db) == ENTRIES


@pytest.mark.parametrize("stage", ["starting", "writing"])
def test_sigkill_of_xs_takes_the_jvm_with_it(world, stage):
    db, to, marker, env, runs = world
    run = Run(db, to, marker, env)
    runs.append(run)
    at_stage(run, stage)
    os.kill(run.pid, signal.SIGKILL)
    rc = run.finish()
    assert rc == -signal.SIGKILL
    left = wait_gone(marker, but={run.shell.pid})
    assert not left, "left running after xs was SIGKILLed in %s: %s\n%s" % (stage, left, run.text())
    clean(run.text())
    if stage == "writing":
        assert_nothing_lost(db, to)
    else:
        assert xlen(db) == ENTRIES
