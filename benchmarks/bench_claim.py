"""Benchmark: XREADGROUP ... CLAIM versus XAUTOCLAIM over a large PEL.

    python3 benchmarks/bench_claim.py [--entries N] [--idle N] [--iters N]

Not collected by pytest.  The scenario of the Redis PR that added CLAIM
(../shared/seeds/004_*.txt): N entries (20,000) all pending in group g;
each iteration re-arms the PEL -- N - k entries IDLE 50, k random entries
(1,000) IDLE 1100 (XCLAIM ... IDLE, not timed) -- then times, in process
(no process start, no rendering):

    XREADGROUP GROUP g c2 COUNT 1000 CLAIM 1000 STREAMS s >
    XAUTOCLAIM s g c3 1000 0 COUNT 1000

through ``xstream_cli.execution.session.Session(db, "raw").execute``, once with the
durable default (fsync on commit) and once with --no-sync.  Bar (SPEC 5):
XREADGROUP CLAIM under 10 ms.  A redis-server 7.0 runs XAUTOCLAIM in the
same scenario as a reference (7.0 has no CLAIM option); its times include
one loopback round trip.

Then the disk's part of the durable figure: the bytes the timed command
wrote (``wchar`` of /proc/self/io: LMDB's dirty pages and its meta
page), and what writing that many 4 KiB pages at scattered offsets of
a file the size of the store and one fdatasync cost on this disk,
alone.  A claim rewrites the PEL record of each entry it takes and
moves it in the owner index, and the 1,000 idle entries are scattered
over the 20,000: nearly every leaf page of those two B-trees is
copied, so the pages written grow with the PEL, not with the claim.
"""
import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from storage.errors import RedisError  # noqa: E402
from xstream_cli.commands import lookup  # noqa: E402
from xstream_cli.execution.session import Session  # noqa: E402

CLAIM = [b"XREADGROUP", b"GROUP", b"g", b"c2", b"COUNT", b"1000", b"CLAIM", b"1000", b"STREAMS", b"s", b">"]
AUTOCLAIM = [b"XAUTOCLAIM", b"s", b"g", b"c3", b"1000", b"0", b"COUNT", b"1000"]


def stats(ms):
    ms = sorted(ms)
    p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
    return "mean %7.2f ms  median %7.2f ms  p95 %7.2f ms  min %7.2f  max %7.2f" % (
        statistics.mean(ms), statistics.median(ms), p95, ms[0], ms[-1])


# ------------------------------------------------------------------- xs

def batch(session, commands):
    """Run many commands in ONE transaction (setup, not timed)."""
    def run(tx):
        out = []
        for argv in commands:
            cmd = lookup(argv)
            out.append(cmd.run(tx, *cmd.parse(argv)))   # a RedisError raises
        return out
    return session.store.run(run, write=True)


def arm_commands(ids, idle_ids):
    busy = [i for i in ids if i not in idle_ids]
    cmds = []
    for chunk in range(0, len(busy), 1000):
        cmds.append([b"XCLAIM", b"s", b"g", b"c1", b"0"] + busy[chunk:chunk + 1000] + [b"IDLE", b"50", b"JUSTID"])
    cmds.append([b"XCLAIM", b"s", b"g", b"c1", b"0"] + sorted(idle_ids) + [b"IDLE", b"1100", b"JUSTID"])
    return cmds


def claimed_count(reply, autoclaim):
    if autoclaim:
        return len(reply[1])
    # XREADGROUP reply: a reply.Map of stream -> entries (or None)
    if reply is None:
        return 0
    pairs = getattr(reply, "pairs", reply)
    return sum(len(entries) for _, entries in pairs)


