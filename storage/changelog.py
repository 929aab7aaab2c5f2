"""The change log (issue 41): every write transaction of a store that has
replicas also records what it changed, in the same LMDB transaction.

What is logged.  A *physical* redo log: every write the engine makes
goes through storage.parts.kv.KV, which appends it to the transaction's
``ops`` (storage.codec.changes: put, delete, bulk put, range deletes;
the node index's final values at commit: see Cost);
at commit the ops become one record of the ``changelog`` database,
under the next commit sequence number, with the commit time in ms.
Replayed in order on the store as it was before a commit, a record gives
the store as it was after it: entries, nodes, groups, consumers, the PEL
with its delivery times and counts, IDMP history, TTLs, settings --
every byte the engine keeps.  Every path that writes (the CLI, script
mode, xs serve, the in-process client, workers, import, trim, archive)
goes through KV, so every path is logged alike.  (It is not Redis's
command stream: a live Redis replica needs that; see docs/replication.md.)

When.  Only while the store's ``meta`` holds the log's state
(``changelog``), which ``enable`` writes when a replica registers and
``disable`` removes when the last one goes.  ``Store.run`` reads that key
at the start of each write transaction (one get: the cost of a store
without replicas) and, when it is there, hands the verbs a ``Logged``
transaction.  So a process that opened the store before a replica
registered logs from its next write transaction on.

Savepoints.  A nested transaction (``Logged.child``, a ``Savepoint``)
logs into the same list of ops; an aborted one cuts the list back to
where it began, so its ops go with it, as its writes do.

Cost (issue 41: with the log on, ingest and xs serve lose at most 10%).
Ops name their database by its handle, named once when the record is
encoded; the node index (``LATE``), rewritten by every XADD and read by
no consumer of the log, is logged once per commit, as the final value
of each node written, at the end of the record.  The keys of the
databases in ``MERGED`` that a commit writes more than once (a group
commit of XADDs rewrites the stream's record and its counter in
``meta`` each time) are logged once, with the last op's value, in the
place of the first (``merge``); records of a few KB (group commits of
single commands) are compressed (storage.codec.changes).  A bulk put's
pairs are packed when KV logs them (storage.codec.changes.pack_pairs):
ten thousand (key, value) tuples kept until the commit were walked by
every pass of the cyclic collector meanwhile.

Kept while needed.  Each registered replica has its position in
``meta`` (``changelog.replica.<id>``); ``ack`` moves it and deletes the
records every replica has.  Past ``bound`` bytes kept, the writer drops
the oldest records at commit (a replica that fell that far behind takes
a full copy again: storage.ops.replicate says so in its log).

Generations.  Whole-store changes that do not go through KV (a format
upgrade, storage.migrate) bump ``gen``: a replica then starts again
from a full copy rather than apply a log that no longer matches its
base.  Compaction copies every database as it is (the log included), so
it needs none.
"""
import os
import time

import lmdb

from storage import codec

if False:  # typing only
    from typing import Any, Dict
from storage.codec import changes

DEFAULT_BOUND = 256 << 20          # bytes of records kept for a replica that fell behind (repl-backlog-size)
WAKE_KEY = b"\x00xs:changelog"     # the notification file a logged commit touches (storage.blocking)


# the database logged at commit, as the final value of each key written
# (storage.parts.kv): the node index, whose record of a stream's last node
# every XADD rewrites, and which no reader of the log needs write by write
LATE = b"nodes"

# the databases whose point writes (PUT, DEL) a record holds once per key
# (``merge``): those the Redis translator (storage.ops.replica_redis)
# reads as a table where the last op of a key wins (keys, groups,
# consumers, pel) or does not read (meta, cpel, ptime).  Not ``log``,
# ``shapes``, ``cnames``, ``idmp``: the translator follows their ops one
# by one (an entry added then deleted, an IDMP record made).
MERGED = (b"keys", b"meta", b"groups", b"consumers", b"pel", b"cpel", b"ptime")


