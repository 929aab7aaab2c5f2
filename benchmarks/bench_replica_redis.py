"""The lag of ``xs replicate --to redis://`` under a steady write rate
(issue 41): a producer commits ``--rate`` entries/s (``--per-commit`` per
commit) to a store; ``xs replicate`` feeds a redis-server (appendfsync
always, the durable peer); a watcher polls the replica's position key
every 2 ms.  A commit's lag is the time from its commit to the moment the
replica's position covers it.  Prints p50 / p99 / max and the entries/s
the replica kept up with.

    python3 benchmarks/bench_replica_redis.py [--rate 5000] [--seconds 10]
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=5000, help="entries per second")
    ap.add_argument("--per-commit", type=int, default=50, help="entries per commit")
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args(argv)
    import redis

    from storage.options import AddOptions
    from storage.store import Store
    work = tempfile.mkdtemp(prefix="xs-bench-replica-")
    port = _port()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                            "--appendonly", "yes", "--appendfsync", "always", "--dir", work],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = os.path.join(work, "db")
    store = Store(db)
    store.run(lambda tx: tx.add(b"events", [b"n", b"0"], AddOptions()), write=True)
    rep = subprocess.Popen([sys.executable, "-m", "xstream_cli", "--db", db, "replicate", "--to",
                            "redis://127.0.0.1:%d" % port, "-q"], cwd=ROOT)
    r = redis.Redis(port=port)
    commits = {}                # seq -> commit time
    lags = []
    done = threading.Event()

    def watch():
        seen = 0
        while not done.is_set() or seen < max(commits, default=0):
            got = r.xrevrange("__xs_replica__", count=1)
            if got:
                seq = int(got[0][1][b"seq"])
                now = time.time()
                for s in range(seen + 1, seq + 1):
                    if s in commits:
                        lags.append(now - commits[s])
                seen = max(seen, seq)
            time.sleep(0.002)
    try:
        for _ in range(500):
            if r.exists("__xs_replica__"):
                break
            time.sleep(0.02)
        from storage import changelog
        t = threading.Thread(target=watch, daemon=True)
        t.start()
        interval = a.per_commit / float(a.rate)
        fields = [b"n", b"x" * 16]
        t0 = time.time()
        k = 0
        while time.time() - t0 < a.seconds:
            store.run(lambda tx: [tx.add(b"events", fields, AddOptions()) for _ in range(a.per_commit)], write=True)
            commits[changelog.state(store)["seq"]] = time.time()
            k += 1
            delay = t0 + k * interval - time.time()
            if delay > 0:
                time.sleep(delay)
        wall = time.time() - t0
        done.set()
        t.join(timeout=30)
    finally:
        rep.terminate()
        rep.wait()
        srv.terminate()
        srv.wait()
        store.close()
        shutil.rmtree(work, ignore_errors=True)
    lags.sort()
    if not lags:
        print("no commit reached the replica")
        return 1

    def q(f):
        return lags[min(len(lags) - 1, int(f * len(lags)))]
    print("xs replicate --to redis:// at %d entries/s (%d per commit), %.1f s: %d commits, %.0f entries/s offered"
          % (a.rate, a.per_commit, a.seconds, k, k * a.per_commit / wall))
    print("lag: p50 %.4f s  p99 %.4f s  max %.4f s  (%d commits measured)" % (q(0.5), q(0.99), lags[-1], len(lags)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
