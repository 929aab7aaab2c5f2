"""``xs serve``'s connections: the RESP server (asyncio), its clients,
and the routing of their commands: connection and server commands
(PING, HELLO, AUTH, CLIENT, INFO, MULTI, ...) to
xstream_cli.server.commands, every stream and keyspace command to the
engine thread (engine.py), parsed by the CLI's own command table.

One event loop reads and writes every connection; it never touches the
store itself (uvloop's where the ``serve`` extra is installed, asyncio's
otherwise or with XS_SERVE_PURE=1).  A client's commands that arrive
together (a pipeline) go to the engine as one job, in order, the jobs
of one loop iteration together; replies are written in order, a job's
in one write, and only after the commit that made them durable.  Connections are asyncio
Protocols: bytes received are parsed at once and a client's commands
run in a task of its own while it has some.  A slow reader only holds
up itself (its task waits while its transport is paused), and a client
whose unsent replies pass the output limit is disconnected, as Redis
does with ``client-output-buffer-limit``.

Who imports it: xstream_cli.server (``serve``).
"""
import asyncio
import errno
import logging
import os
import socket
import time

from storage import errors
from storage.errors import DENIED, NOAUTH, RedisError
from xstream_cli.output.reply import Status
from xstream_cli.server.commands import LOCAL, NOAUTH_OK, NOT_QUEUED, PROTO_CHANGERS
from xstream_cli.server.config import loopback
from xstream_cli.server.engine import Engine, Item, Job, answer, item_for
from xstream_cli.server.resp import ProtocolError, Raw, RequestParser, encode, encode_replies
from xstream_cli.server.stats import Stats

log = logging.getLogger("xs.serve")

READ_SIZE = 1 << 16
STEP_COMMANDS = 1024           # a client's commands taken from its buffer at a time (others go in between)
PAUSE_BYTES = 4 << 20          # unparsed requests of a busy client beyond which its reading pauses
QUERY_LIMIT = 1 << 30          # client-query-buffer-limit: one request may not need more
UNAUTHED_QUERY_LIMIT = 1 << 20  # before AUTH, as redis-server: a query buffer over 1 MB closes the connection
UNAUTHED_STEP = 64             # before AUTH: refused commands answered together (one write)
UNAUTHED_REFUSALS = 512        # before AUTH: NOAUTH replies (about 17 KB) to one pipeline before the connection closes
DRAIN_S = 10                   # on SIGTERM: how long commands under way may take to commit and answer
TLS_HANDSHAKE_S = 5            # a TLS connection that has not finished its handshake by then is closed
TLS_HANDSHAKES = 64            # TLS handshakes under way at most (the oldest is dropped for a new one)
# modules commands import on first use (and every module of PRELOAD_PACKAGES):
# imported at start, so that a command never needs a descriptor for an
# import (it failed with EMFILE when connections had taken them all)
PRELOAD = ("ctypes", "ctypes.util", "storage.glob", "storage.consumers", "storage.inotify",
           "xstream_cli.commands.keyspace", "xstream_cli.server.docs", "xstream_cli.help",
           "xstream_cli.execution.blocked")
PRELOAD_PACKAGES = ("storage.verbs", "storage.parts")


class Client:
    """One connection."""

    @property
    def authed(self):
        return self._authed

    @authed.setter
    def authed(self, yes):
        """Before AUTH, requests are read with Redis's small limits
        (resp.RequestParser.unauthed)."""
        self._authed = yes
        self.parser.unauthed = not yes

    def __init__(self, server, cid, transport, addr, laddr):
        self.server = server
        self.id = cid
        self.writer = transport
        self.addr = addr
        self.laddr = laddr
        self.parser = RequestParser(server.config.max_bulk, native=server.config.native)
        self.proto = 2
        self.name = None
        self.lib_name = None
        self.lib_ver = None
        self.authed = server.config.requirepass is None
        self.paused = False          # reading paused: its unparsed requests pile up (backpressure)
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
        self.auth_failures = 0       # wrong passwords in a row
        self.auth_delay = 0.0        # seconds to wait before answering a wrong password
        self.refused = 0             # NOAUTH replies since the client last waited for its replies
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


