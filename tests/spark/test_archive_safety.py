"""xs archive against a hostile or careless archive directory and
against a second store: links planted in DIR are never followed, a
manifest that is not the user's own (or names paths outside DIR) is
never obeyed, DIR that others may write in is refused unless
--shared-dir says so, two stores never share DIR, and nothing is
trimmed that the archive cannot be shown to hold (each run's SHA-256 of
its entries, checked in the trimming transaction).

Files are planted as another user through ``setpriv`` (root only); the
library-level checks of the trimming rule need no JVM.  Skipped without
pyspark / pyarrow."""
import hashlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from conftest import ROOT, XS, run_xs  # noqa: E402
from storage.options import IdsOptions  # noqa: E402
from storage.spark import archive as arch  # noqa: E402
from storage.store import Store  # noqa: E402

IS_ROOT = os.geteuid() == 0
OTHER = 65534                    # nobody
AS_OTHER = ["setpriv", "--reuid=%d" % OTHER, "--regid=%d" % OTHER, "--clear-groups"]
needs_other_user = pytest.mark.skipif(not IS_ROOT or not shutil.which("setpriv"), reason="needs root and setpriv")


@pytest.fixture
def top():
    """A directory other users can reach (tmp_path's parents are 0700)."""
    d = tempfile.mkdtemp(prefix="xs-arch-", dir="/tmp")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def xs_lines(db, *lines):
    p = run_xs(db, list(lines))
    assert p.returncode == 0, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]


def entries(db, name="ev"):
    return xs_lines(db, "XRANGE %s - +" % name)[0] or []


def make_store(db, n=20, fields="v"):
    xs_lines(db, *["XADD ev %d-0 n %d f %s" % (1000 + i, i, fields) for i in range(n)])


def run_archive(db, directory, *args, timeout=300, before="5000"):
    return subprocess.run(XS + ["--db", str(db), "archive", "ev", "--to", str(directory), "--before", before]
                          + list(args), capture_output=True, timeout=timeout, cwd=ROOT)


def as_other(*argv):
    p = subprocess.run(AS_OTHER + list(argv), capture_output=True)
    assert p.returncode == 0, p.stderr


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def shared_dir(top):
    """DIR as shared storage: root's, writable by everyone, sticky (as /tmp)."""
    d = os.path.join(top, "arch")
    os.mkdir(d)
    os.chmod(d, 0o1777)
    return d


