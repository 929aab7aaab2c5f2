"""xs replicate --to DIR and xs restore --from DIR (issue 41): kill -9 of
everything at random loses nothing acknowledged more than a second
before the loss; a restore at a time gives exactly the snapshot taken
then; one replicator per DIR; private files; --retention; a replica
that fell past the backlog takes a full copy again, saying so."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]


def xs(db, *args, check=True, inp=None, timeout=60):
    r = subprocess.run(XS + ["--db", str(db)] + [str(a) for a in args], cwd=ROOT, input=inp,
                       capture_output=True, timeout=timeout)
    if check:
        assert r.returncode == 0, (args, r.stderr.decode())
    return r


def wait_for(fn, timeout=60, what="it"):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.05)


def replicator(db, rep, *extra, log=None):
    return subprocess.Popen(XS + ["--db", str(db), "replicate", "--to", str(rep)] + list(extra), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=log if log is not None else subprocess.DEVNULL)


def status(db, rep):
    r = xs(db, "replicate", "--status", *(["--to", rep] if rep else []), "--json", check=False)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


def caught_up(db, rep):
    def ok():
        s = status(db, rep)
        return s is not None and s.get("dir", {}).get("lag_commits") == 0
    wait_for(ok, what="the replica to catch up")


def running(rep):
    """Wait until a replicator holds DIR's lock (it then handles SIGTERM)."""
    import fcntl

    def held():
        fd = os.open(os.path.join(str(rep), "lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False
    wait_for(held, what="the replicator to start")


def export(db):
    return xs(db, "export", "--meta").stdout


def stop(p):
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0


# ======================================================== point in time

def test_restore_at_times_gives_the_snapshots_taken_then(tmp_path):
    db, rep = tmp_path / "db", tmp_path / "rep"
    xs(db, "XADD", "s", "*", "f", "0")
    p = replicator(db, rep, "--base-interval", "1s")
    try:
        wait_for(lambda: status(db, rep) and status(db, rep)["dir"]["generations"] == 1, what="the first base")
        saves = []
        for phase in range(3):
            script = "".join("XADD s * f %d-%d\n" % (phase, i) for i in range(30))
            script += "XGROUP CREATE s g%d 0\n" % phase
            script += "XREADGROUP GROUP g0 c%d COUNT 7 STREAMS s >\n" % phase
            script += "XACK s g0 %s\n" % "0-1"
            script += "XADD s IDMP prod i%d * k v\nXADD s IDMP prod i%d * k v\n" % (phase, phase)
            script += "XAUTOCLAIM s g0 c9 0 0 COUNT 2\nPEXPIRE s %d\n" % (10 ** 9 + phase)
            xs(db, inp=script.encode())
            snap = tmp_path / ("snap%d" % phase)
            xs(db, "save", snap)
            t = int(time.time() * 1000)
            saves.append((t, snap))
            wait_for(lambda: int(time.time() * 1000) > t, what="the clock to move on")   # next commit: later ms
            if phase < 2:
                wait_for(lambda: status(db, rep)["dir"]["generations"] >= phase + 2, what="a new generation")
        caught_up(db, rep)
    finally:
        stop(p)
    lst = xs(db, "restore", "--from", rep, "--list").stdout.decode()
    assert "restorable: commits 0.." in lst
    for i, (t, snap) in enumerate(saves):
        want, got = tmp_path / ("want%d" % i), tmp_path / ("got%d" % i)
        xs(want, "restore", snap)
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t / 1000)) + ".%03dZ" % (t % 1000)
        r = xs(got, "restore", "--from", rep, "--at", iso)
        assert b"commit " in r.stderr
        assert export(got) == export(want), i
    # --at-id of the commit a restore reports gives the same store
    r = xs(tmp_path / "latest", "restore", "--from", rep)
    n = int(r.stderr.decode().split("; commit ")[1].split()[0])
    xs(tmp_path / "byid", "restore", "--from", rep, "--at-id", n)
    assert export(tmp_path / "byid") == export(tmp_path / "latest") == export(db)


# ============================================================ kill -9

