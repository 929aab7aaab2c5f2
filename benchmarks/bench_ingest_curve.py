"""Benchmark: the big-store ingest curve, xs beside redis-server (issue 9,
items 2 and 7).

    python3 benchmarks/bench_ingest_curve.py [--sizes 10000,1000000,10000000]
                                        [--batch 100000] [--repeat 3]
                                        [--oneshot 20] [--keep DIR]

Not collected by pytest (the name does not start with ``test_``).

One stream ``s`` is grown to each size of --sizes with lines
``XADD s * user u<k> action click page /home ts <t>``: on the xs side
``xs --db DIR < FILE`` (script mode, durable as by default, at most one
million lines per process), on the redis side ``redis-cli --pipe < FILE``
into a private redis-server with ``appendonly yes`` and ``appendfsync
always``.  Both sides get the same files, and both are checked with XLEN.

At each size, for each side:

  marginal  the wall time of ingesting the NEXT --batch lines (one more
            process), less the time of the same process fed a single
            ``XLEN s`` line at that size (start-up and opening the
            store), divided by --batch: the per-entry cost of adding at
            that size.  Median of --repeat batches, taken alternately on
            xs and redis so both see the same machine load (so the size
            grows by --repeat x --batch while it is measured).
  +nodes    xs only: script-mode runs of plain XADDs used to defer the
            stream's node table to the next other write, which built it
            for every entry ingested since, in one transaction (minutes
            after a 9M growth); since this commit they build it in each batch and
            this column should stay near 0, kept to show that it does.
            So after each batch one one-shot ``xs XADD`` is timed, and its
            time beyond a plain one-shot XADD, divided by --batch, is
            added: "total" = script + nodes is the cost an entry really
            has.  The first one-shot XADD after growing to a size (nodes
            of the whole growth) is printed below the table.
  one-shot  ``xs --db DIR XADD s * ...`` against ``redis-cli XADD s * ...``,
            median of --oneshot processes.
  bytes     xs: data.mdb size / XLEN, and the size after ``xs compact`` of
            a copy of the store (the store itself is left as it grew);
            redis: ``MEMORY USAGE s SAMPLES 0`` / XLEN, and dump.rdb after
            ``SAVE`` / XLEN.

The table ends with the cost at the largest size over the cost at the
smallest, for both sides (xs: total) (the issue's goal: xs 10M vs 10k within 1.2).
With --keep DIR the store (DIR/xs) and the redis directory (DIR/redis)
are kept; DIR must not exist or be empty.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cli import free_port, timed, xs_command  # noqa: E402

GROW_CHUNK = 1000000
T0 = 1700000000


def write_lines(path, start, n):
    """Lines for entries start .. start+n-1 into ``path``."""
    with open(path, "w") as f:
        k = start
        end = start + n
        while k < end:
            stop = min(end, k + 50000)
            f.write("".join("XADD s * user u%d action click page /home ts %d\n" % (i, T0 + i)
                            for i in range(k, stop)))
            k = stop


def parse_sizes(text):
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("--sizes takes numbers separated by commas: %r" % text)
    if not sizes or any(s < 1 for s in sizes) or sizes != sorted(sizes):
        raise argparse.ArgumentTypeError("--sizes must be positive and increasing: %r" % text)
    return sizes


class Xs:
    name = "xs"

    def __init__(self, work):
        self.cmd, self.how = xs_command()
        self.dir = os.path.join(work, "xs")
        self.env = dict(os.environ)
        self.env.pop("XS_NO_SYNC", None)

    def feed(self, path):
        with open(path, "rb") as f:
            return timed(self.cmd + ["--db", self.dir], stdin=f, env=self.env)

    def oneshot(self, k):
        return timed(self.cmd + ["--db", self.dir, "XADD", "s", "*", "user", "u%d" % k, "action", "click",
                                 "page", "/home", "ts", str(T0 + k)], env=self.env)

    def xlen(self):
        out = subprocess.run(self.cmd + ["--db", self.dir, "XLEN", "s"], capture_output=True, check=True,
                             env=self.env).stdout
        return int(out.strip() or 0)

    def bytes(self, n, work):
        """(data.mdb bytes / n, compacted copy bytes / n or None)."""
        data = os.path.join(self.dir, "data.mdb")
        size = os.stat(data).st_size
        copy = os.path.join(work, "xs-compact-copy")
        shutil.rmtree(copy, ignore_errors=True)
        os.mkdir(copy, 0o700)
        try:
            shutil.copyfile(data, os.path.join(copy, "data.mdb"))
            p = subprocess.run(self.cmd + ["--db", copy, "compact", "--json"], capture_output=True,
                               env=self.env)
            if p.returncode != 0:
                print("  (xs compact failed: %s)" % p.stderr.decode(errors="replace").strip(), file=sys.stderr)
                return size / n, None
            after = json.loads(p.stdout)["after"]
        finally:
            shutil.rmtree(copy, ignore_errors=True)
        return size / n, after / n

    def stop(self):
        pass


class Redis:
    name = "redis"

    def __init__(self, work):
        self.dir = os.path.join(work, "redis")
        os.mkdir(self.dir, 0o700)
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
             "--logfile", os.path.join(self.dir, "log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            p = subprocess.run(["redis-cli", "-p", str(self.port), "PING"], capture_output=True)
            if p.stdout.strip() == b"PONG":
                return
            time.sleep(0.05)
        self.stop()
        raise SystemExit("redis-server did not start")

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port)] + list(args), capture_output=True,
                              check=True).stdout

    def feed(self, path):
        with open(path, "rb") as f:
            t0 = time.perf_counter()
            p = subprocess.run(["redis-cli", "-p", str(self.port), "--pipe"], stdin=f, capture_output=True)
            dt = time.perf_counter() - t0
        if p.returncode != 0 or b"errors: 0," not in p.stdout:
            raise SystemExit("redis-cli --pipe failed: %s" % (p.stdout + p.stderr).decode(errors="replace")[-500:])
        return dt

    def oneshot(self, k):
        return timed(["redis-cli", "-p", str(self.port), "XADD", "s", "*", "user", "u%d" % k, "action", "click",
                      "page", "/home", "ts", str(T0 + k)])

    def xlen(self):
        return int(self.cli("XLEN", "s").strip() or 0)

    def bytes(self, n, work):
        """(MEMORY USAGE / n, dump.rdb after SAVE / n)."""
        mem = int(self.cli("MEMORY", "USAGE", "s", "SAMPLES", "0").strip())
        if self.cli("SAVE").strip() != b"OK":
            raise SystemExit("redis SAVE failed")
        rdb = os.stat(os.path.join(self.dir, "dump.rdb")).st_size
        return mem / n, rdb / n

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("10000,1000000,10000000"),
                    help="stream sizes, increasing, separated by commas")
    ap.add_argument("--batch", type=int, default=100000, help="lines in one measured batch")
    ap.add_argument("--repeat", type=int, default=3, help="measured batches per size (median)")
    ap.add_argument("--oneshot", type=int, default=20, help="one-shot XADD processes per size (median)")
    ap.add_argument("--keep", metavar="DIR", help="keep the xs store and the redis directory in DIR")
    a = ap.parse_args()
    if a.batch < 1 or a.repeat < 1 or a.oneshot < 1:
        ap.error("--batch, --repeat and --oneshot must be at least 1")
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        raise SystemExit("redis-server and redis-cli are needed")
    if a.keep:
        if os.path.exists(a.keep) and os.listdir(a.keep):
            ap.error("--keep %s: the directory is not empty" % a.keep)
        os.makedirs(a.keep, exist_ok=True)
        work = a.keep
    else:
        work = tempfile.mkdtemp(prefix="xs-bench-curve-")
    scratch = tempfile.mkdtemp(prefix="lines-", dir=work)
    xs = Xs(work)
    redis = Redis(work)
    sides = (xs, redis)
    print("xs: %s; redis: %s" % (xs.how, subprocess.run(["redis-server", "--version"], capture_output=True,
                                                             text=True).stdout.split()[2]))
    print("batch %d lines, median of %d batches and of %d one-shot XADDs per size; work dir %s"
          % (a.batch, a.repeat, a.oneshot, work))
    sys.stdout.flush()
    rows = []
    n = 0  # entries in each side's stream
    synced = 0  # xs: entries whose nodes are built (see below)
    started = time.monotonic()
    try:
        probe = os.path.join(scratch, "probe.txt")
        with open(probe, "w") as f:
            f.write("XLEN s\n")
        for size in a.sizes:
            t_grow = time.monotonic()
            while n < size:
                chunk = min(GROW_CHUNK, size - n)
                path = os.path.join(scratch, "grow.txt")
                write_lines(path, n, chunk)
                for side in sides:
                    side.feed(path)
                n += chunk
                os.unlink(path)
            grow_s = time.monotonic() - t_grow
            for side in sides:
                got = side.xlen()
                if got != n:
                    raise SystemExit("%s: XLEN %d, expected %d" % (side.name, got, n))
            at = n
            # The first write that is not a script-mode run of XADDs builds the
            # node table of every entry bulk-ingested since the last such
            # write (storage.parts.log.sync_nodes): time it, it is part of the cost.
            deferred = n - synced
            settle = {s.name: s.oneshot(n) for s in sides}
            n += 1
            synced = n
            # start-up + open at this size: the same process fed one read line
            base = {s.name: statistics.median(s.feed(probe) for _ in range(5)) for s in sides}
            ones = {s.name: [] for s in sides}
            for i in range(a.oneshot):
                for side in sides:
                    ones[side.name].append(side.oneshot(n) * 1000)
                n += 1
            synced = n
            one = {k: statistics.median(v) for k, v in ones.items()}
            per = {s.name: [] for s in sides}
            nodes = []
            path = os.path.join(scratch, "batch.txt")
            for _ in range(a.repeat):
                write_lines(path, n, a.batch)
                for side in sides:
                    dt = side.feed(path)
                    per[side.name].append(max(0.0, dt - base[side.name]) / a.batch * 1e6)
                n += a.batch
                # the next one-shot XADD pays for the batch's nodes
                dt = xs.oneshot(n) * 1000
                nodes.append(max(0.0, dt - one["xs"]) / a.batch * 1000)
                n += 1
                synced = n
                redis.oneshot(n - 1)
            os.unlink(path)
            for side in sides:
                got = side.xlen()
                if got != n:
                    raise SystemExit("%s: XLEN %d, expected %d" % (side.name, got, n))
            xb, xc = xs.bytes(n, work)
            rm, rr = redis.bytes(n, work)
            xs_total = [p + q for p, q in zip(per["xs"], nodes)]
            row = dict(size=at, xs=statistics.median(per["xs"]), xs_nodes=statistics.median(nodes),
                       xs_total=statistics.median(xs_total), redis=statistics.median(per["redis"]),
                       xs_start=base["xs"] * 1000, redis_start=base["redis"] * 1000,
                       xs_one=one["xs"], redis_one=one["redis"], xs_one_max=max(ones["xs"]),
                       redis_one_max=max(ones["redis"]), xs_disk=xb, xs_compact=xc, redis_mem=rm,
                       redis_rdb=rr, grow_s=grow_s, deferred=deferred, settle=settle["xs"])
            rows.append(row)
            print("  at %d: xs script %s us/entry + nodes %s us/entry, redis %s us/entry (start-up %.0f / %.0f ms "
                  "subtracted); grown in %.0f s; first one-shot XADD after it %.2f s (nodes of %d entries); "
                  "one-shot XADD max %.0f / %.0f ms; load average %.1f"
                  % (at, " ".join("%.2f" % v for v in per["xs"]), " ".join("%.2f" % v for v in nodes),
                     " ".join("%.2f" % v for v in per["redis"]), row["xs_start"], row["redis_start"], grow_s,
                     settle["xs"], deferred, row["xs_one_max"], row["redis_one_max"], os.getloadavg()[0]))
            sys.stdout.flush()
    except RuntimeError as e:  # a process of the benchmark failed (timed says which)
        raise SystemExit("bench_ingest_curve: %s" % e)
    finally:
        for side in sides:
            side.stop()
        shutil.rmtree(scratch, ignore_errors=True)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print("ingest curve: one stream, 4-field events, durable on both sides (%.0f s in all)"
          % (time.monotonic() - started))
    fmt = "%10s  %7s %7s %7s %7s %6s  %7s %7s %6s  %7s %7s  %6s %6s"
    print(fmt % ("entries", "xs", "xs", "xs", "redis", "ratio", "xs", "redis", "ratio",
                 "xs disk", "compact", "r mem", "r rdb"))
    print(fmt % ("", "script", "+nodes", "total", "", "total", "1-shot", "1-shot", "", "", "", "", ""))
    print(fmt % ("", "us/e", "us/e", "us/e", "us/e", "/redis", "ms", "ms", "", "B/e", "B/e", "B/e", "B/e"))
    for r in rows:
        print("%10d  %7.2f %7.2f %7.2f %7.2f %6.2f  %7.1f %7.1f %6.2f  %7.1f %7s  %6.1f %6.1f"
              % (r["size"], r["xs"], r["xs_nodes"], r["xs_total"], r["redis"],
                 r["xs_total"] / r["redis"] if r["redis"] else float("inf"),
                 r["xs_one"], r["redis_one"], r["xs_one"] / r["redis_one"],
                 r["xs_disk"], "-" if r["xs_compact"] is None else "%.1f" % r["xs_compact"],
                 r["redis_mem"], r["redis_rdb"]))
    for r in rows:
        if r["deferred"]:
            print("after growing to %d: the first one-shot xs XADD took %.2f s (a plain one %.2f s), building "
                  "the nodes of %d bulk-ingested entries (%.2f us/entry)"
                  % (r["size"], r["settle"], r["xs_one"] / 1000, r["deferred"],
                     max(0.0, r["settle"] * 1000 - r["xs_one"]) * 1000 / r["deferred"]))
    lo, hi = rows[0], rows[-1]

    def growth(key):
        return hi[key] / lo[key] if lo[key] else float("inf")

    print("largest vs smallest (%d vs %d entries): xs marginal total %.2fx (goal <= 1.2; script alone %.2fx), "
          "redis marginal %.2fx; one-shot XADD xs %.2fx, redis %.2fx"
          % (hi["size"], lo["size"], growth("xs_total"), growth("xs"), growth("redis"), growth("xs_one"),
             growth("redis_one")))


if __name__ == "__main__":
    main()
