"""``xs serve``: the RESP server (asyncio), its connections and the
connection and server commands (PING, HELLO, AUTH, CLIENT, INFO, MULTI,
...).  Every stream and keyspace command is the CLI's command table
(xstream_cli.commands), parsed by the same parsers and run by the same
engine through the engine thread (engine.py); nothing here implements a
stream command.

One event loop reads and writes every connection; it never touches the
store itself.  A client's commands that arrive together (a pipeline) go
to the engine as one job, in order; replies are written in order and
only after the commit that made them durable.  Connections are asyncio
Protocols: bytes received are parsed at once and a client's commands
run in a task of its own while it has some.  A slow reader only holds
up itself (its task waits while its transport is paused), and a client
whose unsent replies pass the output limit is disconnected, as Redis
does with ``client-output-buffer-limit``.
"""
import asyncio
import logging
import os
import socket
import time

from storage import errors
from storage.errors import RedisError
from xstream_cli.commands import COMMANDS, SUBCOMMANDS, lookup
from xstream_cli.output.reply import OK, Map, Status
from xstream_cli.server.engine import Engine, Item, Job, answer, item_for
from xstream_cli.server.resp import NULL_ARRAY, ProtocolError, RequestParser, Verbatim, encode

log = logging.getLogger("xs.serve")

REDIS_VERSION = "8.10.0"        # the Redis whose stream semantics xs has
READ_SIZE = 1 << 16


def _err(text):
    return RedisError(text)


NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOPASS = ("ERR AUTH <password> called without any password configured for the default user. "
          "Are you sure your configuration is correct?")
DENIED = ("DENIED Redis is running in protected mode because protected mode is enabled and no password is "
          "set for the default user. In this mode connections are only accepted from the loopback interface. "
          "If you want to connect from external computers to Redis you may adopt one of the following "
          "solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from "
          "the loopback interface by connecting to Redis from the same host the server is running, however "
          "MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make "
          "this change permanent. 2) Alternatively you can just disable the protected mode by editing the "
          "Redis configuration file, and setting the protected mode option to 'no', and then restarting the "
          "server. 3) If you started the server manually just for testing, restart it with the "
          "'--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You "
          "only need to do one of the above things in order for the server to start accepting connections "
          "from the outside.")


def _loopback(host):
    if host is None:
        return True
    return host in ("localhost", "::1") or host.startswith("127.") or host.startswith("::ffff:127.")


class Config:
    """The server's settings (CONFIG GET / SET)."""

    def __init__(self, bind="127.0.0.1", port=6379, unixsocket=None, unixsocketperm=0o700,
                 requirepass=None, protected_mode=True, maxclients=10000,
                 max_bulk=512 << 20, output_limit=256 << 20, durable=True, db=""):
        self.bind = bind
        self.port = port
        self.unixsocket = unixsocket
        self.unixsocketperm = unixsocketperm
        self.requirepass = requirepass or None
        self.protected_mode = protected_mode
        self.maxclients = maxclients
        self.max_bulk = max_bulk
        self.output_limit = output_limit
        self.durable = durable
        self.db = db

    # name -> (getter, setter or None)
    def params(self):
        yes = lambda b: "yes" if b else "no"        # noqa: E731
        return {
            "bind": (lambda: self.bind or "", None),
            "port": (lambda: str(self.port if self.unixsocket is None else 0), None),
            "unixsocket": (lambda: self.unixsocket or "", None),
            "unixsocketperm": (lambda: "%o" % self.unixsocketperm if self.unixsocket else "0", None),
            "requirepass": (lambda: self.requirepass or "", self._set_pass),
            "protected-mode": (lambda: yes(self.protected_mode), self._set_protected),
            "maxclients": (lambda: str(self.maxclients), self._set_int("maxclients", 1)),
            "proto-max-bulk-len": (lambda: str(self.max_bulk), self._set_int("max_bulk", 1 << 20)),
            "client-output-buffer-limit": (
                lambda: "normal %d %d 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
                % (self.output_limit, self.output_limit), self._set_output_limit),
            "databases": (lambda: "1", None),
            "appendonly": (lambda: "yes", None),
            "appendfsync": (lambda: "always" if self.durable else "no", None),
            "save": (lambda: "", None),
            "timeout": (lambda: "0", None),
            "dir": (lambda: self.db, None),
        }

    def _set_pass(self, v):
        self.requirepass = v or None

    def _set_protected(self, v):
        v = v.lower()
        if v not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        self.protected_mode = v == "yes"

    def _set_int(self, attr, lowest):
        def set_(v):
            try:
                n = int(v)
            except ValueError:
                raise ValueError("argument couldn't be parsed into an integer")
            if n < lowest:
                raise ValueError("argument must be between %d and 9223372036854775807 inclusive" % lowest)
            setattr(self, attr, n)
        return set_

    def _set_output_limit(self, v):
        """``normal <hard> <soft> <seconds>`` (other classes accepted and
        ignored: xs serve has no replicas or pub/sub); the hard limit is
        the one applied (bytes, or with kb/mb/gb)."""
        words = v.split()
        if len(words) % 4 or not words:
            raise ValueError("Wrong number of arguments in buffer limit configuration.")
        for i in range(0, len(words), 4):
            cls = words[i].lower()
            if cls not in ("normal", "slave", "replica", "pubsub"):
                raise ValueError("Invalid client class specified in buffer limit configuration.")
            hard = _memory(words[i + 1])
            if hard is None or _memory(words[i + 2]) is None or not words[i + 3].isdigit():
                raise ValueError("Error in hard, soft or soft_seconds setting in buffer limit configuration.")
            if cls == "normal":
                self.output_limit = hard or (1 << 62)



