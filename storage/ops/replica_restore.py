"""Point-in-time restore from a replica directory (``xs restore --from
DIR``, issue 41).  No click, no rich.

Restoring at a commit: the newest generation whose base is at or before
it, its base copied to a private temporary store, the records up to it
replayed (storage.changelog.apply), then the result loaded into the
target store in one transaction through the snapshot load path
(storage.ops.snapshot), with its settings.
"""
import os
import shutil
import tempfile
import time
from typing import List

from storage import changelog
from storage.codec import changes
from storage.ops.replica_dir import ReplicaError, _private_dir, generations


def catalog(path):
    """The range a replica directory can restore: one dict per
    generation {n, first_seq, first_time, last_seq, last_time}."""
    dfd = _private_dir(path, False)
    try:
        out = []
        for g in generations(dfd):
            first = (g.seq, int(g.doc.get("commit_time", g.doc.get("time", 0))))
            last = first
            for seq, t, _ in g.frames(dfd):
                last = (seq, t)
            out.append({"generation": g.n, "first_seq": first[0], "first_time": first[1],
                        "last_seq": last[0], "last_time": last[1], "follows": bool(g.doc.get("follows"))})
        return out
    finally:
        os.close(dfd)


def _pick(dfd, at_ms, at_seq):
    """(generation, the commit to restore) for --at / --at-id / latest."""
    gens = generations(dfd)
    if not gens:
        raise ReplicaError("the replica directory holds no generation yet")
    spans = []            # (generation, [(seq, time)] it can restore, base first)
    for g in gens:
        pts = [(g.seq, int(g.doc.get("commit_time", g.doc.get("time", 0))))]
        pts += [(seq, t) for seq, t, _ in g.frames(dfd) if seq > g.seq]
        spans.append((g, pts))
    if at_seq is None and at_ms is None:
        g, pts = spans[-1]
        return g, pts[-1][0]
    if at_seq is None:
        known = {}
        for _, pts in spans:
            for seq, t in pts:
                known[seq] = t
        below = [seq for seq, t in known.items() if t <= at_ms]
        if not below:
            raise ReplicaError("nothing to restore at that time: the replica starts later (%s)" % catalog_text(dfd))
        at_seq = max(below)
        if at_seq != max(known) and at_seq + 1 not in known:
            raise ReplicaError("that time falls in a gap of the replica (after commit %d, commits it never got: "
                               "it fell behind and took a full copy); restorable: %s" % (at_seq, catalog_text(dfd)))
    for g, pts in reversed(spans):
        if pts[0][0] <= at_seq <= pts[-1][0]:
            return g, at_seq
    raise ReplicaError("commit %d is not in the replica (%s)" % (at_seq, catalog_text(dfd)))


def catalog_text(dfd):
    gens = generations(dfd)
    parts = []
    for g in gens:
        last = g.seq
        for seq, _, _ in g.frames(dfd):
            last = seq
        parts.append("commits %d..%d" % (g.seq, last))
    return "; ".join(parts) or "empty"


def build(path, work, at_ms=None, at_seq=None):
    """Make the store as it was at the chosen commit in the private
    directory ``work`` (a new store: its base copied, the records
    replayed).  Returns (the store, the commit, its time)."""
    from storage.parts.kv import KV
    from storage.store import Store
    dfd = _private_dir(path, False)
    try:
        g, upto = _pick(dfd, at_ms, at_seq)
        os.makedirs(work, 0o700, exist_ok=True)
        src = os.open(g.name + "/base.mdb", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
        dst = os.open(os.path.join(work, "data.mdb"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            while os.sendfile(dst, src, None, 1 << 24) > 0:
                pass
        finally:
            os.close(src)
            os.close(dst)
        store = Store(work, durable=False)
        t_at = int(g.doc.get("time", 0))
        batch: List[bytes] = []

        def flush():
            lt = store.env.begin(write=True)
            try:
                kv = KV(lt, store.dbs)
                for rec in batch:
                    changelog.apply(kv, changes.decode_record(rec)[1])
                lt.commit()
            except BaseException:
                lt.abort()
                raise
            batch.clear()
        size = 0
        for seq, t, payload in g.frames(dfd, upto):
            if seq <= g.seq:
                continue
            batch.append(payload)
            size += len(payload)
            t_at = t
            if size > 64 << 20:
                flush()
                size = 0
        flush()
        lt = store.env.begin(write=True)
        try:
            changelog.forget_log(lt, store.dbs, store.env)
            lt.commit()
        except BaseException:
            lt.abort()
            raise
        return store, upto, t_at
    finally:
        os.close(dfd)


def restore_at(store, path, at_ms=None, at_seq=None, replace=False, progress=None):
    """Restore ``store`` to the commit of replica directory ``path`` at
    ``at_ms`` (the last commit at or before it), ``at_seq``, or the
    latest: in one write transaction, every stream of the store replaced
    by the restored ones (``replace``; without it the store must hold no
    stream).  Returns (Stats, commit, its time)."""
    from storage.ops.snapshot import SnapshotError, load_records, records, save
    work = tempfile.mkdtemp(prefix="xs-pitr-")
    try:
        os.chmod(work, 0o700)
        img, seq, t = build(path, os.path.join(work, "store"), at_ms, at_seq)
        snap = os.path.join(work, "snap")
        try:
            with open(snap, "wb") as f:
                save(img, f)
            settings = img.run(lambda tx: tx.settings())
        finally:
            img.close()

        def apply(tx):
            names = tx.stream_names()
            if names and not replace:
                raise ReplicaError("the store holds %d stream%s: restore into a new store, or give --replace "
                                   "(every stream is then replaced by the restored ones)"
                                   % (len(names), "" if len(names) == 1 else "s"))
            if names:
                tx.delete_keys(names)
            with open(snap, "rb") as f:
                st = tx.load(load_records(records(f)), False)
            tx.configure(settings)
            return st
        t0 = time.monotonic()
        try:
            st = store.run(apply, write=True)
        except SnapshotError as e:
            raise ReplicaError("cannot apply the restored store: %s" % e)
        st.seconds = time.monotonic() - t0
        st.bytes = os.path.getsize(snap)
        return st, seq, t
    finally:
        shutil.rmtree(work, ignore_errors=True)
