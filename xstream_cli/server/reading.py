"""A client's requests read and its replies written (the Server's
methods, xstream_cli.server.connection.Server).

Bytes received are parsed at once (resp.RequestParser; a read that is
one whole request, a client waiting for each reply, without being
buffered: ``RequestParser.lone``); a client's
commands are taken a bounded step at a time, before AUTH one at a time
with Redis's small limits.  A client that sends faster than it is served
has its reading paused (TCP holds the rest) and resumed once its backlog
is small; one whose query buffer passes the limit is closed, as one
whose unsent replies pass the output limit (``_send``).  The common
case -- commands of the table, authenticated, no MULTI -- goes to the
engine straight from ``_pump`` and is answered from a callback, a lone
read run at once (Engine.run: in the loop's thread if it can), PING and ECHO
answered right there (no Item, no job; counted by ``Stats.instant``);
anything else
runs in a task of the client's own (``_process``, routing.py's
``_dispatch``).

Who imports it: xstream_cli.server.connection.
"""
import asyncio
import logging
import time
from operator import itemgetter

from xstream_cli.output.reply import Status
from xstream_cli.server.commands import LOCAL, NOAUTH_OK
from xstream_cli.server.flow import answered
from xstream_cli.server.jobs import Item, Job, item_for
from xstream_cli.server.resp import encode

log = logging.getLogger("xs.serve")

STEP_COMMANDS = 1024           # a client's commands taken from its buffer at a time (others go in between)
PAUSE_BYTES = 4 << 20          # unparsed requests of a busy client beyond which its reading pauses
QUERY_LIMIT = 1 << 30          # client-query-buffer-limit: one request may not need more
UNAUTHED_QUERY_LIMIT = 1 << 20  # before AUTH, as redis-server: a query buffer over 1 MB closes the connection
UNAUTHED_STEP = 64             # before AUTH: refused commands answered together (one write)
_INSTANT = {b"PING": 1, b"ECHO": 2}    # server commands answered where they are read, with their arity (PING: 1 or 2)
_PING = {b"PING"}
_PONG = b"+PONG\r\n"               # the same in RESP2 and RESP3
_first = itemgetter(0)


