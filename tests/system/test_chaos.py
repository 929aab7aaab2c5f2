"""Chaos: many xs processes on one store, killed with SIGKILL at random
and restarted, then the store is checked (issue 14, soak and chaos).

Four producers (script mode, one XADD at a time, so every reply is an
acknowledged durable write; some also add to a trimmed stream with
MAXLEN ~), three group consumers (XREADGROUP ... BLOCK, XACK, and
XAUTOCLAIM to take over what killed ones left), a ``tail -f`` reader,
a trimmer (``xs trim``), and ``xs compact`` attempts all run at once;
every 0.1-0.5 s one of them, chosen at random, gets SIGKILL and is
started again.  Afterwards:

  * the store opens and the three PEL indexes and their counters agree;
  * every acknowledged XADD of the untrimmed stream is there with its
    fields; no entry is there twice;
  * no entry whose XACK was answered is still pending;
  * every pending entry is at or below the group's last-delivered ID,
    and XINFO STREAM FULL, XINFO GROUPS and XPENDING answer.

XS_CHAOS_SECONDS (default 20) sets how long it runs, XS_CHAOS_SEED the
seed (printed on failure), XS_CHAOS_PRODUCERS / XS_CHAOS_CONSUMERS how
many of each (default 4 / 3 for a 2-core CI machine; the soak run in the
README used 8 / 8): ``XS_CHAOS_SECONDS=600 XS_CHAOS_PRODUCERS=8
XS_CHAOS_CONSUMERS=8 python3 -m pytest -s tests/system/test_chaos.py``.
"""
import json
import os
import random
import subprocess
import sys
import threading
import time

from storage.options import RangeOptions
from storage.store import Store
from tests.harness.stores import check_pel_indexes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]
SECONDS = float(os.environ.get("XS_CHAOS_SECONDS", "20"))
SEED = int(os.environ.get("XS_CHAOS_SEED", str(int(time.time()) % 100000)))
PRODUCERS = int(os.environ.get("XS_CHAOS_PRODUCERS", "4"))
CONSUMERS = int(os.environ.get("XS_CHAOS_CONSUMERS", "3"))
EVERYTHING = RangeOptions((0, 0), (2 ** 64 - 1, 2 ** 64 - 1))


class Role(threading.Thread):
    """Runs one xs process at a time, restarting it whenever it dies,
    until ``stop`` is set."""

    def __init__(self, name, db, stop):
        super().__init__(daemon=True, name=name)
        self.db, self.stop = str(db), stop
        self.proc = None
        self.lock = threading.Lock()
        self.errors = []
        self.starts = 0

    def spawn(self, args, **kw):
        p = subprocess.Popen(XS + ["--db", self.db] + args, cwd=ROOT, stderr=subprocess.PIPE, **kw)
        with self.lock:
            self.proc = p
            self.starts += 1
        return p

    def kill(self):
        with self.lock:
            p = self.proc
        if p is not None and p.poll() is None:
            p.kill()
            return True
        return False

    def reap(self, p):
        p.kill()
        p.wait()
        err = p.stderr.read().decode("utf-8", "replace")
        if "Traceback" in err:
            self.errors.append(err)

    def run(self):
        while not self.stop.is_set():
            try:
                self.once()
            except (BrokenPipeError, ValueError, OSError):
                pass                      # its process was killed under it
            except BaseException as e:    # a bug in this test or a bad reply: fail, do not hide it
                self.errors.append("%s: %r" % (self.name, e))
                return


class Producer(Role):
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
                extra = b"XADD t MAXLEN ~ 100 * w %d n %d\n" % (self.k, n) if n % 3 == 0 else b""
                p.stdin.write(b"XADD s * w %d n %d\n" % (self.k, n) + extra)
                p.stdin.flush()
                line = p.stdout.readline()
                if not line:
                    return
                self.acked[line.strip()] = n
                if extra and not p.stdout.readline():
                    return
        finally:
            self.reap(p)


