"""XREAD and XREADGROUP are written as they are read, as XRANGE is, in
every output mode (issue 38 item 2): the bytes are those of the whole
reply (script mode renders a reply whole: the reference), memory stays
that of a page however long the reply, and a reader that goes away
(``| head -1``) ends the command at once, quietly, with status 0."""
import os
import subprocess
import sys
import time

import pytest

XS = os.path.join(os.path.dirname(sys.executable), "xs")
N = 11_000                      # more than two pages (execution.session.PAGE)
MODES = ["--raw", "--json", "--jsonl", "--pretty"]


def xs(db, *args, stdin=None):
    return subprocess.run([XS, "--db", str(db), *args], input=stdin, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def load(tmp_path_factory):
    """Lines that make streams a (N entries, a tab, a non-UTF-8 value
    in some), b (6) and c (1, binary field), and groups g on a and b."""
    lines = []
    for i in range(1, N + 1):
        value = '"\\xff%d"' % i if i % 1000 == 0 else "v%d" % i
        lines.append('XADD a %d-1 f %s n "x\\ty"' % (i, value))
    lines += ["XADD b %d-1 g w%d" % (i, i) for i in range(1, 7)]
    lines.append('XADD c 5-5 "\\xff" "\\x00"')
    lines += ["XGROUP CREATE a g 0", "XGROUP CREATE b g 0"]
    return ("\n".join(lines) + "\n").encode()


def fresh(tmp_path, load, name):
    db = tmp_path / name
    assert xs(db, stdin=load).returncode == 0
    return db


READS = [
    "XREAD STREAMS a b c 0 0 0",
    "XREAD STREAMS a b a 3 0 10999",           # a stream twice, a later start
    "XREAD COUNT 7000 STREAMS a b 0 0",        # COUNT above a page
    "XREAD STREAMS b a $ 0",
    "XREAD STREAMS zz 0",                      # nothing: the nil reply
    "XREAD STREAMS a +",
    "XREAD BLOCK 10 STREAMS a b 10000 $",      # data at once: not blocked
    "XRANGE a - +",
    "XREVRANGE a + -",
    "XRANGE zz - +",
]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory, load):
    return fresh(tmp_path_factory.mktemp("reads"), load, "s.xs")


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_read_writes_the_bytes_of_the_whole_reply(loaded, mode):
    db = loaded
    for cmd in READS:
        one = xs(db, mode, *cmd.split())
        whole = xs(db, mode, stdin=cmd.encode() + b"\n")
        assert one.returncode == 0, (cmd, one.stderr)
        assert one.stdout == whole.stdout, (mode, cmd)


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_group_read_delivers_and_writes_as_the_whole_reply_does(tmp_path, load, mode):
    """Two stores, the same commands: one-shot (streamed) and script
    mode (whole); the replies and the groups' state after are the same."""
    one_db, whole_db = fresh(tmp_path, load, "one.xs"), fresh(tmp_path, load, "whole.xs")
    for cmd in ["XREADGROUP GROUP g c1 STREAMS a b > >",
                "XREADGROUP GROUP g c2 STREAMS a b > >",                 # nothing left: nil
                "XGROUP SETID a g 100", "XREADGROUP GROUP g c2 COUNT 9000 STREAMS a >",
                "XGROUP SETID a g 0", "XREADGROUP GROUP g c3 NOACK STREAMS a >",
                "XREADGROUP GROUP g c1 BLOCK 10 STREAMS a >"]:            # blocks, times out: nil
        one = xs(one_db, mode, *cmd.split())
        whole = xs(whole_db, mode, stdin=cmd.encode() + b"\n")
        assert one.stdout == whole.stdout, (mode, cmd)
    for cmd in ["XINFO GROUPS a", "XPENDING a g", "XPENDING a g - + 100000", "XINFO CONSUMERS a g"]:
        one, whole = xs(one_db, "--raw", *cmd.split()), xs(whole_db, "--raw", *cmd.split())
        assert one.stdout and _no_times(cmd, one.stdout) == _no_times(cmd, whole.stdout), cmd


