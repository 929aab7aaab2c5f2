"""More hardening (issue 14, defects 4 to 8).

4  Script mode reads a long line in linear time, and a line longer than
   the limit (MAX_LINE_BYTES, Redis's proto-max-bulk-len, 512 MB) is one
   error reply; the script goes on, and the line is never held whole.
5  BLOCK above 2^31-1 ms blocks (until data or the timeout), in both
   modes, instead of crashing in poll().
6  The reader slot of a process killed inside a read transaction is
   freed (LMDB reader_check): at every writable open, and periodically
   by a long-running process, so churn does not grow data.mdb forever.
7  Out of inotify instances, blocked readers poll with a back-off and
   say so once on stderr.
8  (a) stray names in a group's wait-queue directory are ignored;
   (b) temporary files of killed `xs save` / `xs restore -` runs are
   removed by the next run (only xs's own names, never through a link);
   (c) a dangling --db symlink is named as such;
   (d) `xs import` error line numbers count every physical line.
"""
import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc

import pytest

from conftest import new_store
from tests.cli.test_blocking_cli import inotify_watches  # one way to see a process wait

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]
TIMEOUT = 120


def xs(db, *args, input=None, mode="raw", env=None, timeout=TIMEOUT):
    return subprocess.run(XS + ["--db", str(db), "--" + mode] + list(args), cwd=ROOT, input=input,
                          capture_output=True, timeout=timeout, env=env)


