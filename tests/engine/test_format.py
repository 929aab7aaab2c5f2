"""The store format can evolve: a store written by an older xs is
upgraded once, on open, under the write lock, and reads back exactly as
before; a newer one is refused with a clear message.

tests/fixtures/format1.data.mdb.gz was written by the xs of commit
d86fcd4 (format 1) with tests/fixtures/make_format1.py, which also
recorded what that xs answered about it (format1.expected.json).
"""
import gzip
import json
import os
import sys

import pytest

from storage import codec
from tests.conftest import ROOT, run_xs

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
EXPECTED = json.load(open(os.path.join(FIXTURES, "format1.expected.json")))
XS = [sys.executable, "-m", "xstream_cli"]


def format1_store(tmp_path):
    """A fresh copy of the format-1 fixture store."""
    d = tmp_path / "format1"
    d.mkdir()
    with open(os.path.join(FIXTURES, "format1.data.mdb.gz"), "rb") as f:
        (d / "data.mdb").write_bytes(gzip.decompress(f.read()))
    return d


def stored_format(db):
    import lmdb
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2, readonly=True, lock=False)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as t:
            return int(t.get(codec.META_FORMAT, db=meta))
    finally:
        env.close()


def replies(db, lines):
    """The JSON replies, with {"b64": ...} turned back into the surrogate
    escapes xs --json wrote when the expected replies were recorded."""
    p = run_xs(db, lines)
    return [_as_recorded(json.loads(l)) for l in p.stdout.decode("utf-8", "surrogateescape").splitlines()]


def _as_recorded(v):
    import base64
    if isinstance(v, dict) and set(v) == {"b64"}:
        return base64.b64decode(v["b64"]).decode("utf-8", "surrogateescape")
    if isinstance(v, list):
        return [_as_recorded(x) for x in v]
    if isinstance(v, dict):
        return {k: _as_recorded(x) for k, x in v.items()}
    return v


CLOCKED = ("pids-tracked", "iids-tracked")   # IDMP history left out of XINFO's counts once it expired


def same(cmd, got, want):
    """Equal, but for what a newer xs may add or what depends on the
    clock: the idle column of XPENDING's extended form, and XINFO
    STREAM's IDMP fields (Redis 8.6 shows them for every stream; the
    tracked counts leave out history that expired since the recording)."""
    if cmd.startswith("XPENDING") and len(cmd.split()) > 3:
        return [r[:2] + r[3:] for r in got] == [r[:2] + r[3:] for r in want]
    if cmd.startswith("XINFO STREAM") and isinstance(got, dict) and isinstance(want, dict):
        extra = set(got) - set(want)
        return all(got.get(k) == v for k, v in want.items() if k not in CLOCKED) and \
            all(0 <= got.get(k, 0) <= v for k, v in want.items() if k in CLOCKED) and \
            all(k.startswith(("idmp-", "pids-", "iids-")) for k in extra)
    return got == want


def test_a_format_1_store_opens_upgraded_and_reads_back_identically(tmp_path):
    db = format1_store(tmp_path)
    assert stored_format(db) == 1
    got = replies(db, EXPECTED["script"])
    assert stored_format(db) == codec.FORMAT_VERSION
    assert len(got) == len(EXPECTED["replies"])
    for cmd, g, w in zip(EXPECTED["script"], got, EXPECTED["replies"]):
        assert same(cmd, g, w), (cmd, g, w)


def test_an_upgraded_store_takes_writes(tmp_path):
    db = format1_store(tmp_path)
    r = replies(db, ["XADD plain * new 1", "XLEN plain",
                     "XREADGROUP GROUP workers w4 COUNT 10 STREAMS jobs >",
                     "XACK jobs workers 6-0 2-0",
                     "XCLAIM jobs workers w4 0 5-0 JUSTID",
                     "XPENDING jobs workers - + 10",
                     "XGROUP CREATECONSUMER jobs workers w9",
                     "XGROUP DELCONSUMER jobs workers w1",
                     "XINFO CONSUMERS jobs workers",
                     "XDEL jobs 1-0", "XADD jobs MAXLEN 2 * job g", "XLEN jobs"])
    assert isinstance(r[0], str) and r[1] == 6
    assert r[2] == {"jobs": [["6-0", ["job", "f"]]]}
    assert r[3] == 2
    assert r[4] == ["5-0"]
    assert [(row[0], row[1]) for row in r[5]] == [("3-0", ""), ("4-0", ""), ("5-0", "w4")]
    assert r[6] == 1 and r[7] == 0
    assert [c["name"] for c in r[8]] == ["idle-one", "w2", "w3", "w4", "w9"]
    assert r[9] == 1 and r[11] == 2