class Reading:
    """The Server's reading of its clients' requests and writing of
    their replies."""

    def _received(self, c, data):
        if c.closing:
            return
        parser = c.parser
        if c.task is None and not c.inflight and not c.stalled:
            cmds = parser.lone(data)     # the usual read: one whole request, nothing buffered
            if cmds is not None:
                c.refused = 0
                self._pump(c, cmds)
                return
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

    def _pump(self, c, cmds=None):
        """Start on the client's buffered commands (or on ``cmds``, read
        already: RequestParser.lone).  The common case, only
        commands of the table (no MULTI, authenticated), goes to the engine
        straight from here and is answered from a callback (no task);
        anything else runs in a task (``_process``)."""
        if c.closing or self.stopping:
            return                       # stopping: no new commands (those under way finish)
        if c.stalled:
            c.task = self.loop.create_task(self._process(c, cmds))
            return
        if cmds is None:
            cmds = c.parser.commands(STEP_COMMANDS) if c._authed else self._step(c)
            if not cmds:
                self._resume(c)
                return
        if c._authed and c.multi is None and type(cmds[-1]) is list:   # (a ProtocolError is last)
            if len(cmds) == 1:           # the usual step: one request (its set of names not made)
                a = cmds[0]
                name = a[0].upper()
                if name not in LOCAL:
                    instant = 0
                elif name == b"PING" and len(a) == 1:
                    self._pong(c, cmds)
                    return
                else:
                    instant = _instants({name}, cmds)
            else:
                names = set(map(bytes.upper, set(map(_first, cmds))))   # (a pipeline's names repeat)
                if names.isdisjoint(LOCAL):
                    instant = 0
                elif names == _PING and max(map(len, cmds)) == 1:
                    self._pong(c, cmds)
                    return
                else:
                    instant = _instants(names, cmds)
            if instant >= 0:
                c.last = time.monotonic()
                c.last_cmd = cmds[-1][0]
                if instant == len(cmds):
                    self._instant(c, cmds)
                    return
                items = [item_for(a) if a[0].upper() not in LOCAL else _instant_item(a) for a in cmds] \
                    if instant else [item_for(a) for a in cmds]
                job = Job(items, lambda res: self._answered(c, items, res), owner=c.id, proto=c.proto)
                c.inflight = True
                if job.write or any(it.array_null or it.heavy for it in items):
                    self._submit(job)        # with the others of this loop iteration: one group commit
                else:
                    # reads only (XRANGE, XLEN, XINFO ...: no write, no wait): at
                    # once, two thread hand-offs fewer for a pager (a url read's
                    # XRANGE pages); answered from the loop's next turn (no
                    # recursion through _pump)
                    ran = self.engine.run([job])
                    if ran:
                        self.loop.call_soon(self._answered, c, items, ran[0][1])
                if c.paused:
                    self._resume(c)
                return
        c.task = self.loop.create_task(self._process(c, cmds))

    def _pong(self, c, cmds):
        """A step of PINGs alone, the health check: answered here, at
        once, counted inline (Stats.instant)."""
        c.last = time.monotonic()
        c.last_cmd = cmds[-1][0]
        n = len(cmds)
        self._send(c, _PONG * n)
        self.stats.quick["ping"] += n
        if c.paused:
            self._resume(c)
        if n >= STEP_COMMANDS:
            self.loop.call_soon(self._pump_more, c)

    def _instant(self, c, cmds):
        """Answer a step of PINGs and ECHOs at once: no Item, no job, one
        write, the calls counted in bulk; then the client's next step, if
        the step was a full one."""
        n = len(cmds)
        self._send(c, b"".join([_PONG if len(a) == 1 else encode(a[1]) for a in cmds]))
        pings = sum(1 for a in cmds if a[0].upper() == b"PING")
        if pings:
            self.stats.instant("ping", pings)
        if n - pings:
            self.stats.instant("echo", n - pings)
        if c.paused:
            self._resume(c)
        if n >= STEP_COMMANDS:
            self.loop.call_soon(self._pump_more, c)

    def _pump_more(self, c):
        """The next step of a client with more buffered, unless its
        commands are already under way (a job, a task)."""
        if c.task is None and not c.inflight:
            self._pump(c)

    def _answered(self, c, items, res):
        """(loop) The engine ran a job sent by ``_pump``: send its replies,
        then go on with what the client sent meanwhile."""
        c.inflight = False
        steps = answered(items, c.proto, c.send, self.stats, res)
        if steps is not None:        # a blocked read: it waits in a task of the client's own
            c.task = self.loop.create_task(self._process(c, None, self._drive(c, steps)))
        elif c.parser.pending():
            self._pump(c)

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
                if c.stalled:
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

    def _send(self, c, data):
        """Queue replies for ``c``; a client whose unsent replies pass the
        output limit is disconnected at once (its replies dropped), as
        Redis does with client-output-buffer-limit."""
        w = c.writer
        if w.is_closing():
            return
        w.write(data)
        try:
            size = w.get_write_buffer_size()
        except Exception:
            size = 0
        if size > self.config.output_limit:
            log.warning("client %d (%s) closed: output buffer over %d bytes", c.id, c.addr, self.config.output_limit)
            c.closing = True
            w.abort()

def _instants(names, cmds):
    """How many of ``cmds`` (``names``: their names, upper case) are
    PINGs and ECHOs with their arities, answered where they are read; -1
    when another server command is among them (the step runs in a task)."""
    if not names <= _INSTANT.keys():
        return -1
    n = 0
    for a in cmds:
        name = a[0].upper()
        if name in _INSTANT:
            if _INSTANT[name] != len(a) and (name != b"PING" or len(a) != 2):
                return -1
            n += 1
    return n


def _instant_item(a):
    """A PING or ECHO in a step with engine commands: its reply, in the
    job's order."""
    if len(a) == 1:
        return Item(reply=Status("PONG"), name="ping")
    return Item(reply=a[1], name="ping" if a[0].upper() == b"PING" else "echo")
