"""Continuous replication to a directory (``xs replicate --to DIR``;
issue 41).  No click, no rich.  The directory's layout is
storage.ops.replica_dir's (docs/replication.md); the restore from it,
storage.ops.replica_restore's.

Segments are appended and fsync'd as records are read from the store,
within a second of their commits; the replica's position is
acknowledged to the store (storage.changelog.ack, which trims the log
behind it) only after that sync.  So a replicator killed
at any moment resumes at the last whole frame of its last segment (a
torn frame is cut off): the store still holds every record after it.
"""
import fcntl
import os
import time
from typing import Any, Dict

from storage import changelog
from storage.codec import changes
from storage.ops.replica_dir import (
    Generation,
    ReplicaError,
    _listdir,
    _private_dir,
    _read_file,
    _read_json,
    _rmtree,
    _write_json,
    generations,
)
from storage.ops.replica_restore import build, catalog, restore_at

# the restore's names too: xs restore --from imports them from here
__all__ = ["ACK_S", "BATCH_BYTES", "SEGMENT_BYTES", "ReplicaError", "Replicator", "build", "catalog", "forget",
           "restore_at", "status"]

SEGMENT_BYTES = 64 << 20        # a segment file is closed past this size
ACK_S = 1.0                     # the position is acknowledged to the store at most this often
BATCH_BYTES = 8 << 20           # records read from the store per round


# ========================================================== replicator

