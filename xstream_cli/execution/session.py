"""Running commands against a store: one command, or a script on stdin,
and waiting for blocked reads.

A command is parsed before any transaction starts (parsers never touch
the store), then run in one: in single-command mode its own transaction
(an error aborts it), in script mode the batch's, where every write
verb has a savepoint of its own (storage.txn): a failing command
changes nothing, the others of the batch still commit.

Here: the Session (a store plus an output mode) and single-command
mode.  Script mode is xstream_cli.execution.script, and a big read
written as it is read xstream_cli.execution.streamed: each imported
when it is used, so that a one-shot command loads neither.

Blocking (XREAD / XREADGROUP ... BLOCK) is this module's business, not
the commands': a blocking command that returns a null reply is retried
here whenever one of its streams changes (storage.blocking), until it
serves something or its timeout passes.
"""
from storage import errors
from storage.errors import RedisError
from xstream_cli.commands import lookup
from xstream_cli.execution import run_command
from xstream_cli.output.render import RENDERERS

_STREAMED = frozenset(("xrange", "xrevrange", "xread", "xreadgroup"))     # xstream_cli.execution.streamed


class Session:
    """A store plus an output mode."""

    def __init__(self, db, mode="raw", durable=True, opener=None):
        self.db = db
        self.mode = mode
        self.durable = durable
        self._store = None
        # opener(write) -> Store: how a store missing when the session
        # began is opened by its first command (a write makes it, a read
        # raises StoreError); None: made at first use
        self._opener = opener
        if mode == "pretty":
            from xstream_cli.output.pretty import render_pretty
            self.render = render_pretty
        else:
            self.render = RENDERERS[mode]
        self.by_command = mode == "jsonl"     # its renderer takes the command too
        self.failed = False
        self.name_lines = False      # script mode from a file or pipe: errors named by line on stderr
        self.lines_done = 0          # script lines before the block being run
        self.quit = False            # a script's "quit" / "exit" line was met
        self._repeat = None          # (line index, argv, times left) of a repeated line cut by a block

    def message(self, text):
        """A redis-cli message that is not a reply ("Invalid argument(s)"):
        plain text, or in --json an error document like any other."""
        if self.mode in ("json", "jsonl"):
            import json
            return (json.dumps({"error": text}) + "\n").encode()
        return text.encode() + b"\n"

    def output(self, reply, out=None, argv=None):
        """Write one reply to ``out`` (default stdout) and flush.  Pretty
        output streams (entries are formatted and flushed in chunks, see
        pretty.py); the other modes write ``render``'s bytes.  A reader
        that went away ends the process quietly; Ctrl-C propagates.
        ``argv``: the command (--jsonl names an XRANGE's stream by it)."""
        from xstream_cli import context
        if out is None:
            import sys
            out = sys.stdout.buffer
        try:
            if self.mode == "pretty":
                from xstream_cli.output.pretty import write_pretty
                write_pretty(reply, out)
            else:
                out.write(self.render(reply, argv) if self.by_command else self.render(reply))
                out.flush()
        except BrokenPipeError:
            context.quiet_exit()

    @property
    def store(self):
        if self._store is None:
            self.open_for(True)
        return self._store

    @property
    def opened(self):
        return self._store is not None

    def open_for(self, write):
        """Open the store, if not yet open, for a command that does
        (``write``) or does not write: only a write creates it."""
        if self._store is None:
            if self._opener is not None:
                self._store = self._opener(write)
            else:
                from xstream_cli.context import store_at
                self._store = store_at(self.db, self.durable)

    @store.setter
    def store(self, store):
        self._store = store

    # ------------------------------------------------------------ one command

    def execute(self, argv, cmd=None, args=None):
        """Run one command (argv: list of bytes; ``cmd``: its Command and
        ``args`` its parsed arguments, when the caller has them already)
        in its own transaction; returns the reply value (a RedisError for
        an error reply)."""
        try:
            if cmd is None:
                cmd = lookup(argv)
            if args is None:
                args = cmd.parse(argv)
            self.open_for(cmd.write)
            if cmd.write and self.store.readonly:
                raise errors.read_only(self.store.why_read_only or "it is open read-only")
        except RedisError as e:
            return e
        try:
            args, r = self.store.run(lambda tx: run_command(tx, cmd, args), write=cmd.write)
        except RedisError as e:
            return e
        except Exception as e:
            from xstream_cli.execution.batch import FATAL  # on this path only: a one-shot command never loads batch
            if isinstance(e, FATAL):
                raise
            return errors.internal(e)      # a bug: the transaction was aborted
        if r is None and cmd.blocking:
            from xstream_cli.execution.blocked import waits
            w = waits(cmd, args)
            if w is not None:
                return self.block(cmd, args, w)
        return r

    def stream_range(self, cmd, args, out):
        """A long XRANGE / XREVRANGE / XREAD / XREADGROUP reply (``cmd``
        and its parsed ``args``) read and written page by page to
        ``out`` (xstream_cli.execution.streamed.stream_range); False
        (nothing done) for any other command, and for a read the usual
        path answers."""
        if cmd.name not in _STREAMED:
            return False
        from xstream_cli.execution.streamed import stream_range
        return stream_range(self, cmd, args, out)

    def block(self, cmd, args, w):
        """Wait for a blocked read to be served or to time out
        (xstream_cli.execution.blocked: storage.blocking's one wait loop)."""
        from xstream_cli.execution import blocked
        return blocked.serve(self.store, cmd, args, w)

    # ------------------------------------------------------------ script mode

    def run_script(self, fd, out):
        """Script mode (xstream_cli.execution.script.run_script): run the
        commands read from file descriptor ``fd`` until EOF (or a
        ``quit`` / ``exit`` line), writing replies to the binary stream
        ``out``.  Returns the exit status."""
        from xstream_cli.execution.script import run_script
        return run_script(self, fd, out)


def open_session(g, mode, write=True, create=None):
    """A Session (storage + output mode) on the store ``g`` names, opened
    now so that a bad store fails before any input is read (exit 1).

    ``write``: the command may write (else the store is opened read-only
    if it can be: see context.try_open).  ``create``: make a missing
    store (True), fail on one (False), or, for a script or the prompt
    (None), leave it to the first command: a write makes it, a read
    fails with "no such store"."""
    from storage.store import NoSuchStore, StoreError
    from xstream_cli import context
    s = Session(context.db_path(g), mode, g.durable)
    try:
        s.store = context.try_open(g, write, create is not None and create)
    except NoSuchStore as e:
        if create is not None:
            context.fail(str(e))
        s._opener = lambda w: context.try_open(g, True, w)
    except StoreError as e:
        context.fail(str(e))
    return s
