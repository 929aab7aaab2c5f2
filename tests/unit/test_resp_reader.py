"""The request reader of ``xs serve`` (xstream_cli.server.resp.RequestParser)
gives back exactly the commands a client encoded, however the bytes are
cut into reads: its fast paths (hiredis's C parser with the ``serve``
extra; without it, whole requests found with one split on CRLF, argument
headers checked against a table) and its general loop (arguments holding
CRLF, 4 KB and longer arguments, incomplete requests, inline commands)
must agree.  An argument over the bulk limit is a protocol error.  Every
test runs with both readers (``native``: hiredis; skipped when it is not
installed), and the two must give the same commands and the same
protocol errors for the same bytes."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xstream_cli.server import resp
from xstream_cli.server.resp import ProtocolError, RequestParser

NATIVE = [False, pytest.param(True, marks=pytest.mark.skipif(resp.HIREDIS is None,
                                                             reason="hiredis (the serve extra) is not installed"))]
both = pytest.mark.parametrize("native", NATIVE, ids=lambda v: "hiredis" if v else "python")

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


def read(data, cuts, max_bulk=512 << 20, native=False):
    p = RequestParser(max_bulk, native=native)
    got = []
    points = sorted({min(c, len(data)) for c in cuts})
    for a, b in zip([0] + points, points + [len(data)]):
        p.feed(data[a:b])
        got += p.commands()
    return got, p.pending()


@both
@settings(max_examples=400, deadline=None)
@given(COMMANDS, st.lists(st.integers(0, 20000), max_size=4))
def test_every_command_comes_back_whole_however_the_bytes_are_cut(native, commands, cuts):
    data = wire(commands)
    got, pending = read(data, cuts, native=native)
    assert got == commands
    assert pending == 0


@both
@settings(max_examples=200, deadline=None)
@given(COMMANDS, st.lists(st.integers(0, 20000), max_size=3))
def test_a_request_cut_short_waits_for_the_rest(native, commands, cuts):
    data = wire(commands + [[b"XADD", b"s", b"*", b"f", b"v"]])
    got, pending = read(data[:-3], cuts, native=native)
    assert got == commands
    assert pending > 0


@both
def test_a_header_that_does_not_match_the_token_leaves_it_to_the_general_loop(native):
    # "$4" covers "ab\r\n": the split on CRLF sees "ab", the header says 4
    got, pending = read(b"*1\r\n$4\r\nab\r\n\r\n*1\r\n$4\r\nPING\r\n", [], native=native)
    assert got == [[b"ab\r\n"], [b"PING"]] and pending == 0


@both
def test_an_argument_over_the_bulk_limit_is_a_protocol_error(native):
    for size in (100, 5000):
        got, _ = read(wire([[b"PING"], [b"ECHO", b"y" * size]]), [], max_bulk=size - 1, native=native)
        assert got[0] == [b"PING"]
        assert isinstance(got[1], ProtocolError) and "invalid bulk length" in str(got[1])
        got, _ = read(wire([[b"ECHO", b"y" * size]]), [], max_bulk=size, native=native)
        assert got == [[b"ECHO", b"y" * size]]


# headers Python's int() reads but Redis's string2ll refuses (issue 29, item 13)
LOOSE_COUNTS = [b"* 1", b"*+1", b"*1_0", b"*01", b"*1 ", b"*\xd9\xa1", b"*"]
LOOSE_LENGTHS = [b"$+4", b"$ 4", b"$0_4", b"$04", b"$4 ", b"$"]


@both
def test_a_loose_multibulk_count_is_a_protocol_error_as_in_redis(native):
    for h in LOOSE_COUNTS:
        got, _ = read(h + b"\r\n$4\r\nPING\r\n", [], native=native)
        assert len(got) == 1 and isinstance(got[0], ProtocolError), h
        assert str(got[0]) == "Protocol error: invalid multibulk length", h


@both
def test_a_loose_bulk_length_is_a_protocol_error_as_in_redis(native):
    for h in LOOSE_LENGTHS:
        got, _ = read(b"*1\r\n" + h + b"\r\nPING\r\n", [], native=native)
        assert len(got) == 1 and isinstance(got[0], ProtocolError), h
        assert str(got[0]) == "Protocol error: invalid bulk length", h


# Redis finds a line's end with strchr (networking.c): a multibulk header
# ends at its first CR, the byte after it skipped whatever it is; a NUL
# before the end hides it (the request waits, up to the 64 KB limit); a
# header is whole before its first byte is checked.  Against redis-server:
# tests/compat/test_wire_fuzz_vs_redis.py
STRCHR = [
    (b"*1\rX$4\r\nPING\r\n", [[b"PING"]]),
    (b"*1\r\n$4\rXPING\r\n", [[b"PING"]]),
    (b"*2\r\n$4\r\nECHO\r\n$1\r\rx\r\n", [[b"ECHO", b"x"]]),
    (b"PING\x00\r\nPING\r\n", []),
    (b"*1\x00\r\n$4\r\nPING\r\n", []),
    (b"*1\r\n$4\x00\r\nPING\r\n", []),
    (b"*2\r\n$4\r\nECHO\r\n+hi", []),
    (b"*1\r\n\xff4\r\n", ["Protocol error: expected '$', got '\udcff'"]),     # written as the byte 0xff
    (b"PING\x00" + b"x" * 70000 + b"\r\n", ["Protocol error: too big inline request"]),
]


@both
@pytest.mark.parametrize("data,want", STRCHR, ids=range(len(STRCHR)))
def test_a_line_ends_where_redis_strchr_finds_it(native, data, want):
    for cuts in ([], list(range(0, len(data), 1 + len(data) // 200))):
        got, _ = read(data, cuts, native=native)
        assert [str(x) if isinstance(x, ProtocolError) else x for x in got] == want, cuts


@both
@pytest.mark.parametrize("data,text", [(b"*1\r\n$600000000\r\n", "Protocol error: invalid bulk length"),
                                       (b"*2000000\r\n", "Protocol error: unauthenticated multibulk length")])
def test_before_auth_redis_own_limit_is_checked_first(native, data, text):
    p = RequestParser(native=native)
    p.unauthed = True
    p.feed(data)
    got = p.commands()
    assert len(got) == 1 and str(got[0]) == text


@both
def test_before_auth_a_request_is_held_to_redis_small_limits(native):
    """With a password set and no AUTH yet: at most 10 arguments of 16 KB,
    as redis-server (issue 29, item 6); the same requests pass once
    authenticated."""
    big_count = b"*11\r\n" + b"$1\r\nx\r\n" * 11
    big_bulk = b"*2\r\n$4\r\nECHO\r\n$16385\r\n" + b"x" * 16385 + b"\r\n"
    for data, text in ((big_count, "Protocol error: unauthenticated multibulk length"),
                       (big_bulk, "Protocol error: unauthenticated bulk length")):
        p = RequestParser(native=native)
        p.unauthed = True
        p.feed(data)
        got = p.commands(1)
        assert len(got) == 1 and isinstance(got[0], ProtocolError) and str(got[0]) == text
        p = RequestParser(native=native)
        p.feed(data)
        assert p.commands() == [[b"x"] * 11] if data is big_count else [[b"ECHO", b"x" * 16385]]
    p = RequestParser(native=native)
    p.unauthed = True
    p.feed(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n" + big_count)
    assert p.commands(1) == [[b"AUTH", b"pw"]]      # one at a time: AUTH may lift the limits first
    p.unauthed = False
    assert p.commands(1) == [[b"x"] * 11]


@both
def test_a_long_pipeline_is_taken_in_bounded_steps_in_order(native):
    cmds = [[b"XADD", b"s", b"*", b"n", b"%d" % i] for i in range(5000)] + [[b"PING"]] * 3
    data = wire(cmds) + b"PING a\nPING b\r\n"
    p = RequestParser(native=native)
    p.feed(data)
    got = []
    while True:
        step = p.commands(1024)
        assert len(step) <= 1024
        if not step:
            break
        got += step
    assert got == cmds + [[b"PING", b"a"], [b"PING", b"b"]]


@both
def test_many_inline_lines_come_back_whole_however_they_are_cut(native):
    lines = [b"PING %d" % i for i in range(3000)]
    data = b"".join(l + (b"\r\n" if i % 2 else b"\n") for i, l in enumerate(lines))
    got, pending = read(data, [1, 5000, 5001, 20000], native=native)
    assert got == [l.split() for l in lines] and pending == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([10, 100, 1000, 70000]), min_size=50, max_size=400),
       st.sampled_from([1, 7, 1024, None]), st.lists(st.integers(0, 4_000_000), max_size=3))
@both
def test_steps_and_windows_give_back_every_command_whole(native, sizes, limit, cuts):
    """Commands bigger and smaller than the fast path's window, read in
    steps of ``limit`` and fed in pieces: all come back, in order."""
    cmds = [[b"ECHO", bytes([65 + i % 26]) * n] for i, n in enumerate(sizes)]
    data = wire(cmds)
    p = RequestParser(native=native)
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


# ----------------------------------------------- hiredis and Python agree

# a pipeline with what each fast path leaves to the general loop: CRLF in
# an argument, an empty one, one of 4 KB, an inline command, *0 and *-1
# (skipped, as Redis does), a quoted inline command
PIPELINE = (wire([[b"XADD", b"s", b"*", b"f", b"v"], [b"ECHO", b"a\r\nb"], [b"ECHO", b""]])
            + b"*0\r\n*-1\r\n" + wire([[b"ECHO", b"x" * 4096]]) + b"PING\r\n" + b"ECHO \"a b\"\n"
            + wire([[b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"STREAMS", b"s", b">"]] * 3))
PIPELINE_COMMANDS = [[b"XADD", b"s", b"*", b"f", b"v"], [b"ECHO", b"a\r\nb"], [b"ECHO", b""], [b"ECHO", b"x" * 4096],
                     [b"PING"], [b"ECHO", b"a b"]] + [[b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1",
                                                         b"STREAMS", b"s", b">"]] * 3


@both
def test_a_pipeline_cut_at_every_byte_comes_back_whole(native):
    for i in range(len(PIPELINE) + 1):
        got, pending = read(PIPELINE, [i], native=native)
        assert got == PIPELINE_COMMANDS and pending == 0, i


@both
def test_a_pipeline_fed_byte_by_byte_comes_back_whole(native):
    p = RequestParser(native=native)
    got = []
    for i in range(len(PIPELINE)):
        p.feed(PIPELINE[i:i + 1])
        got += p.commands()
    assert got == PIPELINE_COMMANDS and p.pending() == 0


# requests Redis refuses, some of which hiredis would read as commands (a
# simple string, a big number, a verbatim string or an attribute among
# the arguments come back as bytes, or vanish): each must give Redis's
# protocol error, after the commands before it
BAD = [
    (b"*2\r\n$4\r\nECHO\r\n+hi\r\n", "Protocol error: expected '$', got '+'"),
    (b"*2\r\n$4\r\nECHO\r\n:5\r\n", "Protocol error: expected '$', got ':'"),
    (b"*2\r\n$4\r\nECHO\r\n(12\r\n", "Protocol error: expected '$', got '('"),
    (b"*2\r\n$4\r\nECHO\r\n=6\r\ntxt:hi\r\n", "Protocol error: expected '$', got '='"),
    (b"*2\r\n$4\r\nECHO\r\n|1\r\n$1\r\na\r\n$1\r\nb\r\n$2\r\nhi\r\n", "Protocol error: expected '$', got '|'"),
    (b"*2\r\n$4\r\nECHO\r\n*1\r\n$2\r\nhi\r\n", "Protocol error: expected '$', got '*'"),
    (b"*2\r\n$4\r\nECHO\r\n%1\r\n$1\r\na\r\n$1\r\nb\r\n", "Protocol error: expected '$', got '%'"),
    (b"*2\r\n$4\r\nECHO\r\n~1\r\n$1\r\na\r\n", "Protocol error: expected '$', got '~'"),
    (b"*2\r\n$4\r\nECHO\r\n>1\r\n$1\r\na\r\n", "Protocol error: expected '$', got '>'"),
    (b"*2\r\n$4\r\nECHO\r\n_\r\n", "Protocol error: expected '$', got '_'"),
    (b"*2\r\n$4\r\nECHO\r\n,1.5\r\n", "Protocol error: expected '$', got ','"),
    (b"*2\r\n$4\r\nECHO\r\n#t\r\n", "Protocol error: expected '$', got '#'"),
    (b"*2\r\n$4\r\nECHO\r\n-ERR x\r\n", "Protocol error: expected '$', got '-'"),
    (b"*2\r\n$4\r\nECHO\r\n!3\r\nerr\r\n", "Protocol error: expected '$', got '!'"),
    (b"*2\r\n$4\r\nECHO\r\n$-1\r\n", "Protocol error: invalid bulk length"),
    (b"*1\r\n$-5\r\n", "Protocol error: invalid bulk length"),
    (b"*2\r\n$4\r\nECHO\r\n$01\r\nx\r\n", "Protocol error: invalid bulk length"),
    (b"*01\r\n$4\r\nPING\r\n", "Protocol error: invalid multibulk length"),
    (b"*1048577\r\n", "Protocol error: invalid multibulk length"),
    (b'ECHO "a\r\n', "Protocol error: unbalanced quotes in request"),
    # '+' and '=' arguments whose lengths as bulk strings would add up to
    # the request's true length
    (b"*5\r\n$4\r\nECHO\r\n=5\r\ntxt:a\r\n+b\r\n=5\r\ntxt:c\r\n+d\r\n", "Protocol error: expected '$', got '='"),
]


@both
@pytest.mark.parametrize("data,text", BAD, ids=range(len(BAD)))
def test_a_request_redis_refuses_is_its_protocol_error(data, text, native):
    before = wire([[b"PING"], [b"ECHO", b"ok"]])
    for cuts in ([], [len(before)], [len(before) + 3], list(range(len(before) + len(data)))):
        got, _ = read(before + data + wire([[b"PING"]]), cuts, native=native)
        assert got[:2] == [[b"PING"], [b"ECHO", b"ok"]], cuts
        assert len(got) == 3 and isinstance(got[2], ProtocolError) and str(got[2]) == text, (cuts, got)


@both
@pytest.mark.parametrize("tail", [b":0\r\n", b":0\r\n" + wire([[b"PING"]]), b":7\r\n"])
def test_an_inline_command_that_hiredis_reads_as_an_integer_is_not_lost(native, tail):
    """``:0`` after a request, as the last line of a read: an inline
    command to Redis, an integer 0 to hiredis -- equal to False, which
    its reader answers when no whole request is left."""
    got, left = read(wire([[b"PING"]]) + tail, [], native=native)
    assert got[:2] == [[b"PING"], [tail[:2]]] and left == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(COMMANDS.map(wire), st.sampled_from([d for d, _ in BAD + STRCHR[:-1]]),
                          st.sampled_from([b"PING\r\n", b"*0\r\n", b"*-1\r\n", b"ECHO 'x y'\n", b":0\r\n",
                                           b":7\r\n"])), max_size=6),
       st.lists(st.integers(0, 20000), max_size=4), st.sampled_from([1, 3, None]))
def test_hiredis_and_python_read_the_same_commands_and_errors(parts, cuts, limit):
    """Any mix of good and bad requests, however cut and in steps of any
    size: the two readers give the same list, the same protocol error
    texts, the same bytes left.  (``:0``, an inline command to Redis, is
    an integer 0 to hiredis: equal to False, what its reader once
    answered for "no whole request yet".)"""
    if resp.HIREDIS is None:
        pytest.skip("hiredis (the serve extra) is not installed")
    data = b"".join(parts)
    results = []
    for native in (False, True):
        p = RequestParser(native=native)
        got = []
        points = sorted({min(c, len(data)) for c in cuts})
        for a, b in zip([0] + points, points + [len(data)]):
            p.feed(data[a:b])
            while True:
                step = p.commands(limit)
                got += [str(x) if isinstance(x, ProtocolError) else x for x in step]
                if not step or isinstance(step[-1], ProtocolError):
                    break
        results.append((got, p.pending(), p.broken))
    assert results[0] == results[1]


def test_the_serve_extra_reads_with_hiredis_when_installed():
    p = RequestParser()
    assert p.native is (resp.HIREDIS is not None)
    assert RequestParser(native=False).native is False


@both
def test_well_formed_requests_never_reach_the_general_loop(native, monkeypatch):
    """A pipeline of whole, plain requests is read by the fast path
    alone (hiredis's, or the split on CRLF), in steps of any size."""
    def general(self, out):
        raise AssertionError("the general loop read a well-formed request")
    monkeypatch.setattr(RequestParser, "_one", general)
    cmds = [[b"XADD", b"s", b"*", b"n", b"%d" % i] for i in range(3000)] + [[b"XACK", b"s", b"g", b"1-1"]] * 5
    # arguments that begin as another type's header would: a worker's
    # XREADGROUP ... > above all
    cmds += [[b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"STREAMS", b"s", b">"]] * 40
    cmds += [[b"ECHO", bytes([m]) + b"1"] for m in b"+(=|~>%!-:_,#"] + [[b"ECHO", b"=5", b"txt:a", b"+b"]]
    p = RequestParser(native=native)
    p.feed(wire(cmds))
    got = []
    while True:
        step = p.commands(1024)
        if not step:
            break
        got += step
    assert got == cmds and p.pending() == 0


# RequestParser.lone: a read taken whole, without buffering, when it is
# exactly one request in the form clients write

@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(COMMANDS.map(wire), st.sampled_from([d for d, _ in BAD + STRCHR[:-1]]),
                          st.sampled_from([b"PING\r\n", b"*0\r\n", b"*-1\r\n", b"*1\r\n$4\r\nPING\r\n",
                                           b"*2\r\n$4\r\nECHO\r\n$1\r\n>\r\n", b"*1\r\n$4\r\nPING\r"])),
                max_size=6))
