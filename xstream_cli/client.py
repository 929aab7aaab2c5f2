"""redis-py without a server: clients bound to a store, in this process.

    from xstream_cli.client import Redis
    r = Redis("/data/events.xs", decode_responses=True)
    r.xadd("events", {"user": "alice"})

    from xstream_cli.client import AsyncRedis        # redis.asyncio
    r = AsyncRedis("/data/events.xs")

``Redis(path, **kwargs)`` returns a ``redis.Redis`` (``AsyncRedis``: a
``redis.asyncio.Redis``; both are functions, so there is no
``Redis.from_url``: use this module's ``from_url``), with every keyword
redis-py takes
(``decode_responses``, ``protocol=3``, ``max_connections`` ...), so every
method, pipeline and transaction of redis-py works.  ``from_url("xs:///
data/events.xs?decode_responses=true")`` is the same for a URL.

The seam is the socket redis-py's connection is given: a ``_Wire``, an
object with a socket's methods that speaks RESP in memory.  What
redis-py sends is parsed by the server's own request parser; a run of
stream and keyspace commands (a command, a pipeline) is run right there,
in the calling thread (where the server's Engine.run says: here, unless
another thread or process is writing), as one job of the server's engine
(the command table, the batch driver, one commit), in the one flow of a
connection (xstream_cli.server.flow), and its replies are encoded by the
server's encoder for redis-py's parser to read back.  No thread hand-off,
no socket: a command costs its transaction and little more.  The
connection's state and the commands that use it (HELLO, AUTH, CLIENT,
MULTI ... EXEC, WATCH, INFO, CONFIG ...) go, one at a time, to the xs
server's own connection code running in this process (a thread with an
asyncio loop: xstream_cli.server.connection.Server, started without
listening), over one end of a ``socketpair()`` the ``_Wire`` holds; so
the connection is a client of that server (CLIENT LIST, CLIENT UNBLOCK,
CLIENT KILL, INFO see it) and a pipeline inside MULTI is queued there.
While another thread of the process is in a transaction, a job joins the
engine thread's next group commit instead of waiting its turn.  One such
server per store and process, made on first use.

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
import errno
import logging
import os
import queue
import select
import socket
import threading
import time

from storage.errors import RedisError
from xstream_cli.server.commands import LOCAL
from xstream_cli.server.engine import Job, item_for
from xstream_cli.server.flow import GONE, RUN, Flow
from xstream_cli.server.resp import ProtocolError, RequestParser, encode, encode_replies, reply_end

# a library's logger stays quiet unless the application configures
# logging (the server's "transaction failed: ..." is the caller's error)
logging.getLogger("xs.serve").addHandler(logging.NullHandler())

_hosts = {}                   # store path -> _Host
_lock = threading.Lock()


NO_STORE = "no such store: %s (a write creates it, or Redis(path, create=True))"


class _StoreOnWrite:
    """The store of a host, opened when it exists and made by the first
    write (or at once with ``create``): a read of a missing store is an
    error naming the path and makes nothing, as on the command line.
    Until then it answers what the server asks of a store at start."""

    durable = True

    def __init__(self, path, create):
        self.path = path
        self._store = None
        self._lock = threading.Lock()
        if create or _exists(path):
            self.resolve(create)

    @property
    def pending(self):
        return self._store is None

    def resolve(self, write):
        """The store, opened now if it exists, made if ``write``; raises
        StoreFailure naming the path when it is missing and this is a read."""
        from storage.txn import StoreFailure
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                if not write and not _exists(self.path):
                    raise StoreFailure(NO_STORE % self.path)
                from xstream_cli.context import open_path
                parent = os.path.dirname(self.path)
                if not _exists(self.path) and not os.path.isdir(parent):
                    raise StoreFailure("cannot create the store %s: no such directory: %s" % (self.path, parent))
                self._store = open_path(self.path)
            return self._store

    def run(self, fn, write=False, savepoints=False):
        return self.resolve(write).run(fn, write=write, savepoints=savepoints)

    def read(self):
        return self.resolve(False).read()

    def write(self):
        return self.resolve(True).write()

    @property
    def readonly(self):
        return self._store is not None and self._store.readonly

    @property
    def why_read_only(self):
        return None if self._store is None else self._store.why_read_only

    def __getattr__(self, name):
        # dir_fd, root, check_readers ...: asked only of a store that exists
        return getattr(self.resolve(False), name)

    def close(self):
        if self._store is not None:
            self._store.close()


def _exists(path):
    return os.path.exists(os.path.join(path, "data.mdb"))


class _Host:
    """The in-process server of one store: its thread and loop."""

    def __init__(self, path, create=False):
        from xstream_cli.server.config import Config
        from xstream_cli.server.connection import Server
        self.path = path
        self.store = _StoreOnWrite(path, create)
        self.server = Server(self.store, Config(unixsocket=None, port=0, db=path, durable=True))
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
        return self._adopt()[0]

    def _adopt(self):
        ours, theirs = socket.socketpair()
        try:
            client = asyncio.run_coroutine_threadsafe(self.server.adopt(theirs), self.loop).result(30)
        except BaseException:
            ours.close()
            theirs.close()
            raise
        return ours, client

    def wire(self):
        """A new client of the server, as redis-py's socket: a _Wire."""
        ours, client = self._adopt()
        if client is None:                # refused (max clients): the server said why on the socket
            ours.settimeout(5)
            why = ours.recv(512).decode("utf-8", "replace").strip("-\r\n") or "refused by the store's server"
            ours.close()
            raise ConnectionRefusedError(why)
        return _Wire(self, ours, client)

    def shutdown(self):
        try:
            self.server.engine.cancel_all()
        except Exception:       # noqa: BLE001 (exiting)
            pass


