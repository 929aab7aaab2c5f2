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

The ``Server`` is here: its life cycle (start, stop and drain) and its
connections (accepted, refused, killed, gone).  Its other methods are
in a module for each idea: a client's requests read and its replies
written (reading.py: backpressure, the fast path), where each command
runs (routing.py: server commands, MULTI, the hand-over of a loop
turn's jobs to the engine), the TLS port's accepts and handshakes
(tls.py); one connection's state and transport callbacks are clients.py.

Who imports it: xstream_cli.server (``serve``).
"""
import asyncio
import logging
import os
import socket
import time

from storage.errors import DENIED
from xstream_cli.server.clients import Client, _Protocol
from xstream_cli.server.config import loopback
from xstream_cli.server.engine import Engine
from xstream_cli.server.reading import Reading
from xstream_cli.server.resp import RequestParser
from xstream_cli.server.routing import Routing
from xstream_cli.server.stats import Stats
from xstream_cli.server.tls import TlsAccept, _TlsListener

log = logging.getLogger("xs.serve")

DRAIN_S = 10                   # on SIGTERM: how long commands under way may take to commit and answer
# modules commands import on first use (and every module of PRELOAD_PACKAGES):
# imported at start, so that a command never needs a descriptor for an
# import (it failed with EMFILE when connections had taken them all)
PRELOAD = ("ctypes", "ctypes.util", "storage.glob", "storage.consumers", "storage.inotify",
           "xstream_cli.commands.keyspace", "xstream_cli.server.docs", "xstream_cli.execution.blocked")
PRELOAD_PACKAGES = ("storage.verbs", "storage.parts")


class Server(Reading, Routing, TlsAccept):
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

    def _refuse(self, transport, error):
        """Send ``error`` and close a little later: closing at once with
        the client's first command unread would reset the connection and
        could discard the error before the client reads it."""
        transport.write(error)
        self.loop.call_later(0.2, transport.close)

    def _gone(self, c):
        """The connection closed (by the client, CLIENT KILL, an error)."""
        c.closing = True
        if c.call is not None:
            c.call.cancel()
        c.stalled = False
        c.writable.set()
        self.clients.pop(c.id, None)
        log.debug("client %d gone", c.id)


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