class Server:
    """The served store: listening sockets, clients, engine."""

    def __init__(self, store, config):
        self.store = store
        self.config = config
        self.engine = Engine(store)
        self.stats = Stats()          # INFO commandstats / errorstats
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
        self.metrics_httpd = None    # xs serve --metrics: its HTTP server
        self.stopping = False
        self.engine_stuck = False    # stopped while the engine still waited for the write lock
        self.auth_next = 0.0         # when the server may answer its next wrong password (monotonic)
        self.auth_failed = 0         # wrong passwords since the last log line about them
        self.auth_log_at = 0.0       # when that line may be written again
        self._outbox = []            # jobs for the engine from this loop iteration (_submit)
        self.run_here = os.environ.get("XS_SERVE_ENGINE_ONLY") != "1"   # _hand_over (1: always the engine thread)
        self.handshakes = {}         # TLS connections accepted, handshake under way: socket -> [task, started]
        self.tls = None              # the TLS port's ssl.SSLContext

    # ---------------------------------------------------------- life cycle

    async def start(self):
        self.config.fit_open_files()          # logs what it did
        await self.start_in_process()
        c = self.config
        if c.metrics:
            self._start_metrics(*c.metrics)
        log.info("requests read by %s; event loop: %s", "hiredis" if RequestParser(native=c.native).native
                 else "the pure-Python reader", "uvloop" if type(self.loop).__module__.startswith("uvloop")
                 else "asyncio")
        if c.unixsocket:
            if _listening(c.unixsocket):
                raise OSError("another server is listening on %s" % c.unixsocket)
            try:
                os.unlink(c.unixsocket)          # a socket left by a server that died
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
            if c.tls_port:
                # TLS: the server does the handshake itself (_tls_accepted),
                # so that a connection counts from its accept; a client that
                # fails it (plain text, no or a bad certificate, silence) is
                # dropped there
                self.tls = c.tls_context()
                self.servers.append(_TlsListener(self, hosts, c.tls_port))
                log.info("ready to accept TLS connections on %s port %d (client certificates: %s)",
                         " ".join(hosts), c.tls_port, c.tls_auth_clients)
            if c.port or not c.tls_port:      # --port 0 with --tls-port: TLS only
                srv = await self.loop.create_server(lambda: _Protocol(self), host=hosts, port=c.port,
                                                    reuse_address=True)
                self.servers.append(srv)
                if not c.port:
                    c.port = srv.sockets[0].getsockname()[1]
                log.info("ready to accept connections on %s port %d (store %s)", " ".join(hosts), c.port, c.db)

    def _start_metrics(self, host, port):
        """``xs serve --metrics``: /metrics (xs metrics' text of the whole
        store) on (host, port), served by a thread of its own; each
        scrape reads one snapshot under the engine's store lock (between
        two of its batches, never during a step aside for a compaction)."""
        import threading

        from storage.ops.overview import snapshot
        from xstream_cli.porcelain.metrics import http_server, url_of
        lock = self.engine.store.lock

        def snap():
            with lock:
                return snapshot(self.engine.store)
        self.metrics_httpd = http_server(host, port, snap, "redis", True)
        threading.Thread(target=self.metrics_httpd.serve_forever, name="xs-metrics", daemon=True).start()
        log.info("serving metrics at %s", url_of(self.metrics_httpd, host))

    async def start_in_process(self):
        """Start the engine and the blocking pool, listening nowhere:
        connections come through ``adopt`` (xstream_cli.client)."""
        import importlib
        import pkgutil
        from concurrent.futures import ThreadPoolExecutor

        names = list(PRELOAD)
        for package in PRELOAD_PACKAGES:
            names += [package + "." + m.name for m in pkgutil.iter_modules(importlib.import_module(package).__path__)]
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as e:       # the command that needs it will say
                log.debug("preloading %s: %s", name, e)
        self.loop = asyncio.get_running_loop()
        self.pool = ThreadPoolExecutor(max_workers=max(4, self.config.maxclients), thread_name_prefix="xs-block")
        self.engine.deliver = self._deliver
        self.engine.start()

    async def adopt(self, sock):
        """Serve a connected socket (one end of a socket pair) as a client;
        returns its Client (None if refused)."""
        _, proto = await self.loop.connect_accepted_socket(lambda: _Protocol(self), sock)
        return proto.c

    async def stop(self):
        """Stop accepting, let the commands under way finish and their
        replies go out, cancel blocked waits (they answer null), close
        every connection, stop the engine."""
        self.stopping = True
        for s in self.servers:
            s.close()
        if self.metrics_httpd is not None:
            self.metrics_httpd.shutdown()        # a scrape under way finishes first
            self.metrics_httpd.server_close()
        for sock in list(self.handshakes):
            self._drop_handshake(sock)
        self.engine.cancel_all()
        deadline = time.monotonic() + 5
        while any(c.call is not None for c in self.clients.values()) and time.monotonic() < deadline:
            self.engine.cancel_all()
            await asyncio.sleep(0.01)
        deadline = time.monotonic() + DRAIN_S
        while any(c.inflight for c in self.clients.values()) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)          # jobs with the engine: their replies go out first
        stuck = sum(1 for c in self.clients.values() if c.inflight)
        busy = [c.task for c in self.clients.values() if c.task is not None]
        for c in list(self.clients.values()):
            c.closing = True                     # no new commands; those under way finish
        if busy and not stuck:
            await asyncio.wait(busy, timeout=DRAIN_S)
        for c in list(self.clients.values()):
            c.writer.close()                     # after the replies already queued
        deadline = time.monotonic() + 2
        while self.clients and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self._hand_over()
        if not await self.loop.run_in_executor(None, self.engine.stop, 0 if stuck else DRAIN_S):
            # another process holds the store's write lock: the engine waits
            # for it with the commands it has; they were never committed (no
            # reply was sent for them), so nothing acknowledged is lost
            log.warning("the store's write lock is held by another process: stopping without the %d "
                        "client(s) whose commands waited for it (nothing of theirs was written)", stuck or 1)
            self.engine_stuck = True
        self.pool.shutdown(wait=False)
        if self.config.unixsocket:
            try:
                os.unlink(self.config.unixsocket)
            except OSError:
                pass

    # ---------------------------------------------------------- connections

    def kill(self, t):
        """Close the connection of client ``t`` (CLIENT KILL), ending its wait."""
        t.closing = True
        t.killed = True
        if t.call is not None:
            t.call.cancel()
        try:
            t.writer.close()
        except Exception:
            pass

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
                except Exception:        # uvloop's transports set it themselves
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
        if cfg.protected_mode and cfg.requirepass is None and not loopback(host):
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

    def _tls_accept(self, listener, lsock):
        """(loop) Connections wait on the TLS port: accept them."""
        for _ in range(128):
            try:
                sock, _ = lsock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # as asyncio's own accept: try again in a second
                    log.warning("accepting a TLS connection: %s; trying again in 1 s", e.strerror)
                    listener.pause(1.0)
                return
            self._tls_accepted(sock)

    def _tls_accepted(self, sock):
        """A TCP connection on the TLS port: it counts against maxclients
        from here (a handshake holds a descriptor as a client does).  At
        most TLS_HANDSHAKES handshakes are under way, and no more than
        maxclients leaves room for: the oldest one gives way to the new
        one (silent or slow clients make room for the next); each has
        TLS_HANDSHAKE_S to finish."""
        self.connections_received += 1
        if self.stopping:
            sock.close()
            return
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        hs = self.handshakes
        room = max(1, min(TLS_HANDSHAKES, self.config.maxclients - len(self.clients)))
        while len(hs) >= room:
            oldest = next(iter(hs))
            self._drop_handshake(oldest)
        hs[sock] = [self.loop.create_task(self._tls_handshake(sock)), False]

    def _drop_handshake(self, sock):
        task, started = self.handshakes.pop(sock)
        task.cancel()                    # a handshake under way: its transport is aborted
        if not started:
            sock.close()                 # not handed to the loop yet: ours to close

    async def _tls_handshake(self, sock):
        entry = self.handshakes.get(sock)
        if entry is not None:
            entry[1] = True
        try:
            await self.loop.connect_accepted_socket(lambda: _TlsProtocol(self), sock, ssl=self.tls,
                                                    ssl_handshake_timeout=TLS_HANDSHAKE_S)
        except asyncio.CancelledError:
            pass
        except Exception as e:           # a failed or timed out handshake, a reset
            log.debug("TLS handshake failed: %s", e)
        finally:
            if self.handshakes.get(sock) is entry and entry is not None:
                del self.handshakes[sock]

    def _refuse(self, transport, error):
        """Send ``error`` and close a little later: closing at once with
        the client's first command unread would reset the connection and
        could discard the error before the client reads it."""
        transport.write(error)
        self.loop.call_later(0.2, transport.close)

    def _received(self, c, data):
        if c.closing:
            return
        parser = c.parser
        if c.refused and not parser.pending():
            c.refused = 0                    # it read its replies before sending more
        parser.feed(data)
        if c.task is None and not c.inflight:
            self._pump(c)
        pending = parser.pending()
        unauthed = parser.unauthed
        if pending > (UNAUTHED_QUERY_LIMIT if unauthed else PAUSE_BYTES) and not c.paused:
            if pending > (UNAUTHED_QUERY_LIMIT if unauthed else QUERY_LIMIT):
                log.warning("closing client %d (%s) that reached max query buffer length (%d bytes)",
                            c.id, c.addr, pending)
                c.closing = True
                c.writer.abort()
            elif (c.task is not None or c.inflight) and parser.need <= pending:
                c.paused = True              # it sends faster than it is served: let TCP hold the rest
                c.writer.pause_reading()

    def _resume(self, c):
        """After a round of a paused client's commands: read again once its
        backlog is small, or when what is left is an incomplete request."""
        if c.paused and not c.closing:
            parser = c.parser
            pending = parser.pending()
            if pending < PAUSE_BYTES // 2 or parser.need > pending:
                c.paused = False
                c.writer.resume_reading()

    def _step(self, c):
        """The client's next commands, a bounded step.  Before AUTH they are
        read one at a time (so that AUTH lifts the limits for the request
        after it), and the ones refused with NOAUTH are taken together: a
        step ends after a command allowed before AUTH (AUTH, HELLO ...)."""
        parser = c.parser
        if not parser.unauthed:
            return parser.commands(STEP_COMMANDS)
        out = []
        while len(out) < UNAUTHED_STEP:
            got = parser.commands(1)
            if not got:
                break
            out += got
            a = got[0]
            if type(a) is not list or a[0].upper() in NOAUTH_OK:
                break
        return out

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
        cmds = self._step(c)
        if not cmds:
            self._resume(c)
            return
        if c.authed and c.multi is None:
            local = LOCAL
            for a in cmds:
                if type(a) is not list or a[0].upper() in local:
                    break
            else:
                items = [item_for(a) for a in cmds]
                c.last = time.monotonic()
                c.last_cmd = cmds[-1][0]
                job = Job(items, lambda res: self._answered(c, items, res), owner=c.id, proto=c.proto)
                if not job.write and not any(it.array_null or it.heavy for it in items) \
                        and self._read_now(c, items, job):
                    return
                c.inflight = True
                self._submit(job)
                self._resume(c)
                return
        c.task = self.loop.create_task(self._process(c, cmds))

    def _read_now(self, c, items, job):
        """Reads only (XRANGE, XLEN, XINFO ... : no write, no wait), with no
        transaction of this process open: run them here, in the loop's
        thread, and answer at once -- two thread hand-offs fewer for a
        pager (a url read's XRANGE pages).  Never waits for the store's
        lock (the engine may be committing): False, and the job goes to
        the engine as any other."""
        lock = self.engine.store.lock
        if not lock.acquire(blocking=False):
            return False
        try:
            res = self.engine.execute([job], engine=False)[0]
        finally:
            lock.release()
        c.inflight = True             # answered from the loop's next turn: no recursion through _pump
        self.loop.call_soon(self._answered, c, items, res)
        self._resume(c)
        return True

    def _answered(self, c, items, res):
        """(loop) The engine ran a job sent by ``_pump``: send its replies,
        then go on with what the client sent meanwhile."""
        c.inflight = False
        replies, blocked = res
        self._send(c, encode_replies(items, replies, c.proto))
        self.stats.replies(items, replies)
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
        self.stats.reply(items[i], r)
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
                unauthed = c.parser.unauthed
                cmds = self._step(c)
                if not cmds:
                    break
                await self._dispatch(c, cmds)
                self._resume(c)
                if unauthed:
                    await asyncio.sleep(0)       # its replies need no engine: let others go on between steps
        except Exception:
            log.exception("client %d: unexpected failure", c.id)
            c.closing = True
        finally:
            c.task = None
            if c.closing:
                c.writer.close()
            else:
                self._resume(c)

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
            if c.auth_delay:
                await self._auth_penalty(c)
            if c.closing:
                break
            if isinstance(argv, ProtocolError):
                await self._flush(c, batch)
                batch = []
                log.info("client %d: %s", c.id, argv)
                self.stats.error(RedisError("ERR " + str(argv)))
                self._send(c, encode(RedisError("ERR " + str(argv))))
                c.closing = True
                break
            c.last = time.monotonic()
            name = argv[0].upper()
            c.last_cmd = name
            if not c.authed and name not in NOAUTH_OK:
                c.refused += 1
                if c.refused > UNAUTHED_REFUSALS:
                    # as redis-server does with a client that never
                    # authenticated and lets its replies pile up: closed
                    await self._flush(c, batch)
                    batch = []
                    log.warning("closing client %d (%s): over %d commands refused before AUTH in one pipeline",
                                c.id, c.addr, UNAUTHED_REFUSALS)
                    c.closing = True
                    if c._out_size():
                        c.writer.abort()         # it does not read: its replies are dropped
                    break
                batch.append(Item(reply=RedisError(NOAUTH), name=_stat_name(argv), rejected=True))
                continue
            if c.multi is not None and name not in NOT_QUEUED:
                batch.append(Item(reply=self._queue(c, argv)))
                continue
            local = LOCAL.get(name)
            if local is None:
                batch.append(item_for(argv))
                continue
            fn, arity, lname = local
            n = len(argv)
            if (arity >= 0 and n != arity) or (arity < 0 and n < -arity):
                batch.append(Item(reply=errors.wrong_arity(lname), name=lname, rejected=True))
                continue
            if name in PROTO_CHANGERS:
                # the replies before it go out in the protocol they were asked in,
                # HELLO's own in the new one
                await self._flush(c, batch)
                batch = []
                r = fn(self, c, argv)
                batch.append(Item(reply=Raw(encode(r, c.proto)), name=lname))
                continue
            r = fn(self, c, argv)
            if asyncio.iscoroutine(r):
                await self._flush(c, batch)
                batch = []
                r = await r
            if isinstance(r, Item):
                if r.cmd is None:
                    r.name = _stat_name(argv)
                batch.append(r)
            elif r is not None:
                batch.append(Item(reply=r, name=_stat_name(argv)))
        if c.auth_delay:
            await self._auth_penalty(c)
        await self._flush(c, batch)

    async def _auth_penalty(self, c):
        """Hold a client's replies after a wrong password (commands.py,
        _wrong_password): guessing is slow, other clients go on."""
        delay, c.auth_delay = c.auth_delay, 0.0
        await asyncio.sleep(delay)

    async def _flush(self, c, items):
        """Run ``items`` in order and send their replies; a blocked read
        waits here (other clients go on)."""
        while items:
            if all(it.cmd is None and it.fn is None for it in items):
                replies = [it.reply for it in items]
                self._send(c, encode_replies(items, replies, c.proto))
                self.stats.replies(items, replies)
                return
            replies, blocked = await self._run(items, owner=c.id, proto=c.proto)
            self._send(c, encode_replies(items, replies, c.proto))
            self.stats.replies(items, replies)
            if blocked is None:
                return
            i, cmd, args, w = blocked
            r = await self._block(c, cmd, args, w)
            if c.closing:
                return
            self._send(c, encode(r, c.proto, True))
            self.stats.reply(items[i], r)
            items = items[i + 1:]

    def _run(self, items, exec_=False, watched=None, owner=None, proto=2):
        """Hand ``items`` to the engine; a future of (replies, blocked)."""
        fut = self.loop.create_future()
        self._submit(Job(items, lambda res: fut.done() or fut.set_result(res), exec_, watched, owner, proto))
        return fut

    def _submit(self, job):
        """Hand ``job`` to the engine.  The jobs of one loop iteration (the
        clients whose requests came in one wake-up) cross to the engine
        thread together, at the end of it, and so make one batch."""
        box = self._outbox
        box.append(job)
        if len(box) == 1:
            self.loop.call_soon(self._hand_over)

    def _hand_over(self):
        """The jobs of this loop iteration, as one group commit: run here,
        in the loop's thread, and answered at once when every job handed to
        the engine thread has run (the order clients sent them in stays the
        order they run in) and nobody holds the store's write lock (no
        thread hand-off: redis-server's way, its fsync in its loop too);
        else handed to the engine thread, which waits for the lock while
        the loop goes on reading, parsing and serving reads.  Big reads
        (Item.heavy) go to the readers' thread (Engine.read_heavy), or
        with a write (XREADGROUP) to the engine."""
        box = self._outbox
        if not box:
            return
        self._outbox = []
        eng = self.engine
        if any(it.heavy for j in box for it in j.items):
            reads = [j for j in box if not j.write and any(it.heavy for it in j.items)]
            for j in reads:
                eng.read_heavy(j)
            box = [j for j in box if j not in reads]
            if not box:
                return
        elif self.run_here and eng.idle():
            res = eng.execute(box, engine=False, nowait=True)
            if res is not None:
                answer([(j.done, r) for j, r in zip(box, res)])
                return
        eng.submit(box if len(box) > 1 else box[0])

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
        abort (unknown command, wrong arity), as Redis checks at queueing.
        An engine command is queued parsed (its Item: a parse error is its
        reply at EXEC, as Redis's commands fail when they run); a server
        command as its arguments."""
        name = argv[0].upper()
        local = LOCAL.get(name)
        if local is not None:
            fn, arity, lname = local
            n = len(argv)
            if (arity >= 0 and n != arity) or (arity < 0 and n < -arity):
                c.multi_error = True
                return errors.wrong_arity(lname)
        else:
            it = item_for(argv)          # parsed once, here: EXEC runs the Item
            if it.rejected:
                c.multi_error = True
                return it.reply
            argv = it
        c.multi.append(argv)
        return Status("QUEUED")


def _stat_name(argv):
    """The commandstats name of a server command: ``client|id`` for the
    subcommands of CLIENT, CONFIG and COMMAND, as Redis names them."""
    name = argv[0].decode("latin-1").lower()
    if name in ("client", "config", "command") and len(argv) > 1:
        return name + "|" + argv[1].decode("latin-1").lower()
    return name


def _listening(path):
    """Whether a live server answers on the Unix socket ``path``."""
    probe = socket.socket(socket.AF_UNIX)
    probe.settimeout(2)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


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


class _TlsProtocol(_Protocol):
    """A connection on the TLS port, once its handshake is done (it was
    counted at accept: Server._tls_accepted)."""
    __slots__ = ()

    def connection_made(self, transport):
        self.srv.connections_received -= 1
        super().connection_made(transport)


class _TlsListener:
    """The TLS port's listening sockets, accepted from by the Server itself
    (Server._tls_accept) so that a connection counts from its accept, not
    from the end of its handshake."""

    def __init__(self, srv, hosts, port):
        self.srv = srv
        self.loop = srv.loop
        self.sockets = []
        self.paused = None
        try:
            for host in hosts:
                for family, kind, proto, _, addr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                        flags=socket.AI_PASSIVE):
                    s = socket.socket(family, kind, proto)
                    self.sockets.append(s)
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    if family == socket.AF_INET6:
                        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    try:
                        s.bind(addr)
                    except OSError as e:
                        raise OSError(e.errno, "error while attempting to bind on address %r: %s"
                                      % (addr, (e.strerror or str(e)).lower())) from None
                    s.listen(511)
                    s.setblocking(False)
        except BaseException:
            self.close()
            raise
        self.resume()

    def resume(self):
        self.paused = None
        for s in self.sockets:
            self.loop.add_reader(s.fileno(), self.srv._tls_accept, self, s)

    def pause(self, delay):
        if self.paused is None:
            for s in self.sockets:
                self.loop.remove_reader(s.fileno())
            self.paused = self.loop.call_later(delay, self.resume)

    def close(self):
        if self.paused is not None:
            self.paused.cancel()
            self.paused = ()
        for s in self.sockets:
            try:
                self.loop.remove_reader(s.fileno())
            except Exception:
                pass
            s.close()
        self.sockets = []
