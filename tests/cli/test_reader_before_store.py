"""A blocking reader started before its store exists -- a consumer
started before the first producer -- waits for the store instead of
failing, and creates nothing: `xs XREAD BLOCK ... STREAMS s $` gets the
first entry written, `xs tail -f` prints it, BLOCK's timeout still
holds (nil, no store made), and a non-blocking read of a missing store
still fails."""
import os
import select
import subprocess
import time

from conftest import ROOT, XS


def xs(db, *args, **kw):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, cwd=ROOT, timeout=60, **kw)


def start(db, *args):
    return subprocess.Popen(XS + ["--db", str(db)] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=ROOT)


def test_xread_block_started_before_the_store_gets_the_first_entry(tmp_path):
    db = tmp_path / "later.xs"
    reader = start(db, "XREAD", "BLOCK", "0", "STREAMS", "events", "$")
    time.sleep(0.5)
    assert reader.poll() is None and not os.path.lexists(db)        # waiting, and nothing made
    assert xs(db, "XADD", "events", "5-1", "user", "alice").returncode == 0
    out, err = reader.communicate(timeout=30)
    assert reader.returncode == 0, err
    assert out == b"events\n5-1\nuser\nalice\n"


def test_xread_block_times_out_with_nil_and_makes_no_store(tmp_path):
    db = tmp_path / "never.xs"
    t = time.monotonic()
    p = xs(db, "--json", "XREAD", "BLOCK", "300", "STREAMS", "events", "$")
    assert (p.returncode, p.stdout) == (0, b"null\n")
    assert 0.25 < time.monotonic() - t < 10
    assert not os.path.lexists(db)


def test_tail_f_started_before_the_store_prints_what_is_written(tmp_path):
    db = tmp_path / "later.xs"
    tail = start(db, "tail", "-f", "events")
    try:
        time.sleep(0.5)
        assert tail.poll() is None and not os.path.lexists(db)
        assert xs(db, "XADD", "events", "7-1", "n", "1").returncode == 0
        ready, _, _ = select.select([tail.stdout], [], [], 30)
        assert ready, "xs tail -f printed nothing within 30 s"
        assert tail.stdout.readline() == b"events 7-1 n=1\n"
    finally:
        tail.kill()
        tail.wait()


def test_a_read_that_does_not_block_still_fails_on_a_missing_store(tmp_path):
    p = xs(tmp_path / "none.xs", "XREAD", "STREAMS", "events", "0")
    assert p.returncode == 1 and b"no such store" in p.stderr
    assert not os.path.lexists(tmp_path / "none.xs")
