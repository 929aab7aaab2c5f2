"""Transactions through ``xs serve`` against a real redis-server, byte
for byte.

Hypothesis makes a sequence of 5 to 30 requests, each sent on one of
two connections (A and B) and answered before the next: MULTI, EXEC,
DISCARD, WATCH, UNWATCH (also where Redis refuses them: nested MULTI,
EXEC or DISCARD without MULTI, WATCH inside MULTI), and stream and key
commands inside and outside MULTI: XADD with explicit IDs (equal to or
below the top: an error at EXEC, not at queueing), with options
(MAXLEN, MINID, NOMKSTREAM, LIMIT), runs of plain ``XADD key * f v``
(queued at once by ``jobs.queue_adds``), XLEN, XRANGE, XDEL, XTRIM,
XGROUP CREATE / DESTROY, XREADGROUP without BLOCK, XACK, XPENDING's
summary, XCLAIM, DEL, EXISTS, TYPE, PING, ECHO; wrong arities, unknown
commands and subcommands (refused at queueing: EXEC answers EXECABORT)
and bad options only found when the command runs.  B writes the keys A
watches, so WATCH aborts happen.  The same sequence goes to redis-server
and to two ``xs serve`` (the hiredis reader, and XS_SERVE_PURE=1), in
RESP2 or in RESP3 (after HELLO 3, whose own reply differs by design and
is not compared).  Every reply must be Redis's bytes; afterwards the
state must be too (TYPE, XRANGE and XPENDING of every key and group, on
a fresh connection), and the servers' logs must hold no traceback.

The IDs of ``*`` adds hold the time: each such ID (13 digits of
milliseconds) becomes one mark, ``<auto id>``, on every server (which
of them are equal depends on the milliseconds: two streams' adds of one
millisecond share IDs); the order of the entries is still compared, by
XRANGE.

Not generated, on purpose:

* XADD with a 13-digit explicit ID (it would look like an automatic one);
* XINFO (entries-read and lag follow Redis 8's rules in xs, and 7.0's
  in redis-server: tests/fuzz_diff.py INTENDED_DIFFERENCES,
  lag_and_entries_read_redis8_rules), XGROUP CREATECONSUMER /
  DELCONSUMER and XINFO CONSUMERS (xs creates a consumer on every
  XREADGROUP and XCLAIM, as Redis 7.2+; 7.0 only when it delivered or
  claimed: consumer_created_by_every_read_or_claim) -- XPENDING's
  summary lists only consumers with pending entries, so it is compared;
* XPENDING's extended form (idle times), XREADGROUP with BLOCK,
  XGROUP CREATE with ENTRIESREAD (intended difference), an unbalanced
  STREAMS list of XREADGROUP (its error text is Redis 7.4's in xs:
  unbalanced_streams_error_text), HELLO's reply (server version, client
  ID).
"""
import re
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import Resp3
from tests.harness.served import Served, wire
from xstream_cli.server.resp import reply_end

pytestmark = pytest.mark.differential

TIMEOUT = 10.0
KEYS = [b"s", b"t"]
GROUPS = [b"g", b"h"]


# ------------------------------------------------------------------ servers

class Conn:
    """A connection that sends one request and reads its one whole reply."""

    def __init__(self, port, proto):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        if proto == 3:
            self.call([b"HELLO", b"3"])          # its reply differs by design: not compared

    def call(self, *commands):
        """``commands`` sent at once (a pipeline); their replies."""
        self.sock.sendall(wire(*commands))
        out = []
        while len(out) < len(commands):
            end = reply_end(self.buf)
            if end >= 0:
                out.append(self.buf[:end])
                self.buf = self.buf[end:]
                continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                out.append(self.buf + b"<closed>")
                break
            self.buf += chunk
        return b"".join(out)

    def close(self):
        self.sock.close()


_AUTO_ID = re.compile(rb"\$\d+\r\n(\d{13}-\d+)\r\n")


def unstamped(reply):
    """``reply`` with every automatic ID (13 digits of milliseconds) one mark."""
    return _AUTO_ID.sub(b"<auto id>", reply)


