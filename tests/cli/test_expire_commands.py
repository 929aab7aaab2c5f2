"""Key expiry through the commands as typed (TTL, PTTL, EXPIRETIME,
PEXPIRETIME and every command on a stream past its TTL), on a clock the
test moves, each command parsed and run on a store in this process.
This test left tests/engine/test_expire.py, whose tier calls the engine
only."""
import pytest

from tests.harness.commands import run_line as run
from tests.harness.stores import frozen_clock

T0 = 1_800_000_000_000


@pytest.fixture
def clock(monkeypatch):
    return frozen_clock(monkeypatch, T0)


def busy_stream(store, name):
    for i in range(1, 4):
        run(store, "XADD %s %d-0 f %d" % (name, i, i))
    run(store, "XADD %s IDMP p i1 * f x" % name)
    run(store, "XGROUP CREATE %s g 0" % name)
    run(store, "XREADGROUP GROUP g alice COUNT 2 STREAMS %s >" % name)


def test_ttl_counts_down_and_the_stream_is_gone_for_every_command_when_it_passes(store, clock):
    busy_stream(store, "s")
    assert run(store, "EXPIRE s 10") == 1
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (10, 10000)
    clock.advance(4501)
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (5, 5499)        # seconds rounded, as Redis
    clock.advance(1)
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (5, 5498)
    clock.advance(5497)
    assert (run(store, "TTL s"), run(store, "PTTL s")) == (0, 1)
    assert run(store, "EXPIRETIME s") == (T0 + 10000 + 500) // 1000
    assert run(store, "PEXPIRETIME s") == T0 + 10000
    clock.advance(1)                                                          # the time itself: expired
    assert run(store, "EXISTS s") == 0
    assert run(store, "TTL s") == -2 and run(store, "PEXPIRETIME s") == -2
    assert run(store, "XLEN s") == 0 and run(store, "XRANGE s - +") == []
    assert str(run(store, "TYPE s")) == "none"
    assert run(store, "KEYS *") == [] and run(store, "SCAN 0")[1] == []
    assert run(store, "XREAD STREAMS s 0") is None
    with pytest.raises(Exception, match="no such key"):
        run(store, "XINFO STREAM s")
    with pytest.raises(Exception, match="NOGROUP"):
        run(store, "XREADGROUP GROUP g alice STREAMS s >")
    with pytest.raises(Exception, match="no such key"):
        run(store, "RENAME s t")
    assert run(store, "PERSIST s") == 0 and run(store, "EXPIRE s 100") == 0 and run(store, "DEL s") == 0
