"""xs tail: last entries, following (-f), groups, output formats, and
quiet endings (Ctrl-C, closed pipes)."""
import json
import signal
import subprocess
import time

import pytest
from click.testing import CliRunner

from conftest import ROOT, XS, new_store, run_xs
from tests.cli.test_blocking_cli import TIMEOUT, wait_blocked


@pytest.fixture
def db(tmp_path):
    return new_store(tmp_path / "db")      # tail reads: it never creates the store


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


def test_tail_missing_stream_is_an_error(db):
    fill(db, ["XADD other 1-0 a 1"])
    for args in (["nosuch"], ["-n", "0", "nosuch"], ["--json", "nosuch"]):
        p = tail(db, *args)
        assert (p.returncode, p.stdout, p.stderr) == (1, b"", b"xs: no such stream: nosuch\n")


def test_tail_prints_the_streams_that_exist_and_fails_for_the_others(db):
    fill(db, ["XADD a 1-0 x 1", "XADD b 2-0 y 2"])
    p = tail(db, "a", "nosuch", "b", "gone")
    assert p.stdout == b"a 1-0 x=1\nb 2-0 y=2\n"          # like tail(1) with a missing file
    assert p.stderr == b"xs: no such stream: nosuch\nxs: no such stream: gone\n"
    assert p.returncode == 1


def test_tail_follow_waits_for_a_stream_that_does_not_exist_yet(db):
    f = follow(db, "-n", "5", "later")
    wait_blocked(f)
    fill(db, ["XADD later 1-0 a 1"])
    assert f.stdout.readline() == b"later 1-0 a=1\n"
    f.send_signal(signal.SIGINT)
    out, err = f.communicate(timeout=TIMEOUT)
    assert f.returncode == -signal.SIGINT and err == b""   # killed by SIGINT: the shell shows 130 and out == b""


def test_tail_merges_streams_in_id_order(db):
    fill(db, ["XADD a 1-0 x 1", "XADD b 2-0 y 2", "XADD a 3-0 x 3", "XADD b 4-0 y 4"])
    assert tail(db, "-n", "3", "a", "b").stdout == b"a 1-0 x=1\nb 2-0 y=2\na 3-0 x=3\nb 4-0 y=4\n"


def test_tail_n_is_per_stream(db):
    fill(db, ["XADD a %d-0 x %d" % (i, i) for i in range(1, 6)] +
         ["XADD b %d-0 y %d" % (i, i) for i in range(6, 9)] + ["XADD a 9-0 x 9"])
    assert tail(db, "-n", "2", "a", "b").stdout == b"a 5-0 x=5\nb 7-0 y=7\nb 8-0 y=8\na 9-0 x=9\n"
    assert tail(db, "-n", "1", "b", "a").stdout == b"b 8-0 y=8\na 9-0 x=9\n"
    assert tail(db, "-n", "2", "a", "a").stdout == b"a 5-0 x=5\na 9-0 x=9\n"   # a name given twice


def test_tail_raw_format_quotes_what_would_be_ambiguous(db):
    fill(db, ['XADD "my stream" 1-0 "two words" "a=b" "k=1" "" plain "line\\nbreak"'])
    assert tail(db, "my stream").stdout == \
        b'"my stream" 1-0 "two words"=a=b "k=1"="" plain="line\\nbreak"\n'


def _parse_raw_line(line):
    """The raw line format, as its documentation describes it: tokens
    separated by one space; a token bare, or double-quoted with
    redis-cli escapes; in FIELD=VALUE the first '=' outside quotes ends
    the field."""
    esc = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("a"): 7, ord("b"): 8}
    assert line.endswith(b"\n") and b"\n" not in line[:-1]
    line = line[:-1]
    i = 0

    def atom(stop):
        nonlocal i
        if line[i:i + 1] != b'"':
            j = i
            while i < len(line) and line[i] not in stop:
                i += 1
            assert i > j
            return line[j:i]
        out = bytearray()
        i += 1
        while line[i] != ord('"'):
            c = line[i]
            if c == ord("\\"):
                n = line[i + 1]
                if n == ord("x"):
                    out.append(int(line[i + 2:i + 4], 16))
                    i += 4
                    continue
                out.append(esc.get(n, n))
                i += 2
                continue
            out.append(c)
            i += 1
        i += 1
        return bytes(out)
    stream = atom(b" ")
    assert line[i:i + 1] == b" "
    i += 1
    entry_id = atom(b" ")
    fields = []
    while i < len(line):
        assert line[i:i + 1] == b" "
        i += 1
        fields.append(atom(b" ="))
        assert line[i:i + 1] == b"="
        i += 1
        fields.append(atom(b" "))
    return stream, entry_id, fields


