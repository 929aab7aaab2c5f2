"""xs serve: the store behind RESP2/RESP3, as a Redis client meets it.

Each test starts ``xs serve`` as a subprocess on a free loopback port
(or a Unix socket) and talks to it with redis-py or a raw socket;
shapes are compared with a real redis-server (the ``redis`` fixture)."""
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from conftest import ROOT, XS, run_xs
from tests.harness.served import Served, free_port, raw  # noqa: F401 (re-exported for the tests that import them from here)

redis = pytest.importorskip("redis")


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path / "store")
    yield s
    s.stop(signal.SIGKILL)


# ------------------------------------------------------------ wire shapes

def _script(r):
    """The same commands for redis-server and xs serve; (name, result)."""
    out = []

    def t(name, f):
        try:
            out.append((name, f()))
        except Exception as e:
            out.append((name, "%s: %s" % (type(e).__name__, e)))
    r.flushdb()
    t("xadd", lambda: r.xadd("s", {"a": "1"}, id="1-1"))
    t("xadd2", lambda: r.xadd("s", {"b": "2", "c": "3"}, id="2-1"))
    t("xadd small id", lambda: r.xadd("s", {"a": "1"}, id="1-1"))
    t("xrange", lambda: r.xrange("s"))
    t("xrevrange", lambda: r.xrevrange("s", count=1))
    t("xlen", lambda: r.xlen("s"))
    t("xread", lambda: r.xread({"s": 0}))
    t("xread nothing", lambda: r.xread({"s": "$"}))
    t("xread missing key", lambda: r.xread({"nokey": 0}))
    t("xgroup create", lambda: r.xgroup_create("s", "g", id="0"))
    t("xgroup busy", lambda: r.xgroup_create("s", "g", id="0"))
    t("xreadgroup", lambda: r.xreadgroup("g", "c1", {"s": ">"}, count=1))
    t("xreadgroup history", lambda: r.xreadgroup("g", "c1", {"s": "0"}))
    t("xpending", lambda: r.xpending("s", "g"))
    t("xpending range", lambda: [dict(x, time_since_delivered=0) for x in r.xpending_range("s", "g", "-", "+", 10)])
    t("xdel", lambda: r.xdel("s", "1-1"))
    t("xreadgroup deleted", lambda: r.xreadgroup("g", "c1", {"s": "0"}))
    t("xack", lambda: r.xack("s", "g", "1-1"))
    t("xinfo stream", lambda: {k: v for k, v in r.xinfo_stream("s").items()
                               if not any(w in str(k) for w in ("idmp", "tracked", "iids"))})
    t("xinfo groups", lambda: r.xinfo_groups("s"))
    t("xinfo consumers", lambda: [dict(x, idle=0, inactive=0) for x in r.xinfo_consumers("s", "g")])
    t("xautoclaim", lambda: r.xautoclaim("s", "g", "c2", 0))
    t("xclaim", lambda: r.xclaim("s", "g", "c2", 0, ["2-1"]))
    t("xtrim", lambda: r.xtrim("s", maxlen=5))
    t("type", lambda: r.type("s"))
    t("exists", lambda: r.exists("s", "x"))
    t("xadd nomkstream", lambda: r.xadd("nos", {"a": 1}, nomkstream=True))
    t("bad id", lambda: r.execute_command("XADD", "s", "bad", "a", "1"))
    t("unknown command", lambda: r.execute_command("XFOO", "s"))
    t("wrong arity", lambda: r.execute_command("XLEN"))
    t("dbsize", lambda: r.dbsize())
    t("echo", lambda: r.echo("hi"))
    t("ping", lambda: r.ping())
    t("select 0", lambda: r.execute_command("SELECT", 0))
    t("client name", lambda: (r.client_setname("me"), r.client_getname()))
    t("config get", lambda: r.config_get("stream-node-max-entries"))
    p = r.pipeline(transaction=True)
    p.xadd("m", {"x": "1"}, id="5-1")
    p.xlen("m")
    p.xread({"m": 0})
    p.xread({"zz": 0})
    p.execute_command("XADD", "m", "1-1", "a", "b")
    t("multi/exec", lambda: p.execute(raise_on_error=False))
    t("flushdb", lambda: r.flushdb())
    t("dbsize after flush", lambda: r.dbsize())
    return out


@pytest.mark.differential
@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_sees_the_same_replies_as_from_redis_server(served, redis, protocol):
    """XADD/XRANGE/XREAD/XREADGROUP/XACK/XINFO/XPENDING/XAUTOCLAIM/MULTI
    through redis-py: the values equal redis-server 7.0's, RESP2 and RESP3."""
    want = _script(redis_client(redis.port, protocol))
    got = _script(served.client(protocol))
    assert [n for n, _ in got] == [n for n, _ in want]
    for (name, w), (_, g) in zip(want, got):
        if isinstance(w, list) and name == "multi/exec":    # exceptions compare by identity
            w = [repr(x) for x in w]
            g = [repr(x) for x in g]
        assert g == w, name


def redis_client(port, protocol):
    return redis.Redis(port=port, protocol=protocol)


def _raw_script(port):
    """Raw RESP bytes for commands whose wire form matters (nulls, maps)."""
    out = []
    for proto in (b"2", b"3"):
        hello = b"*2\r\n$5\r\nHELLO\r\n$1\r\n%s\r\n" % proto
        cmds = [b"*1\r\n$8\r\nFLUSHALL\r\n",
                b"*5\r\n$4\r\nXADD\r\n$1\r\nk\r\n$3\r\n1-1\r\n$1\r\nf\r\n$1\r\nv\r\n",
                b"*4\r\n$5\r\nXREAD\r\n$7\r\nSTREAMS\r\n$1\r\nk\r\n$1\r\n0\r\n",
                b"*4\r\n$5\r\nXREAD\r\n$7\r\nSTREAMS\r\n$1\r\nk\r\n$1\r\n$\r\n",
                b"*6\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n$2\r\n10\r\n$7\r\nSTREAMS\r\n$1\r\nk\r\n$1\r\n$\r\n",
                b"*6\r\n$4\r\nXADD\r\n$1\r\nk\r\n$10\r\nNOMKSTREAM\r\n$3\r\n2-1\r\n$1\r\nf\r\n$1\r\nv\r\n",
                b"*6\r\n$4\r\nXADD\r\n$1\r\nz\r\n$10\r\nNOMKSTREAM\r\n$3\r\n2-1\r\n$1\r\nf\r\n$1\r\nv\r\n",
                b"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
                b"PING\r\n"]
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        reader = _reader()
        c.sendall(hello)
        _recv_reply(c, reader)
        for cmd in cmds:
            c.sendall(cmd)
            out.append(_recv_reply(c, reader))
        c.close()
    return out


