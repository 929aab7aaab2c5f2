"""Stores for the engine tier (and any tier that looks inside a store):
open one, run a verb on it as the library does, dump its databases for
"nothing changed" checks, read raw rows and records, check that the
three PEL indexes agree, set the engine's clock, and read an ID
whatever shape a verb gives it in."""
from storage import codec
from storage.errors import RedisError


def open_store(db):
    """A ``storage.store.Store`` on the directory ``db``."""
    from storage.store import Store
    return Store(str(db))


def write(store, verb):
    """``verb(tx)`` in a write transaction of its own (``Store.run``: an
    exception aborts it); its result."""
    return store.run(verb, write=True)


def read(store, verb):
    """``verb(tx)`` in a read transaction of its own; its result."""
    return store.run(verb)


def attempt(store, verb):
    """``write``, a RedisError returned instead of raised (it changed
    nothing): as a command's error reply."""
    try:
        return store.run(verb, write=True)
    except RedisError as e:
        return e


def add(store, name, id, fields):
    """Txn.add of ``fields`` under the explicit ``id`` (ms, seq), in a
    write transaction of its own: the ID."""
    from storage.options import AddOptions
    return store.run(lambda tx: tx.add(name, fields, AddOptions(id=id)), write=True)


def dump(store):
    """Every database's (key, value) pairs, for "nothing changed" checks
    (the change counters in meta are left out)."""
    out = {}
    with store.env.begin() as t:
        for name in codec.DATABASES:
            rows = list(t.cursor(db=store.dbs[name]))
            if name == b"meta":
                rows = [(k, v) for k, v in rows if not k.startswith(b"v")]
            out[name] = rows
    return out


def full_dump(store, lt=None):
    """Every database's rows, change counters included (``lt``: read in
    that LMDB transaction instead of a new one)."""
    def read(t):
        return {name: list(t.cursor(db=store.dbs[name])) for name in codec.DATABASES}
    if lt is not None:
        return read(lt)
    with store.env.begin() as t:
        return read(t)


def rows(store, dbname, prefix=b""):
    """The (key, value) pairs of database ``dbname`` whose keys start
    with ``prefix``."""
    with store.env.begin() as t:
        c = t.cursor(db=store.dbs[dbname])
        out = []
        if c.set_range(prefix):
            for k, v in c:
                if not k.startswith(prefix):
                    break
                out.append((k, v))
        return out


def stream_meta(store, name):
    """The stream record of ``name`` (codec.StreamMeta), or None."""
    with store.env.begin() as t:
        raw = t.get(codec.name_key(name), db=store.dbs[b"keys"])
    return None if raw is None else codec.StreamMeta.decode(raw)


def group_meta(store, name, group):
    """The group record (codec.GroupMeta) of ``group`` of stream ``name``, or None."""
    m = stream_meta(store, name)
    with store.env.begin() as t:
        raw = t.get(codec.group_key(m.sid, group), db=store.dbs[b"groups"])
    return None if raw is None else codec.GroupMeta.decode(raw)


def consumers(store, gid):
    """name -> ConsumerMeta for a group (name records only)."""
    out = {}
    for k, v in rows(store, b"consumers", codec.gid_prefix(gid)):
        if k[8:9] == b"\x02":
            continue
        c = codec.ConsumerMeta.decode(v)
        out[c.name] = c
    return out


def pel_view(store, name, group):
    """{id: (consumer name or b"", delivery count)} from the pel database."""
    g = group_meta(store, name, group)
    cs = {c.cid: n for n, c in consumers(store, g.gid).items()}
    out = {}
    for k, v in rows(store, b"pel", codec.gid_prefix(g.gid)):
        cid, t, cnt = codec.decode_pending(v)
        out[codec.id_from_pel_key(k)] = (cs.get(cid, b"") if cid else b"", cnt)
    return out


def check_pel_indexes(store):
    """Assert that pel, cpel and ptime agree exactly, for every group of
    every stream, and that pel counters in group and consumer records
    match.  Returns the number of PEL entries seen."""
    total = 0
    with store.env.begin() as t:
        dbs = store.dbs
        pel = [(k, codec.decode_pending(v)) for k, v in t.cursor(db=dbs[b"pel"])]
        cpel = set(k for k, _ in t.cursor(db=dbs[b"cpel"]))
        ptime = set(k for k, _ in t.cursor(db=dbs[b"ptime"]))
        groups = [codec.GroupMeta.decode(v) for _, v in t.cursor(db=dbs[b"groups"])]
        cons = {}
        for k, v in t.cursor(db=dbs[b"consumers"]):
            if k[8:9] == b"\x02":
                continue
            gid = codec.U64.unpack_from(k)[0]
            c = codec.ConsumerMeta.decode(v)
            cons[(gid, c.cid)] = c
    want_cpel = set()
    want_ptime = set()
    per_group = {}
    per_consumer = {}
    for k, (cid, tkey, cnt) in pel:
        gid = codec.U64.unpack_from(k)[0]
        i = codec.id_from_pel_key(k)
        want_ptime.add(codec.ptime_key(gid, tkey, i))
        if cid:
            want_cpel.add(codec.cpel_key(gid, cid, i))
            assert (gid, cid) in cons, "PEL entry %r of group %d owned by unknown consumer %d" % (i, gid, cid)
            per_consumer[(gid, cid)] = per_consumer.get((gid, cid), 0) + 1
        per_group[gid] = per_group.get(gid, 0) + 1
        assert cnt >= 0
        total += 1
    assert cpel == want_cpel, "cpel differs from pel: extra %r missing %r" % (cpel - want_cpel, want_cpel - cpel)
    assert ptime == want_ptime, "ptime differs from pel: extra %r missing %r" % (
        ptime - want_ptime, want_ptime - ptime)
    for g in groups:
        assert g.pel_count == per_group.get(g.gid, 0), "group %r pel_count %d, PEL holds %d" % (
            g.name, g.pel_count, per_group.get(g.gid, 0))
    for (gid, cid), c in cons.items():
        assert c.pel_count == per_consumer.get((gid, cid), 0), "consumer %r pel_count %d, cpel holds %d" % (
            c.name, c.pel_count, per_consumer.get((gid, cid), 0))
    # no PEL rows for groups that no longer exist
    live = {g.gid for g in groups}
    assert set(per_group) <= live
    return total


class Clock:
    """A settable wall clock for Txn.now (milliseconds)."""

    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t

    def advance(self, ms):
        self.t += ms


def frozen_clock(monkeypatch, t):
    """Txn.now stands at ``t`` (ms) until the test moves it: the Clock."""
    from storage.txn import Txn
    c = Clock(t)
    monkeypatch.setattr(Txn, "now", staticmethod(c))
    return c


def id_text(i):
    """An entry ID as ``"ms-seq"`` text, whether a verb gave it as an
    ``(ms, seq)`` tuple or as text (bytes or str): the engine's results
    are moving from text IDs to tuples (issue 39), and a test asserts
    through this instead of on either shape."""
    if isinstance(i, tuple):
        return "%d-%d" % i
    if isinstance(i, bytes):
        return i.decode()
    if isinstance(i, str):
        return i
    raise TypeError("not an entry ID: %r" % (i,))


def entries_text(entries):
    """The entries a range or a read gives, as ``[[id text, fields]]``
    whatever shape their IDs come in (id_text)."""
    return [[id_text(e[0]), e[1]] for e in entries]


def id_pair(i):
    """An entry ID as an ``(ms, seq)`` tuple, whatever shape it came in (id_text)."""
    ms, seq = id_text(i).split("-")
    return int(ms), int(seq)