class _Wire:
    """The socket a sync connection of redis-py is given (see the module's
    text): ``sendall`` buffers requests; reading runs them (``_run``) and
    hands back their replies.  ``sock`` is our end of the socket pair to
    the in-process server, for the commands that go there and for its
    closing the connection (CLIENT KILL); ``client`` is the server's
    Client of this connection, whose state (protocol, AUTH, MULTI) says
    which way a command goes."""

    def __init__(self, host, sock, client):
        self.host = host
        server = self.server = host.server
        self.engine = server.engine
        self.sock = sock
        self.client = client
        self.parser = RequestParser(server.config.max_bulk, native=server.config.native)
        self.out = bytearray()          # replies redis-py has not read yet
        self.timeout = None             # redis-py's socket timeout (None: wait as long as it takes)
        self.closed = False             # the server closed the connection (QUIT, CLIENT KILL, a protocol error)

    # ----------------------------------------------------- the socket's face

    def settimeout(self, timeout):
        self.timeout = timeout

    def gettimeout(self):
        return self.timeout

    def setblocking(self, flag):
        self.timeout = None if flag else 0.0

    def fileno(self):
        return self.sock.fileno()

    def setsockopt(self, *args):
        pass

    def getsockname(self):
        return self.sock.getsockname()

    def getpeername(self):
        return self.sock.getpeername()

    def pending(self):
        """Replies to read, or requests that will give some (redis-py asks
        this of TLS sockets before it polls the descriptor)."""
        return bool(self.out) or self.parser.pending() > 0

    def sendall(self, data):
        if self.closed:
            raise BrokenPipeError(errno.EPIPE, "the store's server closed the connection")
        self.parser.feed(data if type(data) is bytes else bytes(data))

    def send(self, data):
        self.sendall(data)
        return len(data)

    def recv(self, size, flags=0):
        if flags & socket.MSG_PEEK:
            return bytes(self.out[:size]) if self.out else self._from_server(size, flags)
        return self._take(size)

    def recv_into(self, buf, size=0):
        data = self._take(size or len(buf))
        buf[:len(data)] = data
        return len(data)

    def shutdown(self, how):
        try:
            self.sock.shutdown(how)
        except OSError:
            pass

    def close(self):
        self.closed = True
        self.sock.close()

    # ------------------------------------------------------------- running

    def _take(self, size):
        if not self.out and not self.closed and self.parser.pending():
            self._run()
        if not self.out:
            # nothing to run, nothing to answer: only the server's closing
            # the connection can come
            return self._from_server(size)
        data = bytes(self.out[:size])
        del self.out[:size]
        return data

    def _from_server(self, size, flags=0):
        if self.closed:
            return b""
        if not self._wait_readable():
            if self.timeout == 0:
                raise BlockingIOError(errno.EAGAIN, "no reply yet")
            raise socket.timeout("timed out")
        data = self.sock.recv(size, flags)
        if not data:
            self.closed = True
        return data

    def _wait_readable(self):
        return bool(select.select([self.sock], [], [], self.timeout)[0])

    def _run(self):
        """Run the requests received, in order: runs of engine commands
        here, while the connection is in its plain state (authenticated,
        not in MULTI); the others at the server, one at a time (each may
        change that state)."""
        cmds = self.parser.commands()
        c = self.client
        i, n = 0, len(cmds)
        while i < n and not self.closed:
            if c.closing:                  # killed (CLIENT KILL) or the server stopping
                self.closed = True
                break
            a = cmds[i]
            if isinstance(a, ProtocolError):
                self.out += encode(RedisError("ERR " + str(a)))
                self.closed = True         # as the server answers it: then it closes
                break
            if c.authed and c.multi is None and a[0].upper() not in LOCAL:
                j = i + 1
                while j < n and type(cmds[j]) is list and cmds[j][0].upper() not in LOCAL:
                    j += 1
                self._direct(cmds[i:j])
                i = j
            else:
                self._forward(a)
                i += 1

    def _direct(self, cmds):
        """Engine commands, in the connection's one flow (xstream_cli.
        server.flow, as the server's connections run them): their jobs run
        where Engine.run says, a blocked read waited for in this thread."""
        c = self.client
        items = [item_for(a) for a in cmds]
        if self.host.store.pending and not self._store_for(items):
            return
        c.last = time.monotonic()
        c.last_cmd = cmds[-1][0]
        steps = iter(Flow(items, c.proto, self.out.extend, self.server.stats))
        try:
            step = next(steps)
            while True:
                what, arg = step
                if what is RUN:
                    out = self._execute(Job(arg, None, owner=c.id, proto=c.proto))
                else:
                    out = self._block(*arg[1:])
                    if c.closing:
                        self.closed = True
                        out = GONE
                step = steps.send(out)
        except StopIteration:
            pass

    def _store_for(self, items):
        """A job on a store not made yet: a write makes it; a read is
        answered "no such store" (nothing made), and a blocking read
        (XREAD ... BLOCK) waits for the store to appear, as ``xs tail -f``
        does -- until its BLOCK time (then its nil reply) or the socket's
        timeout.  True: run the job."""
        from storage.txn import StoreFailure
        store = self.host.store
        block = [it.args[0].block for it in items if it.cmd is not None and it.cmd.blocking
                 and not it.write and it.args[0].block is not None]
        if block and not any(it.write for it in items):
            limit = [t for t in (block[0] / 1000 if block[0] else None, self.timeout) if t is not None]
            deadline = time.monotonic() + min(limit) if limit else None
            while not _exists(store.path):
                if deadline is not None and time.monotonic() >= deadline:
                    if self.timeout is not None and (not block[0] or self.timeout < block[0] / 1000):
                        raise socket.timeout("timed out")
                    self.out += encode_replies(items, [None] * len(items), self.client.proto)
                    return False
                time.sleep(0.05)
        try:
            store.resolve(any(it.write for it in items))
        except StoreFailure as e:
            err = RedisError("ERR %s" % e)
            self.out += encode_replies(items, [err if it.reply is None else it.reply for it in items],
                                       self.client.proto)
            return False
        return True

    def _execute(self, job):
        """(replies, blocked) of ``job``, committed: run in this thread, or
        handed to the engine thread (joining its next group commit) and
        waited for, as Engine.run decides."""
        got = queue.SimpleQueue()
        job.done = got.put
        ran = self.engine.run([job], loop=False)
        return ran[0][1] if ran else got.get()

    def _block(self, cmd, args, w):
        """Wait for a blocked read in this thread, as the server's pool
        does (CLIENT UNBLOCK and CLIENT KILL end it; Ctrl-C too).  With a
        socket timeout shorter than the wait, the wait ends then and the
        read times out, as it would on a socket."""
        call = self.engine.new_call()
        self.client.call = call
        timer = None
        expired = []
        if self.timeout:
            def expire():
                expired.append(True)
                call.cancel()
            timer = threading.Timer(self.timeout, expire)
            timer.daemon = True
            timer.start()
        try:
            r = self.engine.block(cmd, args, w, call)
        finally:
            self.client.call = None
            if timer is not None:
                timer.cancel()
        if expired and call.unblocked is None and not self.client.closing:
            raise socket.timeout("timed out")
        return r

    def _forward(self, argv):
        """One command to the server; its reply read whole."""
        self.sock.sendall(b"*%d\r\n" % len(argv) + b"".join([b"$%d\r\n%s\r\n" % (len(x), x) for x in argv]))
        got = bytearray()
        while reply_end(got) < 0:
            chunk = self._from_server(1 << 16)
            if not chunk:
                break
            got += chunk
        self.out += got


