"""More chaos (issue 14): SIGKILL at random moments of ``xs restore`` and
of map growth, and a disk that fills up while producers and consumers
run.  After every kill the store opens, answers and passes the
consistency check (tests.harness.stores.check_pel_indexes).

  * restore: a store holding content A; ``xs restore --replace`` of a
    snapshot B (60k entries, a group with pending entries) is killed at
    a random moment, again and again; afterwards the store is exactly A
    or exactly B (every LMDB database compared), never a mix, and the
    temporary copy that ``xs restore -`` makes of stdin is swept by the
    next run.  Some runs start with a 1 MiB map so that the restore
    grows it (a grow restarts the transaction) while it may be killed.
  * map growth: script-mode writers add 256 KiB entries to a store whose
    map starts at 1 MiB (storage.opening.INITIAL_MAP patched in the
    launcher, the product's own entry point otherwise), so that it grows
    many times; writers are killed at random; every XADD whose reply was
    read is there afterwards, and one-shot readers running meanwhile
    never fail (no MDB_MAP_RESIZED, no traceback).
  * full disk: on a 2 MiB tmpfs (root only, else skipped; the fixture
    of tests/system/test_hardening.py), a filler file first, then producers and
    group consumers until the disk is full: every failing command says
    so in one line with exit status 1, no acknowledged XADD or XACK is
    lost, and once the filler is deleted the store writes again.

Each test is bounded for CI (~10-20 s).  Longer runs:
XS_CHAOS_RESTORE_KILLS (default 6), XS_CHAOS_GROWTH_SECONDS (default 10),
XS_CHAOS_FULL_ROUNDS (default 2), XS_CHAOS_SEED (printed on failure).
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
from tests.harness.stores import check_pel_indexes, dump
from tests.system.test_chaos import EVERYTHING, ROOT, SEED, XS, Role
from tests.system.test_hardening import fill, one_line_error, small_fs  # noqa: F401 (small_fs: a fixture)

RESTORE_KILLS = int(os.environ.get("XS_CHAOS_RESTORE_KILLS", "6"))
GROWTH_SECONDS = float(os.environ.get("XS_CHAOS_GROWTH_SECONDS", "10"))
FULL_ROUNDS = int(os.environ.get("XS_CHAOS_FULL_ROUNDS", "2"))
SMALL_MAP = 1 << 20
# ``xs`` itself, with the map starting at SMALL_MAP instead of 1 GiB
XS_SMALL_MAP = [sys.executable, "-c",
                "import os, runpy, sys\n"
                "import storage.opening\n"
                "import storage.store as st\n"
                "storage.opening.INITIAL_MAP = %d\n"
                "log = os.environ.get('XS_TEST_GROW_LOG')\n"
                "if log:\n"
                "    # count the map growths (and adoptions of another process's) done\n"
                "    real = st.Store._set_mapsize\n"
                "    def counted(self, size):\n"
                "        real(self, size)\n"
                "        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)\n"
                "        os.write(fd, b'adopt\\n' if size == 0 else b'grow\\n')\n"
                "        os.close(fd)\n"
                "    st.Store._set_mapsize = counted\n"
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
    strays = set()
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
        # nothing but xs's own copies: Python's tempfile.gettempdir() probe
        # file, which a kill could leave once in ~240, is no longer made
        listing = os.listdir(tmp)
        ours = [n for n in listing if n.startswith("xs-restore-")]
        strays.update(n for n in listing if n not in ours)
        assert not strays, "files that are not xs's in TMPDIR: %r (%s)" % (sorted(strays), info())
        mine = [n for n in ours if "-%d-" % p.pid in n]
        others = [n for n in ours if n not in mine]
        # a run that made its temporary file had swept the killed runs' ones first
        assert not (mine and others), "stale temporary files %r next to %r (%s)" % (others, mine, info())
        if not alive:               # completed: its own copy is gone (and a "-" run swept the others)
            assert not mine and not (stdin and others), "a completed restore left %r (%s)" % (
                os.listdir(tmp), info())
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
    assert not [n for n in os.listdir(tmp) if n.startswith("xs-restore-")], os.listdir(tmp)
    assert seen["A"] > 0, "no kill landed before the commit (%s)" % info()
    print("restore chaos: %s; %d kills (%d with a small map), %d completed, store A %d times, B %d times; "
          "B has %d entries, %d pending; %d stray tempfile probe files" % (
              info(), kills, grown, completed, seen["A"], seen["B"], 60000, b_pel, len(strays)))


# ================================================================= map growth

class SmallMap(Role):
    """A Role (tests/system/test_chaos.py) whose processes start with a 1 MiB map."""

    def spawn(self, args, **kw):
        p = subprocess.Popen(XS_SMALL_MAP + ["--db", self.db] + args, cwd=ROOT, stderr=subprocess.PIPE, **kw)
        with self.lock:
            self.proc = p
            self.starts += 1
        return p


def payload(k, n, size):
    unit = b"%d.%d;" % (k, n)
    return (unit * (size // len(unit) + 1))[:size]


class BigWriter(SmallMap):
    """Script mode, one XADD of a ``size``-byte entry at a time: every
    ID read back is an acknowledged write."""

    def __init__(self, k, db, stop, size):
        super().__init__("writer%d" % k, db, stop)
        self.k, self.n, self.size = k, 0, size
        self.acked = {}                # id -> n

    def once(self):
        p = self.spawn(["--raw"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            while not self.stop.is_set():
                n = self.n
                self.n += 1
                p.stdin.write(b"XADD big * w %d n %d p %s\n" % (self.k, n, payload(self.k, n, self.size)))
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    return
                assert AN_ID.match(line.strip()), line[:200]
                self.acked[line.strip()] = n
        finally:
            self.reap(p)


class OneShotReader(SmallMap):
    """One-shot reads, each of which must answer (exit 0, no traceback,
    no LMDB error) however the map grows meanwhile."""

    COMMANDS = (["XLEN", "big"], ["XRANGE", "big", "-", "+", "COUNT", "2"], ["XREVRANGE", "big", "+", "-", "COUNT", "1"],
                ["XINFO", "STREAM", "big"], ["SCAN", "0"])

    def __init__(self, k, db, stop, rng):
        super().__init__("reader%d" % k, db, stop)
        self.rng = rng
        self.reads = 0

    def once(self):
        args = self.rng.choice(self.COMMANDS)
        p = self.spawn(["--raw"] + args, stdout=subprocess.DEVNULL)
        code = p.wait()
        err = p.stderr.read().decode("utf-8", "replace")
        if code < 0:                   # killed by the test at the end
            return
        if code != 0 or "Traceback" in err or "MDB_" in err:
            self.errors.append("%s exited %d: %s" % (args, code, err[-2000:]))
        self.reads += 1


def test_map_growth_killed_at_random_loses_no_acknowledged_write_and_fails_no_reader(tmp_path):
    """Rounds on fresh stores (a map of twice the data file is what a
    process opens with, so growth is densest while a store is young)."""
    rng = random.Random(SEED)
    log = tmp_path / "grow.log"
    os.environ["XS_TEST_GROW_LOG"] = str(log)      # inherited by the launcher's processes
    kills = acked = reads = stored_total = 0
    rounds = max(1, int(GROWTH_SECONDS / 2.5))
    try:
        for rnd in range(rounds):
            db = tmp_path / ("store%d" % rnd)
            k, a, r, n = _growth_round(db, rng, GROWTH_SECONDS / rounds, log)
            kills, acked, reads, stored_total = kills + k, acked + a, reads + r, stored_total + n
    finally:
        del os.environ["XS_TEST_GROW_LOG"]
    events = log.read_bytes().split() if log.exists() else []
    grows, adopts = events.count(b"grow"), events.count(b"adopt")
    info = "seed %d, %d rounds, %d kills, %d growths, %d adoptions" % (SEED, rounds, kills, grows, adopts)
    assert grows >= 2 * rounds, "the map hardly grew (%s)" % info
    assert acked > 20 and reads > 5 and kills > 3, (acked, reads, info)
    print("map growth chaos: %s; %d acknowledged XADDs of 256 KiB all present (%d stored), %d one-shot reads "
          "all answered" % (info, acked, stored_total, reads))


def _grows(log):
    return log.read_bytes().split().count(b"grow") if log.exists() else 0


def _growth_round(db, rng, seconds, log):
    """``seconds`` of kills, longer (up to three times) until the map
    has grown twice in this round: a loaded machine writes slower."""
    grows = _grows(log)
    p = xs(db, "--raw", "XADD", "big", "*", "a", "1", launcher=XS_SMALL_MAP)
    assert p.returncode == 0, p.stderr
    first = p.stdout.strip()
    stop = threading.Event()
    writers = [BigWriter(k, db, stop, 262144) for k in range(2)]
    readers = [OneShotReader(k, db, stop, random.Random(rng.random())) for k in range(2)]
    for r in writers + readers:
        r.start()
    kills = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end or (_grows(log) < grows + 2 and time.monotonic() < end + 2 * seconds):
            time.sleep(rng.uniform(0.1, 0.6))
            kills += rng.choice(writers).kill()
    finally:
        stop.set()
        for r in writers + readers:
            r.kill()
        for r in writers + readers:
            r.join(timeout=30)
    info = "seed %d, %s, %d kills, starts %s" % (SEED, db.name, kills, {r.name: r.starts for r in writers})
    for r in writers + readers:
        assert not r.errors, "%s (%s):\n%s" % (r.name, info, r.errors[0])
    s = Store(str(db))
    try:
        check_pel_indexes(s)
        stored = {}
        for e in s.run(lambda tx: tx.range(b"big", EVERYTHING), write=False):
            i = b"%d-%d" % e.id
            assert i not in stored, "entry %r twice (%s)" % (i, info)
            stored[i] = [bytes(x) for x in e[1]]
    finally:
        s.close()
    assert stored.pop(first) == [b"a", b"1"]
    acked = 0
    for w in writers:
        for i, n in w.acked.items():
            want = [b"w", b"%d" % w.k, b"n", b"%d" % n, b"p", payload(w.k, n, w.size)]
            assert stored.get(i) == want, "acknowledged XADD %r (writer %d, n %d) lost or changed (%s)" % (
                i, w.k, n, info)
        acked += len(w.acked)
    q = xs(db, "--raw", "XLEN", "big")
    assert q.returncode == 0 and int(q.stdout) == len(stored) + 1, q
    return kills, acked, sum(r.reads for r in readers), len(stored)


# ================================================================== full disk

FULL = "no space left on device"


class OnFullDisk(Role):
    """A script-mode process, started again whenever it ends; one that
    ends by itself (not killed by the test) must have exited 1 with the
    one-line "no space left on device" error."""

    def __init__(self, name, db, stop):
        super().__init__(name, db, stop)
        self.full = 0                  # exits for a full disk

    def finish(self, p):
        stopped = self.stop.is_set()
        if stopped and p.stdin is not None:
            try:
                p.stdin.close()      # the round ended while it still served: it must end at EOF
            except OSError:
                pass
        try:
            p.wait(timeout=30)
        finally:
            p.kill()
        code = p.wait()
        err = p.stderr.read().decode("utf-8", "replace")
        if code == -9 or (stopped and code == 0 and not err):
            return
        if code != 1 or "Traceback" in err or not err.startswith("xs: ") or err.count("\n") != 1 \
                or FULL not in err:
            self.errors.append("%s exited %d: %s" % (self.name, code, err[-2000:]))
        else:
            self.full += 1


class FullDiskProducer(OnFullDisk):
    def __init__(self, k, db, stop):
        super().__init__("producer%d" % k, db, stop)
        self.k, self.n = k, 0
        self.acked = {}                # id -> n

    def once(self):
        p = self.spawn(["--raw"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            while not self.stop.is_set():
                n = self.n
                self.n += 1
                p.stdin.write(b"XADD s * w %d n %d p %s\n" % (self.k, n, payload(self.k, n, 1000)))
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    return
                assert AN_ID.match(line.strip()), line[:200]
                self.acked[line.strip()] = n
        finally:
            self.finish(p)


class FullDiskConsumer(OnFullDisk):
    def __init__(self, k, db, stop):
        super().__init__("consumer%d" % k, db, stop)
        self.cname = b"c%d" % k
        self.acked = set()

    def once(self):
        p = self.spawn(["--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            while not self.stop.is_set():
                p.stdin.write(b"XREADGROUP GROUP g %s COUNT 5 BLOCK 50 STREAMS s >\n" % self.cname)
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    return
                r = json.loads(line)
                ids = [e[0] for e in r["s"]] if r else []
                if not ids:
                    continue
                p.stdin.write(b"XACK s g %s\n" % " ".join(ids).encode())
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    return
                assert json.loads(line) <= len(ids)
                self.acked.update(i.encode() for i in ids)
        finally:
            self.finish(p)


class OneShotProducer(Role):
    """``xs XADD`` one at a time: exit 0 and an ID, or the one-line
    full-disk error with exit status 1."""

    def __init__(self, db, stop):
        super().__init__("oneshot", db, stop)
        self.acked = {}
        self.n = self.full = self.in_a_row = 0

    def once(self):
        n = self.n
        self.n += 1
        p = self.spawn(["--raw", "XADD", "s", "*", "w", "9", "n", "%d" % n, "p", payload(9, n, 1000).decode()],
                       stdout=subprocess.PIPE)
        out, err = p.communicate(timeout=60)
        if p.returncode == -9:                 # killed by the test at the end
            return
        if p.returncode == 0:
            assert AN_ID.match(out.strip()), out[:200]
            self.acked[out.strip()] = n
            self.in_a_row = 0
        else:
            one_line_error(subprocess.CompletedProcess(p.args, p.returncode, out, err), FULL, "nothing was written")
            self.full += 1
            self.in_a_row += 1


def _stored(db):
    s = Store(str(db))
    try:
        pel = check_pel_indexes(s)
        out = {}
        for e in s.run(lambda tx: tx.range(b"s", EVERYTHING), write=False):
            i = b"%d-%d" % e.id
            assert i not in out, "entry %r twice" % i
            out[i] = [bytes(x) for x in e[1]]
        return out, pel
    finally:
        s.close()


def test_a_disk_filling_up_under_producers_and_consumers_fails_cleanly_loses_nothing_and_recovers(small_fs):  # noqa: F811
    rng = random.Random(SEED)
    totals = {"acked": 0, "xacks": 0, "full": 0, "kills": 0}
    for rnd in range(FULL_ROUNDS):
        db = os.path.join(small_fs, "store%d" % rnd)           # each round fills a fresh store
        p = xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        assert p.returncode == 0, p.stderr
        filler = fill(small_fs, 600)             # leaves about 600 KiB for the store to fill
        stop = threading.Event()
        producers = [FullDiskProducer(k, db, stop) for k in range(2)]
        consumers = [FullDiskConsumer(k, db, stop) for k in range(2)]
        oneshot = OneShotProducer(db, stop)
        roles = producers + consumers + [oneshot]
        for r in roles:
            r.start()
        end = time.monotonic() + 20
        kills = 0
        try:
            while time.monotonic() < end:
                time.sleep(rng.uniform(0.2, 0.8))
                if oneshot.in_a_row >= 3 and all(r.full for r in producers):
                    break                                  # full: every writer was refused
                if rng.random() < 0.5:
                    kills += rng.choice(producers + consumers).kill()
        finally:
            stop.set()
            for r in roles:
                r.kill()
            for r in roles:
                r.join(timeout=30)
        info = "seed %d, round %d, %d kills, full-disk exits %s" % (
            SEED, rnd, kills, {r.name: r.full for r in roles})
        for r in roles:
            assert not r.errors, "%s (%s):\n%s" % (r.name, info, r.errors[0])
        assert oneshot.in_a_row >= 3 and all(r.full for r in producers), "the disk never filled (%s)" % info
        # on the full disk: the store opens, answers, nothing acknowledged is lost
        stored, pel = _stored(db)
        acked = 0
        for w in producers + [oneshot]:
            k = 9 if w is oneshot else w.k
            for i, n in w.acked.items():
                want = [b"w", b"%d" % k, b"n", b"%d" % n, b"p", payload(k, n, 1000)]
                assert stored.get(i) == want, "acknowledged XADD %r lost or changed (%s)" % (i, info)
            acked += len(w.acked)
        q = xs(db, "--json", "XPENDING", "s", "g", "-", "+", "1000000")
        assert q.returncode == 0, q.stderr
        pending = {e[0].encode() for e in json.loads(q.stdout)}
        assert len(pending) == pel
        for c in consumers:
            assert not (c.acked & pending), "XACK answered but still pending (%s)" % info
        # space freed: writes work again, and the store is consistent
        os.unlink(filler)
        q = xs(db, "--raw", "XADD", "s", "*", "after", "%d" % rnd)
        assert q.returncode == 0 and AN_ID.match(q.stdout.strip()), q.stderr
        after_id = q.stdout.strip().decode()
        q = xs(db, "--json", "XREADGROUP", "GROUP", "g", "late", "COUNT", "100000", "STREAMS", "s", ">")
        assert q.returncode == 0, q.stderr
        ids = [e[0] for e in json.loads(q.stdout)["s"]]
        assert after_id in ids, (after_id, ids[-3:])
        q = xs(db, "--raw", "XACK", "s", "g", *ids)
        assert q.returncode == 0 and int(q.stdout) == len(ids), q.stderr
        after, pel = _stored(db)
        assert set(stored) <= set(after)
        totals["acked"] += acked
        totals["xacks"] += sum(len(c.acked) for c in consumers)
        totals["full"] += sum(r.full for r in roles)
        totals["kills"] += kills
        shutil.rmtree(db)
    print("full disk chaos: seed %d, %d rounds; %d acknowledged XADDs all present, %d acknowledged XACKs not "
          "pending, %d clean full-disk exits, %d kills" % (SEED, FULL_ROUNDS, totals["acked"], totals["xacks"],
                                                          totals["full"], totals["kills"]))
