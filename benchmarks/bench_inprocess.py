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
        for k in range(a.rounds):
            for name, r in sides.items():
                got = loads(r, a.n, a.pipeline, str(k))
                for load, secs in got.items():
                    rows.setdefault(name, {}).setdefault(load, []).append(secs)
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


if __name__ == "__main__":
    main()
