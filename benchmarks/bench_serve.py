"""Benchmark: ``xs serve`` against redis-server with ``appendfsync always``,
driven by ``redis-benchmark`` (redis-tools).

    python3 benchmarks/bench_serve.py [-n 100000] [-c 50] [-P 1,16] [--cases xadd,xreadgroup,ackloop]
                                 [--consumers 8] [--count 10] [--servers redis,xs,xs-pure] [--repeat 1]

The servers start fresh on free loopback ports, side by side, each
durable before it replies: redis-server with ``--appendonly yes
--appendfsync always``, xs serve as it runs by default (LMDB commit with
fsync) -- ``xs`` with the ``serve`` extra (hiredis reads requests, uvloop
runs the event loop) where it is installed, ``xs-pure`` with
XS_SERVE_PURE=1 (the pure-Python reader and asyncio's loop).  Each
measurement runs on every server in turn, so that they share whatever
else the machine is doing; ``--repeat N`` repeats each and reports the
median.  Cases:

  xadd        ``XADD s * f v``
  xreadgroup  ``XREADGROUP GROUP g c COUNT 1 STREAMS s >`` on a stream
              filled beforehand with n entries: each call delivers one
              entry (a write: the PEL and the group's last ID)

each without pipelining and with ``-P`` (one row per pipeline depth),
and

  ackloop     the worker loop redis-benchmark cannot drive (it cannot ack
              IDs it did not choose): the stream filled with n entries,
              --consumers processes (redis-py) each looping
              ``XREADGROUP GROUP g c<k> COUNT <--count, 10> STREAMS s >`` then
              ``XACK s g`` of the IDs it got, until the stream is drained.
              Its figures are entries per second and the p50/p99 of one
              iteration (read + ack).  At the end the group's PEL must be
              empty and every entry delivered exactly once, on every
              server (else the benchmark fails).

``--pin`` (the default where the machine has two CPUs or more and
``taskset`` is there): every server runs on the first CPU this process
may use, redis-benchmark and the ackloop consumers on the others.
Left to the scheduler, a server that shares a CPU with redis-benchmark
(on some runs and not others) halves its figure: on a 2-CPU machine
each server's rate then jumps between two levels from run to run.
``--no-pin``: no placement.

Prints, per case and server, requests per second, the ratio to
redis-server, the p50/p99 latency (ms) and the server's CPU per request
(per entry for ackloop), user + system in us, from the server process's
/proc/PID/stat before and after the run (Linux; "-" elsewhere): the
kernel's share (socket reads and writes, the commit's syncs) against
the server's own.  The issue's goal: xs at least 0.5x redis-server.
"""
import argparse
import csv
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XS = [sys.executable, "-m", "xstream_cli"]


# taskset prefixes for servers and clients (``place``): [] without --pin
SERVER_CPUS: list = []
CLIENT_CPUS: list = []


def place(pin):
    """Put the servers on one CPU and the clients on the others (``pin``:
    True, False or None for "where it can"); returns a line saying so."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if pin is False or len(cpus) < 2 or not shutil.which("taskset"):
        if pin:
            sys.exit("--pin needs taskset and two CPUs or more")
        SERVER_CPUS[:], CLIENT_CPUS[:] = [], []
        return "CPUs: not pinned"
    rest = ",".join(map(str, cpus[1:]))
    SERVER_CPUS[:] = ["taskset", "-c", str(cpus[0])]
    CLIENT_CPUS[:] = ["taskset", "-c", rest]
    return "CPUs: servers on %d, clients on %s" % (cpus[0], rest)


def client_cpus():
    """The clients' CPUs as a set (for os.sched_setaffinity), or None."""
    return {int(c) for c in CLIENT_CPUS[2].split(",")} if CLIENT_CPUS else None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_ready(port, proc, what):
    for _ in range(400):
        if proc.poll() is not None:
            sys.exit("%s exited: %s" % (what, proc.stderr.read().decode() if proc.stderr else ""))
        try:
            out = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True, timeout=5)
            if out.stdout.strip() == "PONG":
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
    sys.exit("%s did not start" % what)


def cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port)] + list(args), capture_output=True, text=True).stdout


def fill(port, n):
    """n entries in stream s and a group g at its start (redis-cli --pipe)."""
    cli(port, "DEL", "s")
    data = "".join("XADD s * f %d\r\n" % i for i in range(n)).encode()
    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=data, capture_output=True)
    cli(port, "XGROUP", "CREATE", "s", "g", "0")


