"""Archiving old entries to Parquet with Spark, then trimming them: the
engine of ``xs archive`` (pyspark and pyarrow are imported only here,
and only when a run needs them; no click, no rich).

What a run does, for the streams it is given and a cut ID (entries with
an ID below the cut go):

 0. open       DIR is opened once and every entry in it is reached from
               that descriptor without following a link (ArchiveDir).
               Unless --shared-dir, DIR must be the user's own and
               writable by nobody else; either way xs's own entries in it
               (lock, log, manifest, staging) must be the user's own
               regular files / directories, and a manifest is checked
               for shape (IDs, counts, digests; every move a relative,
               normalised path from this run's staging area to an
               archive file's name inside DIR) before it is obeyed.
 1. lock       DIR/_xs_archive.lock (flock): one archiver per DIR at a time.
 2. recover    the manifest DIR/_xs_archive.json says what earlier runs
               did, and which store it belongs to (the store's identity,
               storage.verbs.settings.identity): a manifest of another store is
               refused, so two stores never share DIR.  A run killed after its files were verified ("pending"
               in the manifest) is rolled forward: its remaining moves are
               made and it is committed.  Then DIR/_staging is removed
               (what killed runs left there was never committed).
 3. leftovers  per stream, the entries at or below its archived-through
               ID that are still in the stream (a run killed before its
               trim) are trimmed: they are in the archive already.
 4. plan       per stream, in one read transaction: the entries above its
               archived-through ID and below the cut: count, first, last,
               and a SHA-256 of their IDs and fields (the run's digest).
               Work a consumer group has not done stays: a stream's cut
               is lowered to the oldest ID any of its groups has not
               acknowledged (its oldest pending ID, or the ID after its
               last-delivered one), and the plan's Hold says what stayed,
               group by group (``drop_unacked``: the cut stays, and the
               Hold says what the run takes).
 5. stage      a Spark job (under umask 077) reads exactly [first, last]
               of each stream through the ``xstream`` data source
               (storage.spark) and writes Parquet partitioned
               ``stream=NAME/date=YYYY-MM-DD`` (the UTC day of the ID's
               ms) into DIR/_staging/RUN/data.  Spark writes by path, so
               when another user can rename entries in DIR (--shared-dir:
               its owner, or anyone who may write in it unless it is
               sticky) it writes into a private directory of this user's
               instead (private_staging: 0700, in TMPDIR, every directory
               above it this user's or root's), and after step 6 the
               files are copied into DIR/_staging/RUN/data through
               descriptors (copy_in): a link swapped in for _staging is
               refused, and nothing reaches a directory of theirs.
 6. verify     the staged files are read back (pyarrow, the ``id`` column, a file at a time):
               per stream the row count, the first and last IDs and that
               no ID is there twice (IDs strictly increase within a file,
               files do not overlap) must be what step 4 planned.  Unique
               IDs, all from the stream, inside [first, last], as many as
               the stream held there: exactly the planned entries.  Then
               every staged file is fsynced.
 7. pending    the manifest records the run as pending: its per-stream
               first/last/rows and every move (staged path -> final path).
 8. move       each file is renamed to DIR/stream=NAME/date=D/FIRST_LAST.parquet
               (FIRST, LAST: the file's first and last IDs, ``ms-seq``), so
               a name says which entries a file holds and the same rows
               always get the same name; the directories are fsynced.
 9. commit     the manifest records, per stream, the archived-through ID
               (the last ID archived) and the run's first/last/rows, and
               drops "pending".
10. trim       one write transaction removes, in every stream, the entries
               at or below its archived-through ID: XTRIM MINID with the
               ID right after it, exact, KEEPREF (pending entries of groups
               keep their PEL entries, as XTRIM does).  The data source
               read no entry above the planned last one, and IDs only
               grow, so this removes exactly the archived entries; it is
               XTRIM MINID cut when the stream holds an entry at or above
               the cut, and when it does not, an entry a producer adds
               below the cut during the run stays for the next run.
               Before trimming, the transaction checks that the entries
               it removes are exactly those of the stream's last archived
               run: the same count and digest.  Anything else (a stream
               made again, another store's stream of the same name,
               entries deleted since) is refused, not trimmed.  A stream
               in which a group now needs one of them (made, or moved
               back, while Spark ran) is left whole, unless
               ``drop_unacked``: its entries are in the archive and the
               stream, and a later run's step 3 trims them once the
               group is done.
11. clean      DIR/_staging/RUN is removed.

Manifest writes are atomic (a temporary file of a random name made
exclusively, fsync, rename, fsync of DIR), so the manifest is always the
old one or the new one.  What xs writes in DIR is private (directories
0700, files 0600), as the store is, unless a run is given another mode
(``mode``, ``xs archive --mode``; ``mode_problem`` says which are
allowed): then each directory the run makes (DIR itself, when missing,
and the stream=/date= directories) gets ``mode`` and each file it makes
or puts in place (Parquet files, the manifest, which every write makes
anew, and the lock and the log when it makes them) ``mode`` without
the execute bits, exactly, whatever the umask.  What earlier runs made
keeps its mode; missing parents of DIR are made as ``mkdir -p`` makes
them; the staging area, which a run removes when it ends, stays 0700.

Killed at any point, no entry is lost and a re-run converges without
duplicate rows:

* before 7 (planning, the Spark job, verifying): only DIR/_staging/RUN
  exists; the stream is untouched.  The re-run removes the staging
  directory and archives the same entries again.
* between 7 and 9 (pending recorded, some or all files moved): every
  entry of the run is in a verified file, in staging or in place; the
  re-run finishes the moves (a file already moved is skipped) and
  commits, before it plans anything, so the entries are never staged
  twice.  Nothing was trimmed.  A re-run killed while finishing the
  moves leaves the same state: the next one goes on.
* between 9 and 10 (committed, not trimmed): the entries are in the
  archive and in the stream; the re-run's step 3 trims them and step 4
  starts above the archived-through ID, so nothing is written twice.
* during 10: one transaction: all trimmed or none.
* after 10 (staging not yet removed): the re-run removes it.

An entry is thus always in the stream, the archive or both.

Over the network (``xs archive --url``): ``open_store()`` gives a
``NetStore`` (a server through storage.spark.network), Spark reads with
the data source's url mode, the manifest's store is the endpoint
(``url:redis://host:port``, no password), and step 10's transaction is
a MULTI/EXEC of the XTRIMs, sent after the checked entries were read
with their streams WATCHed (a change meanwhile: checked and sent again).
The kill points and what a re-run does are the same.  Each named
step can be made to kill the process (SIGKILL, for the tests) with the
environment variable ``XS_ARCHIVE_KILL_AT=STEP``, STEP one of
``KILL_POINTS``: planned (after 4), staged (after 5), verified (after
6), pending (after 7), recovering (after the first move of step 2),
moving (after the first move of 8), moved (after 8), committed (after
9), trimmed (after 10).

Archive layout: ``DIR/stream=NAME/date=YYYY-MM-DD/FIRST_LAST.parquet``,
NAME escaped as Spark escapes partition values (``:`` is ``%3A``), so
``spark.read.parquet(DIR)`` gives columns id, ms, seq, ts, fields (and
fields_list with ``fields_list=True``), stream, date.  ``fields`` is a
map: a field name given twice in one entry keeps its last value there;
``fields_list`` keeps every field in order.  Values are strings and
must be UTF-8 (the data source's rule): an entry that is not fails the
run before anything is trimmed, and the message says to archive with
``binary=True`` (``xs archive --binary``), which writes every value as
binary, losslessly.  One directory holds one kind of values (the
manifest's ``values``: "string" or "binary", set by its first run), so
that ``spark.read.parquet(DIR)`` reads every file with one schema; a run
of the other kind is refused before anything is written.
"""
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import threading
import time
import urllib.parse
import uuid

