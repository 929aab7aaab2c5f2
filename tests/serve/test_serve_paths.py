"""The paths that make xs serve fast, and that they change nothing a
client sees: the ``serve`` extra (hiredis reads requests, uvloop runs
the loop) against the pure-Python server on the same bytes; pipelined
plain XADDs and XREADGROUP/XACK reaching the engine's shared runs
(xstream_cli.execution.batch); a job's replies written at once; the
jobs of one loop iteration crossing to the engine thread together; the
group commit waiting a little for the clients it just answered
(engine.Engine._gather); a worker's repeated read parsed once."""
import asyncio
import importlib.util
import signal
import socket
import threading
import time

import pytest

from storage import Store
from storage.txn import Txn
from tests.harness.served import Served, raw, wire
from xstream_cli.server import engine as engine_mod
from xstream_cli.server import jobs as jobs_mod
from xstream_cli.server.config import Config
from xstream_cli.server.connection import Server
from xstream_cli.server.engine import Engine
from xstream_cli.server.jobs import Item, Job, item_for

EXTRA = all(importlib.util.find_spec(m) is not None for m in ("hiredis", "uvloop"))


# a pipeline of every shape of request and reply, ending with a request
# hiredis would read as a command but Redis refuses
PIPELINE = (wire([b"XADD", b"s", b"1-1", b"f", b"v"], [b"XADD", b"s", b"2-1", b"f", b"a\r\nb"],
                 [b"XGROUP", b"CREATE", b"s", b"g", b"0"],
                 [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"5", b"STREAMS", b"s", b">"],
                 [b"XACK", b"s", b"g", b"1-1", b"9-9"], [b"XPENDING", b"s", b"g"], [b"XINFO", b"STREAM", b"s"],
                 [b"XREAD", b"STREAMS", b"nokey", b"0"], [b"NOSUCH"], [b"ECHO", b"x" * 5000])
            + b"PING\r\nECHO \"a b\"\n*0\r\n"
            + wire([b"HELLO", b"3"], [b"XINFO", b"STREAM", b"s"], [b"XRANGE", b"s", b"-", b"+"],
                   [b"XREAD", b"STREAMS", b"nokey", b"0"])
            + b"*2\r\n$4\r\nECHO\r\n+hi\r\n" + wire([b"PING"]))


@pytest.mark.skipif(not EXTRA, reason="the serve extra (hiredis, uvloop) is not installed")
def test_the_serve_extra_and_the_pure_python_server_send_the_same_bytes(tmp_path):
    servers = [Served(tmp_path / "extra"), Served(tmp_path / "pure", env={"XS_SERVE_PURE": "1"})]
    try:
        got = []
        for s in servers:
            got.append(raw(s.port, PIPELINE, expect_close=True))
            info = s.client().info("server")
            got.append(info["multiplexing_api"])
        extra, extra_loop, pure, pure_loop = got
        assert extra == pure
        assert extra.endswith(b"-ERR Protocol error: expected '$', got '+'\r\n")
        assert b"$5000\r\n" in extra and b"%" in extra           # the big argument; RESP3 maps after HELLO 3
        assert (extra_loop, pure_loop) == ("uvloop", "asyncio")
    finally:
        logs = [s.stop() is not None and s.log() for s in servers]
    assert "requests read by hiredis; event loop: uvloop" in logs[0]
    assert "requests read by the pure-Python reader; event loop: asyncio" in logs[1]


# ----------------------------------------------------------- in process

