"""Where --db / XS_DB points (issue 27, defects 1 and 2): a directory
that holds other files is refused and left exactly as it was; reads
never create a store and fail on a missing one, naming it; writes create
it and say so once on a terminal; an empty --db or XS_DB is a usage
error, never the default store."""
import os
import stat
import subprocess

import pytest

from conftest import ROOT, XS, new_store
from tests.harness.terminal import stderr_on_pty


def xs(*args, input=None, env=None, cwd=ROOT):
    e = dict(os.environ)
    e.pop("XS_DB", None)
    e.update(env or {})
    return subprocess.run(XS + list(args), input=input, capture_output=True, timeout=60, cwd=cwd, env=e)


def snapshot(d):
    """Everything about a directory a careless open could change: its
    mode and its entries with their modes and contents."""
    out = {".": stat.S_IMODE(os.stat(d).st_mode)}
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        st = os.lstat(p)
        out[name] = (stat.S_IMODE(st.st_mode), open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None)
    return out


@pytest.fixture
def www(tmp_path):
    d = tmp_path / "www"
    d.mkdir()
    (d / "index.html").write_text("hi\n")
    d.chmod(0o755)
    return d


# ------------------------------------------------ a directory that is not a store

@pytest.mark.parametrize("argv", [["info"], ["ls"], ["XLEN", "s"], ["XADD", "s", "*", "f", "v"],
                                  ["trim", "--max-len", "1"], ["tail", "s"], ["export"], ["XRANGE", "s", "-", "+"]])
def test_a_directory_with_other_files_is_refused_and_left_unchanged(www, argv):
    before = snapshot(www)
    p = xs("--db", str(www), *argv)
    assert p.returncode == 1, p
    assert p.stderr.decode() == "xs: %s is not an xs store: it holds other files (index.html)\n" % www
    assert p.stdout == b""
    assert snapshot(www) == before


def test_script_mode_and_dot_in_a_checkout_are_refused_too(www):
    before = snapshot(www)
    p = xs("--db", ".", input=b"XADD s * f v\n", cwd=str(www))
    assert p.returncode == 1
    assert p.stderr == b"xs: . is not an xs store: it holds other files (index.html)\n"
    p = xs(input=b"XADD s * f v\n", env={"XS_DB": str(www)})
    assert p.returncode == 1 and b"is not an xs store" in p.stderr
    assert snapshot(www) == before


def test_the_refusal_names_a_few_of_many_files(tmp_path):
    d = tmp_path / "src"
    d.mkdir()
    for n in ("a.py", "b.py", "c.py", "d.py"):
        (d / n).write_text("")
    p = xs("--db", str(d), "XLEN", "s")
    assert p.stderr.decode().endswith("it holds other files (a.py, b.py, c.py, ...)\n")


def test_an_empty_directory_becomes_a_store_on_a_write_only(tmp_path):
    d = tmp_path / "empty"
    d.mkdir()
    d.chmod(0o755)
    p = xs("--db", str(d), "XLEN", "s")
    assert p.returncode == 1 and p.stderr.decode() == "xs: cannot open store %s: no such store\n" % d
    assert snapshot(d) == {".": 0o755}                   # the read changed nothing
    p = xs("--db", str(d), "XADD", "s", "1-1", "f", "v")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"1-1\n", b"")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700      # now a store: private
    assert xs("--db", str(d), "XLEN", "s").stdout == b"1\n"


def test_a_store_with_its_server_socket_and_lost_and_found_is_still_a_store(tmp_path):
    db = new_store(tmp_path / "db")
    (db / "lost+found").mkdir()
    assert xs("--db", str(db), "XADD", "s", "1-1", "f", "v").returncode == 0
    assert xs("--db", str(db), "XLEN", "s").stdout == b"1\n"


# ------------------------------------------------------------- a missing store

# (a blocking read -- XREAD BLOCK, tail -f -- waits for the store instead,
# creating nothing: tests/cli/test_reader_before_store.py)
@pytest.mark.parametrize("argv", [["XLEN", "orders"], ["XRANGE", "s", "-", "+"], ["XINFO", "STREAM", "s"],
                                  ["XREAD", "STREAMS", "s", "0"], ["tail", "s"],
                                  ["export"], ["save", "-"], ["ls"], ["info"], ["trim", "--max-len", "1"]])
