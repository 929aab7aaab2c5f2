"""Porcelain commands at the ends of real pipes and terminals: xs tail
--group acknowledges only what its reader took, xs export / xs import
show progress on a terminal (pseudo-terminal) without failing, and
xs export -o writes through a private temporary file."""
import json
import os
import shutil
import stat
import subprocess
import time

import pytest

from conftest import ROOT, XS, run_xs
from tests.harness.terminal import stderr_on_pty  # noqa: E402

TIMEOUT = 60
XS_SH = " ".join(XS)


@pytest.fixture
def db(tmp_path):
    return tmp_path / "db"


def fill(db, lines):
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr


def sh(script, timeout=TIMEOUT):
    return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, timeout=timeout)


def pending_ids(db, stream="s", group="g"):
    p = run_xs(db, ["XPENDING %s %s - + 1000" % (stream, group)])
    assert p.returncode == 0, p.stderr
    return [row[0] for row in json.loads(p.stdout)]


def delivered_upto(db, stream="s", group="g"):
    p = run_xs(db, ["XINFO GROUPS %s" % stream])
    return {g["name"]: g["last-delivered-id"] for g in json.loads(p.stdout)}[group]


# ------------------------------------------------- tail --group: acks

def _group_with(db, n):
    fill(db, ["XGROUP CREATE s g 0 MKSTREAM"] + ["XADD s %d-0 i %d" % (i, i) for i in range(1, n + 1)])
    return ["%d-0" % i for i in range(1, n + 1)]


@pytest.mark.parametrize("follow", [True, False])
def test_tail_group_into_head_acks_no_entry_that_was_not_written(db, follow):
    ids = _group_with(db, 4)
    p = sh("%s --db '%s' tail %s --group g --consumer c s | head -1; echo status=${PIPESTATUS[0]}"
           % (XS_SH, db, "-f" if follow else ""))
    assert p.stdout == b"s 1-0 i=1\nstatus=0\n", p
    assert p.stderr == b""
    pending = pending_ids(db)
    # head took the first line; no other line was read by anyone, so none
    # of them may be acknowledged (the first one may or may not be)
    assert set(ids) - set(pending) <= {"1-0"}, pending
    assert pending[-3:] == ids[1:]


def test_tail_group_handler_that_dies_after_one_line_leaves_the_rest_pending(db):
    ids = _group_with(db, 4)
    p = sh("%s --db '%s' tail --group g --consumer c s | { read -r line; echo \"got $line\"; exit 1; };"
           " echo status=${PIPESTATUS[0]},${PIPESTATUS[1]}" % (XS_SH, db))
    assert p.stdout == b"got s 1-0 i=1\nstatus=0,1\n", p
    assert pending_ids(db) == ids[1:]      # the handler read the first line only


