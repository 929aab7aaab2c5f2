"""Benchmark: Spark reading an xs store through the ``xstream`` data
source (locally with ``path``, and over the network with ``url``
through ``xs serve`` and through ``redis-server``) beside Spark reading
the same entries as Parquet, and ``xs archive`` throughput.

    python3 benchmarks/bench_spark.py [--entries 1000000] [--partitions 4] [--repeat 2] [--no-network]

A store of N entries in one stream is built (fields user, action,
payload; automatic IDs).  On local[2], for each source the best of
``--repeat`` runs of:

  count        df.count()
  group by     df.groupBy(fields['user']).count().collect()  (11 users)

The Parquet copy is written by Spark from the xstream read (its time is
shown too) and read with spark.read.parquet; its count comes from the
files' metadata, so the count ratio mostly measures what the Python
data source costs per row; the group-by reads every row's map on both
sides.

The network reads (unless ``--no-network``): the store served by ``xs
serve`` (plain TCP on loopback, no password) and the same entries
copied into a ``redis-server`` with ``appendfsync always``, the
durable peer (``xs export --to``; skipped when redis-server is not
installed), each read with
``option("url", ...)``, same partitions, ``chunk`` 1000: their times
and their ratio to the local ``path`` read (>1: slower).  Then the
write: the N entries' fields written by Spark to a new stream with
``path`` and with ``url`` through xs serve (and redis-server), in
blocks of 1000 rows: rows per second.

Then ``xs archive`` moves all N entries to Parquet and trims them, as a
user runs it (a subprocess: its JVM start is included): entries per
second.
"""
import argparse
import os
import shutil
import socket
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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


def servers(db, tmp, out):
    """``xs serve`` on the store, and a redis-server holding the same
    entries (not without redis-server), into ``out``: {name: (url,
    process)} (filled as they start: the caller stops them)."""
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "xstream_cli", "--db", db, "serve", "--port", str(port),
                          "--allow-no-password"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    out["xs serve"] = ("redis://127.0.0.1:%d" % port, p)
    wait_port(port, p)
    binary = shutil.which("redis-server")
    if binary:
        port = free_port()
        d = os.path.join(tmp, "redis")
        os.mkdir(d)
        # the durable peer, as in every other benchmark: each write on disk before its reply
        p = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
                              "--appendfsync", "always", "--dir", d], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        out["redis-server"] = ("redis://127.0.0.1:%d" % port, p)
        wait_port(port, p)
        t = time.monotonic()
        c = subprocess.run([sys.executable, "-m", "xstream_cli", "--db", db, "export", "events", "--to",
                            out["redis-server"][0], "-q"], cwd=ROOT, capture_output=True, text=True)
        if c.returncode != 0:
            raise RuntimeError("xs export --to redis-server failed: " + c.stderr)
        print("copied the entries to redis-server in %.1f s" % (time.monotonic() - t), flush=True)


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
    ap.add_argument("--no-network", action="store_true", help="skip the url reads and writes")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="xs-bench-spark-")
    served = {}
    try:
        db = os.path.join(tmp, "db")
        t = time.monotonic()
        last = build(db, a.entries)
        print("built a store of %d entries in %.1f s" % (a.entries, time.monotonic() - t), flush=True)
        if not a.no_network:
            servers(db, tmp, served)
        spark = session()
        from pyspark.sql import functions as F

        def xstream(url=None):
            r = spark.read.format("xstream").option("stream", "events").option("partitions", a.partitions)
            return (r.option("url", url) if url else r.option("path", db)).load()
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
            net = []
            for name, (url, _) in served.items():
                n_s, n_r = best(lambda: fn(xstream(url)), a.repeat)
                assert n_r == xs_r, (op, name, n_r, xs_r)
                net.append((name, n_s))
            rows.append((op, xs_s, pq_s, net))
        writes = []
        if served:
            data = spark.read.parquet(pq_dir).select("fields").cache()
            data.count()
            targets = [("path", lambda w: w.option("path", db))] + [
                ("url " + name, lambda w, url=url: w.option("url", url)) for name, (url, _) in served.items()]
            for k, (name, where) in enumerate(targets):
                t = time.monotonic()
                where(data.write.format("xstream").option("stream", "written:%d" % k)
                      .option("batch_size", 1000)).mode("append").save()
                writes.append((name, time.monotonic() - t))
            data.unpersist()
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
        for op, xs_s, pq_s, _ in rows:
            print("%-16s %12.2f %12.2f %7.1fx %16.0f" % (op, xs_s, pq_s, xs_s / max(pq_s, 1e-9),
                                                       a.entries / max(xs_s, 1e-9)))
        print("%-16s %12.2f %12s %8s %16.0f" % ("xstream->parquet", write_s, "-", "-", a.entries / write_s))
        if served:
            print()
            print("over the network (url, loopback, chunk 1000): time, and the ratio to the local path read")
            print("%-16s %10s" % ("operation", "path s") + "".join(" %18s %7s" % (n + " s", "/path")
                                                                     for n in served))
            for op, xs_s, _, net in rows:
                print("%-16s %10.2f" % (op, xs_s) + "".join(" %18.2f %6.2fx" % (s_, s_ / max(xs_s, 1e-9))
                                                            for _, s_ in net))
            if "redis-server" in served:
                by = {op: dict(net) for op, _, _, net in rows}
                print("url xs serve / url redis-server: " + ", ".join(
                    "%s %.2fx" % (op, v["xs serve"] / max(v["redis-server"], 1e-9)) for op, v in by.items()))
            print("write (%d rows, blocks of 1000): " % a.entries + ", ".join(
                "%s %.2f s = %.0f rows/s" % (name, s_, a.entries / max(s_, 1e-9)) for name, s_ in writes))
        print("archive (xs archive, JVM start included): %d entries in %.1f s = %.0f entries/s"
              % (a.entries, arch_s, a.entries / arch_s))
        return 0
    finally:
        for _, p in served.values():
            p.terminate()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