from storage import ids
from storage.errors import RedisError
from storage.files import unsafe_reason
from storage.info import GroupWork
from storage.options import PendingOptions, RangeOptions, TrimOptions

MANIFEST = "_xs_archive.json"
LOCK = "_xs_archive.lock"
LOG = "_xs_archive.log"
STAGING = "_staging"
FORMAT = 2                       # 2: the manifest names its store and each run's digest
FORMATS = (1, 2)                 # read; a format-1 manifest is taken over by the first store that runs
KILL_ENV = "XS_ARCHIVE_KILL_AT"
KILL_POINTS = ("planned", "staged", "verified", "pending", "recovering", "moving", "moved", "committed", "trimmed")
ROWS_PER_PARTITION = 250000      # entries per Spark read partition (at most 64 per stream)
MANIFEST_MAX = 64 << 20          # a manifest larger than this is not one of ours
DEFAULT_MODE = 0o700             # what a run makes in DIR: directories this, files this without x (0600)
SHARED_HINT = ("pass --shared-dir to archive there anyway (links are still never followed, and only a manifest "
               "of your own is obeyed)")

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class ArchiveError(Exception):
    """The archive cannot be made or is not what it should be; the text
    says why and what was left as it was."""


# ------------------------------------------------------------------ small parts

def id_text(i):
    return "%d-%d" % tuple(i)


def parse_id_text(text):
    ms, _, seq = text.partition("-")
    return int(ms), int(seq)


def kill_point(step):
    """SIGKILL this process at ``step`` when XS_ARCHIVE_KILL_AT names it
    (tests of kill safety; see the module's docstring)."""
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def partition_dir_name(stream):
    """``stream=NAME`` with NAME escaped as Spark escapes a partition value."""
    out = []
    for ch in stream:
        if ord(ch) < 0x20 or ch in '"#%\'*/:=?\\\x7f{[]^':
            out.append("%%%02X" % ord(ch))
        else:
            out.append(ch)
    return "stream=" + "".join(out)


def mode_problem(mode):
    """Why ``mode`` (an int) cannot be the mode of what a run makes in
    DIR, or None.  Directories get ``mode``, files ``mode & 0o666``.  The
    owner must keep rwx (xs writes in and walks the directories it
    makes), and neither group nor others may write: a DIR others can
    write in is refused by the next run (others could plant links or a
    manifest), and nothing in an archive is for others to change."""
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o777:
        return "only the permission bits 0 to 0777 are allowed (no setuid, setgid or sticky bit)"
    if mode & 0o700 != 0o700:
        return "the owner must keep rwx (7: xs writes in the directories it makes and walks them), e.g. 0750"
    if mode & 0o022:
        return ("group and others must not write (an archive directory others can write in is refused, since "
                "they could plant links or a manifest in it): at most 0755, e.g. 0750")
    return None


def check_mode(mode):
    """Raise ValueError when mode_problem refuses ``mode``."""
    why = mode_problem(mode)
    if why:
        raise ValueError("archive mode %s: %s" % ("%#o" % mode if isinstance(mode, int) else repr(mode), why))


def _fix_mode(fd, mode):
    """Give the open file or directory ``fd`` exactly ``mode`` (the umask
    may have taken bits away)."""
    if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
        os.fchmod(fd, mode)


def others_can_rename(st):
    """Whether a user other than this one (or root) can rename or remove
    entries of the directory whose stat is ``st``: its owner can, and so
    can anyone who may write in it unless it is sticky (as /tmp is)."""
    if st.st_uid not in (os.geteuid(), 0):
        return True
    return bool(st.st_mode & 0o022) and not st.st_mode & stat.S_ISVTX


STAGE_PREFIX = "xs-archive-"


def check_local(master):
    """A run that must stage privately (ArchiveDir.staging_is_safe is
    False) needs a local master: a cluster's executors cannot reach a
    private local directory."""
    if master and not master.startswith("local"):
        raise ArchiveError(
            "another user can rename entries in the archive directory, so Spark must stage in a private local "
            "directory, which the executors of --master %s cannot reach.  Nothing was changed; archive with a "
            "local master, or to a directory no other user can rename entries in (yours, or sticky as /tmp is)"
            % master)


def private_staging(master):
    """A new private directory (0700, this user's) in the temporary
    directory (TMPDIR, else /tmp), for a run whose archive directory
    others can rename entries in: Spark writes there by path, and only
    verified files go into DIR, through descriptors.  Every directory
    above it must be this user's or root's and writable by no other
    user unless sticky, so nobody can swap it for a link to theirs.
    Directories killed runs of this user's left there are removed.
    Spark's executors must see it: a local master only."""
    import tempfile
    check_local(master)
    root = os.path.realpath(tempfile.gettempdir())
    d = root
    while True:
        st = os.stat(d)
        if not stat.S_ISDIR(st.st_mode) or others_can_rename(st):
            raise ArchiveError(
                "another user can rename entries in the archive directory, so Spark must stage in a private "
                "directory, but %s is not one: another user can rename entries in %s.  Nothing was changed; set "
                "TMPDIR to a directory of your own" % (root, d))
        if d == "/":
            break
        d = os.path.dirname(d)
    _sweep_private_staging(root)
    return tempfile.mkdtemp(prefix="%s%d-" % (STAGE_PREFIX, os.getpid()), dir=root)


def _sweep_private_staging(root):
    """Remove what runs of this user's that were killed left in ``root``
    (STAGE_PREFIX, the pid, a random part; the pid no longer alive)."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if not name.startswith(STAGE_PREFIX):
            continue
        pid = name[len(STAGE_PREFIX):].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            shutil.rmtree(path, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _glob_escape(name):
    """A stream name as a glob matching only itself (the data source reads
    a name with glob characters as a glob)."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in name)


# ------------------------------------------------------------------ the directory

