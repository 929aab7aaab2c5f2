"""Benchmark: a durable worker loop (XREADGROUP COUNT N, then XACK of what
it got), xs beside redis-server with ``appendfsync always``.

    python3 benchmarks/bench_worker_loop.py [--entries 20000] [--count 100]

Sides, each consuming the same entries through one consumer group:

  redis        redis-py against a private redis-server (appendfsync
               always): XREADGROUP, wait, XACK, wait -- two round trips
               and two fsyncs per batch
  xs ack/read  one ``xs --json`` script-mode process on a pipe, the same
               two requests one after the other: two commits per batch
  xs pipelined the XACK of a batch and the XREADGROUP of the next one
               written together: script mode runs the lines that arrive
               together in one transaction, so one commit per batch, and
               a crash before it redelivers the batch (at least once)

and ``xs worker`` (a process per batch of --count entries, so its rate is
bounded by process start-up, not by the store): by default an ack rides
in the commit that reads the next entries; ``--ack-alone`` commits it on
its own.  Ratios are printed beside each figure.
"""
import argparse
import json
import os
import shutil
import socket
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


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def fill_lines(n):
    return "".join("XADD s * user u%d action click n %d\n" % (i, i) for i in range(n)) + "XGROUP CREATE s g 0\n"


class Script:
    """An ``xs --json`` script-mode process: send lines, read JSON replies."""

    def __init__(self, xs, db, env):
        # buffered both ways (an unbuffered pipe makes readline() read
        # one byte per system call: the client, not xs, was then the
        # slower side); send() flushes
        self.p = subprocess.Popen(xs + ["--json", "--db", db], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  env=env)
        self.out = self.p.stdout

    def send(self, text):
        self.p.stdin.write(text.encode())
        self.p.stdin.flush()

    def reply(self):
        return json.loads(self.out.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def ids_of(reply):
    if not reply:
        return []
    (entries,) = reply.values()
    return [e[0] for e in entries]


def xs_loop(xs, db, env, count, pipelined):
    s = Script(xs, db, env)
    read = "XREADGROUP GROUP g c COUNT %d STREAMS s >\n" % count
    done = 0
    t = time.perf_counter()
    s.send(read)
    ids = ids_of(s.reply())
    while ids:
        ack = "XACK s g %s\n" % " ".join(ids)
        done += len(ids)
        if pipelined:
            s.send(ack + read)
            assert s.reply() == len(ids)
        else:
            s.send(ack)
            assert s.reply() == len(ids)
            s.send(read)
        ids = ids_of(s.reply())
    el = time.perf_counter() - t
    s.close()
    return done, el


def redis_loop(port, count):
    import redis
    r = redis.Redis(port=port)
    done = 0
    t = time.perf_counter()
    while True:
        got = r.xreadgroup("g", "c", {"s": ">"}, count=count)
        if not got:
            break
        ids = [i for i, _ in got[0][1]]
        assert r.xack("s", "g", *ids) == len(ids)
        done += len(ids)
    return done, time.perf_counter() - t


def worker_run(xs, db, env, count, extra):
    t = time.perf_counter()
    p = subprocess.run(xs + ["--db", db, "worker", "s", "-g", "g", "-c", "w", "--once", "--batch", str(count)]
                       + extra + ["--", "true"], capture_output=True, env=env)
    if p.returncode:
        raise SystemExit("xs worker failed: %s" % p.stderr.decode(errors="replace"))
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--count", type=int, default=100)
    a = ap.parse_args()
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is needed")
    work = tempfile.mkdtemp(prefix="xs-bench-wl-")
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    xs = xs_command()
    lines = fill_lines(a.entries)
    rows = []
    try:
        for name, pipelined in (("xs ack/read", False), ("xs pipelined", True)):
            db = os.path.join(work, name.replace(" ", "_").replace("/", "_"))
            subprocess.run(xs + ["--db", db], input=lines.encode(), stdout=subprocess.DEVNULL, env=env, check=True)
            n, el = xs_loop(xs, db, env, a.count, pipelined)
            rows.append((name, n, el))
        port = free_port()
        srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "yes", "--appendfsync", "always", "--dir", work],
                               stdout=subprocess.DEVNULL)
        try:
            import redis
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            pipe = r.pipeline(transaction=False)
            for i in range(a.entries):
                pipe.xadd("s", {"user": "u%d" % i, "action": "click", "n": i})
            pipe.xgroup_create("s", "g", "0")
            pipe.execute()
            n, el = redis_loop(port, a.count)
            rows.insert(0, ("redis", n, el))
        finally:
            srv.terminate()
            srv.wait()
        ref = rows[0][2] / rows[0][1]
        print("worker loop: XREADGROUP COUNT %d + XACK over %d entries, durable" % (a.count, a.entries))
        print("  %-14s %8s %10s %12s" % ("side", "entries", "seconds", "xs/redis"))
        for name, n, el in rows:
            print("  %-14s %8d %10.3f %12.2f" % (name, n, el, (el / n) / ref))
        w = {}
        for name, extra in (("worker", []), ("worker --ack-alone", ["--ack-alone"])):
            db = os.path.join(work, name.replace(" ", "_"))
            subprocess.run(xs + ["--db", db], input=lines.encode(), stdout=subprocess.DEVNULL, env=env, check=True)
            w[name] = worker_run(xs, db, env, a.count, extra)
        print("xs worker --batch %d -- true (a process per batch)" % a.count)
        for name, el in w.items():
            print("  %-20s %10.3f s  %8.0f entries/s" % (name, el, a.entries / el))
        print("  ack riding / ack alone: %.2f" % (w["worker"] / w["worker --ack-alone"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
