"""xs top (issue 40 item 3) as a person meets it: on a pseudo-terminal
(rows, a refresh showing a new XADD, the sort keys, ``q`` with the
terminal restored, Ctrl-C, a resize re-laying the view out) and in a
pipe (one snapshot); never writing, never creating a store, never
keeping xs compact waiting.  Every wait is bounded."""
import json
import os
import re
import signal
import struct
import subprocess
import termios
import time

import pytest

from conftest import ROOT, XS, run_xs, shell_path
from tests.cli.test_prompt_pty import Term


def make_store(db):
    """``events``: 3 entries, group g read 1 of them (c, pending), group h
    at the end; ``other``: one entry, no group."""
    lines = ["XADD events * f 1", "XADD events * f 2", "XADD events * f 3", "XGROUP CREATE events g 0",
             "XREADGROUP GROUP g c COUNT 1 STREAMS events >", "XGROUP CREATE events h $", "XADD other * a b"]
    assert run_xs(db, lines).returncode == 0
    return db


def xs(db, *args, timeout=60):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, cwd=ROOT, timeout=timeout)


def screen_of(data, cols, rows):
    """The screen a terminal of ``cols`` x ``rows`` shows after ``data``."""
    import pyte
    screen = pyte.Screen(cols, rows)
    pyte.ByteStream(screen).feed(data)
    return [line.rstrip() for line in screen.display]


class Top(Term):
    """xs top on a pseudo-terminal; ``view()`` is the screen drawn since
    ``mark()`` (the view redraws its whole screen at each refresh)."""

    def __init__(self, db, *args, cols=120, rows=30):
        Term.__init__(self, XS + ["--db", str(db), "top", "-i", "0.3"] + list(args), cols=cols, rows=rows)
        self.start = 0
        self.before = termios.tcgetattr(self.master)      # a pty master reads its terminal's settings

    def mark(self):
        self.start = len(self.shown)

    def view(self):
        return screen_of(self.shown[self.start:], *self.size)

    def wait_view(self, cond, timeout=30):
        end = time.monotonic() + timeout
        while True:
            lines = self.view()
            if cond(lines):
                return lines
            left = end - time.monotonic()
            if left <= 0 or (self._read(min(left, 0.3)) is None and self.p.poll() is not None):
                raise AssertionError("not shown; the screen:\n%s" % "\n".join(lines))

    def resize(self, cols, rows):
        import fcntl
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.size = (cols, rows)
        self.mark()
        os.kill(self.p.pid, signal.SIGWINCH)

    def restored(self):
        """The terminal's settings are those it had before (echo and
        line editing back) and the alternate screen was left."""
        after = termios.tcgetattr(self.master)
        return after[3] & (termios.ECHO | termios.ICANON) == self.before[3] & (termios.ECHO | termios.ICANON) \
            and self.shown.rfind(b"\x1b[?1049l") > self.shown.rfind(b"\x1b[?1049h") >= 0


def row(lines, stream, group):
    """The cells of the row of ``stream`` and ``group`` on the screen, or None."""
    for line in lines:
        cells = line.split()
        if cells[:2] == [stream, group]:
            return cells
    return None


HEAD = ["STREAM", "GROUP", "LENGTH", "IN/S", "DELIV/S", "ACK/S", "LAG", "LAG", "AGE", "PENDING", "OLDEST", "CONS",
        "DEAD"]


@pytest.fixture
def db(tmp_path):
    return make_store(tmp_path / "db")


def test_rows_appear_and_q_quits_with_0_and_the_terminal_restored(db):
    t = Top(db)
    try:
        lines = t.wait_view(lambda ls: row(ls, "events", "g") and row(ls, "other", "-"))
        assert any(line.split() == HEAD for line in lines), lines
        assert lines[0].startswith("xs top  sort: lag  every 0.3s  2 streams, 2 groups  ")
        assert str(db)[:20] in lines[0]
        g = row(lines, "events", "g")
        # LENGTH 3, no rate yet, LAG 2, PENDING 1, a consumer, no dead letters
        assert g[2:5] == ["3", "-", "-"] and g[6] == "2" and g[8] == "1" and g[-2:] == ["1", "0"], g
        assert row(lines, "events", "h")[6:9] == ["0", "0ms", "0"]
        t.send(b"q")
        assert t.wait() == 0
        assert t.restored()
        assert b"Traceback" not in t.shown
    finally:
        t.close()


