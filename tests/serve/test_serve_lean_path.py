"""The lean request path of ``xs serve`` (issue 42, item 2): a buffer of
whole requests read by hiredis in one go (resp.RequestParser's
``_native_whole``), PING and ECHO answered where they are read with
their calls counted in bulk (reading.py, stats.Stats.instant), and a
step of server commands run once, in order."""
import pytest

from tests.harness.served import Served, wire
from xstream_cli.server import resp
from xstream_cli.server.resp import RequestParser

redis_py = pytest.importorskip("redis")
native = pytest.mark.skipif(resp.HIREDIS is None, reason="hiredis is needed (the serve extra)")


@native
def test_a_set_header_first_on_a_line_is_an_inline_command_with_hiredis_as_without():
    data = b"*1\r\n$4\r\nPING\r\n~1\r\n$4\r\nPING\r\n>1\r\n$4\r\nPING\r\n"
    got = []
    for flag in (True, False):
        p = RequestParser(native=flag)
        p.feed(data)
        got.append(p.commands(1024))
    assert got[0] == got[1] == [[b"PING"], [b"~1"], [b"$4"], [b"PING"], [b">1"], [b"$4"], [b"PING"]]


@native
def test_a_buffer_ending_after_a_whole_argument_of_a_request_is_not_taken_whole():
    p = RequestParser(native=True)
    p.feed(b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nfoo\r\n")
    assert p.commands(1024) == [[b"PING"]]
    p.feed(b"$3\r\nbar\r\n")
    assert p.commands(1024) == [[b"foo", b"bar"]]
    p.feed(b"*1\r\n$4\r\nPING\r\n" * 3)
    assert p.commands(1024) == [[b"PING"]] * 3
    assert p.pending() == 0


def _raw(port, data, replies):
    """What the server answers to ``data``, once it holds ``replies`` lines."""
    import socket
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(data)
    buf = b""
    while buf.count(b"\r\n") < replies:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    s.close()
    return buf


def _calls(r, name):
    st = r.info("commandstats").get("cmdstat_" + name)
    return st["calls"] if st else 0


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path / "store", loglevel="warning")
    yield s
    s.stop()


def test_pings_echoes_and_engine_commands_of_one_pipeline_answer_in_order(served):
    data = wire([b"PING"], [b"XADD", b"s", b"1-1", b"f", b"v"], [b"ping", b"hi"], [b"ECHO", b"e"], [b"XLEN", b"s"],
                [b"PING"])
    assert _raw(served.port, data, 6) == b"+PONG\r\n$3\r\n1-1\r\n$2\r\nhi\r\n$1\r\ne\r\n:1\r\n+PONG\r\n"


def test_pings_answered_where_they_are_read_count_in_commandstats_and_resetstat_clears_them(served):
    r = served.client()
    _raw(served.port, b"*1\r\n$4\r\nPING\r\n" * 40, 40)
    _raw(served.port, b"*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n" * 3, 6)
    assert _calls(r, "ping") == 40
    assert _calls(r, "echo") == 3
    assert "latency_percentiles_usec_ping" in r.info("latencystats")
    r.config_resetstat()
    r.ping()
    assert _calls(r, "ping") == 1
    assert _calls(r, "echo") == 0


def test_a_server_command_in_a_step_runs_once(served):
    """A step handed to a task (CONFIG GET before a stream command) runs
    each command once and answers it once."""
    got = _raw(served.port, wire([b"CONFIG", b"GET", b"stream-node-max-entries"], [b"XLEN", b"s"]), 6)
    assert got.endswith(b":0\r\n") and got.count(b"*2\r\n") == 1
    r = served.client()
    assert _calls(r, "config|get") == 1
    assert _calls(r, "xlen") == 1
