"""Atomicity of commands and script batches, through the command line:
these tests run ``xs`` (or script mode), so they left
tests/engine/test_atomicity.py, whose tier uses the library API only."""
import subprocess
import time

from hypothesis import example, given

from tests.conftest import XS, run_xs
from tests.harness.command_sequences import FAST, WRITE_THEN_FAIL, sequences
from tests.harness.command_sequences import clocked as _clocked
from tests.harness.commands import xs
from tests.harness.stores import full_dump, open_store

MAX_ID = "18446744073709551615-18446744073709551615"


def test_failing_xadd_does_not_bump_the_change_counter(tmp_path):
    """Also on the bulk-ingest path of script mode, which used to count
    the stream as changed before finding its ID space exhausted."""
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-0", "a", "1").returncode == 0
    assert xs(db, "XSETID", "s", MAX_ID).returncode == 0
    store = open_store(db)
    before = full_dump(store)
    store.close()
    for line in (["XADD", "s", "*", "a", "2"], ["XADD", "s", "MAXLEN", "0", "*", "a", "2"]):
        assert xs(db, *line).returncode == 1
    for script in (["XADD s * a 2"], ["XADD s * a 2", "XADD s * a 3"], ['XADD  s "*" a 2']):
        p = run_xs(db, script)
        assert p.returncode == 1 and p.stdout.count(b"exhausted") == len(script)
    store = open_store(db)
    assert full_dump(store) == before
    store.close()


def test_a_failing_command_inside_a_batch_changes_nothing_and_the_rest_commits(tmp_path):
    db = tmp_path / "db"
    p = run_xs(db, ["XADD s * a 0", "XCFGSET s IDMP-DURATION 1", "XADD s IDMP p i1 * a 1", "XSETID s " + MAX_ID])
    assert p.returncode == 0
    time.sleep(1.3)
    p = run_xs(db, ["XADD t 1-0 x 1", "XADD s IDMP p i2 * a 2", "XADD t 2-0 x 2"])
    lines = p.stdout.decode().splitlines()
    assert "exhausted" in lines[1]
    assert xs(db, "XLEN", "t").stdout == b"2\n"
    # the failed XADD dropped nothing: i1's history (expired, so XINFO no
    # longer counts it) is still stored
    assert b'"type":"iid","stream":"s","producer":"p","iid":"i1"' in xs(db, "export", "--meta", "s").stdout


def test_keys_in_a_batch_does_not_lose_the_wake_up_of_a_blocked_reader(tmp_path):
    """KEYS and SCAN used to flush mid-transaction and forget which
    streams the batch changed: the blocked reader waited for its timeout."""
    db = tmp_path / "db"
    assert xs(db, "XADD", "s", "1-0", "a", "0").returncode == 0
    for tail in ("KEYS *", "SCAN 0"):
        reader = subprocess.Popen(XS + ["--db", str(db), "XREAD", "BLOCK", "20000", "STREAMS", "s", "$"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        notify = db / "notify"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (notify.exists() and any(notify.iterdir())):
            time.sleep(0.02)
        time.sleep(0.3)              # armed and waiting
        t0 = time.monotonic()
        p = subprocess.run(XS + ["--db", str(db)], input=b"XADD s * a 1\n" + tail.encode() + b"\n",
                           capture_output=True, timeout=30)
        assert p.returncode == 0
        out, _ = reader.communicate(timeout=30)
        assert time.monotonic() - t0 < 5, "the reader was not woken (%s)" % tail
        assert b"a\n1" in out


@FAST
@given(sequences)
@example(["XADD s * f v"] + WRITE_THEN_FAIL)
def test_a_failing_command_in_a_batch_changes_nothing_and_the_others_commit(tmp_path_factory, seq):
    """Script mode: the whole sequence in one transaction, through the
    script-mode batch code (bulk-ingest path included), a command at a
    time so the databases can be compared around each."""
    from xstream_cli.execution.script import _Script
    from xstream_cli.execution.session import Session
    db = tmp_path_factory.mktemp("batch") / "db"
    store = open_store(db)
    session = Session(str(db), "json")
    session.store = store

    @_clocked
    def check():
        def batch(tx):
            for line in seq:
                before = full_dump(store, tx._lt)
                b = _Script(session, tx, 0).run([line.encode()], 0)
                assert b.blocked is None
                if b.failed:
                    assert full_dump(store, tx._lt) == before, (line, b.replies)
            return full_dump(store, tx._lt)
        inside = store.run(batch, write=True, savepoints=True)
        assert full_dump(store) == inside       # what the batch did is what was committed
    try:
        check()
    finally:
        store.close()
