"""One-shot mode looks the command up and parses it before it opens the
store (xstream_cli/runner.py run_one): a command the parser refuses is
answered with Redis's error and never makes, nor touches, a store --
a write with a bad ID on a missing store, a bad read on a missing store
(Redis's error, not "no such store"), a bad write on an existing one."""
import os
import subprocess

import pytest

from conftest import ROOT, XS


def xs(db, *args):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, text=True, cwd=ROOT,
                          timeout=60)


@pytest.mark.parametrize("argv,error", [
    (["XADD", "s", "BADID", "f", "v"], "ERR Invalid stream ID specified as stream command argument"),
    (["XADD", "s", "*", "f"], "ERR wrong number of arguments for 'xadd' command"),
    (["XADD", "s", "MAXLEN", "x", "*", "f", "v"], "ERR value is not an integer or out of range"),
    (["XRANGE", "s", "x", "+"], "ERR Invalid stream ID specified as stream command argument"),
    (["XREAD", "COUNT", "x", "STREAMS", "s", "0"], "ERR value is not an integer or out of range"),
    (["XREAD", "BLOCK", "-1", "STREAMS", "s", "0"], "ERR timeout is negative"),
])
def test_a_command_the_parser_refuses_gets_redis_error_and_makes_no_store(tmp_path, argv, error):
    db = tmp_path / "new.xs"
    p = xs(db, *argv)
    assert (p.returncode, p.stdout, p.stderr) == (1, "", error + "\n")
    assert not os.path.lexists(db)


def test_a_bad_write_leaves_an_existing_store_untouched(tmp_path):
    db = tmp_path / "s.xs"
    assert xs(db, "XADD", "s", "1-1", "f", "v").returncode == 0
    data = db / "data.mdb"
    before = (data.stat().st_mtime_ns, data.stat().st_size)
    p = xs(db, "XADD", "s", "BADID", "f", "v")
    assert p.returncode == 1 and "Invalid stream ID" in p.stderr
    assert (data.stat().st_mtime_ns, data.stat().st_size) == before


def test_a_valid_read_of_a_missing_store_still_says_there_is_no_store(tmp_path):
    p = xs(tmp_path / "new.xs", "XLEN", "s")
    assert p.returncode == 1 and "no such store" in p.stderr
    assert not os.path.lexists(tmp_path / "new.xs")
