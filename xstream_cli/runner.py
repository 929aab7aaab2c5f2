"""The two modes that need no click: one Redis command, and a script on
stdin.  Used by the fast path (__main__) and by the click application
alike, so both behave the same.
"""
import sys
import time

from xstream_cli import context
from xstream_cli.context import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK


def run_one(g, argv):
    """Single-command mode: the reply on stdout; an error on stderr, exit
    status 1.  ``argv``: the command as bytes.

    ``XADD --help`` (the only argument after the command) prints the
    command's help; so does ``-h`` where a lone argument is a wrong
    arity anyway.  An unknown command, subcommand or a wrong arity is
    answered before the store is opened, with Redis's error text and
    exit status 1; so is any other error the parser finds (a bad ID, a
    bad option): a wrong command never makes nor touches a store.  On a
    terminal a usage line or a "did you mean" follows it on stderr.
    ``-r N`` / ``-i SEC`` (g.repeat, g.interval) run the command N times
    on one open store; the status is 1 if any failed."""
    from storage.errors import RedisError
    from storage.txn import StoreFailure
    from xstream_cli.commands import help_request, lookup, opens_for_writing
    h = help_request(argv)
    if h is not None:
        from xstream_cli.help import command_help
        context.write_out(command_help(h).encode())
        return EXIT_OK
    mode = context.resolve_mode(g.mode)
    try:
        cmd = lookup(argv)
    except RedisError as e:
        _error(mode, e, argv)
        return EXIT_ERROR
    try:
        args = cmd.parse(argv)          # parsed once, before the store is opened: a bad command touches nothing
        bad = None
    except RedisError as e:
        bad = e                         # answered as often as -r asks, as redis-cli does, with no store opened
    if bad is None:
        from xstream_cli.execution.session import open_session
        s = open_session(g, mode, write=opens_for_writing(cmd, args), create=cmd.write)
    repeat = g.repeat or 1
    status = EXIT_OK
    while True:
        try:
            if bad is not None:
                streamed, r = False, bad
            else:
                streamed = s.stream_range(cmd, args, sys.stdout.buffer)   # a long range, written as it is read
                if not streamed:
                    r = s.execute(list(argv), cmd, args)
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        except StoreFailure as e:
            context.fail(str(e))
        except BrokenPipeError:
            context.quiet_exit()
        if streamed:
            pass
        elif isinstance(r, RedisError):
            _error(mode, r, argv, None if bad is not None else s.render)
            status = EXIT_ERROR
        else:
            try:
                s.output(r, argv=argv)          # pretty output streams; Ctrl-C during it: 130, no traceback
            except KeyboardInterrupt:
                return EXIT_INTERRUPTED
        repeat -= 1
        if repeat == 0:
            return status
        if g.interval:
            try:
                time.sleep(g.interval)
            except KeyboardInterrupt:
                return EXIT_INTERRUPTED


def _error(mode, e, argv, render=None):
    """Write Redis error ``e`` on stderr as the mode shows errors; on a
    terminal, add a usage line (wrong arity, syntax error) or the
    closest command name (unknown command)."""
    if mode in ("json", "jsonl"):
        if render is None:
            from xstream_cli.output.render import RENDERERS
            render = RENDERERS["json"]
        out = render(e)
    elif mode == "raw":
        out = e.text.encode("utf-8", "surrogateescape") + b"\n"
    else:
        out = b"(error) " + e.text.encode("utf-8", "surrogateescape") + b"\n"
    try:
        if _isatty(sys.stderr):
            hint = _hint(e.text, argv)
            if hint:
                out += hint.encode("utf-8", "replace") + b"\n"
        sys.stderr.buffer.write(out)
        sys.stderr.buffer.flush()
    except (OSError, ValueError):
        pass


def _hint(text, argv):
    """The line a person at a terminal sees after error ``text``."""
    from xstream_cli import help
    name = argv[0].decode("utf-8", "replace")
    if text.startswith("ERR unknown command ") or text.startswith("ERR unknown subcommand "):
        what = name if text.startswith("ERR unknown command ") else \
            "%s %s" % (name, argv[1].decode("utf-8", "replace"))
        s = help.suggest(what)
        return "(did you mean %s?)" % s if s else None
    if text.startswith("ERR wrong number of arguments") or text == "ERR syntax error":
        words = name
        if len(argv) > 1 and help.usage_line("%s %s" % (name, argv[1].decode("utf-8", "replace"))):
            words = "%s %s" % (name, argv[1].decode("utf-8", "replace"))
        return help.usage_line(words)
    return None


def _isatty(stream):
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def run_script(g):
    """Script mode: one command per line on stdin."""
    from storage.store import StoreError
    from storage.txn import StoreFailure
    from xstream_cli.execution.session import open_session
    s = open_session(g, context.resolve_mode(g.mode))
    s.name_lines = True          # stdin is a file or a pipe: a failing line is named on stderr
    try:
        return s.run_script(0, sys.stdout.buffer)
    except BrokenPipeError:
        context.quiet_exit()
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (StoreFailure, StoreError) as e:
        context.fail(str(e))
