"""XS.PAGE, xs serve's page of a stream in stored form
(xstream_cli.server.stored_page), and the url mode's reader of it
(storage.spark.stored, storage.spark.network.Conn.pages): the entries
as stored decode to XRANGE's reply, bad arguments get clear errors, a
redis-server (no such command) is read with XRANGE, and a reply from a
hostile server is refused with one line, never a traceback."""
import re
import socket
import threading
import time

import pytest

redis_py = pytest.importorskip("redis")
hiredis = pytest.importorskip("hiredis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from storage import codec  # noqa: E402
from storage.spark import stored as sp  # noqa: E402
from storage.spark.network import Endpoint, NetworkError  # noqa: E402
from tests.harness.served import Served  # noqa: E402

MAX = ((1 << 64) - 1, (1 << 64) - 1)


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path / "db")
    yield s
    s.stop()


def add_every_stored_form(r):
    """Entries stored in each of xs's forms: shaped (two field sets), a
    record in msgpack form (a newline in a value), a text record (a byte
    a shaped entry cannot hold), a field given twice, a wide sequence number."""
    r.xadd("s", {"a": "1", "b": "x"}, id="1-1")
    r.xadd("s", {"q": "2"}, id="2-0")
    r.execute_command("XADD", "s", "3-0", "msg", "two\nlines", "k", "v")
    r.execute_command("XADD", "s", "4-0", "f", "tag\x01byte")
    r.execute_command("XADD", "s", "5-0", "a", "x", "b", "y", "a", "z")
    r.execute_command("XADD", "s", "6-%d" % ((1 << 40) + 3), "a", "3", "b", "wide")
    r.execute_command("XADD", "s", "7-0", "a", "\xff".encode("latin-1"), "b", "")


def raw(r, *args):
    """A command's reply as the server sent it (no redis-py callback)."""
    c = r.connection_pool.get_connection()
    try:
        c.send_command(*args)
        return c.read_response()
    finally:
        r.connection_pool.release(c)


def test_a_page_in_stored_form_decodes_to_the_entries_xrange_gives(served):
    r = redis_py.Redis(port=served.port)
    add_every_stored_form(r)
    reply = r.execute_command("XS.PAGE", codec.FORMAT_VERSION, "s", "-", "+", 100)
    assert reply[0] == codec.FORMAT_VERSION
    assert len(reply) == 2 + 2 * 7
    page = sp.page(reply, (0, 0), MAX, 100)
    got = [[b"%d-%d" % e.id, list(e.fields)] for e in codec.Entries(page.pairs, page.shapes)]
    assert got == raw(r, "XRANGE", "s", "-", "+")
    assert page.last == (7, 0)
    assert {codec.is_shaped(v) for _, v in page.pairs} == {True, False}   # both kinds were sent
    # XRANGE's bounds and count: an exclusive start, an end, a count
    reply = r.execute_command("XS.PAGE", codec.FORMAT_VERSION, "s", "(2-0", "6", 2)
    page = sp.page(reply, (2, 1), (6, (1 << 64) - 1), 2)
    assert [codec.id_from_entry_key(k) for k, _ in page.pairs] == [(3, 0), (4, 0)]
    assert r.execute_command("XS.PAGE", codec.FORMAT_VERSION, "nothing", "-", "+", 10) == [codec.FORMAT_VERSION, []]


def test_xs_page_refuses_another_format_a_bad_bound_and_a_count_out_of_range(served):
    r = redis_py.Redis(port=served.port)
    r.xadd("s", {"a": "1"})
    for args, text in [((3, "s", "-", "+", 10), "XS.PAGE format 3 is not supported (this server sends format 4)"),
                       (("x", "s", "-", "+", 10), "XS.PAGE format x is not supported"),
                       ((4, "s", "nope", "+", 10), "Invalid stream ID specified as stream command argument"),
                       ((4, "s", "-", "+", 0), "XS.PAGE count must be between 1 and 5000"),
                       ((4, "s", "-", "+", 5001), "XS.PAGE count must be between 1 and 5000"),
                       ((4, "s", "-", "+"), "wrong number of arguments for 'xs.page' command")]:
        with pytest.raises(redis_py.ResponseError, match=text.replace("(", r"\(").replace(")", r"\)")):
            r.execute_command("XS.PAGE", *args)
    assert r.execute_command("COMMAND", "INFO", "xs.page")["xs.page"]["arity"] == 6