def start(db, *args, mode="raw", env=None):
    return subprocess.Popen(XS + ["--db", str(db), "--" + mode] + list(args), cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def no_traceback(p):
    err = p.stderr if isinstance(p.stderr, bytes) else b""
    assert b"Traceback" not in err, err.decode("utf-8", "replace")


def wait_blocked(proc, timeout=30):
    """Wait until ``proc`` sleeps on an inotify watch (else give it a
    moment); fails at once if it died."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError("the blocked reader ended: %r %r" % (out, err.decode("utf-8", "replace")))
        n = inotify_watches(proc.pid)
        if n is None:
            time.sleep(1.0)
            return
        if n > 0:
            time.sleep(0.2)
            if proc.poll() is None:
                return
        time.sleep(0.01)
    raise AssertionError("the reader never blocked")


# ============================================ 4. long lines in script mode

def _timed_xadd(db, mb):
    value = b"x" * (mb << 20)
    t = time.monotonic()
    p = xs(db, input=b"XADD s * f " + value + b"\nSTRLEN\nXLEN s\n", timeout=300)
    took = time.monotonic() - t
    no_traceback(p)
    lines = p.stdout.split(b"\n")
    assert lines[0].count(b"-") == 1 and lines[-2] == b"1", p.stdout[:200]
    r = xs(db, "XRANGE", "s", "-", "+")
    assert r.stdout.split(b"\n")[2] == value
    return took


def test_a_long_script_line_is_read_in_linear_time(tmp_path):
    t10 = _timed_xadd(tmp_path / "a", 10)
    t40 = _timed_xadd(tmp_path / "b", 40)
    # linear: 4x the bytes in about 4x the time (start-up included); the
    # quadratic reader took 1.3 s and 40 s
    assert t40 < 8 * max(t10, 0.3), (t10, t40)


def _script(db, source, limit, monkeypatch, mode="raw"):
    """Run script mode in this process (so the limit can be lowered) on
    the file descriptor ``source`` (a pipe or a file); returns (status,
    output bytes, peak traced memory)."""
    import io

    from xstream_cli.execution import script, session
    monkeypatch.setattr(script, "MAX_LINE_BYTES", limit)
    s = session.Session(str(db), mode)
    out = io.BytesIO()
    tracemalloc.start()
    try:
        rc = s.run_script(source, out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        s.store.close()
    return rc, out.getvalue(), peak


def test_a_line_over_the_limit_streamed_through_a_pipe_is_one_error_and_never_held(tmp_path, monkeypatch):
    r, w = os.pipe()
    piece = b"y" * (1 << 20)
    big = 48

    def feed():
        try:
            with os.fdopen(w, "wb") as f:
                f.write(b"XADD s * a 1\nXADD s * f ")
                for _ in range(big):
                    f.write(piece)
                f.write(b"\nXLEN s\nXADD s * b 2\n")
        except BrokenPipeError:          # the reader failed
            pass
    t = threading.Thread(target=feed)
    t.start()
    try:
        rc, out, peak = _script(tmp_path / "db", r, 1 << 20, monkeypatch)
    finally:
        os.close(r)
        t.join()
    lines = out.decode().split("\n")
    n = len(b"XADD s * f ") + big * len(piece)
    assert lines[1] == "ERR line too long (%d bytes, the limit is 1 MB)" % n, lines[:4]
    # (redis-cli --raw follows an error with an empty line)
    assert lines[2:4] == ["", "1"] and lines[4].count("-") == 1 and lines[5:] == [""], lines
    assert rc == 1
    # never the whole 48 MB line (let alone twice): a batch and the limit
    assert peak < 24 << 20, peak


def test_a_line_over_the_limit_read_in_one_batch_is_one_error_in_its_place(tmp_path, monkeypatch):
    src = tmp_path / "script"
    long = b"XADD s * f " + b"z" * (3 << 19)          # 1.5 MB
    src.write_bytes(b"XADD s * a 1\n" + long + b"\r\nXLEN s\n" + long + b"\nXLEN s")
    fd = os.open(str(src), os.O_RDONLY)                  # a file: read in 8 MB batches
    try:
        rc, out, _ = _script(tmp_path / "db", fd, 1 << 20, monkeypatch, mode="json")
    finally:
        os.close(fd)
    replies = [json.loads(x) for x in out.decode().splitlines()]
    err = "ERR line too long (%d bytes, the limit is 1 MB)"
    assert replies[1:] == [{"error": err % (len(long) + 1)}, 1, {"error": err % len(long)}, 1], replies
    assert rc == 1


def test_a_repeated_blocking_line_at_the_end_of_a_batch_runs_every_time(tmp_path):
    db = new_store(tmp_path / "db")                 # a script of reads never creates the store
    p = start(db, mode="json")
    p.stdin.write(b"3 XREAD BLOCK 100 STREAMS s $\n")
    p.stdin.flush()
    time.sleep(1.0)               # the three waits (and their loss) happen now
    out, err = p.communicate(b"XLEN s\n", timeout=TIMEOUT)
    assert out.decode().splitlines() == ["null", "null", "null", "0"], (out, err)


# ============================================ 5. BLOCK above 2^31-1 ms

def test_block_above_2_31_ms_waits_and_is_woken_single_command(tmp_path):
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    p = start(db, "XREAD", "BLOCK", "4000000000", "STREAMS", "s", "$")
    wait_blocked(p)
    assert xs(db, "XADD", "s", "2-1", "b", "2").returncode == 0
    out, err = p.communicate(timeout=TIMEOUT)
    assert b"Traceback" not in err, err
    assert p.returncode == 0 and out == b"s\n2-1\nb\n2\n", (out, err)


@pytest.mark.parametrize("group", [False, True])
def test_block_above_2_31_ms_waits_and_is_woken_in_a_script(tmp_path, group):
    db = tmp_path / "db"
    assert xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM").returncode == 0
    p = start(db)
    read = b"XREADGROUP GROUP g c BLOCK 4000000000 STREAMS s >" if group else \
        b"XREAD BLOCK 9223372036854775 STREAMS s $"
    p.stdin.write(read + b"\nXLEN s\n")
    p.stdin.flush()
    wait_blocked(p)
    assert xs(db, "XADD", "s", "2-1", "b", "2").returncode == 0
    out, err = p.communicate(timeout=TIMEOUT)
    assert b"Traceback" not in err, err
    assert p.returncode == 0 and out == b"s\n2-1\nb\n2\n1\n", (out, err)


def test_a_long_wait_is_made_of_poll_calls_poll_can_take(store, monkeypatch):
    from storage import blocking
    seen = []

    class Poll:
        def register(self, *a):
            pass

        def unregister(self, *a):
            pass

        def poll(self, ms):
            seen.append(ms)
            if ms > (1 << 31) - 1:
                raise OverflowError("timeout is too large")
            time.sleep(0.05)
            return []
    w = blocking.Waiter(store, [b"s"])
    try:
        if not w.uses_inotify:
            pytest.skip("no inotify here")
        w._poll = Poll()
        monkeypatch.setattr(blocking, "MAX_POLL_MS", 20, raising=False)
        assert w.wait(0.2) is False
    finally:
        w.close()
    assert seen and max(seen) <= 20 and len(seen) >= 3, seen


# ============================================ 6. stale reader slots

HOLD_READ = r"""
import sys
from storage.store import Store
s = Store(sys.argv[1])
t = s.env.begin()
t.get(b"x")
print("ready", flush=True)
sys.stdin.read()
"""


def killed_readers(db, n=1):
    """``n`` processes that opened a read transaction on ``db``, all
    killed there; returns their pids."""
    ps = [subprocess.Popen([sys.executable, "-c", HOLD_READ, str(db)], cwd=ROOT,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(n)]
    for p in ps:
        assert p.stdout.readline() == b"ready\n"
    for p in ps:
        p.send_signal(signal.SIGKILL)
        p.wait()
        p.stdin.close()
        p.stdout.close()
    return [p.pid for p in ps]


def killed_reader(db):
    return killed_readers(db)[0]


def slots(store):
    """pids holding reader slots (env.readers() text)."""
    out = set()
    for line in store.env.readers().splitlines()[1:]:
        parts = line.split()
        if parts and parts[0].isdigit():
            out.add(int(parts[0]))
    return out


def test_a_writable_open_frees_the_slot_of_a_killed_reader(tmp_path):
    from storage.store import Store
    db = tmp_path / "db"
    holder = Store(str(db))            # keeps the environment open throughout
    try:
        pid = killed_reader(db)
        assert pid in slots(holder)
        assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
        assert pid not in slots(holder)
    finally:
        holder.close()


def test_a_long_running_writer_frees_it_and_the_store_stops_growing(tmp_path, monkeypatch):
    from storage import store as store_mod
    from storage.store import Store
    db = tmp_path / "db"
    holder = Store(str(db))
    try:
        pid = killed_reader(db)
        monkeypatch.setattr(store_mod, "READER_CHECK_S", 0.0, raising=False)
        value = b"v" * (64 << 10)
        size0 = os.path.getsize(db / "data.mdb")
        opts = _auto()
        for i in range(300):           # churn: add 64 KiB, delete it
            holder.run(lambda tx: tx.add(b"s", [b"f", value], opts), write=True)
            holder.run(lambda tx: tx.delete_keys([b"s"]), write=True)
        assert pid not in slots(holder)
        grown = os.path.getsize(db / "data.mdb") - size0
        assert grown < 4 << 20, grown  # 300 x 64 KiB pinned would be ~19 MiB
    finally:
        holder.close()


def _auto():
    from storage.options import AddOptions
    return AddOptions()


def test_check_readers_returns_the_count_freed(tmp_path):
    from storage.store import Store
    db = tmp_path / "db"
    holder = Store(str(db))
    try:
        pids = killed_readers(db, 2)
        assert set(pids) <= slots(holder)
        assert holder.check_readers(force=True) == 2
        assert not set(pids) & slots(holder)
        assert holder.check_readers(force=True) == 0
    finally:
        holder.close()


# ============================================ 7. out of inotify instances

class _NoInotify:
    """A libc whose inotify_init1 fails with EMFILE (out of instances)."""

    def inotify_init1(self, flags):
        ctypes.set_errno(errno.EMFILE)
        return -1


def test_out_of_inotify_instances_polls_with_back_off_and_says_so_once(store, monkeypatch, capsys):
    from storage import blocking, inotify
    monkeypatch.setattr(inotify, "_libc", _NoInotify())
    monkeypatch.setattr(inotify, "_hub", None)
    monkeypatch.setattr(blocking, "_warned", False, raising=False)
    calls = []
    real = blocking.versions

    def counting(st, keys):
        calls.append(time.monotonic())
        return real(st, keys)
    monkeypatch.setattr(blocking, "versions", counting)
    for _ in range(2):
        with blocking.Waiter(store, [b"s"]) as w:
            assert not w.uses_inotify
            del calls[:]
            assert w.wait(0.8) is False
            # a 5 ms poll looks ~160 times in 0.8 s; backing off to 100 ms, ~13
            assert len(calls) < 30, len(calls)
    err = capsys.readouterr().err
    assert err.count("out of inotify instances") == 1, err
    # still woken by a write, within the longest interval
    with blocking.Waiter(store, [b"s"]) as w:
        w.wait(0.5)                    # backed off to the longest interval
        t = threading.Timer(0.05, lambda: store.run(lambda tx: tx.add(b"s", [b"a", b"1"], _auto()),
                                                    write=True))
        t.start()
        t0 = time.monotonic()
        assert w.wait(5.0) is True
        assert time.monotonic() - t0 < 1.0
        t.join()


# ============================================ 8a. stray names in a wait queue

STRAYS = ["stray", "0", "0.99999999999999999999999", "0.\u00b2", "1.2.3", "00000000000000000001.0"]


def test_stray_names_in_a_wait_queue_are_ignored_and_kept(store):
    from storage.consumers import Queue
    q = Queue(store, b"s", b"g")
    try:
        assert q.fd is not None
        for n in STRAYS:
            with open(os.open(n, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=q.fd), "w"):
                pass
        os.mkdir("dir.x", 0o700, dir_fd=q.fd)
        assert q.first() is True
        left = set(os.listdir(q.fd))
        assert set(STRAYS) | {"dir.x"} <= left
    finally:
        q.leave()


def test_a_blocked_xreadgroup_survives_stray_files_in_its_queue(tmp_path):
    db = tmp_path / "db"
    assert xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM").returncode == 0
    p = start(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "20000", "STREAMS", "s", ">")
    wait_blocked(p)
    qdirs = [d for d in os.listdir(db / "notify") if d.endswith(".q")]
    assert len(qdirs) == 1
    for n in STRAYS:
        (db / "notify" / qdirs[0] / n).write_bytes(b"")
    assert xs(db, "XADD", "s", "5-1", "k", "v").returncode == 0
    out, err = p.communicate(timeout=TIMEOUT)
    assert b"Traceback" not in err, err
    assert p.returncode == 0 and out == b"s\n5-1\nk\nv\n", (out, err)


# ============================================ 8b. temporary files of killed runs

def _fill(db, mb=24):
    value = b"w" * (100 << 10)
    script = b"".join(b"XADD s * f " + value + b"\n" for _ in range(mb * 10))
    assert xs(db, input=script).returncode == 0


def _kill_when(proc, cond, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        if cond():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.0005)
    proc.wait()
    return False


def test_a_killed_save_leaves_a_temporary_file_the_next_save_removes(tmp_path):
    db = tmp_path / "db"
    _fill(db)
    out = tmp_path / "out"
    out.mkdir()

    def temps():
        return [n for n in os.listdir(out) if n.startswith(".snap.") and n.endswith(".tmp")]
    for _ in range(5):
        p = subprocess.Popen(XS + ["--db", str(db), "save", str(out / "snap")], cwd=ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if _kill_when(p, lambda: temps() and os.path.getsize(out / temps()[0]) > 0) and temps():
            break
    else:
        pytest.skip("save always finished before it could be killed")
    left = temps()
    assert left
    p = xs(db, "save", str(out / "snap"))
    assert p.returncode == 0, p.stderr
    assert temps() == [], temps()
    assert (out / "snap").stat().st_size > 0


def test_a_killed_restore_from_stdin_leaves_a_file_the_next_one_removes(tmp_path):
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    snap = tmp_path / "snap"
    assert xs(db, "save", str(snap)).returncode == 0
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))

    def temps():
        return [n for n in os.listdir(tmp) if n.startswith("xs-restore-")]
    p = subprocess.Popen(XS + ["--db", str(tmp_path / "db2"), "restore", "-"], cwd=ROOT, env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    p.stdin.write(snap.read_bytes()[:20])     # part of it; the rest never comes
    p.stdin.flush()
    assert _kill_when(p, temps)
    p.stdin.close()
    assert temps()
    r = subprocess.run(XS + ["--db", str(tmp_path / "db3"), "restore", "-"], cwd=ROOT, env=env,
                       input=snap.read_bytes(), capture_output=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert temps() == [], temps()


def test_only_stale_files_of_xs_own_naming_are_swept_and_links_never_followed(tmp_path):
    from storage.atomicfile import STALE_TEMP_S, sweep_temp
    d = tmp_path / "d"
    d.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep")
    dead = subprocess.Popen(["true"])
    dead.wait()
    old = time.time() - STALE_TEMP_S - 60

    def make(name, mtime=None):
        (d / name).write_bytes(b"x")
        if mtime is not None:
            os.utime(d / name, (mtime, mtime))
    make(".snap.%d-abcdefgh.tmp" % dead.pid)                 # its maker is dead: goes
    make(".snap.%d-abcdefgh.tmp" % os.getppid())             # maker alive, fresh: stays
    make(".snap.abc_1234.tmp", old)                           # older xs, stale: goes
    make(".snap.abc_1235.tmp")                                # older xs, fresh: stays
    make(".snap.notours.tmp", old)                            # not xs's pattern: stays
    make(".other.%d-abcdefgh.tmp" % dead.pid)                 # another file's: stays
    os.symlink(str(elsewhere), str(d / (".snap.%d-zzzzzzzz.tmp" % dead.pid)))
    os.mkdir(d / (".snap.%d-yyyyyyyy.tmp" % dead.pid))
    removed = sweep_temp(str(d), ".snap.", ".tmp")
    assert sorted(removed) == sorted([".snap.%d-abcdefgh.tmp" % dead.pid, ".snap.abc_1234.tmp"])
    assert elsewhere.read_bytes() == b"keep"
    assert os.path.islink(d / (".snap.%d-zzzzzzzz.tmp" % dead.pid))
    assert (d / ".snap.abc_1235.tmp").exists() and (d / ".snap.notours.tmp").exists()


# ============================================ 8c. a dangling --db symlink

@pytest.mark.parametrize("args", [["XLEN", "s"], ["XADD", "s", "*", "a", "1"], ["tail", "s"]])
def test_a_dangling_db_symlink_is_named_as_such(tmp_path, args):
    link = tmp_path / "db"
    target = tmp_path / "missing" / "store"
    os.symlink(str(target), str(link))
    p = xs(link, *args)
    err = p.stderr.decode()
    assert p.returncode == 1 and "Traceback" not in err, err
    assert err.count("\n") == 1 and "is a symbolic link to a missing path" in err, err
    assert "file is in the way" not in err
    assert not os.path.exists(target) and not os.path.exists(target.parent)


# ============================================ 8d. import line numbers

def test_import_error_line_numbers_count_blank_lines(tmp_path):
    good = b'{"stream": "s", "id": "1-0", "fields": ["a", "1"]}'
    data = b"\n\n" + good + b"\n\r\n   \n\n" + b"not json\n" + good + b"\n"
    p = xs(tmp_path / "db", "import", "-", input=data)
    err = p.stderr.decode()
    assert p.returncode == 1 and "Traceback" not in err, err
    assert "line 7:" in err, err
