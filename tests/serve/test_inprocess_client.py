"""redis-py in process (xstream_cli.client): a redis.Redis and a
redis.asyncio.Redis bound to a store, with the server's code running in
the process (issue 28).  What a user of redis-py relies on: replies in
both protocols, pipelines and transactions, blocked reads woken by
another process, exactly-once delivery across processes, durability, and
Ctrl-C."""
import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, XS

redis = pytest.importorskip("redis")


def cli(db, *args):
    p = subprocess.run(XS + ["--db", str(db), "--json"] + list(args), capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def child(code, *args):
    """A Python process running ``code`` (the repository importable)."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)] + [str(a) for a in args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)


def test_a_redis_py_client_on_a_store_answers_as_redis_py_expects(tmp_path):
    from xstream_cli.client import Redis, from_url
    db = tmp_path / "events.xs"
    r = Redis(db, decode_responses=True)
    assert isinstance(r, redis.Redis) and r.ping() is True
    i = r.xadd("events", {"user": "alice"}, id="1-1")
    assert i == "1-1" and r.xrange("events") == [("1-1", {"user": "alice"})]
    assert cli(db, "XLEN", "events") == 1                    # in the store, for every process
    pipe = r.pipeline()                                      # MULTI / EXEC
    pipe.xadd("events", {"user": "bob"}, id="2-1").xlen("events")
    assert pipe.execute() == ["2-1", 2]
    pipe = r.pipeline(transaction=False)
    for n in range(3, 6):
        pipe.xadd("events", {"n": n}, id="%d-1" % n)
    assert pipe.execute() == ["3-1", "4-1", "5-1"]
    r.xgroup_create("events", "g", id="0")
    assert r.xreadgroup("g", "c", {"events": ">"}, count=1) == [["events", [("1-1", {"user": "alice"})]]]
    assert r.xack("events", "g", "1-1") == 1
    with pytest.raises(redis.ResponseError, match="BUSYGROUP"):
        r.xgroup_create("events", "g", id="0")
    r3 = Redis(db, protocol=3)
    assert r3.xinfo_stream("events")["length"] == 5
    assert r3.xreadgroup("g", "c", {"events": ">"}, count=1) == {b"events": [[(b"2-1", {b"user": b"bob"})]]}
    assert from_url("xs://%s?decode_responses=true" % db).xlen("events") == 5
    with pytest.raises(ValueError, match="xs://"):
        from_url("redis://localhost/0")
    with pytest.raises(ValueError, match="three slashes"):      # not /events.xs on a host named data
        from_url("xs://data/events.xs")


def test_watch_makes_a_transaction_fail_when_another_process_changes_the_stream(tmp_path):
    from xstream_cli.client import Redis
    db = tmp_path / "db"
    r = Redis(db)
    r.xadd("s", {"a": 1}, id="1-1")
    with r.pipeline() as pipe:
        pipe.watch("s")
        cli(db, "XADD", "s", "2-1", "b", "2")                # another process
        pipe.multi()
        pipe.xadd("s", {"c": 3}, id="3-1")
        with pytest.raises(redis.WatchError):
            pipe.execute()
    assert r.xlen("s") == 2


def test_a_blocked_read_wakes_on_an_xadd_from_a_shell(tmp_path):
    from xstream_cli.client import Redis
    db = tmp_path / "db"
    r = Redis(db, decode_responses=True)
    r.xgroup_create("jobs", "g", id="$", mkstream=True)
    writer = subprocess.Popen(["sh", "-c", "sleep 0.5; exec \"$@\"", "sh"] + XS +
                              ["--db", str(db), "XADD", "jobs", "7-1", "task", "resize"], cwd=ROOT)
    t = time.monotonic()
    got = r.xreadgroup("g", "worker", {"jobs": ">"}, count=1, block=20000)
    assert got == [["jobs", [("7-1", {"task": "resize"})]]]
    assert 0.3 < time.monotonic() - t < 15
    writer.wait(30)


CONSUMER = """
import sys
from xstream_cli.client import Redis
r = Redis(sys.argv[1], decode_responses=True)
print("ready", flush=True)
while True:
    got = r.xreadgroup("g", sys.argv[2], {"s": ">"}, count=1, block=3000)
    if not got:
        break
    for _, entries in got:
        for i, fields in entries:
            r.xack("s", "g", i)
            print(fields["n"], flush=True)
"""


def test_two_processes_and_the_cli_share_a_group_each_entry_delivered_once(tmp_path):
    from xstream_cli.client import Redis
    db = tmp_path / "db"
    Redis(db).xgroup_create("s", "g", id="$", mkstream=True)
    consumers = [child(CONSUMER, db, "c%d" % k) for k in range(2)]
    for c in consumers:
        assert c.stdout.readline() == b"ready\n"
    n = 60
    lines = "".join("XADD s * n %d\n" % i for i in range(n)).encode()
    w = subprocess.run(XS + ["--db", str(db)], input=lines, capture_output=True, cwd=ROOT, timeout=60)
    assert w.returncode == 0, w.stderr
    got = []
    for c in consumers:
        out, err = c.communicate(timeout=60)
        assert c.returncode == 0, err
        got.append(out.split()[:])
    seen = [int(x) for g in got for x in g]
    assert sorted(seen) == list(range(n))                    # each exactly once
    assert all(g for g in got), got                          # both processes served
    assert cli(db, "XPENDING", "s", "g")[0] == 0


def test_a_reply_means_the_write_is_on_disk_even_if_the_process_is_killed(tmp_path):
    db = tmp_path / "db"
    p = child("""
        import sys
        from xstream_cli.client import Redis
        r = Redis(sys.argv[1])
        for i in range(1, 1000000):
            r.xadd("s", {"n": i}, id="%d-1" % i)
            print(i, flush=True)
    """, db)
    for _ in range(50):
        last = int(p.stdout.readline())
    p.send_signal(signal.SIGKILL)
    p.wait(30)
    assert cli(db, "XLEN", "s") >= last                      # every acknowledged XADD is there


def _commits(r):
    return r.info("persistence")["commits"]


def test_a_pipeline_is_one_commit_and_a_command_never_leaves_the_calling_thread(tmp_path, monkeypatch):
    from xstream_cli import client
    from xstream_cli.server.engine import Engine
    r = client.Redis(tmp_path / "db")
    r.xadd("s", {"n": 0})
    before = _commits(r)
    handed = []
    monkeypatch.setattr(Engine, "submit", lambda self, job: handed.append(job))   # the engine thread: never used
    p = r.pipeline(transaction=False)
    for i in range(50):
        p.xadd("s", {"n": i})
    p.xlen("s")
    assert p.execute()[-1] == 51
    assert r.xadd("s", {"n": 51}) and r.xlen("s") == 52
    monkeypatch.undo()                                       # INFO runs at the server, with the engine
    assert handed == []
    assert _commits(r) == before + 2                         # one for the pipeline, one for the XADD


def test_a_write_while_another_thread_is_in_a_transaction_joins_the_engine_thread_s_commit(tmp_path, monkeypatch):
    import threading

    from xstream_cli import client
    from xstream_cli.server.engine import Engine
    r = client.Redis(tmp_path / "db")
    r.xadd("s", {"n": 0})
    engine = client._host(str(tmp_path / "db")).server.engine
    handed = []
    real = Engine.submit
    monkeypatch.setattr(Engine, "submit", lambda self, job: handed.append(job) or real(self, job))
    got = []
    engine.store.lock.acquire()                              # another thread's transaction, open
    try:
        t = threading.Thread(target=lambda: got.append(r.xadd("s", {"n": 1})), daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        while not handed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(handed) == 1 and not got                  # handed to the engine thread (Engine.run), waiting
    finally:
        engine.store.lock.release()
    t.join(10)
    assert len(got) == 1 and r.xlen("s") == 2                # committed by the engine thread, then answered


def test_a_transaction_and_hello_3_go_through_the_server_s_connection_state(tmp_path):
    from xstream_cli.client import Redis
    r = Redis(tmp_path / "db", protocol=3, decode_responses=True)
    p = r.pipeline(transaction=True)
    p.xadd("s", {"a": "1"}, id="1-1").xadd("s", {"a": "2"}, id="1-1").xlen("s")
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        p.execute()
    assert r.xlen("s") == 1                                  # MULTI / EXEC ran at the server: the good one stayed
    assert r.xinfo_stream("s")["length"] == 1                # a RESP3 map, encoded in the protocol HELLO set
    assert r.execute_command("CLIENT", "INFO").split("resp=")[1].startswith("3")


def _blocked_reader(db, result, **kw):
    from xstream_cli.client import Redis
    r = Redis(db, **kw)

    def read():
        try:
            result.append(r.xread({"s": "$"}, block=0))
        except Exception as e:       # noqa: BLE001 (the test looks at it)
            result.append(e)
    import threading
    t = threading.Thread(target=read, daemon=True)
    t.start()
    return t


def _wait_blocked(r, n=1):
    deadline = time.monotonic() + 10
    while sum("flags=b" in line for line in r.execute_command("CLIENT", "LIST").splitlines()) < n:
        assert time.monotonic() < deadline, "no client blocked"
        time.sleep(0.02)
    return [line.split()[0].split("=")[1] for line in r.execute_command("CLIENT", "LIST").splitlines()
            if "flags=b" in line][0]


def test_client_unblock_and_client_kill_end_an_in_process_blocked_read(tmp_path):
    from xstream_cli.client import Redis
    db = tmp_path / "db"
    admin = Redis(db, decode_responses=True)
    admin.xadd("s", {"a": 1})
    for how, expect in (("TIMEOUT", None), ("ERROR", redis.ResponseError)):
        got = []
        t = _blocked_reader(db, got)
        cid = _wait_blocked(admin)
        assert admin.execute_command("CLIENT", "UNBLOCK", cid, how) == 1
        t.join(10)
        assert not t.is_alive()
        if expect is None:
            assert got == [[]] or got == [None], got        # a timeout's null reply
        else:
            assert isinstance(got[0], expect) and "UNBLOCKED" in str(got[0]), got
    got = []
    t = _blocked_reader(db, got, retry_on_error=[])
    cid = _wait_blocked(admin)
    assert admin.execute_command("CLIENT", "KILL", "ID", cid) == 1
    t.join(10)
    assert not t.is_alive() and isinstance(got[0], redis.ConnectionError), got


def test_a_socket_timeout_shorter_than_the_block_times_out_as_over_a_network(tmp_path):
    from xstream_cli.client import Redis
    r = Redis(tmp_path / "db", socket_timeout=0.5)
    r.xadd("s", {"a": 1})
    t = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        r.xread({"s": "$"}, block=5000)
    assert time.monotonic() - t < 4
    assert r.xlen("s") == 1                                  # the client goes on (a new connection)
    assert r.info("clients")["blocked_clients"] == 0         # the wait ended with it


def test_threads_writing_at_once_lose_nothing(tmp_path):
    import threading

    from xstream_cli.client import Redis
    r = Redis(tmp_path / "db", max_connections=16)

    def write(k):
        for i in range(40):
            r.xadd("s", {"t": k, "i": i})
    threads = [threading.Thread(target=write, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert r.xlen("s") == 320
    assert cli(tmp_path / "db", "XLEN", "s") == 320
    assert len({tuple(sorted(f.items())) for _, f in r.xrange("s")}) == 320


def test_ctrl_c_ends_a_blocked_read_and_the_process_exits(tmp_path):
    db = tmp_path / "db"
    p = child("""
        import sys
        from xstream_cli.client import Redis
        r = Redis(sys.argv[1])
        r.xadd("s", {"a": 1})
        print("blocking", flush=True)
        try:
            r.xread({"s": "$"}, block=0)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """, db)
    assert p.stdout.readline() == b"blocking\n"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)                     # no hang at exit on the server's threads
    assert out == b"interrupted\n", err
    assert p.returncode == 0


def test_redis_asyncio_blocked_read_leaves_the_event_loop_free(tmp_path):
    from xstream_cli.client import AsyncRedis
    db = tmp_path / "db"

    async def main():
        r = AsyncRedis(db, decode_responses=True)
        await r.xgroup_create("s", "g", id="$", mkstream=True)
        ticks = []

        async def ticker():
            for _ in range(5):
                ticks.append(time.monotonic())
                await asyncio.sleep(0.1)
        reader = asyncio.create_task(r.xreadgroup("g", "c", {"s": ">"}, block=10000))
        await ticker()                                       # runs while the read is blocked
        other = AsyncRedis(db)
        await other.xadd("s", {"n": 1}, id="5-1")
        got = await asyncio.wait_for(reader, 10)
        p = r.pipeline(transaction=True)
        p.xlen("s")
        p.xack("s", "g", "5-1")
        res = await p.execute()
        await r.aclose()
        await other.aclose()
        return ticks, got, res

    ticks, got, res = asyncio.run(main())
    assert len(ticks) == 5
    assert got == [["s", [("5-1", {"n": "1"})]]]
    assert res == [1, 1]


def test_a_process_whose_other_thread_is_blocked_in_a_read_exits_when_its_main_thread_ends(tmp_path):
    """The server's blocked waits are ended at exit (the thread pool that
    runs them would otherwise be waited for: a process that never ends)."""
    p = child("""
        import sys, threading
        from xstream_cli.client import Redis
        r = Redis(sys.argv[1])
        r.xadd("s", {"a": 1})
        threading.Thread(target=lambda: r.xread({"s": "$"}, block=0), daemon=True).start()
        import time; time.sleep(0.5)
        print("done", flush=True)
    """, tmp_path / "db")
    assert p.stdout.readline() == b"done\n"
    t = time.monotonic()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert time.monotonic() - t < 3                          # not held up by the blocked wait (5 s before)


def test_the_python_page_s_redis_py_examples_run_as_written(tmp_path):
    """docs/python.md's python blocks, in order, in one process, with its
    store path mapped here: the producer's two jobs, the worker that
    resizes them and stops when idle, and the asyncio example."""
    import re
    text = open(os.path.join(ROOT, "docs", "python.md"), encoding="utf-8").read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 3, blocks
    code = "\n".join(blocks).replace("/data/events.xs", str(tmp_path / "events.xs"))
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout == "resizing cat.png\nresizing dog.png\n3\n"
    assert cli(tmp_path / "events.xs", "XPENDING", "jobs", "workers")[0] == 0
