"""Benchmark: the server's own cost per request -- ``redis-benchmark -t
ping`` against ``xs serve``, a bare uvloop + hiredis responder and
redis-server, side by side.

    python3 benchmarks/bench_ping.py [-n 100000] [-c 50] [-P 1,16] [--repeat 3]
                                     [--servers xs,bare,redis] [--base DIR]

PING touches no store: what xs serve spends on it is reading, routing,
counting and answering a request, the floor under every other command.
The bare responder (``responder`` below, started as a subprocess of
this file) is the least a Python server on the same event loop and
request reader can do: read the requests with hiredis, answer +PONG.
redis-server shows what the machine itself allows.

Servers and redis-benchmark are pinned to CPUs of their own (``--pin``,
bench_serve.py's, the default where the machine allows).

The measurements are interleaved (xs, bare, redis, xs, bare, redis ...)
so that a noisy machine weighs on all of them alike; ``--repeat N``
runs each N times and the median is shown with the range.  ``--base
DIR`` adds ``xs-base``: xs serve run from another tree (a ``git worktree
add DIR REV``), to compare a change with what it changes.

The requests are multibulk PINGs (redis-benchmark's PING_MBULK, what
clients send).  Prints requests/s per server and pipeline depth, the ratio of each
xs server to the bare responder (issue 42's goal: at least 0.8x), and
each server's user+system CPU per request (bench_serve.py's ``cpu
us/req``: the kernel's part, which the three share, apart from the
server's own).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from bench_serve import (  # SERVER_CPUS: filled in place by place()
    ROOT,
    SERVER_CPUS,
    add_pin_option,
    bench,
    cpu_text,
    free_port,
    has_extra,
    median,
    place,
    redis_argv,
    server_cpu,
    stop_servers,
    wait_ready,
)


def responder(port):
    """The bare responder: +PONG to PING, what redis-benchmark asks first
    (CONFIG GET name) answered with an empty value, one write per read."""
    import asyncio

    import hiredis
    import uvloop

    class Pong(asyncio.Protocol):
        def connection_made(self, transport):
            self.t, self.r = transport, hiredis.Reader()

        def data_received(self, data):
            self.r.feed(data)
            out = []
            while (req := self.r.gets()) is not False:
                if req[0].upper() == b"CONFIG":
                    out.append(b"*2\r\n$%d\r\n%s\r\n$0\r\n\r\n" % (len(req[-1]), req[-1]))
                else:
                    out.append(b"+PONG\r\n")
            self.t.write(b"".join(out))

    async def serve():
        srv = await asyncio.get_running_loop().create_server(Pong, "127.0.0.1", port)
        await srv.serve_forever()
    uvloop.run(serve())


def start(name, port, tmp, base):
    """Start server ``name`` on ``port``; its Popen."""
    if name == "redis":
        return subprocess.Popen(redis_argv(port, tmp), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if name == "bare":
        return subprocess.Popen(SERVER_CPUS + [sys.executable, os.path.abspath(__file__), "--responder",
                                                           str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    tree = base if name == "xs-base" else ROOT
    env = dict(os.environ, PYTHONPATH=tree)
    env.pop("XS_SERVE_PURE", None)
    return subprocess.Popen(SERVER_CPUS + [sys.executable, "-m", "xstream_cli", "--db",
                                                       os.path.join(tmp, name), "serve",
                             "--port", str(port), "--loglevel", "warning", "--allow-no-password"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tree, env=env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100000, help="requests per run")
    ap.add_argument("-c", type=int, default=50, help="clients")
    ap.add_argument("-P", default="1,16", help="pipeline depths, comma separated")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each measurement, interleaved (median shown)")
    ap.add_argument("--servers", default="xs,bare,redis", help="comma separated, of xs, bare, redis")
    ap.add_argument("--base", default=None, help="also run xs serve from this tree (xs-base)")
    ap.add_argument("--responder", type=int, default=None, help=argparse.SUPPRESS)   # the bare responder's port
    add_pin_option(ap)
    a = ap.parse_args()
    if a.responder is not None:
        responder(a.responder)
        return
    servers = a.servers.split(",")
    for name in servers:
        if name not in ("xs", "bare", "redis"):
            sys.exit("unknown server %r (servers: xs, bare, redis)" % name)
    if a.base:
        servers.insert(1, "xs-base")
    if not has_extra():
        sys.exit("the bare responder and xs serve's fast path need hiredis and uvloop (the serve extra)")
    for tool in ("redis-server", "redis-cli", "redis-benchmark"):
        if not shutil.which(tool):
            sys.exit("%s is not installed (apt-get install redis-server redis-tools)" % tool)
    placed = place(a.pin)
    tmp = tempfile.mkdtemp(prefix="xs-bench-ping-")
    procs = {}
    try:
        for name in servers:
            port = free_port()
            procs[name] = (port, start(name, port, tmp, a.base))
        for name, (port, p) in procs.items():
            wait_ready(port, p, name)
        print("redis-benchmark -t ping -n %d -c %d; median of %d interleaved runs (min-max); %s"
              % (a.n, a.c, a.repeat, placed))
        print("%3s  %-8s %10s %19s %7s  %s" % ("-P", "server", "r/s", "range", "/bare", "cpu us/req"))
        for depth in [int(x) for x in a.P.split(",")]:
            runs = {s: [] for s in servers}
            for _ in range(a.repeat):
                for srv in servers:
                    before = server_cpu(procs[srv][1])
                    got = bench(procs[srv][0], a.n, a.c, depth, ["-t", "ping_mbulk"])
                    runs[srv].append(got + (cpu_text(before, server_cpu(procs[srv][1]), a.n),))
            bare = median(runs["bare"])[0] if "bare" in runs else None
            for srv in servers:
                med = median(runs[srv])
                rps = med[0]
                lo, hi = min(r[0] for r in runs[srv]), max(r[0] for r in runs[srv])
                print("%3d  %-8s %10.0f %9.0f-%-9.0f %7s  %s" % (depth, srv, rps, lo, hi,
                                                                 "%.2fx" % (rps / bare) if bare else "-", med[-1]),
                      flush=True)
        print("(/bare: the throughput ratio to the bare uvloop + hiredis responder; goal for xs: 0.8x or more; "
              "cpu: the server process's user+system CPU per request, us, of the median run)")
    finally:
        stop_servers(procs, tmp)


if __name__ == "__main__":
    main()
