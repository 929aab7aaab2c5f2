"""MULTI blocks of plain XADDs, as Spark's network sink and many clients
write (issue 42, item 3): xs serve queues a run of them in one loop
(``jobs.queue_adds``) and answers their QUEUED replies in one piece.
The wire replies, byte for byte up to the new IDs, and INFO
commandstats must be redis-server's, however the run is cut: by other
commands, by a command refused at queueing, by a protocol error, by
lower-case names, and by the reads that deliver the pipeline."""
import re
import socket
import time

import pytest

from tests.harness.served import Served, wire


def _req(*args):
    return wire(args)


_END = _req("PING", "end of the replies")
_END_REPLY = b"$18\r\nend of the replies\r\n"


def _talk(port, data, chunk=None):
    """Send ``data`` (in pieces of ``chunk`` bytes, if given) and a PING
    with a text; every reply before that PING's (or before the server
    closed the connection)."""
    s = socket.create_connection(("127.0.0.1", port))
    data += _END
    try:
        if chunk is None:
            s.sendall(data)
        else:
            for i in range(0, len(data), chunk):
                s.sendall(data[i:i + chunk])
                time.sleep(0.001)
        s.settimeout(60)
        out = b""
        while not out.endswith(_END_REPLY):
            got = s.recv(1 << 20)
            if not got:
                return out
            out += got
        return out[:-len(_END_REPLY)]
    finally:
        s.close()


_ID = re.compile(rb"\$\d+\r\n\d+-\d+\r\n")


def _shape(replies):
    """The replies with every new entry ID made one placeholder."""
    return _ID.sub(b"<id>", replies)


def _calls(port, name):
    info = _talk(port, _req("INFO", "commandstats"))
    m = re.search(rb"cmdstat_%s:calls=(\d+)" % name, info)
    return int(m.group(1)) if m else 0


@pytest.fixture
def both(tmp_path, redis):
    s = Served(tmp_path / "store", loglevel="warning")
    _talk(redis.port, _req("FLUSHALL") + _req("CONFIG", "RESETSTAT"))
    yield s.port, redis.port
    s.stop()


def _adds(n, key="s", name="XADD"):
    return b"".join(_req(name, key, "*", "user", "u%d" % i, "n", i) for i in range(n))


BLOCKS = {
    "a long run": _req("MULTI") + _adds(2000) + _req("EXEC"),
    "cut by other commands": _req("MULTI") + _adds(3) + _req("XLEN", "s") + _adds(4, name="xadd")
    + _req("XADD", "t", "MAXLEN", "1", "*", "f", "v") + _adds(2, key="t") + _req("PING") + _adds(2) + _req("EXEC"),
    "a refused add aborts": _req("MULTI") + _adds(5) + _req("XADD", "s", "*") + _adds(5) + _req("EXEC")
    + _req("XLEN", "s"),
    "an unknown command aborts": _req("MULTI") + _adds(3) + _req("NOSUCH", "x") + _adds(3) + _req("EXEC")
    + _req("XLEN", "s"),
    "an odd field count is a run's end": _req("MULTI") + _adds(3) + _req("XADD", "s", "*", "f") + _adds(2)
    + _req("EXEC") + _req("XLEN", "s"),
    "discarded": _req("MULTI") + _adds(50) + _req("DISCARD") + _req("XLEN", "s"),
}


@pytest.mark.parametrize("case", sorted(BLOCKS))
def test_queued_runs_of_plain_adds_answer_as_redis_byte_for_byte(both, case):
    ours, theirs = both
    data = BLOCKS[case]
    got, want = _talk(ours, data), _talk(theirs, data)
    assert _shape(got) == _shape(want)
    assert _calls(ours, b"xadd") == _calls(theirs, b"xadd")


def test_a_block_delivered_in_small_pieces_is_queued_as_a_whole(both):
    ours, theirs = both
    data = _req("MULTI") + _adds(600) + _req("EXEC") + _req("XLEN", "s")
    got, want = _talk(ours, data, chunk=997), _talk(theirs, data, chunk=997)
    assert _shape(got) == _shape(want)
    assert got.endswith(b":600\r\n")


def test_a_protocol_error_inside_a_run_answers_what_came_before_it(both):
    ours, theirs = both
    data = _req("MULTI") + _adds(20) + b"*1\r\n$x\r\n" + _adds(5)
    got, want = _talk(ours, data), _talk(theirs, data)
    assert got == want
    assert got.count(b"+QUEUED\r\n") == 20 and b"-ERR Protocol error" in got
