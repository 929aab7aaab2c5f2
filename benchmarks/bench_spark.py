"""Benchmark: Spark reading an xs store through the ``xstream`` data
source beside Spark reading the same entries as Parquet, and ``xs
archive`` throughput.

    python3 benchmarks/bench_spark.py [--entries 1000000] [--partitions 4] [--repeat 2]

A store of N entries in one stream is built (fields user, action,
payload; automatic IDs).  On local[2], for each source the best of
``--repeat`` runs of:

  count        df.count()
  group by     df.groupBy(fields['user']).count().collect()  (11 users)

The Parquet copy is written by Spark from the xstream read (its time is
shown too) and read with spark.read.parquet; its count comes from the
files' metadata, so the count ratio mostly measures what the Python
data source costs per row; the group-by reads every row's map on both
sides.  Then ``xs archive`` moves all N entries to Parquet and trims
them, as a user runs it (a subprocess: its JVM start is included):
entries per second.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def build(db, n):
    from storage.store import Store
    s = Store(db, durable=False)
    done = 0
    while done < n:
        k = min(50000, n - done)
        items = [(b"events", [b"user", b"u%d" % ((done + i) % 11), b"action", b"click" if i % 3 else b"view",
                              b"payload", b"x" * 40]) for i in range(k)]
        s.run(lambda tx: tx.add_auto_many(items), write=True)
        done += k
    last = s.run(lambda tx: tx.last_generated_id(b"events"))
    s.close()
    return last


def session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("xs bench")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from storage.spark import register
    register(spark)
    return spark


def best(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        t = time.monotonic()
        result = fn()
        times.append(time.monotonic() - t)
    return min(times), result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4, help="xstream read partitions (default 4)")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="xs-bench-spark-")
    try:
        db = os.path.join(tmp, "db")
        t = time.monotonic()
        last = build(db, a.entries)
        print("built a store of %d entries in %.1f s" % (a.entries, time.monotonic() - t), flush=True)
        spark = session()
        from pyspark.sql import functions as F

        def xstream():
            return (spark.read.format("xstream").option("path", db).option("stream", "events")
                    .option("partitions", a.partitions).load())
        pq_dir = os.path.join(tmp, "parquet")
        t = time.monotonic()
        xstream().write.parquet(pq_dir)
        write_s = time.monotonic() - t

        def parquet():
            return spark.read.parquet(pq_dir)

        def by_user(df):
            return sorted(tuple(r) for r in df.groupBy(F.col("fields")["user"]).count().collect())
        rows = []
        for op, fn in (("count", lambda df: df.count()), ("group by user", by_user)):
            xs_s, xs_r = best(lambda: fn(xstream()), a.repeat)
            pq_s, pq_r = best(lambda: fn(parquet()), a.repeat)
            assert xs_r == pq_r, (op, xs_r, pq_r)
            if op == "count":
                assert xs_r == a.entries, xs_r
            rows.append((op, xs_s, pq_s))
        spark.stop()
        arch = os.path.join(tmp, "archive")
        t = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "xstream_cli", "--db", db, "archive", "events", "--to", arch,
                            "--before", "%d-%d" % (last[0], last[1] + 1), "-q"],
                           cwd=ROOT, capture_output=True, text=True)
        arch_s = time.monotonic() - t
        if p.returncode != 0:
            sys.stderr.write(p.stderr)
            return 1
        print()
        print("entries: %d in one stream, Spark local[2], xstream partitions=%d, best of %d"
              % (a.entries, a.partitions, a.repeat))
        print("%-16s %12s %12s %8s %16s" % ("operation", "xstream s", "parquet s", "ratio", "xstream rows/s"))
        for op, xs_s, pq_s in rows:
            print("%-16s %12.2f %12.2f %7.1fx %16.0f" % (op, xs_s, pq_s, xs_s / max(pq_s, 1e-9),
                                                       a.entries / max(xs_s, 1e-9)))
        print("%-16s %12.2f %12s %8s %16.0f" % ("xstream->parquet", write_s, "-", "-", a.entries / write_s))
        print("archive (xs archive, JVM start included): %d entries in %.1f s = %.0f entries/s"
              % (a.entries, arch_s, a.entries / arch_s))
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
