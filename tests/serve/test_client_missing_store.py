"""The in-process client and a store that does not exist: the command
line's rules.  A read is an error naming the path and makes nothing (no
directory, no store); the first write makes the store, in a directory
that exists; ``create=True`` makes it at the first connection; a
blocking XREAD waits for the store to appear."""
import os
import subprocess
import sys
import threading
import time

import pytest

redis = pytest.importorskip("redis")

from xstream_cli.client import AsyncRedis, Redis, from_url  # noqa: E402

XS = os.path.join(os.path.dirname(sys.executable), "xs")


def test_a_read_of_a_missing_store_is_an_error_naming_it_and_makes_nothing(tmp_path):
    path = tmp_path / "pa" / "b" / "c" / "x.xs"
    r = Redis(str(path))
    with pytest.raises(redis.ResponseError, match="no such store: %s" % path):
        r.xlen("s")
    with pytest.raises(redis.ResponseError, match="no such store"):
        r.xrange("s")
    assert os.listdir(tmp_path) == []


def test_the_first_write_makes_the_store_and_later_reads_see_it(tmp_path):
    path = tmp_path / "x.xs"
    r = Redis(str(path), decode_responses=True)
    with pytest.raises(redis.ResponseError, match="no such store"):
        r.xlen("s")
    assert not path.exists()
    assert r.xadd("s", {"k": "v"}, id="1-1") == "1-1"
    assert (path / "data.mdb").exists()
    assert r.xlen("s") == 1
    assert Redis(str(path)).xlen("s") == 1


def test_a_write_in_a_missing_directory_is_refused_naming_it(tmp_path):
    path = tmp_path / "no" / "such" / "x.xs"
    r = Redis(str(path))
    with pytest.raises(redis.ResponseError, match="no such directory: %s" % (tmp_path / "no" / "such")):
        r.xadd("s", {"k": "v"})
    assert os.listdir(tmp_path) == []


def test_create_makes_the_store_at_the_first_connection(tmp_path):
    path = tmp_path / "x.xs"
    assert Redis(str(path), create=True).ping() is True
    assert (path / "data.mdb").exists()
    assert from_url("xs://%s?create=true" % (tmp_path / "y.xs")).xlen("s") == 0
    assert (tmp_path / "y.xs" / "data.mdb").exists()
    with pytest.raises(redis.ConnectionError, match="no such directory"):
        Redis(str(tmp_path / "none" / "z.xs"), create=True).ping()


def test_a_store_that_is_not_a_store_is_a_connection_error(tmp_path):
    (tmp_path / "x.xs").mkdir()
    (tmp_path / "x.xs" / "data.mdb").write_bytes(b"not lmdb" * 100)
    with pytest.raises(redis.ConnectionError, match="x.xs"):
        Redis(str(tmp_path / "x.xs")).xlen("s")


def test_a_blocking_xread_waits_for_the_store_and_its_block_time(tmp_path):
    path = tmp_path / "x.xs"
    r = Redis(str(path), decode_responses=True)
    t = time.monotonic()
    assert r.xread({"s": "$"}, block=300) in ([], None)     # nil after BLOCK, as on a missing stream
    assert time.monotonic() - t >= 0.29
    assert not path.exists()

    def produce():
        time.sleep(0.4)
        subprocess.run([XS, "--db", str(path), "XADD", "s", "5-1", "f", "v"], check=True, timeout=30)
    th = threading.Thread(target=produce)
    th.start()
    try:
        assert r.xread({"s": "0"}, block=20000) == [["s", [("5-1", {"f": "v"})]]]
    finally:
        th.join()


def test_a_socket_timeout_ends_a_wait_for_a_missing_store(tmp_path):
    r = Redis(str(tmp_path / "x.xs"), socket_timeout=0.3)
    with pytest.raises(redis.TimeoutError):
        r.xread({"s": "0"}, block=0)
    assert os.listdir(tmp_path) == []


def test_asyncio_client_follows_the_same_rules(tmp_path):
    import asyncio

    async def main():
        r = AsyncRedis(str(tmp_path / "x.xs"))
        with pytest.raises(redis.ResponseError, match="no such store"):
            await r.xlen("s")
        assert not (tmp_path / "x.xs").exists()
        await r.xadd("s", {"k": "v"})
        assert await r.xlen("s") == 1
        await r.aclose()
    asyncio.run(main())
