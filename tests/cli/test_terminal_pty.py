"""What a person at a terminal sees (issue 27): Ctrl-C during xs import,
export, save and restore (exit 130, and one line that says what stays
committed and how to go on -- never click's bare "Aborted!"), the worker's
status line kept off its commands' output, and xs tail showing entries as
XRANGE does."""
import json
import os
import signal
import subprocess
import time

from conftest import ROOT, XS, new_store
from tests.cli.test_prompt_pty import Term


def xlen(db, stream):
    p = subprocess.run(XS + ["--db", str(db), "--json", "XLEN", stream], capture_output=True, cwd=ROOT, timeout=60)
    return json.loads(p.stdout)


def wait_for(cond, timeout=30):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def interrupt(term):
    term.send(b"\x03")
    status = term.wait()
    text = term.text().decode("utf-8", "replace")
    term.close()
    return status, text


def test_ctrl_c_in_an_import_of_new_ids_says_which_lines_stay_and_how_to_import_the_rest(tmp_path):
    db = new_store(tmp_path / "db")
    t = Term(XS + ["--db", str(db), "import", "--stream", "s", "--format", "kv", "-"])
    t.send(b"a=1\nb=2\n")
    wait_for(lambda: xlen(db, "s") == 2)
    status, text = interrupt(t)
    assert status == -signal.SIGINT, text     # killed by SIGINT: the shell shows 130
    assert "xs: import: interrupted; lines 1-2 stay imported (2 entries); the IDs were new, so running it " \
           "again would add them twice: import the rest with tail -n +3 FILE | xs --db %s import --stream s " \
           "--format kv - (FILE: the input that was on stdin)" % db in text.replace("\r", "")
    assert "Aborted" not in text and "Traceback" not in text
    assert xlen(db, "s") == 2


def test_ctrl_c_in_an_import_of_an_export_says_to_rerun_with_skip_existing(tmp_path):
    db = new_store(tmp_path / "db")
    t = Term(XS + ["--db", str(db), "import", "-"])
    t.send(b'{"stream": "s", "id": "1-1", "fields": ["f", "v"]}\n')
    wait_for(lambda: xlen(db, "s") == 1)
    status, text = interrupt(t)
    assert status == -signal.SIGINT, text     # killed by SIGINT: the shell shows 130
    assert "xs: import: interrupted; line 1 stays imported (1 entry); to finish, run the same import again " \
           "with --skip-existing" in text
    assert "Aborted" not in text


_READ = {"x86_64": 0, "aarch64": 63}       # read(2)'s system call number


def wait_reading_stdin(pid, timeout=60):
    """Wait until process ``pid`` sleeps in read(0, ...) (a fixed sleep
    is not enough on a loaded machine: Ctrl-C would come while it still
    starts); where /proc cannot tell, give it 3 s."""
    nr = _READ.get(os.uname().machine)
    end = time.monotonic() + timeout
    while nr is not None and time.monotonic() < end:
        try:
            with open("/proc/%d/syscall" % pid) as f:
                call = f.read().split()
        except OSError:
            break
        if call[:2] == [str(nr), "0x0"]:
            return
        time.sleep(0.02)
    else:
        if nr is not None:
            raise AssertionError("never read its standard input")
    time.sleep(3)


def test_ctrl_c_in_a_restore_from_the_terminal_changes_nothing_and_says_so(tmp_path):
    db = new_store(tmp_path / "db")
    t = Term(XS + ["--db", str(db), "restore", "-"])
    wait_reading_stdin(t.p.pid)
    status, text = interrupt(t)
    assert status == -signal.SIGINT, text     # killed by SIGINT: the shell shows 130
    assert "xs: restore: interrupted; the store is as it was" in text
    assert "Aborted" not in text and "Traceback" not in text


# ------------------------------------------------ xs worker on a terminal