def test_a_refresh_shows_a_new_xadd_and_its_rate(db):
    t = Top(db, "-i", "1")
    try:
        t.wait_view(lambda ls: row(ls, "events", "g"))
        assert xs(db, "XADD", "events", "*", "f", "4").returncode == 0
        t.mark()
        # the first frame with the new entry compares a snapshot without it
        # with one with it: IN/S above 0, and it stays on the screen 1 s
        lines = t.wait_view(lambda ls: (row(ls, "events", "g") or [""] * 9)[2] == "4")
        g, h = row(lines, "events", "g"), row(lines, "events", "h")
        assert g[6] == "3"                                   # one more entry behind
        assert g[3] == h[3] and float(g[3]) > 0, lines
        assert g[4:6] == ["0.0", "0.0"]                      # nothing delivered, nothing acknowledged
        t.send(b"q")
        assert t.wait() == 0
    finally:
        t.close()


def test_the_sort_keys_change_the_order_at_once(db):
    assert run_xs(db, ["XADD big * f 1", "XADD big * f 2", "XGROUP CREATE big g 0",
                       "XREADGROUP GROUP g c STREAMS big >"]).returncode == 0
    t = Top(db, "--sort", "pending", "-i", "30")          # no refresh during the test: keys alone redraw
    try:
        def order(ls):
            return [tuple(line.split()[:2]) for line in ls if line.split()[:1] in (["big"], ["events"], ["other"])]
        lines = t.wait_view(lambda ls: len(order(ls)) == 4)
        assert "sort: pending" in lines[0] and order(lines)[0] == ("big", "g")      # 2 pending
        for key, name, first in ((b"n", "name", ("big", "g")), (b"l", "lag", ("events", "g")),
                                 (b"\t", "lag-seconds", ("events", "g")), (b"r", "rate", ("big", "g"))):
            t.mark()
            t.send(key)
            lines = t.wait_view(lambda ls: ls[0].find("sort: %s" % name) >= 0 and len(order(ls)) == 4, timeout=10)
            assert order(lines)[0] == first, (name, lines)
        t.send(b"q")
        assert t.wait() == 0
    finally:
        t.close()


def test_ctrl_c_quits_as_ctrl_c_ends_xs_and_restores_the_terminal(db):
    t = Top(db)
    try:
        t.wait_view(lambda ls: row(ls, "events", "g"))
        t.send(b"\x03")
        status = t.wait()
        assert status == -signal.SIGINT, t.text()          # killed by SIGINT: the shell shows 130
        assert t.restored()
        assert b"Traceback" not in t.shown and b"Aborted" not in t.shown
    finally:
        t.close()


def test_a_resize_re_lays_out_the_view(db):
    t = Top(db, "-i", "30", cols=140, rows=30)              # no refresh: the resize alone redraws
    try:
        lines = t.wait_view(lambda ls: row(ls, "events", "g"))
        assert any(line.split() == HEAD for line in lines)
        t.resize(60, 5)
        # the frame's last line too: a frame can reach the terminal in more
        # than one read, and its header alone may be shown before the rest
        lines = t.wait_view(lambda ls: any(line.startswith("STREAM") for line in ls)
                            and any("more rows" in line for line in ls), timeout=10)
        head = next(line for line in lines if line.startswith("STREAM")).split()
        assert head[:2] == ["STREAM", "GROUP"] and "ACK/S" not in head and len(head) < len(HEAD)
        assert all(len(line) <= 60 for line in lines)
        assert any("... 2 more rows" in line for line in lines)  # 3 rows, 5 lines: 1 row, then the count
        t.resize(140, 30)
        lines = t.wait_view(lambda ls: any(line.split() == HEAD for line in ls) and row(ls, "other", "-"), timeout=10)
        assert row(lines, "events", "g") and row(lines, "events", "h")
        t.send(b"q")
        assert t.wait() == 0
    finally:
        t.close()


def test_in_a_pipe_it_prints_one_snapshot_and_exits(db):
    p = xs(db, "top", "--sort", "name")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.decode().splitlines()
    assert lines[0].split() == HEAD
    assert [line.split()[:2] for line in lines[1:]] == [["events", "g"], ["events", "h"], ["other", "-"]]
    assert "\x1b" not in p.stdout.decode()
    p = xs(db, "top", "events", "--group", "h")
    assert [line.split()[:2] for line in p.stdout.decode().splitlines()[1:]] == [["events", "h"]]


def test_a_missing_store_or_stream_is_an_error_and_nothing_is_created(tmp_path, db):
    p = xs(tmp_path / "none", "top")
    assert p.returncode == 1 and b"no such store" in p.stderr and not os.path.exists(tmp_path / "none")
    t = Term(XS + ["--db", str(tmp_path / "none"), "top"])
    try:
        assert t.wait() == 1 and b"no such store" in t.shown and not os.path.exists(tmp_path / "none")
    finally:
        t.close()
    p = xs(db, "top", "nope")
    assert p.returncode == 1 and p.stderr == b"xs: no such stream: nope\n"
    assert xs(db, "top", "-i", "0").returncode == 2