def refused(p, *texts):
    err = p.stderr.decode()
    assert p.returncode == 1, (p.returncode, err)
    assert err.startswith("xs: archive: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for t in texts:
        assert t in err, err


# ================================================================ DIR itself


@needs_other_user
@pytest.mark.parametrize("how,text", [("world-writable", "others can write in it (mode 1777)"),
                                      ("other-owner", "it belongs to another user (uid %d)" % OTHER)])
@pytest.mark.parametrize("dry", [False, True])
def test_a_directory_that_is_not_privately_the_users_is_refused_unless_shared_dir(top, how, text, dry):
    db = os.path.join(top, "store")
    make_store(db)
    d = shared_dir(top)
    if how == "other-owner":
        os.chown(d, OTHER, OTHER)
        os.chmod(d, 0o755)
    before = entries(db)
    p = run_archive(db, d, *(["--dry-run"] if dry else []))
    refused(p, "refusing archive directory %s: %s" % (d, text), "--shared-dir")
    assert os.listdir(d) == [] and entries(db) == before


# ================================================================ links in DIR


@needs_other_user
@pytest.mark.parametrize("planter", ["other user", "same user"])
@pytest.mark.parametrize("name,target", [("_xs_archive.log", "data.mdb"), ("_xs_archive.lock", "lock"),
                                         ("_xs_archive.json", "data.mdb"), ("_staging", ".")])
def test_a_link_planted_in_a_shared_directory_is_never_followed(top, planter, name, target):
    db = os.path.join(top, "store")
    make_store(db)
    d = shared_dir(top)
    link = os.path.join(d, name)
    if planter == "other user":
        as_other("ln", "-s", os.path.join(db, target), link)
    else:
        os.symlink(os.path.join(db, target), link)
    data = digest(os.path.join(db, "data.mdb"))
    before = entries(db)
    p = run_archive(db, d, "--shared-dir", timeout=60)          # a followed lock link deadlocked here
    refused(p, "refusing %s: it is a symbolic link" % link)
    assert digest(os.path.join(db, "data.mdb")) == data
    assert entries(db) == before
    assert xs_lines(db, "XADD ev 9000-0 after x") == ["9000-0"]   # the store's own lock is free
    assert sorted(os.listdir(d)) == sorted([name, "_xs_archive.lock"]) or sorted(os.listdir(d)) == [name]


def test_a_hard_link_at_the_log_is_refused_not_truncated(top):
    db = os.path.join(top, "store")
    make_store(db)
    d = os.path.join(top, "arch")
    os.mkdir(d, 0o700)
    victim = os.path.join(top, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    os.link(victim, os.path.join(d, arch.LOG))
    refused(run_archive(db, d), "refusing %s: it has another hard link" % os.path.join(d, arch.LOG))
    with open(victim) as f:
        assert f.read() == "precious\n"
    assert len(entries(db)) == 20


# ================================================================ manifests


def _hostile_manifest(victim, through="1019-0"):
    """A manifest claiming ev is archived through ``through`` and a
    pending run whose move replaces ``victim``."""
    return {"format": 1, "pending": {"run": "r1", "streams": {"ev": {"first": "1000-0", "last": through, "rows": 20}},
                                     "moves": [["_staging/r1/data/stream=ev/date=1970-01-01/p.parquet", victim]]},
            "streams": {"ev": {"through": through, "rows": 20,
                               "last_run": {"first": "1000-0", "last": through, "rows": 20}}}}


@needs_other_user
def test_a_manifest_written_by_another_user_is_never_obeyed(top):
    db = os.path.join(top, "store")
    make_store(db)
    d = shared_dir(top)
    victim = os.path.join(top, "victim")
    with open(victim, "w") as f:
        f.write("precious\n")
    planted = os.path.join(top, "planted.json")
    with open(planted, "w") as f:
        json.dump(_hostile_manifest(victim), f)
    os.chmod(planted, 0o644)
    staged = os.path.join(d, "_staging", "r1", "data", "stream=ev", "date=1970-01-01")
    as_other("mkdir", "-p", staged)
    as_other("cp", planted, os.path.join(d, arch.MANIFEST))
    as_other("cp", planted, os.path.join(staged, "p.parquet"))
    before = entries(db)
    for dry in ([], ["--dry-run"]):
        p = run_archive(db, d, "--shared-dir", *dry)
        refused(p, "refusing %s: it belongs to another user (uid %d)" % (os.path.join(d, arch.MANIFEST), OTHER))
    with open(victim) as f:
        assert f.read() == "precious\n"
    assert entries(db) == before


@pytest.mark.parametrize("bad", [
    ("moves", lambda victim: [["_staging/r1/data/stream=ev/date=1970-01-01/p.parquet", victim]]),
    ("moves", lambda victim: [["_staging/r1/data/stream=ev/date=1970-01-01/p.parquet",
                               "stream=ev/date=1970-01-01/../../../victim"]]),
    ("moves", lambda victim: [["/etc/passwd", "stream=ev/date=1970-01-01/1-0_2-0.parquet"]]),
    ("moves", lambda victim: [["_staging/other-run/data/stream=ev/x.parquet",
                               "stream=ev/date=1970-01-01/1-0_2-0.parquet"]]),
    ("through", lambda victim: "99999999999999999999999-0"),
    ("rows", lambda victim: "20"),
])
def test_a_manifest_with_paths_outside_the_directory_or_malformed_fields_is_refused(tmp_path, bad):
    db = tmp_path / "store"
    make_store(db)
    d = tmp_path / "arch"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    doc = _hostile_manifest(str(victim))
    key, value = bad
    if key == "moves":
        doc["pending"]["moves"] = value(str(victim))
    else:
        doc["streams"]["ev"][key] = value(str(victim))
    (d / arch.MANIFEST).write_text(json.dumps(doc))
    os.chmod(d / arch.MANIFEST, 0o600)
    before = entries(db)
    refused(run_archive(db, d), "%s is not a manifest xs can use" % (d / arch.MANIFEST), "nothing was changed")
    assert victim.read_text() == "precious\n" and entries(db) == before


def test_the_manifest_is_replaced_through_a_fresh_temporary_never_a_planted_one(tmp_path, monkeypatch):
    d = tmp_path / "arch"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    monkeypatch.setattr(secrets, "token_hex", lambda n: "0" * (2 * n))
    os.symlink(victim, d / (arch.MANIFEST + ".tmp-" + "0" * 16))
    adir = arch.ArchiveDir(str(d))
    try:
        with pytest.raises(arch.ArchiveError, match="is a symbolic link"):
            arch.save_manifest(adir, arch.empty_manifest())
    finally:
        adir.close()
    assert victim.read_text() == "precious\n" and not (d / arch.MANIFEST).exists()


# ================================================================ two stores, one DIR


@needs_other_user
def test_a_second_store_is_refused_by_another_stores_archive_which_stays_private(top):
    a, b = os.path.join(top, "prod"), os.path.join(top, "staging")
    make_store(a)
    make_store(b, fields="staging")          # the same stream name and IDs, other entries
    d = os.path.join(top, "arch")
    p = run_archive(a, d)
    assert p.returncode == 0 and "archived 20 entries" in p.stdout.decode(), p.stderr.decode()[-2000:]
    assert entries(a) == []
    files = sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs)
    snapshot = {f: digest(f) for f in files}
    before = entries(b)
    for dry in ([], ["--dry-run"]):
        refused(run_archive(b, d, *dry), "%s is the archive of another store" % d, "Nothing was changed")
    assert entries(b) == before and len(before) == 20
    assert {f: digest(f) for f in files} == snapshot
    # the archive is as private as the store: nothing in it for group or others
    for r, dirs, fs in os.walk(d):
        for name in dirs + fs:
            mode = stat.S_IMODE(os.lstat(os.path.join(r, name)).st_mode)
            assert mode & 0o077 == 0, (os.path.join(r, name), oct(mode))
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    parquet = [f for f in files if f.endswith(".parquet")]
    assert parquet and subprocess.run(AS_OTHER + ["cat", parquet[0]], capture_output=True).returncode != 0


# ================================================================ --mode: widened on purpose

AS_GROUP = ["setpriv", "--reuid=%d" % OTHER, "--regid=0", "--clear-groups"]     # another user in root's group


def _modes(d):
    """{path relative to d: permission bits} of d and everything in it."""
    out = {".": stat.S_IMODE(os.lstat(d).st_mode)}
    for r, dirs, fs in os.walk(d):
        for name in dirs + fs:
            out[os.path.relpath(os.path.join(r, name), d)] = stat.S_IMODE(os.lstat(os.path.join(r, name)).st_mode)
    return out


@needs_other_user
def test_a_directory_made_with_mode_0750_is_readable_by_the_group_and_passes_the_checks_of_the_next_runs(top):
    db = os.path.join(top, "store")
    make_store(db)                                               # ev 1000-0 .. 1019-0
    d = os.path.join(top, "arch")
    p = run_archive(db, d, "--mode", "0750", before="1010")
    assert p.returncode == 0 and "archived 10 entries" in p.stdout.decode(), p.stderr.decode()[-2000:]
    first = _modes(d)
    assert {m for n, m in first.items() if os.path.isdir(os.path.join(d, n))} == {0o750}, first
    assert {m for n, m in first.items() if not os.path.isdir(os.path.join(d, n))} == {0o640}, first
    parquet = sorted(n for n in first if n.endswith(".parquet"))
    assert parquet
    # the group reads it; others do not
    assert subprocess.run(AS_GROUP + ["cat", os.path.join(d, parquet[0])], capture_output=True).returncode == 0
    assert subprocess.run(AS_OTHER + ["cat", os.path.join(d, parquet[0])], capture_output=True).returncode != 0
    # the next runs, with or without --mode, take DIR as the user's own (no --shared-dir needed)
    p = run_archive(db, d, "--dry-run", before="1015")
    assert p.returncode == 0 and "would archive 5" in p.stdout.decode(), p.stderr.decode()
    p = run_archive(db, d, before="1015")                        # default: what it makes is private
    assert p.returncode == 0 and "archived 5 entries" in p.stdout.decode(), p.stderr.decode()[-2000:]
    second = _modes(d)
    new = [n for n in second if n not in first]
    assert len(new) == 1 and new[0].endswith(".parquet") and second[new[0]] == 0o600, (new, second)
    assert second[arch.MANIFEST] == 0o600                        # every write makes the manifest anew
    assert {n: m for n, m in second.items() if n in first and n != arch.MANIFEST} == \
        {n: m for n, m in first.items() if n != arch.MANIFEST}  # what the first run made keeps its mode
    p = run_archive(db, d, "--mode", "750")
    assert p.returncode == 0 and "archived 5 entries" in p.stdout.decode(), p.stderr.decode()[-2000:]
    third = _modes(d)
    new = [n for n in third if n not in second]
    assert len(new) == 1 and third[new[0]] == 0o640 and third[arch.MANIFEST] == 0o640, (new, third)
    assert entries(db) == []


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o500, 0o1750, -1, "0750"],
                         ids=["0777", "0770", "0500", "01750", "negative", "a-string"])