class Servers:
    """redis-server and the two xs servers (hiredis, pure-Python reader)."""

    def __init__(self, redis, xs):
        self.ports = [redis.port] + [s.port for s in xs]
        self.names = ["redis-server", "xs serve (hiredis)", "xs serve (pure Python)"]
        self.ctl = [redis] + [Resp3(s.port) for s in xs]
        self.xs = xs
        self.seen = [0] * len(xs)

    def new_log(self):
        """What the xs servers logged since the last look."""
        logs = [s.log() for s in self.xs]
        new = "".join(text[k:] for text, k in zip(logs, self.seen))
        self.seen = [len(text) for text in logs]
        return new

    def run(self, steps, proto):
        """``steps`` ((connection 0 or 1, commands), ...) on every server,
        each on a fresh pair of connections after FLUSHALL, then the
        state; for each server the list of (request, reply) and its
        state, automatic IDs unstamped."""
        for c in self.ctl:
            assert c.call("FLUSHALL") == "OK"
        pairs = [(Conn(p, proto), Conn(p, proto)) for p in self.ports]
        out = [[] for _ in self.ports]
        try:
            for who, commands in steps:
                said = b"AB"[who:who + 1] + b": " + b" | ".join(b" ".join(argv) for argv in commands)
                for i, pair in enumerate(pairs):
                    out[i].append((said, unstamped(pair[who].call(*commands))))
            for i, p in enumerate(self.ports):
                look = Conn(p, 3)
                try:
                    out[i].append((b"state", unstamped(look.call(*STATE))))
                finally:
                    look.close()
        finally:
            for pair in pairs:
                for c in pair:
                    c.close()
        return out


STATE = ([[b"TYPE", k] for k in KEYS] + [[b"XRANGE", k, b"-", b"+"] for k in KEYS]
         + [[b"XPENDING", k, g] for k in KEYS for g in GROUPS])


@pytest.fixture(scope="module")
def servers(redis, tmp_path_factory):
    base = tmp_path_factory.mktemp("tx")
    xs = [Served(base / "native", loglevel="info"),
          Served(base / "pure", env={"XS_SERVE_PURE": "1"}, loglevel="info")]
    try:
        yield Servers(redis, xs)
    finally:
        for s in xs:
            s.stop()


def assert_same(servers, steps, proto=2):
    """The replies and the state of ``steps`` are redis-server's on both
    xs servers; the replies."""
    redis, *ours = servers.run(steps, proto)
    log = servers.new_log()
    for name, got in zip(servers.names[1:], ours):
        for (request, want), (_, have) in zip(redis, got):
            assert have == want, "%s differs from redis-server at %r in\n%s" % (name, request, _script(redis))
    assert "Traceback" not in log and "Logging error" not in log, log[-3000:]
    return [r for _, r in redis]


def _script(replies):
    return "\n".join("  %r -> %r" % (q, r[:300]) for q, r in replies)


# ---------------------------------------------------------------- requests

KEY = st.sampled_from(KEYS)
GROUP = st.sampled_from(GROUPS)
CONSUMER = st.sampled_from([b"c1", b"c2"])
# explicit IDs, never 13 digits of milliseconds (those are unstamped)
ID = st.sampled_from([b"1-1", b"1-2", b"2-0", b"2-1", b"3", b"3-*", b"5-0", b"0-1", b"0-0", b"bad", b"4-1"])
READ_ID = st.sampled_from([b"0", b"1-1", b"2", b"-", b"+", b"bad", b"(1-1"])
FIELDS = st.sampled_from([[b"f", b"v"], [b"f", b"v", b"g", b"w"], [b"f", b""]])


def _xadd(k, opts, i, fields):
    return [b"XADD", k] + opts + [i] + fields


ADD_OPTS = st.sampled_from([[], [], [b"MAXLEN", b"1"], [b"MAXLEN", b"~", b"2"], [b"MAXLEN", b"=", b"0"],
                            [b"MINID", b"2"], [b"NOMKSTREAM"], [b"MAXLEN", b"~", b"1", b"LIMIT", b"5"],
                            [b"MAXLEN", b"1", b"LIMIT", b"5"], [b"MAXLEN", b"x"], [b"MAXLEN", b"-1"],
                            [b"NOMKSTREAM", b"MINID", b"~", b"3"]])
TRIM = st.sampled_from([[b"MAXLEN", b"1"], [b"MAXLEN", b"0"], [b"MAXLEN", b"~", b"1"], [b"MINID", b"2-1"],
                        [b"MINID", b"=", b"3"], [b"MAXLEN", b"1", b"LIMIT", b"1"], [b"BADSTRAT", b"1"],
                        [b"MAXLEN", b"bad"], [b"MINID", b"bad"]])
GROUP_START = st.sampled_from([b"0", b"$", b"1-1", b"bad"])
CLAIM_OPTS = st.sampled_from([[], [b"JUSTID"], [b"FORCE"], [b"RETRYCOUNT", b"3"], [b"FORCE", b"JUSTID"],
                              [b"RETRYCOUNT", b"x"], [b"LASTID", b"9-0"]])