def calls(r, name):
    return r.info("commandstats").get("cmdstat_" + name, {}).get("calls", 0)


def test_stored_pages_come_from_xs_serve_one_page_ahead_and_every_entry_once(served):
    r = redis_py.Redis(port=served.port)
    p = r.pipeline(transaction=False)
    for i in range(1, 1001):
        p.xadd("s", {"n": i}, id="%d-0" % i)
    p.execute()
    with Endpoint(served.url).connect() as conn:
        pages = conn.pages(b"s", (10, 0), (1000, 0), 100, stored=True)
        first = next(pages)
        assert conn.stored is True and type(first) is sp.Page and len(first) == 100
        deadline = time.monotonic() + 10
        while calls(r, "xs.page") < 2:            # the next page is made while the caller holds this one
            assert time.monotonic() < deadline, "the next page was not asked for ahead"
            time.sleep(0.01)
        rest = list(pages)
    got = [codec.id_from_entry_key(k) for page in [first] + rest for k, _ in page.pairs]
    assert got == [(n, 0) for n in range(10, 1001)]
    assert [len(x) for x in rest] == [100] * 8 + [91]
    assert calls(r, "xrange") == 0
    # a count above the server's limit is asked for as pages of the limit
    with Endpoint(served.url).connect() as conn:
        assert [len(x) for x in conn.pages(b"s", (1, 0), (1000, 0), 100000, stored=True)] == [1000]


def test_a_redis_server_is_read_with_xrange_when_it_has_no_xs_page_and_counts_no_error(redis):
    redis.flushall()
    r = redis_py.Redis(port=redis.port)
    for i in range(1, 251):
        r.xadd("s", {"n": i}, id="%d-0" % i)
    with Endpoint("redis://127.0.0.1:%d" % redis.port).connect() as conn:
        r.config_resetstat()                           # after the connection's handshake (its CLIENT SETINFO)
        pages = list(conn.pages(b"s", (1, 0), (250, 0), 100, stored=True))
        assert conn.stored is False
        assert [len(x) for x in pages] == [100, 100, 50]
        assert [bytes(e[0]) for x in pages for e in x] == [b"%d-0" % n for n in range(1, 251)]
        assert conn.call("XLEN", "s") == 250
    assert r.info("stats")["total_error_replies"] == 0         # asked COMMAND INFO, never a refused XS.PAGE
    assert calls(r, "xrange") == 3


# ========================================================= hostile replies


def good_reply():
    """A valid reply: two shaped entries, a msgpack record, a text record."""
    k = codec.entry_key
    s1 = codec.Shape(1, [b"a", b"b"])
    return [codec.FORMAT_VERSION, [[1, b"a", b"b"]],
            k(9, (1, 1)), s1.encode([b"1", b"x"]),
            k(9, (2, 0)), s1.encode([b"2", b"y"]),
            k(9, (3, 0)), b"\x00" + codec.packb([b"3-0", [b"m", b"a\nb"]]),
            k(9, (4, (1 << 40))), b"4-1099511627776\nf\nv"]


def test_the_good_reply_of_these_tests_is_read_whole():
    page = sp.page(good_reply(), (0, 0), MAX, 10)
    assert [e.fields for e in codec.Entries(page.pairs, page.shapes)] == [
        [b"a", b"1", b"b", b"x"], [b"a", b"2", b"b", b"y"], [b"m", b"a\nb"], [b"f", b"v"]]


_ANY = st.recursive(st.one_of(st.none(), st.integers(-3, 300), st.binary(max_size=30)),
                    lambda inner: st.lists(inner, max_size=5), max_leaves=20)