def test_tail_group_follow_handler_that_dies_leaves_new_entries_pending(db):
    fill(db, ["XGROUP CREATE s g $ MKSTREAM"])
    f = subprocess.Popen(["bash", "-c", "%s --db '%s' tail -f --group g --consumer c s"
                          " | { read -r line; echo \"got $line\"; sleep 1; exit 1; }" % (XS_SH, db)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    fill(db, ["XADD s %d-0 i %d" % (i, i) for i in range(1, 5)])
    out, err = f.communicate(timeout=TIMEOUT)
    assert out == b"got s 1-0 i=1\n" and err == b""
    assert delivered_upto(db) == "4-0"             # all four were delivered (XREADGROUP) ...
    assert pending_ids(db) == ["2-0", "3-0", "4-0"]  # ... and only the one read is acknowledged


def test_tail_group_no_ack_leaves_every_entry_pending(db):
    ids = _group_with(db, 3)
    p = sh("%s --db '%s' tail --no-ack --group g --consumer c s" % (XS_SH, db))
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"s 1-0 i=1\ns 2-0 i=2\ns 3-0 i=3\n"
    assert pending_ids(db) == ids and delivered_upto(db) == "3-0"
    p = run_xs(db, ["XPENDING s g - + 10 c"])
    assert [row[3] for row in json.loads(p.stdout)] == [1, 1, 1]
    # the consumer's own pending entries come first on the next run
    p = sh("%s --db '%s' tail --group g --consumer c s" % (XS_SH, db))
    assert p.stdout == b"s 1-0 i=1\ns 2-0 i=2\ns 3-0 i=3\n"
    assert pending_ids(db) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_tail_group_into_an_unwritable_output_fails_in_one_line_and_acks_nothing(db):
    ids = _group_with(db, 3)
    p = sh("%s --db '%s' tail --group g --consumer c s > /dev/full" % (XS_SH, db))
    assert p.returncode == 1
    assert p.stderr == b"xs: cannot write output: No space left on device\n"
    assert pending_ids(db) == ids


def test_tail_no_ack_needs_a_group(db):
    p = sh("%s --db '%s' tail --no-ack s" % (XS_SH, db))
    assert p.returncode == 2 and b"--no-ack" in p.stderr and b"Traceback" not in p.stderr


# ------------------------------------------- progress on a terminal

def on_pty(argv, stdin=None, timeout=TIMEOUT):
    """Run ``argv`` with stderr on a pseudo-terminal; returns (status,
    what the terminal showed)."""
    return stderr_on_pty(argv, stdin, timeout, columns=100)[:2]


def _jsonl(path, n, stream="big"):
    with open(path, "w") as f:
        for i in range(1, n + 1):
            f.write(json.dumps({"stream": stream, "id": "%d-0" % i, "fields": ["n", str(i), "pad", "x" * 20]})
                    + "\n")


N_BIG = 12000   # past the progress thresholds of both commands


def test_import_and_export_show_progress_on_a_terminal(tmp_path, db):
    src = tmp_path / "in.jsonl"
    _jsonl(src, N_BIG)
    with open(src, "rb") as f:
        status, shown = on_pty(XS + ["--db", str(db), "import"], stdin=f)
    assert "Traceback" not in shown and status == 0, shown
    assert "imported 1 stream, %d entries" % N_BIG in shown
    p = run_xs(db, ["XLEN big"])
    assert json.loads(p.stdout) == N_BIG

    status, shown = on_pty(XS + ["--db", str(db), "import", str(src), "--batch", "20000"])
    assert "Traceback" not in shown and status == 1, shown   # same IDs again: refused, cleanly
    assert "equal or smaller" in shown

    out = tmp_path / "out.jsonl"
    status, shown = on_pty(XS + ["--db", str(db), "export", "-o", str(out)])
    assert "Traceback" not in shown and status == 0, shown
    assert "exported 1 stream, %d entries" % N_BIG in shown
    assert out.read_bytes().count(b"\n") == N_BIG
    assert [json.loads(l) for l in out.read_text().splitlines()] == \
        [json.loads(l) for l in src.read_text().splitlines()]


# ------------------------------------------------ export -o: temp file

def _export(db, out, *extra, umask=None):
    pre = "umask %s; " % umask if umask else ""
    return sh("%s%s --db '%s' export -o '%s' %s" % (pre, XS_SH, db, out, " ".join(extra)))


@pytest.fixture
def big(tmp_path, db):
    src = tmp_path / "src.jsonl"
    _jsonl(src, 20000)
    p = sh("XS_NO_PROGRESS=1 %s --db '%s' import '%s'" % (XS_SH, db, src))
    assert p.returncode == 0, p.stderr
    return db


def test_export_does_not_follow_a_symlink_planted_at_the_temp_name(tmp_path, db):
    fill(db, ["XADD s 1-0 a 1"])
    d = tmp_path / "out"
    d.mkdir()
    precious = tmp_path / "precious"
    precious.write_bytes(b"keep me\n")
    os.symlink(precious, d / "x.jsonl.tmp")
    p = _export(db, d / "x.jsonl")
    assert p.returncode == 0, p.stderr
    assert precious.read_bytes() == b"keep me\n"
    assert os.path.islink(d / "x.jsonl.tmp")
    assert not os.path.islink(d / "x.jsonl")
    assert json.loads((d / "x.jsonl").read_text()) == {"stream": "s", "id": "1-0", "fields": ["a", "1"]}
    assert sorted(os.listdir(d)) == ["x.jsonl", "x.jsonl.tmp"]    # nothing else left behind


def test_concurrent_exports_to_one_file_leave_a_complete_file(tmp_path, big):
    want = sh("%s --db '%s' export" % (XS_SH, big)).stdout
    assert want.count(b"\n") == 20000
    d = tmp_path / "out"
    d.mkdir()
    out = d / "x.jsonl"
    for _ in range(2):
        procs = [subprocess.Popen(["bash", "-c", "%s --db '%s' export -o '%s'" % (XS_SH, big, out)],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        results = [p.communicate(timeout=TIMEOUT) + (p.returncode,) for p in procs]
        assert [r[2] for r in results] == [0, 0, 0], results
        assert out.read_bytes() == want
        assert os.listdir(d) == ["x.jsonl"]


def test_failed_export_leaves_no_file_behind(tmp_path, db):
    fill(db, ["XADD s 1-0 a 1"])
    d = tmp_path / "out"
    d.mkdir()
    p = _export(db, d / "x.jsonl", "nosuch")
    assert p.returncode == 1 and p.stderr == b"xs: no such stream: nosuch\n"
    assert os.listdir(d) == []


def test_export_file_mode_follows_umask_or_the_file_it_replaces(tmp_path, db):
    fill(db, ["XADD s 1-0 a 1"])
    out = tmp_path / "x.jsonl"
    assert _export(db, out, umask="027").returncode == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    os.chmod(out, 0o600)
    assert _export(db, out, umask="022").returncode == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600      # as `xs export > x.jsonl` would keep it


def test_export_to_a_missing_directory_is_one_line(tmp_path, db):
    fill(db, ["XADD s 1-0 a 1"])
    p = _export(db, tmp_path / "nodir" / "x.jsonl")
    assert p.returncode == 1 and p.stderr.startswith(b"xs: cannot write ") and p.stderr.count(b"\n") == 1


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")
def test_tail_json_is_jq_friendly(db):
    fill(db, ["XADD s 1-0 a 1 a 2 b 3"])
    p = sh("%s --db '%s' tail --json s | jq -c '.fields'" % (XS_SH, db))
    assert p.stdout == b'["a","1","a","2","b","3"]\n'
