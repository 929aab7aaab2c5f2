"""Stores of older formats answer, once upgraded, exactly what the xs
that wrote them answered (tests/fixtures/format*.expected.json): each
fixture's recorded script run by the real ``xs`` in script mode, and
writes after the upgrade.  These tests run ``xs``, so they left
tests/engine/test_format.py, whose tier calls the engine only."""
import json

import pytest

from storage import codec
from tests.conftest import run_xs
from tests.harness.format_fixtures import (
    EXPECTED,
    EXPECTED2,
    EXPECTED3,
    entry_forms,
    fixture_store,
    format1_store,
    format2_store,
    stored_format,
)


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


# ------------------------------------------------------ format 2 -> 3 (nodes)


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


# ---------------------------------------------- format 3 -> 4 (compact entries)


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