def bench(port, n, c, pipeline, command):
    """redis-benchmark's CSV row: (rps, p50 ms, p99 ms)."""
    p = subprocess.run(CLIENT_CPUS + ["redis-benchmark", "-p", str(port), "-n", str(n), "-c", str(c),
                                      "-P", str(pipeline), "--csv"] + command, capture_output=True, text=True)
    rows = [r for r in csv.reader(io.StringIO(p.stdout)) if r and r[0] != "test"]
    if p.returncode != 0 or not rows:
        sys.exit("redis-benchmark failed: %s %s" % (p.stdout[-500:], p.stderr[-500:]))
    r = rows[-1]
    return float(r[1]), float(r[4]), float(r[6])


CASES = {
    "xadd": (["XADD", "s", "*", "f", "v"], False),
    "xreadgroup": (["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"], True),
    "ackloop": (None, True),
}


def _consumer(port, k, count, go, out):
    """One consumer process of the ackloop case: read COUNT entries through
    the group, ack them, until a read finds nothing new.  Puts (k, ids
    delivered, iteration latencies in s, time it finished) on ``out``."""
    import redis
    if client_cpus():
        os.sched_setaffinity(0, client_cpus())
    try:
        r = redis.Redis(port=port)
        r.ping()
        name = "c%d" % k
        ids, lat = [], []
        go.wait()
        while True:
            t = time.perf_counter()
            got = r.xreadgroup("g", name, {"s": ">"}, count=count)
            batch = [i for _, entries in got for i, _ in entries] if got else []
            if not batch:
                break
            r.xack("s", "g", *batch)
            lat.append(time.perf_counter() - t)
            ids += batch
        out.put((k, ids, lat, time.monotonic()))
    except Exception as e:          # reported by the parent, one line
        out.put((k, None, "%s: %s" % (type(e).__name__, e), time.monotonic()))


def ackloop(port, consumers, count):
    """(entries/s, p50 ms, p99 ms) of ``consumers`` processes draining the
    filled stream s through group g; checks exactly-once delivery and an
    empty PEL afterwards."""
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_consumer, args=(port, k, count, go, out)) for k in range(consumers)]
    for p in procs:
        p.start()
    time.sleep(0.5)                 # connected and waiting on go
    t0 = time.monotonic()
    go.set()
    results = [out.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    delivered, lat, end = [], [], t0
    for k, ids, l, t in results:
        if ids is None:
            sys.exit("ackloop consumer c%d failed: %s" % (k, l))
        delivered += ids
        lat += l
        end = max(end, t)
    # the checks: every entry delivered exactly once, nothing left pending
    import redis
    r = redis.Redis(port=port)
    all_ids = [i for i, _ in r.xrange("s")]
    pending = r.xpending("s", "g")["pending"]
    if len(delivered) != len(set(delivered)):
        sys.exit("ackloop on port %d: %d entries delivered more than once"
                 % (port, len(delivered) - len(set(delivered))))
    if sorted(delivered) != sorted(all_ids):
        sys.exit("ackloop on port %d: %d entries in the stream, %d delivered, %d never delivered"
                 % (port, len(all_ids), len(delivered), len(set(all_ids) - set(delivered))))
    if pending != 0:
        sys.exit("ackloop on port %d: %d entries still pending after the acks" % (port, pending))
    lat.sort()
    pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000 if lat else 0.0   # noqa: E731
    return len(delivered) / max(end - t0, 1e-9), pick(0.50), pick(0.99)


def has_extra():
    """Whether the serve extra (hiredis, uvloop) is installed here."""
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in ("hiredis", "uvloop"))


def redis_argv(port, tmp):
    """redis-server, durable before it replies (appendfsync always), on its CPU."""
    return SERVER_CPUS + ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                          "--appendonly", "yes", "--appendfsync", "always", "--dir", tmp]