def test_a_read_taken_whole_is_what_the_general_reader_gives(parts):
    """Whatever the bytes, ``lone`` either declines (None) or gives
    exactly the one command the reader gives for them, with nothing left
    over and no error."""
    data = b"".join(parts)
    got = RequestParser(native=False).lone(data)
    if got is None:
        return
    p = RequestParser(native=False)
    p.feed(data)
    assert got == p.commands() and p.pending() == 0
    assert len(got) == 1 and all(type(a) is bytes for a in got[0])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=6))
def test_one_request_is_taken_whole_unless_an_argument_holds_a_crlf(argv):
    got = RequestParser().lone(wire([argv]))
    assert got == ([argv] if not any(b"\r\n" in a for a in argv) else None)


def test_a_read_is_not_taken_whole_when_the_reader_holds_bytes_or_waits_for_auth():
    ping = wire([[b"PING"]])
    assert RequestParser().lone(ping) == [[b"PING"]]
    p = RequestParser()
    p.feed(b"*2\r\n$4\r\nECHO\r\n")              # a request cut short: its rest comes next
    assert p.commands() == [] and p.lone(ping) is None
    p = RequestParser()
    p.unauthed = True                            # before AUTH: one at a time, Redis's small limits
    assert p.lone(ping) is None
    assert RequestParser().lone(bytearray(ping)) is None
    assert RequestParser(max_bulk=4).lone(ping) is None       # longer than the bulk limit: checked
    big = [b"ECHO", b"x" * 5000]                                # 4 KB and more: headers made, not looked up
    assert RequestParser().lone(wire([big])) == [big]
    assert RequestParser().lone(wire([[b"ECHO", b"x" * (20 << 10)]])) is None   # longer than LONE_MAX
    assert RequestParser().lone(ping + b"*1\r\n") is None      # a request cut short after it
    assert RequestParser().lone(ping * 2) is None               # a pipeline: hiredis reads it
    assert RequestParser().lone(b"*1\r\n$04\r\nPING\r\n") is None   # not the form clients write
