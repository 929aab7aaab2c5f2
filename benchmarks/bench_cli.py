"""Benchmark: xs against its competitors, side by side (SPEC section 5).

    python3 benchmarks/bench_cli.py [--lines N] [--runs N] [--oneshot N] [--only ingest|scan|oneshot]

Not collected by pytest (the name does not start with ``test_``).

  ingest    N lines ``XADD events * user uN action click n N`` from a file
            on stdin: ``xs --db DIR`` (script mode, durable, output to
            /dev/null) versus ``redis-cli --pipe`` into a private
            redis-server with ``--appendonly yes --appendfsync always``.
            A fresh store / server per run.            bar: ratio <= 1.0
  scan      ``XRANGE events - +`` of those entries to a pipe: xs versus
            ``redis-cli XRANGE`` (reply read and discarded by this
            process in both cases).                    bar: ratio <= 1.0
  one-shot  ``xs --db DIR XLEN events`` versus ``python -c "import lmdb,
            msgpack"`` with the same interpreter (the two libraries every
            command reading a record needs: the interpreter's floor for
            xs).                                       bar: ratio <= 1.3
            Also versus ``redis-cli XLEN events`` (the SPEC's bar:
            ratio <= 3.0), beside the bare interpreter (``python -S -c
            pass`` and ``python -c pass``, site included), which no
            Python program starts faster than, and xs started without
            ``site`` (``python -S``, sys.path given by a launcher): what
            a site-free launcher would save (xs does not ship one: see
            docs/performance.md).  All six interleaved, N runs each (the
            order reversed every other round); each line gives the median
            wall time, its quartiles and the best, and the median CPU time
            (user + system) of the process, which other load on the
            machine disturbs less.

``--only oneshot`` skips ingest and scan (the store and the server then
hold one entry: XLEN does not depend on the length).  Ratios are xs time
/ competitor time, from medians (best-of also shown).
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def xs_command():
    """The real console script (not a pyenv shim), else ``python -m``."""
    script = os.path.join(sysconfig.get_path("scripts"), "xs")
    if os.path.isfile(script) and os.access(script, os.X_OK):
        return [script], "console script %s" % script
    return [sys.executable, "-m", "xstream_cli"], "%s -m xstream_cli (no console script found)" % sys.executable


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RedisServer:
    """A private redis-server with AOF + appendfsync always, in its own dir."""

    def __init__(self, workdir):
        self.dir = tempfile.mkdtemp(prefix="redis-", dir=workdir)
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "",
             "--daemonize", "no", "--logfile", os.path.join(self.dir, "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                if self.cli("PING").strip() == b"PONG":
                    return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("redis-server did not start")

    def cli(self, *args, **kw):
        return subprocess.run(["redis-cli", "-p", str(self.port)] + list(args),
                              capture_output=True, check=True, **kw).stdout

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def timed(argv, stdin=None, stdout=subprocess.DEVNULL, env=None):
    """Wall time of one process run; stdout=PIPE means read and discard."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env)
    if stdout == subprocess.PIPE:
        while p.stdout.read(1 << 16):
            pass
    err = p.stderr.read()
    rc = p.wait()
    dt = time.perf_counter() - t0
    if rc != 0:
        raise RuntimeError("%s exited %d: %s" % (argv, rc, err.decode(errors="replace")[-500:]))
    return dt


def summary(times):
    return min(times), statistics.median(times)


def line(label, xs_t, other_name, other_t, bar, unit="s"):
    ratio = xs_t / other_t
    ok = "ok" if ratio <= bar else "OVER BAR"
    scale, fmt = (1000.0, "%.1f ms") if unit == "ms" else (1.0, "%.3f s")
    print("%-8s xs %s  %s %s  ratio %.3f (bar <= %.1f) %s"
          % (label, fmt % (xs_t * scale), other_name, fmt % (other_t * scale), ratio, bar, ok))
    return ratio


def spawned(argv, env=None):
    """(wall, CPU) seconds of one run of ``argv``, its output discarded
    (the CPU time, user + system, from wait4).  Raises on a failure."""
    exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0])
    t0 = time.perf_counter()
    pid = os.posix_spawn(exe, argv, os.environ if env is None else env,
                         file_actions=[(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)])
    _, status, ru = os.wait4(pid, 0)
    dt = time.perf_counter() - t0
    if status != 0:
        raise RuntimeError("%s exited with status %#x" % (argv, status))
    return dt, ru.ru_utime + ru.ru_stime


