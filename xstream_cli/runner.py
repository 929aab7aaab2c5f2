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
    if bad is None and cmd.blocking and not cmd.write and args[0].block is not None \
            and not context.store_exists(g):
        gc_resume()                         # before a wait that may be long
        try:
            args = _await_store(g, args)    # XREAD BLOCK before the first write: wait for the store
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED
        if args is None:                    # BLOCK's time passed first: the timeout's nil reply
            from xstream_cli.execution.session import Session
            Session(context.db_path(g), mode).output(None, argv=argv)
            return EXIT_OK
    if bad is None:
        from xstream_cli.execution.session import open_session
        s = open_session(g, mode, write=opens_for_writing(cmd, args), create=cmd.write)
    gc_resume()
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
        except MemoryError:
            # while writing a streamed reply, after its commit
            context.fail("out of memory while writing the reply (a change the command made is committed: "
                         "XREADGROUP's entries are pending; read them again with ID 0)")
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
            except MemoryError:
                context.fail("out of memory while writing the reply (a change the command made is "
                             "committed; ask for less: COUNT)")
        repeat -= 1
        if repeat == 0:
            return status
        if g.interval:
            try:
                time.sleep(g.interval)
            except KeyboardInterrupt:
                return EXIT_INTERRUPTED


def gc_resume():
    """Resume the cyclic garbage collector, which ``xs`` pauses while it
    starts (xstream_cli.__main__.entry): the imports allocate enough to
    run it a score of times for nothing (about 1 ms of a one-shot
    command).  Called before a command runs (its objects are collected as
    in any Python program) and by every other way xs runs."""
    import gc
    gc.enable()


def die_of_sigint():
    """End this process as one killed by SIGINT, as CPython itself does
    after an unhandled KeyboardInterrupt: output flushed, exit handlers
    run, SIGINT's default disposition restored and the signal sent to
    ourselves.  A shell then sees what Ctrl-C means (status 130, its
    prompt on a line of its own rather than after the ``^C``, a script's
    loop stopped), which exit(130) does not tell it.  Returns only if
    the signal could not end the process (then the caller exits 130)."""
    import atexit
    import os
    import signal
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass
    try:
        atexit._run_exitfuncs()
    except Exception:                       # an exit handler never keeps us alive
        pass
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGINT])
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)                       # delivered at once; never reached in practice
    except (OSError, ValueError):           # not the main thread, or no such signal
        pass


def _await_store(g, args):
    """XREAD ... BLOCK on a store that does not exist yet: wait for it
    (context.wait_for_store), within BLOCK's time.  Every entry is new to
    a reader that started before the store existed, so ``$`` becomes
    ``0-0``; what is left of BLOCK's time is the read's.  None when the
    time passed first."""
    import time
    opts = args[0]
    t0 = time.monotonic()
    if not context.wait_for_store(g, opts.block):
        return None
    block = opts.block
    if block:
        block = max(1, block - int((time.monotonic() - t0) * 1000))
    ids = tuple((0, 0) if i == b"$" else i for i in opts.ids)
    return (opts.replace(ids=ids, block=block),) + tuple(args[1:])


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
    """The line(s) a person at a terminal sees after error ``text``."""
    lines = [h for h in (_error_hint(text, argv), _global_option_hint(argv)) if h]
    return "\n".join(lines) or None


def _error_hint(text, argv):
    """The closest command name, the command's usage line, or for a
    common Redis command of another type (SET, HSET ...) that xs holds
    streams only."""
    from xstream_cli import help
    name = argv[0].decode("utf-8", "replace")
    if text.startswith("ERR unknown command ") or text.startswith("ERR unknown subcommand "):
        if text.startswith("ERR unknown command "):
            what = name
            kind = help.other_type(name)
            if kind:
                return ("(xs holds streams only: %s is a command of Redis %s; xs help lists xs's commands)"
                        % (name.upper(), kind))
        else:
            what = "%s %s" % (name, argv[1].decode("utf-8", "replace"))
        s = help.suggest(what)
        return "(did you mean %s?)" % s if s else None
    if text.startswith("ERR wrong number of arguments") or text == "ERR syntax error":
        words = name
        if len(argv) > 1 and help.usage_line("%s %s" % (name, argv[1].decode("utf-8", "replace"))):
            words = "%s %s" % (name, argv[1].decode("utf-8", "replace"))
        return help.usage_line(words)
    return None


def _global_option_hint(argv):
    """After a failed command with a global option of xs among its
    arguments (xs XLEN s --db x.xs): where that option goes."""
    import shlex
    words = [a.decode("utf-8", "surrogateescape") for a in argv]
    flags = set(context.MODE_OF_FLAG) | {"--no-sync"}
    moved, rest = [], [words[0]]
    i = 1
    while i < len(words):
        w = words[i]
        if w == "--db" and i + 1 < len(words):
            moved += words[i:i + 2]
            i += 2
            continue
        if w.startswith("--db") or w in flags:
            moved.append(w)
        else:
            rest.append(w)
        i += 1
    if not moved:
        return None
    return "(%s is a global option of xs: it goes before the command, as in xs %s)" % (
        moved[0], " ".join(shlex.quote(w) for w in moved + rest))


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
