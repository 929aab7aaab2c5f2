"""Benchmark: a one-shot read while a long bulk ingest runs, xs beside
redis-server.

    python3 benchmarks/bench_reader_during_ingest.py [--lines 600000] [--reads 20]

xs side: ``xs --db DIR XLEN events`` (the console script) repeated while
``xs --db DIR < FILE`` ingests FILE (script mode, durable).  redis side:
``redis-cli XLEN events`` while ``redis-cli --pipe`` ingests the same
lines into a private redis-server (appendfsync always).  For each side
the idle median (no ingest) and the median during the ingest are
printed, with their ratio (the issue's goal: during/idle within 1.2).
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time


def xs_command():
    script = os.path.join(sysconfig.get_path("scripts"), "xs")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script]
    return [sys.executable, "-m", "xstream_cli"]


def timed(argv, env=None):
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return (time.perf_counter() - t) * 1000


def during(reader, writer, reads, env=None):
    """Medians of ``reader`` idle and while ``writer`` (Popen args) runs."""
    idle = [timed(reader, env) for _ in range(reads)]
    w = writer()
    time.sleep(0.2)
    busy = []
    while w.poll() is None and len(busy) < reads:
        busy.append(timed(reader, env))
    w.wait()
    return statistics.median(idle), (statistics.median(busy) if busy else float("nan")), len(busy)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=600000)
    ap.add_argument("--reads", type=int, default=20)
    a = ap.parse_args()
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        raise SystemExit("redis-server and redis-cli are needed")
    work = tempfile.mkdtemp(prefix="xs-bench-rd-")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        data = os.path.join(work, "in.txt")
        with open(data, "w") as f:
            for i in range(a.lines):
                f.write("XADD events * user u%d action click page /home ts %d\n" % (i, 1700000000 + i))
        xs = xs_command()
        db = os.path.join(work, "db")
        subprocess.run(xs + ["--db", db, "XADD", "events", "*", "a", "1"], check=True,
                       stdout=subprocess.DEVNULL, env=env)
        xi, xb, xn = during(xs + ["--db", db, "XLEN", "events"],
                            lambda: subprocess.Popen(xs + ["--db", db], stdin=open(data, "rb"),
                                                     stdout=subprocess.DEVNULL, env=env),
                            a.reads, env)
        port = free_port()
        srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "yes", "--appendfsync", "always", "--dir", work],
                               stdout=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True).stdout:
                    break
                time.sleep(0.05)
            ri, rb, rn = during(["redis-cli", "-p", str(port), "XLEN", "events"],
                                lambda: subprocess.Popen(["redis-cli", "-p", str(port), "--pipe"],
                                                         stdin=open(data, "rb"), stdout=subprocess.DEVNULL),
                                a.reads)
        finally:
            srv.terminate()
            srv.wait()
        print("one-shot XLEN during a %d-line bulk ingest (medians, ms)" % a.lines)
        print("  %-6s idle %7.1f  during %7.1f  (n=%d)  during/idle %.2f" % ("xs", xi, xb, xn, xb / xi))
        print("  %-6s idle %7.1f  during %7.1f  (n=%d)  during/idle %.2f" % ("redis", ri, rb, rn, rb / ri))
        print("  xs/redis during: %.2f" % (xb / rb))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
