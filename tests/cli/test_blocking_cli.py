"""BLOCK for XREAD / XREADGROUP across processes: a blocked reader runs as
its own ``xs`` process; ``wait_blocked`` waits until it has armed its
inotify watch (visible in /proc), after which any commit wakes it.
Timeouts are generous (a loaded 2-core CI machine); latency bars live in
benchmarks/bench_block_latency.py.  The wait machinery itself, through
the library API, is tests/engine/test_blocking.py."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import ROOT, XS, new_store, run_xs

TIMEOUT = 30


def xs(db, *args, mode="json"):
    p = subprocess.run(XS + ["--db", str(db), "--" + mode] + list(args), capture_output=True,
                       timeout=TIMEOUT, cwd=ROOT)
    return p


def reply(p):
    return json.loads(p.stdout.decode())


def start(db, *args, mode="json", stdin=None):
    return subprocess.Popen(XS + ["--db", str(db), "--" + mode] + list(args), cwd=ROOT,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def inotify_watches(pid):
    """Number of inotify watches process ``pid`` holds (None: unknown)."""
    n = 0
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:inotify":
                    with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                        n += f.read().count("inotify wd:")
            except OSError:
                pass
    except OSError:
        return None
    return n


def wait_blocked(proc, timeout=TIMEOUT):
    """Wait until ``proc`` waits on an inotify watch (or, without
    inotify, give it a moment)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert proc.poll() is None, proc.communicate()
        n = inotify_watches(proc.pid)
        if n is None:
            time.sleep(1.0)
            return
        if n > 0:
            time.sleep(0.05)   # past the re-check: now in poll()
            return
        time.sleep(0.01)
    raise AssertionError("reader never blocked")


def finish(proc):
    out, err = proc.communicate(timeout=TIMEOUT)
    return proc.returncode, out, err


@pytest.fixture
def db(tmp_path):
    return new_store(tmp_path / "db")      # a blocking read never creates the store it waits on


CONSUMER = r"""
import sys
from xstream_cli.execution.session import Session
s = Session(sys.argv[1], "raw")
name = sys.argv[2].encode()
while True:
    r = s.execute([b"XREADGROUP", b"GROUP", b"g", name, b"COUNT", b"1", b"BLOCK", b"0",
                   b"STREAMS", b"s", b">"])
    for key, ents in r.pairs:
        for e in ents:
            sys.stdout.write(e[0].decode() + "\n")
            sys.stdout.flush()
"""


# ------------------------------------------------------------ script mode


def test_xread_block_count_limits_the_reply(db):
    r = start(db, "XREAD", "COUNT", "2", "BLOCK", "0", "STREAMS", "s", "0")
    wait_blocked(r)
    run_xs(db, ["XADD s 1-1 a 1", "XADD s 2-1 a 2", "XADD s 3-1 a 3"])   # one commit
    assert json.loads(finish(r)[1]) == {"s": [["1-1", ["a", "1"]], ["2-1", ["a", "2"]]]}


