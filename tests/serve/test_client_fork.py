"""The in-process client after fork(): a client inherited from the parent,
or made anew in the child, works in the child (multiprocessing's fork
start method, os.fork as gunicorn --preload and Celery prefork do), and
the child's use never disturbs the parent: its open read snapshot keeps
its reader slot, and the parent goes on writing."""
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

redis = pytest.importorskip("redis")

from xstream_cli.client import Redis  # noqa: E402


def _child_adds(path, name, n):
    """In a child: a new client adds ``n`` entries to ``name``."""
    r = Redis(path)
    for i in range(n):
        r.xadd(name, {"i": str(i)})
    return r.xlen(name)


_inherited = None


def _inherited_adds(name, n):
    """In a child: the client inherited from the parent adds ``n`` entries."""
    for i in range(n):
        _inherited.xadd(name, {"i": str(i)})
    return _inherited.xlen(name)


def test_a_client_made_in_a_multiprocessing_fork_child_reads_and_writes(tmp_path):
    path = str(tmp_path / "s.xs")
    parent = Redis(path)
    parent.xadd("s", {"from": "parent"})           # the parent holds the store open
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        lens = pool.starmap(_child_adds, [(path, "c%d" % i, 20) for i in range(6)])
    assert lens == [20] * 6
    assert [parent.xlen("c%d" % i) for i in range(6)] == [20] * 6
    parent.xadd("s", {"from": "parent", "after": "children"})
    assert parent.xlen("s") == 2


def test_a_client_inherited_through_fork_works_in_the_child(tmp_path):
    global _inherited
    path = str(tmp_path / "s.xs")
    _inherited = Redis(path, decode_responses=True)
    _inherited.xadd("s", {"k": "v"})
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        assert pool.starmap(_inherited_adds, [("a", 5), ("b", 7)]) == [5, 7]
    assert _inherited.xlen("a") == 5 and _inherited.xlen("b") == 7
    assert _inherited.xrange("s")[0][1] == {"k": "v"}


def test_os_fork_children_use_the_store_while_the_parent_holds_a_snapshot(tmp_path):
    """The parent keeps a read transaction open across the fork; the
    children open, use and exit (their atexit handlers run); the
    parent's reader slot survives (an inherited environment closed in a
    child would free it, letting a writer reuse the parent's pages)."""
    path = str(tmp_path / "s.xs")
    script = textwrap.dedent("""
        import os, sys
        from xstream_cli.client import Redis
        from xstream_cli.client import _host
        r = Redis(sys.argv[1])
        r.xadd("s", {"k": "v"})
        store = _host(os.path.realpath(sys.argv[1])).store
        snapshot = store.env.begin()          # the parent's open snapshot
        pids = []
        for i in range(4):
            pid = os.fork()
            if pid == 0:
                try:
                    Redis(sys.argv[1]).xadd("child", {"i": str(i)})
                    r.xadd("inherited", {"i": str(i)})
                except BaseException as e:
                    print("child failed:", type(e).__name__, e, flush=True)
                    os._exit(3)
                sys.exit(0)                   # a normal exit: atexit handlers run
            pids.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(p, 0)[1]) for p in pids]
        mine = [line for line in str(store.env.readers()).splitlines() if line.split()[:1] == [str(os.getpid())]]
        print("codes", codes, "parent reader slots", len(mine))
        snapshot.abort()
        print("lens", r.xlen("child"), r.xlen("inherited"), r.xlen("s"))
    """)
    out = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "child failed" not in out.stdout, out.stdout
    assert "codes [0, 0, 0, 0] parent reader slots 1" in out.stdout, out.stdout
    assert "lens 4 4 1" in out.stdout, out.stdout


def test_a_store_opened_by_the_parent_reopens_in_the_child(tmp_path):
    """The storage API: a Store the parent opened is usable in a child,
    which opens the files anew; closing it there leaves the parent's
    environment alone."""
    from storage.store import Store
    store = Store(str(tmp_path / "s.xs"))
    store.run(lambda tx: tx.add_auto_many([(b"s", [b"f", b"v"])]), write=True)
    snapshot = store.env.begin()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            store.run(lambda tx: tx.add_auto_many([(b"s", [b"f", b"v"])]), write=True)
            store.close()
        except BaseException:       # noqa: BLE001 (told through the exit code)
            code = 3
        os._exit(code)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
    assert str(os.getpid()) in str(store.env.readers())
    snapshot.abort()
    assert store.run(lambda tx: tx.length(b"s")) == 2
    store.close()
