"""xs archive: entries below a cut go to Parquet (Spark), are verified,
then trimmed; killed at every named step (and in the middle of the Spark
job), a re-run converges with nothing lost and no row twice.

Each run that has something to write starts a JVM (5-10 s here), so
the kill test walks the steps in ONE chain over one store: each run is
killed at the next step with a later cut, and must first recover what
the previous one left.  Skipped without pyspark / pyarrow."""
import glob
import json
import os
import pty
import signal
import stat
import subprocess
import threading
import time

import pytest

pytest.importorskip("pyspark")
pads = pytest.importorskip("pyarrow.dataset")

from conftest import ROOT, XS, run_xs  # noqa: E402
from storage.spark.archive import KILL_POINTS, MANIFEST  # noqa: E402

DAY = 86_400_000
T0 = 1_700_000_000_000          # 2023-11-14T22:13:20Z


def xs(db, *lines):
    p = run_xs(db, list(lines))
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]


def make_store(db, n=1500, step=300_000, start=T0):
    """Two streams of ``n`` entries each, ``step`` ms apart (1500 x 5 min:
    about 5 days); ev:a at seq 0, ev:b at seq 1 of the same ms.  Returns
    {(stream, id): fields}."""
    lines, want = [], {}
    for i in range(n):
        ms = start + i * step
        for name, seq, action in (("ev:a", 0, "click"), ("ev:b", 1, "view")):
            fields = ["user", "u%d" % (i % 7), "action", action, "n", str(i)]
            lines.append("XADD %s %d-%d %s" % (name, ms, seq, " ".join(fields)))
            want[(name, "%d-%d" % (ms, seq))] = fields
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr
    return want


def stream_entries(db, names=("ev:a", "ev:b")):
    out = {}
    for name, reply in zip(names, xs(db, *["XRANGE %s - +" % n for n in names])):
        for i, fields in reply or []:
            out[(name, i)] = fields
    return out


def archive_rows(directory):
    """[(stream, id, fields as a flat list, date)] of the Parquet files in
    place (pyarrow skips _staging and the _xs_archive.* files)."""
    if not os.path.isdir(directory):
        return []
    files = [f for f in glob.glob(os.path.join(directory, "stream=*", "date=*", "*.parquet"))]
    if not files:
        return []
    t = pads.dataset(directory, format="parquet", partitioning="hive").to_table()
    out = []
    for r in t.to_pylist():
        fields = [x for k, v in sorted(r["fields"]) for x in (k, v)] if isinstance(r["fields"], list) else \
            [x for k, v in sorted(r["fields"].items()) for x in (k, v)]
        out.append((r["stream"], r["id"], fields, str(r["date"])))
    return out


def flat(fields):
    pairs = sorted(zip(fields[0::2], fields[1::2]))
    return [x for p in pairs for x in p]


def archive(db, directory, *args, env=None, timeout=600, stderr=subprocess.PIPE, umask=-1):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(XS + ["--db", str(db), "archive"] + list(args) + ["--to", str(directory)],
                          stdout=subprocess.PIPE, stderr=stderr, timeout=timeout, env=e, cwd=ROOT, umask=umask)


def _idn(text):
    ms, seq = text.split("-")
    return int(ms), int(seq)


def check_nothing_lost(want, db, directory):
    """Every original entry is in the stream or the archive (or both),
    with its fields; the archive holds no row twice and nothing else."""
    have = stream_entries(db)
    rows = archive_rows(directory)
    keys = [(s, i) for s, i, _, _ in rows]
    assert len(keys) == len(set(keys)), "a row is in the archive twice"
    for s, i, fields, _ in rows:
        assert (s, i) in want, (s, i)
        assert fields == flat(want[(s, i)]), (s, i)
    missing = set(want) - set(have) - set(keys)
    assert not missing, "lost: %s" % sorted(missing)[:5]
    for k, fields in have.items():
        assert want[k] == fields
    return have, rows


# ================================================================ usage