class Logged:
    """A write transaction whose writes are logged: the py-lmdb
    transaction (``raw``, which KV uses) and the record being made
    (``ops``, ``late_db``, ``late``: see storage.parts.kv); ``log`` is
    itself, as for its savepoints.  It writes the record at ``commit``."""

    __slots__ = ("raw", "ops", "late_db", "late", "store", "state")

    def __init__(self, store, raw, state):
        self.raw = raw
        self.store = store
        self.state = state
        self.ops = []
        self.late_db = store.dbs[LATE]
        self.late = set()

    @property
    def log(self):
        # a property, not an attribute: a transaction that held itself
        # would live until the cyclic garbage collector found it, and its
        # ops with it (a collection every few group commits)
        return self

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def child(self):
        """A nested transaction (a savepoint) that logs into this one."""
        return Savepoint(self.store.env.begin(write=True, parent=self.raw), self)

    def abort(self):
        self.raw.abort()

    def commit(self):
        raw = self.raw
        ops = self.ops
        if self.late:
            ops.extend(_final(raw, self.late_db, self.late))
        if not ops:
            raw.commit()
            return
        store = self.store
        st = self.state
        dbs = store.dbs
        names = {h: n for n, h in dbs.items()}
        ops = merge(ops, [dbs[n] for n in MERGED if n in dbs])
        rec = changes.encode_record(int(time.time() * 1000), ops, names)
        seq = st["seq"] = st.get("seq", 0) + 1
        st["bytes"] = st.get("bytes", 0) + len(rec)
        db = _log_db(store, raw)
        raw.put(changes.seq_key(seq), rec, db=db, append=True)
        if st["bytes"] > st.get("bound", DEFAULT_BOUND):
            _drop_oldest(raw, db, st)
        raw.put(changes.META_CHANGELOG, changes.encode_log_state(st), db=store.dbs[b"meta"])
        raw.commit()
        store.dbs[changes.CHANGELOG_DB] = db     # valid now that its transaction committed
        from storage.blocking import notify
        notify(store, (WAKE_KEY,))


class Savepoint:
    """A nested transaction of a Logged one: its writes go to the same
    ``ops``; if it aborts, they are cut back to where it began
    (``mark``).  The keys it added to ``late`` stay: that costs at most
    a redundant op (their values are read at commit).  ``commit`` is the
    py-lmdb transaction's own."""

    __slots__ = ("raw", "log", "mark", "commit")

    def __init__(self, raw, log):
        self.raw = raw
        self.log = log
        self.mark = len(log.ops)
        self.commit = raw.commit

    def __getattr__(self, name):
        return getattr(self.raw, name)

    def child(self):
        return Savepoint(self.log.store.env.begin(write=True, parent=self.raw), self.log)

    def abort(self):
        del self.log.ops[self.mark:]
        self.raw.abort()


def _final(lt, db, keys):
    """The ops that give the keys ``keys`` of database ``db`` their value
    in ``lt``: PUT, or DEL if absent; in key order.  Many are read in
    one call (a cursor's getmulti: half the time of a get each, for the
    hundred nodes of a bulk ingest's commit)."""
    keys = sorted(keys)
    put = changes.OP_PUT
    if len(keys) < 8:                           # a group commit's one or two: a get each
        get = lt.get
        out = []
        for k in keys:
            v = get(k, db=db)
            out.append((put, db, k, v) if v is not None else (changes.OP_DEL, db, k))
        return out
    found = lt.cursor(db=db).getmulti(keys)     # the keys present, in order
    if len(found) == len(keys):
        return [(put, db, k, v) for k, v in found]
    have = dict(found)
    return [(put, db, k, have[k]) if k in have else (changes.OP_DEL, db, k) for k in keys]


def merge(ops, dbs):
    """``ops`` with the point writes (PUT, DEL) of each key of the
    databases ``dbs`` that follow its first one (and no range or bulk op
    of its database in between) taken out, the first one becoming the
    last one.  Replayed, they give the same store: ops of other keys do
    not touch that key, and the ops of its database that could (a range
    delete, a bulk put) start a new run.  A reader that keeps the last
    op of each key in a table built in order of first appearance (the
    Redis translator) builds the same table."""
    runs: "Dict[Any, Dict[bytes, int]]" = {d: {} for d in dbs}     # database -> {key: its op's place in out}
    if not runs:
        return ops
    run_of = runs.get
    point = changes.OP_DEL          # PUT and DEL: the codes up to it
    out: list = []
    append = out.append
    try:
        for op in ops:
            run = run_of(op[1])
            if run is None:
                append(op)
            elif op[0] <= point:
                k = op[2]
                at = run.get(k)
                if at is None:
                    run[k] = len(out)
                    append(op)
                else:
                    out[at] = op
            else:
                runs[op[1]] = {}
                append(op)
    except TypeError:              # a key that is not hashable (a buffer): logged as it came
        return ops
    return out


def logged(store, lt, raw_state):
    """``lt`` (a write transaction of ``store``) as a Logged one, the log's
    state being ``raw_state`` (meta ``changelog``, read in ``lt``)."""
    return Logged(store, lt, changes.decode_log_state(raw_state))


