"""The two modes that need no click: one Redis command, and a script on
stdin.  Used by the fast path (__main__) and by the click application
alike, so both behave the same.
"""
import sys

from xstream_cli import context
from xstream_cli.context import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK


def run_one(g, argv):
    """Single-command mode: the reply on stdout; an error on stderr, exit
    status 1.  ``argv``: the command as bytes."""
    from storage.errors import RedisError
    from storage.txn import StoreFailure
    mode = context.resolve_mode(g.mode)
    s = context.open_session(g, mode, reads_only=_reads_only(argv))
    try:
        r = s.execute(argv)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except StoreFailure as e:
        context.fail(str(e))
    if isinstance(r, RedisError):
        if mode == "json":
            out = s.render(r)
        elif mode == "raw":
            out = r.text.encode("utf-8", "surrogateescape") + b"\n"
        else:
            out = b"(error) " + r.text.encode("utf-8", "surrogateescape") + b"\n"
        sys.stderr.buffer.write(out)
        sys.stderr.buffer.flush()
        return EXIT_ERROR
    context.write_out(s.render(r))
    return EXIT_OK


def run_script(g):
    """Script mode: one command per line on stdin."""
    from storage.txn import StoreFailure
    s = context.open_session(g, context.resolve_mode(g.mode))
    try:
        return s.run_script(0, sys.stdout.buffer)
    except BrokenPipeError:
        context.quiet_exit()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except StoreFailure as e:
        context.fail(str(e))


def _reads_only(argv):
    """True for a known command that never writes and never waits (XLEN,
    XRANGE, XINFO, XREAD without BLOCK, ...): it can run on a read-only
    open of the store.  A blocking read opens the store for writing: it
    makes and watches the store's notification files."""
    from storage.errors import RedisError
    from xstream_cli.commands import lookup
    try:
        cmd = lookup(argv)
        if cmd.write:
            return False
        return not cmd.blocking or cmd.parse(argv)[0].block is None
    except RedisError:
        return False
