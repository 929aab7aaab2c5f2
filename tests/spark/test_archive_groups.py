"""xs archive keeps the work consumer groups have not done, as xs trim
does: a stream is archived (and trimmed) only below the oldest entry any
of its groups has not acknowledged -- not yet delivered to it, or
pending in it -- and the dry run, the summary and, with -q, stderr say
what was kept; --drop-unacked takes it too.  Over a store's path and
over the network (--url), with real Spark jobs.  The trim transaction
checks again, so a group made or moved back while Spark ran keeps its
entries (engine tier, no Spark: trim_archived).  Skipped without
pyspark / pyarrow."""
import glob
import os
import subprocess

import pytest

pytest.importorskip("pyspark")
pads = pytest.importorskip("pyarrow.dataset")
redis_py = pytest.importorskip("redis")

from conftest import ROOT, XS, run_xs  # noqa: E402
from tests.spark.test_spark_network import any_server, redis_server, serve  # noqa: E402,F401 (fixtures)


def xs(db, *args):
    p = subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, text=True, cwd=ROOT, timeout=600)
    return p


def jobs_with_a_group(db, n=10, delivered=2):
    """Stream jobs of ``n`` entries (IDs 1-0..n-0) and group mailer with
    ``delivered`` of them delivered and pending, the rest never read."""
    lines = ["XADD jobs %d-0 n %d" % (i, i) for i in range(1, n + 1)]
    lines += ["XGROUP CREATE jobs mailer 0", "XREADGROUP GROUP mailer w1 COUNT %d STREAMS jobs >" % delivered]
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr


def parquet_ids(out):
    if not glob.glob(os.path.join(str(out), "stream=*", "date=*", "*.parquet")):
        return []
    t = pads.dataset(str(out), format="parquet", partitioning="hive").to_table()
    return sorted(t.column("id").to_pylist(), key=lambda i: tuple(map(int, i.split("-"))))


def test_archive_keeps_what_a_group_has_not_read_or_acknowledged_and_says_so(tmp_path):
    db, out = tmp_path / "s.xs", tmp_path / "archive"
    jobs_with_a_group(db)
    dry = xs(db, "archive", "jobs", "--to", str(out), "--older-than", "0s", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "jobs: would archive 0; would keep 10 not acknowledged (group mailer: 8 not yet delivered, 2 pending)" \
        in dry.stdout
    run = xs(db, "archive", "jobs", "--to", str(out), "--older-than", "0s")
    assert run.returncode == 0, run.stderr
    assert "kept 10 not acknowledged (group mailer: 8 not yet delivered, 2 pending)" in run.stdout
    assert xs(db, "XLEN", "jobs").stdout == "10\n"
    assert parquet_ids(out) == []
    # the group still gets its 8 undelivered entries
    got = xs(db, "XREADGROUP", "GROUP", "mailer", "w2", "STREAMS", "jobs", ">")
    assert got.stdout.split("\n").count("n") == 8

    # once the group acknowledged 1-0 and 2-0 and read the rest, acknowledging 3-0..5-0,
    # the run archives exactly 1-0..5-0, and -q names what it kept, on stderr
    assert xs(db, "XACK", "jobs", "mailer", "1-0", "2-0", "3-0", "4-0", "5-0").returncode == 0
    q = xs(db, "archive", "jobs", "--to", str(out), "--older-than", "0s", "-q")
    assert q.returncode == 0, q.stderr
    assert q.stdout == ""
    assert q.stderr == "xs archive: jobs: kept 5 not acknowledged (group mailer: 5 pending)\n"
    assert parquet_ids(out) == ["%d-0" % i for i in range(1, 6)]
    assert xs(db, "XRANGE", "jobs", "-", "+", "COUNT", "1").stdout.startswith("6-0\n")
    # the pending entries are still there to claim
    assert xs(db, "XPENDING", "jobs", "mailer").stdout.split("\n")[:3] == ["5", "6-0", "10-0"]


def test_drop_unacked_archives_and_trims_a_groups_work_and_says_what_it_took(tmp_path):
    db, out = tmp_path / "s.xs", tmp_path / "archive"
    jobs_with_a_group(db)
    q = xs(db, "archive", "jobs", "--to", str(out), "--older-than", "0s", "--drop-unacked", "-q")
    assert q.returncode == 0, q.stderr
    assert q.stderr == "xs archive: jobs: took work not done (group mailer: 8 not yet delivered, 2 pending)\n"
    assert parquet_ids(out) == ["%d-0" % i for i in range(1, 11)]
    assert xs(db, "XLEN", "jobs").stdout == "0\n"


def test_archive_over_the_network_keeps_what_a_group_has_not_acknowledged(any_server, tmp_path):  # noqa: F811
    url, r = any_server
    for i in range(1, 11):
        r.xadd("jobs", {"n": i}, id="%d-0" % i)
    r.xgroup_create("jobs", "mailer", id="0")
    r.xreadgroup("mailer", "w1", {"jobs": ">"}, count=2)
    out = tmp_path / "archive"
    run = subprocess.run(XS + ["archive", "jobs", "--url", url, "--to", str(out), "--older-than", "0s"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "kept 10 not acknowledged (group mailer: 8 not yet delivered, 2 pending)" in run.stdout
    assert r.xlen("jobs") == 10
    r.xack("jobs", "mailer", "1-0")
    run = subprocess.run(XS + ["archive", "jobs", "--url", url, "--to", str(out), "--older-than", "0s"],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "kept 9 not acknowledged (group mailer: 8 not yet delivered, 1 pending)" in run.stdout
    assert parquet_ids(out) == ["1-0"]
    assert [i for i, _ in r.xrange("jobs")][0] == b"2-0"
    assert len(r.xreadgroup("mailer", "w2", {"jobs": ">"})[0][1]) == 8


def test_the_docs_example_of_what_a_quiet_run_keeps_runs_as_shown(tmp_path):
    """docs/spark.md's ``xs archive ... -q`` example with the line it
    prints on stderr, on the store of the issue's report (nothing to
    archive: no JVM starts)."""
    import re
    import shlex
    doc = open(os.path.join(ROOT, "docs", "spark.md")).read()
    m = re.search(r"^    \$ (xs archive jobs .* -q)\n    (xs archive: jobs: .*)$", doc, re.M)
    assert m, "docs/spark.md no longer shows the quiet run that keeps a group's work"
    db, out = tmp_path / "s.xs", tmp_path / "archive"
    jobs_with_a_group(db)
    argv = shlex.split(m.group(1).replace("/srv/archive", str(out)))
    p = subprocess.run(XS + ["--db", str(db)] + argv[1:], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert (p.stdout, p.stderr) == ("", m.group(2) + "\n")