class ArchiveDir:
    """The archive directory DIR, opened once; every entry in it is then
    reached from that descriptor, one component at a time, never through
    a symbolic link.  Unless ``shared``, DIR must belong to this user and
    be writable by nobody else (others could plant links and manifests in
    it); with ``shared`` it may, but xs's own entries in it (the lock, the
    log, the manifest, the staging directory and what is staged) must
    still be this user's.  What it makes gets ``mode`` (directories) and
    ``mode & 0o666`` (files), exactly (see mode_problem)."""

    def __init__(self, path, shared=False, create=True, mode=DEFAULT_MODE):
        check_mode(mode)
        self.path = path
        self.shared = shared
        self.dir_mode = mode
        self.file_mode = mode & 0o666
        self.fd = None
        self.abspath = os.path.abspath(path)
        self.renamable = True
        made = False
        if create:
            full = os.path.abspath(path)
            parent = os.path.dirname(full)
            try:
                if parent != full:
                    os.makedirs(parent, exist_ok=True)          # missing parents: as mkdir -p makes them
            except FileExistsError:
                raise ArchiveError("cannot make the archive directory %s: %s is not a directory" % (path, parent))
            except OSError as e:
                raise ArchiveError("cannot make the archive directory %s: %s" % (path, e.strerror or e))
            try:
                os.mkdir(full, mode)
                made = True
            except FileExistsError:
                pass                    # a directory (or not: refused below)
            except OSError as e:
                raise ArchiveError("cannot make the archive directory %s: %s" % (path, e.strerror or e))
        try:
            lst = os.lstat(path)
        except FileNotFoundError:
            return                      # (not create: there is no archive yet)
        except OSError as e:
            raise ArchiveError("cannot open the archive directory %s: %s" % (path, e.strerror or e))
        if stat.S_ISLNK(lst.st_mode) and lst.st_uid != os.geteuid() and not shared:
            raise ArchiveError("refusing archive directory %s: it is a symbolic link that belongs to another user "
                               "(uid %d); %s" % (path, lst.st_uid, SHARED_HINT))
        try:
            self.fd = os.open(path, _O_DIR)
        except NotADirectoryError:
            raise ArchiveError("%s is not a directory" % path)
        except OSError as e:
            raise ArchiveError("cannot open the archive directory %s: %s" % (path, e.strerror or e))
        st = os.fstat(self.fd)
        if made and st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != mode:
            os.fchmod(self.fd, mode)
            st = os.fstat(self.fd)
        if not shared:
            why = None
            if st.st_uid != os.geteuid():
                why = "it belongs to another user (uid %d)" % st.st_uid
            elif st.st_mode & 0o022:
                why = "others can write in it (mode %04o)" % stat.S_IMODE(st.st_mode)
            if why:
                self.close()
                raise ArchiveError("refusing archive directory %s: %s; %s" % (path, why, SHARED_HINT))
        self.abspath = os.path.abspath(path)       # for Spark, which writes by path into our staging
        self.renamable = others_can_rename(st)

    def staging_is_safe(self):
        """Whether Spark may write by path into DIR/_staging: only when
        no other user can rename entries in DIR (swap our staging
        directory for a link to theirs between our check and Spark's
        write)."""
        return not self.renamable

    @property
    def exists(self):
        return self.fd is not None

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def label(self, *parts):
        return os.path.join(self.path, *parts)

    def _refuse(self, parts, why):
        raise ArchiveError("refusing %s: it %s (nothing in the archive directory is followed or used unless it is "
                           "this user's own)" % (self.label(*parts), why))

    def open_file(self, name, flags, dir_fd=None, parts=None):
        """Open the file ``name`` (in DIR, or in ``dir_fd``) without
        following a link; it must be this user's regular file with one
        name.  Raises FileNotFoundError when missing and not created.  A
        file this call makes (``os.O_CREAT``) gets ``file_mode`` exactly;
        one that was there keeps its mode."""
        if not flags & os.O_CREAT or flags & os.O_EXCL:
            fd = self._open_file(name, flags, dir_fd, parts)
            if flags & os.O_CREAT:
                self._made(fd)
            return fd
        for _ in range(8):      # made now (O_EXCL), or there already: tell which, to set the mode of ours
            try:
                fd = self._open_file(name, flags | os.O_EXCL, dir_fd, parts)
            except FileExistsError:
                try:
                    return self._open_file(name, flags & ~os.O_CREAT, dir_fd, parts)
                except FileNotFoundError:
                    continue    # removed in between: make it
            self._made(fd)
            return fd
        return self._open_file(name, flags, dir_fd, parts)

    def _made(self, fd):
        try:
            _fix_mode(fd, self.file_mode)
        except BaseException:
            os.close(fd)
            raise

    def _open_file(self, name, flags, dir_fd, parts):
        parts = parts or (name,)
        base = self.fd if dir_fd is None else dir_fd
        try:
            fd = os.open(name, flags | _O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, self.file_mode, dir_fd=base)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EEXIST, errno.EACCES, errno.EPERM):
                try:
                    st = os.stat(name, dir_fd=base, follow_symlinks=False)
                except OSError:
                    st = None
                if st is not None:
                    why = unsafe_reason(st, "file")
                    if why:
                        self._refuse(parts, why)
            raise
        try:
            why = unsafe_reason(os.fstat(fd), "file")
            if why:
                self._refuse(parts, why)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def open_dirs(self, parts, create, own=True, mode=None):
        """The directory DIR/parts..., each component opened without
        following a link (made if missing and ``create``: with ``mode``,
        exactly, or ``dir_mode``) and checked to be a directory (``own``:
        of this user's); the caller closes the descriptor.  None when
        missing and not ``create``."""
        mode = self.dir_mode if mode is None else mode
        fd = os.dup(self.fd)
        try:
            for k, name in enumerate(parts):
                made = False
                if create:
                    try:
                        os.mkdir(name, mode, dir_fd=fd)
                        made = True
                    except FileExistsError:
                        pass
                try:
                    nfd = os.open(name, _O_DIR | _O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if create:
                        raise
                    os.close(fd)
                    return None
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                        self._refuse(parts[:k + 1], unsafe_reason(st, "dir") or "cannot be opened")
                    raise
                os.close(fd)
                fd = nfd
                why = unsafe_reason(os.fstat(fd), "dir", own)
                if why:
                    self._refuse(parts[:k + 1], why)
                if made and unsafe_reason(os.fstat(fd), "dir") is None:
                    _fix_mode(fd, mode)
            return fd
        except BaseException:
            os.close(fd)
            raise

    def check_entry(self, name, kind):
        """Refuse DIR/name if it exists and is not this user's own regular
        file with one name (``kind`` "file") or directory ("dir"); it is
        checked again when it is used."""
        st = self.lstat(name)
        if st is not None:
            why = unsafe_reason(st, kind)
            if why:
                self._refuse((name,), why)

    def lstat(self, name, dir_fd=None):
        try:
            return os.stat(name, dir_fd=self.fd if dir_fd is None else dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def remove_tree(self, name):
        """Remove DIR/name (never following a link in it); a link or a
        file of another user's there is refused, not removed."""
        st = self.lstat(name)
        if st is None:
            return
        why = unsafe_reason(st, "dir")
        if why:
            self._refuse((name,), why)
        try:
            shutil.rmtree(name, dir_fd=self.fd)                    # Python 3.11+
        except TypeError:
            shutil.rmtree(os.path.join(self.abspath, name), ignore_errors=True)
        except OSError:
            pass                # what is left is removed by the next run

    def sweep_temporaries(self):
        """Remove manifest temporaries of this user's that killed runs left."""
        for name in os.listdir(self.fd):
            if name.startswith(MANIFEST + ".tmp-"):
                st = self.lstat(name)
                if st is not None and unsafe_reason(st, "file") is None:
                    try:
                        os.unlink(name, dir_fd=self.fd)
                    except OSError:
                        pass


# ------------------------------------------------------------------ the manifest

def empty_manifest():
    return {"format": FORMAT, "store": None, "streams": {}, "pending": None}


_ID_TEXT = re.compile(r"\d{1,20}-\d{1,20}\Z")
_RUN_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
_FINAL = re.compile(r"stream=[^/\x00]+/date=\d{4}-\d{2}-\d{2}/\d{1,20}-\d{1,20}_\d{1,20}-\d{1,20}\.parquet\Z")
_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_STORE_ID = re.compile(r"[0-9a-f]{32}\Z")
_SERVED = re.compile(r"url:(redis|rediss|unix)://[!-~]{1,1000}\Z")     # xs archive --url: the endpoint, no password


def _rel_parts(path):
    """The components of a relative, normalised path, or None."""
    if not isinstance(path, str) or not path or "\x00" in path or path.startswith("/"):
        return None
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return None
    return parts


def _check_segment(seg, where):
    if not isinstance(seg, dict):
        raise ValueError("%s is not an object" % where)
    for k in ("first", "last"):
        if not isinstance(seg.get(k), str) or not _ID_TEXT.match(seg[k]):
            raise ValueError("%s.%s is not a stream ID" % (where, k))
    if not isinstance(seg.get("rows"), int) or isinstance(seg.get("rows"), bool) or seg["rows"] < 0:
        raise ValueError("%s.rows is not a count" % where)
    if seg.get("digest") is not None and not (isinstance(seg["digest"], str) and _HEX64.match(seg["digest"])):
        raise ValueError("%s.digest is not a SHA-256 digest" % where)


def check_manifest(doc):
    """Raise ValueError saying what is wrong with a manifest read from
    DIR, which is trusted for nothing it does not prove: IDs, counts and
    digests must have their shapes, and every move must go from this
    directory's staging area to a file named as xs names its files, by
    a relative, normalised path inside DIR."""
    if not isinstance(doc, dict) or doc.get("format") not in FORMATS or not isinstance(doc.get("streams"), dict):
        raise ValueError("it is not an xs archive manifest of format %s" % " or ".join(map(str, FORMATS)))
    store = doc.get("store")
    if store is not None and not (isinstance(store, str) and (_STORE_ID.match(store) or _SERVED.match(store))):
        raise ValueError("its store is not a store identity")
    for name, rec in doc["streams"].items():
        if not isinstance(rec, dict) or not isinstance(rec.get("through"), str) or not _ID_TEXT.match(rec["through"]):
            raise ValueError("stream %r has no archived-through ID" % name)
        rows = rec.get("rows", 0)
        if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
            raise ValueError("stream %r's row count is not a count" % name)
        if rec.get("last_run") is not None:
            _check_segment(rec["last_run"], "stream %r's last run" % name)
    if doc.get("values") not in (None, "string", "binary"):
        raise ValueError("its values are neither string nor binary")
    pending = doc.get("pending")
    if pending is None:
        return
    if not isinstance(pending, dict) or not isinstance(pending.get("run"), str) or \
            not _RUN_NAME.match(pending["run"]) or not isinstance(pending.get("streams"), dict) or \
            not isinstance(pending.get("moves"), list):
        raise ValueError("its pending run is malformed")
    for name, seg in pending["streams"].items():
        _check_segment(seg, "the pending run's stream %r" % name)
    for move in pending["moves"]:
        if not isinstance(move, (list, tuple)) or len(move) != 2:
            raise ValueError("a pending move is not a pair of paths")
        src, dst = _rel_parts(move[0]), _rel_parts(move[1])
        if src is None or len(src) < 4 or src[0] != STAGING or src[1] != pending["run"] or src[2] != "data" \
                or not src[-1].endswith(".parquet"):
            raise ValueError("a pending move's source %r is not a file staged by that run" % (move[0],))
        if dst is None or not _FINAL.match(move[1]):
            raise ValueError("a pending move's target %r is not an archive file's path inside the directory"
                             % (move[1],))


def load_manifest(adir):
    """The manifest of the ArchiveDir ``adir`` (an empty one when there
    is none).  It must be this user's own regular file: a manifest that
    is a link, has another name, or was written by another user is never
    obeyed, whatever --shared-dir says."""
    if not adir.exists:
        return empty_manifest()
    try:
        fd = adir.open_file(MANIFEST, os.O_RDONLY)
    except FileNotFoundError:
        return empty_manifest()
    except OSError as e:
        raise ArchiveError("cannot read the archive's manifest %s: %s" % (adir.label(MANIFEST), e.strerror or e))
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MANIFEST_MAX + 1)
        if len(data) > MANIFEST_MAX:
            raise ValueError("it is larger than %d bytes" % MANIFEST_MAX)
        doc = json.loads(data.decode("utf-8"))
        check_manifest(doc)
    except (OSError, ValueError) as e:
        raise ArchiveError("%s is not a manifest xs can use (%s); nothing was changed" % (adir.label(MANIFEST), e))
    doc.setdefault("store", None)
    doc.setdefault("pending", None)
    return doc


def save_manifest(adir, doc):
    """Replace the manifest atomically and durably (a temporary file of a
    random name, made exclusively, fsync, rename, fsync of DIR)."""
    doc["format"] = FORMAT
    data = json.dumps(doc, indent=1, sort_keys=True).encode("utf-8")
    tmp = "%s.tmp-%s" % (MANIFEST, secrets.token_hex(8))
    fd = adir.open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, parts=(tmp,))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, MANIFEST, src_dir_fd=adir.fd, dst_dir_fd=adir.fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=adir.fd)
        except OSError:
            pass
        raise
    os.fsync(adir.fd)


