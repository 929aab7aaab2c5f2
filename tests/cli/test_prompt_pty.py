"""xs on a pseudo-terminal, as a person at a terminal meets it (issue 12):
the prompt (help, history kept across sessions, Ctrl-C, Ctrl-D, blocked
reads), pretty output of 200,000 entries streaming, and stored terminal
escapes shown escaped, never sent to the terminal raw."""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[=>]")


def _controlling_terminal():
    """In the child: a session of its own whose controlling terminal is
    the pty (stdin), so Ctrl-C typed there is SIGINT, as in a shell --
    with SIGINT's default disposition, as a login shell gives it (a test
    run started in the background, ``cmd &``, inherits SIGINT ignored,
    and Python then installs no KeyboardInterrupt handler)."""
    import fcntl
    import signal
    import termios
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Term:
    """A process on a pseudo-terminal; answers cursor-position requests
    like a terminal, collects everything it shows."""

    def __init__(self, argv, env=None, cols=100, rows=30):
        import fcntl
        import struct
        import termios
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        e = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
        e.pop("NO_COLOR", None)
        e.update(env or {})
        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=e, cwd=ROOT,
                                  preexec_fn=_controlling_terminal)
        os.close(slave)
        self.chunks = []
        self.seen = 0              # expect() searches from here
        self.size = (cols, rows)

    def _read(self, timeout):
        r, _, _ = select.select([self.master], [], [], timeout)
        if not r:
            return False
        try:
            data = os.read(self.master, 1 << 16)
        except OSError:            # EIO: the process is gone
            return None
        if not data:
            return None
        if b"\x1b[6n" in data:     # cursor position request
            os.write(self.master, b"\x1b[1;1R")
        self.chunks.append(data)
        return True

    @property
    def shown(self):
        """Everything the terminal was sent."""
        if len(self.chunks) > 1:
            self.chunks = [b"".join(self.chunks)]
        return self.chunks[0] if self.chunks else b""

    def expect(self, pattern, timeout=30):
        """Wait until ``pattern`` (bytes regex) shows after the last match;
        returns the match."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while True:
            m = rx.search(self.text(), self.seen)
            if m:
                self.seen = m.end()
                return m
            left = end - time.monotonic()
            if left <= 0 or self._read(min(left, 0.5)) is None and not rx.search(self.text(), self.seen):
                if left <= 0 or self.p.poll() is not None:
                    raise AssertionError("%r not shown; the terminal showed:\n%r" % (pattern, self.text()[-3000:]))

    def screen(self):
        """The screen as a terminal shows it now (pyte, a VT100 emulator):
        prompt_toolkit redraws only the cells that change, so a line it
        rewrote is whole on the screen, not in the stream of bytes."""
        import pyte
        screen = pyte.Screen(*self.size)
        pyte.ByteStream(screen).feed(self.shown)
        return "\n".join(line.rstrip() for line in screen.display)

    def expect_on_screen(self, pattern, timeout=30):
        """Wait until ``pattern`` (str regex) is on the screen."""
        rx = re.compile(pattern)
        end = time.monotonic() + timeout
        while not rx.search(self.screen()):
            left = end - time.monotonic()
            if left <= 0 or (self._read(min(left, 0.5)) is None and self.p.poll() is not None):
                raise AssertionError("%r not on the screen:\n%s" % (pattern, self.screen()))

    def text(self):
        """What was shown, colours and cursor movements left out."""
        return ANSI.sub(b"", self.shown)

    def send(self, data):
        os.write(self.master, data)

    def ctrl_c(self, timeout=30):
        """Ctrl-C at a prompt_toolkit prompt, then wait for the NEXT prompt:
        the aborted line is drawn once more ("xs db> XLEN ...", dimmed), so
        a plain expect(PROMPT) can match it while no session reads the
        terminal, and a key sent then is lost (a Ctrl-D, in cooked mode,
        is taken by the line discipline).  The next session starts with
        bracketed paste on (ESC [?2004h); its prompt comes after that."""
        start = len(self.shown)
        self.send(b"\x03")
        end = time.monotonic() + timeout
        while True:
            raw = self.shown[start:]
            i = raw.find(b"\x1b[?2004h")
            if i >= 0 and re.search(PROMPT, ANSI.sub(b"", raw[i:])):
                self.seen = len(self.text())
                return
            left = end - time.monotonic()
            assert left > 0 and self._read(min(left, 0.5)) is not None, \
                "no new prompt after Ctrl-C; the terminal showed:\n%r" % self.text()[-3000:]

    def wait(self, timeout=30):
        end = time.monotonic() + timeout
        while self.p.poll() is None and time.monotonic() < end:
            self._read(0.2)
        while self._read(0.05):
            pass
        return self.p.wait(timeout=max(1, end - time.monotonic()))

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        os.close(self.master)


@pytest.fixture
def term_env(tmp_path):
    state = tmp_path / "state"
    return {"XDG_STATE_HOME": str(state), "HOME": str(tmp_path / "home")}


def prompt(db, env):
    return Term(XS + ["--db", str(db)], env)


def fill(db, lines):
    p = subprocess.run(XS + ["--db", str(db), "--no-sync"], input=("\n".join(lines) + "\n").encode(),
                       capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr


PROMPT = rb"xs db>"


# ------------------------------------------------------------------ prompt

def test_help_xadd_at_the_prompt_shows_its_grammar_and_summary(tmp_path, term_env):
    t = prompt(tmp_path / "db", term_env)
    try:
        t.expect(PROMPT)
        t.send(b"help XADD\r")
        t.expect(rb"XADD key \[NOMKSTREAM\]")
        t.expect(rb"Append an entry")
        t.expect(PROMPT)
        t.send(b"help\r")
        t.expect(rb"XREADGROUP")
        t.expect(PROMPT)
        t.send(b"quit\r")
        assert t.wait() == 0
    finally:
        t.close()


def test_history_is_recalled_with_up_in_a_new_session_and_kept_private(tmp_path, term_env):
    db = tmp_path / "db"
    t = prompt(db, term_env)
    try:
        t.expect(PROMPT)
        t.send(b"XADD remembered 1-1 k v\r")
        t.expect(rb"\n1-1\r?\n")                    # the reply (not the echo of the line)
        t.expect(PROMPT)
        t.send(b"\x04")                             # Ctrl-D exits
        assert t.wait() == 0
    finally:
        t.close()
    hist = tmp_path / "state" / "xs" / "history"
    assert b"XADD remembered 1-1 k v" in hist.read_bytes()
    assert hist.stat().st_mode & 0o777 == 0o600
    assert hist.parent.stat().st_mode & 0o777 == 0o700
    t = prompt(db, term_env)
    try:
        t.expect(PROMPT)
        t.send(b"\x1b[A")                           # Up: the last line of the earlier session
        t.expect(rb"XADD remembered 1-1 k v")
        t.send(b"\r")                               # run again: the same ID is refused now
        t.expect(rb"equal or smaller")
        t.expect(PROMPT)
        t.send(b"exit\r")
        assert t.wait() == 0
    finally:
        t.close()


def test_ctrl_c_on_a_half_typed_line_keeps_the_prompt(tmp_path, term_env):
    db = tmp_path / "db"
    fill(db, ["XADD s 5-0 a 1"])
    t = prompt(db, term_env)
    try:
        t.expect(PROMPT)
        t.send(b"XLEN nothing-typed-here")
        t.expect(rb"nothing-typed-here")
        t.ctrl_c()  # Ctrl-C: the line is dropped
        assert t.p.poll() is None
        t.send(b"XLEN s\r")
        t.expect(rb"\n1\r?\n")
        t.expect(PROMPT)
        assert b"Traceback" not in t.text()
        t.send(b"\x04")
        assert t.wait() == 0
    finally:
        t.close()


def test_ctrl_c_during_a_blocked_read_returns_to_the_prompt(tmp_path, term_env):
    db = tmp_path / "db"
    fill(db, ["XADD s 5-0 a 1"])
    t = prompt(db, term_env)
    try:
        t.expect(PROMPT)
        t.send(b"XREAD BLOCK 0 STREAMS s $\r")
        time.sleep(1.0)
        t.ctrl_c()
        t.send(b"XLEN s\r")
        t.expect(rb"\n1\r?\n")
        assert b"Traceback" not in t.text()
        t.send(b"quit\r")
        assert t.wait() == 0
    finally:
        t.close()


def test_tab_completes_commands_and_stream_and_group_names_from_the_store(tmp_path, term_env):
    db = tmp_path / "db"
    fill(db, ["XADD orders 1-0 item apple", "XGROUP CREATE orders billing 0"])
    t = prompt(db, term_env)
    try:
        t.expect(PROMPT)
        # each Tab has one candidate, which it inserts: the line run is
        # XREADGROUP GROUP billing bob STREAMS orders >
        t.send(b"XREADGR\t")
        t.expect(rb"OUP")
        t.send(b" GROUP bil\t")
        t.expect(rb"ling")
        t.send(b" bob STREAMS ord\t")
        t.expect(rb"ers")
        t.send(b" >\r")
        t.expect(rb"1-0  item=apple")
        t.expect(PROMPT)
        t.send(b"XINFO CONSUMERS orders billing\r")
        t.expect(rb"bob\s+1\s")                     # a row of the reply, not a history suggestion
        t.expect(PROMPT)
        t.send(b"\x04")
        assert t.wait() == 0
    finally:
        t.close()


def test_grammar_hint_shows_while_typing(tmp_path, term_env):
    t = prompt(tmp_path / "db", term_env)
    try:
        t.expect(PROMPT)
        t.send(b"XAUTOCLAIM ")
        t.expect_on_screen(r"XAUTOCLAIM key group consumer min-idle-time start")
        t.ctrl_c()
        t.send(b"\x04")
        assert t.wait() == 0
    finally:
        t.close()


def test_dumb_terminal_falls_back_to_a_plain_prompt_with_help_and_ctrl_c(tmp_path, term_env):
    db = tmp_path / "db"
    fill(db, ["XADD s 5-0 a 1"])
    t = Term(XS + ["--db", str(db)], dict(term_env, TERM="dumb"))
    try:
        t.expect(PROMPT)
        assert b"\x1b[6n" not in t.shown             # not prompt_toolkit
        t.send(b"help XLEN\r")
        t.expect(rb"XLEN key")
        t.expect(PROMPT)
        t.send(b"XLEN hal")
        t.expect(rb"XLEN hal")                      # echoed: readline is waiting for more
        # as a person types it, not within microseconds of the echo: GNU
        # readline (CPython's readline module) echoes, then calls pselect
        # with no timeout; a SIGINT landing between the two is only seen
        # at the next key (strace showed it: about half the runs on a quiet
        # machine).  No person is that fast; a test sending it then waits
        # forever.
        time.sleep(0.3)
        t.send(b"\x03")
        t.expect(PROMPT)
        t.send(b"XLEN s\r")
        t.expect(rb"\n1\r?\n")
        t.expect(PROMPT)
        t.send(b"\x04")
        assert t.wait() == 0
    finally:
        t.close()


# ------------------------------------------------------------ pretty output

N_BIG = 200000


@pytest.fixture(scope="module")
def big_db(tmp_path_factory):
    """A stream of N_BIG entries, loaded in one transaction of this
    process (200,000 XADDs through xs took most of a minute)."""
    from storage.store import Store
    db = tmp_path_factory.mktemp("big") / "db"
    store = Store(str(db), durable=False)
    try:
        records = (("entry", i, b"big", (1700000000000 + i, 0),
                    [b"user", b"alice%d" % i, b"action", b"login", b"n", b"%d" % i]) for i in range(1, N_BIG + 1))
        store.run(lambda tx: tx.load(records), write=True)
    finally:
        store.close()
    return db


def test_pretty_xrange_of_200000_entries_streams(big_db):
    """The issue's bar is the first line within 1 s and all within 15 s;
    this test allows a loaded machine 5 s and 60 s, and prints what it
    measured."""
    t0 = time.monotonic()
    t = Term(XS + ["--db", str(big_db), "XRANGE", "big", "-", "+"])
    try:
        t.expect(rb"1700000000001-0  2023-11-14T22:13:20\.001Z  user=alice1  action=login  n=1", timeout=60)
        first = time.monotonic() - t0
        status = t.wait(timeout=120)
        total = time.monotonic() - t0
    finally:
        t.close()
    text = t.text()
    print("pretty XRANGE of %d entries on a pty: first line %.2f s, all %.2f s" % (N_BIG, first, total))
    assert status == 0
    assert text.count(b"\n") == N_BIG
    assert b"1700000200000-0  2023-11-14T22:16:40.000Z  user=alice200000  action=login  n=200000" in text
    assert first < 5, first
    assert total < 60, total


def _max_rss_kb(db, mode):
    """Peak memory of ``xs MODE XRANGE big - +`` (output discarded)."""
    code = ("import atexit, resource, runpy, sys\n"
            "atexit.register(lambda: sys.stderr.write("
            "'MAXRSS ' + str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) + '\\n'))\n"
            "sys.argv = ['xs', '--db', " + repr(str(db)) + ", " + repr(mode) + ", 'XRANGE', 'big', '-', '+']\n"
            "runpy.run_module('xstream_cli', run_name='__main__')\n")
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       cwd=ROOT, timeout=300)
    assert p.returncode == 0, p.stderr
    return int(re.search(rb"MAXRSS (\d+)", p.stderr).group(1))


def test_pretty_xrange_of_200000_entries_needs_no_more_memory_than_raw(big_db):
    """Streaming: pretty holds the reply as raw does, never a table of
    it (before: 508 MB for pretty, against 80 MB for raw)."""
    raw, pretty = _max_rss_kb(big_db, "--raw"), _max_rss_kb(big_db, "--pretty")
    print("peak memory, XRANGE of %d entries: raw %d MB, pretty %d MB" % (N_BIG, raw // 1024, pretty // 1024))
    assert pretty < raw * 1.3 + 20 * 1024, (raw, pretty)


def test_ctrl_c_during_pretty_output_exits_130_without_traceback(big_db):
    t = Term(XS + ["--db", str(big_db), "XRANGE", "big", "-", "+"])
    try:
        t.expect(rb"user=alice1 ", timeout=60)
        t.send(b"\x03")
        status = t.wait(timeout=60)
    finally:
        t.close()
    assert status == -signal.SIGINT          # killed by SIGINT: the shell shows 130
    assert b"Traceback" not in t.text() and b"KeyboardInterrupt" not in t.text()
    assert t.text().count(b"\n") < N_BIG


def test_ctrl_c_during_pretty_output_at_the_prompt_returns_to_it(big_db, term_env):
    t = prompt(big_db, term_env)
    try:
        t.expect(PROMPT)
        t.send(b"XRANGE big - +\r")
        t.expect(rb"user=alice1 ", timeout=60)
        t.ctrl_c(timeout=60)
        t.send(b"XLEN big\r")
        t.expect(rb"\n200000\r?\n", timeout=60)
        t.expect(PROMPT)
        t.send(b"\x04")
        assert t.wait(timeout=60) == 0
    finally:
        t.close()
    assert b"Traceback" not in t.text()
    assert b"user=alice200000 " not in t.text()        # the output stopped


EVIL = r'"\x1b]0;owned\x07\x1b[2J\x1b[31mred\xc2\x9b\x7f\xff M\xc3\xbcnchen \xe6\x97\xa5\xe6\x9c\xac"'


@pytest.mark.parametrize("args", [["XRANGE", "e", "-", "+"], ["tail", "e"]], ids=["xrange", "tail"])
def test_stored_terminal_escapes_are_shown_escaped(tmp_path, args):
    db = tmp_path / "db"
    fill(db, ["XADD e 1700000000000-0 v " + EVIL])
    t = Term(XS + ["--db", str(db)] + args, cols=200)
    try:
        assert t.wait() == 0
    finally:
        t.close()
    shown = t.shown
    # nothing stored reaches the terminal raw: no OSC title, no clear screen, no BEL/DEL/C1
    for bad in (b"\x1b]", b"\x1b[2J", b"\x07", b"\x7f", b"\xc2\x9b", b"\xff"):
        assert bad not in shown, (bad, shown)
    assert b"\\x1b]0;owned\\a\\x1b[2J\\x1b[31mred\\xc2\\x9b\\x7f\\xff" in shown
    assert "München 日本".encode() in shown          # printable UTF-8 stays as it is


# ------------------------------------------------------------ completion

class _Names:
    def stream_names(self):
        return [b"events", b"my stream", b"evil\x1b[2J"]

    def group_names(self, stream=None):
        return {None: [b"billing", b"audit"], b"my stream": [b"billing"]}.get(stream, [])

    def consumer_names(self, stream, group):
        return [b"alice"] if (stream, group) == (b"my stream", b"billing") else []


def test_completion_offers_names_as_they_must_be_typed():
    from xstream_cli.prompt_complete import complete_words
    n = _Names()
    assert complete_words(["XLEN"], "", n) == ["events", '"my stream"', '"evil\\x1b[2J"']
    assert complete_words(["XACK", '"my stream"'], "", n) == ["billing"]
    assert complete_words(["XCLAIM", '"my stream"', "billing"], "", n) == ["alice"]
    assert complete_words(["XREADGROUP", "GROUP"], "a", n) == ["audit"]
    assert complete_words([], "xinf", n) == ["xinfo"]
    assert complete_words(["XINFO"], "C", n) == ["CONSUMERS"]
    assert complete_words(["XRANGE", "events", "-", "+"], "", n) == ["COUNT"]
    assert complete_words(["help"], "XAU", n) == ["XAUTOCLAIM"]


# -------------------------------------------- as much as the command line

def test_a_pasted_block_of_three_commands_runs_as_three(tmp_path, term_env):
    t = prompt(tmp_path / "db", term_env)
    try:
        t.expect(PROMPT)
        t.send(b"\x1b[200~XADD s 1-1 a 1\nXADD s 1-2 a 2\nXLEN s\x1b[201~\r")    # a bracketed paste
        t.expect(rb"1-1\r?\n")
        t.expect(rb"1-2\r?\n")
        t.expect(rb"\(integer\) 2|\b2\r?\n")
        t.expect(PROMPT)
        t.send(b"quit\r")
        assert t.wait() == 0
    finally:
        t.close()
    assert json.loads(subprocess.run(XS + ["--db", str(tmp_path / "db"), "--json", "XLEN", "s"],
                                     capture_output=True, cwd=ROOT, timeout=60).stdout) == 2


def test_porcelain_commands_a_typo_and_clear_at_the_prompt(tmp_path, term_env):
    t = prompt(tmp_path / "db", term_env)
    try:
        t.expect(PROMPT)
        t.send(b"XADD events 1-1 user alice\r")
        t.expect(PROMPT)
        t.send(b"ls\r")
        t.expect(rb"STREAM\s+LENGTH")
        t.expect(rb"events\s+1")
        t.expect(PROMPT)
        t.send(b"tail events\r")
        t.expect(rb"events\s+1-1\s+.*user=alice")
        t.expect(PROMPT)
        t.send(b"info\r")
        t.expect(rb"streams\s+1")
        t.expect(PROMPT)
        t.send(b"XADDD events * a 1\r")
        t.expect(rb"unknown command 'XADDD'")
        t.expect(rb"did you mean XADD\?")
        t.expect(PROMPT)
        t.send(b"XADD events\r")
        t.expect(rb"wrong number of arguments")
        t.expect(rb"XADD key \[NOMKSTREAM\]")                  # the usage line
        t.expect(PROMPT)
        t.send(b"clear\r")
        t.expect(rb"\x1b\[2J|" + PROMPT)
        t.expect(PROMPT)
        t.send(b"quit\r")
        assert t.wait() == 0
    finally:
        t.close()


def test_help_summaries_use_the_width_of_a_wide_terminal(tmp_path, term_env):
    t = Term(XS + ["--db", str(tmp_path / "db"), "help"], term_env, cols=160)
    try:
        assert t.wait() == 0
        text = t.text().decode()
    finally:
        t.close()
    cut = [line for line in text.replace("\r", "").splitlines() if line.endswith("...")]
    assert cut and all(len(line) > 120 for line in cut), cut       # only what a 160-column line cannot hold
