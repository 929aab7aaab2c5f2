"""The url mode's paging (storage.spark.network.Conn.pages) against a
real redis-server: every entry of the range once, in pages of ``chunk``,
the next page asked for while the caller still holds this one, and a
connection that stays usable when the caller stops early.  No Spark:
the wire alone."""
import time

import pytest

redis_py = pytest.importorskip("redis")

from storage.spark.network import Endpoint  # noqa: E402


@pytest.fixture
def server(redis):
    """The session's redis-server, emptied, with 1,000 entries in ``s``
    (IDs 1-0 ... 1000-0); a redis-py client on it."""
    redis.flushall()
    r = redis_py.Redis(port=redis.port)
    p = r.pipeline(transaction=False)
    for i in range(1, 1001):
        p.xadd("s", {"n": i}, id="%d-0" % i)
    p.execute()
    r.config_resetstat()
    yield r
    r.close()


def xrange_calls(r):
    return r.info("commandstats").get("cmdstat_xrange", {}).get("calls", 0)


def test_pages_give_every_entry_of_the_range_once_in_pages_of_chunk(server):
    url = "redis://127.0.0.1:%d" % server.connection_pool.connection_kwargs["port"]
    with Endpoint(url).connect() as conn:
        pages = list(conn.pages(b"s", (10, 0), (500, 0), 100))
    assert [len(p) for p in pages] == [100, 100, 100, 100, 91]
    ids = [bytes(i) for page in pages for i, _ in page]
    assert ids == [b"%d-0" % n for n in range(10, 501)]
    assert xrange_calls(server) == 5            # the last page was short: no page asked for after it
    with Endpoint(url).connect() as conn:       # a range that ends on a page's last entry
        assert [len(p) for p in conn.pages(b"s", (1, 0), (200, 0), 100)] == [100, 100]


def test_the_next_page_is_asked_for_before_this_one_is_handed_on(server):
    url = "redis://127.0.0.1:%d" % server.connection_pool.connection_kwargs["port"]
    with Endpoint(url).connect() as conn:
        pages = conn.pages(b"s", (1, 0), (1000, 0), 100)
        first = next(pages)
        assert len(first) == 100
        deadline = time.monotonic() + 10
        while xrange_calls(server) < 2:            # the second page is made while the caller holds the first
            assert time.monotonic() < deadline, "the next page was not asked for ahead"
            time.sleep(0.01)
        assert [len(p) for p in pages] == [100] * 9


def test_a_caller_that_stops_early_leaves_the_connection_usable(server):
    url = "redis://127.0.0.1:%d" % server.connection_pool.connection_kwargs["port"]
    with Endpoint(url).connect() as conn:
        pages = conn.pages(b"s", (1, 0), (1000, 0), 100)
        next(pages)
        pages.close()                              # a page was asked for and never taken
        assert conn.call("XLEN", "s") == 1000      # the reply to this call, not the dropped page
        assert [len(p) for p in conn.pages(b"s", (901, 0), (1000, 0), 50)] == [50, 50]
