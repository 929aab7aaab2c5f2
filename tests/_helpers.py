"""Helpers for the storage-level tests: run Redis commands through the
command parsers on a fixture store, read the raw LMDB databases, and
check that the three PEL indexes agree."""
from storage import codec
from storage.errors import RedisError
from xstream_cli.commands import lookup
from xstream_cli.output.render import to_jsonable


def _b(a):
    if isinstance(a, bytes):
        return a
    return str(a).encode()


def cmd(store, *args):
    """Run one command in its own transaction (as single-command mode
    does: an error aborts it); reply in JSON shape, errors as
    {"error": text}."""
    argv = [_b(a) for a in args]
    try:
        c = lookup(argv)
        parsed = c.parse(argv)

        def run(tx):
            a = c.prepare(tx, *parsed) if c.prepare is not None else parsed
            return c.run(tx, *a)
        r = store.run(run, write=True)
    except RedisError as e:
        r = e
    return to_jsonable(r)


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


def rows(store, dbname, prefix=b""):
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
    with store.env.begin() as t:
        raw = t.get(codec.name_key(name), db=store.dbs[b"keys"])
    return None if raw is None else codec.StreamMeta.decode(raw)


def group_meta(store, name, group):
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


def stderr_on_pty(argv, stdin=None, timeout=60, columns=120, capture_stdout=False):
    """Run ``argv`` (from the repository root) with stderr on a
    pseudo-terminal, as a person at a terminal who pipes stdout away;
    returns (status, what the terminal showed, stdout text or None)."""
    import os
    import pty
    import select
    import subprocess
    import time
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(columns))
    env.pop("XS_NO_PROGRESS", None)
    p = subprocess.Popen(argv, cwd=root, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    shown = []
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:          # EIO: the terminal's last user is gone
                    break
                if not data:
                    break
                shown.append(data)
            elif p.poll() is not None:
                break
        status = p.wait(timeout=max(1, end - time.monotonic()))
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    out = p.stdout.read().decode() if capture_stdout else None
    return status, b"".join(shown).decode("utf-8", "replace"), out