def _memory(word):
    """Redis's memory units: 100, 10kb, 5mb, 1gb (None if not one)."""
    w = word.lower()
    for unit, mult in (("kb", 1024), ("mb", 1 << 20), ("gb", 1 << 30), ("k", 1000), ("m", 10 ** 6),
                       ("g", 10 ** 9), ("b", 1)):
        if w.endswith(unit):
            w, m = w[:-len(unit)], mult
            break
    else:
        m = 1
    return int(w) * m if w.isdigit() else None


class Client:
    """One connection."""

    def __init__(self, server, cid, transport, addr, laddr):
        self.server = server
        self.id = cid
        self.writer = transport
        self.addr = addr
        self.laddr = laddr
        self.parser = RequestParser(server.config.max_bulk)
        self.proto = 2
        self.name = None
        self.lib_name = None
        self.lib_ver = None
        self.authed = server.config.requirepass is None
        self.multi = None            # queued commands (argv lists) inside MULTI
        self.multi_error = False     # a queued command was refused: EXEC aborts
        self.watched = None          # {key: change counter} since WATCH
        self.watch_dirty = False
        self.created = time.monotonic()
        self.last = self.created
        self.last_cmd = b"NULL"        # the name of the last command, as sent
        self.closing = False
        self.task = None             # the task running this client's commands, while it has some
        self.inflight = False        # a job sent by Server._pump is with the engine
        self.call = None             # the blocked wait in progress
        self.killed = False
        self.writable = None         # asyncio.Event: cleared while the transport's buffer is full

    def info_line(self):
        now = time.monotonic()
        return ("id=%d addr=%s laddr=%s fd=-1 name=%s age=%d idle=%d flags=%s db=0 sub=0 psub=0 ssub=0 "
                "multi=%d watch=%d qbuf=%d qbuf-free=0 argv-mem=0 multi-mem=0 rbs=%d rbp=0 obl=0 oll=0 "
                "omem=%d tot-mem=0 events=r cmd=%s user=default redir=-1 resp=%d lib-name=%s lib-ver=%s"
                % (self.id, self.addr, self.laddr, self.name or "", now - self.created, now - self.last,
                   ("b" if self.call is not None else "") + ("x" if self.multi is not None else "") or "N",
                   -1 if self.multi is None else len(self.multi), len(self.watched or ()),
                   self.parser.pending(), READ_SIZE, self._out_size(), self.last_cmd.decode("latin-1").lower(),
                   self.proto, self.lib_name or "", self.lib_ver or ""))

    def _out_size(self):
        try:
            return self.writer.get_write_buffer_size()
        except Exception:
            return 0


# commands handled by the connection (the rest go to the command table)
_LOCAL = {}


def _local(*names, arity):
    def deco(fn):
        for n in names:
            _LOCAL[n] = (fn, arity, n.decode().lower())
        return fn
    return deco


_NOAUTH_OK = {b"AUTH", b"HELLO", b"QUIT", b"RESET"}
_PROTO_CHANGERS = {b"HELLO", b"RESET"}
_NOT_QUEUED = {b"EXEC", b"DISCARD", b"MULTI", b"WATCH", b"QUIT", b"RESET"}


