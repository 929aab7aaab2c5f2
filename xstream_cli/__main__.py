"""Entry point of ``xs`` (and ``python -m xstream_cli``).

The common paths -- one Redis command, or a script on stdin -- are
dispatched here without importing click or rich: a one-shot ``xs XLEN s``
costs little more than starting Python and importing lmdb and msgpack.
Everything else (porcelain commands, --help, --version, the interactive
prompt, usage errors) goes to the click application in ``app.py``.
"""
import gc
import os
import sys


def main(argv=None):
    from xstream_cli import context
    args = sys.argv[1:] if argv is None else argv
    try:
        parsed = context.parse_globals(args)
        if parsed is not None:
            context.from_environment(parsed[0])
    except context.UsageError as e:
        context.fail(str(e), context.EXIT_USAGE)
    if parsed is not None:
        g, rest = parsed
        from xstream_cli.commands import is_command
        if g.stdin_arg:
            if not rest or not is_command(rest[0]):
                context.fail("-x reads the last argument of a Redis command from stdin "
                             "(cat payload.json | xs -x XADD events '*' payload)", context.EXIT_USAGE)
            rest = rest + [sys.stdin.buffer.read()]
        from xstream_cli.commands import porcelain_use
        if rest and is_command(rest[0]) and (g.stdin_arg or not porcelain_use(rest)):
            from xstream_cli.runner import run_one
            return run_one(g, [a if isinstance(a, bytes) else os.fsencode(a) for a in rest])
        if g.repeat is not None or g.interval:
            context.fail("-r and -i repeat one Redis command (xs -r 3 -i 0.5 XLEN s)", context.EXIT_USAGE)
        if rest and not rest[0].startswith("-") and not _porcelain(rest[0]):
            # neither a Redis nor a porcelain command: Redis's own error,
            # exit 1 like a wrong arity (not click's usage error, exit 2)
            from xstream_cli.runner import run_one
            return run_one(g, [os.fsencode(a) for a in rest])
        if not rest and not _isatty(0):
            gc.enable()
            from xstream_cli.runner import run_script
            return run_script(g)
    gc.enable()
    from xstream_cli.app import run_click
    return run_click(args)


def _porcelain(name):
    """True if ``name`` is a porcelain (click) command; imports click,
    which this path needs next anyway."""
    from xstream_cli.app import cli
    return name in cli.commands


def _isatty(fd):
    try:
        return os.isatty(fd)
    except OSError:
        return False


def entry():
    # No cyclic collection while xs starts: its imports allocate enough to
    # run the collector a score of times, finding nothing (about 1 ms of
    # a one-shot command).  Resumed before a command runs (runner.run_one)
    # and before any other mode (main).
    gc.disable()
    try:
        code = main()
    except KeyboardInterrupt:
        # Ctrl-C before a command got going (while Python imports what it
        # needs): nothing was written.  Commands that run long say more.
        try:
            sys.stderr.write("\nxs: interrupted\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        code = 130
    if code == 130:                     # Ctrl-C (context.EXIT_INTERRUPTED): end as killed by SIGINT
        from xstream_cli.runner import die_of_sigint
        die_of_sigint()
    _exit(code)


def _exit(code):
    """``sys.exit(code)``, but after a command of the fast path (click
    never imported, no thread but this one) without the interpreter's
    teardown: every module's namespace cleared and its objects freed one
    by one, for a process about to end -- 5-10 ms of a one-shot ``xs
    XLEN`` (about a tenth).  What an exit must still do is done first,
    in the interpreter's order: exit handlers, then stdout and stderr
    flushed.  The store is closed already (the session that opened it
    is gone when the command returns, and with it the environment).  A
    flush that fails (a closed pipe) takes the ordinary exit, which
    reports it as Python does."""
    if type(code) is int and "click" not in sys.modules:
        threading = sys.modules.get("threading")
        if threading is None or threading.active_count() == 1:
            atexit = sys.modules.get("atexit")     # not imported: no exit handler was registered
            if atexit is not None:
                atexit._run_exitfuncs()
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):
                pass
            else:
                os._exit(code)
    gc.enable()
    sys.exit(code)


if __name__ == "__main__":
    entry()
