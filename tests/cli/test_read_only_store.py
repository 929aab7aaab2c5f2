"""A store the user may read but not write: a read-only file system, or
an owner who took away their own write bits (``chmod -R a-w``).

Reads work (one-shot, script mode, tail); every write is refused with
READONLY and the reason; nothing on disk changes; the modes the owner
chose stay.  Such a store is read without LMDB's lock table (the lock
file cannot be written), which is safe only while nobody writes: a read
while a process has the store open for writing is refused.

Root ignores file modes, so the read-only file system is made with a
read-only bind mount (skipped where mounting is not allowed); the
``chmod`` case runs as another user when that user can run this Python.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IS_ROOT = os.geteuid() == 0
OTHER = 65534
READONLY = b"READONLY You can't write against a read only store"


def xs(db, *args, input=None, prefix=(), env=None, python=sys.executable):
    return subprocess.run(list(prefix) + [python, "-m", "xstream_cli", "--db", str(db)] + list(args),
                          input=input, capture_output=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))


def digest(db):
    return {n: hashlib.sha256(open(os.path.join(db, n), "rb").read()).hexdigest()
            for n in ("data.mdb",)}


def fill(db, **kw):
    script = b"XADD s 1-1 a 1\nXADD s 1-2 b 2\nXGROUP CREATE s g 0\nXREADGROUP GROUP g c COUNT 1 STREAMS s >\n"
    p = xs(db, input=script, **kw)
    assert p.returncode == 0, p.stderr


@pytest.fixture
def ro_mount():
    """(rw path, ro path): one directory, and a read-only bind mount of it."""
    if not IS_ROOT or not shutil.which("mount"):
        pytest.skip("needs root to make a read-only bind mount")
    top = tempfile.mkdtemp(prefix="xs-ro-")
    rw, ro = os.path.join(top, "rw"), os.path.join(top, "ro")
    os.mkdir(rw)
    os.mkdir(ro)
    if subprocess.run(["mount", "--bind", rw, ro], capture_output=True).returncode != 0:
        shutil.rmtree(top)
        pytest.skip("mount --bind is not allowed here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", ro], capture_output=True).returncode != 0:
            pytest.skip("a read-only remount is not allowed here")
        yield rw, ro
    finally:
        subprocess.run(["umount", ro], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def test_a_store_on_a_read_only_file_system_answers_reads(ro_mount):
    rw, ro = ro_mount
    fill(os.path.join(rw, "store"))
    db = os.path.join(ro, "store")
    before = digest(db)
    p = xs(db, "XLEN", "s")
    assert (p.returncode, p.stdout, p.stderr) == (0, b"2\n", b"")
    p = xs(db, "--json", "XRANGE", "s", "-", "+")
    assert p.returncode == 0 and b"1-2" in p.stdout, p.stderr
    p = xs(db, "--json", "XPENDING", "s", "g")
    assert p.returncode == 0 and p.stdout.startswith(b"[1,"), (p.stdout, p.stderr)
    p = xs(db, "--json", "XINFO", "STREAM", "s")
    assert p.returncode == 0 and b'"length": 2' in p.stdout, (p.stdout, p.stderr)
    p = xs(db, "tail", "-n", "1", "s")
    assert p.returncode == 0 and b"1-2" in p.stdout, p.stderr
    assert digest(db) == before


def test_a_write_to_a_store_on_a_read_only_file_system_is_refused_with_the_reason(ro_mount):
    rw, ro = ro_mount
    fill(os.path.join(rw, "store"))
    db = os.path.join(ro, "store")
    before = digest(db)
    for cmd in (["XADD", "s", "*", "x", "1"], ["XACK", "s", "g", "1-1"], ["XGROUP", "CREATE", "s", "h", "0"],
                ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]):
        p = xs(db, *cmd)
        assert p.returncode == 1, (cmd, p.stdout, p.stderr)
        assert p.stderr.startswith(READONLY) and b"read-only file system" in p.stderr, (cmd, p.stderr)
        assert b"Traceback" not in p.stderr
    assert digest(db) == before


def test_a_script_on_a_read_only_store_answers_its_reads_and_refuses_its_writes(ro_mount):
    rw, ro = ro_mount
    fill(os.path.join(rw, "store"))
    db = os.path.join(ro, "store")
    before = digest(db)
    p = xs(db, "--json", input=b"XLEN s\nXADD s * x 1\nXADD s 9-9 y 2\nXLEN s\n")
    lines = p.stdout.splitlines()
    assert p.returncode == 1, p.stderr
    assert lines[0] == b"2" and lines[3] == b"2", lines
    assert all(READONLY in l and l.startswith(b'{"error"') for l in lines[1:3]), lines
    assert digest(db) == before


def test_a_read_without_write_access_is_refused_while_a_process_writes_the_store(ro_mount):
    """The reader cannot use LMDB's reader table: a writer could reuse the
    pages it reads.  So it refuses while one has the store open."""
    rw, ro = ro_mount
    src = os.path.join(rw, "store")
    fill(src)
    holder = subprocess.Popen([sys.executable, "-m", "xstream_cli", "--db", src, "tail", "-f", "s"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        db = os.path.join(ro, "store")
        deadline = time.monotonic() + 20
        while True:          # the holder has opened the store once a read is refused
            p = xs(db, "XLEN", "s")
            if p.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert p.returncode == 1, p.stdout
        assert b"has it open for writing" in p.stderr and (b"process %d" % holder.pid) in p.stderr, p.stderr
    finally:
        holder.terminate()
        holder.wait(10)
    p = xs(os.path.join(ro, "store"), "XLEN", "s")
    assert (p.returncode, p.stdout) == (0, b"2\n"), p.stderr


def test_opening_a_store_never_gives_back_write_bits_its_owner_took_away(tmp_path):
    """The private-files rule narrows modes (no group or other bits); it
    used to set 0600/0700 outright, which made a ``chmod -R a-w`` store
    writable again at its owner's next command."""
    db = tmp_path / "store"
    fill(db)
    for dirpath, dirs, files in os.walk(db):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            os.chmod(p, 0o500 if os.path.isdir(p) else 0o400)
    os.chmod(db, 0o500)
    try:
        assert xs(db, "XLEN", "s").stdout == b"2\n"
        modes = {n: oct(os.stat(db / n).st_mode & 0o777) for n in os.listdir(db)}
        assert set(modes.values()) <= {"0o400", "0o500"}, modes
        assert oct(os.stat(db).st_mode & 0o777) == "0o500"
    finally:
        for dirpath, dirs, files in os.walk(db):
            os.chmod(dirpath, 0o700)


