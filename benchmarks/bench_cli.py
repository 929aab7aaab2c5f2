"""Benchmark: xs against its competitors, side by side (SPEC section 5).

    python3 benchmarks/bench_cli.py [--lines N] [--runs N] [--oneshot N]

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
            xs), interleaved, medians.                 bar: ratio <= 1.3
            Also versus ``redis-cli XLEN events`` (the SPEC's bar:
            ratio <= 3.0), beside the bare interpreter (``python -S -c
            pass`` and ``python -c pass``, site included), which no
            Python program starts faster than, and xs started without
            ``site`` (``python -S``, sys.path given by a launcher): what
            a site-free launcher would save (xs does not ship one: see
            docs/performance.md).

Ratios are xs time / competitor time, from medians (best-of also shown).
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=100000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--oneshot", type=int, default=30)
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
    try:
        data = os.path.join(work, "ingest.txt")
        with open(data, "w") as f:
            for n in range(a.lines):
                f.write("XADD events * user u%d action click n %d\n" % (n, n))
        print("input: %d lines, %d bytes; %d runs each" % (a.lines, os.path.getsize(data), a.runs))

        # ------------------------------------------------------------ ingest
        # fill the bytecode cache (a write, which makes the store: a read never does)
        timed(xs + ["--db", os.path.join(work, "warm"), "XTRIM", "x", "MAXLEN", "0"], env=env)
        xs_t, rd_t = [], []
        db = None
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
        srv = servers[-1]
        n_xs = subprocess.run(xs + ["--db", db, "XLEN", "events"], capture_output=True, env=env).stdout.strip()
        n_rd = srv.cli("XLEN", "events").strip()
        print("check: XLEN xs=%s redis=%s" % (n_xs.decode(), n_rd.decode()))
        (xb, xm), (rb, rm) = summary(xs_t), summary(rd_t)
        print("ingest   best: xs %.3f s  redis %.3f s  ratio %.2f;  throughput xs %.0f/s  redis %.0f/s"
              % (xb, rb, xb / rb, a.lines / xm, a.lines / rm))
        r_ingest = line("ingest", xm, "redis", rm, 1.0)

        # -------------------------------------------------------------- scan
        xs_t = [timed(xs + ["--db", db, "XRANGE", "events", "-", "+"], stdout=subprocess.PIPE, env=env)
                for _ in range(a.runs)]
        rd_t = [timed(["redis-cli", "-p", str(srv.port), "XRANGE", "events", "-", "+"],
                      stdout=subprocess.PIPE) for _ in range(a.runs)]
        (xb, xm), (rb, rm) = summary(xs_t), summary(rd_t)
        print("scan     best: xs %.3f s  redis %.3f s  ratio %.2f" % (xb, rb, xb / rb))
        r_scan = line("scan", xm, "redis", rm, 1.0)

        # ---------------------------------------------------------- one-shot
        imp = [sys.executable, "-c", "import lmdb, msgpack"]
        one = xs + ["--db", db, "XLEN", "events"]
        # the same command started without site: sys.path as site would
        # have made it, handed over by this process (a launcher's job)
        no_site = [sys.executable, "-S", "-c",
                   "import sys; sys.path[1:1] = %r; from xstream_cli.__main__ import entry; entry()"
                   % [p for p in sys.path[1:] if p], "--db", db, "XLEN", "events"]
        for _ in range(3):                  # warm the page and bytecode caches
            timed(imp, env=env), timed(one, env=env), timed(no_site, env=env)
        xs_t, py_t, ns_t = [], [], []
        for _ in range(a.oneshot):          # interleaved, so drift hits all three
            xs_t.append(timed(one, env=env))
            py_t.append(timed(imp, env=env))
            ns_t.append(timed(no_site, env=env))
        py_m = statistics.median(py_t)
        print("one-shot (%d runs) median: xs %.1f ms  python -c 'import lmdb, msgpack' %.1f ms;"
              "  xs without site (python -S) %.1f ms (%.2fx)"
              % (a.oneshot, statistics.median(xs_t) * 1000, py_m * 1000, statistics.median(ns_t) * 1000,
                 statistics.median(ns_t) / py_m))
        r_one = line("one-shot", statistics.median(xs_t), "import", py_m, 1.3, unit="ms")
        rc = ["redis-cli", "-p", str(srv.port), "XLEN", "events"]
        bare = [sys.executable, "-S", "-c", "pass"]
        site = [sys.executable, "-c", "pass"]
        xs_t, rc_t, bare_t, site_t = [], [], [], []
        for _ in range(a.oneshot):
            xs_t.append(timed(one, env=env))
            rc_t.append(timed(rc))
            bare_t.append(timed(bare, env=env))
            site_t.append(timed(site, env=env))
        rc_m = statistics.median(rc_t)
        print("one-shot (%d runs) median: xs %.1f ms  redis-cli %.1f ms;  python -S -c pass %.1f ms (%.1fx),"
              " python -c pass %.1f ms (%.1fx)"
              % (a.oneshot, statistics.median(xs_t) * 1000, rc_m * 1000, statistics.median(bare_t) * 1000,
                 statistics.median(bare_t) / rc_m, statistics.median(site_t) * 1000, statistics.median(site_t) / rc_m))
        r_cli = line("one-shot", statistics.median(xs_t), "redis-cli", rc_m, 3.0, unit="ms")
        if as_configured != env:
            xs_t, py_t = [], []
            for _ in range(a.oneshot):
                xs_t.append(timed(one, env=as_configured))
                py_t.append(timed(imp, env=as_configured))
            print("one-shot without bytecode cache (as configured, PYTHONDONTWRITEBYTECODE=1):")
            line("one-shot", statistics.median(xs_t), "import", statistics.median(py_t), 1.3, unit="ms")

        print("summary: ingest %.2f  scan %.2f  one-shot %.2f (vs redis-cli %.2f)  -> %s"
              % (r_ingest, r_scan, r_one, r_cli,
                 "all bars met" if r_ingest <= 1.0 and r_scan <= 1.0 and r_one <= 1.3 and r_cli <= 3.0
                 else "BAR(S) MISSED"))
        print("load average: %.2f %.2f %.2f" % os.getloadavg())
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
