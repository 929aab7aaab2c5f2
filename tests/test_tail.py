"""xs tail: last entries, following (-f), groups, output formats, and
quiet endings (Ctrl-C, closed pipes)."""
import json
import os
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner

from conftest import ROOT, XS, run_xs
from test_blocking import TIMEOUT, wait_blocked


@pytest.fixture
def db(tmp_path):
    return tmp_path / "db"


def fill(db, lines):
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr


def tail(db, *args, mode=None):
    argv = XS + ["--db", str(db)] + (["--" + mode] if mode else []) + ["tail"] + list(args)
    return subprocess.run(argv, capture_output=True, timeout=TIMEOUT, cwd=ROOT)


def follow(db, *args):
    return subprocess.Popen(XS + ["--db", str(db), "tail", "-f"] + list(args), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


# ------------------------------------------------------------------ -n

def test_tail_prints_last_10_by_default(db):
    fill(db, ["XADD s %d-0 i %d" % (i, i) for i in range(1, 16)])
    p = tail(db, "s")
    assert p.returncode == 0
    assert p.stdout.decode().splitlines() == ["s %d-0 i=%d" % (i, i) for i in range(6, 16)]


def test_tail_n(db):
    fill(db, ["XADD s %d-0 i %d" % (i, i) for i in range(1, 6)])
    assert tail(db, "-n", "2", "s").stdout == b"s 4-0 i=4\ns 5-0 i=5\n"
    assert tail(db, "-n", "0", "s").stdout == b""
    assert tail(db, "-n", "99", "s").stdout.count(b"\n") == 5


def test_tail_missing_stream_prints_nothing(db):
    fill(db, ["XADD other 1-0 a 1"])
    p = tail(db, "nosuch")
    assert p.returncode == 0 and p.stdout == b""


def test_tail_merges_streams_in_id_order(db):
    fill(db, ["XADD a 1-0 x 1", "XADD b 2-0 y 2", "XADD a 3-0 x 3", "XADD b 4-0 y 4"])
    assert tail(db, "-n", "3", "a", "b").stdout == b"b 2-0 y=2\na 3-0 x=3\nb 4-0 y=4\n"


def test_tail_raw_format_quotes_what_would_be_ambiguous(db):
    fill(db, ['XADD "my stream" 1-0 "two words" "a=b" "k=1" "" plain "line\\nbreak"'])
    assert tail(db, "my stream").stdout == \
        b'"my stream" 1-0 "two words"=a=b "k=1"="" plain="line\\nbreak"\n'


def test_tail_json_lines(db):
    fill(db, ["XADD s 1-0 a 1 b 2", "XADD t 2-0 c 3"])
    for p in (tail(db, "--json", "s", "t"), tail(db, "s", "t", mode="json")):
        docs = [json.loads(l) for l in p.stdout.splitlines()]
        assert docs == [{"stream": "s", "id": "1-0", "fields": {"a": "1", "b": "2"}},
                        {"stream": "t", "id": "2-0", "fields": {"c": "3"}}]


def test_tail_pretty_shows_time_stream_id_and_fields(db):
    from xstream_cli.app import cli
    fill(db, ["XADD events 1700000000123-0 user alice action login"])
    r = CliRunner().invoke(cli, ["--db", str(db), "--pretty", "tail", "events"])
    assert r.exit_code == 0, r.output
    line = r.output.strip()
    assert ":20.123" in line          # seconds and milliseconds of the ID's time
    assert "events" in line and "1700000000123-0" in line
    assert "user=alice" in line and "action=login" in line


def test_tail_needs_group_and_consumer_together(db):
    p = tail(db, "--group", "g", "s")
    assert p.returncode == 2


# ------------------------------------------------------------------ -f

def test_tail_follow_prints_new_entries_and_ctrl_c_exits_0(db):
    fill(db, ["XADD s 1-0 old 1"])
    f = follow(db, "-n", "1", "s", "t")
    assert f.stdout.readline() == b"s 1-0 old=1\n"
    wait_blocked(f)
    fill(db, ["XADD t 2-0 new 2"])
    assert f.stdout.readline() == b"t 2-0 new=2\n"
    fill(db, ["XADD s 3-0 a 1", "XADD t 4-0 b 2", "XADD s 5-0 c 3"])
    assert [f.stdout.readline() for _ in range(3)] == [b"s 3-0 a=1\n", b"t 4-0 b=2\n", b"s 5-0 c=3\n"]
    wait_blocked(f)
    f.send_signal(signal.SIGINT)
    out, err = f.communicate(timeout=TIMEOUT)
    assert f.returncode == 0 and err == b"" and out == b""


def test_tail_follow_misses_nothing_between_backlog_and_follow(db):
    f = follow(db, "-n", "0", "s")
    wait_blocked(f)
    fill(db, ["XADD s %d-0 i %d" % (i, i) for i in range(1, 51)])
    got = [f.stdout.readline() for _ in range(50)]
    assert got == [b"s %d-0 i=%d\n" % (i, i) for i in range(1, 51)]
    f.kill()
    f.wait()


def test_tail_follow_into_closed_pipe_exits_quietly(db):
    fill(db, ["XADD s 1-0 a 1"])
    sh = subprocess.Popen(["bash", "-c", " ".join(XS) + " --db '%s' tail -f s | head -n 2;"
                           " echo status=${PIPESTATUS[0]}" % db],
                          cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)
    fill(db, ["XADD s 2-0 b 2"])
    out, err = sh.communicate(timeout=TIMEOUT)   # head exits; tail notices at once
    assert out == b"s 1-0 a=1\ns 2-0 b=2\nstatus=0\n"
    assert err == b""


def test_tail_into_closed_pipe_exits_quietly(db):
    fill(db, ["XADD s * i %d" % i for i in range(20000)])
    p = subprocess.run(["bash", "-c", " ".join(XS) + " --db '%s' tail -n 20000 s | head -n 1;"
                        " echo status=${PIPESTATUS[0]}" % db],
                       cwd=ROOT, capture_output=True, timeout=TIMEOUT)
    assert p.stdout.endswith(b"status=0\n") and p.stdout.count(b"\n") == 2
    assert p.stderr == b""


# ---------------------------------------------------------------- groups

def test_tail_group_reads_through_the_group_and_acks(db):
    fill(db, ["XGROUP CREATE s g 0 MKSTREAM"] + ["XADD s %d-0 i %d" % (i, i) for i in range(1, 6)])
    assert tail(db, "-n", "3", "--group", "g", "--consumer", "c", "s").stdout == \
        b"s 1-0 i=1\ns 2-0 i=2\ns 3-0 i=3\n"
    assert tail(db, "--group", "g", "--consumer", "c", "s").stdout == b"s 4-0 i=4\ns 5-0 i=5\n"
    assert tail(db, "--group", "g", "--consumer", "c", "s").stdout == b""
    p = run_xs(db, ["XPENDING s g", "XINFO GROUPS s"])
    pending, groups = [json.loads(l) for l in p.stdout.splitlines()]
    assert pending[0] == 0 and groups[0]["last-delivered-id"] == "5-0"


def test_tail_group_redelivers_own_pending_entries_first(db):
    fill(db, ["XGROUP CREATE s g 0 MKSTREAM", "XADD s 1-0 i 1", "XADD s 2-0 i 2",
              "XREADGROUP GROUP g c COUNT 1 STREAMS s >"])    # 1-0 pending, never acked
    assert tail(db, "--group", "g", "--consumer", "c", "s").stdout == b"s 1-0 i=1\ns 2-0 i=2\n"


def test_tail_group_missing_is_nogroup(db):
    fill(db, ["XADD s 1-0 a 1"])
    p = tail(db, "--group", "g", "--consumer", "c", "s")
    assert p.returncode == 1
    assert p.stderr == b"NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\n"


def test_tail_group_follow_acks_each_entry(db):
    fill(db, ["XGROUP CREATE s g $ MKSTREAM"])
    f = follow(db, "--group", "g", "--consumer", "c", "s")
    wait_blocked(f)
    fill(db, ["XADD s 1-0 a 1"])
    assert f.stdout.readline() == b"s 1-0 a=1\n"
    end = time.monotonic() + TIMEOUT
    while json.loads(run_xs(db, ["XPENDING s g"]).stdout)[0] != 0:
        assert time.monotonic() < end
        time.sleep(0.05)
    f.send_signal(signal.SIGINT)
    out, err = f.communicate(timeout=TIMEOUT)
    assert f.returncode == 0 and err == b""
