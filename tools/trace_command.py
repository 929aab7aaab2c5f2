"""Trace one xs command through the project's own code: how many calls
into storage/ and xstream_cli/ it makes, how many functions and files it
enters, and (with --files) the files in order of first entry.

    python3 tools/trace_command.py [--db PATH] [--files] -- XREADGROUP GROUP g c STREAMS s '>'

The command runs in this process on a store (a temporary one made with
a stream ``s`` and a group ``g`` unless --db names one), traced with
sys.setprofile, after one untraced run on another such store that warms
imports and caches; --functions lists the functions called most.  The
walk of issue 39 ("the path of one command") is measured with it; the
figures depend on the command, not on the machine.
"""
import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def _prepare(db):
    from storage.options import AddOptions, GroupOptions
    from storage.store import Store
    s = Store(db)
    try:
        def fill(tx):
            for i in range(1, 21):
                tx.add(b"s", [b"f", b"v%d" % i], AddOptions(id=(i, 0)))
            tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
        s.run(fill, write=True)
    finally:
        s.close()


def trace(argv, db):
    """(calls, functions, files in order of first entry) of one run."""
    from xstream_cli.__main__ import main
    roots = tuple(os.path.join(ROOT, d) + os.sep for d in ("storage", "xstream_cli"))
    calls = [0]
    funcs: dict = {}
    files = []
    seen = set()

    def prof(frame, event, arg):
        if event != "call":
            return
        f = frame.f_code.co_filename
        if not f.startswith(roots):
            return
        calls[0] += 1
        k = (os.path.relpath(f, ROOT), frame.f_code.co_firstlineno, frame.f_code.co_name)
        funcs[k] = funcs.get(k, 0) + 1
        if f not in seen:
            seen.add(f)
            files.append(os.path.relpath(f, ROOT))
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    try:
        sys.setprofile(prof)
        try:
            main(["--db", db] + argv)
        finally:
            sys.setprofile(None)
    except SystemExit:
        pass
    finally:
        sys.stdout.close()
        sys.stdout = out
    return calls[0], funcs, files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", help="an existing store (default: a temporary one with stream s and group g)")
    ap.add_argument("--files", action="store_true", help="list the files entered, in order")
    ap.add_argument("--functions", type=int, default=0, metavar="N", help="list the N functions called most")
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        warm = os.path.join(tmp, "warm")
        _prepare(warm)
        trace(a.command, warm)                              # imports, caches
        db = a.db or os.path.join(tmp, "store")
        if not a.db:
            _prepare(db)
        calls, funcs, files = trace(a.command, db)
    print("%s: %d calls into project code, %d functions, %d files" % (" ".join(a.command), sum(funcs.values()),
                                                                       len(funcs), len(files)))
    if a.files:
        for f in files:
            print("  " + f)
    for (f, line, name), n in sorted(funcs.items(), key=lambda x: -x[1])[:a.functions]:
        print("  %5d  %s:%d %s" % (n, f, line, name))


if __name__ == "__main__":
    main()
