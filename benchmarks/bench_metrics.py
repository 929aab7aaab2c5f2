"""Benchmark: ``xs metrics`` (and ``xs check``) on many streams and groups.

    python3 benchmarks/bench_metrics.py [--streams N] [--groups N] [--entries N] [--runs N] [--profile]

Not collected by pytest.  Builds a store of N streams (1,000) of
``--entries`` entries each (10), each with G consumer groups (10), every
group having read half of its stream with one consumer (so each group
has a lag, a lag in seconds and pending entries with delivery times),
then times, as a user meets it (a new process each run, its start
included):

    xs metrics                      > /dev/null
    xs metrics --exclude-consumer-metrics
    xs check --lag-warn 1000000

and, in process, the overview alone (storage.ops.overview.snapshot),
each as wall time and CPU time (user + system: what a busy machine
inflates least); ``--profile`` adds a cProfile summary of one snapshot.
Goal (issue 40): xs metrics on 1,000 streams x 10 groups in <= 1 s.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
XS = [sys.executable, "-m", "xstream_cli"]


def build(db, streams, groups, entries):
    lines = []
    half = max(1, entries // 2)
    for s in range(streams):
        name = "s%05d" % s
        for e in range(entries):
            lines.append("XADD %s * f %d" % (name, e))
        for g in range(groups):
            lines.append("XGROUP CREATE %s g%d 0" % (name, g))
            lines.append("XREADGROUP GROUP g%d c1 COUNT %d STREAMS %s >" % (g, half, name))
    data = ("\n".join(lines) + "\n").encode()
    p = subprocess.run(XS + ["--db", db, "--no-sync"], input=data, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, cwd=ROOT)
    if p.returncode != 0:
        sys.exit("building the store failed: %s" % p.stderr.decode()[-500:])


def timed(argv, runs):
    """(median wall s, best wall s, median CPU s, output bytes): CPU is
    the child's user + system time, which a busy machine inflates less
    than the wall clock."""
    import resource
    out, cpu = [], []
    size = 0
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        out.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if p.returncode not in (0, 1, 2):
            sys.exit("%s failed: %s" % (" ".join(argv), p.stderr.decode()[-500:]))
        size = len(p.stdout)
    return statistics.median(out), min(out), statistics.median(cpu), size


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--streams", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=10)
    ap.add_argument("--entries", type=int, default=10)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="cProfile one overview snapshot (cumulative, top 15)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-metrics-")
    try:
        db = os.path.join(tmp, "db")
        t = time.perf_counter()
        build(db, a.streams, a.groups, a.entries)
        print("store: %d streams x %d groups, %d entries each (built in %.1f s)"
              % (a.streams, a.groups, a.entries, time.perf_counter() - t))
        base = XS + ["--db", db]
        rows = [("xs metrics", base + ["metrics"]),
                ("xs metrics --exclude-consumer-metrics", base + ["metrics", "--exclude-consumer-metrics"]),
                ("xs check --lag-warn 1000000", base + ["check", "--lag-warn", "1000000"])]
        print("%-42s %10s %10s %10s %12s" % ("command (a new process each run)", "median s", "best s", "CPU s",
                                               "output B"))
        for label, argv in rows:
            med, best, cpu, size = timed(argv, a.runs)
            print("%-42s %10.3f %10.3f %10.3f %12d" % (label, med, best, cpu, size))
        from storage.ops.overview import snapshot
        from storage.store import Store
        store = Store(db, readonly=True, create=False)
        try:
            times, cpu = [], []
            for _ in range(a.runs):
                t, c = time.perf_counter(), time.process_time()
                snap = snapshot(store)
                times.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
        finally:
            store.close()
        print("%-42s %10.3f %10.3f %10.3f %12s" % ("overview snapshot, in process", statistics.median(times),
                                                 min(times), statistics.median(cpu),
                                                 "%d groups" % sum(len(s.groups) for s in snap.streams)))
        if a.profile:
            import cProfile
            import pstats
            store = Store(db, readonly=True, create=False)
            try:
                prof = cProfile.Profile()
                prof.runcall(snapshot, store)
            finally:
                store.close()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(15)
        print("goal: xs metrics <= 1 s on 1,000 streams x 10 groups")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