@pytest.mark.parametrize("args,code,text", [
    (["ev:a"], 2, "exactly one of --older-than"),
    (["ev:a", "--before", "5", "--older-than", "1d"], 2, "exactly one of --older-than"),
    (["ev:a", "--before", "12-x"], 2, "not a stream ID"),
    (["ev:a", "--older-than", "7 days"], 2, "bad duration"),
    (["nosuch", "--before", "5"], 1, "no such stream: nosuch"),
])
def test_archive_usage_mistakes_exit_with_one_line_and_change_nothing(tmp_path, args, code, text):
    db = tmp_path / "db"
    xs(db, "XADD ev:a 1-1 a b")
    p = archive(db, tmp_path / "arch", *args)
    err = p.stderr.decode()
    assert p.returncode == code, err
    assert text in err and "Traceback" not in err
    assert not (tmp_path / "arch").exists()
    assert stream_entries(db, ["ev:a"]) == {("ev:a", "1-1"): ["a", "b"]}


@pytest.mark.parametrize("mode,text", [
    ("0777", "group and others must not write"),
    ("0770", "group and others must not write"),
    ("0500", "the owner must keep rwx"),
    ("0077", "the owner must keep rwx"),
    ("01750", "only the permission bits 0 to 0777"),
    ("abc", "is not an octal mode"),
    ("0o750", "is not an octal mode"),
    ("u=rwx,g=rx", "is not an octal mode"),
])
@pytest.mark.parametrize("store", [True, False])
def test_a_mode_that_locks_the_owner_out_or_lets_others_write_is_a_usage_error_that_makes_nothing(
        tmp_path, mode, text, store):
    db, arch = tmp_path / "db", tmp_path / "arch"
    if store:
        xs(db, "XADD ev:a 1-1 a b")
    p = archive(db, arch, "ev:a", "--before", "5", "--mode", mode)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "Invalid value for '--mode': %r" % mode in err and text in err and "Traceback" not in err, err
    assert not arch.exists()
    if store:
        assert stream_entries(db, ["ev:a"]) == {("ev:a", "1-1"): ["a", "b"]}
    else:
        assert not db.exists()


