"""xs archive's careful directory work: DIR opened once and every entry
in it reached from that descriptor without following a link
(ArchiveDir), the modes of what a run makes, the lock, the moves into
place, and the private staging directory a run uses when another user
can rename entries in DIR (private_staging, copy_in)."""
import errno
import fcntl
import os
import shutil
import stat

from storage.files import unsafe_reason
from storage.spark.archive.common import DEFAULT_MODE, LOCK, MANIFEST, SHARED_HINT, ArchiveError, kill_point

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


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

    def open_staged(self, data, rel):
        """The staged file ``rel`` (a path below DIR/``data``, components)
        opened for reading, every component reached without following a
        link; ArchiveError when it is gone."""
        parts = rel.split("/")
        dfd = self.open_dirs(list(data) + parts[:-1], create=False)
        if dfd is None:
            raise ArchiveError("the staged file %s is gone" % self.label(*data, rel))
        try:
            return self.open_file(parts[-1], os.O_RDONLY, dir_fd=dfd, parts=tuple(data) + tuple(parts))
        finally:
            os.close(dfd)

    def open_dirs(self, parts, create, own=True, mode=None):
        """The directory DIR/parts..., each component opened without
        following a link (made if missing and ``create``: with ``mode``,
        exactly, or ``dir_mode``) and checked to be a directory (``own``:
        of this user's); the caller closes the descriptor.  None when
        missing and not ``create``."""
        mode = self.dir_mode if mode is None else mode
        assert self.fd is not None, "DIR is open (it exists)"
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


def copy_in(sdir, sdata, adir, data, files):
    """Copy the verified files ``files`` ([(relative path, ...)]) from the
    private staging area ``sdir``/``sdata`` into DIR/``data``, through
    descriptors only: each directory made by this user and opened
    without following a link, each file made anew (O_EXCL) with the
    run's file mode, written, fsynced; then the directories.  Nothing
    reaches DIR by a path another user could redirect."""
    for rel, *_ in files:
        parts = rel.split("/")
        src = sdir.open_staged(sdata, rel)
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