def check_store(adir, manifest, store_id):
    """The manifest belongs to the store ``store_id`` (or to none yet):
    two stores never share an archive directory, since one would trim
    what only the other archived."""
    if manifest.get("store") not in (None, store_id):
        raise ArchiveError(
            "%s is the archive of another store (%s; this store is %s): two stores cannot share an archive "
            "directory.  Nothing was changed; archive this store to a directory of its own"
            % (adir.path, manifest["store"], store_id or "one that has never been archived"))


# ------------------------------------------------------------------ planning

class StreamPlan:
    """What one stream has for this run."""
    __slots__ = ("name", "through", "leftover", "rows", "first", "last", "digest", "hold")

    def __init__(self, name, through, leftover, rows, first, last, digest=None, hold=None):
        self.name = name            # str
        self.through = through      # (ms, seq) archived through before this run, or None
        self.leftover = leftover    # entries at or below ``through`` still in the stream
        self.rows = rows            # entries to archive now (above ``through``, below the cut)
        self.first = first          # their first and last IDs, (ms, seq), or None
        self.last = last
        self.digest = digest        # SHA-256 of those entries (_digest_entry), or None
        self.hold = hold            # a Hold: entries below the cut kept for consumer groups, or None


class Hold:
    """Entries below the cut that a run keeps (or, with ``drop_unacked``,
    takes) because consumer groups have not acknowledged them: from
    ``floor`` (the oldest ID some group still needs) to the cut, ``held``
    entries, ``unacked`` of them needed by some group (not yet delivered
    to it, or pending in it); ``groups``: a GroupWork per group with
    work there, in name order.  ``kept``: they stay in the stream (the
    default); False: --drop-unacked archived and trimmed them."""
    __slots__ = ("floor", "held", "unacked", "groups", "kept")

    def __init__(self, floor, held, unacked, groups, kept=True):
        self.floor = floor
        self.held = held
        self.unacked = unacked
        self.groups = groups
        self.kept = kept


def _digest_entry(h, entry):
    """Add one entry (id, fields) to the SHA-256 ``h``: every byte with its
    length, so no two different entries or lists of them hash alike."""
    i, fields = entry
    h.update(b"%d:%s%d:" % (len(i), bytes(i), len(fields)))
    for f in fields:
        h.update(b"%d:" % len(f))
        h.update(f)


def scan(tx, raw, lo, hi, chunk=10000, digest=False):
    """(count, first, last) of the entries of stream ``raw`` with IDs in
    [lo, hi], read ``chunk`` at a time (public verbs only); with
    ``digest``, (count, first, last, SHA-256 of the entries in order)."""
    n, first, last = 0, None, None
    h = hashlib.sha256() if digest else None
    while lo <= hi:
        got = tx.range(raw, RangeOptions(lo, hi, chunk))
        if not got:
            break
        if first is None:
            first = _id(got[0][0])
        last = _id(got[-1][0])
        n += len(got)
        if h is not None:
            for e in got:
                _digest_entry(h, e)
        if len(got) < chunk or last >= ids.MAX_ID:
            break
        lo = ids.incr(last)
    if h is not None:
        return n, first, last, h.hexdigest()
    return n, first, last


def group_floor(tx, raw):
    """(floor, groups) of stream ``raw``: ``floor`` is the smallest ID
    some consumer group has not acknowledged -- its oldest pending ID, or
    the ID right after its last-delivered one (where its undelivered
    entries start) -- or None when no group can need an entry;
    ``groups``: [(group name, its last-delivered ID)].  Reads the
    transaction's public verbs only (XINFO GROUPS and XPENDING over the
    network: NetStore)."""
    try:
        infos = tx.groups_info(raw)
    except RedisError:              # no such stream (gone since it was selected)
        return None, []
    floor = None
    groups = []
    for g in infos:
        last = tuple(g.last_delivered_id)
        need = ids.incr(last) if last < ids.MAX_ID else None
        if g.pending:
            first = tx.pending_summary(raw, g.name).first
            if first is not None:
                first = tuple(first)
                need = first if need is None else min(need, first)
        if need is not None:
            floor = need if floor is None else min(floor, need)
        groups.append((g.name, last))
    return floor, groups


def _pending_below(tx, raw, group, end, chunk=10000):
    """The IDs pending in ``group`` of stream ``raw`` up to ``end``, a set
    (a PEL is the work in flight: small beside the stream)."""
    out = set()
    lo = ids.MIN_ID
    while True:
        rows = tx.pending_range(raw, group, PendingOptions(lo, end, chunk))
        out.update(tuple(r.id) for r in rows)
        if len(rows) < chunk:
            return out
        last = tuple(rows[-1].id)
        if last >= end:
            return out
        lo = ids.incr(last)


