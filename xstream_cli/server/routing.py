"""Where each command of a client runs (the Server's methods,
xstream_cli.server.connection.Server): connection and server commands
are answered by xstream_cli.server.commands (``LOCAL``), inside MULTI
they are queued, before AUTH they are refused; every other command is
an engine Item (xstream_cli.server.jobs).  A client's Items go to the
engine as one Job, and the jobs of one turn of the event loop as one
batch: ``_hand_over`` runs it in the loop's thread, or hands it to the
engine thread or the readers' thread (xstream_cli.server.engine says
when).  A blocked read waits in the blocking pool (``_block``).

Who imports it: xstream_cli.server.connection.
"""
import asyncio
import logging
import time

from storage import errors
from storage.errors import NOAUTH, RedisError
from xstream_cli.output.reply import Status
from xstream_cli.server.commands import LOCAL, NOAUTH_OK, NOT_QUEUED, PROTO_CHANGERS
from xstream_cli.server.engine import answer
from xstream_cli.server.flow import GONE, RUN, Flow
from xstream_cli.server.jobs import Item, Job, item_for, queue_adds
from xstream_cli.server.resp import ProtocolError, Raw, encode

log = logging.getLogger("xs.serve")

UNAUTHED_REFUSALS = 512        # before AUTH: NOAUTH replies (about 17 KB) to one pipeline before the connection closes


class Routing:
    """The Server's routing of its clients' commands."""

    # ------------------------------------------------------------- commands

    async def _dispatch(self, c, cmds):
        batch = []                   # Items waiting for the engine
        i = 0
        n_cmds = len(cmds)
        while i < n_cmds:
            argv = cmds[i]
            i += 1
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
                batch.append(Item(reply=_refused(c, name, RedisError(NOAUTH)), name=_stat_name(argv), rejected=True))
                continue
            if c.multi is not None and name not in NOT_QUEUED:
                k = queue_adds(c.multi, cmds, i - 1)
                if k:                    # a run of plain XADDs (a MULTI block's rows): one QUEUED reply each
                    i += k - 1
                    c.last_cmd = cmds[i - 1][0].upper()
                    batch.append(Item(reply=Raw(_QUEUED * k)))
                    continue
                batch.append(Item(reply=self._queue(c, argv)))
                continue
            local = LOCAL.get(name)
            if local is None:
                batch.append(item_for(argv))
                continue
            fn, arity, lname = local
            n = len(argv)
            if (arity >= 0 and n != arity) or (arity < 0 and n < -arity):
                batch.append(Item(reply=_refused(c, name, errors.wrong_arity(lname)), name=lname, rejected=True))
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
        await self._drive(c, iter(Flow(items, c.proto, c.send, self.stats)))

    async def _drive(self, c, steps):
        """Drive a client's Flow (xstream_cli.server.flow): its jobs to the
        engine, its blocked reads' waits to the blocking pool."""
        try:
            step = next(steps)
            while True:
                what, arg = step
                if what is RUN:
                    out = await self._run(arg, owner=c.id, proto=c.proto)
                else:
                    out = await self._block(c, *arg[1:])
                    if c.closing:
                        out = GONE
                step = steps.send(out)
        except StopIteration:
            pass

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
        """The jobs of this loop iteration, as one group commit, where
        Engine.run says: here, in the loop's thread, and answered at once
        (no thread hand-off: redis-server's way, its fsync in its loop
        too), or handed to the engine thread, which waits for the store's
        write lock while the loop goes on reading, parsing and serving
        reads, or to the readers' thread (big reads)."""
        box = self._outbox
        if not box:
            return
        self._outbox = []
        ran = self.engine.run(box)
        if ran:
            answer([(j.done, r) for j, r in ran])

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


_QUEUED = encode(Status("QUEUED"))


def _refused(c, name, err):
    """The reply of a command refused before it runs (``err``: a wrong
    arity, NOAUTH), as Redis's rejectCommand (server.c) answers it: inside
    MULTI it makes EXEC abort (flagTransaction: ``MULTI x``, ``WATCH``,
    ``DISCARD x`` too, which are never queued); refusing EXEC discards
    the client's transaction and its WATCHes, and says so
    (execCommandAbort, multi.c): EXECABORT, and the error after
    "because of: ", without its ERR."""
    if name != b"EXEC":
        if c.multi is not None:
            c.multi_error = True
        return err
    c.multi = None
    c.multi_error = False
    c.watched = None
    text = str(err)
    return RedisError("EXECABORT Transaction discarded because of: " + (text[4:] if text.startswith("ERR ") else text))


def _stat_name(argv):
    """The commandstats name of a server command: ``client|id`` for the
    subcommands of CLIENT, CONFIG and COMMAND, as Redis names them."""
    name = argv[0].decode("latin-1").lower()
    if name in ("client", "config", "command") and len(argv) > 1:
        return name + "|" + argv[1].decode("latin-1").lower()
    return name