def test_idmp_history_survives_the_upgrade(tmp_path, monkeypatch):
    """A duplicate is still recognised (with the clock of the fixture)."""
    from storage.store import Store
    from storage.txn import Txn
    from tests._helpers import cmd
    db = format1_store(tmp_path)
    setup = dict(zip(EXPECTED["setup"], EXPECTED["setup-replies"]))
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: EXPECTED["made-ms"] + 1000))
    store = Store(str(db))
    try:
        assert cmd(store, "XADD", "idem", "IDMP", "p1", "i3", "*", "n", "again") == \
            setup["XADD idem IDMP p1 i3 * n 3"]
        assert cmd(store, "XADD", "idem", "IDMPAUTO", "p2", "*", "b", "2", "a", "1") == \
            setup["XADD idem IDMPAUTO p2 * a 1 b 2"]
        big = [c for c in EXPECTED["setup"] if c.startswith("XADD idem IDMP p3")][0]
        assert cmd(store, *big.replace("n big", "n other").split()) == setup[big]
        info = cmd(store, "XINFO", "STREAM", "idem")
        assert info["iids-duplicates"] == 5 and info["length"] == 7
    finally:
        store.close()


def test_a_failed_upgrade_leaves_the_old_store_as_it_was(tmp_path, monkeypatch):
    from storage import migrate
    from storage.store import Store
    db = format1_store(tmp_path)

    def broken(kv):
        migrate._v1_to_v2(kv)            # all the work, then a failure
        raise RuntimeError("disk on fire")
    monkeypatch.setitem(migrate.STEPS, 1, broken)
    with pytest.raises(RuntimeError):
        Store(str(db))
    assert stored_format(db) == 1
    monkeypatch.undo()
    # the next open upgrades it, and it answers as before
    for cmd, g, w in zip(EXPECTED["script"], replies(db, EXPECTED["script"]), EXPECTED["replies"]):
        assert same(cmd, g, w), cmd
    assert stored_format(db) == codec.FORMAT_VERSION


def test_an_old_store_opened_read_only_asks_for_write_access(tmp_path):
    from storage.store import Store, StoreError
    db = format1_store(tmp_path)
    with pytest.raises(StoreError, match="open it once with write access"):
        Store(str(db), readonly=True)
    assert stored_format(db) == 1


def test_a_new_store_is_written_in_the_current_format(tmp_path):
    from storage.store import Store
    Store(str(tmp_path / "db")).close()
    assert stored_format(tmp_path / "db") == codec.FORMAT_VERSION


# ------------------------------------------------------ format 2 -> 3 (nodes)
# tests/fixtures/format2.data.mdb.gz was written by the xs of commit b6e5379
# (format 2, no node table) with tests/fixtures/make_format2.py.

EXPECTED2 = json.load(open(os.path.join(FIXTURES, "format2.expected.json")))


def format2_store(tmp_path):
    d = tmp_path / "format2"
    d.mkdir()
    with open(os.path.join(FIXTURES, "format2.data.mdb.gz"), "rb") as f:
        (d / "data.mdb").write_bytes(gzip.decompress(f.read()))
    return d


def without_radix(cmd, r):
    """radix-tree-* were estimates in format 2 (length / 100); they are
    the node count now, compared below with Redis's."""
    if cmd.startswith("XINFO STREAM") and isinstance(r, dict):
        return {k: v for k, v in r.items() if not k.startswith("radix-tree")}
    return r


def test_a_format_2_store_opens_upgraded_and_reads_back_identically(tmp_path):
    db = format2_store(tmp_path)
    assert stored_format(db) == 2
    got = replies(db, EXPECTED2["script"])
    assert stored_format(db) == codec.FORMAT_VERSION
    assert len(got) == len(EXPECTED2["replies"])
    for cmd, g, w in zip(EXPECTED2["script"], got, EXPECTED2["replies"]):
        assert same(cmd, without_radix(cmd, g), without_radix(cmd, w)), (cmd, g, w)