def hold_of(tx, raw, floor, groups, end, chunk=10000):
    """The Hold of stream ``raw`` for entries in [``floor``, ``end``]:
    one pass over their IDs, counting for each group those it has not
    been delivered (after its last-delivered ID) and those pending in
    it.  None when no entry is there."""
    if floor is None or floor > end:
        return None
    pending = [_pending_below(tx, raw, name, end) for name, _ in groups]
    undelivered = [0] * len(groups)
    held_by = [0] * len(groups)
    held = unacked = 0
    lo = floor
    while lo <= end:
        got = tx.range(raw, RangeOptions(lo, end, chunk))
        if not got:
            break
        for e in got:
            i = _id(e[0])
            held += 1
            need = False
            for j, (_, last) in enumerate(groups):
                if last < i:
                    undelivered[j] += 1
                    need = True
                elif i in pending[j]:
                    held_by[j] += 1
                    need = True
            unacked += need
        last = _id(got[-1][0])
        if len(got) < chunk or last >= end:
            break
        lo = ids.incr(last)
    if not held:
        return None
    work = sorted((GroupWork(group=name, undelivered=undelivered[j], pending=held_by[j])
                   for j, (name, _) in enumerate(groups) if undelivered[j] or held_by[j]),
                  key=lambda w: bytes(w.group))
    return Hold(floor, held, unacked, work)


def plan_streams(tx, names, cut, manifest, drop_unacked=False):
    """A StreamPlan per name (bytes, UTF-8) from one read transaction.
    Entries some consumer group has not acknowledged stay, as xs trim
    keeps them: a stream's cut is lowered to the oldest ID any of its
    groups still needs (StreamPlan.hold says what stays), unless
    ``drop_unacked`` (the hold then says what the run takes)."""
    out = []
    for raw in names:
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError("stream name %r is not UTF-8: it cannot be a Parquet partition" % (raw,))
        rec = manifest["streams"].get(name)
        through = parse_id_text(rec["through"]) if rec else None
        leftover = scan(tx, raw, ids.MIN_ID, through)[0] if through is not None else 0
        lo = ids.incr(through) if through is not None and through < ids.MAX_ID else None
        if through is None:
            lo = ids.MIN_ID
        floor, groups = group_floor(tx, raw)
        hold = None
        stream_cut = cut
        if floor is not None and floor < cut:
            start = floor if lo is None else max(floor, lo)
            hold = hold_of(tx, raw, start, groups, ids.decr(cut))
            if hold is not None:
                hold.kept = not drop_unacked
            if not drop_unacked:
                stream_cut = floor
        rows, first, last, digest = 0, None, None, None
        if lo is not None and stream_cut > ids.MIN_ID and lo < stream_cut:
            rows, first, last, digest = scan(tx, raw, lo, ids.decr(stream_cut), digest=True)
        out.append(StreamPlan(name, through, leftover, rows, first, last, digest, hold))
    return out


def _id(b):
    ms, _, seq = bytes(b).partition(b"-")
    return int(ms), int(seq)


# ------------------------------------------------------------------ trimming

def _check_trimmable(tx, raw, through, seg):
    """The entries at or below ``through`` in stream ``raw`` must be
    exactly those of the last archived run ``seg`` ({"first", "last",
    "rows", "digest"}): the same count and the same SHA-256 over their IDs
    and fields.  Anything else (a stream made again, entries of another
    store of the same name, entries deleted since) is refused: nothing is
    trimmed that the archive cannot be shown to hold."""
    n, first, _, digest = scan(tx, raw, ids.MIN_ID, through, digest=True)
    if not n:
        return 0
    name = raw.decode("utf-8", "replace")
    if seg is None or first < parse_id_text(seg["first"]):
        raise ArchiveError(
            "stream %s holds %d entries at or below its archived-through ID %s (from %s) that are not "
            "those of its last archived run: was it deleted and made again?  Nothing was trimmed; archive it "
            "to another directory" % (name, n, id_text(through), id_text(first)))
    if seg.get("digest") is None:
        raise ArchiveError(
            "stream %s still holds %d entries at or below its archived-through ID %s, and the manifest (written "
            "by an older xs) cannot show they are the archived ones.  Nothing was trimmed; check them against the "
            "archive and remove them with XTRIM %s MINID %s" % (
                name, n, id_text(through), name, id_text(ids.incr(through)) if through < ids.MAX_ID else "+"))
    if n != seg["rows"] or digest != seg["digest"]:
        raise ArchiveError(
            "stream %s holds %d entries at or below its archived-through ID %s that are not exactly the %d its "
            "last archived run wrote (deleted since, or another store's stream of the same name?).  Nothing was "
            "trimmed; check them against the archive and remove them with XTRIM %s MINID %s" % (
                name, n, id_text(through), seg["rows"], name,
                id_text(ids.incr(through)) if through < ids.MAX_ID else "+"))
    return n


def trim_archived(store, manifest, names, drop_unacked=False):
    """One write transaction: remove from each stream of ``names`` (str)
    the entries at or below its archived-through ID.  A stream in which
    some consumer group has not acknowledged one of them (a group made
    or moved back since the run planned) is left whole, unless
    ``drop_unacked``: the entries are in the archive and the stream
    both, and a later run trims them once the group is done.  Returns
    ({name: removed}, {name: Hold of the archived entries left})."""
    todo = [(n, manifest["streams"][n]) for n in names if n in manifest["streams"]]

    def trim_all(tx):
        removed, held = {}, {}
        for name, rec in todo:
            raw = name.encode("utf-8")
            through = parse_id_text(rec["through"])
            n = _check_trimmable(tx, raw, through, rec.get("last_run"))
            if not n:
                continue
            if not drop_unacked:
                floor, groups = group_floor(tx, raw)
                if floor is not None and floor <= through:
                    hold = hold_of(tx, raw, floor, groups, through)
                    if hold is not None:
                        held[name] = hold
                        continue
            # the checked entries are exactly those the trim removes (the
            # same transaction; over the network, under WATCH: NetStore)
            if through >= ids.MAX_ID:
                tx.trim(raw, TrimOptions("maxlen", 0))
            else:
                tx.trim(raw, TrimOptions("minid", ids.incr(through)))
            removed[name] = n
        return removed, held
    return store.run(trim_all, write=True)


# ------------------------------------------------------- over the network

class NetStore:
    """The store of ``xs archive --url``: a server (``xs serve`` or
    Redis 7+) seen through the few transaction verbs a run uses (store_id,
    range, trim), over one connection (storage.spark.network).  A read
    "transaction" is a series of XRANGE pages (not one snapshot: planning
    and the digest read what each page finds).  A write transaction WATCHes
    every stream it reads before reading it and queues its trims, then
    sends them in one MULTI/EXEC: if another client changed a stream it
    checked, EXEC answers null and the whole function runs again, so a
    trim always removes exactly the entries its check saw."""

    TRIES = 20

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.conn = endpoint.connect()

    def close(self):
        self.conn.close()

    def run(self, fn, write=False):
        for _ in range(self.TRIES):
            tx = _NetTxn(self, write)
            try:
                result = fn(tx)
            except BaseException:
                if tx.watched:
                    self.conn.call("UNWATCH")
                raise
            if not tx.trims:
                if tx.watched:
                    self.conn.call("UNWATCH")
                return result
            got = self.conn.pipeline([("MULTI",)] + tx.trims + [("EXEC",)])
            if got[-1] is not None:
                return result
        raise ArchiveError("%s: the streams kept changing while their archived entries were checked (tried %d "
                           "times); nothing was trimmed, run it again" % (self.endpoint.name, self.TRIES))


def open_served(endpoint):
    """The NetStore of ``endpoint`` (a storage.spark.network.Endpoint),
    connected: what ``xs archive --url`` runs on."""
    return NetStore(endpoint)