def _reader():
    """A hiredis reader: where a reply ends (hiredis is the serve extra's)."""
    return pytest.importorskip("hiredis").Reader()


def _recv_reply(c, reader=None):
    """The bytes of one whole reply, however late it comes (hiredis says
    when it is whole; bytes after it would show in the next reply's)."""
    if reader is None:
        reader = _reader()
    data = b""
    while True:
        chunk = c.recv(65536)
        if not chunk:
            return data
        data += chunk
        reader.feed(chunk)
        if reader.gets() is not False:
            return data


@pytest.mark.differential
def test_null_and_map_encodings_are_byte_identical_to_redis_server(served, redis):
    """Null arrays for XREAD, null bulk for XADD NOMKSTREAM, `_` and maps
    in RESP3: the same bytes as redis-server sends."""
    assert _raw_script(served.port) == _raw_script(redis.port)


# ------------------------------------------------------------ connection

def test_inline_commands_and_pipelines_answer_in_order(served):
    data = b"PING\r\nXADD s 1-1 a 1\r\n*2\r\n$4\r\nXLEN\r\n$1\r\ns\r\nECHO 'x y'\r\nXLEN\r\n"
    assert raw(served.port, data) == (b"+PONG\r\n$3\r\n1-1\r\n:1\r\n$3\r\nx y\r\n"
                                      b"-ERR wrong number of arguments for 'xlen' command\r\n")


def test_a_bulk_length_over_512mb_is_a_protocol_error_and_closes(served):
    out = raw(served.port, b"*2\r\n$4\r\nECHO\r\n$600000000\r\n", expect_close=True)
    assert out == b"-ERR Protocol error: invalid bulk length\r\n"
    assert served.client().ping()


@pytest.mark.differential
@pytest.mark.parametrize("request_", [b"* 1\r\n$4\r\nPING\r\n", b"*+1\r\n$4\r\nPING\r\n",
                                      b"*1_0\r\n$4\r\nPING\r\n", b"*01\r\n$4\r\nPING\r\n",
                                      b"*1\r\n$+4\r\nPING\r\n", b"*1\r\n$ 4\r\nPING\r\n",
                                      b"*1\r\n$04\r\nPING\r\n"])
def test_a_loose_length_header_is_refused_and_closes_as_redis_server_does(served, redis, request_):
    """Lengths are read as Redis's string2ll reads them: no sign, space,
    underscore or leading zero (Python's int() took all four)."""
    want = raw(redis.port, request_, expect_close=True)
    assert want.startswith(b"-ERR Protocol error: invalid ")
    assert raw(served.port, request_, expect_close=True) == want


def test_select_other_than_0_is_refused_as_with_one_database(served):
    r = served.client()
    assert r.execute_command("SELECT", 0)
    with pytest.raises(redis.ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", 1)


def test_hello_3_gives_a_map_with_the_8_10_version(served):
    r = served.client(3)
    h = r.execute_command("HELLO", 3)
    assert h[b"proto"] == 3 and h[b"version"] == b"8.10.0" and h[b"server"] == b"redis"
    assert r.info("server")["redis_version"] == "8.10.0"
    with pytest.raises(redis.ResponseError, match="NOPROTO"):
        r.execute_command("HELLO", 4)


def test_info_counts_commands_and_blocked_clients(served):
    r = served.client()
    r.xadd("s", {"a": 1})
    r.xlen("s")
    before = r.info("stats")["total_commands_processed"]
    r.xlen("s")
    assert r.info("stats")["total_commands_processed"] > before
    assert r.info("keyspace")["db0"]["keys"] == 1
    assert r.info("clients")["total_blocking_keys"] == 0
    ts = [threading.Thread(target=lambda: served.client().xread({"s": "$", "t": "$"}, block=1500)),
          threading.Thread(target=lambda: served.client().xread({"s": "$"}, block=1500))]
    for t in ts:
        t.start()
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] != 2:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert r.info("clients")["total_blocking_keys"] == 2          # s and t, each counted once
    for t in ts:
        t.join()
    assert r.info("clients")["blocked_clients"] == 0
    assert r.info("clients")["total_blocking_keys"] == 0


STATS_SCRIPT = [
    b"XADD s 1-1 f v", b"XADD s 2-1 f v", b"XLEN s", b"XRANGE s - +", b"XRANGE s nope +",
    b"XGROUP CREATE s g 0", b"XGROUP CREATE s g 0", b"XREADGROUP GROUP nog c STREAMS s >",
    b"XREADGROUP GROUP g c COUNT 1 STREAMS s >", b"XACK s g 1-1", b"XADD s", b"XGROUP CREATE",
    b"FOO bar", b"XGROUP NOPE s", b"PING", b"ECHO", b"CLIENT ID", b"DEL nothing",
    b"MULTI", b"XADD s 3-1 f v", b"XLEN s", b"XADD s 1-1 f v", b"EXEC",
]


def _stats(port):
    """INFO commandstats and errorstats: ({name: (calls, rejected, failed)}, {code: count})."""
    text = _info(port, b"commandstats") + _info(port, b"errorstats")
    cmds, errs = {}, {}
    for line in text.decode().splitlines():
        if line.startswith("cmdstat_"):
            name, fields = line[8:].split(":", 1)
            f = dict(kv.split("=") for kv in fields.split(","))
            cmds[name] = (int(f["calls"]), int(f["rejected_calls"]), int(f["failed_calls"]))
        elif line.startswith("errorstat_"):
            code, count = line[10:].split(":", 1)
            errs[code] = int(count.split("=")[1])
    return cmds, errs


def _info(port, section):
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        c.sendall(b"INFO " + section + b"\r\n")
        return _recv_bulk(c)
    finally:
        c.close()


