"""xs archive --url: the archive job over the network (storage/spark/
archive.py NetStore), against ``xs serve`` and a real ``redis-server``:
Spark's executors read the entries with the data source's url mode, the
files are verified as in the path mode, and the trim is an XTRIM MINID
on the server in one MULTI/EXEC, WATCHed while its entries are checked
against the manifest's digest.  Skipped without pyspark / pyarrow."""
import json
import os
import re
import shlex
import subprocess

import pytest

pytest.importorskip("pyspark")
pads = pytest.importorskip("pyarrow.dataset")
redis_py = pytest.importorskip("redis")

from conftest import ROOT, XS, new_store  # noqa: E402
from storage.spark.archive import MANIFEST  # noqa: E402
from tests.spark.test_spark_network import any_server, redis_server, serve  # noqa: E402,F401 (fixtures)


def archive(url, out, *args, env=None):
    return subprocess.run(XS + ["archive", "ev:*", "--url", url, "--to", str(out)] + list(args),
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=dict(os.environ, **(env or {})))


def fill(r, n=30):
    p = r.pipeline(transaction=False)
    for i in range(1, n + 1):
        p.xadd("ev:a", {"n": i}, id="%d-0" % i)
        p.xadd("ev:b", {"n": "b%d" % i}, id="%d-1" % i)
    p.xadd("other", {"k": "v"}, id="1-0")
    p.execute()


def parquet_rows(out):
    t = pads.dataset(str(out), format="parquet", partitioning="hive").to_table()
    assert "source" not in t.column_names                   # the path mode's columns: one schema for every run
    return sorted((s, i) for s, i in zip(t.column("stream").to_pylist(), t.column("id").to_pylist()))


def below(n, cut):
    return sorted([("ev:a", "%d-0" % i) for i in range(1, cut)] + [("ev:b", "%d-1" % i) for i in range(1, cut)])


