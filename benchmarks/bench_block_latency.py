"""Benchmark: wake-up latency of a blocked reader in another process.

    python3 benchmarks/bench_block_latency.py [-n SAMPLES] [--gap MS] [--no-sync]

A producer (``xs`` in script mode) and a consumer run as separate
processes on a fresh store.  The producer is fed one ``XADD`` at a time;
latency is measured from the moment the command is written to the
producer's stdin ("the producer receives the command") to the moment the
consumer's output line with that entry is read from its stdout (so it
includes the producer's commit with fsync, the notification, the
consumer's wake-up, its re-check, rendering and the pipe).  The next
entry is sent after the producer answered and ``--gap`` ms passed, so
the consumer is blocked again.

Two consumers are measured:
  xread       ``xs tail -f`` (XREAD-style follow: read-only re-check)
  xreadgroup  ``xs`` script mode, one ``XREADGROUP ... COUNT 1 BLOCK 0
              STREAMS s >`` line per sample (the re-check delivers: a write
              transaction with fsync)

Prints p50, p99 and max per consumer.
"""
import argparse
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XS = [sys.executable, "-m", "xstream_cli"]


def _readline_until(fd, token, buf, timeout=10.0):
    """Read from fd until ``token`` appears; returns (time, rest of buf)."""
    end = time.monotonic() + timeout
    while token not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise TimeoutError("no %r from the consumer" % token)
        r, _, _ = select.select([fd], [], [], left)
        if r:
            data = os.read(fd, 65536)
            if not data:
                raise EOFError("consumer ended")
            buf += data
    t = time.perf_counter()
    return t, buf[buf.index(token) + len(token):]


def measure(kind, samples, gap_s, sync):
    db = tempfile.mkdtemp(prefix="xs-bench-block-")
    env = dict(os.environ)
    if not sync:
        env["XS_NO_SYNC"] = "1"
    args = XS + ["--db", db, "--raw"]
    subprocess.run(args + ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], check=True, env=env,
                   cwd=ROOT, capture_output=True)
    if kind == "xread":
        cons = subprocess.Popen(args + ["tail", "-f", "-n", "0", "s"], stdout=subprocess.PIPE,
                                env=env, cwd=ROOT)
    else:
        cons = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT)
        cons.stdin.write(b"XREADGROUP GROUP g c COUNT 1 BLOCK 0 STREAMS s >\n" * (samples + 100))
        cons.stdin.flush()
    prod = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=ROOT)
    pfd, cfd = prod.stdout.fileno(), cons.stdout.fileno()
    lat = []
    pbuf = cbuf = b""
    try:
        # both started and the consumer following: on a loaded machine a
        # fixed pause is not enough (tail -f -n 0 would miss what came
        # before it started), so add until the consumer shows one
        for _ in range(60):
            os.write(prod.stdin.fileno(), b"XADD s * k ready\n")
            _, pbuf = _readline_until(pfd, b"\n", pbuf)
            try:
                _, cbuf = _readline_until(cfd, b"ready", cbuf, timeout=1.0)
                break
            except TimeoutError:
                continue
        else:
            raise TimeoutError("the consumer never showed an entry")
        cbuf = b""
        time.sleep(0.2)
        for i in range(samples + 5):
            token = b"tok%06d" % i
            t0 = time.perf_counter()
            os.write(prod.stdin.fileno(), b"XADD s * k " + token + b"\n")
            t1, cbuf = _readline_until(cfd, token, cbuf)
            _, pbuf = _readline_until(pfd, b"\n", pbuf)   # the producer's reply
            if i >= 5:  # warm-up
                lat.append((t1 - t0) * 1000.0)
            time.sleep(gap_s)
    finally:
        for p in (prod, cons):
            try:
                p.stdin and p.stdin.close()
            except OSError:
                pass
            p.kill()
            p.wait()
        shutil.rmtree(db, ignore_errors=True)
    lat.sort()
    return lat


def pct(xs, p):
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=200, help="samples per consumer (default 200)")
    ap.add_argument("--gap", type=float, default=10.0, help="ms between samples (default 10)")
    ap.add_argument("--no-sync", action="store_true", help="run both sides with XS_NO_SYNC=1")
    ap.add_argument("--only", choices=("xread", "xreadgroup"))
    a = ap.parse_args()
    print("wake-up latency, producer stdin -> consumer stdout, %d samples, %s"
          % (a.n, "no fsync" if a.no_sync else "fsync on commit"))
    for kind in ("xread", "xreadgroup"):
        if a.only and kind != a.only:
            continue
        lat = measure(kind, a.n, a.gap / 1000.0, not a.no_sync)
        print("  %-10s  p50 %6.3f ms   p99 %6.3f ms   max %6.3f ms"
              % (kind, pct(lat, 50), pct(lat, 99), lat[-1]))


if __name__ == "__main__":
    main()