class Server:
    """The served store: listening sockets, clients, engine."""

    def __init__(self, store, config):
        self.store = store
        self.config = config
        self.engine = Engine(store)
        self.clients = {}
        self.next_id = 1
        self.started = time.time()
        self.run_id = os.urandom(20).hex()
        self.started_mono = time.monotonic()
        self.connections_received = 0
        self.rejected = 0
        self.loop = None
        self.pool = None
        self.servers = []
        self.stopping = False

    # ---------------------------------------------------------- life cycle

    async def start(self):
        from concurrent.futures import ThreadPoolExecutor
        self.loop = asyncio.get_running_loop()
        self.pool = ThreadPoolExecutor(max_workers=max(4, self.config.maxclients), thread_name_prefix="xs-block")
        self.engine.deliver = self._deliver
        self.engine.start()
        c = self.config
        if c.unixsocket:
            try:
                os.unlink(c.unixsocket)
            except FileNotFoundError:
                pass
            old = os.umask(0o177)
            try:
                srv = await self.loop.create_unix_server(lambda: _Protocol(self), path=c.unixsocket)
            finally:
                os.umask(old)
            os.chmod(c.unixsocket, c.unixsocketperm)
            self.servers.append(srv)
            log.info("ready to accept connections at unix socket %s (store %s)", c.unixsocket, c.db)
        else:
            hosts = c.bind.split() if c.bind else ["127.0.0.1"]
            srv = await self.loop.create_server(lambda: _Protocol(self), host=hosts, port=c.port,
                                                reuse_address=True)
            self.servers.append(srv)
            if not c.port:
                c.port = srv.sockets[0].getsockname()[1]
            log.info("ready to accept connections on %s port %d (store %s)", " ".join(hosts), c.port, c.db)

    async def stop(self):
        """Stop accepting, let the commands under way finish and their
        replies go out, cancel blocked waits (they answer null), close
        every connection, stop the engine."""
        self.stopping = True
        for s in self.servers:
            s.close()
        self.engine.cancel_all()
        deadline = time.monotonic() + 5
        while any(c.call is not None for c in self.clients.values()) and time.monotonic() < deadline:
            self.engine.cancel_all()
            await asyncio.sleep(0.01)
        deadline = time.monotonic() + 10
        while any(c.inflight for c in self.clients.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)          # jobs with the engine: their replies go out first
        busy = [c.task for c in self.clients.values() if c.task is not None]
        for c in list(self.clients.values()):
            c.closing = True                     # no new commands; those under way finish
        if busy:
            await asyncio.wait(busy, timeout=10)
        for c in list(self.clients.values()):
            c.writer.close()                     # after the replies already queued
        deadline = time.monotonic() + 2
        while self.clients and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await self.loop.run_in_executor(None, self.engine.stop)
        self.pool.shutdown(wait=False)
        if self.config.unixsocket:
            try:
                os.unlink(self.config.unixsocket)
            except OSError:
                pass

    # ---------------------------------------------------------- connections

    def _connected(self, transport):
        """A new connection: its Client, or None if refused (max clients,
        protected mode, stopping)."""
        peer = transport.get_extra_info("peername")
        cfg = self.config
        self.connections_received += 1
        if isinstance(peer, tuple):
            addr = "%s:%d" % (peer[0], peer[1])
            host = peer[0]
            lp = transport.get_extra_info("sockname")
            laddr = "%s:%d" % (lp[0], lp[1])
            sock = transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                except OSError:
                    pass
        else:
            addr = laddr = "%s:0" % (cfg.unixsocket,)
            host = None
        if self.stopping:
            transport.close()
            return None
        if len(self.clients) >= cfg.maxclients:
            self.rejected += 1
            self._refuse(transport, b"-ERR max number of clients reached\r\n")
            return None
        if cfg.protected_mode and cfg.requirepass is None and not _loopback(host):
            self.rejected += 1
            log.warning("refused %s: protected mode (no password, not loopback)", addr)
            self._refuse(transport, b"-" + DENIED.encode() + b"\r\n")
            return None
        c = Client(self, self.next_id, transport, addr, laddr)
        c.writable = asyncio.Event()
        c.writable.set()
        self.next_id += 1
        self.clients[c.id] = c
        log.debug("client %d connected from %s", c.id, addr)
        return c

    def _refuse(self, transport, error):
        """Send ``error`` and close a little later: closing at once with
        the client's first command unread would reset the connection and
        could discard the error before the client reads it."""
        transport.write(error)
        self.loop.call_later(0.2, transport.close)

    def _received(self, c, data):
        if c.closing:
            return
        c.parser.feed(data)
        if c.task is None and not c.inflight:
            self._pump(c)

    def _pump(self, c):
        """Start on the client's buffered commands.  The common case, only
        commands of the table (no MULTI, authenticated), goes to the engine
        straight from here and is answered from a callback (no task);
        anything else runs in a task (``_process``)."""
        if c.closing or self.stopping:
            return                       # stopping: no new commands (those under way finish)
        if not c.writable.is_set():
            c.task = self.loop.create_task(self._process(c))
            return
        cmds = c.parser.commands()
        if not cmds:
            return
        if c.authed and c.multi is None:
            local = _LOCAL
            for a in cmds:
                if type(a) is not list or a[0].upper() in local:
                    break
            else:
                items = [item_for(a) for a in cmds]
                c.inflight = True
                c.last = time.monotonic()
                c.last_cmd = cmds[-1][0]
                self.engine.submit(Job(items, lambda res: self._answered(c, items, res)))
                return
        c.task = self.loop.create_task(self._process(c, cmds))

    def _answered(self, c, items, res):
        """(loop) The engine ran a job sent by ``_pump``: send its replies,
        then go on with what the client sent meanwhile."""
        c.inflight = False
        replies, blocked = res
        if len(replies) == 1:
            self._send(c, _encode(replies[0], c.proto, items[0].array_null))
        else:
            self._send(c, b"".join([_encode(r, c.proto, it.array_null) for it, r in zip(items, replies)]))
        if blocked is not None:
            c.task = self.loop.create_task(self._process(c, None, self._after_block(c, items, blocked)))
        elif c.parser.pending():
            self._pump(c)

    async def _after_block(self, c, items, blocked):
        i, cmd, args, w = blocked
        r = await self._block(c, cmd, args, w)
        if c.closing:
            return
        self._send(c, encode(r, c.proto, True))
        await self._flush(c, items[i + 1:])

    async def _process(self, c, cmds=None, first=None):
        """Run the client's commands buffered so far (and those that
        arrive meanwhile), in order (``cmds``: already taken from the
        parser; ``first``: a coroutine to finish before)."""
        try:
            if first is not None:
                await first
            if cmds is not None and not c.closing:
                await self._dispatch(c, cmds)
            while not c.closing:
                if not c.writable.is_set():
                    await c.writable.wait()      # a slow reader waits alone
                cmds = c.parser.commands()
                if not cmds:
                    break
                await self._dispatch(c, cmds)
        except Exception:
            log.exception("client %d: unexpected failure", c.id)
            c.closing = True
        finally:
            c.task = None
            if c.closing:
                c.writer.close()

    def _gone(self, c):
        """The connection closed (by the client, CLIENT KILL, an error)."""
        c.closing = True
        if c.call is not None:
            c.call.cancel()
        c.writable.set()
        self.clients.pop(c.id, None)
        log.debug("client %d gone", c.id)

    def _send(self, c, data):
        """Queue replies for ``c``; a client whose unsent replies pass the
        output limit is disconnected at once (its replies dropped), as
        Redis does with client-output-buffer-limit."""
        if c.writer.is_closing():
            return
        c.writer.write(data)
        if c._out_size() > self.config.output_limit:
            log.warning("client %d (%s) closed: output buffer over %d bytes", c.id, c.addr, self.config.output_limit)
            c.closing = True
            c.writer.abort()

    # ------------------------------------------------------------- commands

    async def _dispatch(self, c, cmds):
        batch = []                   # Items waiting for the engine
        for argv in cmds:
            if c.closing:
                break
            if isinstance(argv, ProtocolError):
                await self._flush(c, batch)
                batch = []
                log.info("client %d: %s", c.id, argv)
                self._send(c, encode(_err("ERR " + str(argv))))
                c.closing = True
                break
            c.last = time.monotonic()
            name = argv[0].upper()
            c.last_cmd = name
            if not c.authed and name not in _NOAUTH_OK:
                batch.append(Item(reply=_err(NOAUTH)))
                continue
            if c.multi is not None and name not in _NOT_QUEUED:
                batch.append(Item(reply=self._queue(c, argv)))
                continue
            local = _LOCAL.get(name)
            if local is None:
                batch.append(item_for(argv))
                continue
            fn, arity, lname = local
            n = len(argv)
            if (arity >= 0 and n != arity) or (arity < 0 and n < -arity):
                batch.append(Item(reply=errors.wrong_arity(lname)))
                continue
            if name in _PROTO_CHANGERS:
                # the replies before it go out in the protocol they were asked in,
                # HELLO's own in the new one
                await self._flush(c, batch)
                batch = []
                r = fn(self, c, argv)
                batch.append(Item(reply=_Raw(encode(r, c.proto))))
                continue
            r = fn(self, c, argv)
            if asyncio.iscoroutine(r):
                await self._flush(c, batch)
                batch = []
                r = await r
            if isinstance(r, Item):
                batch.append(r)
            elif r is not None:
                batch.append(Item(reply=r))
        await self._flush(c, batch)

    async def _flush(self, c, items):
        """Run ``items`` in order and send their replies; a blocked read
        waits here (other clients go on)."""
        while items:
            if all(it.cmd is None and it.fn is None for it in items):
                self._send(c, b"".join(_encode(it.reply, c.proto) for it in items))
                return
            replies, blocked = await self._run(items)
            out = []
            for it, r in zip(items, replies):
                out.append(_encode(r, c.proto, it.array_null))
            if blocked is None:
                self._send(c, b"".join(out))
                return
            self._send(c, b"".join(out))
            i, cmd, args, w = blocked
            r = await self._block(c, cmd, args, w)
            if c.closing:
                return
            self._send(c, encode(r, c.proto, True))
            items = items[i + 1:]

    def _run(self, items, exec_=False, watched=None):
        """Hand ``items`` to the engine; a future of (replies, blocked)."""
        fut = self.loop.create_future()
        self.engine.submit(Job(items, lambda res: fut.done() or fut.set_result(res), exec_, watched))
        return fut

    def _deliver(self, done):
        """(engine thread) Answer a batch's jobs in one loop wake-up."""
        self.loop.call_soon_threadsafe(answer, done)

    async def _block(self, c, cmd, args, w):
        """Wait for a blocked read in the blocking pool; the client going
        away (connection_lost) cancels the wait."""
        call = self.engine.new_call()
        c.call = call
        try:
            return await self.loop.run_in_executor(self.pool, self.engine.block, cmd, args, w, call)
        finally:
            c.call = None

    def _queue(self, c, argv):
        """A command inside MULTI: QUEUED, or the error that makes EXEC
        abort (unknown command, wrong arity), as Redis checks at queueing."""
        name = argv[0].upper()
        local = _LOCAL.get(name)
        if local is not None:
            fn, arity, lname = local
            n = len(argv)
            if (arity >= 0 and n != arity) or (arity < 0 and n < -arity):
                c.multi_error = True
                return errors.wrong_arity(lname)
        else:
            try:
                lookup(argv)
            except RedisError as e:
                c.multi_error = True
                return e
        c.multi.append(argv)
        return Status("QUEUED")


