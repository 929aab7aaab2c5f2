"""A pytest plugin for redis-py's own test suite (tests/compat/
test_serve_redis_py.py passes it with ``-p``): ``--redis-url xs://PATH``
makes its clients in-process clients of the store PATH
(xstream_cli.client).  redis-py's tests build their pools from
``parse_url``'s options with a TCP connection class, so ``parse_url``
answers an ``xs_path`` option for such a URL and the pools put the
in-process connection class in its place."""
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.connection
import redis.connection

from xstream_cli import client


def _from_url(cls, is_async):
    orig = cls.from_url.__func__

    def from_url(klass, url, **kwargs):
        if isinstance(url, str) and url.startswith("xs://"):
            return client.from_url(url, asyncio=is_async, **kwargs)
        return orig(klass, url, **kwargs)
    cls.from_url = classmethod(from_url)


def _parse_url(mod):
    orig = mod.parse_url

    def parse_url(url):
        if isinstance(url, str) and url.startswith("xs://"):
            return {"xs_path": unquote(urlsplit(url).path)}
        return orig(url)
    mod.parse_url = parse_url


def _pool(cls, which):
    orig = cls.__init__

    def __init__(self, *args, **kwargs):
        path = kwargs.pop("xs_path", None)
        if path is not None:
            kwargs["connection_class"] = client._classes_once()[which]
            kwargs["path"] = path
        orig(self, *args, **kwargs)
    cls.__init__ = __init__


_from_url(redis.Redis, False)
_from_url(redis.asyncio.Redis, True)
_parse_url(redis.connection)
_parse_url(redis.asyncio.connection)
_pool(redis.ConnectionPool, 0)
_pool(redis.asyncio.ConnectionPool, 1)
