"""Temporary files and atomic writes: ``AtomicFile`` /
``write_atomically``, the one way xs replaces a file (snapshots, RDB
files, xs export -o, xs metrics --outfile, the archive's manifest), and
``temp_file`` / ``sweep_temp``, the temporary files it writes through
and the sweeping of those a killed run left behind.  Not the store's
own files (storage.files, storage.opening): these are the user's files,
beside the path they replace.  Their names are storage.files' too
(``files.write_atomically``), loaded only when asked for, so the
one-shot path never imports this module.
"""
import os
import stat
import time

if False:  # typing only (not imported at run time)
    from typing import Any

STALE_TEMP_S = 3600      # a temporary file untouched this long is left over


def temp_file(d, prefix, suffix):
    """``tempfile.mkstemp`` in the directory ``d``, named
    ``<prefix><pid>-<random><suffix>`` (O_EXCL, 0600), after removing
    the left-overs of killed runs (``sweep_temp``).  Returns (fd, path)."""
    import tempfile  # (not at import: it imports random and re, off the one-shot path)
    sweep_temp(d, prefix, suffix)
    return tempfile.mkstemp(prefix="%s%d-" % (prefix, os.getpid()), suffix=suffix, dir=d)


def sweep_temp(d, prefix, suffix, now=None):
    """Remove from ``d`` the temporary files of xs runs that were killed
    (``xs save FILE``, ``xs restore -``, ``xs export -o FILE``): only
    names xs itself makes (``temp_file``, or ``<prefix><8 random><suffix>``
    from an older xs), only regular files of this user, never through a
    link, and only if the process named in the file name is gone or the
    file has not been written to for STALE_TEMP_S seconds.  Best
    effort: returns the names removed."""
    import re
    import stat
    pat = re.compile(re.escape(prefix) + r"(?:([0-9]{1,10})-)?[a-z0-9_]{8}" + re.escape(suffix) + r"\Z")
    removed: list = []
    try:
        dfd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return removed
    try:
        now = time.time() if now is None else now
        euid = os.geteuid()
        for name in os.listdir(dfd):
            m = pat.match(name)
            if m is None:
                continue
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_uid != euid:
                continue
            stale = now - st.st_mtime > STALE_TEMP_S
            if not stale and m.group(1) is not None:
                stale = _gone(int(m.group(1)))
            if stale:
                try:
                    os.unlink(name, dir_fd=dfd)
                    removed.append(name)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        os.close(dfd)
    return removed


def _gone(pid):
    """Whether no process ``pid`` exists (ours is never gone)."""
    if pid == os.getpid() or not 0 < pid < (1 << 31):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


class AtomicFile:
    """``with AtomicFile(path) as f``: a file that becomes ``path`` when
    the block ends without an exception, atomically, and never existed
    otherwise -- the one way xs replaces a file (snapshots, RDB files,
    xs export -o, the archive's manifest).  It is written through a
    temporary file of an unpredictable name made exclusively in
    ``path``'s directory (``temp_file``: O_EXCL, 0600, so no link planted
    there is followed and two writers never share one), flushed, given
    its mode, fsynced, renamed over ``path``, and the directory fsynced;
    on any failure the temporary file is removed and ``path`` is as it
    was.

    ``mode``: an int (exactly that), None (as made: 0600, or what
    ``make_temp`` gave it) or "inherit" (the mode of the file it
    replaces, else 0666 less the umask, as ``> path`` would); ``text``:
    a UTF-8 text file with "\n" newlines; ``dir_fd``: ``path`` is a
    name in that open directory, reached through it; ``make_temp``: a
    callable giving (fd, temporary name) instead of ``temp_file`` (the
    archive's, which checks what it opens)."""

    def __init__(self, path, mode=None, text=False, dir_fd=None, make_temp=None):
        self.path, self.mode, self.text, self.dir_fd = path, mode, text, dir_fd
        self.make_temp = make_temp
        self.tmp: "Any" = None       # the temporary file's name while it exists
        self.file: "Any" = None      # its file object while open

    def __enter__(self):
        if self.make_temp is not None:
            fd, self.tmp = self.make_temp()
        else:
            d, base = os.path.split(os.path.abspath(self.path))
            fd, self.tmp = temp_file(d, ".%s." % base, ".tmp")
        try:
            self.file = os.fdopen(fd, "w", encoding="utf-8", newline="\n") if self.text else os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            self._discard()
            raise
        return self.file

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self._discard()
            return False
        try:
            f = self.file
            f.flush()
            mode = self._mode()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
            f.close()
            if self.dir_fd is None:
                os.replace(self.tmp, self.path)
            else:
                os.replace(self.tmp, self.path, src_dir_fd=self.dir_fd, dst_dir_fd=self.dir_fd)
            self.tmp = None
            self._fsync_dir()
        except BaseException:
            self._discard()
            raise
        return False

    def _mode(self):
        if self.mode != "inherit":
            return self.mode
        try:
            st = os.stat(self.path, dir_fd=self.dir_fd)
            if stat.S_ISREG(st.st_mode):
                return stat.S_IMODE(st.st_mode) & 0o777
        except OSError:
            pass
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask

    def _fsync_dir(self):
        if self.dir_fd is not None:
            os.fsync(self.dir_fd)
            return
        try:
            dfd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)

    def _discard(self):
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
        if self.tmp is not None:
            try:
                os.unlink(self.tmp, dir_fd=self.dir_fd)
            except OSError:
                pass
            self.tmp = None


def write_atomically(path, write, **options):
    """``write(f)`` into an AtomicFile of ``path`` (``options``: its
    mode, text, dir_fd, make_temp); ``write``'s result."""
    with AtomicFile(path, **options) as f:
        return write(f)
