"""What the change log costs (issue 41), and how far behind a replica is.

1. Bulk ingest through the engine (Txn.add_auto_many, the path of
   xs import and script-mode runs of XADD), durable, the log off vs on
   (a replica registered, none running: every record kept).
2. XADD through the engine as xs serve runs it: a group commit of
   --serve-batch commands, each in its own savepoint, off vs on.
   Off and on are measured side by side, a transaction each in turn
   (``interleaved``): on a shared machine, runs one after the other
   differ by more than the log costs.  Each gives the on/off ratio of
   rates (the median of --repeat runs, and their range) and of CPU time
   (the process's, the kernel's part included): the ratio of rates if
   waiting for the disk cost nothing, steadier where others share it.
3. The lag of xs replicate --to DIR under a steady --rate entries/s
   (commits of --batch entries): lag in seconds and commits, sampled.

    python benchmarks/bench_replicate.py [--entries N] [--rate R] [--seconds S]
                                         [--repeat K] [--only ingest|serve|lag]
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from storage import changelog  # noqa: E402
from storage.ops.replicate import status  # noqa: E402
from storage.options import AddOptions  # noqa: E402
from storage.store import Store  # noqa: E402


def _ingest_txn(s, k):
    item = b"user\nu123\naction\nclick\npage\n/home\nts\n1700000000"
    s.run(lambda tx: tx.add_auto_many([(b"s", item)] * k), write=True)


def _served_txn(s, k):
    opts = AddOptions()
    fields = [b"user", b"u123", b"action", b"click"]

    def job(tx):
        for _ in range(k):
            tx.add(b"s", fields, opts)
    s.run(job, write=True, savepoints=True)


def interleaved(txn, tmp, n, batch):
    """Rates (entries/s) with the log off and on, measured side by side:
    two stores, one logging (a replica registered, none running: every
    record kept), written in turns, one transaction of ``batch`` each, so
    that the machine's changing load falls on both alike; the time of
    each transaction is summed per store."""
    d = tempfile.mkdtemp(dir=tmp)
    stores = {on: Store(os.path.join(d, "on" if on else "off")) for on in (False, True)}
    changelog.enable(stores[True], "bench")
    spent = {False: 0.0, True: 0.0}
    cpu = {False: 0.0, True: 0.0}
    done = 0
    try:
        while done < n:
            k = min(batch, n - done)
            for on in ((False, True) if (done // batch) % 2 == 0 else (True, False)):
                c0 = time.process_time()
                t0 = time.perf_counter()
                txn(stores[on], k)
                spent[on] += time.perf_counter() - t0
                cpu[on] += time.process_time() - c0
            done += k
    finally:
        for s in stores.values():
            s.close()
        shutil.rmtree(d)
    return n / spent[False], n / spent[True], cpu[False] / cpu[True]


def best(txn, tmp, repeat, n, batch):
    """The best rate of ``repeat`` interleaved runs for each side, the
    runs' on/off ratios of rates, sorted, and of CPU time (off's CPU
    time over on's: the ratio of rates if the disk cost nothing)."""
    off = on = 0.0
    ratios, cpu = [], []
    for _ in range(repeat):
        a, b, c = interleaved(txn, tmp, n, batch)
        off, on = max(off, a), max(on, b)
        ratios.append(b / a)
        cpu.append(c)
    return off, on, sorted(ratios), sorted(cpu)


def _ratios(rs, cpu):
    """The median on/off ratios of the runs, and their ranges."""
    return ("on/off %.3f (median of %d side-by-side runs; range %.3f-%.3f); CPU time %.3f (%.3f-%.3f)"
            % (rs[len(rs) // 2], len(rs), rs[0], rs[-1], cpu[len(cpu) // 2], cpu[0], cpu[-1]))


def lag(tmp, rate, batch, seconds):
    db, rep = os.path.join(tmp, "lagdb"), os.path.join(tmp, "rep")
    Store(db).close()
    p = subprocess.Popen([sys.executable, "-m", "xstream_cli", "--db", db, "replicate", "--to", rep, "-q"],
                         cwd=ROOT)
    s = Store(db)
    try:
        end = time.monotonic() + 30
        while not (changelog.state(s) and changelog.replicas(s)):
            if time.monotonic() > end:
                raise SystemExit("the replicator did not start")
            time.sleep(0.05)
        time.sleep(0.5)
        stop = threading.Event()
        item = b"user\nu123\naction\nclick"
        sent = [0]

        def produce():
            t0 = time.monotonic()
            while not stop.is_set():
                due = t0 + sent[0] / rate
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                s.run(lambda tx: tx.add_auto_many([(b"s", item)] * batch), write=True)
                sent[0] += batch
        t = threading.Thread(target=produce, daemon=True)
        t.start()
        secs, commits = [], []
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            time.sleep(0.1)
            d = status(s, rep)["dir"]
            if d.get("lag_seconds") is not None:
                secs.append(d["lag_seconds"])
                commits.append(d["lag_commits"])
        stop.set()
        t.join()
        achieved = sent[0] / seconds
    finally:
        s.close()
        p.send_signal(signal.SIGTERM)
        p.wait()
    return achieved, secs, commits


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000, help="entries per ingest transaction")
    ap.add_argument("--serve-batch", type=int, default=50, help="XADDs per group commit")
    ap.add_argument("--serve-entries", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--lag-batch", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--only", choices=("ingest", "serve", "lag"), help="run one of the three measures")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-replicate-")
    try:
        if a.only in (None, "ingest"):
            off, on, rs, cpu = best(_ingest_txn, tmp, a.repeat, a.entries, a.batch)
            print("bulk ingest, %d entries, %d a transaction (durable):" % (a.entries, a.batch))
            print("  log off %10.0f entries/s" % off)
            print("  log on  %10.0f entries/s   %s" % (on, _ratios(rs, cpu)), flush=True)
        if a.only in (None, "serve"):
            off, on, rs, cpu = best(_served_txn, tmp, a.repeat, a.serve_entries, a.serve_batch)
            print("XADD as xs serve runs it, %d per group commit, a savepoint each (durable):" % a.serve_batch)
            print("  log off %10.0f XADD/s" % off)
            print("  log on  %10.0f XADD/s   %s" % (on, _ratios(rs, cpu)), flush=True)
        if a.only not in (None, "lag"):
            return
        achieved, secs, commits = lag(tmp, a.rate, a.lag_batch, a.seconds)
        print("replication lag of xs replicate --to DIR at %.0f entries/s (%d a commit), %d samples:"
              % (achieved, a.lag_batch, len(secs)))
        print("  seconds  p50 %.3f  p99 %.3f  max %.3f" % (pct(secs, 0.5), pct(secs, 0.99), max(secs or [0])))
        print("  commits  p50 %d  p99 %d  max %d" % (pct(commits, 0.5), pct(commits, 0.99), max(commits or [0])))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
