"""xs save / xs restore: the snapshot format round-trips every feature,
and bad files are refused with the target untouched."""
import os
import struct

import pytest
from click.testing import CliRunner

from storage.ops import snapshot
from xstream_cli.app import cli
from xstream_cli.execution.session import Session

NOW = 1700000000000

# a store using every feature: tombstones, XSETID metadata, groups with
# and without ENTRIESREAD, consumers with and without pending entries,
# XCLAIM with TIME/RETRYCOUNT, XNACK, IDMP history and settings, odd bytes
BUILD = [
    [b"XADD", b"s", b"1-1", b"a", b"1", b"b", b"2", b"a", b"3"],
    [b"XADD", b"s", b"2-0", b"x", b"y"],
    [b"XADD", b"s", b"3-0", b"\xff\xfe", b"\x00bin"],
    [b"XADD", b"s", b"4-0", b"x", b"w"],
    [b"XADD", b"s", b"5-0", b"x", b"v"],
    [b"XDEL", b"s", b"2-0"],
    [b"XGROUP", b"CREATE", b"s", b"g1", b"0"],
    [b"XGROUP", b"CREATE", b"s", b"g2", b"$", b"ENTRIESREAD", b"3"],
    [b"XGROUP", b"CREATE", b"s", b"g3", b"1-1"],
    [b"XREADGROUP", b"GROUP", b"g1", b"alice", b"COUNT", b"2", b"STREAMS", b"s", b">"],
    [b"XREADGROUP", b"GROUP", b"g1", b"bob", b"COUNT", b"5", b"STREAMS", b"s", b">"],
    [b"XCLAIM", b"s", b"g1", b"carol", b"0", b"5-0", b"TIME", b"1699999990000", b"RETRYCOUNT", b"7"],
    [b"XNACK", b"s", b"g1", b"FAIL", b"IDS", b"1", b"4-0"],
    [b"XNACK", b"s", b"g1", b"SILENT", b"IDS", b"1", b"1-1"],
    [b"XREADGROUP", b"GROUP", b"g3", b"dave", b"STREAMS", b"s", b">"],
    [b"XDEL", b"s", b"3-0"],
    [b"XGROUP", b"CREATECONSUMER", b"s", b"g2", b"erin"],
    [b"XADD", b"empty", b"9-9", b"k", b"v"],
    [b"XDEL", b"empty", b"9-9"],
    [b"XSETID", b"empty", b"10-0", b"ENTRIESADDED", b"50", b"MAXDELETEDID", b"9-9"],
    [b"XADD", b"t", b"1-0", b"first", b"1"],
    [b"XCFGSET", b"t", b"IDMP-DURATION", b"300", b"IDMP-MAXSIZE", b"2"],
]
IDMP = [
    [b"XADD", b"t", b"IDMP", b"p1", b"i1", b"*", b"f", b"v"],
    [b"XADD", b"t", b"IDMP", b"p1", b"i2", b"*", b"f", b"v2"],
    [b"XADD", b"t", b"IDMP", b"p1", b"i3", b"*", b"f", b"v3"],
    [b"XADD", b"t", b"IDMP", b"p1", b"i3", b"*", b"f", b"v3"],
    [b"XADD", b"t", b"IDMPAUTO", b"p2", b"*", b"k", b"v"],
    [b"XADD", b"t", b"IDMP", b"p" * 600, b"i" * 500, b"*", b"long", b"names"],
    [b"XADD", b"l" * 700, b"1-0", b"long", b"stream name"],
]

QUERIES = [
    "XRANGE {s} - +", "XINFO STREAM {s} FULL", "XINFO STREAM {s}", "XINFO GROUPS {s}",
    "XPENDING {s} g1", "XPENDING {s} g1 - + 100", "XPENDING {s} g3 - + 100",
    "XINFO CONSUMERS {s} g1", "XINFO CONSUMERS {s} g2",
]


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    """Idle times and auto IDs depend on the clock: freeze it so two
    stores can be compared reply for reply."""
    from storage.txn import Txn
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: NOW))
    yield
    close_all()
    OPEN.clear()