def test_info_commandstats_and_errorstats_count_as_redis_does(served, redis):
    """INFO commandstats (calls, rejected_calls: refused before running,
    failed_calls: ran and answered an error), errorstats per error code
    and total_error_replies, for the same commands on xs serve and
    redis-server, MULTI/EXEC included (issue 26, item 9)."""
    for port in (served.port, redis.port):
        raw(port, b"FLUSHALL\r\nCONFIG RESETSTAT\r\n")
        c = socket.create_connection(("127.0.0.1", port), timeout=10)
        try:
            for line in STATS_SCRIPT:
                c.sendall(line + b"\r\n")
                _read_lines(c, 1)
        finally:
            c.close()
    ours, theirs = _stats(served.port), _stats(redis.port)
    for name in ("flushall", "config|resetstat", "info"):      # the test's own bookkeeping
        ours[0].pop(name, None)
        theirs[0].pop(name, None)
    assert ours == theirs
    errors = sum(theirs[1].values())
    assert errors >= 7
    assert _info(served.port, b"stats").count(b"total_error_replies:%d\r\n" % errors) == 1
    assert b"cmdstat_" not in _info(served.port, b"")                 # not in the default sections
    assert b"cmdstat_xadd:" in _info(served.port, b"all")


def test_client_commands_redis_py_sends(served):
    r = served.client()
    assert r.client_setinfo("LIB-NAME", "mylib")
    assert r.client_setname("worker-1")
    assert r.client_getname() == "worker-1"
    cid = r.client_id()
    assert any(c["id"] == str(cid) and c["name"] == "worker-1" for c in r.client_list())
    victim = socket.create_connection(("127.0.0.1", served.port), timeout=5)
    victim.sendall(b"CLIENT ID\r\n")
    vid = int(_recv_reply(victim)[1:-2])
    assert r.client_kill_filter(_id=vid) == 1
    victim.settimeout(5)
    assert victim.recv(100) == b""                       # closed by the server
    assert r.client_kill_filter(_id=vid) == 0


def test_unix_socket_with_permissions(tmp_path):
    path = str(tmp_path / "xs.sock")
    s = Served(tmp_path / "store", "--unixsocket", path, "--unixsocketperm", "700")
    try:
        assert (os.stat(path).st_mode & 0o777) == 0o700
        r = s.client()
        assert r.xadd("s", {"a": 1}, id="1-1") == b"1-1"
        assert r.xlen("s") == 1
        assert s.stop() == 0
        assert not os.path.exists(path)
    finally:
        s.stop(signal.SIGKILL)


# ------------------------------------------------------------ transactions

def test_exec_aborts_on_a_queued_error_and_changes_nothing(served):
    out = raw(served.port, b"MULTI\r\nXADD s 1-1 a 1\r\nXNOPE s\r\nEXEC\r\nXLEN s\r\n")
    assert out == (b"+OK\r\n+QUEUED\r\n-ERR unknown command 'XNOPE', with args beginning with: 's' \r\n"
                   b"-EXECABORT Transaction discarded because of previous errors.\r\n:0\r\n")


def test_exec_runs_everything_in_one_transaction_with_per_command_errors(served):
    r = served.client()
    p = r.pipeline(transaction=True)
    p.xadd("s", {"a": 1}, id="5-1")
    p.execute_command("XADD", "s", "1-1", "a", "1")      # too small: an error at run time
    p.xadd("s", {"a": 2}, id="6-1")
    res = p.execute(raise_on_error=False)
    assert res[0] == b"5-1" and isinstance(res[1], redis.ResponseError) and res[2] == b"6-1"
    assert r.xlen("s") == 2


def test_watch_makes_exec_fail_when_a_watched_stream_changed(served):
    r = served.client()
    r.xadd("s", {"a": 1})
    with r.pipeline() as p:
        p.watch("s")
        served.client().xadd("s", {"a": 2})              # another client changes it
        p.multi()
        p.xadd("t", {"a": 1})
        with pytest.raises(redis.WatchError):
            p.execute()
    assert r.exists("t") == 0
    with r.pipeline() as p:
        p.watch("s")
        p.multi()
        p.xadd("t", {"a": 1})
        assert len(p.execute()) == 1
    assert r.exists("t") == 1


def test_exec_is_atomic_for_a_reader_in_another_process(served):
    """No `xs XLEN` run during a MULTI of 200 XADDs sees part of it."""
    r = served.client()
    stop = threading.Event()
    seen = set()

    def poll():
        while not stop.is_set():
            p = subprocess.run(XS + ["--db", served.db, "XLEN", "s"], capture_output=True, cwd=ROOT)
            seen.add(int(p.stdout or b"0"))
    t = threading.Thread(target=poll)
    t.start()
    try:
        for _ in range(5):
            p = r.pipeline(transaction=True)
            for _ in range(200):
                p.xadd("s", {"a": 1})
            p.execute()
    finally:
        stop.set()
        t.join()
    assert seen <= {0, 200, 400, 600, 800, 1000}, sorted(seen)


# ------------------------------------------------------------ auth & safety

def test_requirepass_refuses_commands_until_auth(tmp_path):
    s = Served(tmp_path / "store", "--requirepass", "s3cret")
    try:
        with pytest.raises(redis.AuthenticationError):
            s.client().xlen("s")
        with pytest.raises(redis.AuthenticationError):
            s.client(password="wrong").ping()
        assert s.client(password="s3cret").xadd("s", {"a": 1}, id="1-1") == b"1-1"
        assert s.client(3, password="s3cret").xlen("s") == 1          # HELLO 3 AUTH default s3cret
        out = raw(s.port, b"XLEN s\r\nAUTH s3cret\r\nXLEN s\r\n")
        assert out == b"-NOAUTH Authentication required.\r\n+OK\r\n:1\r\n"
    finally:
        s.stop(signal.SIGKILL)