def test_the_library_refuses_a_mode_before_it_touches_the_directory(tmp_path, mode):
    d = tmp_path / "arch"
    with pytest.raises(ValueError, match="archive mode"):
        arch.archive(lambda: pytest.fail("opened the store"), str(tmp_path / "store"), [b"ev"], (5, 0), str(d),
                     mode=mode)
    assert not d.exists()


# ================================================================ what may be trimmed


def _committed(store, through="1019-0", first="1000-0", rows=20):
    """The manifest a committed (not yet trimmed) run over ev leaves."""
    n, f, last, dig = store.run(lambda tx: arch.scan(tx, b"ev", arch.parse_id_text(first),
                                                   arch.parse_id_text(through), digest=True))
    assert (n, f, last) == (rows, arch.parse_id_text(first), arch.parse_id_text(through))
    seg = {"first": first, "last": through, "rows": rows, "digest": dig}
    return {"format": arch.FORMAT, "store": None, "pending": None,
            "streams": {"ev": {"through": through, "rows": rows, "last_run": seg}}}


def _add(store, *ids_fields):
    from storage.options import AddOptions
    store.run(lambda tx: [tx.add(b"ev", fields, AddOptions(id=i)) for i, fields in ids_fields], write=True)


def _fill(store, value=b"v"):
    _add(store, *[((1000 + i, 0), [b"n", b"%d" % i, b"f", value]) for i in range(20)])
    _add(store, ((9000, 0), [b"later", b"1"]))