class _NetTxn:
    """The verbs of a NetStore transaction (see NetStore)."""

    def __init__(self, store, write):
        self.conn = store.conn
        self.name = store.endpoint.name
        self.write = write
        self.watched = set()
        self.trims = []

    def store_id(self, create=False):
        """A server has no store identity over the protocol: the endpoint
        (its URL, no password) stands for it in the manifest."""
        return "url:" + self.name

    def range(self, raw, o):
        if self.write and raw not in self.watched:
            self.conn.call("WATCH", raw)
            self.watched.add(raw)
        return self.conn.call("XRANGE", raw, id_text(o.start), id_text(o.end), "COUNT", o.count, stream=raw)

    def groups_info(self, raw):
        """XINFO GROUPS: objects with the attributes the plan reads
        (name, pending, last_delivered_id); a missing stream raises
        RedisError, as the engine's verb does."""
        import redis
        got = self.conn.pipeline([("XINFO", "GROUPS", raw)], stream=raw, errors=True)[0]
        if isinstance(got, redis.ResponseError):
            if "no such key" in str(got).lower():
                raise RedisError("ERR no such key")
            raise self.conn.fail(got, raw)
        out = []
        for g in got:
            d = {bytes(g[i]).decode(): g[i + 1] for i in range(0, len(g) - 1, 2)}
            out.append(_NetGroup(bytes(d["name"]), int(d["pending"]), _id(d["last-delivered-id"])))
        return out

    def pending_summary(self, raw, group):
        """XPENDING key group: ``first`` the oldest pending ID or None."""
        got = self.conn.call("XPENDING", raw, group, stream=raw)
        return _NetPending(_id(got[1]) if got and got[0] and got[1] is not None else None)

    def pending_range(self, raw, group, o):
        """XPENDING key group start end count: rows with an ``id``."""
        got = self.conn.call("XPENDING", raw, group, id_text(o.start), id_text(o.end), o.count, stream=raw)
        return [_NetPending(_id(r[0])) for r in got]

    def trim(self, raw, o):
        assert self.write and raw in self.watched, "a trim checks its stream first"
        if o.strategy == "maxlen":
            self.trims.append(("XTRIM", raw, "MAXLEN", o.threshold))
        else:
            self.trims.append(("XTRIM", raw, "MINID", id_text(o.threshold)))


class _NetGroup:
    __slots__ = ("name", "pending", "last_delivered_id")

    def __init__(self, name, pending, last_delivered_id):
        self.name, self.pending, self.last_delivered_id = name, pending, last_delivered_id


class _NetPending:
    """A pending summary's ``first``, or a pending row's ``id``."""
    __slots__ = ("first", "id")

    def __init__(self, i):
        self.first = self.id = i


# ------------------------------------------------------------------ recovery