def test_the_worker_status_line_never_shares_a_line_with_the_commands_output(tmp_path):
    db = new_store(tmp_path / "db")
    subprocess.run(XS + ["--db", str(db)], input=b"XADD jobs 1-1 f a\nXADD jobs 1-2 f b\nXADD jobs 1-3 f c\n",
                   capture_output=True, cwd=ROOT, timeout=60)
    t = Term(XS + ["--db", str(db), "worker", "jobs", "-g", "g", "-c", "c", "--",
                   "sh", "-c", "sleep 0.6; echo resized cat.png"])
    t.expect(rb"running")
    for _ in range(3):
        t.expect(rb"resized cat\.png")
    status, text = interrupt(t)
    assert status == 0, text
    for i in [k for k in range(len(text)) if text.startswith("resized cat.png", k)]:
        assert text[i - 1] in "\r\n", repr(text[max(0, i - 60):i + 20])
    assert "runningresized" not in text


def test_a_failed_entry_prints_which_entry_which_attempt_and_what_next(tmp_path):
    db = new_store(tmp_path / "db")
    subprocess.run(XS + ["--db", str(db), "XADD", "jobs", "1-1", "f", "a"], capture_output=True, cwd=ROOT, timeout=60)
    p = subprocess.run(XS + ["--db", str(db), "worker", "jobs", "-g", "g", "-c", "c", "--once", "-q", "--",
                             "sh", "-c", "exit 3"], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 1                                  # --once: a failure is exit 1, for cron
    assert p.stderr == b"xs worker: 1-1 failed (exit 3), attempt 1, stays pending for the next run\n"
    p = subprocess.run(XS + ["--db", str(db), "worker", "jobs", "-g", "g", "-c", "c", "--once",
                             "--max-deliveries", "2", "--dead-letter", "dl", "--", "sh", "-c", "exit 3"],
                       capture_output=True, cwd=ROOT, timeout=60)
    lines = p.stderr.decode().splitlines()
    assert p.returncode == 1
    assert lines[0] == "xs worker: 1-1 failed (exit 3), attempt 2/2, to the dead-letter stream dl"
    assert lines[1].startswith("xs worker: 1-1 dead-lettered after 2 attempts (exit 3): dl ")
    assert lines[2].startswith("xs worker: 0 processed, 1 failed, 1 dead-lettered")


# ------------------------------------------------ one look for entries

def test_tail_shows_each_entry_exactly_as_xrange_does_after_its_stream(tmp_path):
    from tests.cli.test_prompt_pty import ANSI
    db = new_store(tmp_path / "db")
    subprocess.run(XS + ["--db", str(db)], capture_output=True, cwd=ROOT, timeout=60,
                   input='XADD s 1795647209626-0 city "two words" k a=b e "" n 東京\n'
                         'XADD s 1795647209779-0 city x k y e z n 1\n'.encode())
    shown = {}
    for name, argv in (("xrange", ["XRANGE", "s", "-", "+"]), ("tail", ["tail", "s"])):
        t = Term(XS + ["--db", str(db)] + argv, cols=120)
        assert t.wait() == 0
        shown[name] = [ANSI.sub(b"", line).decode() for line in t.shown.split(b"\r\n") if line]
        raw = t.shown
        t.close()
        assert b"\x1b[" in raw                                    # coloured on a terminal
    assert shown["xrange"] == ['1795647209626-0  2026-11-25T22:53:29.626Z  city="two words"  k=a=b  e=""  n=東京',
                               "1795647209779-0  2026-11-25T22:53:29.779Z  city=x  k=y  e=z  n=1"]
    assert shown["tail"] == ["s  " + line for line in shown["xrange"]]


def test_ctrl_c_while_xs_starts_exits_130_without_a_traceback(tmp_path):
    """Ctrl-C before a command got going (Python still importing) is exit
    130 and one line, never a traceback (a loaded machine hit it)."""
    db = new_store(tmp_path / "db")
    p = subprocess.Popen(XS + ["--db", str(db), "restore", "-"], cwd=ROOT, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1"))
    # -X importtime's lines show the imports going on: interrupt once ours
    # have begun (xs is running: before, Python itself may still be starting)
    while b"xstream_cli.context" not in p.stderr.readline():
        pass
    p.send_signal(2)
    out, err = p.communicate(timeout=60)
    assert p.returncode == -signal.SIGINT, err
    assert b"Traceback" not in err