def _host(path, create=False):
    """The host of store ``path`` in this process (made on first use);
    with ``create``, the store is made now if missing."""
    key = os.path.realpath(path)
    with _lock:
        h = _hosts.get(key)
        if h is None:
            h = _hosts[key] = _Host(key, create)
    if create and h.store.pending:
        h.store.resolve(True)
    return h


def _connect_error(e):
    """A store that cannot be had (StoreFailure, StoreError), as redis-py's
    ConnectionError, naming the path and why."""
    from redis.exceptions import ConnectionError
    return ConnectionError(str(e))


_inherited = []               # a forked child's hosts from its parent: kept, never used or closed


def _forget():
    """In a forked child: the parent's server thread did not come along,
    and its store's environment must not be used or closed here
    (storage.opening, "After fork()"); the child makes its own host on
    first use, beside the parent's, which stays referenced."""
    global _lock
    _inherited.extend(_hosts.values())
    _hosts.clear()
    _lock = threading.Lock()      # another thread may have held it at fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _connection_classes():
    import redis.asyncio.connection as aconn
    import redis.connection as conn

    from storage.files import StoreError
    from storage.txn import StoreFailure

    class Connection(conn.UnixDomainSocketConnection):
        """redis-py's connection to the in-process server of store ``path``."""

        def __init__(self, *args, create=False, **kwargs):
            super().__init__(*args, **kwargs)
            self.create = create

        def _connect(self):
            try:
                sock = _host(self.path, self.create).wire()
            except (StoreError, StoreFailure) as e:
                raise _connect_error(e) from None
            sock.settimeout(self.socket_timeout)
            return sock

        def repr_pieces(self):
            return [("store", self.path), ("db", self.db)]

    class AsyncConnection(aconn.UnixDomainSocketConnection):
        """redis.asyncio's connection to the in-process server of ``path``."""

        def __init__(self, *args, create=False, **kwargs):
            super().__init__(*args, **kwargs)
            self.create = create

        async def _connect(self):
            loop = asyncio.get_running_loop()
            try:
                host = await loop.run_in_executor(None, _host, self.path, self.create)
            except (StoreError, StoreFailure) as e:
                raise _connect_error(e) from None
            sock = await loop.run_in_executor(None, host.connect)
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


