"""MULTI ... EXEC of XADDs with explicit IDs (issue 42, item 3), side by
side with redis-server: the runs of such adds go through the batch
driver's shared run (one savepoint, xstream_cli.execution.batch), and a
refused add -- an ID equal to or below the top, ``0-0`` -- is that
command's error reply while the others are applied, exactly as Redis's
EXEC does.  Each test runs the same transactions on both servers and
compares every reply and the streams' contents."""
import pytest

from tests.harness.served import Served
from xstream_cli.execution import batch

redis_py = pytest.importorskip("redis")


@pytest.fixture
def both(tmp_path, redis):
    """(xs serve client, redis-server client)."""
    s = Served(tmp_path / "store", loglevel="warning")
    ours = s.client()
    theirs = redis_py.Redis(port=redis.port)
    theirs.flushall()
    yield ours, theirs
    theirs.flushall()
    theirs.close()
    ours.close()
    s.stop()


def _exec(r, commands):
    """EXEC's replies (an error reply as its text) for ``commands``."""
    p = r.pipeline(transaction=True)
    for c in commands:
        p.execute_command(*c)
    replies = p.execute(raise_on_error=False)
    return [("error", str(x)) if isinstance(x, Exception) else x for x in replies]


def _same(both, *transactions, keys=(b"s",)):
    ours, theirs = both
    for commands in transactions:
        assert _exec(ours, commands) == _exec(theirs, commands), commands
    for k in keys:
        assert ours.xrange(k) == theirs.xrange(k)
        assert ours.xinfo_stream(k)["last-generated-id"] == theirs.xinfo_stream(k)["last-generated-id"]
        assert ours.xinfo_stream(k)["entries-added"] == theirs.xinfo_stream(k)["entries-added"]


def _adds(key, ids):
    return [("XADD", key, i, "f", str(i)) for i in ids]


def test_exec_of_explicit_id_adds_answers_each_id_as_redis(both):
    _same(both, _adds("s", ["1-1", "1-2", "2-0", "5-7"]), _adds("s", ["6-0", "7-1"]))


def test_an_id_equal_to_the_top_in_the_middle_is_that_commands_error_and_the_others_apply(both):
    _same(both, _adds("s", ["1-1", "2-2", "2-2", "3-0", "2-9", "4-0"]))


def test_an_id_below_the_top_of_an_earlier_exec_fails_alone(both):
    _same(both, _adds("s", ["10-0"]), _adds("s", ["9-0", "11-0", "10-5", "12-0"]))


def test_the_zero_id_is_its_own_error_in_a_run(both):
    _same(both, _adds("s", ["0-0", "0-1", "0-0", "1-0"]))


def test_first_and_last_commands_refused(both):
    _same(both, _adds("s", ["5-0"]), _adds("s", ["5-0", "6-0", "7-0", "7-0"]))


def test_every_command_refused(both):
    _same(both, _adds("s", ["5-0"]), _adds("s", ["1-0", "2-0", "5-0"]))


def test_ms_star_ids_in_a_run_take_the_next_sequence_as_redis(both):
    _same(both, _adds("s", ["3-*", "3-*", "4-*", "3-*", "4-*", "5-1", "5-*"]))


def test_runs_across_streams_and_mixed_with_other_commands(both):
    _same(both, _adds("s", ["1-0", "2-0"]) + _adds("t", ["1-0", "1-0", "3-*"]) + [("XLEN", "s")]
          + _adds("s", ["2-0", "3-0"]) + [("XDEL", "s", "1-0")] + _adds("t", ["4-0"]),
          keys=(b"t",))


def test_adds_with_options_keep_their_own_rules_beside_a_run(both):
    _same(both, _adds("s", ["1-0", "2-0"]) + [("XADD", "s", "MAXLEN", "2", "3-0", "f", "v"),
                                              ("XADD", "s", "NOMKSTREAM", "3-0", "f", "v"),
                                              ("XADD", "nope", "NOMKSTREAM", "1-0", "f", "v")] + _adds("s", ["4-0"]))


def test_a_run_of_explicit_id_adds_is_one_shared_run_until_an_error(tmp_path):
    """The batch driver: the adds before a refused one run as one shared
    run, the refused one alone, the rest as a run again -- not a
    savepoint each (what made EXEC slow)."""
    from storage import Store
    from storage.options import AddOptions
    from xstream_cli.commands import COMMANDS

    runs = []
    store = Store(str(tmp_path / "db"))
    try:
        def go(tx):
            real = tx.shared

            def shared(calls):
                runs.append(len(calls))
                return real(calls)
            tx.shared = shared
            b = batch.Batch(tx)
            out = [None] * 6
            for i, sid in enumerate([(1, 0), (2, 0), (2, 0), (3, 0), (4, 0), (5, 0)]):
                b.run(out, i, COMMANDS[b"XADD"], (b"s", [b"f", b"v"], AddOptions(id=sid)), wait=False, share=False)
            b.flush()
            return out
        out = store.run(go, write=True, savepoints=True)
    finally:
        store.close()
    assert out[:2] == [b"1-0", b"2-0"] and out[3:] == [b"3-0", b"4-0", b"5-0"]
    assert str(out[2]) == "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    assert runs == [6, 2, 3]            # the run, its part before the error again, the rest
