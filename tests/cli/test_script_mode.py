"""Script mode reads lines as redis-cli does: a leading repeat count,
``quit`` / ``exit`` ending the script, a closing quote followed by any
white space (VT and FF too), and the messages redis-cli prints for lines
it cannot run.  Compared byte for byte with ``redis-cli --raw`` and
``--no-raw`` reading the same lines; --json gets a JSON document for each."""
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from conftest import new_store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]

needs_cli = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")


def xs_script(tmp_path, data, flag):
    env = dict(os.environ, XS_NO_SYNC="1")
    db = tmp_path / ("db" + flag)
    if not db.exists():
        new_store(db)            # as redis-cli meets a running server: the store is there
    return subprocess.run(XS + ["--db", str(db), flag], input=data,
                          capture_output=True, timeout=60, cwd=ROOT, env=env)


def cli_script(redis, data, flag):
    redis.flushall()
    return subprocess.run(["redis-cli", "-p", str(redis.port), flag], input=data,
                          capture_output=True, timeout=60).stdout


def ids_masked(b):
    return re.sub(rb"\d{13}-\d+", b"<id>", b)


SCRIPTS = {
    "repeat_count_runs_the_rest_of_the_line_n_times":
        b"3 XADD s * f v\nXLEN s\n+2 XLEN s\n 2 XLEN s\n",
    "bad_repeat_counts_get_redis_clis_message":
        b"XADD s 1-0 f v\n0 XLEN s\n-1 XLEN s\n99999999999999999999 XLEN s\n\"\" XLEN s\nXLEN s\n",
    "a_number_alone_is_a_command_not_a_count":
        b"3\nXADD s 1-0 f v\n\"3 \" XLEN s\n",
    "quit_and_exit_end_the_script":
        b"XADD s 1-0 f v\nquit\nXADD s 2-0 f v\nXLEN s\n",
    "exit_in_any_case_ends_the_script":
        b"XADD s 1-0 f v\nEXIT\nXLEN s\n",
    "a_closing_quote_may_be_followed_by_vt_or_ff":
        b"XADD s 1-0 \"a\"\x0bb\nXADD s 2-0 'a'\x0cb\nXRANGE s - +\n",
    "unbalanced_quotes_are_invalid_arguments":
        b"XLEN \"s\nXADD s 1-0 'f v\nXLEN s\n",
    "a_repeated_blocking_read_waits_each_time":
        b"XADD s 1-0 a 1\n2 XREAD BLOCK 30 STREAMS s $\nXLEN s\n",
}


@needs_cli
@pytest.mark.parametrize("flag", ["--raw", "--no-raw"])
@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_script_lines_read_as_redis_cli_reads_them(name, flag, redis, tmp_path):
    data = SCRIPTS[name]
    want = ids_masked(cli_script(redis, data, flag))
    got = ids_masked(xs_script(tmp_path, data, flag).stdout)
    assert got == want, "\n--- redis-cli\n%s\n--- xs\n%s" % (want.decode(errors="replace"),
                                                            got.decode(errors="replace"))


def test_json_mode_answers_unreadable_lines_with_a_json_document(tmp_path):
    p = xs_script(tmp_path, b"XLEN \"s\n0 XLEN s\nXLEN s\n", "--json")
    docs = [json.loads(l) for l in p.stdout.decode().splitlines()]
    assert docs == [{"error": "Invalid argument(s)"},
                    {"error": "Invalid redis-cli repeat command option value."},
                    0]


def test_quit_stops_reading_and_keeps_the_exit_status(tmp_path):
    p = xs_script(tmp_path, b"XLEN s\nXADD s 0-0 f v\nquit\nXADD s 5-0 f v\n", "--raw")
    assert b"5-0" not in p.stdout and p.stdout.startswith(b"0\nERR ")
    assert p.returncode == 1                    # a command failed before quit
    after = xs_script(tmp_path, b"XLEN s\n", "--raw")
    assert after.stdout == b"0\n"              # the line after quit never ran
    p = xs_script(tmp_path, b"XLEN s\nexit\nXADD s 0-0 f v\n", "--raw")
    assert p.returncode == 0 and p.stdout == b"0\n"


def test_a_script_from_a_pipe_names_each_failing_line_on_stderr(tmp_path):
    script = (b"XADD s 1-1 a 1\nXADD s 1-1 a 1\n\nXADD s * a\nXLEN s\nXADD t * a 1\nXADD t * b\nFOO\n"
              b"2 XADD s 0-1 a b\n\"unclosed\nXADD u \"*\" q 1\n")
    p = xs_script(tmp_path, script, "--raw")
    assert p.returncode == 1
    assert p.stderr.decode().splitlines() == [
        "xs: line 2: ERR The ID specified in XADD is equal or smaller than the target stream top item",
        "xs: line 4: ERR wrong number of arguments for 'xadd' command",
        "xs: line 7: ERR wrong number of arguments for 'xadd' command",
        "xs: line 8: ERR unknown command 'FOO', with args beginning with: ",
        "xs: line 9: ERR The ID specified in XADD is equal or smaller than the target stream top item",
        "xs: line 9: ERR The ID specified in XADD is equal or smaller than the target stream top item",
        "xs: line 10: Invalid argument(s)"]
    assert b"xs: line" not in p.stdout                       # stdout stays redis-cli's


def test_errors_inside_a_run_of_plain_xadds_are_named_by_their_own_lines(tmp_path):
    db = tmp_path / "db--raw"
    xs_script(tmp_path, b"XADD s 18446744073709551615-18446744073709551615 a 1\n", "--raw")
    p = xs_script(tmp_path, b"XADD t * a 1\nXADD s * a 1\n\nXADD t * b 2\nXADD s * c 3\n", "--raw")
    assert db.exists()
    assert p.stderr.decode().splitlines() == [
        "xs: line 2: ERR The stream has exhausted the last possible ID, unable to add more items",
        "xs: line 5: ERR The stream has exhausted the last possible ID, unable to add more items"]


def test_a_one_line_script_keeps_its_error_on_stdout_only(tmp_path):
    p = xs_script(tmp_path, b"XADD s * a\n", "--raw")
    assert p.returncode == 1 and p.stderr == b""