def Redis(path, create=False, **kwargs):
    """A ``redis.Redis`` whose connections run on the store ``path`` in
    this process.  A missing store is made by the first write (its
    directory must exist), or at the first connection with ``create``;
    a read of a missing store is an error naming the path and makes
    nothing.  ``kwargs``: redis-py's."""
    import redis
    single = kwargs.pop("single_connection_client", False)
    pool = redis.ConnectionPool(connection_class=_classes_once()[0], path=os.fspath(path), create=create, **kwargs)
    return redis.Redis(connection_pool=pool, single_connection_client=single)


def AsyncRedis(path, create=False, **kwargs):
    """A ``redis.asyncio.Redis`` whose connections run on the store
    ``path`` in this process; its blocking reads do not block the loop.
    A missing store: as for ``Redis``."""
    import redis.asyncio
    single = kwargs.pop("single_connection_client", False)
    pool = redis.asyncio.ConnectionPool(connection_class=_classes_once()[1], path=os.fspath(path), create=create,
                                        **kwargs)
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
        if name == "create":
            from redis.connection import to_bool
            kwargs.setdefault("create", bool(to_bool(value)))
            continue
        parse = URL_QUERY_ARGUMENT_PARSERS.get(name)
        kwargs.setdefault(name, parse(value) if parse else value)
    return (AsyncRedis if asyncio else Redis)(path, **kwargs)
