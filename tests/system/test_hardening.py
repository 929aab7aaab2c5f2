"""A store is private to its owner and survives a full disk (issue 14,
defects 2 and 3; SPEC §4 "private ... whatever the umask; xs never
follows a symlink inside a store and refuses stores it does not own" and
§6 "bad input of any kind: a clear error, exit 1, nothing lost").

Private files: whatever the umask, the store directory and every
directory in it are 0700 and every file 0600, including the files that
blocked readers create (notify/ files, XREADGROUP queue tickets).  An
entry inside the store that is a symbolic link (or a hard link), or a
store or entry owned by another user, is refused with one line on
stderr and exit status 1, and nothing outside the store is touched.

Full disk: creating a store or writing to one on a full file system is a
one-line error, exit status 1 (never SIGBUS, never a traceback); what
was committed before stands and the store opens once space is freed.
Tests that mount a small tmpfs need root and are skipped otherwise.

Tests run as root: "another user" is uid 65534 (chown), and reads by
another user are tried through ``setpriv``.
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]
OTHER = 65534
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def xs(db, *args, umask=None, input=None, timeout=60):
    pre = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.run(XS + ["--db", str(db), "--raw"] + list(args), cwd=ROOT, input=input,
                          capture_output=True, timeout=timeout, preexec_fn=pre)


def start(db, *args, umask=None):
    pre = (lambda: os.umask(umask)) if umask is not None else None
    return subprocess.Popen(XS + ["--db", str(db), "--raw"] + list(args), cwd=ROOT, preexec_fn=pre,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def one_line_error(p, *words):
    """p failed with exit status 1 and one line ``xs: ...`` on stderr."""
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 1, (p.returncode, err)
    assert "Traceback" not in err, err
    assert err.startswith("xs: ") and err.count("\n") == 1, err
    for w in words:
        assert w in err, (w, err)
    return err


def modes(db):
    """{relative path: permission bits} of the store and everything in it."""
    out = {".": stat.S_IMODE(os.lstat(db).st_mode)}
    for d, dirs, files in os.walk(db):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, db)] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def assert_private(db):
    bad = {}
    for rel, m in modes(db).items():
        p = os.path.join(db, rel)
        want = 0o700 if os.path.isdir(p) else 0o600
        if m != want:
            bad[rel] = oct(m)
    assert not bad, "not private: %r" % bad


def wait_until(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.01)
    return False


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# ======================================================== private, any umask

@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_a_new_store_is_0700_with_0600_files_whatever_the_umask(tmp_path, umask):
    db = tmp_path / "store"
    p = xs(db, "XADD", "s", "*", "a", "1", umask=umask)
    assert p.returncode == 0, p.stderr
    assert {"data.mdb", "lock.mdb"} <= set(os.listdir(db))
    assert_private(db)


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_files_made_by_blocked_readers_are_private_whatever_the_umask(tmp_path, umask):
    db = tmp_path / "store"
    assert xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM", umask=umask).returncode == 0
    readers = [start(db, "XREAD", "BLOCK", "0", "STREAMS", "s", "$", umask=umask),
               start(db, "XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", "s", ">", umask=umask)]
    try:
        def armed():
            n = os.path.join(db, "notify")
            if not os.path.isdir(n):
                return False
            queues = [q for q in os.listdir(n) if q.endswith(".q")]
            return bool(queues) and any(os.listdir(os.path.join(n, q)) for q in queues) \
                and any(not q.endswith(".q") for q in os.listdir(n))
        assert wait_until(armed), os.listdir(db)
        assert_private(db)
        assert xs(db, "XADD", "s", "*", "a", "1", umask=umask).returncode == 0
        for r in readers:
            out, err = r.communicate(timeout=30)
            assert r.returncode == 0, err
            assert b"a\n1" in out
    finally:
        for r in readers:
            if r.poll() is None:
                r.kill()
                r.wait()
    assert_private(db)


def test_an_older_store_is_made_private_when_opened(tmp_path):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    os.makedirs(db / "notify" / "x.y.q", exist_ok=True)
    (db / "notify" / "abc").write_bytes(b"")
    (db / "notify" / "x.y.q" / "00000000000000000001.1").write_bytes(b"")
    for rel, m in modes(db).items():
        os.chmod(os.path.join(db, rel), 0o777 if os.path.isdir(os.path.join(db, rel)) else 0o666)
    p = xs(db, "XLEN", "s")
    assert p.returncode == 0 and p.stdout == b"1\n", p.stderr
    assert_private(db)


@pytest.mark.skipif(not IS_ROOT or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_another_user_can_neither_read_nor_list_a_store():
    top = tempfile.mkdtemp(prefix="xs-priv-", dir="/tmp")
    try:
        os.chmod(top, 0o755)
        db = os.path.join(top, "store")
        assert xs(db, "XADD", "s", "*", "secret", "1", umask=0o022).returncode == 0
        as_other = ["setpriv", "--reuid=%d" % OTHER, "--regid=%d" % OTHER, "--clear-groups"]
        assert subprocess.run(as_other + ["ls", db], capture_output=True).returncode != 0
        assert subprocess.run(as_other + ["cat", os.path.join(db, "data.mdb")], capture_output=True).returncode != 0
    finally:
        shutil.rmtree(top)


# ================================================= symbolic links and owners

@pytest.mark.parametrize("name", ["lock.mdb", "data.mdb"])
def test_a_store_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path, name):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    os.chmod(victim, 0o600)
    os.rename(db / name, tmp_path / "moved")
    os.symlink(victim, db / name)
    p = xs(db, "XLEN", "s")
    one_line_error(p, "refusing to open store %s" % db, "%s is a symbolic link" % name)
    assert victim.read_bytes() == b"precious\n"


def test_a_lock_file_symlinked_before_the_store_exists_is_refused(tmp_path):
    db = tmp_path / "store"
    db.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    os.symlink(victim, db / "lock.mdb")
    one_line_error(xs(db, "XADD", "s", "*", "a", "1"), "lock.mdb is a symbolic link")
    assert victim.read_bytes() == b"precious\n"
    assert not (db / "data.mdb").exists()


def test_a_lock_file_that_is_a_hard_link_is_refused(tmp_path):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    os.unlink(db / "lock.mdb")
    os.link(victim, db / "lock.mdb")
    one_line_error(xs(db, "XLEN", "s"), "lock.mdb", "hard link")
    assert victim.read_bytes() == b"precious\n"


def test_a_symlinked_notify_directory_is_refused_and_nothing_is_created_elsewhere(tmp_path):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, db / "notify")
    p = xs(db, "XREAD", "BLOCK", "100", "STREAMS", "s", "$")
    one_line_error(p, "notify is a symbolic link")
    assert os.listdir(elsewhere) == []


def test_a_symlinked_queue_directory_is_refused_and_its_target_untouched(tmp_path):
    from storage.blocking import notify_name
    db = tmp_path / "store"
    assert xs(db, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM").returncode == 0
    (db / "notify").mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.mkdir()
    target = victim / ("00000000000000000001.%d" % dead_pid())
    target.write_bytes(b"precious\n")
    os.symlink(victim, db / "notify" / ("%s.%s.q" % (notify_name(b"s"), notify_name(b"g"))))
    p = xs(db, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "100", "STREAMS", "s", ">")
    one_line_error(p, "is a symbolic link")
    assert os.listdir(victim) == [target.name] and target.read_bytes() == b"precious\n"


def test_a_symlinked_notification_file_is_never_followed(tmp_path):
    from storage.blocking import notify_name
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    (db / "notify").mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    os.utime(victim, (1000000000, 1000000000))
    os.symlink(victim, db / "notify" / notify_name(b"s"))
    p = xs(db, "XADD", "s", "*", "a", "2")          # writers touch notification files
    assert b"Traceback" not in p.stderr
    r = xs(db, "XREAD", "BLOCK", "50", "STREAMS", "s", "$")   # readers create and watch them
    assert b"Traceback" not in r.stderr
    assert r.returncode == 1 and b"is a symbolic link" in r.stderr
    assert os.stat(victim).st_mtime == 1000000000 and victim.read_bytes() == b"precious\n"


def test_symbolic_links_planted_in_an_older_world_writable_notify_directory_are_refused(tmp_path):
    from storage.blocking import notify_name
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    (db / "notify").mkdir()
    os.chmod(db / "notify", 0o777)
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    os.symlink(victim, db / "notify" / notify_name(b"t"))
    one_line_error(xs(db, "XLEN", "s"), "refusing to open store", "is a symbolic link")


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give files away")
def test_a_store_owned_by_another_user_is_refused(tmp_path):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    before = (db / "data.mdb").read_bytes()
    for d, dirs, files in os.walk(db):
        for n in [d] + [os.path.join(d, f) for f in files]:
            os.lchown(n, OTHER, OTHER)
    one_line_error(xs(db, "XADD", "s", "*", "a", "2"), "refusing to open store %s" % db, "another user")
    assert (db / "data.mdb").read_bytes() == before


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give files away")
@pytest.mark.parametrize("name", ["lock.mdb", "data.mdb"])
def test_a_store_file_owned_by_another_user_is_refused(tmp_path, name):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    os.lchown(db / name, OTHER, OTHER)
    one_line_error(xs(db, "XLEN", "s"), "%s belongs to another user" % name)


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give files away")
def test_a_store_path_that_is_another_users_symbolic_link_is_refused(tmp_path):
    real = tmp_path / "real"
    assert xs(real, "XADD", "s", "*", "a", "1").returncode == 0
    link = tmp_path / "link"
    os.symlink(real, link)
    os.lchown(link, OTHER, OTHER)
    one_line_error(xs(link, "XLEN", "s"), "symbolic link", "another user")


def test_a_store_made_by_many_processes_at_once_is_one_store(tmp_path):
    """Store files appear complete or not at all (made under a temporary
    name, then linked): racing creators all succeed, on one store."""
    db = tmp_path / "store"
    procs = [start(db, "XADD", "s", "*", "n", str(i)) for i in range(8)]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    assert xs(db, "XLEN", "s").stdout == b"8\n"
    assert sorted(os.listdir(db)) == ["data.mdb", "lock", "lock.mdb"]      # lock: the store lock (xs compact)
    assert_private(db)


def test_a_store_file_left_linked_twice_by_a_killed_creator_is_repaired(tmp_path):
    db = tmp_path / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    os.link(db / "lock.mdb", db / ("lock.mdb.new-%d-1" % dead_pid()))
    p = xs(db, "XLEN", "s")
    assert p.returncode == 0 and p.stdout == b"1\n", p.stderr
    assert sorted(os.listdir(db)) == ["data.mdb", "lock", "lock.mdb"]      # lock: the store lock (xs compact)


def test_a_store_reached_through_symbolic_links_of_ones_own_works(tmp_path):
    """The user's own path may go through symlinks (/tmp -> /private/tmp,
    a store directory linked elsewhere); only entries inside a store
    must not be links."""
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "parent")
    db = tmp_path / "parent" / "store"
    assert xs(db, "XADD", "s", "*", "a", "1").returncode == 0
    os.symlink(db, tmp_path / "store-link")
    p = xs(tmp_path / "store-link", "XLEN", "s")
    assert p.returncode == 0 and p.stdout == b"1\n", p.stderr
    assert_private(tmp_path / "real" / "store")


# ================================================================ full disk

@pytest.fixture
def small_fs():
    """A 2 MiB tmpfs (root only), unmounted afterwards."""
    if not IS_ROOT:
        pytest.skip("mounting a small file system needs root")
    mnt = tempfile.mkdtemp(prefix="xs-full-", dir="/tmp")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt], capture_output=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        pytest.skip("cannot mount a tmpfs: %s" % r.stderr.decode(errors="replace").strip())
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        os.rmdir(mnt)


def fill(mnt, leave_kib=0):
    """Fill the file system at ``mnt``, leaving about ``leave_kib`` KiB."""
    path = os.path.join(mnt, "filler")
    with open(path, "ab") as f:
        while True:
            st = os.statvfs(mnt)
            free = st.f_bavail * st.f_frsize - leave_kib * 1024
            if free <= 0:
                break
            try:
                f.write(b"\0" * min(free, 1 << 16))
                f.flush()
            except OSError:
                break
    return path


def test_creating_a_store_on_a_full_disk_is_a_clear_error_then_works_once_space_is_freed(small_fs):
    db = os.path.join(small_fs, "store")
    filler = fill(small_fs)
    p = xs(db, "XADD", "s", "*", "a", "1")
    assert p.returncode != -signal.SIGBUS, "killed by SIGBUS"
    one_line_error(p, "no space left on device", db)
    os.unlink(filler)
    p = xs(db, "XADD", "s", "*", "a", "1")
    assert p.returncode == 0, p.stderr
    assert xs(db, "XLEN", "s").stdout == b"1\n"
    assert_private(db)


@pytest.mark.parametrize("leave_kib", [0, 4, 16, 28, 40])
def test_creating_a_store_with_little_space_fails_cleanly_or_works(small_fs, leave_kib):
    db = os.path.join(small_fs, "store")
    filler = fill(small_fs, leave_kib)
    p = xs(db, "XADD", "s", "*", "a", "1")
    if p.returncode != 0:
        one_line_error(p, "no space left on device")
    os.unlink(filler)
    assert xs(db, "XADD", "s", "*", "a", "2").returncode == 0
    assert xs(db, "XLEN", "s").stdout == (b"2\n" if p.returncode == 0 else b"1\n")


@pytest.mark.parametrize("leave_kib", [0, 40])
def test_a_write_on_a_full_disk_is_a_clear_error_and_loses_nothing(small_fs, leave_kib):
    db = os.path.join(small_fs, "store")
    assert xs(db, "XADD", "s", "1-1", "a", "1").returncode == 0
    before = xs(db, "XRANGE", "s", "-", "+").stdout
    filler = fill(small_fs, leave_kib)
    big = b"x" * 100000
    p = xs(db, "XADD", "s", "*", "a", big)
    one_line_error(p, "no space left on device while writing %s" % db, "nothing was written")
    q = xs(db, "--no-raw", input=b"XADD s * b " + big + b"\nXADD s * c " + big + b"\n")
    assert q.returncode == 1 and b"Traceback" not in q.stderr and b"no space left on device" in q.stderr
    assert xs(db, "XRANGE", "s", "-", "+").stdout == before
    os.unlink(filler)
    assert xs(db, "XADD", "s", "*", "a", big).returncode == 0
    assert xs(db, "XLEN", "s").stdout == b"2\n"


def test_a_map_that_cannot_grow_is_a_store_failure_not_an_lmdb_error(tmp_path):
    """Map growth failing (address space exhausted) reaches the command
    line as StoreFailure (a message), not as a raw lmdb error."""
    code = r"""
import resource, sys
from storage.store import Store
from storage.txn import Retry, StoreFailure
s = Store(sys.argv[1])
with open("/proc/self/status") as f:
    vm = [int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:")][0]
resource.setrlimit(resource.RLIMIT_AS, (vm + (256 << 20), resource.RLIM_INFINITY))
def grow(tx):
    raise Retry(grow=True)
try:
    s.run(grow, write=True)
except StoreFailure as e:
    print("FAILURE", e)
try:
    s.run(lambda tx: tx.length(b"s"))          # the store is unusable now, but says so
except StoreFailure as e:
    print("AGAIN", e)
"""
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "store")], cwd=ROOT, capture_output=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.startswith(b"FAILURE "), p.stderr[-2000:]
    assert b"map" in p.stdout and b"\nAGAIN " in p.stdout