def _in_process(tmp_path, script, **spies):
    """Run ``script(server, sock)`` (a coroutine function) against an
    in-process server on a fresh store, with ``Txn`` methods wrapped to
    record their arguments (``spies``: name -> list)."""
    store = Store(str(tmp_path / "db"))
    originals = {name: getattr(Txn, name) for name in spies}

    def spy(name):
        real = originals[name]

        def wrapped(self, arg, *rest, **kw):
            spies[name].append(list(arg))
            return real(self, arg, *rest, **kw)
        return wrapped
    for name in spies:
        setattr(Txn, name, spy(name))

    async def main():
        srv = Server(store, Config(unixsocket=None, port=0, db=str(tmp_path / "db")))
        await srv.start_in_process()
        ours, theirs = socket.socketpair()
        await srv.adopt(theirs)
        ours.setblocking(False)
        try:
            return await script(srv, ours)
        finally:
            ours.close()
            await srv.stop()
    try:
        return asyncio.run(main())
    finally:
        for name, real in originals.items():
            setattr(Txn, name, real)
        store.close()


async def _exchange(sock, data, until):
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, data)
    got = b""
    deadline = time.monotonic() + 20
    while not until(got):
        assert time.monotonic() < deadline, got[-200:]
        got += await asyncio.wait_for(loop.sock_recv(sock, 1 << 16), 20)
    return got


def test_a_pipeline_of_plain_xadds_is_one_engine_call_and_one_write(tmp_path):
    sends = []

    async def script(srv, sock):
        real = srv._send
        srv._send = lambda c, data: sends.append(data) or real(c, data)
        return await _exchange(sock, wire(*[[b"XADD", b"s", b"*", b"n", b"%d" % i] for i in range(300)]),
                               lambda got: got.count(b"\r\n") >= 600)
    adds = []
    got = _in_process(tmp_path, script, add_auto_many=adds)
    assert [len(a) for a in adds] == [300]                   # one run: Txn.add_auto_many
    assert len(sends) == 1 and sends[0] == got               # the 300 replies, encoded and written at once
    assert got.count(b"$") == 300


def test_pipelined_reads_and_acks_share_one_savepoint(tmp_path):
    async def script(srv, sock):
        await _exchange(sock, wire(*[[b"XADD", b"s", b"%d-1" % i, b"f", b"v"] for i in range(1, 21)],
                                   [b"XGROUP", b"CREATE", b"s", b"g", b"0"]), lambda got: got.count(b"\r\n") >= 41)
        work = []
        for i in range(1, 11):
            work += [[b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"STREAMS", b"s", b">"],
                     [b"XACK", b"s", b"g", b"%d-1" % i]]
        return await _exchange(sock, wire(*work), lambda got: got.count(b":1\r\n") >= 10)
    shared = []
    got = _in_process(tmp_path, script, shared=shared)
    assert [len(s) for s in shared] == [20, 20]       # the 20 explicit-ID adds, then 10 reads and 10 acks: a run each
    assert got.count(b":1\r\n") == 10 and b"10-1" in got


def test_the_jobs_of_one_loop_iteration_run_in_the_loop_as_one_commit_when_the_write_lock_is_free(tmp_path):
    async def script(srv, sock):
        handed = []
        real = srv.engine.submit
        srv.engine.submit = lambda x: handed.append(x) or real(x)
        done = []
        jobs = [Job([item_for([b"XADD", b"s", b"*", b"f", b"%d" % i])], done.append, owner=i) for i in range(3)]
        for j in jobs:
            srv._submit(j)                # three clients' requests read in one wake-up
        assert done == []
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert len(done) == 3 and handed == []     # answered in the loop's thread: no hand-off
        return srv.engine.commits
    assert _in_process(tmp_path, script) == 1


def test_the_jobs_of_one_loop_iteration_cross_to_the_engine_and_back_together(tmp_path):
    async def script(srv, sock):
        srv.engine.run_here = False             # as when another process holds the write lock
        handed, delivered = [], []
        real = srv.engine.submit
        srv.engine.submit = lambda x: handed.append(x) or real(x)
        real_deliver = srv.engine.deliver
        srv.engine.deliver = lambda done: delivered.append(len(done)) or real_deliver(done)
        done = []
        jobs = [Job([item_for([b"XADD", b"s", b"*", b"f", b"%d" % i])], done.append, owner=i) for i in range(3)]
        for j in jobs:
            srv._submit(j)                # three clients' requests read in one wake-up
        assert handed == []
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert handed == [jobs]
        while len(done) < 3:
            await asyncio.sleep(0.01)
        assert delivered == [3]               # and their answers cross back in one wake-up of the loop
        return srv.engine.commits
    assert _in_process(tmp_path, script) == 1