def test_the_entries_of_the_archived_run_are_trimmed_exactly(store):
    _fill(store)
    manifest = _committed(store)
    assert arch.trim_archived(store, manifest, ["ev"]) == ({"ev": 20}, {})
    assert store.run(lambda tx: tx.length(b"ev")) == 1


def test_an_entry_deleted_since_the_run_makes_the_trim_refused_not_partial(store):
    _fill(store)
    manifest = _committed(store)
    store.run(lambda tx: tx.delete_entries(b"ev", IdsOptions(ids=[(1005, 0)])), write=True)
    with pytest.raises(arch.ArchiveError, match="not exactly the 20 its last archived run wrote"):
        arch.trim_archived(store, manifest, ["ev"])
    assert store.run(lambda tx: tx.length(b"ev")) == 20


def test_another_stores_entries_with_the_archived_ids_are_not_trimmed(tmp_path):
    prod, other = Store(str(tmp_path / "prod")), Store(str(tmp_path / "other"))
    try:
        _fill(prod)
        _fill(other, b"other")               # same IDs and count, other values
        manifest = _committed(prod)
        with pytest.raises(arch.ArchiveError, match="not exactly the 20"):
            arch.trim_archived(other, manifest, ["ev"])
        assert other.run(lambda tx: tx.length(b"ev")) == 21
    finally:
        prod.close()
        other.close()


def test_a_manifest_of_an_older_xs_cannot_authorise_trimming_leftovers(store):
    _fill(store)
    manifest = _committed(store)
    del manifest["streams"]["ev"]["last_run"]["digest"]
    with pytest.raises(arch.ArchiveError, match="written by an older xs"):
        arch.trim_archived(store, manifest, ["ev"])
    assert store.run(lambda tx: tx.length(b"ev")) == 21


# ================================================================ staging under --shared-dir