def test_archive_into_a_path_that_is_a_file_fails_cleanly(tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD ev:a 1-1 a b")
    (tmp_path / "file").write_text("x")
    p = archive(db, tmp_path / "file", "ev:a", "--before", "5")
    assert p.returncode == 1 and b"Traceback" not in p.stderr and b"archive:" in p.stderr, p.stderr
    assert stream_entries(db, ["ev:a"]) == {("ev:a", "1-1"): ["a", "b"]}


def test_dry_run_says_what_would_go_and_starts_no_spark(tmp_path):
    db = tmp_path / "db"
    make_store(db, n=20)
    cut = "%d-1" % (T0 + 10 * 300_000)        # ev:a's 11th entry (seq 0) goes, ev:b's stays
    t = time.monotonic()
    p = archive(db, tmp_path / "arch", "ev:*", "--before", cut, "--dry-run")
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t < 5             # no JVM
    out = p.stdout.decode().splitlines()
    assert out == ["ev:a: would archive 11 (%d-0..%d-0)" % (T0, T0 + 10 * 300_000),
                   "ev:b: would archive 10 (%d-1..%d-1)" % (T0, T0 + 9 * 300_000),
                   "total: would archive 21 entries of 2 streams below %s to %s" % (cut, tmp_path / "arch")]
    assert len(stream_entries(db)) == 40 and not (tmp_path / "arch").exists()


# ================================================================ archiving


def test_before_id_moves_exactly_the_entries_below_it_over_a_glob_then_a_rerun_is_a_no_op(tmp_path):
    db, arch = tmp_path / "db", tmp_path / "arch"
    want = make_store(db)                                        # 3000 entries in two streams
    cut_ms = T0 + 1000 * 300_000
    cut = "%d-1" % cut_ms                    # ev:a's entry at cut_ms (seq 0) goes; ev:b's (seq 1) stays
    p = archive(db, arch, "ev:*", "--before", cut)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert p.stderr == b""                                       # not a terminal: no progress
    gone = {k for k in want if _idn(k[1]) < _idn(cut)}
    assert len(gone) == 2001
    summary = p.stdout.decode()
    assert summary.startswith("archived 2001 entries of 2 streams to %s (2023-11-14..2023-11-18, " % arch), summary
    assert summary.rstrip().endswith("; trimmed 2001"), summary
    rows = archive_rows(arch)
    assert sorted((s, i) for s, i, _, _ in rows) == sorted(gone)
    for s, i, fields, date in rows:
        assert fields == flat(want[(s, i)])
        assert date == time.strftime("%Y-%m-%d", time.gmtime(_idn(i)[0] // 1000))
    left = stream_entries(db)
    assert set(left) == set(want) - gone and all(left[k] == want[k] for k in left)
    # files are named by their first and last IDs, rows in ID order within each file
    for f in glob.glob(str(arch / "stream=*" / "date=*" / "*.parquet")):
        import pyarrow.parquet as pq
        got = pq.read_table(f, columns=["id"]).column("id").to_pylist()
        assert os.path.basename(f) == "%s_%s.parquet" % (got[0], got[-1])
        assert [_idn(x) for x in got] == sorted(_idn(x) for x in got)
    assert not (arch / "_staging").exists()
    before = sorted((f, os.stat(f).st_mtime_ns) for f in glob.glob(str(arch / "**" / "*"), recursive=True))
    # a re-run has nothing to do: no Spark job, nothing written, nothing trimmed
    t = time.monotonic()
    p = archive(db, arch, "ev:*", "--before", cut)
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - t < 5
    assert p.stdout.decode() == "nothing to archive below %s in 2 streams\n" % cut
    assert sorted((f, os.stat(f).st_mtime_ns) for f in glob.glob(str(arch / "**" / "*"), recursive=True)
                  if not f.endswith(".lock")) == [x for x in before if not x[0].endswith(".lock")]
    assert stream_entries(db) == left


def _run_on_pty(cmd, timeout=600):
    """Run ``cmd`` with stderr on a terminal: (returncode, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    got = []

    def drain():
        while True:
            try:
                b = os.read(master, 4096)
            except OSError:
                return
            if not b:
                return
            got.append(b)
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=slave, timeout=timeout, cwd=ROOT)
    os.close(slave)
    t.join(5)
    os.close(master)
    return p.returncode, p.stdout.decode(), b"".join(got).decode("utf-8", "replace")


def test_older_than_archives_old_entries_only_with_progress_on_a_terminal(tmp_path):
    db, arch = tmp_path / "db", tmp_path / "arch"
    now = int(time.time() * 1000)
    old = ["XADD logs %d-0 msg old%d" % (now - 10 * DAY + i * 1000, i) for i in range(50)]
    old.append("XADD logs %d-0 msg first msg second" % (now - 8 * DAY))    # a repeated field name
    new = ["XADD logs %d-0 msg new%d" % (now - 3_600_000 + i * 1000, i) for i in range(30)]
    xs(db, *(old + new))
    code, out, term = _run_on_pty(XS + ["--db", str(db), "archive", "logs", "--to", str(arch), "--older-than", "7d",
                                        "--fields-list"])
    assert code == 0, term[-3000:]
    assert out.startswith("archived 51 entries of 1 stream to %s (" % arch) and "trimmed 51" in out, out
    assert "xs archive: writing Parquet" in term and "xs archive: verifying" in term, term
    assert "Traceback" not in term and "WARN" not in term                 # Spark's log goes to its file
    assert sorted(r[1] for r in archive_rows(arch)) == sorted(l.split()[2] for l in old)
    table = pads.dataset(arch, format="parquet", partitioning="hive").to_table().to_pylist()
    dup = [r for r in table if r["id"] == "%d-0" % (now - 8 * DAY)][0]
    assert [(x["name"], x["value"]) for x in dup["fields_list"]] == [("msg", "first"), ("msg", "second")]
    assert dict(dup["fields"]) == {"msg": "second"}
    assert [f for _, f in stream_entries(db, ["logs"]).items()] == [["msg", "new%d" % i] for i in range(30)]
    assert os.path.getsize(arch / "_xs_archive.log") > 0


def test_a_stream_made_again_with_smaller_ids_is_refused_not_trimmed(tmp_path):
    db, arch = tmp_path / "db", tmp_path / "arch"
    arch.mkdir()
    # what a committed run leaves: the manifest says ev:a is archived through 100-0
    (arch / MANIFEST).write_text(json.dumps({"format": 1, "pending": None, "streams": {"ev:a": {
        "through": "100-0", "rows": 10, "last_run": {"first": "50-0", "last": "100-0", "rows": 10}}}}))
    xs(db, "XADD ev:a 7-0 a 1", "XADD ev:a 60-0 a 2", "XADD ev:a 200-0 a 3")   # 7-0 was never archived
    p = archive(db, arch, "ev:a", "--before", "150")
    assert p.returncode == 1 and b"was it deleted and made again" in p.stderr, p.stderr
    assert len(stream_entries(db, ["ev:a"])) == 3


# ================================================================ the mode of what a run makes


def modes(directory):
    """{path relative to DIR ("." for DIR): (is a directory, permission bits)} of DIR and everything in it."""
    out = {".": (True, stat.S_IMODE(os.lstat(directory).st_mode))}
    for root, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            out[os.path.relpath(path, directory)] = (stat.S_ISDIR(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


@pytest.mark.parametrize("umask,args,dir_mode,file_mode", [
    (0o077, ["--mode", "0750"], 0o750, 0o640),
    (0o022, ["--mode", "750"], 0o750, 0o640),
    (0o022, [], 0o700, 0o600),
], ids=["0750-umask077", "750-umask022", "default-umask022"])
def test_what_a_run_makes_has_the_mode_given_or_stays_private_whatever_the_umask(
        tmp_path, umask, args, dir_mode, file_mode):
    db, arch = tmp_path / "db", tmp_path / "arch"
    make_store(db, n=300)                                    # a day of 5-minute entries: two dates
    p = archive(db, arch, "ev:*", "--before", str(T0 + 300 * 300_000), *args, umask=umask)
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    assert "archived 600 entries of 2 streams" in p.stdout.decode()
    got = modes(arch)
    for name in (".", "stream=ev%3Aa", "stream=ev%3Ab", MANIFEST, "_xs_archive.lock", "_xs_archive.log"):
        assert name in got, sorted(got)
    assert len([n for n in got if n.endswith(".parquet")]) >= 4 and "_staging" not in got, sorted(got)
    wrong = {n: (d, oct(m)) for n, (d, m) in got.items() if m != (dir_mode if d else file_mode)}
    assert not wrong, wrong


# ================================================================ kill safety


# Every kill point costs a JVM start; CI takes three that need different
# recoveries (staging left behind, a pending move rolled forward, archived
# but not trimmed).  XS_ARCHIVE_ALL_KILLS=1 chains all nine.
CI_KILL_POINTS = ("staged", "pending", "committed")


def test_killed_at_every_step_each_rerun_converges_with_nothing_lost_or_twice(tmp_path):
    db, arch = tmp_path / "db", tmp_path / "arch"
    want = make_store(db)
    cut_ms = T0
    steps = KILL_POINTS if os.environ.get("XS_ARCHIVE_ALL_KILLS") == "1" else CI_KILL_POINTS
    assert set(steps) <= set(KILL_POINTS)
    for k, step in enumerate(steps):
        cut_ms += 150 * 300_000                 # each run has 300 new entries to archive
        p = archive(db, arch, "ev:*", "--before", str(cut_ms), "-q", env={"XS_ARCHIVE_KILL_AT": step})
        assert p.returncode == -signal.SIGKILL, (step, p.returncode, p.stderr.decode()[-3000:])
        check_nothing_lost(want, db, arch)
        manifest = json.loads((arch / MANIFEST).read_text()) if (arch / MANIFEST).exists() else None
        if step in ("pending", "moving", "moved"):
            assert manifest["pending"], step        # the next run must roll it forward
        if step == "committed":                  # archived and still in the streams
            have = stream_entries(db)
            assert any(_idn(i) <= _idn(manifest["streams"]["ev:a"]["through"]) for s, i in have if s == "ev:a")
    p = archive(db, arch, "ev:*", "--before", str(cut_ms), "-q")
    assert p.returncode == 0 and p.stdout == b"" and p.stderr == b"", p.stderr.decode()[-3000:]
    have, rows = check_nothing_lost(want, db, arch)
    below = {k for k in want if _idn(k[1]) < (cut_ms, 0)}
    assert sorted((s, i) for s, i, _, _ in rows) == sorted(below)
    assert set(have) == set(want) - below
    assert not (arch / "_staging").exists()
    assert json.loads((arch / MANIFEST).read_text())["pending"] is None


def test_killed_in_the_middle_of_the_spark_job_a_rerun_converges(tmp_path):
    db, arch = tmp_path / "db", tmp_path / "arch"
    want = make_store(db)
    cut = str(T0 + 1200 * 300_000)
    proc = subprocess.Popen(XS + ["--db", str(db), "archive", "ev:*", "--to", str(arch), "--before", cut],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, start_new_session=True)
    deadline = time.monotonic() + 300
    while not glob.glob(str(arch / "_staging" / "*" / "data" / "_temporary")):
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)         # xs and its JVM
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    check_nothing_lost(want, db, arch)
    p = archive(db, arch, "ev:*", "--before", cut, "-q")
    assert p.returncode == 0 and p.stdout == b"", p.stderr.decode()[-3000:]
    have, rows = check_nothing_lost(want, db, arch)
    below = {k for k in want if _idn(k[1]) < (int(cut), 0)}
    assert sorted((s, i) for s, i, _, _ in rows) == sorted(below)
    assert set(have) == set(want) - below
    assert not (arch / "_staging").exists()


# ============================================================ values that are not UTF-8

def test_a_value_that_is_not_utf8_stops_the_run_with_the_option_to_type_then_binary_archives_it(tmp_path):
    db, arch, arch2 = tmp_path / "db", tmp_path / "arch", tmp_path / "arch2"
    p = run_xs(db, [b"XADD s 1-1 f ok", b"XADD s 1-2 f \"\\xff\\xfe\"", b"XADD s 1-3 g text", b"XADD s 9-1 f later",
                    b"XADD t 1-1 f plain", b"XADD t 9-1 f later"])
    assert p.returncode == 0, p.stderr
    p = archive(db, arch, "s", "--before", "5")
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "is not UTF-8" in err and "xs archive --binary" in err and "option binary=true" not in err, err
    assert len(xs(db, "XRANGE s - +")[0]) == 4                   # nothing trimmed
    p = archive(db, arch, "s", "--before", "5", "--binary")      # nothing was written there: it takes binary
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    t = pads.dataset(str(arch), format="parquet", partitioning="hive").to_table()
    got = {r["id"]: dict(r["fields"]) for r in t.to_pylist()}
    assert got == {"1-1": {"f": b"ok"}, "1-2": {"f": b"\xff\xfe"}, "1-3": {"g": b"text"}}
    assert [e[0] for e in xs(db, "XRANGE s - +")[0]] == ["9-1"]
    with open(arch / MANIFEST) as f:
        assert json.load(f)["values"] == "binary"
    p = archive(db, arch, "t", "--before", "5")                  # a directory of binary values refuses strings
    assert p.returncode == 1 and b"add --binary" in p.stderr, p.stderr
    p = archive(db, arch2, "t", "--before", "5")
    assert p.returncode == 0, p.stderr.decode()[-3000:]
    p = archive(db, arch2, "s", "--before", "10", "--binary")    # ... and one of strings refuses binary
    assert p.returncode == 1 and b"leave out --binary" in p.stderr, p.stderr
    assert [e[0] for e in xs(db, "XRANGE t - +")[0]] == ["9-1"]


VERIFY_READ = r'''
import os, sys
import pyarrow as pa
import pyarrow.parquet as pq
from storage.spark.archive.job import parquet_ids
pq.write_table(pa.table({"id": ["%d-0" % i for i in range(5000)], "v": list(range(5000))}), sys.argv[1],
               row_group_size=500)
tasks = lambda: set(os.listdir("/proc/self/task"))
before = tasks()
with open(sys.argv[1], "rb") as f:
    ids = parquet_ids(f)
assert ids == ["%d-0" % i for i in range(5000)], ids[:3]
print(len(tasks() - before))
'''


def test_reading_the_staged_ids_back_starts_no_native_threads(tmp_path):
    """Verification reads each staged file's ``id`` column in xs's own
    process.  Arrow's thread pools (what pq.read_table starts) can abort
    that process as it exits (SIGABRT, "terminate called without an
    active exception"), after a run had finished or had been refused:
    the read must start no thread.  A fresh process, so no earlier
    test's pools are there already."""
    p = subprocess.run([os.sys.executable, "-c", VERIFY_READ, str(tmp_path / "f.parquet")], capture_output=True,
                       cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"0\n"
