"""The request reader of ``xs serve`` (xstream_cli.server.resp.RequestParser)
gives back exactly the commands a client encoded, however the bytes are
cut into reads: its fast path (whole requests found with one split on
CRLF, argument headers checked against a table) and its general loop
(arguments holding CRLF, 4 KB and longer arguments, incomplete requests)
must agree.  An argument over the bulk limit is a protocol error."""
from hypothesis import given, settings
from hypothesis import strategies as st

from xstream_cli.server.resp import ProtocolError, RequestParser

# arguments that stress the fast path: empty, CRLF inside, things that look
# like headers, and lengths around the header table's 4 KB edge
ARG = st.one_of(
    st.binary(max_size=12),
    st.sampled_from([b"", b"\r\n", b"$1", b"*2", b"\r\n$3\r\nabc", b"a\rb", b"a\nb", b"*1\r\n$1\r\nx"]),
    st.integers(4090, 4100).map(lambda n: b"x" * n),
)
COMMANDS = st.lists(st.lists(ARG, min_size=1, max_size=5), max_size=8)


def wire(commands):
    return b"".join(b"*%d\r\n" % len(c) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in c) for c in commands)


def read(data, cuts, max_bulk=512 << 20):
    p = RequestParser(max_bulk)
    got = []
    points = sorted({min(c, len(data)) for c in cuts})
    for a, b in zip([0] + points, points + [len(data)]):
        p.feed(data[a:b])
        got += p.commands()
    return got, p.pending()


@settings(max_examples=400, deadline=None)
@given(COMMANDS, st.lists(st.integers(0, 20000), max_size=4))
def test_every_command_comes_back_whole_however_the_bytes_are_cut(commands, cuts):
    data = wire(commands)
    got, pending = read(data, cuts)
    assert got == commands
    assert pending == 0


@settings(max_examples=200, deadline=None)
@given(COMMANDS, st.lists(st.integers(0, 20000), max_size=3))
def test_a_request_cut_short_waits_for_the_rest(commands, cuts):
    data = wire(commands + [[b"XADD", b"s", b"*", b"f", b"v"]])
    got, pending = read(data[:-3], cuts)
    assert got == commands
    assert pending > 0


def test_a_header_that_does_not_match_the_token_leaves_it_to_the_general_loop():
    # "$4" covers "ab\r\n": the split on CRLF sees "ab", the header says 4
    got, pending = read(b"*1\r\n$4\r\nab\r\n\r\n*1\r\n$4\r\nPING\r\n", [])
    assert got == [[b"ab\r\n"], [b"PING"]] and pending == 0


def test_an_argument_over_the_bulk_limit_is_a_protocol_error():
    for size in (100, 5000):
        got, _ = read(wire([[b"PING"], [b"ECHO", b"y" * size]]), [], max_bulk=size - 1)
        assert got[0] == [b"PING"]
        assert isinstance(got[1], ProtocolError) and "invalid bulk length" in str(got[1])
        got, _ = read(wire([[b"ECHO", b"y" * size]]), [], max_bulk=size)
        assert got == [[b"ECHO", b"y" * size]]


# headers Python's int() reads but Redis's string2ll refuses (issue 29, item 13)
LOOSE_COUNTS = [b"* 1", b"*+1", b"*1_0", b"*01", b"*1 ", b"*\xd9\xa1", b"*"]
LOOSE_LENGTHS = [b"$+4", b"$ 4", b"$0_4", b"$04", b"$4 ", b"$"]


def test_a_loose_multibulk_count_is_a_protocol_error_as_in_redis():
    for h in LOOSE_COUNTS:
        got, _ = read(h + b"\r\n$4\r\nPING\r\n", [])
        assert len(got) == 1 and isinstance(got[0], ProtocolError), h
        assert str(got[0]) == "Protocol error: invalid multibulk length", h


def test_a_loose_bulk_length_is_a_protocol_error_as_in_redis():
    for h in LOOSE_LENGTHS:
        got, _ = read(b"*1\r\n" + h + b"\r\nPING\r\n", [])
        assert len(got) == 1 and isinstance(got[0], ProtocolError), h
        assert str(got[0]) == "Protocol error: invalid bulk length", h


def test_before_auth_a_request_is_held_to_redis_small_limits():
    """With a password set and no AUTH yet: at most 10 arguments of 16 KB,
    as redis-server (issue 29, item 6); the same requests pass once
    authenticated."""
    big_count = b"*11\r\n" + b"$1\r\nx\r\n" * 11
    big_bulk = b"*2\r\n$4\r\nECHO\r\n$16385\r\n" + b"x" * 16385 + b"\r\n"
    for data, text in ((big_count, "Protocol error: unauthenticated multibulk length"),
                       (big_bulk, "Protocol error: unauthenticated bulk length")):
        p = RequestParser()
        p.unauthed = True
        p.feed(data)
        got = p.commands(1)
        assert len(got) == 1 and isinstance(got[0], ProtocolError) and str(got[0]) == text
        p = RequestParser()
        p.feed(data)
        assert p.commands() == [[b"x"] * 11] if data is big_count else [[b"ECHO", b"x" * 16385]]
    p = RequestParser()
    p.unauthed = True
    p.feed(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" + big_count)
    assert p.commands(1) == [[b"AUTH", b"pw"]]      # one at a time: AUTH may lift the limits first
    p.unauthed = False
    assert p.commands(1) == [[b"x"] * 11]


def test_a_long_pipeline_is_taken_in_bounded_steps_in_order():
    cmds = [[b"XADD", b"s", b"*", b"n", b"%d" % i] for i in range(5000)] + [[b"PING"]] * 3
    data = wire(cmds) + b"PING a\nPING b\r\n"
    p = RequestParser()
    p.feed(data)
    got = []
    while True:
        step = p.commands(1024)
        assert len(step) <= 1024
        if not step:
            break
        got += step
    assert got == cmds + [[b"PING", b"a"], [b"PING", b"b"]]


def test_many_inline_lines_come_back_whole_however_they_are_cut():
    lines = [b"PING %d" % i for i in range(3000)]
    data = b"".join(l + (b"\r\n" if i % 2 else b"\n") for i, l in enumerate(lines))
    got, pending = read(data, [1, 5000, 5001, 20000])
    assert got == [l.split() for l in lines] and pending == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([10, 100, 1000, 70000]), min_size=50, max_size=400),
       st.sampled_from([1, 7, 1024, None]), st.lists(st.integers(0, 4_000_000), max_size=3))
def test_steps_and_windows_give_back_every_command_whole(sizes, limit, cuts):
    """Commands bigger and smaller than the fast path's window, read in
    steps of ``limit`` and fed in pieces: all come back, in order."""
    cmds = [[b"ECHO", bytes([65 + i % 26]) * n] for i, n in enumerate(sizes)]
    data = wire(cmds)
    p = RequestParser()
    got = []
    points = sorted({min(c, len(data)) for c in cuts})
    for a, b in zip([0] + points, points + [len(data)]):
        p.feed(data[a:b])
        while True:
            step = p.commands(limit)
            if limit is not None:
                assert len(step) <= limit
            if not step:
                break
            got += step
    assert got == cmds and p.pending() == 0