def test_an_upgraded_format_2_store_has_redis_nodes_for_streams_added_in_order(tmp_path):
    """What redis-server 7.0.15 answers after make_format2.py's node setup
    (250 small entries; 30 entries of 1000-byte values: 4 per node by the
    4096-byte rule).  "holes" had entries XDEL'd before the upgrade: the
    upgrade assumes none were (migrate._v2_to_v3), so its first node holds
    100 live entries where Redis's holds 97."""
    db = format2_store(tmp_path)
    r = replies(db, ["XINFO STREAM nodes", "XINFO STREAM bigvals", "XTRIM nodes MAXLEN ~ 120",
                     "XTRIM bigvals MAXLEN ~ 10", "XLEN bigvals", "XTRIM holes MAXLEN ~ 10", "XLEN holes",
                     "XADD holes 4-0 f 1 g x", "XINFO STREAM holes"])
    assert r[0]["radix-tree-keys"] == 3 and r[1]["radix-tree-keys"] == 8
    assert r[2:5] == [100, 20, 10]
    assert r[5:7] == [100, 46]
    assert r[8]["radix-tree-keys"] == 1 and r[8]["length"] == 47


def test_a_format_2_upgrade_builds_no_node_before_it_is_needed(tmp_path):
    """The upgrade only marks each stream (nodes-from = its first entry):
    it stays quick for big stores; nodes are made on first need."""
    import lmdb
    db = format2_store(tmp_path)
    from storage.store import Store
    Store(str(db)).close()
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2, readonly=True, lock=False)
    try:
        with env.begin() as t:
            assert t.stat(env.open_db(b"nodes", txn=t, create=False))["entries"] == 0
            keys = env.open_db(b"keys", txn=t, create=False)
            marks = {codec.name_from_key(k): codec.StreamMeta.decode(v).nodes_from for k, v in t.cursor(keys)}
    finally:
        env.close()
    assert marks[b"nodes"] == (1, 0) and marks[b"holes"] == (3, 0) and marks[b"empty"] is None


# ---------------------------------------------- format 3 -> 4 (compact entries)
# tests/fixtures/format3.data.mdb.gz was written by the xs of commit 1d807e9
# (format 3: every entry a record under a 24-byte key) with
# tests/fixtures/make_format3.py.

EXPECTED3 = json.load(open(os.path.join(FIXTURES, "format3.expected.json")))


def fixture_store(tmp_path, name):
    d = tmp_path / name
    d.mkdir()
    with open(os.path.join(FIXTURES, "%s.data.mdb.gz" % name), "rb") as f:
        (d / "data.mdb").write_bytes(gzip.decompress(f.read()))
    return d


def entry_forms(db):
    """{stream name: (entries shaped, entries stored as records)} and the
    names of the databases in the store."""
    import lmdb
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2, readonly=True, lock=False)
    try:
        with env.begin() as t:
            names = {k for k, _ in t.cursor()}
            if b"log" not in names:
                return {}, names
            keys = env.open_db(b"keys", txn=t, create=False)
            log = env.open_db(b"log", txn=t, create=False)
            out = {}
            for k, v in t.cursor(keys):
                sid = codec.StreamMeta.decode(v).sid
                vals = [val for key, val in t.cursor(log) if key[:8] == codec.sid_prefix(sid)]
                shaped = sum(1 for val in vals if codec.is_shaped(val))
                out[codec.name_from_key(k)] = (shaped, len(vals) - shaped)
            return out, names
    finally:
        env.close()


def test_a_format_3_store_opens_compacted_and_reads_back_identically(tmp_path):
    db = fixture_store(tmp_path, "format3")
    assert stored_format(db) == 3
    got = replies(db, EXPECTED3["script"])
    assert stored_format(db) == codec.FORMAT_VERSION == 4
    assert len(got) == len(EXPECTED3["replies"])
    for cmd, g, w in zip(EXPECTED3["script"], got, EXPECTED3["replies"]):
        assert same(cmd, g, w), (cmd, g, w)
    forms, names = entry_forms(db)
    assert b"entries" not in names and b"log" in names
    # "shapes" has 12 field sets for 60 entries: 8 interned, 4 not; the
    # entries with a control byte, a newline or 25 fields stay records
    assert forms[b"plain"][1] == 0 and forms[b"nodes"] == (250, 0)
    shaped, records = forms[b"shapes"]
    assert shaped + records == 68 and records >= 4 + 3


@pytest.mark.parametrize("name", ["format1", "format2", "format3"])
def test_every_older_store_is_written_compact_after_the_upgrade(tmp_path, name):
    """The upgrade and later writes alike: an upgraded store's new
    entries with a known field set are shaped."""
    db = fixture_store(tmp_path, name)
    r = replies(db, ["XADD plain * user carol action login", "XRANGE plain - + COUNT 1"])
    assert isinstance(r[0], str)
    forms, _ = entry_forms(db)
    assert forms[b"plain"][0] >= 1 and forms[b"plain"][1] == 0


