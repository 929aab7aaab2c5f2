"""A command that answers with an error changes nothing, in
single-command mode: the real ``xs`` on the IDMP defect (it failed
before the engine rebuild), and a property running random command
sequences through the command table, each in its own transaction,
comparing every database, change counters included, before and after
each command that fails.  These left tests/engine/test_atomicity.py,
whose tier calls the engine's verbs only; the batch (script-mode)
properties are in tests/cli/test_atomicity_cli.py."""
import time

from hypothesis import example, given

from tests.harness.command_sequences import FAST, MAX_ID, WRITE_THEN_FAIL, clocked, sequences
from tests.harness.commands import cmd, xs
from tests.harness.stores import full_dump, open_store

# ========================================================== the two defects

def test_failing_idmp_xadd_on_an_exhausted_stream_keeps_the_idmp_history(tmp_path):
    db = tmp_path / "db"
    for line in (["XADD", "s", "*", "a", "0"], ["XCFGSET", "s", "IDMP-DURATION", "1"],
                 ["XADD", "s", "IDMP", "p", "i1", "*", "a", "1"], ["XSETID", "s", MAX_ID]):
        assert xs(db, *line).returncode == 0
    time.sleep(1.3)                  # i1 expires: the next IDMP XADD would drop it first
    store = open_store(db)
    before = full_dump(store)
    store.close()
    p = xs(db, "XADD", "s", "IDMP", "p", "i2", "*", "a", "2")
    assert p.returncode == 1 and b"exhausted" in p.stderr
    store = open_store(db)
    assert full_dump(store) == before
    store.close()
    # i1's history (expired, so XINFO no longer counts it) is still stored
    assert b'"type":"iid","stream":"s","producer":"p","iid":"i1"' in xs(db, "export", "--meta", "s").stdout


# ==================================================== the atomicity property

@FAST
@given(sequences)
@example(["XADD s * f v"] + WRITE_THEN_FAIL)
def test_every_failing_command_leaves_the_store_byte_identical(tmp_path_factory, seq):
    """Single-command mode: each command in its own transaction."""
    store = open_store(tmp_path_factory.mktemp("single") / "db")

    @clocked
    def check():
        for line in seq:
            before = full_dump(store)
            r = cmd(store, *line.split())
            if isinstance(r, dict) and "error" in r:
                assert full_dump(store) == before, (line, r)
    try:
        check()
    finally:
        store.close()