def test_password_guessing_is_slowed_down_and_logged_once_a_second(tmp_path):
    """60 wrong passwords from 20 connections at once: the server answers
    at most 100 a second (0.6 s at least), each reply is still WRONGPASS,
    the log has about a line a second (not one per guess), and the right
    password still works."""
    s = Served(tmp_path / "store", "--requirepass", "s3cret")
    try:
        conns = [socket.create_connection(("127.0.0.1", s.port), timeout=30) for _ in range(20)]
        t = time.monotonic()
        for c in conns:
            c.sendall(b"AUTH nope\r\n" * 3)
        want = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n" * 3
        for c in conns:
            got = b""
            while len(got) < len(want):
                chunk = c.recv(65536)
                assert chunk, got
                got += chunk
            assert got == want
        elapsed = time.monotonic() - t
        assert elapsed >= 0.6, elapsed
        for c in conns:
            c.close()
        assert s.client(password="s3cret").ping()
    finally:
        s.stop()
    lines = [l for l in s.log().splitlines() if "wrong password" in l]
    assert 1 <= len(lines) <= elapsed + 2, lines


def test_protected_mode_refuses_non_loopback_clients_without_password(tmp_path):
    """Bound to every address without a password: a client from a
    non-loopback address gets DENIED; loopback still works."""
    addrs = [a for a in _local_addresses() if not a.startswith("127.")]
    if not addrs:
        pytest.skip("no non-loopback address on this machine")
    s = Served(tmp_path / "store", "--bind", "0.0.0.0")
    try:
        c = socket.create_connection((addrs[0], s.port), timeout=5)
        c.sendall(b"PING\r\n")
        assert _recv_reply(c).startswith(b"-DENIED Redis is running in protected mode")
        assert s.client().ping()
    finally:
        s.stop(signal.SIGKILL)


def _local_addresses():
    try:
        out = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout
    except OSError:
        return []
    return [a for a in out.split() if ":" not in a]


def test_default_bind_is_loopback_only(served):
    out = subprocess.run(["ss", "-ltnp"], capture_output=True, text=True).stdout if _has("ss") else ""
    lines = [l for l in out.splitlines() if ":%d " % served.port in l]
    if not lines:
        pytest.skip("ss is not available")
    assert all("127.0.0.1:%d" % served.port in l for l in lines)


def _has(cmd):
    import shutil
    return shutil.which(cmd) is not None


def test_sigterm_exits_0_after_answering(served):
    r = served.client()
    assert r.xadd("s", {"a": 1}, id="1-1") == b"1-1"
    assert served.stop(signal.SIGTERM) == 0
    err = served.log()
    assert "Traceback" not in err and "stopped" in err


def test_sigterm_ends_blocked_clients_and_exits_0(served):
    res = []
    t = threading.Thread(target=lambda: res.append(served.client().xread({"s": "$"}, block=0)))
    t.start()
    time.sleep(0.5)
    start = time.monotonic()
    assert served.stop(signal.SIGTERM) == 0
    assert time.monotonic() - start < 10
    t.join(10)
    assert not t.is_alive()


# ------------------------------------------------------------ concurrency

