"""Benchmark: a long read -- XRANGE, XREAD and XREADGROUP of a whole
stream in every output mode (raw, --json, --jsonl, --pretty) -- time to
the first byte, total time and peak memory, beside ``xs export`` (the
streamed reference) and ``redis-cli`` on the same entries in
redis-server (``appendfsync always``: the durable peer); then how long
each takes to notice a reader that went away (``| head -1``).

    python3 benchmarks/bench_json_range.py [--entries 2000000]

Each command runs in a fresh child writing to a pipe that is drained;
max RSS is the child's peak resident set (os.wait4).  XREADGROUP runs on
a group made fresh (XGROUP CREATE ... 0) before each run.
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
XS = [sys.executable, "-m", "xstream_cli"]


def _anon_kb(pid):
    """The process's anonymous resident memory (its heap: not the store's
    mapped file pages, which max RSS counts) in KB, or 0 once it is gone."""
    try:
        with open("/proc/%d/status" % pid, "rb") as f:
            for line in f:
                if line.startswith(b"RssAnon:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(argv, cwd=ROOT):
    """(seconds to the first byte, seconds in all, bytes, max RSS in MB,
    peak heap in MB).  Max RSS (os.wait4) counts the pages of the store's
    mapping a read touches; the heap (RssAnon, sampled as the output is
    drained) is what a reply held in memory costs."""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, cwd=cwd)
    first = None
    n = 0
    heap = 0
    while True:
        chunk = p.stdout.read1(1 << 16)
        heap = max(heap, _anon_kb(p.pid))
        if not chunk:
            break
        if first is None:
            first = time.monotonic() - t
        n += len(chunk)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    return first or 0.0, time.monotonic() - t, n, ru.ru_maxrss / 1024.0, heap / 1024.0


def fresh(db, before):
    """Run ``before`` (a fresh group) after dropping the group it makes."""
    if before is None:
        return
    subprocess.run(XS + ["--db", db, "--no-sync", "XGROUP", "DESTROY", "big", "g"], stdout=subprocess.DEVNULL,
                   cwd=ROOT)
    subprocess.run(before, stdout=subprocess.DEVNULL, check=True, cwd=ROOT)


def head_one(argv):
    """Seconds until ``argv`` exits after its reader took one line and
    went away, and its exit status."""
    t = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT)
    p.stdout.readline()
    p.stdout.close()
    return time.monotonic() - t, p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=2_000_000)
    a = ap.parse_args()
    d = tempfile.mkdtemp(prefix="xs-bench-json-")
    db = os.path.join(d, "store")
    try:
        lines = b"".join(b"XADD big * user u%d action click n %d\n" % (i % 1000, i) for i in range(a.entries))
        subprocess.run(XS + ["--db", db, "--no-sync"], input=lines, stdout=subprocess.DEVNULL, check=True, cwd=ROOT)
        rows = []
        for mode in ("--raw", "--json", "--jsonl", "--pretty"):
            rows += [("xs %s XRANGE" % mode, XS + ["--db", db, mode, "XRANGE", "big", "-", "+"], None),
                     ("xs %s XREAD" % mode, XS + ["--db", db, mode, "XREAD", "STREAMS", "big", "0"], None),
                     ("xs %s XREADGROUP" % mode,
                      XS + ["--db", db, mode, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "big", ">"],
                      XS + ["--db", db, "--no-sync", "XGROUP", "CREATE", "big", "g", "0"])]
        rows.append(("xs export", XS + ["--db", db, "export", "big"], None))
        redis = None
        if shutil.which("redis-server") and shutil.which("redis-cli"):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
            s.close()
            redis = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "yes",
                                      "--appendfsync", "always", "--dir", d], stdout=subprocess.DEVNULL)
            for _ in range(100):
                if subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True).stdout == b"PONG\n":
                    break
                time.sleep(0.05)
            # pipelined (--pipe): one fsync per batch of commands, not one per XADD
            subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=lines, stdout=subprocess.DEVNULL, check=True)
            rows.append(("redis-cli --json XRANGE",
                         ["redis-cli", "-p", str(port), "--json", "XRANGE", "big", "-", "+"], None))
            rows.append(("redis-cli --json XREAD",
                         ["redis-cli", "-p", str(port), "--json", "XREAD", "STREAMS", "big", "0"], None))
        print("%d entries" % a.entries)
        print("%-24s %10s %9s %12s %10s %10s" % ("command", "first byte", "total", "bytes", "max RSS", "peak heap"))
        for name, argv, before in rows:
            fresh(db, before)
            first, total, n, rss, heap = measure(argv)
            print("%-24s %9.2fs %8.2fs %12s %7.0f MB %7.0f MB" % (name, first, total, format(n, ","), rss, heap))
        print()
        print("%-24s %10s %10s" % ("| head -1", "seconds", "exit"))
        for name, argv, before in rows:
            if "--raw" in argv or name == "xs export":
                fresh(db, before)
                took, code = head_one(argv)
                print("%-24s %9.2fs %10d" % (name, took, code))
        if redis is not None:
            redis.terminate()
            redis.wait()
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
