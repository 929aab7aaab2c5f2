"""Benchmark: redis-py in process (xstream_cli.client) beside redis-py
against xs serve and against redis-server with appendfsync always.

    python3 benchmarks/bench_inprocess.py [-n N] [--pipeline P] [--rounds R]

Three sides, each durable on every write, each on a fresh store / server:
  in-process   xstream_cli.client.Redis(store): no socket to a server,
               the server's code in this process
  xs serve     redis-py over the store's private Unix socket
  redis        redis-py over TCP to redis-server --appendfsync always

Four loads: N sequential XADDs; N XREADGROUP COUNT 1 + XACK pairs; the
same two in pipelines of P (transaction=False).  The sides take turns,
R rounds of every load each (other work on the machine then weighs on
all three alike); prints each side's median seconds and the ratio to
redis (below 1: faster than redis).

Then the disk's floor under a sequential write, measured on the same
file system in the same rounds: what redis-server's AOF pays per write
(an append and one fdatasync) and what an LMDB commit pays (its data
pages flushed, then its meta page written with O_DSYNC: two ordered
flushes, the order being what makes a crash leave the old or the new
tree and never a torn one).  Their ratio bounds the sequential loads'.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_ping(r):
    import redis
    for _ in range(200):
        try:
            return r.ping()
        except (redis.ConnectionError, FileNotFoundError):
            time.sleep(0.05)
    raise SystemExit("the server did not start")


def loads(r, n, p, tag=""):
    """{load: seconds} on client ``r`` (its keys end with ``tag``)."""
    s, t_ = "s" + tag, "t" + tag
    out = {}
    t = time.perf_counter()
    for i in range(n):
        r.xadd(s, {"n": i})
    out["xadd"] = time.perf_counter() - t
    r.xgroup_create(s, "g", id="0")
    t = time.perf_counter()
    for _ in range(n):
        got = r.xreadgroup("g", "c", {s: ">"}, count=1)
        r.xack(s, "g", got[0][1][0][0])
    out["xreadgroup+xack"] = time.perf_counter() - t
    t = time.perf_counter()
    for k in range(0, n, p):
        pipe = r.pipeline(transaction=False)
        for i in range(k, min(n, k + p)):
            pipe.xadd(t_, {"n": i})
        pipe.execute()
    out["xadd, pipelines of %d" % p] = time.perf_counter() - t
    r.xgroup_create(t_, "g", id="0")
    t = time.perf_counter()
    for k in range(0, n, p):
        pipe = r.pipeline(transaction=False)
        for _ in range(min(p, n - k)):
            pipe.xreadgroup("g", "c", {t_: ">"}, count=1)
        ids = [got[0][1][0][0] for got in pipe.execute()]
        pipe = r.pipeline(transaction=False)
        for i in ids:
            pipe.xack(t_, "g", i)
        pipe.execute()
    out["read+ack, pipelines of %d" % p] = time.perf_counter() - t
    return out


def disk_floor(work, n):
    """(seconds per append + fdatasync, seconds per durable LMDB commit of
    one small put), each the mean of ``n``."""
    import lmdb
    path = os.path.join(work, "floor.aof")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        t = time.perf_counter()
        for i in range(n):
            os.write(fd, b"*3\r\n$4\r\nXADD\r\n$1\r\ns\r\n$8\r\n%08d\r\n" % i)
            os.fdatasync(fd)
        aof = (time.perf_counter() - t) / n
    finally:
        os.close(fd)
    env = lmdb.open(os.path.join(work, "floor.lmdb"), map_size=1 << 28, subdir=True)
    try:
        t = time.perf_counter()
        for i in range(n):
            with env.begin(write=True) as tx:
                tx.put(b"%016d" % i, b"n %d" % i)
        commit = (time.perf_counter() - t) / n
    finally:
        env.close()
    return aof, commit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=10000, help="commands per load (default 10000)")
    ap.add_argument("--pipeline", type=int, default=100, help="pipeline length (default 100)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, the sides taking turns (default 3)")
    a = ap.parse_args()
    import statistics

    import redis

    from xstream_cli.client import Redis
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is needed")
    work = tempfile.mkdtemp(prefix="xs-bench-inproc-")
    rows = {}
    procs = []
    try:
        sides = {"in-process": Redis(os.path.join(work, "inproc"))}
        db = os.path.join(work, "served")
        procs.append(subprocess.Popen([sys.executable, "-m", "xstream_cli", "--db", db, "serve"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      cwd=os.path.dirname(HERE)))
        sides["xs serve"] = redis.Redis(unix_socket_path=os.path.join(db, "serve.sock"))
        port = free_port()
        procs.append(subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "yes", "--appendfsync", "always", "--dir", work],
                                      stdout=subprocess.DEVNULL))
        sides["redis"] = redis.Redis(port=port)
        for r in sides.values():
            wait_ping(r)
        floors = []
        for k in range(a.rounds):
            for name, r in sides.items():
                got = loads(r, a.n, a.pipeline, str(k))
                for load, secs in got.items():
                    rows.setdefault(name, {}).setdefault(load, []).append(secs)
            floor_dir = os.path.join(work, "floor%d" % k)
            os.mkdir(floor_dir)
            floors.append(disk_floor(floor_dir, min(a.n, 2000)))
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        shutil.rmtree(work, ignore_errors=True)
    med = {name: {load: statistics.median(v) for load, v in per.items()} for name, per in rows.items()}
    print("redis-py, %d commands a load, median of %d rounds, durable on every write (redis: appendfsync always)"
          % (a.n, a.rounds))
    print("  %-28s %12s %12s %12s %10s %10s" % ("load", "in-process", "xs serve", "redis", "inproc/red", "serve/red"))
    for load in med["redis"]:
        i, s, r = med["in-process"][load], med["xs serve"][load], med["redis"][load]
        print("  %-28s %11.3fs %11.3fs %11.3fs %10.2f %10.2f" % (load, i, s, r, i / r, s / r))
    aof = statistics.median(f[0] for f in floors)
    commit = statistics.median(f[1] for f in floors)
    print("disk floor per durable write, median of %d rounds:" % a.rounds)
    print("  redis AOF (append + fdatasync)       %8.0f us" % (aof * 1e6))
    print("  LMDB commit (data flush, meta flush) %8.0f us   %.2fx the AOF's" % (commit * 1e6, commit / aof))
    i, r = med["in-process"]["xadd"] / a.n, med["redis"]["xadd"] / a.n
    print("  sequential xadd: in-process %.0f us = commit floor + %.0f us;  redis %.0f us = AOF floor + %.0f us"
          % (i * 1e6, (i - commit) * 1e6, r * 1e6, (r - aof) * 1e6))


if __name__ == "__main__":
    main()
