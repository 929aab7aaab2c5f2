"""redis-py without a server: clients bound to a store, in this process.

    from xstream_cli.client import Redis
    r = Redis("/data/events.xs", decode_responses=True)
    r.xadd("events", {"user": "alice"})

    from xstream_cli.client import AsyncRedis        # redis.asyncio
    r = AsyncRedis("/data/events.xs")

``Redis(path, **kwargs)`` is a ``redis.Redis`` (``AsyncRedis``: a
``redis.asyncio.Redis``), with every keyword redis-py takes
(``decode_responses``, ``protocol=3``, ``max_connections`` ...), so every
method, pipeline and transaction of redis-py works.  ``from_url("xs:///
data/events.xs?decode_responses=true")`` is the same for a URL.

The seam is redis-py's connection class: a connection's socket is one
end of a ``socketpair()`` whose other end is handed to the xs server's
own connection code, running in this process (a thread with an asyncio
loop: xstream_cli.server.connection.Server, started without listening).
So each command goes through the same parser, command table, batch driver,
engine thread and reply encoding as ``xs serve``; nothing listens, and
no other process can connect.  One such server per store and process,
made on first use.

Every guarantee of the store holds: a command's reply (a pipeline's, an
EXEC's) comes after its commit is on disk; other processes (xs, xs serve,
other in-process clients) use the store at the same time; a blocked read
waits on the store's notification files, so an ``xs XADD`` from a shell
wakes it; Ctrl-C ends a blocked read (redis-py closes the connection,
which ends the server side's wait).

redis-py is the ``bridge`` extra (``pip install 'xstreamlog[bridge]'``);
nothing on the command line's path imports this module.
"""
import asyncio
import os
import socket
import threading

_hosts = {}                   # store path -> _Host
_lock = threading.Lock()


class _Host:
    """The in-process server of one store: its thread and loop."""

    def __init__(self, path):
        from xstream_cli.context import open_path
        from xstream_cli.server.config import Config
        from xstream_cli.server.connection import Server
        self.path = path
        self.store = open_path(path)
        self.server = Server(self.store, Config(unixsocket=None, port=0, db=path, durable=self.store.durable))
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        failed = []

        def run():
            asyncio.set_event_loop(self.loop)
            try:
                self.loop.run_until_complete(self.server.start_in_process())
            except BaseException as e:     # noqa: BLE001 (told to the caller below)
                failed.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
        threading.Thread(target=run, name="xs-client", daemon=True).start()
        ready.wait()
        if failed:
            self.store.close()
            raise failed[0]
        # before the pool's threads are joined at exit: end the blocked reads
        threading._register_atexit(self.shutdown)   # type: ignore[attr-defined]

    def connect(self):
        """A new client of the server: our end of a socket pair."""
        ours, theirs = socket.socketpair()
        try:
            asyncio.run_coroutine_threadsafe(self.server.adopt(theirs), self.loop).result(30)
        except BaseException:
            ours.close()
            theirs.close()
            raise
        return ours

    def shutdown(self):
        try:
            self.server.engine.cancel_all()
        except Exception:       # noqa: BLE001 (exiting)
            pass


def _host(path):
    key = os.path.realpath(path)
    with _lock:
        h = _hosts.get(key)
        if h is None:
            h = _hosts[key] = _Host(key)
        return h


def _forget():
    """In a forked child: the parent's server thread did not come along."""
    _hosts.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _connection_classes():
    import redis.asyncio.connection as aconn
    import redis.connection as conn

    class Connection(conn.UnixDomainSocketConnection):
        """redis-py's connection to the in-process server of store ``path``."""

        def _connect(self):
            sock = _host(self.path).connect()
            sock.settimeout(self.socket_timeout)
            return sock

        def repr_pieces(self):
            return [("store", self.path), ("db", self.db)]

    class AsyncConnection(aconn.UnixDomainSocketConnection):
        """redis.asyncio's connection to the in-process server of ``path``."""

        async def _connect(self):
            loop = asyncio.get_running_loop()
            sock = await loop.run_in_executor(None, _host(self.path).connect)
            sock.setblocking(False)
            self._reader, self._writer = await asyncio.open_connection(sock=sock)
            await self.on_connect()

        def repr_pieces(self):
            return [("store", self.path), ("db", self.db)]

    return Connection, AsyncConnection


_classes = None


def _classes_once():
    global _classes
    if _classes is None:
        _classes = _connection_classes()
    return _classes


def Redis(path, **kwargs):
    """A ``redis.Redis`` whose connections run on the store ``path`` (made
    if missing) in this process.  ``kwargs``: redis-py's."""
    import redis
    single = kwargs.pop("single_connection_client", False)
    pool = redis.ConnectionPool(connection_class=_classes_once()[0], path=os.fspath(path), **kwargs)
    return redis.Redis(connection_pool=pool, single_connection_client=single)


def AsyncRedis(path, **kwargs):
    """A ``redis.asyncio.Redis`` whose connections run on the store
    ``path`` in this process; its blocking reads do not block the loop."""
    import redis.asyncio
    single = kwargs.pop("single_connection_client", False)
    pool = redis.asyncio.ConnectionPool(connection_class=_classes_once()[1], path=os.fspath(path), **kwargs)
    return redis.asyncio.Redis(connection_pool=pool, single_connection_client=single)


def from_url(url, asyncio=False, **kwargs):
    """``xs:///data/events.xs`` (an absolute path) or ``xs://./events.xs``
    (relative), with redis-py's query options (``?decode_responses=true
    &protocol=3``): ``Redis`` (``AsyncRedis`` with ``asyncio=True``)."""
    from urllib.parse import parse_qsl, unquote, urlsplit
    u = urlsplit(url)
    if u.scheme != "xs":
        raise ValueError("an xs URL starts with xs:// (xs:///data/events.xs), not %r" % url)
    if u.netloc not in ("", "."):
        # xs://data/events.xs would name /events.xs on a host "data"
        raise ValueError("%r names a host (%s); a store is a path: xs:///%s%s (three slashes) or xs://./%s%s"
                         % (url, u.netloc, u.netloc, u.path, u.netloc, u.path))
    path = unquote(u.netloc + u.path)
    if not path:
        raise ValueError("the URL %r names no store" % url)
    from redis.connection import URL_QUERY_ARGUMENT_PARSERS
    for name, value in parse_qsl(u.query):
        parse = URL_QUERY_ARGUMENT_PARSERS.get(name)
        kwargs.setdefault(name, parse(value) if parse else value)
    return (AsyncRedis if asyncio else Redis)(path, **kwargs)
