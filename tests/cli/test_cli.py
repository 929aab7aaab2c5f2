"""The command line: exit codes, error streams, --help / --version, usage
errors, and bad input of every kind (never a traceback, store unchanged)."""
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from conftest import new_store
from storage.errors import RedisError
from tests.harness.stores import dump
from xstream_cli import __version__
from xstream_cli.app import cli
from xstream_cli.execution.session import Session

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]


def xs(args, input=None, env=None):
    e = dict(os.environ)
    e.pop("XS_DB", None)
    e.update(env or {})
    return subprocess.run(XS + list(args), input=input, capture_output=True, timeout=60, cwd=ROOT, env=e)


def no_traceback(p):
    for stream in (p.stdout, p.stderr):
        s = stream if isinstance(stream, bytes) else (stream or "").encode()
        assert b"Traceback" not in s and b"Error:" not in s.replace(b"ERR", b""), s


@pytest.fixture
def runner():
    return CliRunner()


@pytest.fixture
def db(tmp_path):
    return str(new_store(tmp_path / "store"))


# ======================================================= CliRunner, click app

def test_version_prints_xs_and_version(runner):
    r = runner.invoke(cli, ["--version"])
    assert r.exit_code == 0
    assert "xs" in r.output and __version__ in r.output


def test_help_lists_global_options_and_redis_commands(runner):
    r = runner.invoke(cli, ["--help"])
    assert r.exit_code == 0
    for word in ("--db", "--json", "--raw", "--no-raw", "XREADGROUP", "XADD"):
        assert word in r.output


def test_unknown_global_option_is_a_usage_error(runner):
    r = runner.invoke(cli, ["--bogus", "XLEN", "s"])
    assert r.exit_code == 2
    assert "Traceback" not in r.output


def test_db_option_without_value_is_a_usage_error(runner):
    r = runner.invoke(cli, ["--db"])
    assert r.exit_code == 2


def test_single_command_success_exit_zero_and_json_reply(runner, db):
    r = runner.invoke(cli, ["--db", db, "--json", "XADD", "s", "1-0", "a", "b"])
    assert r.exit_code == 0, r.output
    assert r.stdout == '"1-0"\n'


def test_single_command_redis_error_goes_to_stderr_exit_one(runner, db):
    runner.invoke(cli, ["--db", db, "XADD", "s", "5-0", "a", "b"])
    r = runner.invoke(cli, ["--db", db, "--raw", "XADD", "s", "5-0", "a", "b"])
    assert r.exit_code == 1
    assert r.stdout == ""
    assert r.stderr == "ERR The ID specified in XADD is equal or smaller than the target stream top item\n"


def test_commands_are_case_insensitive(runner, db):
    r = runner.invoke(cli, ["--db", db, "--raw", "xadd", "s", "1-0", "a", "b"])
    assert r.exit_code == 0 and r.stdout == "1-0\n"
    r = runner.invoke(cli, ["--db", db, "--raw", "XlEn", "s"])
    assert r.stdout == "1\n"


def test_xs_db_environment_variable_selects_the_store(runner, db):
    r = runner.invoke(cli, ["--raw", "XADD", "s", "1-0", "a", "b"], env={"XS_DB": db})
    assert r.exit_code == 0
    assert runner.invoke(cli, ["--db", db, "--raw", "XLEN", "s"]).stdout == "1\n"


def test_no_raw_output_matches_redis_cli(runner, db):
    runner.invoke(cli, ["--db", db, "XADD", "s", "1-0", "a", "b"])
    r = runner.invoke(cli, ["--db", db, "--no-raw", "XRANGE", "s", "-", "+"])
    assert r.stdout == '1) 1) "1-0"\n   2) 1) "a"\n      2) "b"\n'


# ============================================================ subprocess

def test_module_entry_point_version():
    p = xs(["--version"])
    assert p.returncode == 0 and __version__.encode() in p.stdout


def test_unknown_global_option_exit_two_subprocess():
    p = xs(["--frobnicate", "XLEN", "s"])
    assert p.returncode == 2
    assert b"Traceback" not in p.stderr


def test_single_command_error_on_stderr_subprocess(db):
    p = xs(["--db", db, "--json", "XRANGE", "s", "bad", "+"])
    assert p.returncode == 1
    assert p.stdout == b""
    assert json.loads(p.stderr) == {"error": "ERR Invalid stream ID specified as stream command argument"}


