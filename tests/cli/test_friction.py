"""Friction that users of redis-cli, kcat and nats hit (issue 38, item 9),
each met as a user meets it: xs tail through a group with -c, the start
of a group that xs creates, xs serve's maxclients line, the prompt's
grammar hint and Ctrl-C in a shell (on a pseudo-terminal), the command
that finishes an interrupted import, --since with ISO times, and the
--json keys that are not UTF-8."""
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time

import pytest

from conftest import ROOT, XS, new_store, run_xs
from tests.cli.test_blocking_cli import TIMEOUT, wait_blocked
from tests.cli.test_prompt_pty import Term


@pytest.fixture
def db(tmp_path):
    return new_store(tmp_path / "db")


def fill(db, lines):
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stderr
    return p


def xs(db, *args, env=None, timeout=TIMEOUT):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, cwd=ROOT, timeout=timeout,
                          env=env)


def json_reply(db, line):
    return json.loads(run_xs(db, [line]).stdout)


# ------------------------------------------ a. tail --group -c N (take the next N)

def test_tail_group_count_takes_the_next_n_through_the_group_and_exits(db):
    fill(db, ["XADD s 1-0 i 1", "XADD s 2-0 i 2", "XADD s 3-0 i 3"])
    p = xs(db, "tail", "--group", "g", "--consumer", "c", "--start", "0", "-c", "2", "s")
    assert p.returncode == 0, p.stderr
    assert p.stdout == b"s 1-0 i=1\ns 2-0 i=2\n"
    # acked, and the third entry was never delivered (not pending anywhere)
    assert json_reply(db, "XPENDING s g")[0] == 0
    assert json_reply(db, "XINFO GROUPS s")[0]["last-delivered-id"] == "2-0"