STREAM_COMMAND = st.one_of(
    st.builds(lambda k, i, f: _xadd(k, [], i, f), KEY, ID, FIELDS),
    st.builds(_xadd, KEY, ADD_OPTS, ID, FIELDS),
    st.builds(lambda k, f: _xadd(k, [], b"*", f), KEY, FIELDS),          # plain: queued in runs
    st.builds(lambda k, f: _xadd(k, [], b"*", f), KEY, FIELDS),
    st.builds(lambda k: [b"XLEN", k], KEY),
    st.builds(lambda k, a, b, c: [b"XRANGE", k, a, b] + c, KEY, READ_ID, READ_ID,
              st.sampled_from([[], [], [b"COUNT", b"1"], [b"COUNT", b"x"]])),
    st.builds(lambda k, a, b: [b"XREVRANGE", k, a, b], KEY, READ_ID, READ_ID),
    st.builds(lambda k, ids: [b"XDEL", k] + ids, KEY, st.lists(ID, min_size=1, max_size=3)),
    st.builds(lambda k, t: [b"XTRIM", k] + t, KEY, TRIM),
    st.builds(lambda k, g, i, m: [b"XGROUP", b"CREATE", k, g, i] + m, KEY, GROUP, GROUP_START,
              st.sampled_from([[], [b"MKSTREAM"], [b"BADOPT"]])),
    st.builds(lambda k, g: [b"XGROUP", b"DESTROY", k, g], KEY, GROUP),
    st.builds(lambda g, c, o, k, i: [b"XREADGROUP", b"GROUP", g, c] + o + [b"STREAMS", k, i],
              GROUP, CONSUMER, st.sampled_from([[], [b"COUNT", b"1"], [b"NOACK"], [b"COUNT", b"x"]]), KEY,
              st.sampled_from([b">", b">", b"0", b"bad"])),
    st.builds(lambda k, g, ids: [b"XACK", k, g] + ids, KEY, GROUP, st.lists(ID, min_size=1, max_size=2)),
    st.builds(lambda k, g, c, t, ids, o: [b"XCLAIM", k, g, c, t] + ids + o, KEY, GROUP, CONSUMER,
              st.sampled_from([b"0", b"0", b"x"]), st.lists(ID, min_size=1, max_size=2), CLAIM_OPTS),
    st.builds(lambda ks: [b"DEL"] + ks, st.lists(KEY, min_size=1, max_size=2)),
    st.builds(lambda ks: [b"EXISTS"] + ks, st.lists(KEY, min_size=1, max_size=2)),
    st.builds(lambda k: [b"TYPE", k], KEY),
    st.sampled_from([[b"PING"], [b"ECHO", b"hi"]]),
)
# refused at queueing (EXECABORT after them), or an error of its own outside MULTI
REFUSED = st.sampled_from([
    [b"NOSUCH", b"x"], [b"XLEN"], [b"XADD", b"s"], [b"XADD", b"s", b"1-1", b"f"], [b"XADD", b"s", b"*", b"f"],
    [b"XGROUP"], [b"XGROUP", b"CREATE", b"s"], [b"XGROUP", b"NOSUCH"], [b"XRANGE", b"s"], [b"TYPE"],
    [b"XACK", b"s", b"g"], [b"PING", b"a", b"b"], [b"ECHO"], [b"XTRIM", b"s"],
])
# parsed as they run: an error reply inside EXEC's reply
RUNTIME_ERROR = st.sampled_from([
    [b"XADD", b"s", b"1-1", b"f", b"v", b"g"], [b"XADD", b"s", b"*", b"f", b"v", b"g"],
    [b"XADD", b"s", b"NOMKSTREAM", b"MAXLEN"], [b"XADD", b"s", b"LIMIT", b"1", b"1-1", b"f", b"v"],
    [b"XADD", b"s", b"MAXLEN", b"1", b"MINID", b"1", b"2-1", b"f", b"v"],
    [b"XREADGROUP", b"GROUP", b"g", b"c1", b"BLOCKX", b"STREAMS", b"s", b">"],
    [b"XCLAIM", b"s", b"g", b"c1", b"0", b"1-1", b"IDLE", b"x"],
])
CONTROL = st.one_of(
    st.sampled_from([[b"MULTI"], [b"MULTI"], [b"EXEC"], [b"EXEC"], [b"DISCARD"], [b"UNWATCH"],
                     [b"MULTI", b"x"], [b"EXEC", b"x"], [b"WATCH"]]),
    st.builds(lambda ks: [b"WATCH"] + ks, st.lists(KEY, min_size=1, max_size=2)),
)
# XPENDING's summary (of a group with nothing pending it ends with a
# null array in Redis: ``*-1`` in RESP2)
XPENDING = st.builds(lambda k, g: [b"XPENDING", k, g], KEY, GROUP)