@st.composite
def mutated(draw):
    """The good reply with one to three of its parts replaced by anything
    (bytes with a bit changed, truncated or grown, other types, nested lists)."""
    reply = good_reply()
    for _ in range(draw(st.integers(1, 3))):
        path = [draw(st.integers(0, len(reply) - 1))]
        target = reply
        if type(reply[path[0]]) is list and reply[path[0]] and draw(st.booleans()):
            target = reply[path[0]]
            path = [draw(st.integers(0, len(target) - 1))]
        i = path[0]
        v = target[i]
        how = draw(st.sampled_from(["flip", "cut", "grow", "any", "drop"]))
        if how == "flip" and type(v) is bytes and v:
            j = draw(st.integers(0, len(v) - 1))
            target[i] = v[:j] + bytes([v[j] ^ (1 << draw(st.integers(0, 7)))]) + v[j + 1:]
        elif how == "cut" and type(v) is bytes:
            target[i] = v[:draw(st.integers(0, len(v)))]
        elif how == "grow" and type(v) is bytes:
            target[i] = v + draw(st.binary(min_size=1, max_size=10))
        elif how == "drop" and len(target) > 1:
            del target[i]
        else:
            target[i] = draw(_ANY)
    return reply


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_hostile_reply_is_refused_in_one_line_or_read_and_never_raises_anything_else(reply):
    pytest.importorskip("pyspark")
    from storage.spark.columns import _arrow_schema
    from storage.spark.options import XStreamError
    from storage.spark.reading import _stored_batch
    try:
        page = sp.page(reply, (0, 0), MAX, 10)
    except sp.BadPage as e:
        assert str(e) and "\n" not in str(e)
        return
    if not page.pairs:
        return
    for binary in (True, False):
        try:
            b = _stored_batch(_arrow_schema(binary, True, True), "s", page.pairs, page.shapes, binary, True,
                              b"s", "redis://evil")
        except XStreamError as e:
            assert "\n" not in str(e)
            continue
        assert b.num_rows == len(page.pairs)


class _Liar:
    """A server on a loopback port that answers each command with
    ``replies[NAME]`` (raw RESP), +OK for a name not there (redis-py's
    CLIENT SETINFO)."""

    def __init__(self, replies):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port = self.sock.getsockname()[1]
        self.replies = replies
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        c, _ = self.sock.accept()
        reader = hiredis.Reader()
        with c:
            while True:
                data = c.recv(65536)
                if not data:
                    return
                reader.feed(data)
                argv = reader.gets()
                while argv is not False:
                    c.sendall(self.replies.get(argv[0].upper(), b"+OK\r\n"))
                    argv = reader.gets()


_HAS = {b"COMMAND": b"*1\r\n*2\r\n$7\r\nxs.page\r\n:6\r\n"}       # COMMAND INFO XS.PAGE: it has it
_HAS_NOT = {b"COMMAND": b"*1\r\n$-1\r\n"}                           # redis-server's answer
_XRANGE_SAME = b"*2\r\n*2\r\n$3\r\n5-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n*2\r\n$3\r\n6-0\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"


