"""The replica directory of ``xs replicate --to DIR`` (issue 41): its
layout, made private, and read back.  No click, no rich.  The layout
of DIR is described in docs/replication.md:

    DIR/lock                       flock'd by the one live replicator
    DIR/replica.json               {"version": 1, "id": ...}: the replica's
                                   registration in the store
    DIR/gen-00000001/gen.json      {"log", "gen", "seq", "time", ...}
    DIR/gen-00000001/base.mdb      a compacting copy of data.mdb as of
                                   commit ``seq``
    DIR/gen-00000001/seg-<first seq, 20 digits>.log
                                   the change log's records after it, as
                                   frames (storage.codec.changes)
    DIR/gen-00000002/...           the next generation (a newer base)

A generation is made under ``gen-N.tmp`` and renamed into place once
its base and gen.json are written and synced, so a generation is there
whole or not at all (storage.ops.replicate writes it;
storage.ops.replica_restore reads it).
"""
import json
import os
import re
import shutil
import stat

from storage.codec import changes

_GEN = re.compile(r"gen-(\d{8})\Z")
_SEG = re.compile(r"seg-(\d{20})\.log\Z")


class ReplicaError(Exception):
    """A one-line reason (exit 1)."""


def _private_dir(path, create):
    """Check (or make) the replica directory: a directory of this user's
    that nobody else may read.  Returns its descriptor."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise ReplicaError("%s: no such replica directory" % path)
        try:
            os.mkdir(path, 0o700)
        except OSError as e:
            raise ReplicaError("cannot make %s: %s" % (path, e.strerror or e))
        os.chmod(path, 0o700)
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise ReplicaError("%s is not a directory" % path)
    if st.st_uid != os.geteuid():
        raise ReplicaError("%s belongs to another user" % path)
    if st.st_mode & 0o077:
        raise ReplicaError("%s may be read or written by others (mode %o): a replica holds the whole store; "
                           "chmod 700 it first" % (path, stat.S_IMODE(st.st_mode)))
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _write_json(dfd, name, doc):
    tmp = name + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps(doc, sort_keys=True).encode() + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    os.fsync(dfd)


def _read_json(dfd, name):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        try:
            doc = json.loads(f.read(1 << 20))
        except ValueError:
            return None
    return doc if isinstance(doc, dict) else None


def _rmtree(dfd, name):
    try:
        shutil.rmtree(name, dir_fd=dfd)
    except FileNotFoundError:
        pass


class Generation:
    """One generation of a replica directory: ``n``, its gen.json
    (``doc``: log, gen, seq, time, commit_time) and its segments
    [(first seq, name)]."""

    def __init__(self, dfd, name, n):
        self.name, self.n = name, n
        self.doc = _read_json_at(dfd, name, "gen.json") or {}
        self.segments = sorted((int(m.group(1)), f) for f in _listdir(dfd, name) if (m := _SEG.match(f)))

    @property
    def seq(self):
        return int(self.doc.get("seq", 0))

    def frames(self, dfd, upto=None):
        """(seq, time_ms, payload) of every whole frame of its segments."""
        for _, f in self.segments:
            buf = _read_file(dfd, self.name + "/" + f)
            for seq, t, payload, _ in changes.frames(buf):
                if upto is not None and seq > upto:
                    return
                yield seq, t, payload


def _listdir(dfd, name):
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return []
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


def _read_json_at(dfd, sub, name):
    try:
        fd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return None
    try:
        return _read_json(fd, name)
    finally:
        os.close(fd)


def _read_file(dfd, rel):
    fd = os.open(rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def generations(dfd):
    """The whole generations of the directory, oldest first."""
    out = []
    for name in _listdir(dfd, "."):
        m = _GEN.match(name)
        if m:
            g = Generation(dfd, name, int(m.group(1)))
            if g.doc and os.path.exists("/proc/self/fd/%d/%s/base.mdb" % (dfd, name)):
                out.append(g)
    return sorted(out, key=lambda g: g.n)