def test_tail_raw_format_passes_utf8_text_and_escapes_the_rest(db):
    fill(db, ['XADD "M\\xc3\\xbcnchen" 1-0 city "M\\xc3\\xbcnchen" note "Gr\\xc3\\xbc\\xc3\\x9fe aus K\\xc3\\xb6ln"'
              ' "caf\\xc3\\xa9=1" "\\xe6\\x97\\xa5\\xe6\\x9c\\xac"'
              ' esc "\\x1b[31mred" bad "\\xff\\xc3" zw "a\\xe2\\x80\\x8bb" nl "x\\ny" nbsp "\\xc2\\xa0"'])
    p = tail(db, "M\u00fcnchen")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ('München 1-0 city=München note="Grüße aus Köln" "café=1"=日本'
                        ' esc="\\x1b[31mred" bad="\\xff\\xc3" zw="a\\xe2\\x80\\x8bb" nl="x\\ny" nbsp="\\xc2\\xa0"\n'
                        ).encode("utf-8")
    assert b"M\xc3\xbcnchen" in p.stdout.split(b" ")[2]          # grep München finds it
    assert _parse_raw_line(p.stdout) == (
        "München".encode(), b"1-0",
        [b"city", "München".encode(), b"note", "Grüße aus Köln".encode(), "café=1".encode(), "日本".encode(),
         b"esc", b"\x1b[31mred", b"bad", b"\xff\xc3", b"zw", "a\u200bb".encode(), b"nl", b"x\ny",
         b"nbsp", b"\xc2\xa0"])


