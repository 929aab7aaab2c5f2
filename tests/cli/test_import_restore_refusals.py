"""Snapshot restore and JSON-lines import write through one engine path
(storage.verbs.load) that checks every value before it becomes state: a file
holding values the engine could not live with is refused, naming the
line (or byte) and the field, and the store is left as it was.  These
tests run ``xs import`` / ``xs restore`` / ``xs export``, so they left
tests/engine/test_load.py, whose tier calls the engine only."""
import hashlib
import json
import struct
import subprocess
import sys

import pytest

from storage.codec import packb
from storage.ops import snapshot
from tests.conftest import ROOT
from tests.harness.stores import full_dump, open_store

XS = [sys.executable, "-m", "xstream_cli"]


def xs(db, args, data=b""):
    return subprocess.run(XS + ["--db", str(db)] + args, input=data, capture_output=True, cwd=ROOT, timeout=60)


def seeded(tmp_path):
    db = tmp_path / "db"
    assert xs(db, [], b"XADD keep 1-0 a 1\nXGROUP CREATE keep g 0\n").returncode == 0
    return db


def dump_of(db):
    store = open_store(db)
    try:
        return full_dump(store)
    finally:
        store.close()


def jl(*recs):
    return "".join(json.dumps(r) + "\n" for r in recs).encode()


ENTRY = {"stream": "s", "id": "1-0", "fields": ["a", "1"]}
STREAM = {"type": "stream", "stream": "s", "last-id": "1-0", "max-deleted-id": "0-0", "entries-added": 1}
GROUP = {"type": "group", "stream": "s", "group": "g", "last-delivered-id": "0-0", "entries-read": -1}


@pytest.mark.parametrize("lines,field", [
    (jl(ENTRY, dict(STREAM, **{"iids-added": "lots"})), "iids-added"),
    (jl(ENTRY, dict(STREAM, **{"entries-added": 2 ** 64 - 1})), "entries-added"),
    (jl(ENTRY, dict(STREAM, **{"entries-added": 2 ** 70})), "entries-added"),
    (jl(ENTRY, dict(STREAM, **{"idmp-duration": 0})), "idmp-duration"),
    (jl(ENTRY, dict(STREAM, **{"idmp-configured": "yes"})), "idmp-configured"),
    (jl(ENTRY, STREAM, GROUP, {"type": "pending", "stream": "s", "group": "g", "consumer": "c", "id": "1-0",
                                "delivery-time": 2 ** 63, "delivery-count": 1}), "delivery-time"),
    (jl(ENTRY, STREAM, GROUP, {"type": "pending", "stream": "s", "group": "g", "consumer": "c", "id": "1-0",
                                "delivery-time": 1, "delivery-count": -1}), "delivery-count"),
    (jl(ENTRY, STREAM, dict(GROUP, **{"entries-read": 1.5})), "entries-read"),
    (jl(ENTRY, STREAM, {"type": "consumer", "stream": "s", "group": "g", "consumer": "c", "seen-time": 1,
                        "active-time": -1}), "no group record"),
    (jl(ENTRY, STREAM, GROUP, dict(GROUP, group="g")), "appears twice"),
    (jl(ENTRY, {"stream": "s", "id": "1-0", "fields": ["a", "2"]}), "equal or smaller"),
    (jl({"stream": "s", "id": "18446744073709551616-0", "fields": ["a", "1"]}), "bad id"),
    (b"[" * 100000 + b"\n", "not JSON"),
])
def test_import_refuses_values_the_engine_cannot_live_with(tmp_path, lines, field):
    db = seeded(tmp_path)
    before = dump_of(db)
    p = xs(db, ["import", "-"], lines)
    assert p.returncode == 1, p.stderr
    err = p.stderr.decode()
    assert err.startswith("xs: line ") and field in err and "Traceback" not in err, err
    assert err.count("\n") == 1
    assert dump_of(db) == before


def test_import_error_line_numbers_count_blank_lines(tmp_path):
    db = seeded(tmp_path)
    p = xs(db, ["import", "-"], b"\n\n" + jl({"stream": "s", "id": "x", "fields": ["a", "1"]}))
    assert p.returncode == 1 and p.stderr.startswith(b"xs: line 3:")


def _snapshot(*recs):
    body = snapshot.MAGIC + struct.pack(">H", snapshot.VERSION)
    for t, payload in recs:
        body += struct.pack(">BI", t, len(payload)) + payload
    return body + hashlib.sha256(body).digest()


def test_restore_refuses_a_checksummed_snapshot_with_impossible_counters(tmp_path):
    """A file written by a hostile tool, checksum and grammar correct,
    whose counters would break the next XADD."""
    db = seeded(tmp_path)
    before = dump_of(db)
    stream = {"name": b"s", "length": 1, "last-id": [5, 0], "max-deleted-id": [0, 0],
              "entries-added": 2 ** 64 - 1}
    snap = tmp_path / "bad.snap"
    snap.write_bytes(_snapshot((snapshot.HEADER, packb({})), (snapshot.STREAM, packb(stream)),
                               (snapshot.ENTRY, struct.pack(">QQ", 1, 0) + packb([b"a", b"b"])),
                               (snapshot.END, packb({"streams": 1, "entries": 1}))))
    p = xs(db, ["restore", str(snap)])
    assert p.returncode == 1 and b"entries-added" in p.stderr and b"Traceback" not in p.stderr, p.stderr
    assert dump_of(db) == before


def test_what_export_writes_import_takes_back_exactly(tmp_path):
    src = tmp_path / "src"
    script = (b"XADD s 1-0 a 1 a 2\nXADD s 2-0 \"\\xff\" x\nXDEL s 1-0\nXGROUP CREATE s g 0\n"
              b"XREADGROUP GROUP g c STREAMS s >\nXNACK s g FAIL IDS 1 2-0\nXCFGSET s IDMP-MAXSIZE 5\n"
              b"XADD s IDMP p i * k v\nXSETID s 99999999999999-9 ENTRIESADDED 50\n")
    assert xs(src, [], script).returncode == 0
    out = xs(src, ["export", "--meta"]).stdout
    dst = tmp_path / "dst"
    assert xs(dst, ["import", "-"], out).returncode == 0
    assert xs(dst, ["export", "--meta"]).stdout == out