def test_it_never_writes(db):
    before = json.loads(xs(db, "info", "--json").stdout)["last_txn"]
    t = Top(db)
    try:
        t.wait_view(lambda ls: row(ls, "events", "g"))
        t.mark()
        t.wait_view(lambda ls: row(ls, "events", "g"))        # a refresh or more
        t.send(b"q")
        assert t.wait() == 0
    finally:
        t.close()
    assert json.loads(xs(db, "info", "--json").stdout)["last_txn"] == before


def test_it_never_keeps_xs_compact_waiting(db):
    t = Top(db)
    try:
        t.wait_view(lambda ls: row(ls, "events", "g"))
        p = xs(db, "compact", "--wait", "20", timeout=60)      # top opens the store only for each snapshot
        assert p.returncode == 0, p.stderr
        t.mark()
        t.wait_view(lambda ls: row(ls, "events", "g"))        # and goes on after it
        t.send(b"q")
        assert t.wait() == 0
    finally:
        t.close()


def doc_top_commands():
    text = open(os.path.join(ROOT, "docs", "monitoring.md"), encoding="utf-8").read()
    section = text[text.index("## xs top"):]
    section = section[:section.index("\n## ", 1)]
    return [line for block in re.findall(r"^```sh\n(.*?)^```$", section, re.S | re.M)
            for line in block.splitlines()]


def test_every_xs_top_command_of_the_doc_runs_on_a_terminal_and_in_a_pipe(tmp_path, db):
    assert run_xs(db, ["XGROUP CREATE events workers 0"]).returncode == 0
    cmds = doc_top_commands()
    assert len(cmds) >= 3 and all(c.startswith("xs top") for c in cmds), cmds
    for c in cmds:
        argv = c.split()[2:]
        t = Term(XS + ["--db", str(db), "top"] + [a.strip("'") for a in argv])
        try:
            t.expect(rb"q quit")
            t.send(b"q")
            assert t.wait() == 0, c
        finally:
            t.close()
        p = subprocess.run(["bash", "-c", c], capture_output=True, timeout=60, cwd=tmp_path,
                           env=dict(os.environ, XS_DB=str(db), PATH=shell_path(tmp_path)))
        assert p.returncode == 0 and p.stdout.startswith(b"STREAM"), (c, p.stderr)


def test_the_docs_sample_is_what_a_pipe_prints(db):
    text = open(os.path.join(ROOT, "docs", "monitoring.md"), encoding="utf-8").read()
    section = text[text.index("## xs top"):]
    sample = re.search(r"^```\n(STREAM.*?)^```$", section, re.S | re.M).group(1).splitlines()
    got = xs(db, "top").stdout.decode().splitlines()
    assert got[0] == sample[0]
    assert [line.split()[:7] for line in got[1:]] == [line.split()[:7] for line in sample[1:]]


def test_the_rates_are_differences_of_two_snapshots_over_the_time_between(db):
    """Two snapshots 2 s apart (their clocks set): 4 XADDs, 3 new
    entries delivered to g, 2 of its pending acknowledged, one read with
    NOACK by h (delivered and, never pending, counted as acknowledged)."""
    from storage.ops.overview import snapshot
    from storage.store import Store
    from xstream_cli.porcelain.top import rows_of, sort_rows

    def snap():
        store = Store(str(db), readonly=True, create=False)
        try:
            return snapshot(store, consumers=False, store_facts=False)
        finally:
            store.close()
    assert run_xs(db, ["XGROUP SETID events h 0 ENTRIESREAD 0"]).returncode == 0
    first = snap()
    lines = ["XADD events * f %d" % n for n in range(4)] + [
        "XREADGROUP GROUP g c COUNT 3 STREAMS events >", "XREADGROUP GROUP h c COUNT 1 NOACK STREAMS events >"]
    assert run_xs(db, lines).returncode == 0
    pend = [r[0] for r in json.loads(xs(db, "--json", "XPENDING", "events", "g", "-", "+", "2").stdout)]
    assert xs(db, "XACK", "events", "g", *pend).returncode == 0
    second = snap()
    second.now = first.now + 2000
    rows = {(r["stream"], r["group"]): r for r in rows_of(second, first)}
    g, h, other = rows[(b"events", b"g")], rows[(b"events", b"h")], rows[(b"other", None)]
    assert (g["in"], g["delivered"], g["acked"]) == (2.0, 1.5, 1.0)
    assert (h["delivered"], h["acked"]) == (0.5, 0.5)
    assert other["in"] == 0.0 and other["delivered"] is None
    assert all(r["in"] is None and r["delivered"] is None for r in rows_of(second, None))
    assert [(r["stream"], r["group"]) for r in sort_rows(list(rows.values()), "name")] == \
        [(b"events", b"g"), (b"events", b"h"), (b"other", None)]
    assert [r["group"] for r in rows_of(second, first, b"h")] == [b"h"]