def test_reads_run_in_the_loop_s_thread_unless_a_transaction_is_open_and_a_deep_pipeline_keeps_its_order(
        tmp_path):
    s = Served(tmp_path / "store")
    try:
        r = s.client()
        for i in range(5):
            r.xadd("s", {"n": i}, id="%d-1" % (i + 1))
        # 3000 reads in one pipeline (three steps of the parser), then a write, then reads again: in order
        pipe = r.pipeline(transaction=False)
        for i in range(3000):
            pipe.xrange("s", "%d-1" % (i % 5 + 1), "+", count=1)
        pipe.xadd("s", {"n": 5}, id="6-1")
        pipe.xlen("s")
        got = pipe.execute()
        assert [g[0][0] for g in got[:3000]] == [b"%d-1" % (i % 5 + 1) for i in range(3000)]
        assert got[3000:] == [b"6-1", 6]
        commits = int(r.info("persistence")["commits"])
        for _ in range(50):
            assert r.xlen("s") == 6                  # reads alone commit nothing
        assert int(r.info("persistence")["commits"]) == commits
    finally:
        s.stop()


def test_a_read_waits_for_nothing_while_the_engine_holds_the_store_lock(tmp_path):
    async def script(srv, sock):
        lock = srv.engine.store.lock
        held, release = threading.Event(), threading.Event()

        def hold():                              # as the engine thread does while it commits
            with lock:
                held.set()
                release.wait(10)
        t = threading.Thread(target=hold)
        t.start()
        held.wait(5)
        try:
            c = next(iter(srv.clients.values()))
            answered = []
            c.writer.write = answered.append
            srv._received(c, b"*2\r\n$4\r\nXLEN\r\n$1\r\ns\r\n")
            assert c.inflight and answered == []  # handed to the engine, not waiting here for its lock
        finally:
            release.set()
            t.join(10)
        while not answered:
            await asyncio.sleep(0.01)
        return answered
    assert _in_process(tmp_path, script) == [b":0\r\n"]


# ------------------------------------------------------- gathering commits

@pytest.fixture
def engine(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_mod, "GATHER_MIN_S", 0.0)
    monkeypatch.setattr(engine_mod, "GATHER_FRACTION", 1000.0)
    store = Store(str(tmp_path / "db"))
    eng = Engine(store)
    yield eng
    eng.stop(10)
    store.close()


def _job(owner, answered):
    ev = threading.Event()
    return Job([item_for([b"XADD", b"s", b"*", b"owner", b"%d" % owner])],
               lambda res: answered.append((owner, time.monotonic())) or ev.set(), owner=owner), ev


def test_a_commit_waits_for_the_clients_the_last_one_answered(engine, monkeypatch):
    monkeypatch.setattr(engine_mod, "GATHER_MAX_S", 10.0)
    engine.last_commit, engine.last_owners = 1.0, {1, 2}
    answered = []
    engine.start()
    j1, ev1 = _job(1, answered)
    j2, ev2 = _job(2, answered)
    engine.submit(j1)
    time.sleep(0.3)
    assert not ev1.is_set()                   # waiting for client 2
    sent = time.monotonic()
    engine.submit(j2)
    assert ev1.wait(10) and ev2.wait(10)
    assert engine.commits == 1 and min(t for _, t in answered) >= sent


def test_a_lone_client_and_a_client_back_already_never_wait(engine, monkeypatch):
    monkeypatch.setattr(engine_mod, "GATHER_MAX_S", 10.0)
    engine.start()
    answered = []
    for owners in ({1}, {1, 2}):
        engine.last_commit, engine.last_owners = 1.0, set(owners)
        jobs = [_job(o, answered) for o in owners]
        t = time.monotonic()
        engine.submit([j for j, _ in jobs])
        assert all(ev.wait(10) for _, ev in jobs)
        assert time.monotonic() - t < 5


