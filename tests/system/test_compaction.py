"""xs compact and the store lock (issue 11, item 3): disk space given back,
no acknowledged write lost to a concurrent writer, long-running holders
make compaction fail clearly (and keep working), a killed compaction
leaves a store with all its data."""
import json
import os
import signal
import stat
import subprocess
import sys
import time

from tests.conftest import ROOT, XS
from tests.harness.terminal import stderr_on_pty  # noqa: E402

ENV = dict(os.environ, XS_NO_PROGRESS="1")


def xs(db, *args, input=None, timeout=120):
    return subprocess.run(XS + ["--db", str(db)] + list(args), input=input, capture_output=True, cwd=ROOT,
                          env=ENV, timeout=timeout)


def ingest(db, lines):
    p = subprocess.run(XS + ["--db", str(db)], input="".join(lines).encode(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=ROOT, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr


def data_size(db):
    return os.stat(os.path.join(str(db), "data.mdb")).st_size


def export_meta(db):
    p = xs(db, "export", "--meta")
    assert p.returncode == 0, p.stderr
    return p.stdout


def wait_for_holder(db, timeout=10):
    """Wait until some other process holds db/lock (a long-running xs has
    the store open)."""
    from storage.ops.compact import holders
    end = time.monotonic() + timeout
    fd = os.open(str(db), os.O_RDONLY | os.O_DIRECTORY)
    try:
        while time.monotonic() < end:
            hs = holders(fd)
            if hs:
                return hs
            time.sleep(0.05)
    finally:
        os.close(fd)
    raise AssertionError("no process opened the store")


def test_compact_after_trimming_200k_entries_to_none_shrinks_data_mdb_and_keeps_everything(tmp_path, capsys):
    db = tmp_path / "db"
    ingest(db, ["XADD s * user u%d action click n %d\n" % (i, i) for i in range(200000)])
    ingest(db, ["XADD keep %d-1 f v%d\n" % (i, i) for i in range(1, 51)]
           + ["XGROUP CREATE keep g 0\n", "XREADGROUP GROUP g c COUNT 5 STREAMS keep >\n"])
    p = xs(db, "trim", "s", "--max-len", "0", "-q")
    assert p.returncode == 0, p.stderr
    before = data_size(db)
    kept = export_meta(db)
    p = xs(db, "compact", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    after = data_size(db)
    with capsys.disabled():
        print("\n[compact] 200k entries trimmed to 0: data.mdb %d -> %d bytes" % (before, after))
    assert doc["before"] == before and doc["after"] == after and doc["freed"] == before - after
    assert after < before / 20
    assert stat.S_IMODE(os.stat(os.path.join(str(db), "data.mdb")).st_mode) == 0o600
    assert export_meta(db) == kept                    # entries, groups, PEL, counters
    info = json.loads(xs(db, "info", "--json").stdout)
    from storage import codec
    assert info["format"] == codec.FORMAT_VERSION
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    assert json.loads(xs(db, "--json", "XLEN", "s").stdout) == 1
    from storage.store import INITIAL_MAP, Store
    st = Store(str(db))
    try:
        assert st.env.info()["map_size"] >= INITIAL_MAP       # headroom as for any store
    finally:
        st.close()


def test_compact_dry_run_changes_nothing_and_estimates(tmp_path):
    db = tmp_path / "db"
    ingest(db, ["XADD s * n %d pad %s\n" % (i, "x" * 50) for i in range(20000)])
    assert xs(db, "trim", "--max-len", "10", "-q").returncode == 0
    before = os.stat(os.path.join(str(db), "data.mdb"))
    p = xs(db, "compact", "--dry-run", "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["dry_run"] is True and doc["before"] == before.st_size and 0 < doc["after"] < before.st_size / 5
    now = os.stat(os.path.join(str(db), "data.mdb"))
    assert (now.st_ino, now.st_size, now.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    p = xs(db, "compact", "--json")
    assert json.loads(p.stdout)["after"] <= doc["after"] + 8192      # the estimate was about right


def test_compact_of_a_missing_store_is_one_line_exit_1(tmp_path):
    p = xs(tmp_path / "nope", "compact")
    assert p.returncode == 1 and p.stderr.decode().startswith("xs: no such store") and p.stderr.count(b"\n") == 1
    assert not (tmp_path / "nope").exists()


WRITER = r"""
import sys
sys.path.insert(0, %(root)r)
from storage.store import Store
from storage.options import AddOptions
db, tag = sys.argv[1], sys.argv[2].encode()
i = 0
while True:
    st = Store(db)                     # a new open for every entry: the lock is taken and dropped each time
    try:
        i += 1
        new = st.run(lambda tx: tx.add(b"w", [b"tag", tag, b"n", str(i).encode()], AddOptions()), write=True)
    finally:
        st.close()
    print(new.decode() if isinstance(new, bytes) else "%%d-%%d" %% tuple(new), flush=True)
"""


def test_compactions_during_concurrent_writers_lose_no_acknowledged_entry(tmp_path):
    db = tmp_path / "db"
    ingest(db, ["XADD w * pad %s\n" % ("x" * 100) for _ in range(20000)])
    assert xs(db, "XTRIM", "w", "MAXLEN", "0").returncode == 0
    script = tmp_path / "writer.py"
    script.write_text(WRITER % {"root": ROOT})
    outs = [open(tmp_path / ("acks%d" % k), "w") for k in range(2)]
    writers = [subprocess.Popen([sys.executable, str(script), str(db), "lib%d" % k], stdout=outs[k],
                                stderr=subprocess.PIPE, cwd=ROOT) for k in range(2)]
    # and a shell loop of one-shot xs XADD commands, printing each acknowledged ID
    shell_acks = tmp_path / "acks_sh"
    loop = subprocess.Popen(["sh", "-c", 'while :; do %s -m xstream_cli --db "$1" XADD w "*" tag sh || exit 1; done'
                             % sys.executable, "sh", str(db)], stdout=open(shell_acks, "w"),
                            stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    try:
        time.sleep(1.0)
        sizes = []
        for _ in range(4):
            p = xs(db, "compact", "--wait", "30", "--json", timeout=60)
            assert p.returncode == 0, p.stderr
            sizes.append(json.loads(p.stdout)["after"])
            time.sleep(0.3)
        for w in writers + [loop]:
            assert w.poll() is None, w.stderr.read()
    finally:
        for w in writers + [loop]:
            w.send_signal(signal.SIGTERM)
        for w in writers + [loop]:
            w.wait(timeout=30)
        for f in outs:
            f.close()
    acked = []
    for name in ["acks0", "acks1", "acks_sh"]:
        acked += [l for l in (tmp_path / name).read_text().splitlines() if l.strip()]
    assert len(acked) > 20, "the writers hardly wrote: %d" % len(acked)
    p = xs(db, "--json", "XRANGE", "w", "-", "+")
    stored = {e[0] for e in json.loads(p.stdout)}
    lost = [i for i in acked if i not in stored]
    assert not lost, "acknowledged entries lost: %s" % lost[:10]
    assert len(stored) >= len(acked)          # a killed writer may have written one it did not print
    assert len(stored) - len(acked) <= 3


def in_transaction(db, seconds):
    """A process that opens the store and stays in a read transaction for
    ``seconds`` (busy: it cannot step aside for a compaction); returns it
    once its transaction is open."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, %r)\n"
                               "from storage.store import Store\n"
                               "s = Store(sys.argv[1], create=False)\n"
                               "with s.read() as tx:\n"
                               "    print('open', flush=True)\n"
                               "    time.sleep(float(sys.argv[2]))\n" % ROOT, str(db), str(seconds)],
                              stdout=subprocess.PIPE, cwd=ROOT)
    assert holder.stdout.readline() == b"open\n"
    return holder


def test_compact_beside_a_process_in_a_transaction_fails_clearly_and_a_blocked_reader_still_wakes(tmp_path):
    # a blocked XREAD steps aside (tests/system/test_compact_beside_readers.py);
    # a process in a transaction cannot: compaction waits for it, then
    # fails naming it alone, and the reader, back on the old file, wakes
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    reader = subprocess.Popen(XS + ["--db", str(db), "--json", "XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    holder = None
    try:
        hs = wait_for_holder(db)
        assert [p for p, _ in hs] == [reader.pid]
        holder = in_transaction(db, 60)
        ino = os.stat(os.path.join(str(db), "data.mdb")).st_ino
        t0 = time.monotonic()
        p = xs(db, "compact", "--wait", "1")
        took = time.monotonic() - t0
        assert p.returncode == 1
        err = p.stderr.decode()
        assert err.count("\n") == 1 and "Traceback" not in err
        assert "1 process using it: pid %d (" % holder.pid in err
        assert "nothing was changed" in err
        assert 1 <= took < 10
        assert os.stat(os.path.join(str(db), "data.mdb")).st_ino == ino
        assert xs(db, "XADD", "s", "2-1", "b", "2").returncode == 0
        out, _ = reader.communicate(timeout=15)
        assert reader.returncode == 0
        assert json.loads(out) == {"s": [["2-1", {"b": "2"}]]} or b"2-1" in out
    finally:
        for proc in (reader, holder):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_a_read_only_open_holds_the_store_lock(tmp_path):
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; sys.path.insert(0, %r)\n"
                               "from storage.store import Store\n"
                               "s = Store(sys.argv[1], readonly=True, create=False)\n"
                               "assert s.readonly\nprint('open', flush=True)\ntime.sleep(60)" % ROOT, str(db)],
                              stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout.readline() == b"open\n"
        p = xs(db, "compact", "--wait", "0.3")
        assert p.returncode == 1 and ("pid %d" % holder.pid).encode() in p.stderr
    finally:
        holder.kill()
        holder.wait()
    assert xs(db, "compact", "--wait", "5").returncode == 0


def on_pty(argv, timeout=60):
    """Run ``argv`` with stderr on a pseudo-terminal; (status, shown, stdout)."""
    return stderr_on_pty(argv, timeout=timeout, columns=200, capture_stdout=True)


def test_compact_waits_for_a_holder_that_finishes_saying_so_on_a_terminal(tmp_path):
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    # a process busy in a transaction for 3 s (an idle one steps aside at once)
    reader = in_transaction(db, 3)
    try:
        status, shown, out = on_pty(XS + ["--db", str(db), "compact", "--wait", "20"])
        assert status == 0, shown
        assert "waiting up to 20s for 1 process using the store (pid %d (" % reader.pid in shown
        assert out.startswith("compacted ")
    finally:
        reader.wait(timeout=20)
    # not on a terminal: no waiting message
    reader = in_transaction(db, 2)
    try:
        p = xs(db, "compact", "-q", "--wait", "20")
        assert p.returncode == 0 and p.stdout == b"" and p.stderr == b""
    finally:
        reader.wait(timeout=20)


def _check_after_kill(db, want, when):
    assert export_meta(db) == want, "after a kill at %s" % when
    # a regular, private, singly linked data.mdb
    st = os.lstat(os.path.join(str(db), "data.mdb"))
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_nlink == 1, when


def test_sigkill_of_compact_at_any_moment_leaves_a_store_with_all_its_data(tmp_path):
    db = tmp_path / "db"
    ingest(db, ["XADD s * n %d pad %s\n" % (i, "y" * 200) for i in range(60000)])
    assert xs(db, "XTRIM", "s", "MAXLEN", "30000").returncode == 0
    ingest(db, ["XGROUP CREATE s g 0\n", "XREADGROUP GROUP g c COUNT 7 STREAMS s >\n"])
    want = export_meta(db)
    # every named step (storage.ops.compact.KILL_POINTS), deterministically ...
    from storage.ops.compact import KILL_ENV, KILL_POINTS
    for step in KILL_POINTS:
        p = subprocess.run(XS + ["--db", str(db), "compact"], capture_output=True, cwd=ROOT,
                           env=dict(ENV, **{KILL_ENV: step}), timeout=120)
        assert p.returncode == -signal.SIGKILL, (step, p.returncode, p.stderr)
        _check_after_kill(db, want, step)
        if data_size(db) <= 8 << 20:        # compacted: grow it back for the next step
            ingest(db, ["XADD pad * pad %s\n" % ("z" * 200) for _ in range(20000)] + ["DEL pad\n"])
    # ... and at a few moments in between (wherever they fall: nothing to count)
    for delay in (0.05, 0.2, 0.5):
        p = subprocess.Popen(XS + ["--db", str(db), "compact"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, cwd=ROOT, env=ENV)
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        _check_after_kill(db, want, "%.2f s" % delay)
    p = xs(db, "compact")
    assert p.returncode == 0, p.stderr
    assert export_meta(db) == want
    assert not [n for n in os.listdir(str(db)) if n.startswith("data.mdb.compact-")]   # leftovers swept


def test_the_store_lock_file_is_private_made_by_read_only_opens_too_and_never_a_link(tmp_path):
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    lock = db / "lock"
    assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    os.unlink(lock)                                  # a store made before the lock existed
    p = xs(db, "XLEN", "s")                          # a one-shot read opens read-only
    assert p.returncode == 0 and p.stdout == b"1\n"
    assert stat.S_ISREG(os.lstat(lock).st_mode) and stat.S_IMODE(os.stat(lock).st_mode) == 0o600
    os.unlink(lock)
    target = tmp_path / "elsewhere"
    target.write_bytes(b"")
    os.symlink(target, lock)
    for args in (["XLEN", "s"], ["XADD", "s", "*", "b", "2"], ["compact"]):
        p = xs(db, *args)
        assert p.returncode == 1 and b"lock is a symbolic link" in p.stderr and p.stderr.count(b"\n") == 1, p.stderr