STAR_ADDS = st.lists(st.builds(lambda k, f: _xadd(k, [], b"*", f), KEY, FIELDS), min_size=2, max_size=6)
WATCH = st.builds(lambda ks: [(0, [[b"WATCH"] + ks])], st.lists(KEY, min_size=1, max_size=2))
END = st.sampled_from([[(0, [[b"EXEC"]])]] * 4 + [[(0, [[b"DISCARD"]])], [(0, [[b"EXEC", b"x"]])], []])


def _flat(blocks):
    return [step for block in blocks for step in block]


def _steps(proto, watching):
    """Blocks of steps, each a transaction of A's with B's commands
    around and inside it: [WATCH] [commands of A or B] MULTI [A's
    commands (one, or a pipelined run of plain XADDs) and B's]
    EXEC / DISCARD / EXEC x / nothing; or a whole transaction pipelined;
    or a few commands outside any."""
    stream = st.one_of(STREAM_COMMAND, XPENDING)
    a_one = st.one_of(stream, stream, stream, REFUSED, RUNTIME_ERROR, CONTROL)
    # B mostly writes (the keys A watches)
    b_one = st.one_of(stream, st.sampled_from([[b"XADD", b"s", b"*", b"f", b"v"], [b"DEL", b"s"],
                                               [b"XADD", b"t", b"5-5", b"f", b"v"], [b"XTRIM", b"s", b"MAXLEN", b"0"]]))
    watch = WATCH if watching else st.just([])
    a_step = st.one_of(a_one.map(lambda c: (0, [c])), STAR_ADDS.map(lambda cs: (0, cs)))
    b_step = b_one.map(lambda c: (1, [c]))
    loose = st.lists(st.one_of(a_step, b_step), max_size=3)
    touch = st.one_of(st.just([]), b_step.map(lambda s: [s]))      # B, after A's WATCH
    transaction = st.builds(lambda w, t, before, body, end: w + t + before + [(0, [[b"MULTI"]])] + body + end,
                            st.one_of(st.just([]), watch), touch, loose,
                            st.lists(st.one_of(a_step, a_step, b_step), max_size=8), END)
    pipelined = st.builds(lambda w, body: w + [(0, [[b"MULTI"]] + body + [[b"EXEC"]])], st.one_of(st.just([]), watch),
                          st.lists(st.one_of(a_one, a_one, STAR_ADDS.map(lambda cs: cs[0])), max_size=8))
    block = st.one_of(transaction, transaction, pipelined, loose.filter(bool))
    steps = st.lists(block, min_size=1, max_size=5).map(_flat)
    return steps.map(lambda ss: (proto, (ss + [(1, [[b"XLEN", b"s"]])] * 5)[:max(5, min(len(ss), 30))]))


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=st.tuples(st.sampled_from([2, 2, 3]), st.booleans()).flatmap(lambda pw: _steps(*pw)))
def test_transactions_of_two_clients_get_redis_replies_and_state_byte_for_byte(servers, case):
    proto, steps = case
    assert_same(servers, steps, proto)


# ------------------------------------------------ what the fuzzer found

def one_by_one(steps):
    """(who, argv) steps as steps of one command each."""
    return [(who, [argv]) for who, argv in steps]


def test_an_empty_transaction_answers_an_empty_array(servers):
    """MULTI, EXEC: xs's engine divided its time by the number of
    commands (none) and logged a ZeroDivisionError."""
    m, e = [b"MULTI"], [b"EXEC"]
    for proto in (2, 3):
        assert assert_same(servers, one_by_one([(0, m), (0, e), (0, m), (0, [b"MULTI"]), (0, e)]), proto)[:2] == [b"+OK\r\n",
                                                                                                      b"*0\r\n"]


EXEC_X = b"-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n"


def test_exec_with_arguments_aborts_and_discards_the_transaction(servers):
    """Redis's rejectCommand answers a refused EXEC with execCommandAbort
    (multi.c): the transaction and its WATCHes are gone, inside MULTI or
    not; xs said ERR wrong number of arguments and kept the transaction."""
    steps = [(0, [b"EXEC", b"x"]), (0, [b"WATCH", b"s"]), (0, [b"MULTI"]), (0, [b"XADD", b"s", b"1-1", b"f", b"v"]),
             (0, [b"EXEC", b"x"]), (0, [b"EXEC"]), (1, [b"XADD", b"s", b"2-1", b"f", b"v"]), (0, [b"MULTI"]),
             (0, [b"XLEN", b"s"]), (0, [b"EXEC"])]
    got = assert_same(servers, one_by_one(steps))
    assert got[:7] == [EXEC_X, b"+OK\r\n", b"+OK\r\n", b"+QUEUED\r\n", EXEC_X, b"-ERR EXEC without MULTI\r\n",
                       b"$3\r\n2-1\r\n"]
    assert got[9] == b"*1\r\n:1\r\n"          # s was not watched any more