def written():
    """Bytes this process has written through system calls so far, or
    None where /proc/self/io is not readable."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def scattered_flush(directory, pages, span, rng, iters=5):
    """Median ms to write ``pages`` 4 KiB pages at random page offsets of
    a ``span``-byte file, then fdatasync it."""
    path = os.path.join(directory, "scatter")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, span)
        os.fdatasync(fd)
        page = b"\xa5" * 4096
        slots = max(1, span // 4096)
        times = []
        for _ in range(iters):
            offsets = sorted(rng.sample(range(slots), min(pages, slots)))
            t0 = time.perf_counter()
            for o in offsets:
                os.pwrite(fd, page, o * 4096)
            os.fdatasync(fd)
            times.append((time.perf_counter() - t0) * 1000)
        return statistics.median(times)
    finally:
        os.close(fd)
        os.unlink(path)


def bench_xs(n, k, iters, durable, rng):
    """{name: (ms, claimed counts, bytes written)} and the store's size."""
    work = tempfile.mkdtemp(prefix="xs-claim-")
    try:
        s = Session(os.path.join(work, "db"), "raw", durable)
        ids = batch(s, [[b"XADD", b"s", b"*", b"f", b"v%d" % j] for j in range(n)])
        ids = [i if isinstance(i, bytes) else str(i).encode() for i in ids]
        batch(s, [[b"XGROUP", b"CREATE", b"s", b"g", b"0"],
                  [b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"%d" % n, b"STREAMS", b"s", b">"]])
        res = {}
        for name, argv in (("XREADGROUP CLAIM", CLAIM), ("XAUTOCLAIM", AUTOCLAIM)):
            times, got, wrote = [], [], []
            for _ in range(iters):
                batch(s, arm_commands(ids, set(rng.sample(ids, k))))
                w0 = written()
                t0 = time.perf_counter()
                r = s.execute(list(argv))
                times.append((time.perf_counter() - t0) * 1000)
                w1 = written()
                if w0 is not None and w1 is not None:
                    wrote.append(w1 - w0)
                if isinstance(r, RedisError):
                    raise SystemExit("%s failed: %s" % (name, r.text))
                got.append(claimed_count(r, name == "XAUTOCLAIM"))
            res[name] = (times, got, wrote)
        size = os.path.getsize(os.path.join(work, "db", "data.mdb"))
        s.store.close()
        return res, size
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---------------------------------------------------------------- redis

class Resp:
    """A minimal RESP2 client (pipelined sends)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(out)

    def send(self, commands):
        self.sock.sendall(b"".join(self.encode(c) for c in commands))

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def pipeline(self, commands):
        self.send(commands)
        return [self.read() for _ in commands]

    def call(self, *args):
        return self.pipeline([list(args)])[0]


def bench_redis(n, k, iters, rng):
    if shutil.which("redis-server") is None:
        return None
    work = tempfile.mkdtemp(prefix="redis-claim-")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", work,
                             "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                r = Resp(port)
                r.call("PING")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        version = [l for l in r.call("INFO", "server").split(b"\r\n") if l.startswith(b"redis_version")]
        ids = r.pipeline([[b"XADD", b"s", b"*", b"f", b"v%d" % j] for j in range(n)])
        r.call("XGROUP", "CREATE", "s", "g", "0")
        r.call("XREADGROUP", "GROUP", "g", "c1", "COUNT", n, "STREAMS", "s", ">")
        times, got = [], []
        for _ in range(iters):
            r.pipeline(arm_commands(ids, set(rng.sample(ids, k))))
            t0 = time.perf_counter()
            rep = r.call(*AUTOCLAIM)
            times.append((time.perf_counter() - t0) * 1000)
            got.append(len(rep[1]))
        return (version[0].decode() if version else "redis"), times, got
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=20000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seed", type=int, default=4)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    print("scenario: %d pending entries, %d idle (IDLE 1100), rest IDLE 50; %d iterations"
          % (a.entries, a.idle, a.iters))
    floor = None
    for durable in (True, False):
        res, size = bench_xs(a.entries, a.idle, a.iters, durable, rng)
        mode = "durable (fsync)" if durable else "--no-sync"
        for name, (times, got, _) in res.items():
            print("xs %-16s %-15s %s  claimed %d..%d" % (name, mode, stats(times), min(got), max(got)))
        wrote = res["XREADGROUP CLAIM"][2]
        if durable and wrote:
            floor = (statistics.median(wrote), size)
        med = statistics.median(res["XREADGROUP CLAIM"][0])
        mean = statistics.mean(res["XREADGROUP CLAIM"][0])
        print("xs XREADGROUP CLAIM %s under 10 ms: %s (mean %.2f ms, median %.2f ms)"
              % (mode, "yes" if mean < 10 else "NO", mean, med))
    if floor is not None:
        pages = int(floor[0] // 4096)
        work = tempfile.mkdtemp(prefix="xs-claim-floor-")
        try:
            ms = scattered_flush(work, pages, floor[1], rng)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print("disk: a durable XREADGROUP CLAIM wrote %d pages (%.1f MiB, median); %d scattered 4 KiB pages"
              " of a %.0f MiB file + fdatasync take %.2f ms here, alone" % (pages, floor[0] / 2**20, pages,
                                                                           floor[1] / 2**20, ms))
    red = bench_redis(a.entries, a.idle, a.iters, rng)
    if red is None:
        print("redis-server not installed: no reference")
    else:
        version, times, got = red
        print("redis %-13s %-15s %s  claimed %d..%d" % ("XAUTOCLAIM", version, stats(times), min(got), max(got)))


if __name__ == "__main__":
    main()