def start_servers(names, tmp, procs):
    """Start redis, xs, xs-pure into ``procs``, {name: (port, Popen)}."""
    for name in names:
        port = free_port()
        if name == "redis":
            p = subprocess.Popen(redis_argv(port, tmp), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        else:
            env = dict(os.environ)
            env.pop("XS_SERVE_PURE", None)
            if name == "xs-pure":
                env["XS_SERVE_PURE"] = "1"
            p = subprocess.Popen(SERVER_CPUS + XS + ["--db", os.path.join(tmp, name), "serve", "--port", str(port),
                                       "--loglevel", "info", "--allow-no-password"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, cwd=ROOT, env=env)
        procs[name] = (port, p)
    for name, (port, p) in procs.items():
        wait_ready(port, p, name)


def stop_servers(procs, tmp):
    """Stop the servers ``procs`` ({name: (port, Popen)}) and remove ``tmp``."""
    for port, p in procs.values():
        p.send_signal(signal.SIGTERM)
    for port, p in procs.values():
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def server_cpu(proc):
    """(user s, system s) that process ``proc`` (a Popen) has used so far,
    its threads included (Linux's /proc), or None."""
    try:
        with open("/proc/%d/stat" % proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_text(before, after, n):
    """The CPU used between two ``server_cpu`` readings, per request of
    ``n``: "user+system" in us, or "-"."""
    if before is None or after is None or not n:
        return "-"
    return "%.1f+%.1f" % ((after[0] - before[0]) / n * 1e6, (after[1] - before[1]) / n * 1e6)


def median(rows):
    """The median run (by throughput) of repeated measurements."""
    rows = sorted(rows)
    return rows[len(rows) // 2]


def add_pin_option(ap):
    ap.add_argument("--pin", action=argparse.BooleanOptionalAction, default=None,
                    help="servers on one CPU, clients on the others (default: where the machine allows)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100000, help="requests per run")
    ap.add_argument("-c", type=int, default=50, help="clients")
    ap.add_argument("-P", default="1,16", help="pipeline depths, comma separated")
    ap.add_argument("--cases", default="xadd,xreadgroup,ackloop")
    ap.add_argument("--consumers", type=int, default=8, help="consumer processes of the ackloop case")
    ap.add_argument("--count", type=int, default=10, help="XREADGROUP COUNT of the ackloop case")
    ap.add_argument("--servers", default=None,
                    help="comma separated, of redis, xs (the serve extra), xs-pure (XS_SERVE_PURE=1); "
                         "default: all three, or redis,xs-pure without the serve extra")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement (the median is shown)")
    add_pin_option(ap)
    a = ap.parse_args()
    cases = a.cases.split(",")
    for name in cases:
        if name not in CASES:
            sys.exit("unknown case %r (cases: %s)" % (name, ", ".join(CASES)))
    extra = has_extra()
    servers = (a.servers or ("redis,xs,xs-pure" if extra else "redis,xs-pure")).split(",")
    for name in servers:
        if name not in ("redis", "xs", "xs-pure"):
            sys.exit("unknown server %r (servers: redis, xs, xs-pure)" % name)
    if "xs" in servers and not extra:
        sys.exit("the xs server with the serve extra needs hiredis and uvloop (pip install 'xstreamlog[serve]')")
    if "ackloop" in cases:
        try:
            import redis  # noqa: F401
        except ImportError:
            sys.exit("the ackloop case needs redis-py (pip install redis)")
    for tool in ("redis-server", "redis-cli", "redis-benchmark"):
        if not shutil.which(tool):
            sys.exit("%s is not installed (apt-get install redis-server redis-tools)" % tool)
    placed = place(a.pin)
    tmp = tempfile.mkdtemp(prefix="xs-bench-serve-")
    procs = {}
    try:
        start_servers(servers, tmp, procs)
        version = ""
        if "redis" in procs:
            version = " " + cli(procs["redis"][0], "INFO", "server").split("redis_version:")[1].split()[0]
        print("redis-benchmark -n %d -c %d; redis-server%s with appendfsync always vs xs serve (fsync on commit)%s"
              % (a.n, a.c, version, "" if a.repeat == 1 else "; median of %d runs" % a.repeat))
        print(placed)
        print("%-12s %3s  %-8s %10s %6s  %8s %8s  %s" % ("case", "-P", "server", "r/s", "/redis", "p50", "p99",
                                                         "cpu us/req"))
        for name in cases:
            command, needs_fill = CASES[name]
            for depth in ([None] if command is None else [int(x) for x in a.P.split(",")]):
                runs = {s: [] for s in servers}
                for _ in range(a.repeat):
                    for srv in servers:
                        port = procs[srv][0]
                        if needs_fill:
                            fill(port, a.n)
                        else:
                            cli(port, "DEL", "s")
                        before = server_cpu(procs[srv][1])
                        if command is None:        # ackloop: redis-py consumers, entries/s
                            got = ackloop(port, a.consumers, a.count)
                        else:
                            got = bench(port, a.n, a.c, depth, command)
                        runs[srv].append(got + (cpu_text(before, server_cpu(procs[srv][1]), a.n),))
                base = median(runs["redis"])[0] if "redis" in runs else None
                for srv in servers:
                    rps, p50, p99, cpu = median(runs[srv])
                    print("%-12s %3s  %-8s %10.0f %6s  %8.2f %8.2f  %s"
                          % (name, "-" if depth is None else depth, srv, rps,
                             "%.2fx" % (rps / base) if base else "-", p50, p99, cpu), flush=True)
        print("(latencies in ms; /redis is the throughput ratio to redis-server; cpu: the server process's "
              "user+system CPU per request, us; xs: with the serve extra, xs-pure: XS_SERVE_PURE=1)")
        if "ackloop" in cases:
            print("(ackloop: %d consumers, COUNT %d; entries/s, latency of one XREADGROUP + XACK iteration; "
                  "exactly-once delivery and an empty PEL checked on every server)" % (a.consumers, a.count))
    finally:
        stop_servers(procs, tmp)


if __name__ == "__main__":
    main()
