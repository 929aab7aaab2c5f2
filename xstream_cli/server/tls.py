"""``xs serve``'s TLS port: its listening sockets (``_TlsListener``),
accepted from by the Server itself so that a connection counts against
maxclients from its accept, not from the end of its handshake; the
handshakes under way, at most TLS_HANDSHAKES (the oldest gives way to a
new one), each with TLS_HANDSHAKE_S to finish (``TlsAccept``, the
Server's methods for them); and the protocol of a connection whose
handshake is done (``_TlsProtocol``).

Who imports it: xstream_cli.server.connection.
"""
import asyncio
import errno
import logging
import socket

from xstream_cli.server.clients import _Protocol

log = logging.getLogger("xs.serve")

TLS_HANDSHAKE_S = 5            # a TLS connection that has not finished its handshake by then is closed
TLS_HANDSHAKES = 64            # TLS handshakes under way at most (the oldest is dropped for a new one)


class TlsAccept:
    """The Server's accepts and handshakes on the TLS port
    (xstream_cli.server.connection.Server)."""

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