def _other_user_python():
    """(prefix, python, env) running this package as uid OTHER, or None.
    XS_OTHER_PYTHON: an interpreter with the dependencies that uid OTHER
    may run (this one often lives under root's 0700 home)."""
    if not IS_ROOT or not shutil.which("setpriv"):
        return None
    prefix = ["setpriv", "--reuid=%d" % OTHER, "--regid=%d" % OTHER, "--clear-groups"]
    import click
    import lmdb  # noqa: E401  where the dependencies are
    import msgpack
    paths = os.pathsep.join([ROOT] + sorted({os.path.dirname(os.path.dirname(m.__file__))
                                             for m in (lmdb, click, msgpack)}))
    env = {"PYTHONPATH": paths, "HOME": "/tmp"}
    for python in filter(None, (os.environ.get("XS_OTHER_PYTHON"), sys.executable, "/usr/bin/python3")):
        probe = subprocess.run(prefix + [python, "-c", "import xstream_cli, lmdb, click, msgpack, rich"],
                               capture_output=True, cwd="/", env=dict(os.environ, **env))
        if probe.returncode == 0:
            return prefix, python, env
    return None


def test_its_owner_reads_a_store_they_made_read_only_and_writes_are_refused():
    other = _other_user_python()
    if other is None:
        pytest.skip("no other user can run this Python and its packages here")
    prefix, python, env = other
    top = tempfile.mkdtemp(prefix="xs-ro-owner-")
    try:
        os.chmod(top, 0o777)
        db = os.path.join(top, "store")
        kw = dict(prefix=prefix, python=python, env=env)
        fill(db, **kw)
        subprocess.run(prefix + ["chmod", "-R", "a-w", db], check=True)
        before = digest(db)
        p = xs(db, "XLEN", "s", **kw)
        assert (p.returncode, p.stdout, p.stderr) == (0, b"2\n", b"")
        p = xs(db, "XADD", "s", "*", "x", "1", **kw)
        assert p.returncode == 1 and p.stderr.startswith(READONLY), p.stderr
        assert b"data.mdb is not writable by this user" in p.stderr
        p = xs(db, "--json", input=b"XRANGE s - +\nXDEL s 1-1\n", **kw)
        assert b'"1-1"' in p.stdout.splitlines()[0] and READONLY in p.stdout.splitlines()[1], p.stdout
        assert digest(db) == before
        assert os.stat(os.path.join(db, "data.mdb")).st_mode & 0o777 == 0o400
    finally:
        subprocess.run(["chmod", "-R", "u+w", top])
        shutil.rmtree(top, ignore_errors=True)
