"""Entry point of ``xs`` (and ``python -m xstream_cli``).

The common paths -- one Redis command, or a script on stdin -- are
dispatched here without importing click or rich: a one-shot ``xs XLEN s``
costs little more than starting Python and importing lmdb and msgpack.
Everything else (porcelain commands, --help, --version, the interactive
prompt, usage errors) goes to the click application in ``app.py``.
"""
import os
import sys

GLOBAL_MODES = {"--json": "json", "--raw": "raw", "--no-raw": "noraw", "--pretty": "pretty"}


def parse_globals(args):
    """Global options before the command.  Returns (options, rest) or
    None when click should handle the command line."""
    opts = {"db": None, "mode": None, "durable": True}
    i = 0
    n = len(args)
    while i < n:
        a = args[i]
        if a == "--db":
            if i + 1 >= n:
                return None
            opts["db"] = args[i + 1]
            i += 2
        elif a.startswith("--db="):
            opts["db"] = a[5:]
            i += 1
        elif a in GLOBAL_MODES:
            opts["mode"] = GLOBAL_MODES[a]
            i += 1
        elif a == "--no-sync":
            opts["durable"] = False
            i += 1
        elif a.startswith("-"):
            return None
        else:
            break
    return opts, args[i:]


def resolve_mode(mode, stream=None):
    """Default output: pretty on a terminal, raw otherwise."""
    if mode:
        return mode
    stream = stream or sys.stdout
    try:
        return "pretty" if stream.isatty() else "raw"
    except (AttributeError, ValueError):
        return "raw"


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    parsed = parse_globals(args)
    if parsed is not None:
        opts, rest = parsed
        if os.environ.get("XS_NO_SYNC") == "1":
            opts["durable"] = False
        from xstream_cli.commands import is_command
        if rest and is_command(rest[0]):
            return run_one(opts, [os.fsencode(a) for a in rest])
        if not rest and not _isatty(0):
            return run_script(opts)
    from xstream_cli.app import run_click
    return run_click(args)


def _isatty(fd):
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _open(opts, mode):
    from storage.store import StoreError
    from xstream_cli.session import Session
    try:
        s = Session(opts["db"], mode, opts["durable"])
        s.store
        return s
    except StoreError as e:
        sys.stderr.write("xs: %s\n" % e)
        sys.exit(1)


def run_one(opts, argv):
    """Single-command mode: reply on stdout, error on stderr (exit 1)."""
    from storage.errors import RedisError
    from xstream_cli.session import write_out
    mode = resolve_mode(opts["mode"])
    s = _open(opts, mode)
    try:
        r = s.execute(argv)
    except KeyboardInterrupt:
        return 130
    if isinstance(r, RedisError):
        if mode == "json":
            sys.stderr.buffer.write(s.render(r))
        elif mode == "raw":
            sys.stderr.buffer.write(r.text.encode("utf-8", "surrogateescape") + b"\n")
        else:
            sys.stderr.buffer.write(b"(error) " + r.text.encode("utf-8", "surrogateescape") + b"\n")
        return 1
    write_out(s.render(r))
    return 0


def run_script(opts):
    """Script mode: one command per line on stdin."""
    from xstream_cli.session import _quiet_exit
    s = _open(opts, resolve_mode(opts["mode"]))
    try:
        return s.run_script(0, sys.stdout.buffer)
    except BrokenPipeError:
        _quiet_exit()
    except KeyboardInterrupt:
        return 130


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
