"""Pretty output (xstream_cli/output/pretty.py) and the one terminal escaping
(render.escape_text): nothing stored reaches a terminal raw, values are
wrapped not cut, quoted when empty or spaced, times and idle times are
readable, every command's reply has a rendering of its own (no nested
numbered lists), and entries stream: the first chunk is written before
the rest is even read."""
import io
import os
import re
import subprocess
import sys

import pytest

from storage.errors import RedisError
from xstream_cli.output.pretty import FIRST_CHUNK, Writer, write_pretty
from xstream_cli.output.pretty_text import cells, duration, id_time, token
from xstream_cli.output.render import escape_text, terminal_text
from xstream_cli.output.reply import Map, Status

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]


def show(reply, width=100):
    out = io.BytesIO()
    write_pretty(reply, out, width=width, colour=False)
    return out.getvalue().decode("utf-8", "surrogateescape")


def xs(db, *lines, columns=100):
    env = dict(os.environ, COLUMNS=str(columns))
    p = subprocess.run(XS + ["--db", str(db), "--pretty", "--no-sync"], input=("\n".join(lines) + "\n").encode(),
                       capture_output=True, cwd=ROOT, timeout=120, env=env)
    assert b"Traceback" not in p.stderr, p.stderr
    return p.stdout.decode("utf-8", "surrogateescape")


# ------------------------------------------------------------ escaping

@pytest.mark.parametrize("raw,shown", [
    (b"\x1b]0;title\x07", "\\x1b]0;title\\a"),
    (b"\x1b[2J", "\\x1b[2J"),
    (b"a\nb\rc\td", "a\\nb\\rc\\td"),
    (b"\x00\x01\x7f", "\\x00\\x01\\x7f"),
    ("\u009b".encode(), "\\xc2\\x9b"),                       # C1 control (CSI)
    ("\u202e".encode(), "\\xe2\\x80\\xae"),                  # right-to-left override
    (b"\xff\xfe", "\\xff\\xfe"),                             # not UTF-8
    ("München 日本".encode(), "München 日本"),                # printable UTF-8 stays
])
def test_terminal_text_escapes_every_non_printable_byte(raw, shown):
    assert terminal_text(raw) == shown
    assert not re.search("[\x00-\x1f\x7f-\x9f]", terminal_text(raw))


def test_escape_text_quoting_escapes_quote_and_backslash():
    assert escape_text('a"b\\c') == 'a\\"b\\\\c'
    assert escape_text('a"b\\c', quoting=False) == 'a"b\\c'


def test_tail_uses_the_same_escaping():
    from xstream_cli.porcelain import tail, tail_output
    assert tail._text is terminal_text and tail_output._escaped is escape_text


@pytest.mark.parametrize("raw,shown", [
    (b"alice", "alice"), (b"", '""'), (b"bob smith", '"bob smith"'), (b'say "hi"', '"say \\"hi\\""'),
    (b"C:\\x", '"C:\\\\x"'), (b"\x1b[31m", '"\\x1b[31m"'), ("日本".encode(), "日本"),
])
def test_values_are_bare_or_quoted(raw, shown):
    assert token(raw) == shown


def test_a_field_name_with_equals_is_quoted():
    assert token(b"a=b", name=True) == '"a=b"' and token(b"a=b") == "a=b"


# ------------------------------------------------------------ formats

@pytest.mark.parametrize("ms,text", [(0, "0ms"), (450, "450ms"), (1500, "1.5s"), (42000, "42s"),
                                     (192000, "3m12s"), (7500000, "2h05m"), (3 * 86400000 + 4 * 3600000, "3d04h"),
                                     (-1, "-")])
def test_durations_read_like_3m12s(ms, text):
    assert duration(ms) == text


def test_id_times_are_utc_iso_and_only_for_timestamps():
    assert id_time(b"1700000000123-0") == "2023-11-14T22:13:20.123Z"
    assert id_time(b"5-0") == ""


def test_cells_counts_wide_characters_twice():
    assert cells("abc") == 3 and cells("日本") == 4 and cells("Mu\u0308nchen") == 7


# ------------------------------------------------------------ entries

LONG = b"a rather long value with spaces that goes on past the edge of any narrow terminal, " * 2


@pytest.mark.parametrize("width", [40, 50, 80])
def test_long_values_are_wrapped_never_cut(width):
    entries = [[b"1700000000123-0", [b"user", b"alice", b"note", LONG, b"empty", b"", b"jp", "日本".encode() * 30]]]
    text = show(entries, width)
    lines = text.splitlines()
    assert all(cells(ln) <= width for ln in lines), [ln for ln in lines if cells(ln) > width]
    assert "\u2026" not in text and "..." not in text
    joined = "".join(ln.strip() if k else ln for k, ln in enumerate(lines))
    for part in LONG.decode().split():
        assert part in text
    assert "日本" * 30 in re.sub(r"\s", "", joined)
    assert 'empty=""' in text and "user=alice" in text and "2023-11-14T22:13:20.123Z" in text
    # the words of the quoted value, in order, with nothing missing
    flat = re.sub(r"\s+", " ", " ".join(ln.strip() for ln in lines))
    assert re.sub(r"\s+", " ", LONG.decode().strip()) in flat