def test_blocked_consumers_of_a_group_share_entries_fairly(db):
    """Each entry goes to exactly one blocked consumer; under steady load
    all of them get a similar share."""
    xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    k, n = 3, 90
    cons = [subprocess.Popen([sys.executable, "-c", CONSUMER, str(db), "c%d" % i], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(k)]
    try:
        for c in cons:
            wait_blocked(c)
        prod = subprocess.Popen(XS + ["--db", str(db), "--raw"], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        for i in range(n):
            prod.stdin.write(b"XADD s * i %d\n" % i)
            prod.stdin.flush()
            prod.stdout.readline()
            time.sleep(0.03)
        prod.stdin.close()
        prod.wait(timeout=TIMEOUT)
        end = time.monotonic() + TIMEOUT
        while time.monotonic() < end:
            if reply(xs(db, "XINFO", "GROUPS", "s"))[0]["pending"] == n:
                break
            time.sleep(0.1)
        time.sleep(0.5)
    finally:
        for c in cons:
            c.kill()
    got = [c.communicate()[0].split() for c in cons]
    ids = [i for g in got for i in g]
    assert len(ids) == n and len(set(ids)) == n       # each exactly once
    shares = sorted(len(g) for g in got)
    assert shares[0] >= n // k // 3, shares            # nobody starved


def test_script_mode_block_timeout_then_next_line(db):
    p = run_xs(db, ["XREAD BLOCK 100 STREAMS s $", "XADD s 1-1 a 1"])
    assert [json.loads(l) for l in p.stdout.splitlines()] == [None, "1-1"]


def test_xread_block_times_out_with_null(db):
    xs(db, "XADD", "s", "1-1", "a", "1")
    t = time.monotonic()
    p = xs(db, "XREAD", "BLOCK", "300", "STREAMS", "s", "$")
    assert time.monotonic() - t >= 0.3
    assert p.returncode == 0 and reply(p) is None


def test_xread_block_timeout_on_missing_stream(db):
    p = xs(db, "XREAD", "BLOCK", "100", "STREAMS", "nosuch", "0")
    assert p.returncode == 0 and reply(p) is None


def test_xread_block_0_wakes_on_xadd_from_another_process(db):
    xs(db, "XADD", "s", "1-1", "a", "1")
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r)
    time.sleep(0.3)
    assert r.poll() is None            # BLOCK 0 waits
    xs(db, "XADD", "s", "2-1", "b", "2")
    code, out, err = finish(r)
    assert code == 0, err
    assert json.loads(out) == {"s": [["2-1", ["b", "2"]]]}


def test_xread_dollar_is_resolved_when_the_command_starts(db):
    """$ means "after the last entry when XREAD started": entries already
    there are not returned, the first one added later is."""
    xs(db, "XADD", "s", "1-1", "old", "1")
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r)
    xs(db, "XADD", "s", "5-1", "new", "1")
    code, out, _ = finish(r)
    assert json.loads(out) == {"s": [["5-1", ["new", "1"]]]}


def test_xread_dollar_on_missing_stream_gets_first_entry(db):
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r)
    xs(db, "XADD", "s", "1-1", "a", "1")
    assert json.loads(finish(r)[1]) == {"s": [["1-1", ["a", "1"]]]}


def test_xread_plus_blocks_on_missing_stream_then_returns_last_entry(db):
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "+")
    wait_blocked(r)
    xs(db, "XADD", "s", "3-1", "a", "1")
    assert json.loads(finish(r)[1]) == {"s": [["3-1", ["a", "1"]]]}


def test_xread_plus_with_entries_does_not_block(db):
    xs(db, "XADD", "s", "1-1", "a", "1")
    xs(db, "XADD", "s", "2-1", "b", "2")
    p = xs(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "+")
    assert reply(p) == {"s": [["2-1", ["b", "2"]]]}


def test_xread_block_on_several_streams_returns_the_one_that_changed(db):
    xs(db, "XADD", "a", "1-1", "x", "1")
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "a", "b", "c", "$", "$", "$")
    wait_blocked(r)
    xs(db, "XADD", "b", "7-1", "y", "2")
    assert json.loads(finish(r)[1]) == {"b": [["7-1", ["y", "2"]]]}


def test_xread_block_ignores_writes_to_other_streams(db):
    r = start(db, "XREAD", "BLOCK", "1500", "STREAMS", "s", "$")
    wait_blocked(r)
    xs(db, "XADD", "other", "1-1", "a", "1")
    code, out, _ = finish(r)
    assert json.loads(out) is None


def test_xread_block_with_data_answers_at_once(db):
    xs(db, "XADD", "s", "1-1", "a", "1")
    t = time.monotonic()
    p = xs(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "0")
    assert reply(p) == {"s": [["1-1", ["a", "1"]]]}
    assert time.monotonic() - t < TIMEOUT


def test_xread_block_keeps_waiting_when_the_stream_is_deleted(db):
    xs(db, "XADD", "s", "5-1", "a", "1")
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    wait_blocked(r)
    xs(db, "DEL", "s")
    time.sleep(0.5)
    assert r.poll() is None
    xs(db, "XADD", "s", "9-1", "b", "2")
    assert json.loads(finish(r)[1]) == {"s": [["9-1", ["b", "2"]]]}