def test_script_mode_exit_status_one_if_any_command_failed(db):
    p = xs(["--db", db, "--raw"], input=b"XADD s 1-0 a b\nXADD s 1-0 a b\nXLEN s\n")
    assert p.returncode == 1
    assert p.stdout == (b"1-0\nERR The ID specified in XADD is equal or smaller than the target stream top "
                        b"item\n\n1\n")
    no_traceback(p)


def test_script_mode_exit_zero_when_all_succeed(db):
    p = xs(["--db", db, "--json"], input=b"XADD s 1-0 a b\nXLEN s\n")
    assert p.returncode == 0
    assert p.stdout == b'"1-0"\n1\n'


def test_script_mode_invalid_arguments_line_continues(db):
    p = xs(["--db", db, "--raw"], input=b'XADD s 1-0 "a b\nXLEN s\n')
    assert p.stdout == b"Invalid argument(s)\n0\n"
    no_traceback(p)


def test_non_utf8_arguments_are_stored_verbatim(db):
    p = subprocess.run(XS + ["--db", db, "--raw", "XADD", b"s\xff", "1-0", b"\xfe", b"\x80v"],
                       capture_output=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(XS + ["--db", db, "--raw", "XRANGE", b"s\xff", "-", "+"], capture_output=True,
                       timeout=60, cwd=ROOT)
    assert p.stdout == b"1-0\n\xfe\n\x80v\n"
    p = subprocess.run(XS + ["--db", db, "--json", "XRANGE", b"s\xff", "-", "+"], capture_output=True,
                       timeout=60, cwd=ROOT)
    v = json.loads(p.stdout.decode("utf-8"))
    assert v[0][1] == [{"b64": "/g=="}, {"b64": "gHY="}]          # as xs export writes bytes


def test_non_utf8_bad_id_is_a_redis_error(db):
    p = subprocess.run(XS + ["--db", db, "XRANGE", "s", b"\xff\xfe", "+"], capture_output=True, timeout=60,
                       cwd=ROOT)
    assert p.returncode == 1
    assert b"Invalid stream ID" in p.stderr
    no_traceback(p)


def test_db_path_that_is_a_regular_file(tmp_path):
    f = tmp_path / "plain"
    f.write_bytes(b"not a store")
    p = xs(["--db", str(f), "XLEN", "s"])
    assert p.returncode == 1
    assert p.stderr.startswith(b"xs: ")
    no_traceback(p)
    assert f.read_bytes() == b"not a store"


def test_db_path_under_a_regular_file(tmp_path):
    f = tmp_path / "plain"
    f.write_bytes(b"")
    p = xs(["--db", str(f / "store"), "XADD", "s", "*", "a", "b"])
    assert p.returncode == 1
    assert p.stderr.startswith(b"xs: ")
    no_traceback(p)


def test_db_in_unwritable_directory(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    os.chmod(d, 0o500)
    try:
        if os.access(str(d), os.W_OK):
            pytest.skip("running with privileges that ignore directory permissions")
        p = xs(["--db", str(d / "store"), "XADD", "s", "*", "a", "b"])
        assert p.returncode == 1
        assert p.stderr.startswith(b"xs: ")
        no_traceback(p)
    finally:
        os.chmod(d, 0o700)


def test_script_mode_on_unusable_db_fails_cleanly(tmp_path):
    f = tmp_path / "plain"
    f.write_bytes(b"")
    p = xs(["--db", str(f)], input=b"XLEN s\n")
    assert p.returncode == 1
    no_traceback(p)


# ============================================ bad input: no traceback, no change

BAD = [
    ["XADD", "s"],
    ["XADD", "s", "*", "a"],
    ["XADD", "s", "1-0", "a", "1"],
    ["XADD", "s", "0-0", "a", "1"],
    ["XADD", "s", "bad-id", "a", "1"],
    ["XADD", "s", "MAXLEN", "99999999999999999999", "*", "a", "1"],
    ["XADD", "s", "MAXLEN", "~", "-1", "*", "a", "1"],
    ["XADD", "s", "MINID", "(5", "*", "a", "1"],
    ["XADD", "s", "LIMIT", "5", "*", "a", "1"],
    ["XADD", "s", "IDMP", "p", "i", "5-*", "a", "1"],
    ["XADD", "s", "18446744073709551616-0", "a", "1"],
    ["XRANGE", "s", "-", "+", "COUNT", "99999999999999999999"],
    ["XRANGE", "s", "(18446744073709551615-18446744073709551615", "+"],
    ["XRANGE", "s", "-", "+", "BOGUS"],
    ["XREVRANGE", "s", "+"],
    ["XLEN"],
    ["XLEN", "s", "t"],
    ["XDEL", "s", "x"],
    ["XTRIM", "s", "MAXLEN"],
    ["XTRIM", "s", "MAXLEN", "1", "LIMIT", "1"],
    ["XTRIM", "s", "FOO", "1"],
    ["XREAD", "BLOCK", "99999999999999999999", "STREAMS", "s", "$"],
    ["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"],
    ["XREAD", "COUNT", "1", "STREAMS", "s", "t", "0"],
    ["XREAD", "STREAMS", "s", "18446744073709551616"],
    ["XREAD", "MAXCOUNT", "99999999999999999999", "STREAMS", "s", "0"],
    ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "nokey", ">"],
    ["XREADGROUP", "GROUP", "g", "c", "CLAIM", "99999999999999999999", "STREAMS", "s", ">"],
    ["XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">"],
    ["XGROUP"],
    ["XGROUP", "FOO", "s"],
    ["XGROUP", "CREATE", "s", "g", "0"],
    ["XGROUP", "CREATE", "s", "h", "bad"],
    ["XGROUP", "CREATE", "s", "h", "0", "ENTRIESREAD", "99999999999999999999"],
    ["XGROUP", "CREATE", "nokey", "h", "$"],
    ["XGROUP", "SETID", "s", "nog", "0"],
    ["XGROUP", "SETID", "s", "g", "bad"],
    ["XGROUP", "DELCONSUMER", "s", "nog", "c"],
    ["XINFO"],
    ["XINFO", "STREAM"],
    ["XINFO", "STREAM", "nokey"],
    ["XINFO", "STREAM", "s", "FULL", "COUNT", "x"],
    ["XINFO", "CONSUMERS", "s", "nog"],
    ["XINFO", "FOO", "s"],
    ["XACK", "s", "g", "bad"],
    ["XACKDEL", "s", "g", "IDS", "99999999999999999999", "1-0"],
    ["XACKDEL", "s", "g", "IDS", "1", "x"],
    ["XNACK", "s", "g", "FAIL", "IDS", "1", "1-0", "RETRYCOUNT", "99999999999999999999"],
    ["XNACK", "s", "g", "FAIL", "IDS", "99999999999999999999", "1-0"],
    ["XNACK", "s", "nog", "FAIL", "IDS", "1", "1-0"],
    ["XPENDING", "s", "g", "-", "+"],
    ["XPENDING", "s", "g", "IDLE", "99999999999999999999", "-", "+", "10"],
    ["XPENDING", "s", "g", "-", "+", "99999999999999999999"],
    ["XPENDING", "s", "g", "x", "+", "10"],
    ["XCLAIM", "s", "g", "c", "x", "1-0"],
    ["XCLAIM", "s", "g", "c", "0", "1-0", "IDLE", "99999999999999999999"],
    ["XCLAIM", "s", "g", "c", "0", "1-0", "TIME", "x"],
    ["XCLAIM", "s", "g", "c", "0", "1-0", "BOGUS"],
    ["XCLAIM", "s", "nog", "c", "0", "1-0"],
    ["XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "9223372036854775807"],
    ["XAUTOCLAIM", "s", "g", "c", "0", "(18446744073709551615-18446744073709551615"],
    ["XAUTOCLAIM", "s", "g", "c", "x", "0"],
    ["XSETID", "s", "1-0"],
    ["XSETID", "s", "9-0", "ENTRIESADDED", "-1"],
    ["XSETID", "s", "9-0", "MAXDELETEDID", "10-0"],
    ["XSETID", "nokey", "1-0"],
    ["XCFGSET", "s", "IDMP-DURATION", "99999999999999999999"],
    ["XCFGSET", "s", "FOO", "1"],
    ["SCAN", "99999999999999999999999"],
    ["SCAN", "0", "COUNT", "0"],
    ["RENAME", "nokey", "t"],
    ["TYPE"],
    ["NOSUCHCOMMAND", "x"],
    ["XADD", "s", "\udcff", "a", "b"],
]


@pytest.fixture
def session(tmp_path):
    s = Session(str(tmp_path / "store"), "json")
    for argv in (["XADD", "s", "1-0", "a", "1"], ["XADD", "s", "2-0", "b", "2"], ["XGROUP", "CREATE", "s", "g", "0"],
                 ["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">"]):
        r = s.execute([os.fsencode(a) for a in argv])
        assert not isinstance(r, RedisError), r
    yield s
    s.store.close()


@pytest.mark.parametrize("argv", BAD, ids=[" ".join(a)[:60] for a in BAD])
def test_bad_input_is_a_redis_error_and_changes_nothing(session, argv):
    before = dump(session.store)
    r = session.execute([os.fsencode(a) for a in argv])
    assert isinstance(r, RedisError), r
    assert not r.text.startswith("ERR internal"), r.text
    assert r.text.split(" ", 1)[0] in ("ERR", "NOGROUP", "BUSYGROUP", "WRONGTYPE"), r.text
    assert dump(session.store) == before


def test_script_with_bad_lines_keeps_good_lines_and_reports_errors(db):
    lines = [b"XADD s 1-0 a 1"] + [b" ".join(os.fsencode(a) for a in argv) for argv in BAD[:20]] + [b"XLEN s"]
    p = xs(["--db", db, "--json"], input=b"\n".join(lines) + b"\n")
    assert p.returncode == 1
    no_traceback(p)
    out = [json.loads(x) for x in p.stdout.decode("utf-8", "surrogateescape").splitlines()]
    assert out[0] == "1-0" and out[-1] == 1
    assert all(isinstance(x, dict) and "error" in x for x in out[1:-1] if x is not None)


def test_a_store_failure_under_a_porcelain_command_is_one_line_not_a_traceback(monkeypatch, capsys, tmp_path):
    from storage.txn import StoreFailure
    from xstream_cli import app, context

    def failing(*a, **kw):
        raise StoreFailure("no space left on device while writing %s" % tmp_path)
    monkeypatch.setattr(context, "open_store", failing)
    code = app.run_click(["--db", str(tmp_path / "db"), "tail", "s"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == "xs: no space left on device while writing %s\n" % tmp_path


def test_a_one_shot_read_does_not_wait_for_a_running_writer(tmp_path):
    """Readers take no lock: XLEN answers while another process holds the
    store's write transaction (a long import, a script batch)."""
    db = str(tmp_path / "db")
    env = dict(os.environ, XS_NO_SYNC="1")
    subprocess.run(XS + ["--db", db, "XADD", "s", "1-0", "f", "v"], check=True, capture_output=True, env=env)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom storage.store import Store\ns = Store(sys.argv[1])\n"
         "with s.write() as tx:\n    tx.length(b's')\n    print('holding', flush=True)\n    time.sleep(30)\n", db],
        stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout.readline() == b"holding\n"
        p = subprocess.run(XS + ["--db", db, "XLEN", "s"], capture_output=True, timeout=10, env=env)
        assert p.stdout == b"1\n" and p.returncode == 0
        p = subprocess.run(XS + ["--db", db, "XRANGE", "s", "-", "+", "COUNT", "1"], capture_output=True,
                           timeout=10, env=env)
        assert p.stdout == b"1-0\nf\nv\n"
    finally:
        holder.kill()
        holder.wait()


def test_a_quoted_tilde_in_xs_db_means_the_home_directory(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), XS_DB="~/events", XS_NO_SYNC="1")
    p = subprocess.run(XS + ["XADD", "s", "1-0", "f", "v"], capture_output=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert (home / "events" / "data.mdb").exists()
    assert not (tmp_path / "~").exists()
    p = subprocess.run(XS + ["--db", "~/events", "XLEN", "s"], capture_output=True, env=env, cwd=str(tmp_path))
    assert p.stdout == b"1\n"


@pytest.mark.parametrize("how", ["--db", "XS_DB"])
def test_a_typoed_deep_store_path_is_an_error_naming_the_missing_directory(tmp_path, how):
    path = tmp_path / "nosuch" / "deep" / "store"
    env = dict(os.environ, XS_NO_SYNC="1")
    argv = XS + ["XADD", "s", "1-0", "f", "v"]
    if how == "--db":
        argv = XS + ["--db", str(path), "XADD", "s", "1-0", "f", "v"]
    else:
        env["XS_DB"] = str(path)
    p = subprocess.run(argv, capture_output=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 1
    assert p.stderr == ("xs: cannot create the store %s: no such directory: %s\n"
                        % (path, path.parent)).encode()
    assert not (tmp_path / "nosuch").exists()


def test_the_default_store_makes_its_directories(tmp_path):
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "data" / "deeper"), XS_NO_SYNC="1")
    env.pop("XS_DB", None)
    p = subprocess.run(XS + ["XADD", "s", "1-0", "f", "v"], capture_output=True, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "data" / "deeper" / "xstream" / "data.mdb").exists()