def _log_db(store, lt):
    """The changelog database's handle: the one kept in ``store.dbs``
    once a transaction that opened it committed, else opened in ``lt``
    (an aborted transaction would close it again)."""
    db = store.dbs.get(changes.CHANGELOG_DB)
    if db is None:
        db = store.env.open_db(changes.CHANGELOG_DB, txn=lt, create=True)
    return db


def _drop_oldest(lt, db, st):
    """Delete the oldest records until the log is within its bound."""
    bound = st.get("bound", DEFAULT_BOUND)
    c = lt.cursor(db=db)
    if not c.first():
        st["bytes"] = 0
        return
    while st["bytes"] > bound and c.key():
        st["bytes"] -= len(c.value())
        if changes.seq_of(c.key()) >= st["seq"]:     # never the record just written
            break
        c.delete()
    st["first"] = changes.seq_of(c.key()) if c.key() else st["seq"] + 1


# ====================================================== the log's owners

def _handle(store):
    """The changelog database's handle for reading (None if the store
    has none): opened once, outside any transaction."""
    db = store.dbs.get(changes.CHANGELOG_DB)
    if db is None:
        try:
            db = store.dbs[changes.CHANGELOG_DB] = store.env.open_db(changes.CHANGELOG_DB, create=False)
        except lmdb.NotFoundError:
            return None
    return db


def state(store):
    """The log's state (a dict: seq, first, bytes, bound, gen, log), or
    None when the store logs nothing.  A read transaction of its own."""
    with store.env.begin() as t:
        raw = t.get(changes.META_CHANGELOG, db=store.dbs[b"meta"])
    return None if raw is None else changes.decode_log_state(raw)


def _write(store, fn):
    """``fn(lt)`` in a write transaction of ``store`` that is not logged
    (the log's own bookkeeping), committed; map growth handled.  Under
    xs's write lock, as every write (storage.store.hold_write)."""
    from storage.files import hold_write, release_write
    hold_write(store)
    try:
        return _write_held(store, fn)
    finally:
        release_write(store)


def _write_held(store, fn):
    while True:
        lt = store.env.begin(write=True)
        try:
            r = fn(lt)
            lt.commit()
        except lmdb.MapFullError:
            lt.abort()
            store.env.set_mapsize(store.env.info()["map_size"] * 2)
            continue
        except lmdb.MapResizedError:
            lt.abort()
            store.env.set_mapsize(0)
            continue
        except BaseException:
            lt.abort()
            raise
        _handle(store)
        return r


def enable(store, rid, bound=None):
    """Register replica ``rid`` (text) and make the store log its changes
    (if it did not already).  Returns (state, the replica's position:
    the last sequence number it has, or None if it is new)."""
    def fn(lt):
        meta = store.dbs[b"meta"]
        raw = lt.get(changes.META_CHANGELOG, db=meta)
        st: "Dict[str, Any]"
        if raw is None:
            st = {"seq": 0, "first": 1, "bytes": 0, "bound": DEFAULT_BOUND, "gen": 0,
                  "log": os.urandom(8).hex()}
        else:
            st = changes.decode_log_state(raw)
        if bound is not None:
            st["bound"] = bound
        store.env.open_db(changes.CHANGELOG_DB, txn=lt, create=True)
        lt.put(changes.META_CHANGELOG, changes.encode_log_state(st), db=meta)
        pos = lt.get(changes.replica_key(rid), db=meta)
        if pos is None:       # registered: the records after the log's last commit are kept for it
            lt.put(changes.replica_key(rid), b"%d %d" % (st["seq"], int(time.time() * 1000)), db=meta)
        return st, None if pos is None else int(pos.split()[0])
    return _write(store, fn)


def disable(store, rid):
    """Forget replica ``rid``; when no replica is left, stop logging and
    empty the log.  True if it was registered."""
    def fn(lt):
        meta = store.dbs[b"meta"]
        had = lt.delete(changes.replica_key(rid), db=meta)
        if not _replicas(lt, meta):
            lt.delete(changes.META_CHANGELOG, db=meta)
            try:
                db = store.env.open_db(changes.CHANGELOG_DB, txn=lt, create=False)
            except lmdb.NotFoundError:
                return had
            lt.drop(db, delete=False)
        return had
    return _write(store, fn)


def _replicas(lt, meta):
    """{replica id: (position, time of the ack in ms)} registered in meta."""
    out = {}
    c = lt.cursor(db=meta)
    p = changes.REPLICA_PREFIX
    if c.set_range(p):
        for k, v in c.iternext():
            if not k.startswith(p):
                break
            a, b = v.split()
            out[changes.replica_id(k)] = (int(a), int(b))
    return out