def test_a_wait_that_brings_nobody_is_not_repeated_for_a_while(engine, monkeypatch):
    monkeypatch.setattr(engine_mod, "GATHER_MAX_S", 0.2)
    engine.last_commit, engine.last_owners = 1.0, {1, 2}
    engine.start()
    answered = []
    j, ev = _job(1, answered)
    t = time.monotonic()
    engine.submit(j)
    assert ev.wait(10) and time.monotonic() - t >= 0.2          # waited for client 2, in vain
    assert engine._gather_skip == engine_mod.GATHER_BACKOFF
    engine.last_owners = {1, 2}
    j, ev = _job(1, answered)
    t = time.monotonic()
    engine.submit(j)
    assert ev.wait(10) and time.monotonic() - t < 0.2           # not again
    assert engine._gather_skip == engine_mod.GATHER_BACKOFF - 1


def test_gathering_keeps_replies_after_their_commit_under_sigkill(tmp_path):
    """Many clients whose commits gather: every XADD answered before a
    SIGKILL is in the store afterwards."""
    s = Served(tmp_path / "store")
    acked = []
    stop = threading.Event()

    def client(k):
        r = s.client()
        try:
            while not stop.is_set():
                acked.append(r.xadd("s", {"k": str(k)}))
        except Exception:
            pass
    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    s.stop(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()
    s2 = Served(tmp_path / "store")
    try:
        ids = {i for i, _ in s2.client().xrange("s")}
        assert acked and set(acked) <= ids
    finally:
        s2.stop(signal.SIGKILL)


# --------------------------------------------------------- parse cache

def test_a_repeated_read_is_parsed_once_and_a_bad_id_never_kept():
    argv = [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"STREAMS", b"cache-s", b">"]
    a, b = item_for(list(argv)), item_for(list(argv))
    assert a is not b and a.args is b.args and a.cmd is b.cmd and a.array_null and a.name == "xreadgroup"
    bad = [b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", b"cache-s", b"1-x"]
    assert item_for(bad).args is not item_for(bad).args
    assert tuple(bad) not in jobs_mod._parsed


@pytest.mark.parametrize("argv", [
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"STREAMS", b"again-s", b">"],
    [b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"100", b"STREAMS", b"again-s", b">"],
    [b"XREAD", b"COUNT", b"10", b"STREAMS", b"again-s", b"0"],
    [b"XREAD", b"STREAMS", b"again-s", b"0"],                 # no COUNT: may pass a page (heavy)
])
def test_a_read_parsed_before_is_the_item_a_first_parse_makes(argv):
    jobs_mod._parsed.pop(tuple(argv), None)
    first, again = item_for(list(argv)), item_for(list(argv))
    assert tuple(argv) in jobs_mod._parsed
    assert {k: getattr(again, k) for k in Item.__slots__} == {k: getattr(first, k) for k in Item.__slots__}


def test_a_client_left_waiting_in_a_blocked_read_is_not_waited_for(engine, monkeypatch):
    monkeypatch.setattr(engine_mod, "GATHER_MAX_S", 10.0)
    engine.start()
    done = threading.Event()
    blocked = Job([item_for([b"XREAD", b"BLOCK", b"0", b"STREAMS", b"other", b"$"])], lambda res: done.set(), owner=7)
    answered = []
    j1, ev1 = _job(1, answered)
    engine.submit([blocked, j1])             # one write batch: client 7 is left blocked, client 1 answered
    assert done.wait(10) and ev1.wait(10)
    assert engine.last_owners == {1}
    engine.last_commit = 1.0
    j2, ev2 = _job(1, answered)
    t = time.monotonic()
    engine.submit(j2)
    assert ev2.wait(10) and time.monotonic() - t < 5