def test_tail_raw_lines_parse_back_to_the_same_bytes(db):
    values = [bytes([b]) for b in range(256)] + [b"", b"a b", b'"q"', b"k=v", b"\\", "\u00e9\u0301".encode(),
                                                 "\U0001f600".encode(), b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
    lines = ["XADD s %d-0 %s %s" % (n + 1, _q(v), _q(v)) for n, v in enumerate(values)]
    fill(db, lines)
    p = tail(db, "-n", str(len(values)), "s")
    got = p.stdout.splitlines(keepends=True)
    assert len(got) == len(values)
    for v, line in zip(values, got):
        assert _parse_raw_line(line)[2] == [v, v]


def _q(b):
    return '"%s"' % "".join("\\x%02x" % c for c in b)


def test_tail_json_lines(db):
    fill(db, ["XADD s 1-0 a 1 b 2", "XADD t 2-0 c 3"])
    for p in (tail(db, "--json", "s", "t"), tail(db, "s", "t", mode="json")):
        docs = [json.loads(l) for l in p.stdout.splitlines()]
        assert docs == [{"stream": "s", "id": "1-0", "fields": ["a", "1", "b", "2"]},
                        {"stream": "t", "id": "2-0", "fields": ["c", "3"]}]


def test_tail_json_is_the_export_shape_with_duplicates_and_any_bytes(db, tmp_path):
    fill(db, ['XADD s 1-0 a 1 a 2 b 3', 'XADD s 2-0 "\\xff\\xfe" "caf\\xc3\\xa9" x "\\x00\\x1b["',
              'XADD "M\\xc3\\xbcnchen" 3-0 "\\xc3" ""'])
    p = tail(db, "--json", "s", "M\u00fcnchen")
    assert p.returncode == 0, p.stderr
    export = subprocess.run(XS + ["--db", str(db), "export", "s", "M\u00fcnchen"], capture_output=True,
                            cwd=ROOT, timeout=TIMEOUT)
    assert [json.loads(l) for l in p.stdout.splitlines()] == [json.loads(l) for l in export.stdout.splitlines()]
    assert json.loads(p.stdout.splitlines()[0]) == {"stream": "s", "id": "1-0", "fields": ["a", "1", "a", "2", "b", "3"]}
    assert json.loads(p.stdout.splitlines()[1])["fields"][0] == {"b64": "//4="}
    # what tail --json prints, xs import takes back: the same entries, byte for byte
    imp = subprocess.run(XS + ["--db", str(tmp_path / "copy"), "import"], input=p.stdout,
                         capture_output=True, cwd=ROOT, timeout=TIMEOUT)
    assert imp.returncode == 0, imp.stderr
    for q in (["XRANGE s - +"], ["XRANGE M\xc3\xbcnchen - +".encode("latin-1")]):
        assert run_xs(tmp_path / "copy", q).stdout == run_xs(db, q).stdout


def test_tail_pretty_shows_time_stream_id_and_fields(db):
    from xstream_cli.app import cli
    fill(db, ["XADD events 1700000000123-0 user alice action login"])
    r = CliRunner().invoke(cli, ["--db", str(db), "--pretty", "tail", "events"])
    assert r.exit_code == 0, r.output
    line = r.output.strip()
    assert ":20.123" in line          # seconds and milliseconds of the ID's time
    assert "events" in line and "1700000000123-0" in line
    assert "user=alice" in line and "action=login" in line


def test_tail_pretty_never_writes_control_characters_to_the_terminal(db):
    from xstream_cli.app import cli
    fill(db, ['XADD e 1-0 a "\\x1b[31mred\\x07" b "x\\ny" c "M\\xc3\\xbcnchen\\xff"'])
    r = CliRunner().invoke(cli, ["--db", str(db), "--pretty", "tail", "e"])
    assert r.exit_code == 0, r.output
    assert "\x1b" not in r.output and "\x07" not in r.output and r.output.count("\n") == 1
    assert r.output == 'e  1-0  a="\\x1b[31mred\\a"  b="x\\ny"  c="München\\xff"\n'     # as XRANGE shows it


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
    assert f.returncode == -signal.SIGINT and err == b""   # killed by SIGINT: the shell shows 130 and out == b""


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
    assert f.returncode == -signal.SIGINT and err == b""   # killed by SIGINT: the shell shows 130


def test_tail_group_creates_a_missing_group_at_dollar_or_start(db):
    fill(db, ["XADD s 1-0 a 1", "XADD s 2-0 a 2"])
    assert tail(db, "--group", "new", "--consumer", "c", "s").stdout == b""          # at $: nothing old
    fill(db, ["XADD s 3-0 a 3"])
    assert tail(db, "--group", "new", "--consumer", "c", "s").stdout == b"s 3-0 a=3\n"
    p = tail(db, "--group", "all", "--consumer", "c", "--start", "0", "s", "t")
    assert p.returncode == 0 and p.stdout == b"s 1-0 a=1\ns 2-0 a=2\ns 3-0 a=3\n"
    groups = run_xs(db, ["XINFO GROUPS t"]).stdout                                 # t made as MKSTREAM does
    assert json.loads(groups)[0]["name"] == "all"
    p = tail(db, "--group", "x", "--consumer", "c", "--start", "nope", "s")
    assert p.returncode == 2 and b"bad --start ID" in p.stderr


def test_tail_start_goes_with_group(db):
    p = tail(db, "--start", "0", "s")
    assert p.returncode == 2 and b"--start goes with --group" in p.stderr


# -------------------------------------------- --since, --from, --count

def test_tail_from_prints_every_entry_from_an_id_merged_across_streams(db):
    fill(db, ["XADD a 1-1 x 1", "XADD b 2-1 y 2", "XADD a 3-1 x 3", "XADD b 4-1 y 4"])
    assert tail(db, "--from", "2", "a", "b").stdout == b"b 2-1 y=2\na 3-1 x=3\nb 4-1 y=4\n"
    assert tail(db, "--from", "(2-1", "a", "b").stdout == b"a 3-1 x=3\nb 4-1 y=4\n"
    assert tail(db, "--from", "0", "-c", "3", "a", "b").stdout == b"a 1-1 x=1\nb 2-1 y=2\na 3-1 x=3\n"


def test_tail_from_reads_a_long_history_in_pages_in_order(db):
    fill(db, ["XADD s %d-%d n %d" % (1 + i // 2, i % 2, i) for i in range(2500)]
         + ["XADD t %d-5 m %d" % (1 + i, i) for i in range(1300)])
    lines = tail(db, "--from", "0", "s", "t").stdout.splitlines()
    assert len(lines) == 3800
    ids = [tuple(int(x) for x in line.split()[1].split(b"-")) for line in lines]
    assert ids == sorted(ids)


def test_tail_since_prints_the_entries_of_the_last_duration(db):
    now = int(time.time() * 1000)
    fill(db, ["XADD s %d-0 age old" % (now - 7200_000), "XADD s %d-0 age new" % (now - 60_000)])
    assert tail(db, "--since", "1h", "s").stdout == b"s %d-0 age=new\n" % (now - 60_000)
    assert tail(db, "--since", "3h", "s").stdout.count(b"\n") == 2


def test_tail_follow_with_count_exits_after_n_entries(db):
    fill(db, ["XADD s 1-0 a 1"])
    f = follow(db, "-n", "1", "-c", "3", "s")
    assert f.stdout.readline() == b"s 1-0 a=1\n"
    wait_blocked(f)
    fill(db, ["XADD s 2-0 a 2", "XADD s 3-0 a 3", "XADD s 4-0 a 4"])
    out, err = f.communicate(timeout=TIMEOUT)
    assert f.returncode == 0 and out == b"s 2-0 a=2\ns 3-0 a=3\n" and err == b""


@pytest.mark.parametrize("args,text", [(["-n", "2", "--from", "0"], b"-n and --from"),
                                        (["--since", "1h", "--from", "0"], b"--since and --from"),
                                        (["--from", "zz"], b"bad --from ID"),
                                        (["--since", "soon"], b"--since"),
                                        (["--group", "g", "--consumer", "c", "--since", "1h"], b"go without --group")])
def test_tail_history_options_refuse_what_does_not_go_together(db, args, text):
    p = tail(db, *args, "s")
    assert p.returncode == 2 and text in p.stderr, p.stderr