def interleaved(cases, n, env):
    """{name: ([wall], [cpu])} of ``n`` runs of each (name, argv) of
    ``cases``, one round each in turn, the order reversed every other
    round, after two warm-up rounds (page and bytecode caches)."""
    for _ in range(2):
        for _, argv in cases:
            spawned(argv, env)
    out = {name: ([], []) for name, _ in cases}
    for r in range(n):
        for name, argv in (cases if r % 2 == 0 else cases[::-1]):
            w, c = spawned(argv, env)
            out[name][0].append(w)
            out[name][1].append(c)
    return out


def spread(label, walls, cpus, base=None):
    """One line: median wall (quartiles, best), median CPU; and against
    ``base`` (its (walls, cpus)) the ratios of the medians and bests."""
    q1, med, q3 = statistics.quantiles(walls, n=4) if len(walls) > 1 else (walls[0],) * 3
    text = "  %-34s wall %6.1f ms (quartiles %5.1f-%5.1f, best %5.1f)  cpu %6.1f ms" % (
        label, med * 1e3, q1 * 1e3, q3 * 1e3, min(walls) * 1e3, statistics.median(cpus) * 1e3)
    if base is not None:
        bw, bc = base
        text += "  x%.2f (best x%.2f, cpu x%.2f)" % (
            med / statistics.median(bw), min(walls) / min(bw), statistics.median(cpus) / statistics.median(bc))
    print(text)


def oneshot(xs, db, srv, env, as_configured, n):
    """The one-shot section: six commands interleaved; returns the ratios
    (xs / the import floor, xs / redis-cli) of the median wall times."""
    py = sys.executable
    cases = [
        ("xs", xs + ["--db", db, "XLEN", "events"]),
        ("floor", [py, "-c", "import lmdb, msgpack"]),
        # the same command started without site: sys.path as site made it
        # for this process, handed over (a launcher's job)
        ("xs-S", [py, "-S", "-c", "import sys; sys.path[1:1] = %r; from xstream_cli.__main__ import entry; entry()"
                  % [p for p in sys.path[1:] if p], "--db", db, "XLEN", "events"]),
        ("redis-cli", ["redis-cli", "-p", str(srv.port), "XLEN", "events"]),
        ("bare", [py, "-S", "-c", "pass"]),
        ("site", [py, "-c", "pass"]),
    ]
    t = interleaved(cases, n, env)
    print("one-shot, %d interleaved runs each:" % n)
    spread("python -c 'import lmdb, msgpack'", *t["floor"])
    spread("xs XLEN events", *t["xs"], base=t["floor"])
    spread("xs XLEN events without site", *t["xs-S"], base=t["floor"])
    spread("redis-cli XLEN events", *t["redis-cli"])
    spread("xs XLEN events / redis-cli", *t["xs"], base=t["redis-cli"])
    spread("python -S -c pass", *t["bare"])
    spread("python -c pass", *t["site"])
    med = {name: statistics.median(w) for name, (w, _) in t.items()}
    r_one = line("one-shot", med["xs"], "import", med["floor"], 1.3, unit="ms")
    r_cli = line("one-shot", med["xs"], "redis-cli", med["redis-cli"], 3.0, unit="ms")
    if as_configured != env:
        t = interleaved(cases[:2], n, as_configured)
        print("one-shot without bytecode cache (as configured, PYTHONDONTWRITEBYTECODE=1):")
        line("one-shot", statistics.median(t["xs"][0]), "import", statistics.median(t["floor"][0]), 1.3, unit="ms")
    return r_one, r_cli


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--oneshot", type=int, default=30)
    ap.add_argument("--only", choices=("ingest", "scan", "oneshot"),
                    help="one section (scan needs the ingest's store and runs it too)")
    a = ap.parse_args()
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        sys.exit("redis-server / redis-cli not installed (apt-get install redis-server)")

    xs, how = xs_command()
    print("xs: %s" % how)
    print("python: %s" % sys.executable)
    print("load average: %.2f %.2f %.2f (the figures are only as quiet as the machine)" % os.getloadavg())
    env = dict(os.environ)
    env.pop("XS_NO_SYNC", None)          # measure the durable default
    env.pop("XS_DB", None)
    work = tempfile.mkdtemp(prefix="xs-bench-")
    as_configured = dict(env)
    if env.get("PYTHONDONTWRITEBYTECODE"):
        # Without bytecode caching every xs process compiles xs's own modules
        # from source (an installed package has them compiled; click, lmdb
        # and msgpack here do).  Measure with a private bytecode cache, as
        # installed, for xs and the import baseline alike; one-shot is also
        # shown as configured.
        env.pop("PYTHONDONTWRITEBYTECODE")
        env["PYTHONPYCACHEPREFIX"] = os.path.join(work, "pycache")
        print("note: PYTHONDONTWRITEBYTECODE is set; measuring with a private bytecode cache "
              "(PYTHONPYCACHEPREFIX), one-shot also as configured")
    servers = []
    r_ingest = r_scan = r_one = r_cli = None
    try:
        # fill the bytecode cache (a write, which makes the store: a read never does)
        timed(xs + ["--db", os.path.join(work, "warm"), "XTRIM", "x", "MAXLEN", "0"], env=env)
        if a.only == "oneshot":
            db = os.path.join(work, "db")
            timed(xs + ["--db", db, "XADD", "events", "*", "user", "u0"], env=env)
            srv = RedisServer(work)
            servers.append(srv)
            srv.cli("XADD", "events", "*", "user", "u0")
        else:
            srv, db, r_ingest = ingest(xs, work, env, a, servers)
            if a.only != "ingest":
                r_scan = scan(xs, db, srv, env, a.runs)
        if a.only in (None, "oneshot"):
            r_one, r_cli = oneshot(xs, db, srv, env, as_configured, a.oneshot)
        if a.only is None:
            print("summary: ingest %.2f  scan %.2f  one-shot %.2f (vs redis-cli %.2f)  -> %s"
                  % (r_ingest, r_scan, r_one, r_cli,
                     "all bars met" if r_ingest <= 1.0 and r_scan <= 1.0 and r_one <= 1.3 and r_cli <= 3.0
                     else "BAR(S) MISSED"))
        print("load average: %.2f %.2f %.2f" % os.getloadavg())
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