def test_entry_line_layout():
    text = show([[b"1700000000123-0", [b"user", b"alice", b"action", b"login"]],
                 [b"1700000000200-0", [b"msg", b"hello world"]]])
    assert text == ("1700000000123-0  2023-11-14T22:13:20.123Z  user=alice  action=login\n"
                    '1700000000200-0  2023-11-14T22:13:20.200Z  msg="hello world"\n')


def test_entries_stream_the_first_chunk_before_reading_the_rest():
    consumed = []

    def gen():
        for n in range(1, 5001):
            consumed.append(n)
            yield [b"%d-0" % n, [b"n", b"%d" % n]]

    class Out(io.BytesIO):
        first_write_after = None

        def write(self, b):
            if self.first_write_after is None:
                self.first_write_after = len(consumed)
            return super().write(b)

    out = Out()
    w = Writer(out, 100, False)
    w.entries(gen())
    w.flush()
    assert out.first_write_after is not None and out.first_write_after <= FIRST_CHUNK + 1
    assert out.getvalue().count(b"\n") == 5000


def test_a_deleted_or_claimed_entry_reads_as_such():
    text = show([[b"5-0", None], [b"6-0", [b"a", b"1"], 192000, 3]])
    assert "5-0  (deleted)" in text
    assert "6-0  a=1  (idle 3m12s, delivered 3×)" in text


def test_xread_shows_one_heading_per_stream():
    text = show(Map([(b"orders", [[b"1-0", [b"a", b"1"]]]), (b"bad\x1b", [[b"2-0", [b"b", b"2"]]])], flat=False))
    assert text == "orders\n  1-0  a=1\nbad\\x1b\n  2-0  b=2\n"


def test_scalars_and_errors():
    assert show(RedisError("ERR bad \x1b[2J")) == "(error) ERR bad \\x1b[2J\n"
    assert show(None) == "(nil)\n" and show(5) == "5\n" and show(Status("OK")) == "OK\n"
    assert show([]) == "(empty)\n"


# ------------------------------------------------ every command's reply

NESTED = re.compile(r"^\s*\d+\)\s+\d+\)", re.M)      # "1) 1) ..." -- the nested-list fallback


@pytest.fixture
def groups_db(tmp_path):
    db = tmp_path / "db"
    xs(db, "XADD s 1700000000123-0 user alice", 'XADD s 1700000000200-0 user "bob smith"',
       "XGROUP CREATE s g 0", "XREADGROUP GROUP g alice COUNT 2 STREAMS s >")
    return db


def test_xpending_summary_and_rows(groups_db):
    out = xs(groups_db, "XPENDING s g")
    assert not NESTED.search(out), out
    assert re.search(r"pending\s+2", out) and re.search(r"first\s+1700000000123-0\s+2023-11-14T22:13:20.123Z", out)
    assert re.search(r"consumers\n\s+alice\s+2", out)
    out = xs(groups_db, "XPENDING s g - + 10")
    assert re.search(r"id\s+time\s+consumer\s+idle\s+deliveries", out)
    assert re.search(r"1700000000200-0\s+2023-11-14T22:13:20.200Z\s+alice\s+\d+(ms|\.\ds|s)\s+1", out), out


def test_xclaim_and_xautoclaim(groups_db):
    out = xs(groups_db, "XCLAIM s g bob 0 1700000000123-0")
    assert out == "1700000000123-0  2023-11-14T22:13:20.123Z  user=alice\n"
    out = xs(groups_db, "XAUTOCLAIM s g carol 0 0")
    assert not NESTED.search(out), out
    assert re.search(r"next start\s+0-0", out) and re.search(r"claimed\s+2", out)
    assert '1700000000200-0  2023-11-14T22:13:20.200Z  user="bob smith"' in out
    assert re.search(r"deleted\s+0", out)
    out = xs(groups_db, "XAUTOCLAIM s g carol 0 0 JUSTID")
    assert not NESTED.search(out) and "1700000000123-0" in out


def test_xinfo_stream_full_consumers_and_groups(groups_db):
    out = xs(groups_db, "XINFO STREAM s FULL")
    assert not NESTED.search(out), out
    assert re.search(r"entries\n\s+1700000000123-0\s+2023-11-14T22:13:20.123Z\s+user=alice", out)
    assert re.search(r"consumers\n\s+alice\n\s+seen-time\s+\d{4}-\d\d-\d\dT", out)
    assert re.search(r"pending\s+2\n\s+1700000000123-0\s+alice\s+delivered \d{4}-", out)
    out = xs(groups_db, "XINFO STREAM s")
    assert re.search(r"first-entry\n\s+1700000000123-0\s+2023-11-14T22:13:20.123Z\s+user=alice", out)
    out = xs(groups_db, "XINFO CONSUMERS s g")
    assert re.search(r"name\s+pending\s+idle\s+inactive\nalice\s+2\s+\d+(ms|\.\ds|s)\s", out), out
    out = xs(groups_db, "XINFO GROUPS s")
    assert re.search(r"name\s+consumers\s+pending\s+last-delivered-id", out)


def test_pretty_on_a_pipe_has_no_colour_and_script_mode_works(groups_db):
    out = xs(groups_db, "XLEN s", "XRANGE s - +", "XADD s 1-0 x y")
    assert "\x1b" not in out
    assert out.startswith("2\n1700000000123-0  2023-11-14T22:13:20.123Z  user=alice\n")
    assert "(error) ERR The ID specified in XADD is equal or smaller" in out
