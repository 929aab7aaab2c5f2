"""Benchmark: save and restore of 100k and 1M entries -- time and memory.

    python3 benchmarks/bench_snapshot.py [--sizes 100000,1000000] [--groups]

For each size a store is built (one stream, plus a consumer group with
10% of the entries pending), then each operation runs in a FRESH child
process so its figures are its own:

  seconds     wall time of the operation
  heap peak   tracemalloc peak of Python allocations (a second run, as
              tracemalloc slows Python down): what the code holds
  max RSS     resource.getrusage peak resident set of the child; this
              includes LMDB's memory-mapped pages the OS kept resident
              (file cache that the kernel can drop at will), so it grows
              with the data touched even when the heap does not

"Constant memory" means the heap peak does not grow with store size:
compare the 100k and 1M rows.
"""
import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def build(db, n, groups=True):
    from storage.store import Store
    s = Store(db, durable=False)
    fields = [b"user", b"u1234", b"action", b"login", b"payload", b"x" * 40]
    done = 0
    while done < n:
        k = min(100000, n - done)
        s.run(lambda tx: tx.add_auto_many([(b"events", fields)] * k), write=True)
        done += k
    s.close()
    if groups:
        from xstream_cli.execution.session import Session
        ses = Session(db, "json", durable=False)
        ses.execute([b"XGROUP", b"CREATE", b"events", b"g", b"0"])
        ses.execute([b"XREADGROUP", b"GROUP", b"g", b"c1", b"COUNT", b"%d" % (n // 10),
                     b"STREAMS", b"events", b">"])
        ses.store.close()


def child(op, db, path, trace):
    """Run one operation; print JSON figures."""
    if trace:
        import tracemalloc
        tracemalloc.start()
    from storage.ops import snapshot
    from storage.store import Store
    t0 = time.monotonic()
    if op == "save":
        st = snapshot.save_to_path(Store(db), path)
    else:
        st = snapshot.restore(Store(db, durable=False), path)
    dt = time.monotonic() - t0
    out = {"seconds": dt, "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "entries": st.entries, "bytes": st.bytes}
    if trace:
        out["heap_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2 ** 20
    print(json.dumps(out))


def run_child(op, db, path, trace):
    p = subprocess.run([sys.executable, __file__, "--child", op, db, path] + (["--trace"] if trace else []),
                       capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--no-groups", action="store_true")
    ap.add_argument("--child", nargs=3)
    ap.add_argument("--trace", action="store_true")
    a = ap.parse_args()
    if a.child:
        return child(*a.child, a.trace)
    base = tempfile.mkdtemp(prefix="xs-bench-snap-")
    try:
        print("%10s %8s %9s %10s %11s %10s %12s" % ("entries", "op", "seconds", "entries/s", "file MB",
                                                   "max RSS MB", "heap peak MB"))
        for n in [int(x) for x in a.sizes.split(",")]:
            src, dst, snap = (os.path.join(base, "%s-%d" % (x, n)) for x in ("src", "dst", "snap"))
            build(src, n, not a.no_groups)
            for op, db in (("save", src), ("restore", dst)):
                shutil.rmtree(dst, ignore_errors=True) if op == "restore" else None
                r = run_child(op, db, snap, False)
                if op == "restore":
                    shutil.rmtree(dst, ignore_errors=True)
                t = run_child(op, db, snap + ".t" if op == "save" else snap, True)
                print("%10d %8s %9.2f %10.0f %11.1f %10.1f %12.2f" % (
                    n, op, r["seconds"], n / r["seconds"], os.path.getsize(snap) / 1e6,
                    r["maxrss_mb"], t["heap_peak_mb"]))
                sys.stdout.flush()
            shutil.rmtree(src, ignore_errors=True)
            shutil.rmtree(dst, ignore_errors=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