OPEN = []


def session(db):
    """A Session; ``invoke`` closes its store before running the CLI in
    this process (LMDB allows one environment per path per process) and
    the Session reopens it on next use."""
    s = Session(str(db), "json")
    OPEN.append(s)
    return s


def build(db):
    s = session(db)
    for argv in BUILD:
        r = s.execute(argv)
        assert not hasattr(r, "text"), (argv, r.text)
    for argv in IDMP:
        r = s.execute(argv)
        if hasattr(r, "text"):      # an engine limit (e.g. key size), not ours
            assert b"p" * 600 in argv, r.text
    return s


def dump(s, streams=(b"s", b"t", b"empty", b"l" * 700)):
    out = {}
    for name in streams:
        for q in QUERIES:
            argv = [a.replace(b"{s}", name) for a in q.encode().split()]
            out[(name, q)] = s.render(s.execute(argv))
    out["keys"] = s.render(s.execute([b"KEYS", b"*"]))
    return out


def probe_idmp(s):
    """Writes: IDMP duplicates must be recognised after a restore."""
    return [s.render(s.execute(argv)) for argv in (
        [b"XADD", b"t", b"IDMP", b"p1", b"i2", b"*", b"f", b"again"],     # duplicate
        [b"XADD", b"t", b"IDMP", b"p1", b"i1", b"*", b"f", b"evicted"],   # evicted by MAXSIZE 2
        [b"XADD", b"t", b"IDMPAUTO", b"p2", b"*", b"k", b"v"],            # duplicate
        [b"XINFO", b"STREAM", b"t"])]


def close_all():
    for s in OPEN:
        if s._store is not None:
            s._store.close()
            s._store = None


def invoke(args, input=None):
    close_all()
    return CliRunner().invoke(cli, args, input=input, catch_exceptions=False)


def test_save_then_restore_gives_identical_replies_for_every_feature(tmp_path):
    src = build(tmp_path / "src")
    snap = tmp_path / "x.snap"
    r = invoke(["--db", str(tmp_path / "src"), "save", str(snap)])
    assert r.exit_code == 0, r.output
    assert "saved 4 streams" in r.stderr
    r = invoke(["--db", str(tmp_path / "dst"), "restore", str(snap)])
    assert r.exit_code == 0, r.output
    assert "restored 4 streams" in r.stderr
    dst = session(tmp_path / "dst")
    a, b = dump(src), dump(dst)
    assert a == b
    assert probe_idmp(src) == probe_idmp(dst)
    # the interesting parts really are there
    full = a[(b"s", "XINFO STREAM {s} FULL")].decode("utf-8", "surrogateescape")
    assert '"max-deleted-entry-id": "3-0"' in full or '"max-deleted-entry-id":"3-0"' in full
    assert "1699999990000" in full and "nacked-count" in full
    assert b'"iids-duplicates"' in a[(b"t", "XINFO STREAM {s}")]


def test_restore_keeps_nack_order_and_claims_them_first(tmp_path):
    src = build(tmp_path / "src")
    snapshot.save_to_path(src.store, str(tmp_path / "x.snap"))
    dst = session(tmp_path / "dst")
    snapshot.restore(dst.store, str(tmp_path / "x.snap"))
    q = [b"XREADGROUP", b"GROUP", b"g1", b"zed", b"CLAIM", b"0", b"COUNT", b"2", b"STREAMS", b"s", b">"]
    assert src.render(src.execute(q)) == dst.render(dst.execute(q))


def test_save_selected_streams_only(tmp_path):
    build(tmp_path / "src")
    snap = tmp_path / "x.snap"
    assert invoke(["--db", str(tmp_path / "src"), "save", "--stream", "s", "--stream", "empty",
                   str(snap)]).exit_code == 0
    st = snapshot.verify(str(snap))
    assert st.streams == 2
    assert invoke(["--db", str(tmp_path / "src"), "save", "--stream", "nope", str(snap)]).exit_code == 1