@pytest.mark.parametrize("replies, text", [
    ({**_HAS, **{b"XS.PAGE": b"*4\r\n:4\r\n*0\r\n$3\r\nkey\r\n$2\r\nv1\r\n"}},
     "not xs's stored form (an entry key that is not one of xs's (3 bytes))"),
    ({**_HAS, **{b"XS.PAGE": b"*2\r\n:7\r\n*0\r\n"}}, "not xs's stored form (format 7, not 4)"),
    ({**_HAS, **{b"XS.PAGE": b"*1\r\n:4\r\n"}}, "not xs's stored form (not an array"),
    ({**_HAS, **{b"XS.PAGE": b"$-1\r\n"}}, "not xs's stored form (not an array"),
    # a server without XS.PAGE whose XRANGE sends the same page again and again: refused, never looped on
    ({**_HAS_NOT, **{b"XRANGE": _XRANGE_SAME}}, "an XRANGE page outside the range asked for"),
    # one that says it has XS.PAGE, then refuses this format: XRANGE, checked as well
    ({**_HAS, **{b"XS.PAGE": b"-ERR XS.PAGE format 4 is not supported (this server sends format 5)\r\n",
                   b"XRANGE": _XRANGE_SAME}}, "an XRANGE page outside the range asked for"),
    # an ID that is a number, not a bulk string (bytes(n) would make n bytes)
    ({**_HAS_NOT, **{b"XRANGE": b"*1\r\n*2\r\n:1000000000000\r\n*0\r\n"}},
     "an XRANGE page whose entries are not [ID, fields]"),
    ({**_HAS_NOT, **{b"XRANGE": b"*1\r\n*2\r\n$3\r\nx-y\r\n*0\r\n"}}, "an entry ID that is not ms-seq"),
    # a proxy that refuses COMMAND
    ({b"COMMAND": b"-unsupported command 'COMMAND'\r\n", b"XRANGE": b"*1\r\n:3\r\n"},
     "an XRANGE page whose entries are not [ID, fields]"),
])
def test_a_server_that_lies_about_its_pages_fails_the_read_naming_itself(replies, text):
    liar = _Liar(replies)
    with Endpoint("redis://127.0.0.1:%d" % liar.port).connect() as conn:
        with pytest.raises(NetworkError) as e:
            list(conn.pages(b"s", (0, 0), MAX, 2, stored=True))
    assert str(e.value).startswith("xstream: redis://127.0.0.1:%d stream 's': the server sent" % liar.port)
    assert text in str(e.value)


@pytest.mark.parametrize("value, text", [
    (b"\x00" + codec.packb([b"1-0", [b"f", 1 << 28]]), "a msgpack record that is not"),   # not a 256 MB value
    (b"\x00" + codec.packb([b"1-0", [b"f"]]), "a msgpack record that is not"),
    (b"\x00\xc1", "a msgpack record that is not"),
    (b"1-0\nf", "a record that is not"),
    (b"\x09x", "a value of an unknown kind (first byte 9)"),
])
def test_a_value_a_page_cannot_hold_is_refused_before_it_is_decoded(value, text):
    reply = [codec.FORMAT_VERSION, [], codec.entry_key(1, (1, 0)), value]
    with pytest.raises(sp.BadPage, match=re.escape(text)):
        sp.page(reply, (0, 0), MAX, 10)


def test_keys_whose_lengths_only_add_up_to_short_keys_are_refused():
    k = codec.entry_key(1, (1, 0))
    reply = [codec.FORMAT_VERSION, [], k[:12], b"1-0\nf\nv", k + b"\0" * 8, b"1-0\nf\nv"]
    with pytest.raises(sp.BadPage, match="an entry key that is not one of xs's"):
        sp.page(reply, (0, 0), MAX, 10)


def test_a_damaged_shaped_value_fails_the_read_naming_endpoint_and_stream():
    pytest.importorskip("pyspark")
    from storage.spark.columns import _arrow_schema
    from storage.spark.options import XStreamError
    from storage.spark.reading import _stored_batch
    page = sp.page([codec.FORMAT_VERSION, [[1, b"a", b"b"]], codec.entry_key(1, (1, 0)), b"\x01only"],
                   (0, 0), MAX, 10)
    with pytest.raises(XStreamError) as e:
        _stored_batch(_arrow_schema(False, False, True), "s", page.pairs, page.shapes, False, False, b"s",
                      "redis://edge-1:6380")
    assert str(e.value) == ("xstream: redis://edge-1:6380 stream 's': the server sent an entry that cannot be "
                            "read (a stored entry of field set 1 does not hold 2 values)")


def test_the_reader_asks_for_pages_the_server_serves():
    from xstream_cli.server import stored_page
    assert sp.MAX_COUNT == stored_page.MAX_COUNT
    assert sp.unsupported(redis_py.ResponseError("unknown command 'XS.PAGE', with args beginning with: ..."))
    assert sp.unsupported(redis_py.ResponseError("XS.PAGE format 4 is not supported (this server sends format 5)"))
    assert not sp.unsupported(redis_py.ResponseError("NOAUTH Authentication required."))
