"""Store formats and upgrades, through the command line: these tests run
``xs`` (or script mode), so they left tests/engine/test_format.py, whose
tier uses the library API only."""
import json
import os
import subprocess
import sys

import pytest

from storage import codec
from tests.conftest import ROOT
from tests.harness.format_fixtures import EXPECTED3, fixture_store

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
EXPECTED = json.load(open(os.path.join(FIXTURES, "format1.expected.json")))
XS = [sys.executable, "-m", "xstream_cli"]


def test_a_newer_store_is_refused_with_a_clear_message(tmp_path):
    from storage.store import Store, StoreError
    db = tmp_path / "db"
    Store(str(db)).close()
    import lmdb
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2)
    meta = env.open_db(b"meta")
    with env.begin(write=True) as t:
        t.put(codec.META_FORMAT, b"%d" % (codec.FORMAT_VERSION + 1), db=meta)
    env.close()
    with pytest.raises(StoreError, match="has format %d; this xs reads format %d or older"
                       % (codec.FORMAT_VERSION + 1, codec.FORMAT_VERSION)):
        Store(str(db))
    p = subprocess.run(XS + ["--db", str(db), "XLEN", "s"], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 1 and b"upgrade xs" in p.stderr and b"Traceback" not in p.stderr


def test_a_person_at_a_terminal_is_told_of_the_upgrade_and_a_script_is_not(tmp_path):
    """Upgrading a big store holds it for a while (9 s per million
    entries here): on a terminal, one line says so, before the work."""
    from tests.harness.terminal import stderr_on_pty
    db = fixture_store(tmp_path, "format3")
    status, shown, _ = stderr_on_pty(XS + ["--db", str(db), "XLEN", "plain"])
    assert status == 0
    total = sum(r for c, r in zip(EXPECTED3["script"], EXPECTED3["replies"]) if c.startswith("XLEN "))
    assert "xs: upgrading store %s from format 3 to 4 (%d entries), once..." % (db, total) in shown
    status, shown, _ = stderr_on_pty(XS + ["--db", str(db), "XLEN", "plain"])
    assert status == 0 and "upgrading" not in shown          # once
    (tmp_path / "piped").mkdir()
    db2 = fixture_store(tmp_path / "piped", "format3")
    p = subprocess.run(XS + ["--db", str(db2), "XLEN", "plain"], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and p.stderr == b""