class Consumer(Role):
    def __init__(self, k, db, stop):
        super().__init__("consumer%d" % k, db, stop)
        self.cname = b"c%d" % k
        self.acked = set()

    def once(self):
        p = self.spawn(["--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        rng = random.Random()
        try:
            while not self.stop.is_set():
                if rng.random() < 0.2:
                    p.stdin.write(b"XAUTOCLAIM s g %s 300 0 COUNT 5\n" % self.cname)
                    p.stdin.flush()
                    line = p.stdout.readline()
                    if not line:
                        return
                    ids = [e[0] for e in json.loads(line)[1]]
                else:
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
            self.reap(p)


class Repeat(Role):
    """A one-shot or long-running command, started again when it ends."""

    def __init__(self, name, db, stop, args, pause, ok=(0,)):
        super().__init__(name, db, stop)
        self.args, self.pause, self.ok = args, pause, ok
        self.bad = []
        self.codes = []

    def once(self):
        p = self.spawn(self.args, stdout=subprocess.DEVNULL)
        code = p.wait()
        err = p.stderr.read().decode("utf-8", "replace")
        if "Traceback" in err:
            self.errors.append(err)
        self.codes.append(code)
        if code >= 0 and code not in self.ok:
            self.bad.append((code, err.strip()))
        self.stop.wait(self.pause)


def test_random_sigkills_of_many_processes_leave_a_consistent_store_and_lose_no_acknowledged_write(tmp_path):
    db = tmp_path / "store"
    subprocess.run(XS + ["--db", str(db), "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], check=True,
                   cwd=ROOT, capture_output=True)
    rng = random.Random(SEED)
    stop = threading.Event()
    producers = [Producer(k, db, stop) for k in range(PRODUCERS)]
    consumers = [Consumer(k, db, stop) for k in range(CONSUMERS)]
    others = [Repeat("tail", db, stop, ["tail", "-f", "s"], 0.05),
              Repeat("trim", db, stop, ["trim", "t", "--max-len", "50", "-q"], 0.3),
              # compaction waits at most 1 s for the long-running holders
              # (tail -f, the script-mode processes), then fails cleanly
              Repeat("compact", db, stop, ["compact", "--wait", "1", "-q"], 1.0, ok=(0, 1))]
    roles = producers + consumers + others
    for r in roles:
        r.start()
    kills = 0
    end = time.monotonic() + SECONDS
    try:
        while time.monotonic() < end:
            time.sleep(0.1 + rng.random() * 0.4)
            kills += rng.choice(roles).kill()
    finally:
        stop.set()
        for r in roles:
            r.kill()
        for r in roles:
            r.join(timeout=30)
    info = "seed %d, %d kills, starts %s" % (SEED, kills, {r.name: r.starts for r in roles})
    for r in roles:
        assert not r.errors, "%s: a traceback (%s):\n%s" % (r.name, info, r.errors[0])
    for r in others:
        assert not r.bad, "%s failed unexpectedly (%s): %r" % (r.name, info, r.bad[:3])

    store = Store(str(db))
    try:
        check_pel_indexes(store)
        entries = store.run(lambda tx: tx.range(b"s", EVERYTHING), write=False)
        stored = {}
        for e in entries:
            i = b"%d-%d" % e.id
            assert i not in stored, "entry %r twice (%s)" % (i, info)
            stored[i] = [bytes(x) for x in e[1]]
    finally:
        store.close()
    acked_writes = 0
    for p in producers:
        for i, n in p.acked.items():
            assert stored.get(i) == [b"w", b"%d" % p.k, b"n", b"%d" % n], \
                "acknowledged XADD %r (producer %d, n %d) lost or changed (%s)" % (i, p.k, n, info)
        acked_writes += len(p.acked)
    assert acked_writes > 50, "too little work to mean anything (%s)" % info

    def xs_json(*args):
        out = subprocess.run(XS + ["--db", str(db), "--json"] + list(args), cwd=ROOT, capture_output=True,
                             timeout=60)
        assert out.returncode == 0, (args, out.stderr)
        return json.loads(out.stdout)
    pending = {e[0].encode() for e in xs_json("XPENDING", "s", "g", "-", "+", "1000000")}
    for c in consumers:
        still = c.acked & pending
        assert not still, "XACK answered but still pending: %r (%s)" % (sorted(still)[:5], info)
    (group,) = xs_json("XINFO", "GROUPS", "s")
    last = tuple(int(x) for x in group["last-delivered-id"].split("-"))
    for i in pending:
        assert tuple(int(x) for x in i.split(b"-")) <= last
    assert xs_json("XINFO", "STREAM", "s", "FULL")["length"] == len(stored)
    print("chaos: %s; %d acknowledged XADDs, %d acknowledged XACKs, %d pending, compact exits %s" % (
        info, acked_writes, sum(len(c.acked) for c in consumers), len(pending),
        {c: others[2].codes.count(c) for c in set(others[2].codes)}))