def test_save_to_stdout_and_restore_from_stdin(tmp_path):
    src = build(tmp_path / "src")
    r = invoke(["--db", str(tmp_path / "src"), "save", "-"])
    assert r.exit_code == 0
    data = r.stdout_bytes
    assert data.startswith(snapshot.MAGIC)
    r = invoke(["--db", str(tmp_path / "dst"), "restore", "-"], input=data)
    assert r.exit_code == 0, r.output
    assert dump(src) == dump(session(tmp_path / "dst"))


def test_existing_stream_is_refused_unless_replace(tmp_path):
    src = build(tmp_path / "src")
    snap = str(tmp_path / "x.snap")
    invoke(["--db", str(tmp_path / "src"), "save", snap])
    dst = session(tmp_path / "dst")
    dst.execute([b"XADD", b"s", b"1-0", b"mine", b"1"])
    before = dump(dst)
    r = invoke(["--db", str(tmp_path / "dst"), "restore", snap])
    assert r.exit_code == 1
    assert "already exists" in r.stderr and "--replace" in r.stderr
    assert dump(dst) == before
    r = invoke(["--db", str(tmp_path / "dst"), "restore", "--replace", snap])
    assert r.exit_code == 0
    assert dump(dst) == dump(src)


def _target(tmp_path):
    dst = session(tmp_path / "dst")
    dst.execute([b"XADD", b"other", b"1-0", b"keep", b"me"])
    return dst


@pytest.mark.parametrize("damage", ["flip-each-region", "truncate", "garbage", "empty", "trailing",
                                    "bad-version", "huge-length"])
