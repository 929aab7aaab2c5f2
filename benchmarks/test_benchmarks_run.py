"""The benchmarks stay runnable: each ``tests/bench_*.py`` runs at a tiny
size and must finish with exit 0 and print its table.  No figure is
asserted here (timings belong to the benchmarks, not to the suite); this
only catches a benchmark that an API change broke."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

needs_spark = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("pyspark", "pyarrow")),
                                 reason="pyspark and pyarrow are needed (the spark extra)")
needs_redis = pytest.mark.skipif(shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
                                 reason="redis-server and redis-cli are needed")
needs_serve = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("hiredis", "uvloop")),
                                 reason="hiredis and uvloop are needed (the serve extra)")

CASES = [
    pytest.param("bench_cli.py", ["--lines", "300", "--runs", "1", "--oneshot", "2"], "(vs redis-cli",
                 marks=needs_redis, id="cli"),
    pytest.param("bench_claim.py", ["--entries", "300", "--idle", "30", "--iters", "2"],
                 "disk: a durable XREADGROUP CLAIM wrote",
                 marks=needs_redis, id="claim"),
    pytest.param("bench_snapshot.py", ["--sizes", "500"], "restore", id="snapshot"),
    pytest.param("bench_replicate.py", ["--entries", "2000", "--batch", "500", "--serve-entries", "200",
                                        "--repeat", "1", "--rate", "500", "--seconds", "1"],
                 "replication lag of xs replicate", id="replicate"),
    pytest.param("bench_replica_redis.py", ["--rate", "500", "--seconds", "1"], "lag: p50",
                 marks=needs_redis, id="replica_redis"),
    pytest.param("bench_json_range.py", ["--entries", "3000"], "xs --jsonl XREADGROUP", id="json_range"),
    pytest.param("bench_block_latency.py", ["-n", "5", "--gap", "2"], "xreadgroup", id="block_latency"),
    pytest.param("bench_reader_during_ingest.py", ["--lines", "3000", "--reads", "2"], "xs/redis during",
                 marks=needs_redis, id="reader_during_ingest"),
    pytest.param("bench_serve.py", ["-n", "200", "-c", "4", "--consumers", "3"],
                 "exactly-once delivery and an empty PEL checked", marks=needs_redis, id="serve"),
    pytest.param("bench_ping.py", ["-n", "2000", "-c", "4", "--repeat", "1"], "/bare: the throughput ratio",
                 marks=[needs_redis, needs_serve], id="ping"),
    pytest.param("bench_inprocess.py", ["-n", "200", "--pipeline", "20"], "LMDB commit (data flush, meta flush)",
                 marks=needs_redis, id="inprocess"),
    pytest.param("bench_worker_loop.py", ["--entries", "300"], "ack riding / ack alone",
                 marks=needs_redis, id="worker_loop"),
    pytest.param("bench_ingest_curve.py", ["--sizes", "200,1000", "--batch", "300", "--repeat", "1", "--oneshot", "2"],
                 "largest vs smallest", marks=needs_redis, id="ingest_curve"),
    pytest.param("bench_spark.py", ["--entries", "2000", "--repeat", "1"], "archive (xs archive",
                 marks=needs_spark, id="spark"),
]


@pytest.mark.parametrize("script,args,expect", CASES)
def test_benchmark_runs_at_a_tiny_size(script, args, expect):
    p = subprocess.run([sys.executable, os.path.join(HERE, script)] + args,
                       capture_output=True, text=True, timeout=240, cwd=os.path.dirname(HERE))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert expect in p.stdout, p.stdout