def test_tail_group_count_waits_for_entries_as_follow_does(db):
    fill(db, ["XGROUP CREATE s g $ MKSTREAM", "XGROUP CREATE t g $ MKSTREAM"])
    f = subprocess.Popen(XS + ["--db", str(db), "tail", "--group", "g", "--consumer", "c", "-c", "3", "s", "t"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_blocked(f)
        fill(db, ["XADD s 1-0 a 1", "XADD t 2-0 b 2"])
        wait_blocked(f)                          # two taken, one to go: still waiting
        fill(db, ["XADD s 3-0 a 3", "XADD s 4-0 a 4"])
        out, err = f.communicate(timeout=TIMEOUT)
    finally:
        if f.poll() is None:
            f.kill()
            f.communicate()
    assert f.returncode == 0 and err == b"", err
    assert out == b"s 1-0 a=1\nt 2-0 b=2\ns 3-0 a=3\n"
    assert json_reply(db, "XPENDING s g")[0] == 0
    assert json_reply(db, "XINFO GROUPS s")[0]["last-delivered-id"] == "3-0"   # 4-0 left for the next reader


@pytest.mark.parametrize("args", [["-f", "-n", "3"], ["-c", "2", "-n", "3"]])
def test_tail_group_n_goes_with_neither_follow_nor_count(db, args):
    p = xs(db, "tail", "--group", "g", "--consumer", "c", *args, "s")
    assert p.returncode == 2 and b"-n N takes at most N of each stream" in p.stderr, p.stderr


# ------------------------------------------ b. where a created group starts

def test_a_group_made_by_tail_or_worker_is_announced_with_its_start(db):
    fill(db, ["XADD s 1-0 a 1"])
    p = xs(db, "tail", "--group", "viewers", "--consumer", "c", "s")
    assert p.returncode == 0 and p.stdout == b""
    assert p.stderr == (b"xs: tail: created group viewers on stream s at $: new entries only, the default of "
                        b"xs tail; --start 0 reads what is there\n")
    p = xs(db, "tail", "--group", "viewers", "--consumer", "c", "s")
    assert p.stderr == b""                                           # it exists now: nothing to say
    p = xs(db, "worker", "s", "-g", "jobs", "-c", "w1", "--once", "--", "true")
    assert p.returncode == 0, p.stderr
    assert b"xs: worker: created group jobs on stream s at 0: every entry already there, the default of " \
           b"xs worker; --start $ for new entries only\n" in p.stderr
    p = xs(db, "worker", "s", "-g", "quiet", "-c", "w1", "--once", "-q", "--start", "$", "--", "true")
    assert p.returncode == 0 and b"created group" not in p.stderr
    tail_help = xs(db, "tail", "--help").stdout.decode()
    worker_help = xs(db, "worker", "--help").stdout.decode()
    assert "$ (the default, as tail -f: new entries only)" in " ".join(tail_help.split())
    assert "0 (the default: every entry already there, as a queue needs" in " ".join(worker_help.split())


# ------------------------------------------ c. xs serve and maxclients

def _serve_log(tmp_path, *args):
    """xs serve under ``ulimit -n 256`` (hard), stopped once it answers
    on its socket; its log (stderr)."""
    db = new_store(tmp_path / "db")
    sock = str(db / "serve.sock")

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    p = subprocess.Popen(XS + ["--db", str(db), "serve"] + list(args), cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=low_limit)
    try:
        end = time.monotonic() + TIMEOUT
        while True:
            try:
                with socket.socket(socket.AF_UNIX) as c:
                    c.settimeout(5)
                    c.connect(sock)
                    c.sendall(b"PING\r\n")
                    assert c.recv(100) == b"+PONG\r\n"
                break
            except OSError:
                assert time.monotonic() < end and p.poll() is None, p.communicate(timeout=TIMEOUT)
                time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=TIMEOUT)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    return err.decode()


def test_serve_lowers_the_default_maxclients_without_a_warning(tmp_path):
    log = _serve_log(tmp_path)
    assert " WARNING " not in log, log
    assert sum(" INFO maxclients has been reduced to %d " % ((256 - 64) // 5) in line
               for line in log.splitlines()) == 1, log


def test_serve_warns_when_the_maxclients_asked_for_cannot_be_had(tmp_path):
    log = _serve_log(tmp_path, "--maxclients", "5000")
    lines = [line for line in log.splitlines() if " WARNING " in line]
    assert len(lines) == 1 and "you requested maxclients of 5000" in lines[0] \
        and "maxclients has been reduced to %d" % ((256 - 64) // 5) in lines[0], log


# ------------------------------------------ d. the prompt's grammar hint

def test_the_toolbar_shows_what_is_still_to_type_of_xreadgroup(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    t = Term(XS + ["--db", str(tmp_path / "db")], env, cols=100)
    try:
        t.expect(rb"xs db>")
        t.send(b"XREADGROUP GROUP g c ")
        t.expect_on_screen(r"XREADGROUP, next: \[COUNT count\] .*STREAMS key \[key \.\.\.\] id \[id \.\.\.\]")
        t.send(b"COUNT 5 STREAMS s ")
        t.expect_on_screen(r"XREADGROUP, next: \[key \.\.\.\] id \[id \.\.\.\]")
        assert max(len(line) for line in t.screen().splitlines()) <= 100
        t.ctrl_c()
        t.send(b"\x04")
        assert t.wait() == 0
    finally:
        t.close()


def test_the_hint_follows_the_words_typed_in_any_order_of_options():
    from xstream_cli.prompt_hint import hint
    assert hint("XREADGROUP GROUP g c ", 200) == ("XREADGROUP, next: [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] "
                                                  "[BLOCK milliseconds] [CLAIM min-idle-time] [NOACK] STREAMS key "
                                                  "[key ...] id [id ...]")
    assert hint("xreadgroup group g c block 0 count 1 ", 200) == (
        "XREADGROUP, next: [MAXCOUNT n] [MAXSIZE bytes] [CLAIM min-idle-time] [NOACK] STREAMS key "
        "[key ...] id [id ...]")
    assert hint("XADD s MAXLEN ~ 100 * ", 200) == "XADD, next: field value [field value ...]"
    assert hint("XGROUP CREATE s g ", 200) == "XGROUP CREATE, next: <id | $> [MKSTREAM] [ENTRIESREAD entries-read]"
    assert hint("XAUTOCLAIM ", 200) == "XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]"
    narrow = hint("XREADGROUP GROUP g c ", 80)
    assert len(narrow) <= 80 and narrow.endswith("STREAMS key [key ...] id [id ...]") and "more]" in narrow


# ------------------------------------------ e. Ctrl-C, as a shell sees it

def test_ctrl_c_ends_xs_as_killed_by_sigint_so_the_shell_prompt_has_its_own_line(db, tmp_path):
    fill(db, ["XADD s 1-0 a 1"])
    t = Term(["bash", "--norc", "--noprofile", "-i"], {"PS1": "PROMPT$ ", "HOME": str(tmp_path)})
    try:
        t.expect(rb"PROMPT\$ ")
        t.send(b"%s --db %s tail -f s\r" % (" ".join(XS).encode(), str(db).encode()))
        t.expect(rb"a=1")
        time.sleep(0.5)                                 # waiting for more
        t.send(b"\x03")
        t.expect(rb"PROMPT\$ ")
        t.send(b"echo status=$?\r")
        t.expect(rb"status=\d+")
        t.expect(rb"PROMPT\$ ")
        screen = t.screen()
        t.send(b"exit\r")
        t.wait(timeout=30)
    finally:
        t.close()
    lines = [line for line in screen.splitlines() if line]
    i = next(k for k, line in enumerate(lines) if "^C" in line)
    # the shell's prompt on a line of its own (not "^CPROMPT$"), and $? is 130
    assert lines[i:i + 3] == ["^C", "PROMPT$ echo status=$?", "status=130"], screen


def test_the_man_page_says_what_ctrl_c_does():
    text = open(os.path.join(ROOT, "man", "xs.1")).read()
    section = text[text.index(".SH EXIT STATUS"):text.index(".SH ENVIRONMENT")]
    assert "killed by SIGINT" in section and "exits 0" in section


# ------------------------------------------ f. the command that finishes an import

def _interrupted_import(tmp_path, db, args, lines):
    """xs import reading a FIFO (its name with a space) on a terminal,
    Ctrl-C once ``lines`` are in; what the terminal showed."""
    fifo = str(tmp_path / "in put.jsonl")
    os.mkfifo(fifo)
    t = Term(XS + ["--db", str(db), "import"] + args + [fifo])
    try:
        w = os.open(fifo, os.O_WRONLY)
        try:
            os.write(w, b"".join(lines))
            end = time.monotonic() + TIMEOUT
            while json_reply(db, "XLEN s") != len(lines):
                assert time.monotonic() < end, t.text()
                time.sleep(0.05)
            t.send(b"\x03")
            status = t.wait()
        finally:
            os.close(w)
    finally:
        t.close()
    os.unlink(fifo)
    text = t.text().decode().replace("\r", "")
    assert status == -signal.SIGINT, text
    return fifo, text


def test_an_interrupted_import_of_new_ids_prints_the_whole_command_for_the_rest(db, tmp_path):
    fifo, text = _interrupted_import(tmp_path, db, ["--stream", "s", "--format", "kv", "--batch", "1"],
                                     [b"a=1\n", b"b=2\n"])
    m = re.search(r"import the rest with (tail -n \+3 .*)\n", text)
    assert m, text
    assert m.group(1) == ("tail -n +3 '%s' | xs --db %s import --stream s --format kv --batch 1 -" % (fifo, db))
    with open(fifo, "wb") as f:                      # the same input, whole, as a file now
        f.write(b"a=1\nb=2\nc=3\nd=4\n")
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "xs").write_text("#!/bin/sh\nexec %s \"$@\"\n" % " ".join(XS))
    (shim / "xs").chmod(0o755)
    p = subprocess.run(["bash", "-c", m.group(1)], cwd=ROOT, capture_output=True, timeout=TIMEOUT,
                       env=dict(os.environ, PATH="%s:%s" % (shim, os.environ["PATH"])))
    assert p.returncode == 0, p.stderr
    assert [e[1] for e in json_reply(db, "XRANGE s - +")] == [["a", "1"], ["b", "2"], ["c", "3"], ["d", "4"]]


def test_an_interrupted_import_of_an_export_prints_the_command_with_skip_existing(db, tmp_path):
    rows = [b'{"stream": "s", "id": "1-%d", "fields": ["f", "%d"]}\n' % (i, i) for i in range(1, 4)]
    fifo, text = _interrupted_import(tmp_path, db, ["--batch", "1"], rows[:2])
    assert ("to finish, run the same import again with --skip-existing: xs --db %s import --batch 1 "
            "--skip-existing '%s'\n" % (db, fifo)) in text, text


# ------------------------------------------ g. --since with ISO 8601 times

def test_tail_since_takes_iso_times_and_dates(db):
    utc_10 = 1795773600000                           # 2026-11-27T10:00:00Z
    fill(db, ["XADD s %d-0 at before" % (utc_10 - 1), "XADD s %d-0 at ten" % utc_10,
              "XADD s %d-0 at later" % (utc_10 + 3600000)])
    for when in ["2026-11-27T10:00Z", "2026-11-27T10:00:00.000z", "2026-11-27 11:00+01:00", "2026-11-27T05:00-0500"]:
        p = xs(db, "tail", "--since", when, "s")
        assert p.returncode == 0 and p.stdout == b"s 1795773600000-0 at=ten\ns 1795777200000-0 at=later\n", \
            (when, p.stderr)
    tokyo = dict(os.environ, TZ="Asia/Tokyo")            # naive: local time (UTC+9, no DST)
    p = xs(db, "tail", "--since", "2026-11-27T19:00:00", "s", env=tokyo)
    assert p.stdout == b"s 1795773600000-0 at=ten\ns 1795777200000-0 at=later\n", p.stderr
    p = xs(db, "tail", "--since", "2026-11-28", "s", env=tokyo)   # midnight in Tokyo: 15:00Z the day before
    assert p.returncode == 0 and p.stdout == b""                  # after every entry
    p = xs(db, "tail", "--since", "2026-11-27", "s", env=dict(os.environ, TZ="UTC"))
    assert p.stdout.count(b"\n") == 3


@pytest.mark.parametrize("bad", ["yesterday", "2026-02-30", "2026-11-27T25:00", "27/11/2026"])
def test_tail_since_refuses_a_bad_value_naming_both_forms(db, bad):
    p = xs(db, "tail", "--since", bad, "s")
    assert p.returncode == 2 and b"Traceback" not in p.stderr
    assert b"a duration back from now" in p.stderr and b"ISO 8601" in p.stderr and bad.encode() in p.stderr


# ------------------------------------------ h. --json keys that are not UTF-8

def test_json_keys_that_are_not_utf8_are_surrogate_escapes_distinct_from_a_backslash(db):
    fill(db, ['XADD "k\\xff" 1-0 f v', 'XADD "k\\\\xff" 1-0 f w'])
    p = subprocess.run(XS + ["--db", str(db), "--json"], input=b'XREAD STREAMS "k\\xff" "k\\\\xff" 0 0\n',
                       capture_output=True, cwd=ROOT, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(b'{"k\\udcff": ')                 # the documented escape
    reply = json.loads(p.stdout)
    keys = {k.encode("utf-8", "surrogateescape"): v for k, v in reply.items()}
    assert keys == {b"k\xff": [["1-0", ["f", "v"]]], b"k\\xff": [["1-0", ["f", "w"]]]}
    assert "\\udcXX" in xs(db, "--help").stdout.decode()