class Lock:
    """DIR/_xs_archive.lock, held (flock) while a run works on DIR: this
    user's own file, never a link (a link to another lock could
    deadlock what it points at)."""

    def __init__(self, adir):
        self.fd = adir.open_file(LOCK, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(self.fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise ArchiveError("another xs archive is working on %s" % adir.path)
            raise

    def release(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _do_moves(adir, moves, step):
    """Rename each staged file into place, with the run's file mode (a
    file already moved is skipped); fsync the directories written to.
    ``step``: the kill point after the first move.  Every path is
    relative to DIR (checked by check_manifest) and walked without
    following a link."""
    synced = set()
    for src, dst in moves:
        s, d = src.split("/"), dst.split("/")
        sfd = adir.open_dirs(s[:-1], create=False)
        try:
            st = adir.lstat(s[-1], sfd) if sfd is not None else None
            if st is not None:
                why = unsafe_reason(st, "file")
                if why:
                    adir._refuse(s, why)
                ffd = adir.open_file(s[-1], os.O_RDONLY, dir_fd=sfd, parts=tuple(s))
                try:
                    _fix_mode(ffd, adir.file_mode)      # a killed run's file: this run's mode
                finally:
                    os.close(ffd)
                dfds = [adir.open_dirs(d[:k], create=True, own=not adir.shared) for k in (1, 2)]
                try:
                    os.replace(s[-1], d[-1], src_dir_fd=sfd, dst_dir_fd=dfds[1])
                    if tuple(d[:-1]) not in synced:
                        synced.add(tuple(d[:-1]))
                        for fd in reversed(dfds):
                            os.fsync(fd)
                finally:
                    for fd in dfds:
                        os.close(fd)
                kill_point(step)
                continue
        finally:
            if sfd is not None:
                os.close(sfd)
        dfd = adir.open_dirs(d[:-1], create=False, own=not adir.shared)
        try:
            st = adir.lstat(d[-1], dfd) if dfd is not None else None
        finally:
            if dfd is not None:
                os.close(dfd)
        if st is None or unsafe_reason(st, "file", own=not adir.shared):
            raise ArchiveError("archive %s: %s is in neither staging nor place; the manifest's pending run cannot "
                               "be finished (was the directory changed by hand?)" % (adir.path, dst))
    os.fsync(adir.fd)


def apply_pending(manifest):
    """The pending run becomes the last archived one (in memory)."""
    pending = manifest.get("pending")
    if pending:
        for name, seg in pending["streams"].items():
            rec = manifest["streams"].setdefault(name, {"rows": 0})
            rec["through"] = seg["last"]
            rec["rows"] = rec.get("rows", 0) + seg["rows"]
            rec["last_run"] = seg
    manifest["pending"] = None


def _commit(adir, manifest):
    """Make the pending run the archived one (manifest written)."""
    apply_pending(manifest)
    save_manifest(adir, manifest)


def recover(adir, manifest):
    """Finish a pending run, then remove every staging directory.
    Returns the pending run's row count (0: there was none)."""
    pending = manifest.get("pending")
    rows = 0
    if pending:
        _do_moves(adir, pending["moves"], "recovering")
        rows = sum(s["rows"] for s in pending["streams"].values())
        _commit(adir, manifest)
    adir.remove_tree(STAGING)
    return rows


# ------------------------------------------------------------------ Spark

def open_log(adir):
    """DIR/_xs_archive.log for writing, emptied: this user's own file,
    opened without following a link and checked before it is truncated
    (never a path to something else, such as the store's data file)."""
    try:
        fd = adir.open_file(LOG, os.O_WRONLY | os.O_CREAT)
    except OSError as e:
        raise ArchiveError("cannot write Spark's log %s: %s" % (adir.label(LOG), e.strerror or e))
    os.ftruncate(fd, 0)
    return fd


class _StderrToLog:
    """Send file descriptor 2 to the open file ``fd`` while a JVM starts,
    so its log lines (and those of its Python workers, which inherit its
    stderr) go to the log, not to the user's terminal."""

    def __init__(self, fd):
        self.fd = fd

    def __enter__(self):
        self.saved = os.dup(2)
        os.dup2(self.fd, 2)

    def __exit__(self, *exc):
        os.dup2(self.saved, 2)
        os.close(self.saved)


def spark_session(master, log_fd, root=None):
    """A SparkSession for archiving (local[*] unless ``master``); the
    JVM's stderr goes to the open file ``log_fd``."""
    import sys
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if root is None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)
    old_umask = os.umask(0o077)     # the JVM and its workers make what they write private
    try:
        spark = _start_spark(master, log_fd)
    finally:
        os.umask(old_umask)
    from storage.spark.source import register
    register(spark)
    return spark


def _start_spark(master, log_fd):
    with _StderrToLog(log_fd):
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master(master or "local[*]").appName("xs archive")
                 .config("spark.ui.enabled", "false")
                 .config("spark.sql.session.timeZone", "UTC")
                 .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    return spark


def _watch(spark, report, stop):
    """Report (done, total) tasks of the running job until ``stop``."""
    tracker = spark.sparkContext.statusTracker()
    while not stop.wait(0.5):
        done = total = 0
        try:
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info:
                    done += info.numCompletedTasks
                    total += info.numTasks
        except Exception:       # the tracker is advisory: never fail the run for it
            continue
        if total:
            report(done, total)


def stage(spark, source, plans, out, fields_list=False, report=None, binary=False):
    """Write the planned entries as Parquet under ``out``, partitioned by
    stream and date (``binary``: values as binary, not strings);
    ``source``: the data source's options that name the store (``path``,
    or ``url`` and its credentials)."""
    from pyspark.sql import functions as F
    frames = []
    for p in plans:
        parts = max(1, min(64, -(-p.rows // ROWS_PER_PARTITION)))
        r = spark.read.format("xstream")
        for k, v in source.items():
            r = r.option(k, v)
        r = (r.option("stream", _glob_escape(p.name))
             .option("start", id_text(p.first)).option("end", id_text(p.last)).option("partitions", parts))
        if fields_list:
            r = r.option("fields_list", "true")
        if binary:
            r = r.option("binary", "true")
        df = r.load()
        if "url" in source:
            df = df.drop("source")          # the url mode's column: an archive has the path mode's columns
        frames.append(df)
    df = frames[0]
    for f in frames[1:]:
        df = df.unionByName(f)
    df = df.withColumn("date", F.date_format(F.col("ts"), "yyyy-MM-dd"))
    df = df.sortWithinPartitions("stream", "date", "ms", "seq")
    stop = threading.Event()
    watcher = None
    if report is not None:
        watcher = threading.Thread(target=_watch, args=(spark, report, stop), daemon=True)
        watcher.start()
    try:
        df.write.partitionBy("stream", "date").mode("errorifexists").parquet(out)
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()


def spark_reason(e):
    """One line saying why a Spark job failed (the data source's own
    ``xstream: ...`` message when there is one)."""
    text = str(e)
    for line in text.splitlines():
        i = line.find("xstream: ")
        if i >= 0:
            return line[i:].strip()
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    for l in lines:
        if "Exception:" in l or "Error:" in l:
            return l[:300]
    return (lines[0] if lines else type(e).__name__)[:300]


# ------------------------------------------------------------------ verification

def staged_files(adir, data):
    """[(relative path, stream name)] of the Parquet files Spark wrote in
    DIR/``data`` (components), walked without following links."""
    top = adir.open_dirs(data, create=False)
    if top is None:
        raise ArchiveError("the Spark job did not write %s" % adir.label(*data))
    found = []
    try:
        for d, _, files, _ in os.fwalk(".", dir_fd=top):
            for f in files:
                if f.endswith(".parquet") and not f.startswith("."):
                    rel = os.path.normpath(os.path.join(d, f))
                    first = rel.split("/")[0]
                    if not first.startswith("stream=") or len(rel.split("/")) != 3:
                        raise ArchiveError("unexpected file %s in the staged archive" % rel)
                    found.append((rel, urllib.parse.unquote(first[len("stream="):])))
    finally:
        os.close(top)
    return sorted(found)


def _read_staged_ids(adir, data, rel):
    """The ``id`` column of a staged file, opened without following a
    link; the file gets the run's file mode (private: 0600, unless
    --mode) and is fsynced on the way."""
    import pyarrow.parquet as pq
    parts = rel.split("/")
    dfd = adir.open_dirs(list(data) + parts[:-1], create=False)
    if dfd is None:
        raise ArchiveError("the staged file %s is gone" % adir.label(*data, rel))
    try:
        fd = adir.open_file(parts[-1], os.O_RDONLY, dir_fd=dfd, parts=tuple(data) + tuple(parts))
    finally:
        os.close(dfd)
    with os.fdopen(fd, "rb") as f:
        _fix_mode(fd, adir.file_mode)       # Spark wrote it under its own umask
        os.fsync(fd)
        return pq.read_table(f, columns=["id"]).column("id").to_pylist()


def verify(adir, data, plans):
    """Read the staged files' IDs back (DIR/``data``, components) and
    check them against the plan, one file at a time (memory: one file's
    IDs): within a file IDs must strictly increase (the job sorts them),
    a stream's files must not overlap, and per stream the row count and
    the first and last IDs must be the planned ones.  Every file gets
    the run's file mode and is fsynced.  Returns [(relative path,
    stream, first, last, rows)] per file."""
    top = adir.open_dirs(data, create=False)
    try:
        done = top is not None and adir.lstat("_SUCCESS", top) is not None
    finally:
        if top is not None:
            os.close(top)
    if not done:
        raise ArchiveError("the Spark job did not finish writing %s" % adir.label(*data))
    by_name = {p.name: p for p in plans}
    spans = {p.name: [] for p in plans}
    files = []
    for rel, name in staged_files(adir, data):
        if name not in by_name:
            raise ArchiveError("the staged archive holds a stream that was not planned: %r" % name)
        got = [parse_id_text(t) for t in _read_staged_ids(adir, data, rel)]
        if not got:
            continue
        if any(a >= b for a, b in zip(got, got[1:])):
            raise ArchiveError("verification failed: %s holds IDs out of order or twice.  Nothing was trimmed" % rel)
        files.append((rel, name, got[0], got[-1], len(got)))
        spans[name].append((got[0], got[-1], len(got)))
    for p in plans:
        s = sorted(spans[p.name])
        rows = sum(n for _, _, n in s)
        overlap = any(a[1] >= b[0] for a, b in zip(s, s[1:]))
        first = s[0][0] if s else None
        last = max(x[1] for x in s) if s else None
        if overlap or rows != p.rows or first != p.first or last != p.last:
            raise ArchiveError(
                "verification failed for stream %s: Parquet holds %d rows%s, %s..%s; the stream held %d, %s..%s "
                "(entries deleted while archiving?).  Nothing was trimmed" % (
                    p.name, rows, " in overlapping files" if overlap else "", first and id_text(first),
                    last and id_text(last), p.rows, id_text(p.first), id_text(p.last)))
    return files


def copy_in(sdir, sdata, adir, data, files):
    """Copy the verified files ``files`` ([(relative path, ...)]) from the
    private staging area ``sdir``/``sdata`` into DIR/``data``, through
    descriptors only: each directory made by this user and opened
    without following a link, each file made anew (O_EXCL) with the
    run's file mode, written, fsynced; then the directories.  Nothing
    reaches DIR by a path another user could redirect."""
    for rel, *_ in files:
        parts = rel.split("/")
        sfd = sdir.open_dirs(list(sdata) + parts[:-1], create=False)
        if sfd is None:
            raise ArchiveError("the staged file %s is gone" % sdir.label(*sdata, rel))
        try:
            src = sdir.open_file(parts[-1], os.O_RDONLY, dir_fd=sfd, parts=tuple(sdata) + tuple(parts))
        finally:
            os.close(sfd)
        try:
            dfd = adir.open_dirs(list(data) + parts[:-1], create=True, mode=0o700)
            try:
                dst = adir.open_file(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, dir_fd=dfd,
                                     parts=tuple(data) + tuple(parts))
                try:
                    while True:
                        chunk = os.read(src, 1 << 20)
                        if not chunk:
                            break
                        view = memoryview(chunk)
                        while view:
                            view = view[os.write(dst, view):]
                    os.fsync(dst)
                finally:
                    os.close(dst)
                os.fsync(dfd)
            finally:
                os.close(dfd)
        finally:
            os.close(src)
    for k in range(len(data), 0, -1):
        fd = adir.open_dirs(list(data[:k]), create=False)
        if fd is not None:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def final_path(rel, first, last):
    """stream=NAME/date=D/FIRST_LAST.parquet for a staged file."""
    parts = rel.split("/")
    return "/".join(parts[:-1] + ["%s_%s.parquet" % (id_text(first), id_text(last))])


# ------------------------------------------------------------------ a whole run

class Result:
    """What a run did."""

    def __init__(self):
        self.recovered = 0          # rows of a killed run committed by this one
        self.archived = {}          # name -> rows written by this run
        self.trimmed = {}           # name -> entries removed
        self.files = 0
        self.dates = []             # dates of the files written
        self.first_last = {}        # name -> (first, last) written
        self.plans = []             # StreamPlans (their ``hold``: what groups kept back, or took)
        self.untrimmed = {}         # name -> Hold: archived entries left in the stream for its groups


def archive(open_store, store_path, names, cut, directory, master=None, fields_list=False, progress=None,
            dry_run=False, shared=False, binary=False, mode=DEFAULT_MODE, drop_unacked=False):
    """Archive the entries of the streams ``names`` (bytes) below ``cut``
    ((ms, seq)) into ``directory``, then trim them (see the module's
    docstring).  ``open_store()`` opens the store for writing (or a
    NetStore; ``store_path`` is then the data source's url options, a
    dict);
    ``progress(step, done, total)`` is told what happens; ``shared``: DIR
    may belong to another user or be writable by others (ArchiveDir);
    ``binary``: values as binary (the only way to archive values that
    are not UTF-8); ``mode``: what the run makes in DIR gets it
    (directories) or it without x (files), exactly (see mode_problem;
    ValueError for a mode it refuses, before anything is touched);
    ``drop_unacked``: also archive and trim entries consumer groups have
    not acknowledged (by default a stream is archived only below the
    oldest entry any of its groups still needs: plan_streams).
    Returns a Result; raises ArchiveError."""
    check_mode(mode)
    say = progress or (lambda step, done=None, total=None: None)
    res = Result()
    adir = ArchiveDir(directory, shared, create=not dry_run, mode=mode)
    try:
        if dry_run:
            return _dry_run(adir, open_store, names, cut, res, drop_unacked)
        return _run(adir, open_store, store_path, names, cut, master, fields_list, progress, say, res, binary,
                    drop_unacked)
    finally:
        adir.close()


def _dry_run(adir, open_store, names, cut, res, drop_unacked=False):
    manifest = load_manifest(adir)
    apply_pending(manifest)         # a killed run's files are verified: a real run commits them first
    store = open_store()
    try:
        check_store(adir, manifest, store.run(lambda tx: tx.store_id()))
        res.plans = store.run(lambda tx: plan_streams(tx, names, cut, manifest, drop_unacked))
    finally:
        store.close()
    return res


def check_values(adir, manifest, binary):
    """A directory holds one kind of values (see the module docstring)."""
    want = "binary" if binary else "string"
    have = manifest.get("values")
    if have is not None and have != want:
        raise ArchiveError("%s holds %s values: archiving %s values into it would make files Spark cannot read "
                           "with one schema (%s, or archive into another directory)"
                           % (adir.path, have, want, "add --binary" if have == "binary" else "leave out --binary"))


def _not_utf8(reason, binary):
    """The data source's hint names its own option; a person running
    xs archive needs the option of xs archive."""
    if not binary and "(read it with option binary=true)" in reason:
        return reason.replace("(read it with option binary=true)",
                              "(archive it with xs archive --binary, into a new directory: values then "
                              "become binary columns, losslessly)")
    return reason


def _spark_job(adir, master, store_path, todo, out, fields_list, progress, say, binary):
    """Start Spark (its log: DIR/_xs_archive.log) and write the planned
    entries as Parquet under ``out``; ArchiveError when it fails."""
    say("starting Spark (%s)" % (master or "local[*]"))
    log_fd = open_log(adir)
    try:
        try:
            spark = spark_session(master, log_fd)
        except Exception as e:
            raise ArchiveError("Spark did not start: %s (its log: %s)" % (spark_reason(e), adir.label(LOG)))
        try:
            say("writing Parquet")
            try:
                source = store_path if isinstance(store_path, dict) else {"path": os.path.abspath(store_path)}
                stage(spark, source, todo, out, fields_list,
                      (lambda d, t: say("writing Parquet", d, t)) if progress else None, binary)
            except Exception as e:
                raise ArchiveError("the Spark job failed: %s (nothing was trimmed; Spark's log: %s)" % (
                    _not_utf8(spark_reason(e), binary), adir.label(LOG)))
        finally:
            try:
                spark.stop()
            except Exception:
                pass
    finally:
        os.close(log_fd)


def _run(adir, open_store, store_path, names, cut, master, fields_list, progress, say, res, binary=False,
         drop_unacked=False):
    if not adir.staging_is_safe():
        check_local(master)             # refused before anything is touched
    lock = Lock(adir)
    try:
        adir.sweep_temporaries()
        manifest = load_manifest(adir)
        check_values(adir, manifest, binary)
        adir.check_entry(LOG, "file")       # refused now, before the store is touched
        adir.check_entry(STAGING, "dir")
        str_names = [n.decode("utf-8", "replace") for n in names]
        store = open_store()
        try:
            store_id = store.run(lambda tx: tx.store_id(create=True), write=True)
            check_store(adir, manifest, store_id)
            manifest["store"] = store_id
            res.recovered = recover(adir, manifest)
            say("trimming what an earlier run archived")
            res.trimmed, res.untrimmed = trim_archived(store, manifest, str_names, drop_unacked)
            say("planning")
            plans = store.run(lambda tx: plan_streams(tx, names, cut, manifest, drop_unacked))
        finally:
            store.close()
        res.plans = plans
        todo = [p for p in plans if p.rows]
        kill_point("planned")
        if not todo:
            return res
        run = "%s-%d-%s" % (time.strftime("%Y%m%dT%H%M%S", time.gmtime()), os.getpid(), uuid.uuid4().hex[:8])
        os.close(adir.open_dirs([STAGING, run], create=True, mode=0o700))     # private while it lives
        data = (STAGING, run, "data")
        # Spark writes by path.  Into DIR/_staging only when nobody else
        # can rename entries in DIR; else into a private directory of
        # this user's, from which verified files are copied into DIR
        # through descriptors (copy_in).
        private = None if adir.staging_is_safe() else private_staging(master)
        try:
            sdir, sdata = (adir, data) if private is None else (ArchiveDir(private, create=False), ("data",))
            try:
                out = os.path.join(sdir.abspath, *sdata)
                _spark_job(adir, master, store_path, todo, out, fields_list, progress, say, binary)
                kill_point("staged")
                say("verifying")
                files = verify(sdir, sdata, todo)
                if private is not None:
                    say("copying %d files into %s" % (len(files), adir.path))
                    copy_in(sdir, sdata, adir, data, files)
            finally:
                if sdir is not adir:
                    sdir.close()
        finally:
            if private is not None:
                shutil.rmtree(private, ignore_errors=True)
        kill_point("verified")
        moves = [("/".join(data + (rel,)), final_path(rel, first, last)) for rel, _, first, last, _ in files]
        manifest["values"] = "binary" if binary else "string"
        manifest["pending"] = {"run": run, "moves": moves, "streams": {
            p.name: {"first": id_text(p.first), "last": id_text(p.last), "rows": p.rows, "digest": p.digest}
            for p in todo}}
        save_manifest(adir, manifest)
        kill_point("pending")
        say("moving %d files into place" % len(moves))
        _do_moves(adir, moves, "moving")
        kill_point("moved")
        _commit(adir, manifest)
        kill_point("committed")
        say("trimming")
        store = open_store()
        try:
            trimmed, held = trim_archived(store, manifest, [p.name for p in todo], drop_unacked)
            res.untrimmed.update(held)      # (a stream held at step 3 planned nothing: not among these)
            for name, n in trimmed.items():
                res.trimmed[name] = res.trimmed.get(name, 0) + n
        finally:
            store.close()
        kill_point("trimmed")
        adir.remove_tree(STAGING)
        res.archived = {p.name: p.rows for p in todo}
        res.first_last = {p.name: (p.first, p.last) for p in todo}
        res.files = len(files)
        res.dates = sorted({rel.split("/")[1][len("date="):] for rel, _, _, _, _ in files})
        return res
    finally:
        lock.release()