def test_xreadgroup_block_wakes_and_delivers(db):
    xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    r = start(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    wait_blocked(r)
    xs(db, "XADD", "s", "1-1", "a", "1")
    assert json.loads(finish(r)[1]) == {"s": [["1-1", ["a", "1"]]]}
    assert reply(xs(db, "XPENDING", "s", "g"))[0] == 1


def test_xreadgroup_block_times_out_with_null(db):
    xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    p = xs(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "200", "STREAMS", "s", ">")
    assert p.returncode == 0 and reply(p) is None


def test_xreadgroup_history_id_never_blocks(db):
    xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    p = xs(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", "0")
    assert reply(p) == {"s": []}


@pytest.mark.parametrize("how", [["XGROUP", "DESTROY", "s", "g"], ["DEL", "s"], ["PEXPIRE", "s", "300"]])
def test_xreadgroup_blocked_gets_nogroup_when_group_or_stream_goes(db, how):
    """Redis 7.2+ runs a blocked command again when its key goes, so the
    client gets the command's own NOGROUP (Redis 8's stream-cgroups.tcl,
    "Blocking XREADGROUP: key deleted"; 7.0 said "UNBLOCKED the stream key
    no longer exists"); a TTL passing wakes it though nothing is written."""
    xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    r = start(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">", mode="raw")
    wait_blocked(r)
    xs(db, *how)
    code, out, err = finish(r)
    assert code == 1
    assert err == b"NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\n"


def test_xreadgroup_claim_block_wakes_when_entry_becomes_claimable(db):
    xs(db, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    xs(db, "XADD", "s", "1-1", "a", "1")
    xs(db, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")     # pending at c1
    t = time.monotonic()
    p = xs(db, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "800", "BLOCK", "0", "STREAMS", "s", ">")
    elapsed = time.monotonic() - t
    r = reply(p)
    assert r["s"][0][0] == "1-1" and r["s"][0][1] == ["a", "1"]
    assert r["s"][0][2] >= 800 and r["s"][0][3] == 1      # idle time, delivery count
    assert 0.5 <= elapsed < TIMEOUT
    assert reply(xs(db, "XPENDING", "s", "g"))[3] == [["c2", "1"]]


def test_xreadgroup_claim_block_wakes_on_nack(db):
    xs(db, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    xs(db, "XADD", "s", "1-1", "a", "1")
    xs(db, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    r = start(db, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "3600000", "BLOCK", "0",
              "STREAMS", "s", ">")
    wait_blocked(r)
    time.sleep(0.3)
    assert r.poll() is None
    p = xs(db, "XNACK", "s", "g", "FAIL", "IDS", "1", "1-1")
    assert p.returncode == 0, p.stderr
    code, out, err = finish(r)
    assert code == 0, err
    assert json.loads(out)["s"][0][:2] == ["1-1", ["a", "1"]]


def test_xreadgroup_claim_block_times_out_when_nothing_becomes_claimable(db):
    xs(db, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    xs(db, "XADD", "s", "1-1", "a", "1")
    xs(db, "XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    p = xs(db, "XREADGROUP", "GROUP", "g", "c2", "CLAIM", "3600000", "BLOCK", "300", "STREAMS", "s", ">")
    assert reply(p) is None


def test_script_mode_blocked_line_answers_then_next_line_runs(db):
    xs(db, "XADD", "s", "1-1", "a", "1")
    r = start(db, mode="json", stdin=True)
    r.stdin.write(b"XLEN s\nXREAD BLOCK 0 STREAMS s $\nXLEN s\n")
    r.stdin.flush()
    first = r.stdout.readline()
    assert json.loads(first) == 1
    wait_blocked(r)
    xs(db, "XADD", "s", "2-1", "b", "2")
    assert json.loads(r.stdout.readline()) == {"s": [["2-1", ["b", "2"]]]}
    assert json.loads(r.stdout.readline()) == 2
    r.stdin.close()
    assert r.wait(timeout=TIMEOUT) == 0


def test_idle_blocked_reader_uses_no_cpu(db):
    r = start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    try:
        wait_blocked(r)

        def cpu():
            with open("/proc/%d/stat" % r.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])    # utime + stime, clock ticks
        before = cpu()
        time.sleep(2.0)
        assert cpu() - before <= 2       # 20 ms of 2 s at most (it is 0 in practice)
    finally:
        r.kill()
        r.wait()