def test_exec_before_auth_is_an_execabort_naming_noauth(servers):
    """Not sent: ``EXEC x`` before AUTH.  Redis 7.0 checks the arity
    before the password (processCommand) and answers EXEC_X; xs refuses
    every command before AUTH first (routing.py), a difference of all
    commands, not of transactions (reported, not changed here)."""
    for c in servers.ctl:
        assert c.call("CONFIG", "SET", "requirepass", "pw") == "OK"
    try:
        got = assert_same(servers, one_by_one([(0, [b"EXEC"]), (0, [b"DISCARD"]), (0, [b"MULTI"]), (0, [b"EXEC"])]))
    finally:
        for c in servers.ctl:
            c.call("AUTH", "pw")
            assert c.call("CONFIG", "SET", "requirepass", "") == "OK"
    abort = b"-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n"
    noauth = b"-NOAUTH Authentication required.\r\n"
    assert got[:4] == [abort, noauth, noauth, abort]


@pytest.mark.parametrize("refused", [[b"MULTI", b"x"], [b"WATCH"], [b"DISCARD", b"x"], [b"RESET", b"x"]],
                         ids=["multi-x", "watch", "discard-x", "reset-x"])
def test_a_transaction_command_refused_inside_multi_makes_exec_abort(servers, refused):
    """Commands never queued (MULTI, WATCH, DISCARD, RESET) refused for
    their arity inside MULTI: Redis's rejectCommand flags the transaction
    (flagTransaction), xs answered the error and ran EXEC."""
    got = assert_same(servers, one_by_one([(0, [b"MULTI"]), (0, [b"XADD", b"s", b"1-1", b"f", b"v"]), (0, refused),
                                           (0, [b"EXEC"]), (0, [b"XLEN", b"s"])]))
    assert got[3:5] == [b"-EXECABORT Transaction discarded because of previous errors.\r\n", b":0\r\n"]


@pytest.mark.parametrize("other", [[b"XGROUP", b"CREATE", b"s", b"h", b"0"],
                                   [b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", b"s", b">"],
                                   [b"XACK", b"s", b"g", b"1-1"], [b"XGROUP", b"DESTROY", b"s", b"g"],
                                   [b"XSETID", b"s", b"1-1"]],
                         ids=["xgroup-create", "xreadgroup", "xack", "xgroup-destroy", "xsetid-same"])
def test_a_watched_stream_is_changed_by_its_entries_not_by_its_groups(servers, other):
    """Redis signals a modified key (and so aborts a WATCH) for XADD,
    XDEL, XTRIM, deletion and expiry, not for what its consumer groups
    do (t_stream.c); xs compares the stream's record, which its groups do
    not change.  Then another client's XADD does abort it."""
    setup = [(1, [b"XADD", b"s", b"1-1", b"f", b"v"]), (1, [b"XGROUP", b"CREATE", b"s", b"g", b"0"])]
    watch = [(0, [b"WATCH", b"s"]), (1, other), (0, [b"MULTI"]), (0, [b"XLEN", b"s"]), (0, [b"EXEC"])]
    again = [(0, [b"WATCH", b"s"]), (1, [b"XADD", b"s", b"2-1", b"f", b"v"]), (0, [b"MULTI"]),
             (0, [b"XLEN", b"s"]), (0, [b"EXEC"])]
    got = assert_same(servers, one_by_one(setup + watch + again))
    assert got[6] == b"*1\r\n:1\r\n" and got[11] == b"*-1\r\n"


@pytest.mark.parametrize("proto", [2, 3])
def test_the_pending_summary_of_a_group_with_nothing_pending_ends_with_a_null_array(servers, proto):
    """Redis answers it [0, nil, nil, null array] (addReplyNullArray):
    ``*-1`` in RESP2, where xs sent a null bulk string."""
    steps = [(0, [b"XADD", b"s", b"1-1", b"f", b"v"]), (0, [b"XGROUP", b"CREATE", b"s", b"g", b"$"]),
             (0, [b"XPENDING", b"s", b"g"])]
    got = assert_same(servers, one_by_one(steps), proto=proto)
    assert got[2] == (b"*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n" if proto == 2 else b"*4\r\n:0\r\n_\r\n_\r\n_\r\n")