def test_served_blocked_xreadgroup_wakes_on_a_cli_xadd(served):
    r = served.client()
    r.xgroup_create("s", "g", id="$", mkstream=True)
    res = []
    t = threading.Thread(target=lambda: res.append(served.client().xreadgroup("g", "c", {"s": ">"}, block=20000)))
    t.start()
    time.sleep(0.5)
    other = served.client()
    start = time.monotonic()
    assert other.ping() and time.monotonic() - start < 1      # the blocked client holds nobody up
    p = subprocess.run(XS + ["--db", served.db, "XADD", "s", "7-1", "from", "cli"], capture_output=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    t.join(10)
    assert res == [[[b"s", [(b"7-1", {b"from": b"cli"})]]]]
    assert r.xpending("s", "g")["pending"] == 1


def test_cli_xread_block_wakes_on_a_served_xadd(served):
    r = served.client()
    r.xadd("s", {"a": 0}, id="1-1")
    # after 1-1, not "$": a CLI that a loaded machine starts after the
    # XADD below would take "$" as 2-1 and wait past it (ci3: timed out)
    p = subprocess.Popen(XS + ["--db", served.db, "--json", "XREAD", "BLOCK", "20000", "STREAMS", "s", "1-1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    time.sleep(1.0)
    assert p.poll() is None
    r.xadd("s", {"from": "served"}, id="2-1")
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    assert b'"2-1"' in out and b"served" in out


def test_blocked_xread_wakes_on_another_served_client_and_others_go_on(served):
    res = []
    threads = [threading.Thread(target=lambda: res.append(served.client().xread({"s": "$"}, block=20000)))
               for _ in range(5)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    r = served.client()
    for i in range(20):                     # other clients are served while five wait
        r.xadd("other", {"i": i})
    assert r.xlen("other") == 20
    r.xadd("s", {"a": 1}, id="9-1")
    for t in threads:
        t.join(10)
    assert res == [[[b"s", [(b"9-1", {b"a": b"1"})]]]] * 5


def _unblock_scenario(port, mode, command=b"XREAD BLOCK 0 STREAMS s $"):
    """A client blocks in ``command``; another sends CLIENT UNBLOCK with
    ``mode`` (a list of extra arguments). (UNBLOCK's reply, the blocked
    client's reply, a second UNBLOCK's reply)."""
    blocked = socket.create_connection(("127.0.0.1", port), timeout=10)
    other = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        blocked.sendall(b"CLIENT ID\r\n")
        cid = _read_lines(blocked, 1).split(b"\r\n")[0][1:]
        blocked.sendall(command + b"\r\n")
        deadline = time.monotonic() + 10
        while True:                                   # until it is blocked
            other.sendall(b"INFO clients\r\n")
            info = _recv_bulk(other)
            if b"blocked_clients:1" in info:
                break
            assert time.monotonic() < deadline, info
            time.sleep(0.02)
        other.sendall(b" ".join([b"CLIENT", b"UNBLOCK", cid] + mode) + b"\r\n")
        first = _read_lines(other, 1).split(b"\r\n")[0]
        if first != b":1":
            return first, None, None
        got = _read_lines(blocked, 1).split(b"\r\n")[0]
        other.sendall(b"CLIENT UNBLOCK " + cid + b"\r\n")
        return first, got, _read_lines(other, 1).split(b"\r\n")[0]
    finally:
        blocked.close()
        other.close()


def _recv_bulk(c):
    data = b""
    while not data.endswith(b"\r\n") or data.count(b"\r\n") < 2:
        chunk = c.recv(65536)
        assert chunk
        data += chunk
    return data


@pytest.mark.parametrize("mode", [[], [b"TIMEOUT"], [b"error"], [b"ERROR"], [b"NOW"]])
def test_client_unblock_ends_a_blocked_read_as_redis_does(served, redis, mode):
    """CLIENT UNBLOCK id [TIMEOUT | ERROR]: a blocked XREAD answers null
    or -UNBLOCKED at once (before, it waited out its timeout), UNBLOCK
    answers 1, then 0 (issue 26, item 5)."""
    for command in (b"XREAD BLOCK 0 STREAMS s $", b"XREADGROUP GROUP g c BLOCK 0 STREAMS s >"):
        served.client().execute_command("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        redis.call("DEL", "s")
        redis.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        ours = _unblock_scenario(served.port, mode, command)
        theirs = _unblock_scenario(redis.port, mode, command)
        assert ours == theirs, (command, ours, theirs)
        served.client().delete("s")


def test_client_unblock_of_a_client_not_blocked_or_unknown_answers_0_and_checks_its_arguments(served, redis):
    for port in (served.port, redis.port):
        assert raw(port, b"CLIENT UNBLOCK 999999\r\nCLIENT UNBLOCK abc\r\nCLIENT UNBLOCK 1 2 3\r\n"
                         b"CLIENT UNBLOCK\r\nCLIENT UNBLOCK 1 later\r\n") == \
            (b":0\r\n-ERR value is not an integer or out of range\r\n"
             b"-ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.\r\n"
             b"-ERR wrong number of arguments for 'client|unblock' command\r\n"
             b"-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n"), port


def test_a_client_gone_while_blocked_frees_its_wait(served):
    c = socket.create_connection(("127.0.0.1", served.port))
    c.sendall(b"XREAD BLOCK 0 STREAMS s $\r\n")
    r = served.client()
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    c.close()
    while r.info("clients")["blocked_clients"] != 0:
        assert time.monotonic() < deadline + 5, "the wait of a closed client goes on"
        time.sleep(0.02)


def test_concurrent_writers_share_commits(served):
    """50 clients adding at once: every XADD answered, all entries there,
    fewer commits (fsyncs) than writes (group commit)."""
    r = served.client()
    before = int(r.info("persistence")["commits"])

    def work(k):
        c = served.client()
        for i in range(40):
            c.xadd("s", {"k": k, "i": i})
    threads = [threading.Thread(target=work, args=(k,)) for k in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert r.xlen("s") == 2000
    commits = int(r.info("persistence")["commits"]) - before
    assert commits < 2000, commits


def test_a_failing_command_does_not_affect_others_in_the_same_commit(served):
    """A pipeline mixing good and bad commands: each bad one gets its
    error, the good ones are all committed."""
    r = served.client()
    p = r.pipeline(transaction=False)
    for i in range(1, 51):
        p.xadd("s", {"i": i}, id="%d-1" % i)
        p.execute_command("XADD", "s", "1-1", "bad", "1")
    res = p.execute(raise_on_error=False)
    assert [x for x in res[::2]] == [b"%d-1" % i for i in range(1, 51)]
    assert all(isinstance(x, redis.ResponseError) for x in res[1::2])
    assert r.xlen("s") == 50


def test_kill_9_loses_no_acknowledged_write(served):
    acked = []
    stop = threading.Event()

    def work(k):
        c = served.client()
        i = 0
        while not stop.is_set():
            try:
                acked.append(c.xadd("s", {"k": k, "i": i}))
            except redis.RedisError:
                return
            i += 1
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    served.proc.kill()
    served.proc.wait()
    stop.set()
    for t in threads:
        t.join(10)
    assert len(acked) > 50
    p = run_xs(served.db, ["XRANGE s - +"], mode="raw")
    ids = set(l for l in p.stdout.split(b"\n") if b"-" in l)
    missing = [a for a in acked if a not in ids]
    assert not missing, "%d acknowledged writes lost" % len(missing)


def test_a_client_that_reads_nothing_is_cut_at_the_output_limit_and_stalls_nobody(served):
    r = served.client()
    assert r.config_set("client-output-buffer-limit", "normal 1mb 0 0")
    p = r.pipeline(transaction=False)
    for i in range(300):
        p.xadd("big", {"v": "x" * 1000})
    p.execute()
    slow = socket.create_connection(("127.0.0.1", served.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sendall(b"XRANGE big - +\r\n" * 200)          # ~60 MB of replies, never read
    start = time.monotonic()
    for _ in range(20):
        assert r.xlen("big") == 300                      # others are served meanwhile
    assert time.monotonic() - start < 5
    deadline = time.monotonic() + 10
    while any(c.get("id") and c["cmd"] == "xrange" for c in r.client_list()):
        assert time.monotonic() < deadline, "the slow client was not disconnected"
        time.sleep(0.05)
    served.proc.send_signal(signal.SIGTERM)
    served.proc.wait(15)
    assert "output buffer over 1048576 bytes" in served.log()
    slow.close()


def test_server_commands_client_libraries_use(served):
    r = served.client()
    r.xadd("a", {"f": 1})
    r.xadd("b", {"f": 1})
    assert r.dbsize() == 2
    assert r.execute_command("FLUSHALL", "ASYNC")
    assert r.dbsize() == 0
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("FLUSHDB", "LATER")
    assert r.command_count() == len(r.command_list()) > 30
    info = raw(served.port, b"COMMAND INFO xadd nope\r\n")
    assert info.startswith(b"*2\r\n*10\r\n$4\r\nxadd\r\n:-5\r\n") and info.endswith(b"*-1\r\n") is False
    assert info.endswith(b"$-1\r\n")
    assert r.config_get("appendfsync") == {"appendfsync": "always"}
    with pytest.raises(redis.ResponseError, match="Unknown option"):
        r.config_set("no-such-thing", "1")
    assert r.config_set("stream-node-max-entries", "50")           # the store's: a CLI process sees it
    assert r.config_get("stream-node-*") == {"stream-node-max-bytes": "4096", "stream-node-max-entries": "50"}
    cli = subprocess.run(XS + ["--db", served.db, "CONFIG", "GET", "stream-node-max-entries"],
                         capture_output=True, cwd=ROOT, timeout=30)
    assert cli.stdout.split() == [b"stream-node-max-entries", b"50"], cli.stderr
    with pytest.raises(redis.ResponseError, match="of its own"):
        r.config_set("stream-node-max-entries", "5", "maxclients", "10")
    assert r.config_set("requirepass", "pw")            # new connections must AUTH now
    with pytest.raises(redis.AuthenticationError):
        served.client().xlen("a")
    assert served.client(password="pw").xlen("a") == 0
    out = raw(served.port, b"AUTH pw\r\nHELLO 3\r\nRESET\r\nXLEN a\r\n")
    assert out.startswith(b"+OK\r\n%") and out.endswith(b"+RESET\r\n-NOAUTH Authentication required.\r\n")


def test_serve_on_a_port_in_use_is_one_line_and_exit_1(served, tmp_path):
    p = subprocess.run(XS + ["--db", str(tmp_path / "other"), "serve", "--port", str(served.port),
                             "--allow-no-password"],
                       capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert p.returncode == 1
    assert "address already in use" in p.stderr and "Traceback" not in p.stderr


def test_under_a_low_open_file_limit_maxclients_is_reduced_and_every_client_served(tmp_path):
    """Under ``ulimit -n 256`` (hard), maxclients 10000 cannot be kept:
    the server says so once, lowers it to what the descriptors allow,
    refuses clients beyond it with Redis's error, and those it took keep
    working -- no "Too many open files" in a reply, no log flood (issue 29,
    item 7)."""
    import resource
    port = free_port()
    db = str(tmp_path / "store")

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    proc = subprocess.Popen(XS + ["--db", db, "serve", "--port", str(port), "--allow-no-password"],
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT, preexec_fn=low_limit)
    conns = []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "xs serve did not start"
                time.sleep(0.05)
        r = redis.Redis(port=port)
        n = int(r.config_get("maxclients")["maxclients"])
        assert n == (256 - 64) // 5
        r.close()
        for _ in range(n + 20):
            c = socket.create_connection(("127.0.0.1", port), timeout=10)
            c.sendall(b"PING\r\n")
            conns.append(c)
        replies = [_read_lines(c, 1) for c in conns]
        assert replies.count(b"+PONG\r\n") == n
        assert replies.count(b"-ERR max number of clients reached\r\n") == 20
        kept = [c for c, rep in zip(conns, replies) if rep == b"+PONG\r\n"]
        for i, c in enumerate(kept[:20]):
            c.sendall(b"XADD s * n %d\r\nXREAD BLOCK 1 STREAMS quiet%d $\r\n" % (i, i))
        for c in kept[:20]:
            got = _read_lines(c, 3)                         # the ID ($N, ID) and XREAD's null
            assert got.startswith(b"$") and got.endswith(b"*-1\r\n"), got
        with pytest.raises(redis.ResponseError, match="not able to handle the specified number of clients"):
            kept[0].close()
            redis.Redis(port=port).config_set("maxclients", n + 100)
    finally:
        for c in conns:
            c.close()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    lines = err.decode().splitlines()
    assert sum("maxclients has been reduced to %d" % n in l for l in lines) == 1, lines
    assert len(err) < 20000, len(err)


def _read_lines(c, n):
    """What ``c`` receives until ``n`` CRLF-ended lines have come (or EOF)."""
    c.settimeout(10)
    data = b""
    while data.count(b"\r\n") < n:
        chunk = c.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _block_clients(served, r, n, command, conns):
    """Open ``n`` raw connections that send ``command % i`` (a blocking
    read; appended to ``conns`` as they open) and wait until all block."""
    for i in range(n):
        c = socket.create_connection(("127.0.0.1", served.port), timeout=10)
        c.sendall(command % i + b"\r\n")
        conns.append(c)
    deadline = time.monotonic() + 60
    while r.info("clients")["blocked_clients"] != n:
        assert time.monotonic() < deadline, r.info("clients")
        time.sleep(0.05)


def test_hundreds_of_blocked_clients_that_go_away_leave_no_wait_behind(served):
    """300 clients block in XREADGROUP ... BLOCK 0 (more than the per-user
    inotify instances, 128: they share the server's one) and then disconnect:
    every wait ends (none stays "blocked" with a thread, a queue ticket
    and descriptors), the group's queue holds no ticket, and SIGTERM then
    exits at once (issue 29, item 8)."""
    r = served.client()
    r.xgroup_create("s", "g", id="$", mkstream=True)
    n = min(300, int(r.config_get("maxclients")["maxclients"]) - 5)
    conns = []
    try:
        _block_clients(served, r, n, b"XREADGROUP GROUP g c%d BLOCK 0 STREAMS s >", conns)
    finally:
        for c in conns:
            c.close()
    deadline = time.monotonic() + 15
    while True:
        info = r.info("clients")
        if info["blocked_clients"] == 0 and info["connected_clients"] == 1:
            break
        assert time.monotonic() < deadline, info
        time.sleep(0.05)
    tickets = [f for _, _, fs in os.walk(os.path.join(served.db, "notify")) for f in fs if "." in f]
    assert [t for t in tickets if not t.endswith(".w")] == []
    r.close()
    t = time.monotonic()
    assert served.stop() == 0 and time.monotonic() - t < 10


def _cpu_s(pid):
    """CPU time (user + system) process ``pid`` has used, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _inotify_instances(pid):
    n = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            n += os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:inotify"
        except OSError:
            pass
    return n


def test_a_new_entry_wakes_one_blocked_consumer_of_the_group_not_all_of_them(served):
    """400 consumers blocked on one stream cost 1.24 cores at 20 XADD/s:
    every entry woke every one of them (and past 127 of them each polled,
    out of inotify instances).  Now the blocked clients share the
    server's one inotify instance and take turns: an entry wakes the
    consumer first in line and it wakes the next (issue 29, item 10)."""
    r = served.client()
    r.xgroup_create("s", "g", id="$", mkstream=True)
    n, k = 200, 20
    conns = []
    try:
        _block_clients(served, r, n, b"XREADGROUP GROUP g c%d COUNT 1 BLOCK 0 STREAMS s >", conns)
        time.sleep(0.5)
        assert _inotify_instances(served.proc.pid) == 1
        before = _cpu_s(served.proc.pid)
        for i in range(k):
            r.xadd("s", {"i": i})
            time.sleep(0.05)                           # 20 XADD/s, as in the report
        deadline = time.monotonic() + 30
        while r.info("clients")["blocked_clients"] != n - k:
            assert time.monotonic() < deadline, r.info("clients")
            time.sleep(0.05)
        used = _cpu_s(served.proc.pid) - before
        assert r.xinfo_groups("s")[0]["pending"] == k      # each entry to one consumer
        # before: ~60 ms of CPU an entry with 200 blocked; now a few
        assert used / k < 0.015, "%.1f ms of CPU an entry" % (used / k * 1000)
    finally:
        for c in conns:
            c.close()


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_a_client_that_sends_without_reading_is_held_back_not_buffered(served):
    """A client pipelines 64 MB of commands and never reads a reply: the
    server stops reading it (TCP holds the rest) instead of buffering it
    all, and another client is served meanwhile (issue 29, item 6)."""
    served.client().ping()
    before = _rss_kb(served.proc.pid)
    hog = socket.create_connection(("127.0.0.1", served.port), timeout=5)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    chunk = b"*2\r\n$4\r\nECHO\r\n$100\r\n" + b"x" * 100 + b"\r\n"
    data = chunk * (64 * 1024 * 1024 // len(chunk))
    sent = [0]

    def push():
        view = memoryview(data)
        try:
            while sent[0] < len(data):
                sent[0] += hog.send(view[sent[0]:sent[0] + (1 << 20)])
        except OSError:
            pass
    t = threading.Thread(target=push, daemon=True)
    t.start()
    t.join(8)                                       # blocked: the server no longer reads it
    grown = _rss_kb(served.proc.pid) - before
    other = served.client()
    assert other.xadd("s", {"a": 1}) and other.xlen("s") == 1
    hog.close()
    assert sent[0] < len(data), "the server read all 64 MB"
    assert grown < 48 * 1024, "the server grew by %d MB" % (grown // 1024)


def test_before_auth_a_large_request_is_a_protocol_error_that_closes(tmp_path):
    s = Served(tmp_path / "store", "--requirepass", "pw")
    try:
        out = raw(s.port, b"*11\r\n" + b"$1\r\nx\r\n" * 11, expect_close=True)
        assert out == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
        out = raw(s.port, b"*2\r\n$4\r\nECHO\r\n$20000\r\n", expect_close=True)
        assert out == b"-ERR Protocol error: unauthenticated bulk length\r\n"
        big = b"*3\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n"   # wrong arity, but read: AUTH came first
        out = raw(s.port, b"AUTH pw\r\n*2\r\n$4\r\nECHO\r\n$20000\r\n" + b"y" * 20000 + b"\r\n" + big)
        assert out.startswith(b"+OK\r\n$20000\r\n" + b"y" * 20000 + b"\r\n-ERR wrong number of arguments"), out[:80]
    finally:
        s.stop(signal.SIGKILL)


def test_by_default_the_store_is_served_on_a_private_unix_socket_in_it(tmp_path):
    """``xs serve`` with no address listens on serve.sock in the store's
    own 0700 directory: its owner's clients get in, another user of the
    machine does not (as with the store's files); a second server on the
    same store is refused instead of taking the socket over (issue 29,
    item 4)."""
    import shutil
    db = tmp_path / "store"
    proc = subprocess.Popen(XS + ["--db", str(db), "serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    sock = str(db / "serve.sock")
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(sock):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        r = redis.Redis(unix_socket_path=sock)
        assert r.xadd("s", {"a": 1}, id="1-1") == b"1-1"
        assert oct(os.stat(db).st_mode & 0o777) == "0o700"
        second = subprocess.run(XS + ["--db", str(db), "serve"], capture_output=True, timeout=30, cwd=ROOT)
        assert second.returncode == 1 and b"another server is listening on" in second.stderr
        assert r.xlen("s") == 1                          # the first one still serves
        if os.geteuid() == 0 and shutil.which("setpriv"):
            probe = ("import socket, sys\ns = socket.socket(socket.AF_UNIX)\n"
                     "try:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print(e.errno)\nelse:\n"
                     "    print('connected')\n")
            p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", XS[0], "-I", "-c",
                                probe, sock], capture_output=True, timeout=30)
            assert p.stdout.strip() == b"13", (p.stdout, p.stderr)     # EACCES
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0 and not os.path.exists(sock)


def test_tcp_without_a_password_is_refused_unless_asked_for_by_name(tmp_path):
    base = XS + ["--db", str(tmp_path / "store"), "serve", "--port", str(free_port())]
    p = subprocess.run(base, capture_output=True, timeout=30, cwd=ROOT)
    assert p.returncode == 2
    assert b"TCP without a password lets every user of this machine read, write and delete this store" in p.stderr
    assert not (tmp_path / "store").exists()              # refused before anything was made
    s = Served(tmp_path / "store2")                       # with --allow-no-password: served, with a warning
    try:
        assert s.client().ping()
    finally:
        s.stop()
    assert "serving TCP without a password (--allow-no-password)" in s.log()


def test_the_help_unix_socket_lines_run_as_written(tmp_path):
    """``xs serve --help``'s example, run in a temporary directory."""
    import shlex
    import shutil
    helptext = subprocess.run(XS + ["serve", "--help"], capture_output=True, timeout=30, cwd=ROOT).stdout.decode()
    lines = ["xs --db events.xs serve &", "redis-cli -s events.xs/serve.sock XADD events '*' user alice"]
    for line in lines:
        assert "  " + line + "\n" in helptext, line
    proc = subprocess.Popen(XS + shlex.split(lines[0][:-2])[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=tmp_path, env=dict(os.environ, PYTHONPATH=ROOT))
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "events.xs" / "serve.sock").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        if shutil.which("redis-cli"):
            add = subprocess.run(shlex.split(lines[1]), capture_output=True, timeout=30, cwd=tmp_path)
            assert add.stdout.strip().count(b"-") == 1, add
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_the_docs_unix_socket_lines_run_as_written(tmp_path):
    """docs/serve.md's first example, run with the store in a temporary
    directory instead of /srv/app."""
    import shlex
    import shutil
    doc = open(os.path.join(ROOT, "docs", "serve.md"), encoding="utf-8").read()
    lines = ["xs --db /srv/app/events.xs serve &",
             "redis-cli -s /srv/app/events.xs/serve.sock XADD events '*' user alice action login",
             "redis-cli -s /srv/app/events.xs/serve.sock -3 XREAD COUNT 10 STREAMS events 0"]
    for line in lines:
        assert "    " + line + "\n" in doc, line
    where = str(tmp_path / "events.xs")
    argv = shlex.split(lines[0].replace("/srv/app/events.xs", where)[:-2])
    proc = subprocess.Popen(XS + argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(where + "/serve.sock"):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        if shutil.which("redis-cli"):
            add = subprocess.run(shlex.split(lines[1].replace("/srv/app/events.xs", where)), capture_output=True,
                                 timeout=30)
            entry_id = add.stdout.strip()
            assert entry_id.count(b"-") == 1, add
            read = subprocess.run(shlex.split(lines[2].replace("/srv/app/events.xs", where)), capture_output=True,
                                  timeout=30)
            assert entry_id in read.stdout and b"alice" in read.stdout, read
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def _docs_python_example():
    doc = open(os.path.join(ROOT, "docs", "serve.md"), encoding="utf-8").read()
    start = doc.index("```python\n") + len("```python\n")
    return doc[start:doc.index("```", start)]


@pytest.mark.parametrize("server", ["xs", "redis"])
def test_the_docs_redis_py_example_runs_against_xs_serve_and_redis_alike(tmp_path, server, redis):
    code = _docs_python_example()
    assert 'open("/srv/app/redis.pass")' in code and "port=6380" in code
    pw = tmp_path / "redis.pass"
    pw.write_text("s3cret\n")
    if server == "xs":
        s = Served(tmp_path / "store", "--requirepass-file", str(pw))
        port = s.port
    else:
        port = redis.port
        redis.flushall()
        redis.call("CONFIG", "SET", "requirepass", "s3cret")
    try:
        c = __import__("redis").Redis(port=port, password="s3cret")
        c.xadd("events", {"user": "alice", "action": "login"}, id="1-1")
        run = code.replace('"/srv/app/redis.pass"', repr(str(pw))).replace("port=6380", "port=%d" % port)
        run = run.replace("block=5000", "block=300")          # the second run waits for nothing new
        for _ in range(2):             # the second run meets the group it made: BUSYGROUP is handled
            p = subprocess.run([sys.executable, "-c", run], capture_output=True, timeout=60, cwd=str(tmp_path))
            assert p.returncode == 0, p.stderr.decode()
            assert p.stdout == (b"events 1-1 alice login\n" if _ == 0 else b"")
        assert c.xpending("events", "mailer")["pending"] == 0
    finally:
        if server == "xs":
            s.stop(signal.SIGKILL)
        else:
            c.config_set("requirepass", "")


# ------------------------------------------------------------ COMMAND DOCS

def _docs_of(reply):
    """redis-py's RESP2 COMMAND DOCS (flat lists) -> dicts."""
    if isinstance(reply, list) and len(reply) % 2 == 0 and all(isinstance(k, bytes) for k in reply[0::2]):
        return {k.decode(): _docs_of(v) for k, v in zip(reply[0::2], reply[1::2])}
    if isinstance(reply, list):
        return [_docs_of(x) for x in reply]
    return reply.decode() if isinstance(reply, bytes) else reply


def test_command_docs_gives_summary_since_and_the_argument_tree_as_redis_shapes_it(served):
    c = served.client()
    docs = _docs_of(c.execute_command("COMMAND DOCS", "xadd", "xread", "xgroup"))     # no redis-py callback
    xadd = docs["xadd"]
    assert xadd["since"] == "5.0.0" and xadd["group"] == "stream" and xadd["summary"].startswith("Append an entry")
    args = xadd["arguments"]
    assert args[0] == {"name": "key", "type": "key", "display_text": "key"}
    assert args[1] == {"name": "nomkstream", "type": "pure-token", "token": "NOMKSTREAM", "flags": ["optional"]}
    assert args[-2]["type"] == "oneof" and [a["token"] for a in args[-2]["arguments"] if "token" in a] == ["*"]
    assert args[-1]["type"] == "block" and args[-1]["flags"] == ["multiple"]
    assert [a["name"] for a in args[-1]["arguments"]] == ["field", "value"]
    streams = [a for a in docs["xread"]["arguments"] if a.get("token") == "STREAMS"][0]
    assert streams["name"] == "key" and streams["flags"] == ["multiple"]
    assert set(docs["xgroup"]["subcommands"]) >= {"xgroup|create", "xgroup|setid", "xgroup|destroy"}
    create = docs["xgroup"]["subcommands"]["xgroup|create"]["arguments"]
    assert [a["name"] for a in create[:2]] == ["key", "group"]


def test_redis_cli_help_and_hints_come_from_command_docs(tmp_path):
    import shutil
    if not shutil.which("redis-cli"):
        pytest.skip("redis-cli is not installed")
    from tests.cli.test_prompt_pty import Term
    sock = str(tmp_path / "s.sock")
    s = Served(tmp_path / "store", "--unixsocket", sock)
    t = Term(["redis-cli", "-s", sock], cols=200)
    try:
        t.expect(rb"s\.sock> ")
        t.send(b"help XADD\r")
        t.expect(rb"XADD key \[NOMKSTREAM\] \[KEEPREF\|DELREF\|ACKED\] \[IDMPAUTO pid\|IDMP pid iid\] "
                 rb"\[MAXLEN\|MINID \[=\|~\] threshold \[LIMIT count\]\] \*\|id field value \[field value \.\.\.\]")
        t.expect(rb"summary: Append an entry")
        t.expect(rb"since: 5\.0\.0")
        t.expect(rb"s\.sock> ")
        t.send(b"XREADGROUP ")                                       # the hint redis-cli draws after the name
        t.expect(rb"GROUP group consumer \[COUNT count\]")
    finally:
        t.close()
        s.stop(signal.SIGKILL)