def ingest(xs, work, env, a, servers):
    """The ingest section; returns (the last run's server, its store, the ratio)."""
    data = os.path.join(work, "ingest.txt")
    with open(data, "w") as f:
        for n in range(a.lines):
            f.write("XADD events * user u%d action click n %d\n" % (n, n))
    print("input: %d lines, %d bytes; %d runs each" % (a.lines, os.path.getsize(data), a.runs))
    xs_t, rd_t = [], []
    db = srv = None
    for r in range(a.runs):
        db = os.path.join(work, "db%d" % r)
        with open(data, "rb") as f:
            xs_t.append(timed(xs + ["--db", db], stdin=f, env=env))
        srv = RedisServer(work)
        with open(data, "rb") as f:
            rd_t.append(timed(["redis-cli", "-p", str(srv.port), "--pipe"], stdin=f))
        if r < a.runs - 1:
            srv.stop()
            shutil.rmtree(db, ignore_errors=True)
        else:
            servers.append(srv)
    n_xs = subprocess.run(xs + ["--db", db, "XLEN", "events"], capture_output=True, env=env).stdout.strip()
    n_rd = srv.cli("XLEN", "events").strip()
    print("check: XLEN xs=%s redis=%s" % (n_xs.decode(), n_rd.decode()))
    (xb, xm), (rb, rm) = summary(xs_t), summary(rd_t)
    print("ingest   best: xs %.3f s  redis %.3f s  ratio %.2f;  throughput xs %.0f/s  redis %.0f/s"
          % (xb, rb, xb / rb, a.lines / xm, a.lines / rm))
    return srv, db, line("ingest", xm, "redis", rm, 1.0)


def scan(xs, db, srv, env, runs):
    """The scan section; returns the ratio."""
    xs_t = [timed(xs + ["--db", db, "XRANGE", "events", "-", "+"], stdout=subprocess.PIPE, env=env)
            for _ in range(runs)]
    rd_t = [timed(["redis-cli", "-p", str(srv.port), "XRANGE", "events", "-", "+"],
                  stdout=subprocess.PIPE) for _ in range(runs)]
    (xb, xm), (rb, rm) = summary(xs_t), summary(rd_t)
    print("scan     best: xs %.3f s  redis %.3f s  ratio %.2f" % (xb, rb, xb / rb))
    return line("scan", xm, "redis", rm, 1.0)


if __name__ == "__main__":
    main()