def test_a_read_of_a_missing_store_fails_naming_it_and_creates_nothing(tmp_path, argv):
    db = tmp_path / "typo.xs"
    p = xs("--db", str(db), *argv)
    assert p.returncode == 1, p
    assert p.stderr.decode() == "xs: cannot open store %s: no such store\n" % db
    assert p.stdout == b""
    assert not db.exists()


def test_a_script_of_reads_on_a_missing_store_fails_and_creates_nothing(tmp_path):
    db = tmp_path / "typo.xs"
    p = xs("--db", str(db), input=b"XLEN s\nXRANGE s - +\n")
    assert (p.returncode, p.stdout) == (1, b"")
    assert p.stderr.decode() == "xs: cannot open store %s: no such store\n" % db
    assert not db.exists()


def test_a_script_that_writes_creates_the_store(tmp_path):
    db = tmp_path / "new.xs"
    p = xs("--db", str(db), input=b"XLEN s\n3 XADD s * f v\nXLEN s\n")
    assert p.returncode == 0 and p.stderr == b""
    assert p.stdout.splitlines()[0] == b"0" and p.stdout.splitlines()[-1] == b"3"


@pytest.mark.parametrize("argv", [["XADD", "s", "*", "f", "v"], ["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]])
def test_a_write_creates_a_missing_store_silently_in_a_pipe(tmp_path, argv):
    db = tmp_path / "new.xs"
    p = xs("--db", str(db), *argv)
    assert p.returncode == 0 and p.stderr == b""
    assert (db / "data.mdb").exists()


def test_a_write_that_creates_a_store_says_so_once_on_a_terminal(tmp_path):
    db = tmp_path / "new.xs"
    status, shown, out = stderr_on_pty(XS + ["--db", str(db), "XADD", "s", "1-1", "f", "v"], capture_stdout=True)
    assert (status, out) == (0, "1-1\n")
    assert shown.replace("\r\n", "\n") == "xs: created store %s\n" % db
    status, shown, out = stderr_on_pty(XS + ["--db", str(db), "XADD", "s", "1-2", "f", "v"], capture_stdout=True)
    assert (status, out, shown) == (0, "1-2\n", "")


# ------------------------------------------------------------ an empty path

@pytest.mark.parametrize("argv", [["XLEN", "s"], ["ls"], ["info"], []])
def test_an_empty_db_option_is_a_usage_error(tmp_path, argv):
    home = tmp_path / "home"
    home.mkdir()
    p = xs("--db", "", *argv, input=b"XADD s * f v\n", env={"HOME": str(home), "XDG_DATA_HOME": str(home)})
    assert p.returncode == 2, p
    assert b"--db is empty" in p.stderr and b"Traceback" not in p.stderr
    assert os.listdir(home) == []                          # the default store was not touched


@pytest.mark.parametrize("argv", [["XADD", "s", "*", "f", "v"], ["ls"], []])
def test_an_empty_xs_db_is_a_usage_error(tmp_path, argv):
    home = tmp_path / "home"
    home.mkdir()
    p = xs(*argv, input=b"XADD s * f v\n", env={"XS_DB": "", "HOME": str(home), "XDG_DATA_HOME": str(home)})
    assert p.returncode == 2, p
    assert b"XS_DB is empty" in p.stderr and b"Traceback" not in p.stderr
    assert os.listdir(home) == []


# ---------------------------------------- global options after the command

@pytest.mark.parametrize("argv", [["ls", "--db", "{db}"], ["info", "--db={db}", "--json"],
                                  ["tail", "-n", "1", "s", "--db", "{db}"], ["trim", "--max-len", "5", "--db", "{db}",
                                                                             "--no-sync", "-q"],
                                  ["export", "--db", "{db}"]])
def test_db_and_no_sync_are_taken_after_a_porcelain_commands_name(tmp_path, argv):
    db = tmp_path / "db"
    assert xs("--db", str(db), "XADD", "s", "1-1", "f", "v").returncode == 0
    other = tmp_path / "home"
    other.mkdir()
    p = xs(*[a.format(db=db) for a in argv], env={"HOME": str(other), "XDG_DATA_HOME": str(other)})
    assert p.returncode == 0, p.stderr
    assert os.listdir(other) == []                     # the default store was not used


def test_an_empty_db_after_the_command_is_a_usage_error_too(tmp_path):
    p = xs("ls", "--db", "")
    assert p.returncode == 2 and b"--db is empty" in p.stderr