def _producer(db, out):
    return subprocess.Popen(XS + ["--db", str(db), "--raw"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def test_kill_9_campaign_loses_nothing_acknowledged_a_second_before_the_loss(tmp_path):
    db, rep = tmp_path / "db", tmp_path / "rep"
    rng = random.Random(41)
    xs(db, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    acked = []               # (id, time acknowledged)
    lock = threading.Lock()
    procs = {}
    stopping = threading.Event()

    def produce(k):
        while not stopping.is_set():
            p = _producer(db, None)
            procs["p%d" % k] = p
            try:
                for i in range(10 ** 9):
                    if stopping.is_set():
                        return
                    p.stdin.write(b"XADD s * k %d i %d\n" % (k, i))
                    p.stdin.flush()
                    line = p.stdout.readline()
                    if not line:
                        break
                    with lock:
                        acked.append((line.strip(), time.time()))
                    time.sleep(0.002)
            except (BrokenPipeError, ValueError, OSError):
                pass
            p.wait()

    def spawn(name):
        if name == "rep":
            return replicator(db, rep, "--base-interval", "3s", "--retention", "1h")
        # a group reader that acknowledges each entry it took (xs tail --group)
        return subprocess.Popen(XS + ["--db", str(db), "tail", "-f", "--group", "g", "--consumer", name, "s"],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for name in ("rep", "r1", "r2"):
        procs[name] = spawn(name)
    threads = [threading.Thread(target=produce, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    end = time.monotonic() + 12
    while time.monotonic() < end:
        time.sleep(0.2 + rng.random() * 0.8)
        victim = rng.choice(sorted(procs))
        p = procs[victim]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()
        if victim in ("rep", "r1", "r2"):
            procs[victim] = spawn(victim)
    # let the last replicator run a while (a dead replicator has no recovery point), then the loss
    procs["rep"].kill()
    procs["rep"].wait()
    procs["rep"] = spawn("rep")
    wait_for(lambda: status(db, rep) and status(db, rep)["replicas"], what="the replicator")
    time.sleep(2.0)
    loss = time.time()
    for p in procs.values():
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    stopping.set()
    for p in procs.values():
        p.wait()
    for t in threads:
        t.join(timeout=10)
    # 1. the store is lost: what the replica holds at that moment
    r1 = tmp_path / "r1"
    xs(r1, "restore", "--from", rep)
    ids = {json.loads(ln)["id"].encode() for ln in export(r1).split(b"\n") if b'"fields"' in ln}
    old = [i for i, t in acked if t < loss - 1.0]
    assert len(old) > 100
    missing = [i for i in old if i not in ids]
    assert not missing, "acknowledged more than 1 s before the loss, not in the replica: %r" % missing[:5]
    # 2. the restored store is one commit of the source: a prefix of its entries, its PEL among them
    src = [ln for ln in export(db).split(b"\n") if ln]
    got = [ln for ln in export(r1).split(b"\n") if ln]
    src_entries = [ln for ln in src if b'"fields"' in ln]
    got_entries = [ln for ln in got if b'"fields"' in ln]
    assert got_entries == src_entries[:len(got_entries)]
    # 3. caught up, the replica's latest is the source exactly
    p = replicator(db, rep)
    try:
        running(rep)
        caught_up(db, rep)
    finally:
        stop(p)
    r2 = tmp_path / "r2"
    xs(r2, "restore", "--from", rep)
    assert export(r2) == export(db)


# ====================================================== the directory

def test_one_replicator_per_directory_private_files_and_a_clean_sigterm(tmp_path):
    db, rep = tmp_path / "db", tmp_path / "rep"
    xs(db, "XADD", "s", "*", "f", "v")
    log = open(tmp_path / "log", "wb")
    p = replicator(db, rep, log=log)
    try:
        wait_for(lambda: status(db, rep) and status(db, rep)["dir"]["generations"] == 1, what="the first base")
        second = xs(db, "replicate", "--to", rep, check=False)
        assert second.returncode == 1
        assert b"another xs replicate is writing to" in second.stderr
        for d, dirs, files in os.walk(rep):
            assert os.stat(d).st_mode & 0o777 == 0o700, d
            for f in files:
                assert os.stat(os.path.join(d, f)).st_mode & 0o777 == 0o600, f
        if os.geteuid() == 0:
            r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "ls", str(rep)],
                               capture_output=True)
            assert r.returncode != 0 and b"Permission denied" in r.stderr
    finally:
        stop(p)
    log.close()
    text = (tmp_path / "log").read_bytes()
    assert b"generation 1: base at commit" in text and b"Traceback" not in text and b"stopped at commit" in text
    # a directory others may read is refused, changed in nothing
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o755)
    r = xs(db, "replicate", "--to", open_dir, check=False)
    assert r.returncode == 1 and b"chmod 700" in r.stderr and os.stat(open_dir).st_mode & 0o777 == 0o755


def test_a_store_without_replicas_has_no_log_and_forget_turns_it_off(tmp_path):
    import lmdb
    db, rep = tmp_path / "db", tmp_path / "rep"
    xs(db, "XADD", "s", "*", "f", "v")
    env = lmdb.open(str(db), readonly=True, lock=False, max_dbs=20)
    with pytest.raises(lmdb.NotFoundError):
        env.open_db(b"changelog", create=False)
    env.close()
    assert status(db, None)["logging"] is False
    p = replicator(db, rep)
    try:
        wait_for(lambda: status(db, rep) and status(db, rep)["dir"]["generations"] == 1, what="the first base")
    finally:
        stop(p)
    xs(db, "replicate", "--forget", "--to", rep)
    r = xs(db, "replicate", "--status")
    assert b"change log: off" in r.stdout


def test_retention_trim_behind_the_replica_and_resync_past_the_backlog(tmp_path):
    db, rep = tmp_path / "db", tmp_path / "rep"
    xs(db, "XADD", "s", "*", "f", "v")
    log = open(tmp_path / "log", "wb")
    p = replicator(db, rep, "--base-interval", "500ms", "--retention", "1s", "--backlog-size", "20kb", log=log)
    try:
        def pruned():          # commits go on (a new base only follows commits) until one is pruned
            xs(db, inp=b"".join(b"XADD s * f %d\n" % j for j in range(20)))
            return b"pruned" in (tmp_path / "log").read_bytes()
        wait_for(pruned, what="a generation pruned")
        caught_up(db, rep)
        # trimmed behind the replica: the store keeps (almost) nothing it already has
        wait_for(lambda: status(db, rep)["log_bytes"] < 20000, what="the log trimmed")
    finally:
        stop(p)
    gens = [n for n in os.listdir(rep) if n.startswith("gen-")]
    assert len(gens) <= 4
    # stopped, the replica falls past the 20 kB backlog: restarted, it re-syncs from a full copy
    for i in range(5):
        # (values that do not compress: the log compresses its records)
        xs(db, inp=b"".join(b"XADD s * f %s\n" % os.urandom(250).hex().encode() for j in range(20)))
    p = replicator(db, rep, "--backlog-size", "20kb", log=log)
    try:
        wait_for(lambda: b"re-syncing from a full copy" in (tmp_path / "log").read_bytes(), what="a re-sync")
        caught_up(db, rep)
    finally:
        stop(p)
    log.close()
    xs(tmp_path / "r", "restore", "--from", rep)
    assert export(tmp_path / "r") == export(db)


def test_the_documented_lines_run(tmp_path):
    """docs/replication.md's example, with its paths in tmp_path."""
    from tests.cli.test_readme_examples import marked_block
    lines = [ln.replace("/backup/events.rep", str(tmp_path / "rep")) for ln in
             marked_block("docs/replication.md", "replication example")]
    assert lines[0].endswith(" &") and len(lines) == 5
    db = tmp_path / "db"
    from tests.harness.commands import xs_on_path
    env = xs_on_path(tmp_path, db)

    def sh(line):
        return subprocess.run(["bash", "-c", line], env=env, cwd=str(tmp_path), capture_output=True, timeout=60)
    xs(db, "XADD", "s", "*", "f", "v")
    p = subprocess.Popen(["bash", "-c", "exec " + lines[0][:-2]], env=env, cwd=str(tmp_path),
                         stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: status(db, tmp_path / "rep") and status(db, tmp_path / "rep")["dir"]["generations"] == 1,
                 what="the first base")
        xs(db, inp=b"".join(b"XADD s * f %d\n" % i for i in range(42)))      # one commit
        for i in range(41):
            xs(db, "XADD", "s", "*", "f", str(i))
        caught_up(db, tmp_path / "rep")
        r = sh(lines[1])
        assert r.returncode == 0 and b"lag 0 commits" in r.stdout, r
    finally:
        stop(p)
    r = sh(lines[2])
    assert r.returncode == 0 and b"restorable: commits 0..42" in r.stdout, r
    r = sh(lines[3])                      # 10 minutes ago the replica did not exist yet
    assert r.returncode == 1 and b"starts later" in r.stderr, r
    r = sh(lines[4].replace("--db restored", "--db restored2").replace(" --replace", ""))
    assert r.returncode == 0, r
    xs(tmp_path / "restored", "XADD", "x", "*", "a", "b")
    r = sh(lines[4])
    assert r.returncode == 0, r
    assert xs(tmp_path / "restored", "XLEN", "s").stdout == b"84\n"
    assert xs(tmp_path / "restored", "EXISTS", "x").stdout == b"0\n"