def _no_times(cmd, out):
    """``out`` (--raw lines) with the idle times masked: they differ by the
    time between the runs; counts, names and IDs must not.  XPENDING's
    extended form: ID, consumer, idle, deliveries per entry; XINFO
    CONSUMERS: the values after "idle" and "inactive"."""
    lines = out.splitlines()
    if cmd.startswith("XPENDING a g -"):
        assert len(lines) % 4 == 0, lines
        return [b"<ms>" if i % 4 == 2 else ln for i, ln in enumerate(lines)]
    return [b"<ms>" if i and lines[i - 1] in (b"idle", b"inactive") else ln for i, ln in enumerate(lines)]


def test_a_group_read_that_fails_or_blocks_commits_nothing(tmp_path, load):
    db = fresh(tmp_path, load, "s.xs")
    r = xs(db, "XREADGROUP", "GROUP", "nog", "c", "STREAMS", "a", ">")
    assert r.returncode == 1 and r.stderr.startswith(b"NOGROUP")
    r = xs(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "50", "STREAMS", "c", ">")
    assert r.returncode == 1 and b"NOGROUP" in r.stderr
    assert xs(db, "XINFO", "CONSUMERS", "a", "g").stdout == b"\n"        # no consumer made


DATA_LIMIT = 64 << 20       # RLIMIT_DATA: the heap (not the store's mapped pages) of a streamed read


def _within(argv, limit=DATA_LIMIT):
    """Run ``argv`` with its data memory (heap, anonymous mappings:
    RLIMIT_DATA; not the store's file mapping) capped at ``limit``."""
    import resource

    def cap():
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return subprocess.run(argv, preexec_fn=cap, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """60,000 entries of about 1 KB (60 MB of fields): the whole reply,
    held and rendered, needs several times 64 MB; a page a few MB."""
    db = tmp_path_factory.mktemp("big") / "big.xs"
    value = "x" * 1000
    lines = "".join("XADD big * f %s\n" % value for _ in range(60_000))
    assert xs(db, "--no-sync", stdin=lines.encode()).returncode == 0
    assert xs(db, "XGROUP", "CREATE", "big", "g", "0").returncode == 0
    return db


@pytest.mark.parametrize("mode", MODES)
def test_reading_a_long_stream_holds_a_page_not_the_reply(big, mode):
    for cmd in (["XREAD", "STREAMS", "big", "0"], ["XRANGE", "big", "-", "+"]):
        r = _within([XS, "--db", str(big), mode] + cmd)
        assert r.returncode == 0, (mode, cmd, r.stderr[-300:])


def test_a_group_read_of_a_long_stream_holds_a_page_not_the_reply(big):
    r = _within([XS, "--db", str(big), "--raw", "XREADGROUP", "GROUP", "g", "c", "STREAMS", "big", ">"])
    assert r.returncode == 0, r.stderr[-300:]
    assert xs(big, "XPENDING", "big", "g").stdout.split(b"\n")[0] == b"60000"
    assert xs(big, "XGROUP", "SETID", "big", "g", "0").returncode == 0


def test_running_out_of_memory_is_a_message_not_a_traceback(big):
    """A reply that does not fit in memory ends with one line, status 1:
    XINFO STREAM FULL COUNT 0 (every entry, a reply built whole) of 60 MB
    of entries, under a 24 MB cap (xs itself starts in under 10)."""
    r = _within([XS, "--db", str(big), "XINFO", "STREAM", "big", "FULL", "COUNT", "0"], 24 << 20)
    assert r.returncode == 1
    assert b"Traceback" not in r.stderr and b"out of memory" in r.stderr, r.stderr[-300:]


@pytest.mark.parametrize("cmd", [["XREAD", "STREAMS", "big", "0"], ["XRANGE", "big", "-", "+"],
                                 ["export", "big"]])
def test_a_reader_that_goes_away_ends_the_read_quietly_with_status_0(big, cmd):
    p = subprocess.Popen([XS, "--db", str(big)] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t = time.monotonic()
    assert p.stdout.readline()
    p.stdout.close()                                   # as head -1 does
    assert p.wait(timeout=60) == 0
    took = time.monotonic() - t
    assert p.stderr.read() == b""
    assert took < 10, took      # not after reading and rendering all 60 MB
