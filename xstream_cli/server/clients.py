"""One connection of ``xs serve``: its state (``Client``: protocol,
name, AUTH, MULTI and WATCH, its blocked wait, its reading paused or
not) and its transport's callbacks (``_Protocol``), which hand
everything to the Server (xstream_cli.server.connection).

Who imports it: xstream_cli.server.connection and .tls.
"""
import asyncio
import time

from xstream_cli.server.resp import RequestParser

READ_SIZE = 1 << 16


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
        self.stalled = False         # the same, as a plain flag (looked at on every request)

    def send(self, data):
        """Queue replies (Server._send)."""
        self.server._send(self, data)

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
            self.c.stalled = True
            self.c.writable.clear()

    def resume_writing(self):
        if self.c is not None:
            self.c.stalled = False
            self.c.writable.set()