def replicas(store):
    with store.env.begin() as t:
        return _replicas(t, store.dbs[b"meta"])


def ack(store, rid, seq):
    """Replica ``rid`` holds every record up to ``seq`` (durably): record
    it, and delete the records every replica holds."""
    def fn(lt):
        meta = store.dbs[b"meta"]
        raw = lt.get(changes.META_CHANGELOG, db=meta)
        if raw is None:
            return
        lt.put(changes.replica_key(rid), b"%d %d" % (seq, int(time.time() * 1000)), db=meta)
        st = changes.decode_log_state(raw)
        low = min(p for p, _ in _replicas(lt, meta).values())
        db = _log_db(store, lt)
        c = lt.cursor(db=db)
        freed = 0
        if c.first():
            while c.key() and changes.seq_of(c.key()) <= low:
                freed += len(c.value())
                c.delete()
        if freed:
            st["bytes"] = max(0, st.get("bytes", 0) - freed)
            st["first"] = max(st.get("first", 1), low + 1)
            lt.put(changes.META_CHANGELOG, changes.encode_log_state(st), db=meta)
    _write(store, fn)


def bump_generation(lt, meta):
    """In a write transaction ``lt`` that changed the store other than
    through KV (a format upgrade): if the store logs, a new generation
    (replicas take a full copy again)."""
    raw = lt.get(changes.META_CHANGELOG, db=meta)
    if raw is not None:
        st = changes.decode_log_state(raw)
        st["gen"] = st.get("gen", 0) + 1
        lt.put(changes.META_CHANGELOG, changes.encode_log_state(st), db=meta)


def records(store, after, limit_bytes=8 << 20):
    """(state, [(seq, time_ms, record bytes)]) of the records after
    ``after``, up to about ``limit_bytes``, read in one read transaction;
    state None when the store logs nothing.  The first record returned is
    ``after + 1`` unless it was dropped (then a replica must take a full
    copy)."""
    db = _handle(store)
    with store.env.begin() as t:
        raw = t.get(changes.META_CHANGELOG, db=store.dbs[b"meta"])
        if raw is None:
            return None, []
        st = changes.decode_log_state(raw)
        if db is None:
            return st, []
        out = []
        size = 0
        c = t.cursor(db=db)
        if c.set_range(changes.seq_key(after + 1)):
            for k, v in c.iternext():
                out.append((changes.seq_of(k), changes.record_time(v), bytes(v)))
                size += len(v)
                if size >= limit_bytes:
                    break
        return st, out


def first_time_after(store, seq):
    """The commit time (ms) of the oldest record after ``seq`` the store
    still keeps, or None (replication lag in seconds)."""
    db = _handle(store)
    with store.env.begin() as t:
        if db is None:
            return None
        c = t.cursor(db=db)
        if c.set_range(changes.seq_key(seq + 1)):
            return changes.record_time(c.value())
    return None


# ============================================================ replaying

def apply(kv, ops):
    """Replay the ops of one record with ``kv`` (storage.parts.kv.KV over a
    write transaction of a copy of the store as it was before it)."""
    db = kv.db
    for op in ops:
        code = op[0]
        d = db(op[1])
        if code == changes.OP_PUT:
            kv.put(d, op[2], op[3])
        elif code == changes.OP_DEL:
            kv.delete(d, op[2])
        elif code == changes.OP_MULTI:
            kv.putmulti(d, list(op[2]))
        elif code == changes.OP_BELOW:
            kv.delete_below(d, op[2], op[3])
        elif code == changes.OP_FIRST:
            kv.delete_first(d, op[2], op[3])
        else:
            raise ValueError("unknown change-log op %r" % (code,))


def forget_log(lt, dbs, env):
    """In a restored copy: remove the log, its state and the replicas'
    positions (a restored store logs nothing)."""
    meta = dbs[b"meta"]
    for rid in list(_replicas(lt, meta)):
        lt.delete(changes.replica_key(rid), db=meta)
    lt.delete(changes.META_CHANGELOG, db=meta)
    try:
        db = env.open_db(changes.CHANGELOG_DB, txn=lt, create=False)
    except lmdb.NotFoundError:
        return
    lt.drop(db, delete=True)


def state_of_copy(path):
    """The log's state in a copy of data.mdb at ``path`` (a base
    snapshot), or None."""
    env = lmdb.open(path, subdir=False, readonly=True, lock=False, max_dbs=len(codec.DATABASES) + 2)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as t:
            raw = t.get(changes.META_CHANGELOG, db=meta)
        return None if raw is None else changes.decode_log_state(raw)
    finally:
        env.close()