def other_owned_dir(top):
    """DIR as a directory of another user's (0755): with --shared-dir its
    owner may rename every entry in it, ours included."""
    d = os.path.join(top, "theirs")
    os.mkdir(d)
    os.chown(d, OTHER, OTHER)
    os.chmod(d, 0o755)
    return d


SWAPPER = r'''
import os, sys, time
d, evil, stop = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.time() + 240
while time.time() < deadline and not os.path.exists(stop):
    staging = os.path.join(d, "_staging")
    if os.path.isdir(staging) and not os.path.islink(staging):
        os.rename(staging, os.path.join(d, "moved"))     # (Spark makes the missing directories below)
        os.symlink(evil, staging)
        print("swapped", flush=True)
        break
    time.sleep(0.001)
'''


@needs_other_user
def test_the_owner_of_a_shared_directory_cannot_redirect_the_staged_entries_to_their_own(top):
    """The owner of DIR swaps DIR/_staging for a link to a directory of
    theirs as soon as the run made its staging directory (before Spark
    writes by path).  Spark stages in a private directory of the run's
    user instead, and the files go into DIR through descriptors: the
    link is refused, nothing reaches the attacker's directory, nothing
    is trimmed."""
    db = os.path.join(top, "store")
    make_store(db)
    d = other_owned_dir(top)
    evil = os.path.join(top, "evil")
    os.mkdir(evil)
    os.chown(evil, OTHER, OTHER)
    os.chmod(evil, 0o777)
    stop = os.path.join(top, "stop")
    tmp = os.path.join(top, "tmp")
    os.mkdir(tmp, 0o700)
    swapper = subprocess.Popen(AS_OTHER + ["/usr/bin/python3", "-c", SWAPPER, d, evil,
                                           stop], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        before = entries(db)
        p = subprocess.run(XS + ["--db", db, "archive", "ev", "--to", d, "--before", "5000", "--shared-dir"],
                           capture_output=True, timeout=300, cwd=ROOT, env=dict(os.environ, TMPDIR=tmp))
    finally:
        open(stop, "w").close()
        out, err = swapper.communicate(timeout=30)
    assert swapper.returncode == 0, err
    assert out == b"swapped\n"                           # the attack took place while the run went on
    refused(p, "refusing %s: it is a symbolic link" % os.path.join(d, "_staging"))
    leaked = [os.path.join(r, f) for r, _, fs in os.walk(evil) for f in fs]
    assert leaked == []
    assert entries(db) == before
    assert os.listdir(tmp) == []                         # the private staging directory is gone


@needs_other_user
def test_a_run_into_another_users_shared_directory_stages_privately_and_leaves_private_files(top):
    db = os.path.join(top, "store")
    make_store(db)
    d = other_owned_dir(top)
    tmp = os.path.join(top, "tmp")
    os.mkdir(tmp, 0o700)
    p = subprocess.run(XS + ["--db", db, "archive", "ev", "--to", d, "--before", "1010", "--shared-dir"],
                       capture_output=True, timeout=300, cwd=ROOT, env=dict(os.environ, TMPDIR=tmp))
    assert p.returncode == 0, p.stderr
    assert b"archived 10 entries of 1 stream" in p.stdout
    files = [os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs if f.endswith(".parquet")]
    assert len(files) == 1
    st = os.stat(files[0])
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o600)
    assert [e[0] for e in entries(db)][0] == "1010-0"
    assert os.listdir(tmp) == []
    assert not os.path.exists(os.path.join(d, "_staging"))


@needs_other_user
def test_a_shared_directory_another_user_can_rename_in_is_refused_with_a_cluster_master(top):
    db = os.path.join(top, "store")
    make_store(db)
    d = other_owned_dir(top)
    p = run_archive(db, d, "--shared-dir", "--master", "spark://127.0.0.1:1")
    refused(p, "another user can rename entries in the archive directory", "--master spark://127.0.0.1:1")
    assert os.listdir(d) == [] and len(entries(db)) == 20


def test_a_temporary_directory_others_can_rename_in_is_no_place_to_stage(tmp_path, monkeypatch):
    d = tmp_path / "open"
    d.mkdir()
    d.chmod(0o777)                                    # writable by all, not sticky
    monkeypatch.setenv("TMPDIR", str(d))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    with pytest.raises(arch.ArchiveError, match="set TMPDIR to a directory of your own"):
        arch.private_staging(None)
    assert os.listdir(d) == []