class _Protocol(asyncio.Protocol):
    """One connection's transport callbacks, handed to the Server."""
    __slots__ = ("srv", "c")

    def __init__(self, srv):
        self.srv = srv
        self.c = None

    def connection_made(self, transport):
        self.c = self.srv._connected(transport)

    def data_received(self, data):
        if self.c is not None:
            self.srv._received(self.c, data)

    def eof_received(self):
        return False                     # close our side too

    def connection_lost(self, exc):
        if self.c is not None:
            self.srv._gone(self.c)

    def pause_writing(self):
        if self.c is not None:
            self.c.writable.clear()

    def resume_writing(self):
        if self.c is not None:
            self.c.writable.set()


def _encode(r, proto, array_null=False):
    if type(r) is _Raw:
        return r.data
    return encode(r, proto, array_null)


# =================================================================== commands

@_local(b"PING", arity=-1)
def _ping(srv, c, argv):
    if len(argv) > 2:
        return errors.wrong_arity("ping")
    return Status("PONG") if len(argv) == 1 else argv[1]


@_local(b"ECHO", arity=2)
def _echo(srv, c, argv):
    return argv[1]


@_local(b"TIME", arity=1)
def _time(srv, c, argv):
    t = time.time_ns() // 1000
    return [b"%d" % (t // 1000000), b"%d" % (t % 1000000)]


@_local(b"SELECT", arity=2)
def _select(srv, c, argv):
    try:
        n = int(argv[1])
    except ValueError:
        return errors.not_integer()
    if n != 0:
        return _err("ERR DB index is out of range")
    return OK


@_local(b"QUIT", arity=-1)
def _quit(srv, c, argv):
    c.closing = True            # the replies before, this OK, then the connection closes
    return OK


@_local(b"RESET", arity=1)
def _reset(srv, c, argv):
    c.multi = None
    c.multi_error = False
    c.watched = None
    c.proto = 2
    c.name = None
    c.authed = srv.config.requirepass is None
    return Status("RESET")


def _check_pass(srv, user, password):
    if user is not None and user != b"default":
        return False
    return srv.config.requirepass is not None and password == srv.config.requirepass.encode()


@_local(b"AUTH", arity=-2)
def _auth(srv, c, argv):
    if len(argv) > 3:
        return errors.syntax()
    if srv.config.requirepass is None:
        return _err(NOPASS) if len(argv) == 2 else _err(WRONGPASS) if argv[1] != b"default" else OK
    user = argv[1] if len(argv) == 3 else None
    if not _check_pass(srv, user, argv[-1]):
        log.warning("client %d: wrong password", c.id)
        return _err(WRONGPASS)
    c.authed = True
    return OK


@_local(b"HELLO", arity=-1)
def _hello(srv, c, argv):
    proto = c.proto
    i = 1
    if len(argv) > 1:
        try:
            proto = int(argv[1])
        except ValueError:
            return _err("ERR Protocol version is not an integer or out of range")
        if proto not in (2, 3):
            return _err("NOPROTO unsupported protocol version")
        i = 2
    name = None
    authed = c.authed
    while i < len(argv):
        opt = argv[i].upper()
        left = len(argv) - i - 1
        if opt == b"AUTH" and left >= 2:
            if srv.config.requirepass is None:
                if argv[i + 1] != b"default":
                    return _err(WRONGPASS)
            elif not _check_pass(srv, argv[i + 1], argv[i + 2]):
                return _err(WRONGPASS)
            authed = True
            i += 3
        elif opt == b"SETNAME" and left >= 1:
            name = argv[i + 1]
            if not _valid_name(name):
                return _err("ERR Client names cannot contain spaces, newlines or special characters.")
            i += 2
        else:
            return _err("ERR Syntax error in HELLO option '%s'" % argv[i].decode("utf-8", "replace"))
    if not authed:
        return _err("NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                    "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
                    "select the RESP protocol version at the same time")
    c.authed = True
    c.proto = proto
    if name is not None:
        c.name = name.decode("utf-8", "surrogateescape") or None
    return Map([("server", "redis"), ("version", REDIS_VERSION), ("proto", proto), ("id", c.id),
                ("mode", "standalone"), ("role", "master"), ("modules", [])])


def _valid_name(name):
    return all(33 <= ch <= 126 for ch in name)


@_local(b"CLIENT", arity=-2)
def _client(srv, c, argv):
    sub = argv[1].upper()
    n = len(argv)
    if sub == b"ID" and n == 2:
        return c.id
    if sub == b"GETNAME" and n == 2:
        return None if c.name is None else c.name.encode("utf-8", "surrogateescape")
    if sub == b"SETNAME" and n == 3:
        if not _valid_name(argv[2]):
            return _err("ERR Client names cannot contain spaces, newlines or special characters.")
        c.name = argv[2].decode("utf-8", "surrogateescape") or None
        return OK
    if sub == b"SETINFO" and n == 4:
        attr = argv[2].upper()
        if attr not in (b"LIB-NAME", b"LIB-VER"):
            return _err("ERR Unrecognized option '%s'" % argv[2].decode("utf-8", "replace"))
        if not _valid_name(argv[3]):
            return _err("ERR %s cannot contain spaces, newlines or special characters."
                        % argv[2].decode("utf-8", "replace").lower())
        v = argv[3].decode("utf-8", "surrogateescape")
        if attr == b"LIB-NAME":
            c.lib_name = v
        else:
            c.lib_ver = v
        return OK
    if sub == b"INFO" and n == 2:
        return Verbatim((c.info_line() + "\n").encode())
    if sub == b"LIST":
        clients = list(srv.clients.values())
        if n >= 4 and argv[2].upper() == b"ID":
            try:
                ids = {int(x) for x in argv[3:]}
            except ValueError:
                return _err("ERR Invalid client ID")
            clients = [x for x in clients if x.id in ids]
        elif n != 2:
            return errors.syntax()
        return Verbatim("".join(x.info_line() + "\n" for x in clients).encode())
    if sub == b"KILL" and n >= 3:
        if n == 3:
            targets = [x for x in srv.clients.values() if x.addr == argv[2].decode("latin-1")]
            if not targets:
                return _err("ERR No such client")
            for t in targets:
                srv.kill(t)
            return OK
        targets = list(srv.clients.values())
        skipme = True
        i = 2
        while i + 1 < n:
            k, v = argv[i].upper(), argv[i + 1]
            if k == b"ID":
                try:
                    cid = int(v)
                except ValueError:
                    return _err("ERR client-id should be greater than 0")
                targets = [x for x in targets if x.id == cid]
            elif k == b"ADDR":
                targets = [x for x in targets if x.addr == v.decode("latin-1")]
            elif k == b"LADDR":
                targets = [x for x in targets if x.laddr == v.decode("latin-1")]
            elif k == b"SKIPME":
                if v.lower() not in (b"yes", b"no"):
                    return errors.syntax()
                skipme = v.lower() == b"yes"
            elif k == b"USER":
                if v != b"default":
                    targets = []
            else:
                return errors.syntax()
            i += 2
        if i != n:
            return errors.syntax()
        if skipme:
            targets = [x for x in targets if x is not c]
        for t in targets:
            srv.kill(t)
        return len(targets)
    if sub in (b"NO-EVICT", b"NO-TOUCH") and n == 3:
        return OK
    if sub == b"HELP":
        return [Status(x) for x in ("CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                                    "ID", "INFO", "LIST [ID id ...]", "KILL <ip:port> | KILL <option> <value> ...",
                                    "GETNAME", "SETNAME <name>", "SETINFO <LIB-NAME|LIB-VER> <value>", "HELP")]
    return errors.unknown_subcommand(argv[1], "CLIENT")


def _kill(srv, t):
    t.closing = True
    t.killed = True
    if t.call is not None:
        t.call.cancel()
    try:
        t.writer.close()
    except Exception:
        pass


Server.kill = _kill


# ------------------------------------------------------------------- INFO

def _info_text(srv, sections, keyspace):
    cfg = srv.config
    up = time.monotonic() - srv.started_mono
    eng = srv.engine
    s = {
        "server": [("redis_version", REDIS_VERSION), ("redis_mode", "standalone"), ("xs_version", _xs_version()),
                   ("os", os.uname().sysname + " " + os.uname().release), ("arch_bits", 64),
                   ("multiplexing_api", "asyncio"), ("process_id", os.getpid()), ("run_id", srv.run_id),
                   ("tcp_port", cfg.port if not cfg.unixsocket else 0),
                   ("uptime_in_seconds", int(up)), ("uptime_in_days", int(up // 86400)),
                   ("executable", "xs serve"), ("config_file", "")],
        "clients": [("connected_clients", len(srv.clients)), ("maxclients", cfg.maxclients),
                    ("blocked_clients", eng.blocked), ("tracking_clients", 0)],
        "persistence": [("loading", 0), ("storage", "lmdb"), ("store", cfg.db),
                        ("aof_enabled", 1), ("appendfsync", "always" if cfg.durable else "no"),
                        ("commits", eng.commits), ("rdb_changes_since_last_save", 0)],
        "stats": [("total_connections_received", srv.connections_received),
                  ("total_commands_processed", eng.commands_processed),
                  ("rejected_connections", srv.rejected)],
        "replication": [("role", "master"), ("connected_slaves", 0)],
        "cluster": [("cluster_enabled", 0)],
        "keyspace": [("db0", "keys=%d,expires=0,avg_ttl=0" % keyspace)] if keyspace else [],
    }
    order = ["server", "clients", "persistence", "stats", "replication", "cluster", "keyspace"]
    want = [x.lower() for x in sections] or ["default"]
    if any(x in ("all", "everything", "default") for x in want):
        picked = order
    else:
        picked = [x for x in order if x in want]
    out = []
    for name in picked:
        out.append("# %s" % name.capitalize())
        out += ["%s:%s" % kv for kv in s[name]]
        out.append("")
    return Verbatim("\r\n".join(out[:-1]).encode() + b"\r\n") if out else Verbatim(b"")


def _xs_version():
    from xstream_cli import __version__
    return __version__


@_local(b"INFO", arity=-1)
def _info(srv, c, argv):
    sections = [a.decode("utf-8", "replace") for a in argv[1:]]

    def fn(tx):
        return _info_text(srv, sections, len(tx.stream_names()))
    return Item(fn=fn)


@_local(b"DBSIZE", arity=1)
def _dbsize(srv, c, argv):
    return Item(fn=lambda tx: len(tx.stream_names()))


@_local(b"FLUSHDB", b"FLUSHALL", arity=-1)
def _flush(srv, c, argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1].upper() not in (b"ASYNC", b"SYNC")):
        return errors.syntax()

    def fn(tx):
        names = tx.stream_names()
        if names:
            tx.delete_keys(names)
        return OK
    return Item(fn=fn, write=True)


# ------------------------------------------------------------------ CONFIG

@_local(b"CONFIG", arity=-2)
def _config(srv, c, argv):
    from storage.glob import match
    from storage.verbs.settings import PARAMS as STORE_PARAMS
    from xstream_cli.commands import keyspace
    sub = argv[1].upper()
    params = srv.config.params()
    if sub == b"GET" and len(argv) >= 3:
        pairs = []
        for pat in argv[2:]:
            for name in sorted(params):
                if match(pat.lower(), name.encode()) and name not in dict(pairs):
                    pairs.append((name, params[name][0]()))
        out = [(k.encode(), v.encode()) for k, v in pairs]
        # the store's settings (node sizes): kept in the store, shared with CLI processes
        return Map(out + srv.store.run(lambda tx: keyspace.config_get(tx, *keyspace.parse_config_get(argv))).pairs)
    if sub == b"SET" and len(argv) >= 4 and len(argv) % 2 == 0:
        names = [a.decode("utf-8", "replace").lower() for a in argv[2::2]]
        stored = [n for n in names if n in STORE_PARAMS]
        if stored and len(stored) == len(names):
            return item_for(argv)           # an engine command: committed in the store
        if stored:
            return _err("ERR CONFIG SET failed (possibly related to argument '%s') - a store setting is set "
                        "in a CONFIG SET of its own" % stored[0])
        todo = []
        for i in range(2, len(argv), 2):
            name = argv[i].decode("utf-8", "replace").lower()
            p = params.get(name)
            if p is None:
                return _err("ERR Unknown option or number of arguments for CONFIG SET - '%s'" % name)
            if p[1] is None:
                return _err("ERR CONFIG SET failed (possibly related to argument '%s') - can't set immutable "
                            "config" % name)
            todo.append((name, p[1], argv[i + 1].decode("utf-8", "surrogateescape")))
        for name, setter, v in todo:
            try:
                setter(v)
            except ValueError as e:
                return _err("ERR CONFIG SET failed (possibly related to argument '%s') - %s" % (name, e))
            log.info("CONFIG SET %s by client %d", name, c.id)
        return OK
    if sub == b"RESETSTAT" and len(argv) == 2:
        srv.engine.commands_processed = 0
        srv.connections_received = 0
        return OK
    if sub == b"REWRITE" and len(argv) == 2:
        return _err("ERR The server is running without a config file")
    if sub in (b"GET", b"SET", b"RESETSTAT", b"REWRITE"):
        return errors.wrong_arity("config|" + sub.decode().lower())
    return errors.unknown_subcommand(argv[1], "CONFIG")


# ----------------------------------------------------------------- COMMAND

_CONN_INFO = {  # name -> (arity, flags, first key, last key, step)
    "ping": (-1, ["fast"], 0, 0, 0), "echo": (2, ["fast"], 0, 0, 0), "select": (2, ["loading", "fast"], 0, 0, 0),
    "hello": (-1, ["noscript", "loading", "fast", "no_auth"], 0, 0, 0), "auth": (-2, ["fast", "no_auth"], 0, 0, 0),
    "client": (-2, [], 0, 0, 0), "quit": (-1, ["fast", "no_auth"], 0, 0, 0), "reset": (1, ["fast", "no_auth"], 0, 0, 0),
    "info": (-1, ["loading"], 0, 0, 0), "command": (-1, ["loading"], 0, 0, 0), "config": (-2, [], 0, 0, 0),
    "flushdb": (-1, ["write"], 0, 0, 0), "flushall": (-1, ["write"], 0, 0, 0), "dbsize": (1, ["readonly", "fast"], 0, 0, 0),  # noqa: E501
    "multi": (1, ["fast", "loading"], 0, 0, 0), "exec": (1, ["loading", "skip_slowlog"], 0, 0, 0),
    "discard": (1, ["fast", "loading"], 0, 0, 0), "watch": (-2, ["fast", "loading"], 1, -1, 1),
    "unwatch": (1, ["fast", "loading"], 0, 0, 0), "time": (1, ["loading", "fast"], 0, 0, 0),
}


def _cmd_info(name):
    """COMMAND INFO's array for a command name (str, lower case), or None."""
    tbl = COMMANDS.get(name.upper().encode())
    if tbl is not None:
        keys = (1, -1 if name in ("del", "exists") else 1, 1)
        if name in ("xread", "xreadgroup"):
            keys = (0, 0, 0)
        if name == "rename":
            keys = (1, 2, 1)
        if name in ("keys", "scan"):
            keys = (0, 0, 0)
        flags = ["write" if tbl.write else "readonly"] + (["blocking"] if tbl.blocking else [])
        return [name, tbl.arity, [Status(f) for f in flags]] + list(keys) + [[], [], [], []]
    subs = SUBCOMMANDS.get(name.upper().encode())
    if subs is not None:
        sub = [[s.name, s.arity, [Status("write" if s.write else "readonly")], 2, 2, 1, [], [], [], []]
               for s in subs.values()]
        return [name, -2, [], 0, 0, 0, [], [], [], sub]
    c = _CONN_INFO.get(name)
    if c is not None:
        return [name, c[0], [Status(f) for f in c[1]], c[2], c[3], c[4], [], [], [], []]
    return None


def _all_names():
    return sorted({n.decode().lower() for n in COMMANDS} | {n.decode().lower() for n in SUBCOMMANDS}
                  | set(_CONN_INFO))


@_local(b"COMMAND", arity=-1)
def _command(srv, c, argv):
    if len(argv) == 1:
        return [_cmd_info(n) for n in _all_names()]
    sub = argv[1].upper()
    if sub == b"COUNT" and len(argv) == 2:
        return len(_all_names())
    if sub == b"INFO":
        names = [a.decode("utf-8", "replace").lower() for a in argv[2:]] or _all_names()
        return [_cmd_info(n) for n in names]
    if sub == b"DOCS":
        names = [a.decode("utf-8", "replace").lower() for a in argv[2:]] or _all_names()
        pairs = []
        for n in names:
            if _cmd_info(n) is None:
                continue
            tbl = COMMANDS.get(n.upper().encode())
            summary = tbl.grammar if tbl is not None else n.upper()
            pairs.append((n, Map([("summary", summary), ("since", "1.0.0"), ("group", "stream" if n.startswith("x")
                                                                                   else "generic")])))
        return Map(pairs)
    if sub == b"LIST" and len(argv) == 2:
        return [n.encode() for n in _all_names()]
    if sub == b"GETKEYS" and len(argv) >= 3:
        return _err("ERR COMMAND GETKEYS is not supported by xs serve")
    return errors.unknown_subcommand(argv[1], "COMMAND")


# ------------------------------------------------------------- MULTI / EXEC

@_local(b"MULTI", arity=1)
def _multi(srv, c, argv):
    if c.multi is not None:
        return _err("ERR MULTI calls can not be nested")
    c.multi = []
    c.multi_error = False
    return OK


@_local(b"DISCARD", arity=1)
def _discard(srv, c, argv):
    if c.multi is None:
        return _err("ERR DISCARD without MULTI")
    c.multi = None
    c.multi_error = False
    c.watched = None
    return OK


@_local(b"WATCH", arity=-2)
def _watch(srv, c, argv):
    if c.multi is not None:
        return _err("ERR WATCH inside MULTI is not allowed")
    keys = argv[1:]

    def fn(tx):
        counters = tx.change_counters(keys)
        w = dict(c.watched or {})
        for k, v in zip(keys, counters):
            w.setdefault(k, v)
        c.watched = w
        return OK
    return Item(fn=fn)


@_local(b"UNWATCH", arity=1)
def _unwatch(srv, c, argv):
    c.watched = None
    return OK


@_local(b"EXEC", arity=1)
async def _exec(srv, c, argv):
    if c.multi is None:
        return _err("ERR EXEC without MULTI")
    queued, c.multi = c.multi, None
    failed, c.multi_error = c.multi_error, False
    watched, c.watched = c.watched, None
    if failed:
        return _err("EXECABORT Transaction discarded because of previous errors.")
    items = []
    for a in queued:
        local = _LOCAL.get(a[0].upper())
        if local is None:
            items.append(item_for(a))
            continue
        r = local[0](srv, c, a)
        if asyncio.iscoroutine(r):
            r.close()
            r = _err("ERR command not allowed inside a transaction")
        items.append(r if isinstance(r, Item) else Item(reply=r))
    replies, _ = await srv._run(items, exec_=True, watched=watched)
    if replies is None:
        return _Raw(encode(NULL_ARRAY, c.proto))
    parts = [b"*%d\r\n" % len(items)]
    for it, r in zip(items, replies):
        parts.append(encode(r, c.proto, it.array_null))
    return _Raw(b"".join(parts))


class _Raw:
    """A reply already encoded (EXEC's array of differently shaped replies)."""
    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data