def test_archive_over_the_network_writes_the_entries_below_the_cut_then_trims_them_on_the_server(any_server, tmp_path):  # noqa: F811 (the fixture)
    url, r = any_server
    fill(r)
    out = tmp_path / "archive"
    dry = archive(url, out, "--before", "21-0", "--dry-run")
    assert dry.returncode == 0 and "ev:a: would archive 20 (1-0..20-0)" in dry.stdout, dry.stderr
    # docs/spark.md's --url example, with this server, DIR and cut
    doc = open(os.path.join(ROOT, "docs", "spark.md")).read()
    m = re.search(r"^    \$ (xs archive .* --url .*)\n    (archived .*)$", doc, re.M)
    assert m, "docs/spark.md no longer shows an xs archive --url example with its output"
    line = (m.group(1).replace("redis://edge-1:6380", url).replace("/srv/archive/edge-1", str(out))
            .replace("1700300000000", "21-0").replace("events:*", "ev:*"))
    p = subprocess.run(XS + shlex.split(line)[1:], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert p.returncode == 0, p.stderr
    assert re.sub(r"\d+", "N", p.stdout.split(" (")[0]) == re.sub(r"\d+", "N", m.group(2).split(" (")[0]) \
        .replace("/srv/archive/edge-N", re.sub(r"\d+", "N", str(out)))
    assert p.stdout.startswith("archived 40 entries of 2 streams") and p.stdout.strip().endswith("trimmed 40")
    assert parquet_rows(out) == below(30, 21)
    assert [i for i, _ in r.xrange("ev:a")] == [b"%d-0" % i for i in range(21, 31)]
    assert r.xlen("ev:b") == 10 and r.xlen("other") == 1
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["store"] == "url:" + url and manifest["streams"]["ev:b"]["through"] == "20-1"
    again = archive(url, out, "--before", "21-0")             # nothing left below the cut: a no-op
    assert again.returncode == 0 and again.stdout.startswith("nothing to archive"), again.stderr


def test_killed_before_its_trim_the_next_run_trims_over_the_network_and_a_stream_made_again_is_refused(
        tmp_path, serve):  # noqa: F811
    s = serve(new_store(tmp_path / "db"))
    url, r = "redis://127.0.0.1:%d" % s.port, redis_py.Redis(port=s.port)
    fill(r)
    out = tmp_path / "archive"
    killed = archive(url, out, "--before", "11-0", env={"XS_ARCHIVE_KILL_AT": "committed"})
    assert killed.returncode != 0
    assert r.xlen("ev:a") == 30 and parquet_rows(out) == below(30, 11)    # in the archive and still in the stream
    p = archive(url, out, "--before", "11-0")
    assert p.returncode == 0, p.stderr
    assert "trimmed 20" in p.stdout and r.xlen("ev:a") == 20 and r.xlen("ev:b") == 20
    assert parquet_rows(out) == below(30, 11)                 # nothing written twice
    # ev:a deleted and made again: entries at or below its archived-through ID that the archive does not hold
    r.delete("ev:a")
    r.xadd("ev:a", {"n": "new"}, id="5-0")
    refused = archive(url, out, "--before", "11-0")
    assert refused.returncode == 1 and "not exactly the 10 its last archived run wrote" in refused.stderr, \
        refused.stderr
    assert "Nothing was trimmed" in refused.stderr
    assert r.xlen("ev:a") == 1                                # not trimmed


def test_an_unreachable_server_and_a_missing_stream_are_one_line_errors(tmp_path, serve):  # noqa: F811
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = archive("redis://127.0.0.1:%d" % port, tmp_path / "out", "--before", "5-0")
    assert p.returncode == 1 and p.stderr.startswith("xs: archive: redis://127.0.0.1:%d: cannot connect" % port)
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
    served = serve(new_store(tmp_path / "db"))
    p = subprocess.run(XS + ["archive", "nope", "--url", "redis://127.0.0.1:%d" % served.port, "--to",
                             str(tmp_path / "out"), "--before", "5-0"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 1 and p.stderr.strip() == "xs: no such stream: nope"
    assert not (tmp_path / "out").exists()


def test_a_producer_writing_all_along_does_not_keep_the_trim_from_happening(any_server):  # noqa: F811
    """A live producer's XADDs void every WATCHed EXEC, and a full check
    of 40,000 archived entries takes longer than the gap between two
    XADDs, so checking everything again never ended (20 tries, then an
    error: the documented cron never trimmed a live stream).  Appends do
    not change a stream's fingerprint, so the trim is retried on the
    pages already checked, under a new WATCH: it goes through, and
    removes exactly the archived entries (library level, no JVM)."""
    import threading
    import time as _time

    from storage.spark import archive as arch
    from storage.spark.network import parse_endpoints
    url, r = any_server
    p = r.pipeline(transaction=False)
    for i in range(1, 40001):
        p.xadd("live", {"n": i}, id="%d-0" % i)
        if i % 5000 == 0:
            p.execute()
    store = arch.NetStore(parse_endpoints(url)[0])
    try:
        plan = store.run(lambda tx: arch.plan_streams(tx, [b"live"], (40001, 0), arch.empty_manifest()))[0]
        assert plan.rows == 40000
        manifest = arch.empty_manifest()
        manifest["pending"] = {"run": "r", "moves": [], "streams": {"live": {
            "first": arch.id_text(plan.first), "last": arch.id_text(plan.last), "rows": plan.rows,
            "digest": plan.digest}}}
        arch.apply_pending(manifest)
        stop = threading.Event()
        added = [0]

        def produce():
            import redis
            c = redis.Redis.from_url(url)
            while not stop.is_set():
                c.xadd("live", {"n": "new"})
                added[0] += 1
                _time.sleep(0.005)
        t = threading.Thread(target=produce)
        t.start()
        try:
            _time.sleep(0.1)
            removed, held = arch.trim_archived(store, manifest, ["live"])
        finally:
            stop.set()
            t.join()
    finally:
        store.close()
    assert removed == {"live": 40000} and held == {}
    assert r.xlen("live") == added[0] > 0
    assert all(f == {b"n": b"new"} for _, f in r.xrange("live"))
