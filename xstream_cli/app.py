"""The click application: global options, help, version, the
interactive prompt, and the Redis commands as click commands (so that
``CliRunner`` drives exactly what users run).

``__main__`` handles the fast paths itself and comes here for the rest.
"""
import os
import sys

import click

from xstream_cli import __version__
from xstream_cli.commands import COMMANDS, SUBCOMMANDS, is_command

MODE_FLAGS = [("json", "--json", "JSON lines, RESP3-shaped (one document per reply)."),
              ("raw", "--raw", "Exactly as redis-cli --raw (default when not a terminal)."),
              ("noraw", "--no-raw", "Exactly as redis-cli --no-raw."),
              ("pretty", "--pretty", "Readable tables and colours (default on a terminal).")]


class XsGroup(click.Group):
    """A group whose commands are the Redis commands (case-insensitive,
    taking Redis's arguments verbatim) plus porcelain commands."""

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        if is_command(name):
            return redis_command(name.upper())
        return None

    def list_commands(self, ctx):
        return sorted(super().list_commands(ctx))

    def format_commands(self, ctx, formatter):
        super().format_commands(ctx, formatter)
        names = sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS))
        with formatter.section("Redis commands (case-insensitive, Redis's own arguments)"):
            formatter.write_text(" ".join(names))


def redis_command(name):
    @click.command(name=name, add_help_option=False,
                   context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    @click.pass_obj
    def run(obj, args):
        from xstream_cli.__main__ import run_one
        code = run_one(obj, [os.fsencode(name)] + [os.fsencode(a) for a in args])
        sys.exit(code)
    return run


def _set_mode(ctx, param, value):
    if value:
        ctx.ensure_object(dict)["mode"] = param.name
    return value


@click.group(cls=XsGroup, invoke_without_command=True,
             context_settings={"help_option_names": ["-h", "--help"], "allow_interspersed_args": False})
@click.option("--db", envvar="XS_DB", metavar="PATH",
              help="Store directory (env XS_DB; default $XDG_DATA_HOME/xstream or ~/.local/share/xstream).")
@click.option("--json", "json_", is_flag=True, help=MODE_FLAGS[0][2])
@click.option("--raw", is_flag=True, help=MODE_FLAGS[1][2])
@click.option("--no-raw", "noraw", is_flag=True, help=MODE_FLAGS[2][2])
@click.option("--pretty", is_flag=True, help=MODE_FLAGS[3][2])
@click.option("--no-sync", is_flag=True, envvar="XS_NO_SYNC",
              help="Do not fsync on commit: faster, but a machine crash may lose the last "
                   "commits (never corrupts the store).")
@click.version_option(__version__, "--version", prog_name="xs")
@click.pass_context
def cli(ctx, db, json_, raw, noraw, pretty, no_sync):
    """xs: Redis Streams in a file.  A durable, file-backed event log with
    the semantics of Redis 8.10 streams, stored in LMDB; no server.

    \b
      xs XADD events '*' user alice action login
      xs XRANGE events - +
      printf 'XADD s * a 1\\nXLEN s\\n' | xs        (script mode)
      xs                                            (interactive, on a terminal)
    """
    mode = None
    for flag, value in (("json", json_), ("raw", raw), ("noraw", noraw), ("pretty", pretty)):
        if value:
            mode = flag
    ctx.obj = {"db": db, "mode": mode, "durable": not no_sync}
    if ctx.invoked_subcommand is None:
        if sys.stdin.isatty():
            interactive(ctx.obj)
        else:
            from xstream_cli.__main__ import run_script
            sys.exit(run_script(ctx.obj))


def interactive(obj):
    """A redis-cli-like prompt."""
    from xstream_cli.__main__ import _open, resolve_mode
    from xstream_cli.splitargs import SplitError, split_line
    s = _open(obj, resolve_mode(obj["mode"]))
    try:
        import readline  # noqa: F401  (line editing and history)
    except ImportError:
        pass
    prompt = "xs %s> " % os.path.basename(os.path.abspath(s.db))
    while True:
        try:
            line = input(prompt)
        except (EOFError, KeyboardInterrupt):
            sys.stdout.write("\n")
            return
        try:
            argv = split_line(os.fsencode(line))
        except SplitError:
            print("Invalid argument(s)")
            continue
        if not argv:
            continue
        if argv[0].lower() in (b"quit", b"exit"):
            return
        try:
            r = s.execute(argv)
        except KeyboardInterrupt:
            print()
            continue
        sys.stdout.buffer.write(s.render(r))
        sys.stdout.flush()


from xstream_cli.porcelain import register_all  # noqa: E402

register_all(cli)


def run_click(args):
    try:
        return cli.main(args, prog_name="xs", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