class Replicator:
    """``xs replicate --to DIR``: ``run()`` until interrupted.  ``say(line)``
    is told one line per generation (and why a new one was taken)."""

    def __init__(self, store, path, retention_ms=None, base_interval_ms=3600_000, bound=None,
                 segment_bytes=SEGMENT_BYTES, say=None):
        self.store, self.path = store, path
        self.retention_ms, self.base_interval_ms = retention_ms, base_interval_ms
        self.bound, self.segment_bytes = bound, segment_bytes
        self.say = say or (lambda line: None)
        self.dfd = _private_dir(path, True)
        self.lock_fd = None
        self.seg_fd = None
        self.seg_size = 0
        self.gen: Any = None
        self.pos = 0
        self.acked = None
        self.acked_at = 0.0
        self.last_time = None     # the commit time of ``pos`` when it came from a segment

    # ------------------------------------------------------------ set-up

    def _lock(self):
        fd = os.open("lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.dfd)
        os.fchmod(fd, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ReplicaError("another xs replicate is writing to %s" % self.path)
        self.lock_fd = fd

    def _identity(self):
        doc = _read_json(self.dfd, "replica.json")
        if doc is None:
            names = [n for n in _listdir(self.dfd, ".") if n not in ("lock", "replica.json.tmp")]
            if names:
                raise ReplicaError("%s is not a replica directory (it holds %s)" % (self.path, names[0]))
            doc = {"version": 1, "id": os.urandom(8).hex(), "store": os.path.abspath(self.store.path)}
            _write_json(self.dfd, "replica.json", doc)
        return str(doc["id"])

    def _sweep(self):
        """Remove what a killed run left half made: gen-N.tmp directories."""
        for name in _listdir(self.dfd, "."):
            if name.endswith(".tmp") and name.startswith("gen-"):
                _rmtree(self.dfd, name)

    def open(self):
        self._lock()
        self._sweep()
        self.rid = self._identity()
        gens = generations(self.dfd)
        st, _ = changelog.enable(self.store, self.rid, self.bound)
        if not gens:
            return self._new_generation(1, "first base")
        g = gens[-1]
        self.gen = g
        self.pos = self._resume(g)
        self._check(st)

    def _resume(self, g):
        """The last commit the generation holds, its torn tail cut off;
        the last segment opened for appending."""
        pos = g.seq
        if g.segments:
            first, name = g.segments[-1]
            rel = g.name + "/" + name
            buf = _read_file(self.dfd, rel)
            end = 0
            for seq, t, _, e in changes.frames(buf):
                pos, end, self.last_time = seq, e, t
            if end == 0 and len(g.segments) > 1:
                pos = max(pos, first - 1)
            fd = os.open(rel, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dfd)
            if end != len(buf):
                os.ftruncate(fd, end)
                os.fsync(fd)
            os.lseek(fd, end, os.SEEK_SET)
            self.seg_fd, self.seg_size = fd, end
        return pos

    def _check(self, st):
        """A new generation when the store's log no longer continues ours:
        another log, another generation, or records we need dropped.
        True if one was taken."""
        g = self.gen.doc
        if st is None or st.get("log") != g.get("log") or st.get("gen", 0) != g.get("gen", 0):
            self._new_generation(self.gen.n + 1, "the store's change log was restarted")
        elif self.pos > st.get("seq", 0):
            self._new_generation(self.gen.n + 1, "the store is behind the replica (restored?)")
        elif self.pos + 1 < st.get("first", 1):
            self._new_generation(
                self.gen.n + 1, "fell behind: commits %d..%d were dropped from the store's log (past its "
                "backlog size), re-syncing from a full copy" % (self.pos + 1, st.get("first", 1) - 1))
        else:
            return False
        return True

    # -------------------------------------------------------- generations

    def _new_generation(self, n, why):
        """Take a base (a compacting copy of data.mdb) into gen-N; the
        generation before it is first completed up to the base's commit
        when the store's log still continues it (``follows``)."""
        t0 = time.monotonic()
        changelog.enable(self.store, self.rid, self.bound)
        name = "gen-%08d" % n
        tmp = name + ".tmp"
        _rmtree(self.dfd, tmp)
        os.mkdir(tmp, 0o700, dir_fd=self.dfd)
        gfd = os.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dfd)
        try:
            os.fchmod(gfd, 0o700)
            taken = int(time.time() * 1000)
            fd = os.open("base.mdb", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=gfd)
            try:
                os.fchmod(fd, 0o600)
                self.store.env.copyfd(fd, compact=True)
                os.fsync(fd)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            st = changelog.state_of_copy("/proc/self/fd/%d/base.mdb" % gfd)
            if st is None:
                raise ReplicaError("the store stopped logging while its base was copied (another "
                                   "xs replicate --forget?)")
            seq = st["seq"]
            follows = self._complete(st, seq)
            when = self._commit_time(seq, taken)
            doc = {"log": st["log"], "gen": st.get("gen", 0), "seq": seq, "time": taken, "commit_time": when,
                   "follows": follows}
            _write_json(gfd, "gen.json", doc)
        finally:
            os.close(gfd)
        self._close_segment()
        os.rename(tmp, name, src_dir_fd=self.dfd, dst_dir_fd=self.dfd)
        os.fsync(self.dfd)
        self.gen = Generation(self.dfd, name, n)
        self.pos = seq
        changelog.ack(self.store, self.rid, self.pos)
        self.acked, self.acked_at = self.pos, time.monotonic()
        self.say("generation %d: base at commit %d (%s bytes) in %.2f s; %s"
                 % (n, self.pos, format(size, ","), time.monotonic() - t0, why))
        self._prune()

    def _complete(self, st, upto):
        """Append to the current generation the records up to ``upto``
        (the next base's commit), if the store still has all of them:
        then the generations follow each other without a gap."""
        g = self.gen
        if g is None or g.doc.get("log") != st.get("log") or g.doc.get("gen", 0) != st.get("gen", 0):
            return False
        while self.pos < upto:
            _, recs = changelog.records(self.store, self.pos, BATCH_BYTES)
            recs = [r for r in recs if r[0] <= upto]
            if not recs or recs[0][0] != self.pos + 1:
                return False
            self._append(recs)
        return self.pos == upto

    def _commit_time(self, seq, taken):
        """The commit time of ``seq`` (the base's): from the segment just
        written, else the store's record, else when the copy began."""
        if seq == 0:
            return taken          # the state before the log began: known from the copy on
        if self.gen is not None and self.pos == seq and self.last_time is not None:
            return self.last_time
        _, recs = changelog.records(self.store, seq - 1, 1)
        if recs and recs[0][0] == seq:
            return recs[0][1]
        return taken

    def _prune(self):
        """Remove the generations --retention no longer needs: those
        before the newest one whose base is older than the window."""
        if self.retention_ms is None:
            return
        gens = generations(self.dfd)
        edge = int(time.time() * 1000) - self.retention_ms
        keep_from = 0
        for i, g in enumerate(gens):
            if int(g.doc.get("time", 0)) <= edge:
                keep_from = i
        for g in gens[:keep_from]:
            if g.n != self.gen.n:
                _rmtree(self.dfd, g.name)
                self.say("generation %d pruned (older than --retention)" % g.n)
        os.fsync(self.dfd)

    # ------------------------------------------------------------ segments

    def _close_segment(self):
        if self.seg_fd is not None:
            os.close(self.seg_fd)
        self.seg_fd, self.seg_size = None, 0

    def _append(self, recs):
        """Write records (after ``pos``, in order) to the segment, synced."""
        if self.seg_fd is None or self.seg_size >= self.segment_bytes:
            self._close_segment()
            gfd = os.open(self.gen.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=self.dfd)
            try:
                name = "seg-%020d.log" % recs[0][0]
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                             dir_fd=gfd)
                os.fchmod(fd, 0o600)
                os.fsync(gfd)
            finally:
                os.close(gfd)
            self.gen.segments.append((recs[0][0], name))
            self.seg_fd, self.seg_size = fd, 0
        data = b"".join(changes.frame(seq, t, rec) for seq, t, rec in recs)
        view = memoryview(data)
        while view:
            n = os.write(self.seg_fd, view)
            view = view[n:]
        os.fdatasync(self.seg_fd)
        self.seg_size += len(data)
        self.pos, self.last_time = recs[-1][0], recs[-1][1]

    # ---------------------------------------------------------------- run

    def round(self):
        """Copy what the store has after ``pos``; True if there was more
        than one batch (call again at once)."""
        st, recs = changelog.records(self.store, self.pos, BATCH_BYTES)
        if self._check(st):
            return True
        if recs and recs[0][0] != self.pos + 1:
            self._new_generation(self.gen.n + 1, "fell behind: commits %d..%d were dropped from the store's log "
                                 "(past its backlog size), re-syncing from a full copy" % (self.pos + 1,
                                                                                            recs[0][0] - 1))
            return True
        if recs:
            self._append(recs)
        now = time.monotonic()
        if self.acked != self.pos and now - self.acked_at >= ACK_S:
            changelog.ack(self.store, self.rid, self.pos)
            self.acked, self.acked_at = self.pos, now
        if self.pos != self.gen.seq and \
                int(time.time() * 1000) - int(self.gen.doc.get("time", 0)) >= self.base_interval_ms:
            self._new_generation(self.gen.n + 1, "--base-interval")
        return sum(len(r[2]) for r in recs) >= BATCH_BYTES

    def _due(self):
        """Seconds until the next thing to do without a commit."""
        left = self.base_interval_ms / 1000.0 - (time.time() - int(self.gen.doc.get("time", 0)) / 1000.0)
        if self.pos == self.gen.seq:
            left = 1.0            # no commit since the base: no new base is due
        if self.acked != self.pos:
            left = min(left, ACK_S - (time.monotonic() - self.acked_at))
        return max(0.01, min(left, 1.0))

    def run(self, cancel=None):
        """Replicate until interrupted (KeyboardInterrupt, or ``cancel``)."""
        from storage.blocking import Cancelled, wait_until
        self.open()
        try:
            while True:
                if self.round():
                    continue

                def attempt(woken):
                    st, recs = changelog.records(self.store, self.pos, 1)
                    return True if (recs or st is None) else None
                try:
                    wait_until(self.store, [changelog.WAKE_KEY], attempt, timeout_s=self._due(), cancel=cancel)
                except Cancelled:
                    return
        finally:
            self.close()

    def close(self):
        self._close_segment()
        for fd in (self.lock_fd, self.dfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.lock_fd = self.dfd = None


def forget(store, path):
    """``xs replicate --forget --to DIR``: unregister DIR's replica from
    the store (the store stops logging when no replica is left)."""
    dfd = _private_dir(path, False)
    try:
        doc = _read_json(dfd, "replica.json")
    finally:
        os.close(dfd)
    if doc is None:
        raise ReplicaError("%s is not a replica directory" % path)
    return changelog.disable(store, str(doc["id"]))


# ============================================================= status

def status(store, path=None):
    """What ``xs replicate --status`` shows: the store's log and, for
    each registered replica (or DIR's), its position and lag."""
    now = int(time.time() * 1000)
    st = changelog.state(store)
    reps = changelog.replicas(store) if st is not None else {}
    out: Dict[str, Any] = {"logging": st is not None, "seq": st["seq"] if st else None,
           "log_bytes": st.get("bytes", 0) if st else 0, "replicas": []}
    target = None
    if path is not None:
        dfd = _private_dir(path, False)
        try:
            doc = _read_json(dfd, "replica.json") or {}
            target = str(doc.get("id"))
            gens = generations(dfd)
            last = None
            for g in gens[-1:]:
                last = (g.seq, int(g.doc.get("time", 0)))
                for seq, t, _ in g.frames(dfd):
                    last = (seq, t)
            seg_time = None
            if gens:
                g = gens[-1]
                names = [g.name + "/" + f for _, f in g.segments] or [g.name + "/gen.json"]
                seg_time = int(os.stat(names[-1], dir_fd=dfd).st_mtime * 1000)
            out["dir"] = {"path": path, "generations": len(gens), "last_commit": last[0] if last else None,
                          "last_commit_time": last[1] if last else None, "last_segment_time": seg_time,
                          "id": target}
            if st is not None and last is not None:
                behind = max(0, st["seq"] - last[0]) if gens and gens[-1].doc.get("log") == st.get("log") else None
                first = changelog.first_time_after(store, last[0]) if behind else None
                out["dir"]["lag_commits"] = behind
                out["dir"]["lag_seconds"] = 0.0 if not behind else (
                    max(0.0, (now - first) / 1000.0) if first is not None else None)
        finally:
            os.close(dfd)
    for rid, (pos, at) in sorted(reps.items()):
        behind = max(0, st["seq"] - pos)
        first = changelog.first_time_after(store, pos) if behind else None
        out["replicas"].append({"id": rid, "position": pos, "acked_at": at, "lag_commits": behind,
                                "lag_seconds": 0.0 if not behind else
                                (max(0.0, (now - first) / 1000.0) if first is not None else None)})
    return out