def test_bad_snapshot_is_refused_and_target_untouched(tmp_path, damage):
    src = build(tmp_path / "src")
    snap = tmp_path / "x.snap"
    snapshot.save_to_path(src.store, str(snap))
    good = snap.read_bytes()
    dst = _target(tmp_path)
    before = dump(dst, (b"other",))
    variants = []
    if damage == "flip-each-region":
        for pos in range(0, len(good), max(1, len(good) // 40)):
            b = bytearray(good)
            b[pos] ^= 0x40
            variants.append(bytes(b))
    elif damage == "truncate":
        variants = [good[:n] for n in (0, 5, 11, len(good) // 2, len(good) - 33, len(good) - 1)]
    elif damage == "garbage":
        variants = [os.urandom(n) for n in (1, 100, 5000)] + [snapshot.MAGIC + os.urandom(3000)]
    elif damage == "empty":
        variants = [b""]
    elif damage == "trailing":
        variants = [good + b"\x00"]
    elif damage == "bad-version":
        variants = [good[:10] + struct.pack(">H", 99) + good[12:]]
    elif damage == "huge-length":
        hdr = snapshot.MAGIC + struct.pack(">H", 1)
        variants = [hdr + struct.pack(">BI", snapshot.HEADER, 0xFFFFFFFF) + b"x" * 100,
                    hdr + struct.pack(">BI", snapshot.HEADER, 100000000) + b"x" * 100]
    for j, data in enumerate(variants):
        bad = tmp_path / ("bad%d" % j)
        bad.write_bytes(data)
        r = invoke(["--db", str(tmp_path / "dst"), "restore", "--replace", str(bad)])
        assert r.exit_code == 1, (damage, j)
        assert r.stderr.startswith("xs: ") and "Traceback" not in r.stderr
        assert r.stderr.count("\n") == 1
    assert dump(dst, (b"other",)) == before
    assert dst.render(dst.execute([b"KEYS", b"*"])) == b'["other"]\n'


def test_hostile_but_checksummed_records_are_refused(tmp_path):
    """A file whose checksum is right but whose records lie (written by a
    hostile tool) is refused by structure checks, not by luck."""
    import hashlib

    def file_of(*recs):
        body = snapshot.MAGIC + struct.pack(">H", 1)
        for t, p in recs:
            body += struct.pack(">BI", t, len(p)) + p
        return body + hashlib.sha256(body).digest()
    from storage.codec import packb
    head = (snapshot.HEADER, packb({}))
    stream = {"name": b"s", "length": 1, "last-id": [5, 0], "max-deleted-id": [0, 0], "entries-added": 1}
    cases = {
        "entry after last id": [head, (snapshot.STREAM, packb(stream)),
                                (snapshot.ENTRY, struct.pack(">QQ", 9, 0) + packb([b"a", b"b"])),
                                (snapshot.END, packb({"streams": 1, "entries": 1}))],
        "odd fields": [head, (snapshot.STREAM, packb(stream)),
                       (snapshot.ENTRY, struct.pack(">QQ", 1, 0) + packb([b"a"])),
                       (snapshot.END, packb({"streams": 1, "entries": 1}))],
        "pickle-like payload": [head, (snapshot.STREAM, b"\x80\x04\x95cos\nsystem\n")],
        "count mismatch": [head, (snapshot.STREAM, packb(stream)),
                           (snapshot.END, packb({"streams": 1, "entries": 0}))],
        "pending outside group": [head, (snapshot.STREAM, packb(stream)),
                                  (snapshot.PENDING, struct.pack(">QQqQ", 1, 0, 1, 1))],
        "unknown type": [head, (0x55, b"")],
        "duplicate pending": [head, (snapshot.STREAM, packb(dict(stream, length=0))),
                              (snapshot.GROUP, packb({"name": b"g", "last-id": [0, 0], "entries-read": -1})),
                              (snapshot.CONSUMER, packb({"name": b"a", "seen-time": 1, "active-time": 1})),
                              (snapshot.PENDING, struct.pack(">QQqQ", 1, 0, 1, 1)),
                              (snapshot.CONSUMER, packb({"name": b"b", "seen-time": 1, "active-time": 1})),
                              (snapshot.PENDING, struct.pack(">QQqQ", 1, 0, 1, 1)),
                              (snapshot.END, packb({"streams": 1, "entries": 0}))],
    }
    dst = _target(tmp_path)
    for what, recs in cases.items():
        bad = tmp_path / "hostile"
        bad.write_bytes(file_of(*recs))
        r = invoke(["--db", str(tmp_path / "dst"), "restore", str(bad)])
        assert r.exit_code == 1, what
        assert "Traceback" not in r.stderr
    assert dst.render(dst.execute([b"KEYS", b"*"])) == b'["other"]\n'


def test_check_verifies_without_a_store(tmp_path):
    src = build(tmp_path / "src")
    snap = tmp_path / "x.snap"
    snapshot.save_to_path(src.store, str(snap))
    r = invoke(["--db", str(tmp_path / "nothere"), "restore", "--check", str(snap)])
    assert r.exit_code == 0 and "verified 4 streams" in r.stderr
    assert not (tmp_path / "nothere").exists()


def test_save_is_atomic_rename_and_leaves_no_temp_files(tmp_path):
    build(tmp_path / "src")
    snap = tmp_path / "out" / "x.snap"
    snap.parent.mkdir()
    snap.write_bytes(b"old")
    assert invoke(["--db", str(tmp_path / "src"), "save", str(snap)]).exit_code == 0
    assert os.listdir(snap.parent) == ["x.snap"]
    assert snap.read_bytes().startswith(snapshot.MAGIC)
    r = invoke(["--db", str(tmp_path / "src"), "save", str(tmp_path / "no" / "dir" / "x")])
    assert r.exit_code == 1 and "cannot write" in r.stderr


def test_save_is_consistent_while_a_writer_commits(tmp_path):
    """The snapshot is one read transaction: a write committed while it
    is being written does not appear in it."""
    s = session(tmp_path / "src")
    for i in range(1, 2001):
        s.execute([b"XADD", b"s", b"%d-0" % i, b"f", b"v"])
    seen = []

    def progress(phase, done, total):
        if not seen:
            seen.append(1)
            s.execute([b"XADD", b"s", b"999999-0", b"late", b"write"])
    with open(tmp_path / "x.snap", "wb") as f:
        st = snapshot.save(s.store, f, progress=progress)
    assert st.entries == 2000
    assert snapshot.verify(str(tmp_path / "x.snap")).entries == 2000
