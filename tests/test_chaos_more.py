"""More chaos (issue 14): SIGKILL at random moments of ``xs restore`` and
of map growth, and a disk that fills up while producers and consumers
run.  After every kill the store opens, answers and passes the
consistency check (tests._helpers.check_pel_indexes).

  * restore: a store holding content A; ``xs restore --replace`` of a
    snapshot B (60k entries, a group with pending entries) is killed at
    a random moment, again and again; afterwards the store is exactly A
    or exactly B (every LMDB database compared), never a mix, and the
    temporary copy that ``xs restore -`` makes of stdin is swept by the
    next run.  Some runs start with a 1 MiB map so that the restore
    grows it (a grow restarts the transaction) while it may be killed.
  * map growth: script-mode writers add 8 KiB entries to a store whose
    map starts at 1 MiB (storage.store.INITIAL_MAP patched in the
    launcher, the product's own entry point otherwise), so that it grows
    many times; writers are killed at random; every XADD whose reply was
    read is there afterwards, and one-shot readers running meanwhile
    never fail (no MDB_MAP_RESIZED, no traceback).
  * full disk: on a 2 MiB tmpfs (root only, else skipped; the fixture
    of tests/test_hardening.py), a filler file first, then producers and
    group consumers until the disk is full: every failing command says
    so in one line with exit status 1, no acknowledged XADD or XACK is
    lost, and once the filler is deleted the store writes again.

Each test is bounded for CI (~10-20 s).  Longer runs:
XS_CHAOS_RESTORE_KILLS (default 6), XS_CHAOS_GROWTH_SECONDS (default 10),
XS_CHAOS_FULL_ROUNDS (default 1), XS_CHAOS_SEED (printed on failure).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

from storage.store import Store
from tests._helpers import check_pel_indexes, dump
from tests.test_chaos import EVERYTHING, ROOT, SEED, XS, Role
from tests.test_hardening import fill, one_line_error, small_fs  # noqa: F401 (small_fs: a fixture)

RESTORE_KILLS = int(os.environ.get("XS_CHAOS_RESTORE_KILLS", "6"))
GROWTH_SECONDS = float(os.environ.get("XS_CHAOS_GROWTH_SECONDS", "10"))
FULL_ROUNDS = int(os.environ.get("XS_CHAOS_FULL_ROUNDS", "1"))
SMALL_MAP = 1 << 20
# ``xs`` itself, with the map starting at SMALL_MAP instead of 1 GiB
XS_SMALL_MAP = [sys.executable, "-c",
                "import runpy, sys\n"
                "import storage.store as st\n"
                "st.INITIAL_MAP = %d\n"
                "sys.argv[0] = 'xs'\n"
                "runpy.run_module('xstream_cli', run_name='__main__', alter_sys=True)\n" % SMALL_MAP]
STORE_FILES = {"data.mdb", "lock.mdb", "lock"}
AN_ID = re.compile(rb"\A[0-9]+-[0-9]+\Z")


def xs(db, *args, input=None, launcher=XS, timeout=60):
    return subprocess.run(launcher + ["--db", str(db)] + list(args), cwd=ROOT, input=input,
                          capture_output=True, timeout=timeout)


def state(db):
    """(every database's rows, the PEL entries counted) of the store at
    ``db``, after checking its PEL indexes agree."""
    s = Store(str(db))
    try:
        return dump(s), check_pel_indexes(s)
    finally:
        s.close()


def no_traceback(p, what):
    err = p.stderr.decode("utf-8", "replace") if isinstance(p.stderr, bytes) else p.stderr
    assert "Traceback" not in err and "MDB_" not in err, "%s:\n%s" % (what, err[-3000:])


# ===================================================================== restore

def _content(db, entries, seed, script=b""):
    """A store with streams s and t, group g on s with pending entries."""
    rng = random.Random(seed)
    lines = [b"XADD s * n %d v %s" % (k, b"%x" % rng.getrandbits(400)) for k in range(entries)]
    lines += [b"XADD t * k %d" % k for k in range(entries % 97 + 3)]
    lines += [b"XGROUP CREATE s g 0", b"XREADGROUP GROUP g c1 COUNT %d STREAMS s >" % (entries // 3 + 1),
              b"XREADGROUP GROUP g c2 COUNT 5 STREAMS s >", b"XACK s g 0-1"]
    p = xs(db, "--raw", input=b"\n".join(lines) + b"\n" + script, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]


def test_restore_killed_at_random_moments_leaves_the_old_store_or_the_new_one_never_a_mix(tmp_path):
    rng = random.Random(SEED)
    src, pristine, db, tmp = (tmp_path / n for n in ("src", "a", "db", "tmp"))
    tmp.mkdir()
    _content(src, 60000, 1)
    snap = tmp_path / "b.snap"
    assert xs(src, "save", str(snap)).returncode == 0
    _content(pristine, 500, 2)
    a, a_pel = state(pristine)
    # what a completed restore makes of A (ids of streams and groups come
    # from the store's counters, so B's rows are those restored onto A)
    shutil.copytree(pristine, db)
    t0 = time.monotonic()
    p = xs(db, "restore", "--replace", str(snap), timeout=300)
    full = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    b, b_pel = state(db)
    assert a != b and a_pel > 0 and b_pel > 0
    lengths = {b"500\n": "A", b"60000\n": "B"}
    assert xs(db, "--raw", "XLEN", "s").stdout == b"60000\n"
    shutil.rmtree(db)
    shutil.copytree(pristine, db)
    env = dict(os.environ, TMPDIR=str(tmp))
    kills = completed = grown = resets = 0
    seen = {"A": 0, "B": 0}
    info = lambda: "seed %d, %d kills, full restore %.2f s" % (SEED, kills, full)  # noqa: E731
    while kills < RESTORE_KILLS:
        stdin = rng.random() < 0.5
        small = rng.random() < 0.3
        args = (XS_SMALL_MAP if small else XS) + ["--db", str(db), "restore", "--replace",
                                                   "-" if stdin else str(snap)]
        with open(snap, "rb") as f:
            p = subprocess.Popen(args, cwd=ROOT, env=env, stdin=f if stdin else subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # from before the store is opened to after the commit
        time.sleep(rng.uniform(0.02, full * (2.0 if small else 1.2)))
        alive = p.poll() is None
        p.kill()
        code = p.wait()
        err = p.stderr.read().decode("utf-8", "replace")
        assert "Traceback" not in err, "%s\n%s" % (info(), err)
        if alive:
            kills += 1
            grown += small
        else:
            assert code == 0, "restore failed (%s): %s" % (info(), err)
            completed += 1
        mine = [n for n in os.listdir(tmp) if "-%d-" % p.pid in n]
        others = [n for n in os.listdir(tmp) if n not in mine]
        # a run that made its temporary file had swept the killed runs' ones first
        assert not (mine and others), "stale temporary files %r next to %r (%s)" % (others, mine, info())
        if not alive:
            assert not os.listdir(tmp), "a completed restore left %r (%s)" % (os.listdir(tmp), info())
        assert set(os.listdir(db)) <= STORE_FILES, "left in the store: %r (%s)" % (os.listdir(db), info())
        q = xs(db, "--raw", "XLEN", "s")
        assert q.returncode == 0 and q.stdout in lengths, (q.stdout, q.stderr, info())
        now, _ = state(db)
        which = "A" if now == a else "B" if now == b else None
        assert which is not None, "after a kill the store is neither A nor B (%s)" % info()
        assert which == lengths[q.stdout]
        seen[which] += 1
        if which == "B":                # killed after the commit, or completed: start again from A
            resets += 1
            shutil.rmtree(db)
            shutil.copytree(pristine, db)
    p = subprocess.run(XS + ["--db", str(db), "restore", "--replace", "-"], cwd=ROOT, env=env,
                       stdin=open(snap, "rb"), capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert state(db)[0] == b
    assert not os.listdir(tmp), os.listdir(tmp)
    assert seen["A"] > 0, "no kill landed before the commit (%s)" % info()
    print("restore chaos: %s; %d kills (%d with a small map), %d completed, store A %d times, B %d times; "
          "B has %d entries, %d pending" % (info(), kills, grown, completed, seen["A"], seen["B"], 60000, b_pel))
