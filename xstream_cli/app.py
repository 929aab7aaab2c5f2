"""The click application: global options, help, version, the
interactive prompt, porcelain commands, and the Redis commands as click
commands (so that ``CliRunner`` drives exactly what users run).

``__main__`` handles the fast paths itself and comes here for the rest.
The global options are xstream_cli.context's; ``ctx.obj`` is its
``Globals``.
"""
import os
import sys

import click

from xstream_cli import __version__, context
from xstream_cli.commands import COMMANDS, SUBCOMMANDS, is_command
from xstream_cli.porcelain import ROOT_SETTINGS, register_all


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
    def run(g, args):
        from xstream_cli.runner import run_one
        sys.exit(run_one(g, [os.fsencode(name)] + [os.fsencode(a) for a in args]))
    return run


def _mode_options(f):
    for mode, flag, text in reversed(context.MODES):
        f = click.option(flag, "mode_" + mode, is_flag=True, help=text)(f)
    return f


@click.group(cls=XsGroup, invoke_without_command=True,
             context_settings=ROOT_SETTINGS,
             epilog="\b\nAs redis-cli, before a Redis command:\n"
                    "  -r N     run it N times (-1: until Ctrl-C)\n"
                    "  -i SEC   wait SEC seconds between runs (e.g. 0.5)\n"
                    "  -x       read its last argument from stdin (any size, any bytes)\n"
                    "  xs -r 5 -i 1 XLEN events\n"
                    "  xs -x XADD events '*' payload < payload.json")
@click.option("--db", metavar="PATH", help=context.DB_HELP)
@_mode_options
@click.option("--no-sync", is_flag=True, help=context.NO_SYNC_HELP)
@click.version_option(__version__, "--version", prog_name="xs")
@click.pass_context
def cli(ctx, db, no_sync, **modes):
    """xs: Redis Streams in a file.  A durable, file-backed event log with
    the semantics of Redis 8.10 streams, stored in LMDB; no server.

    \b
      xs XADD events '*' user alice action login
      xs XRANGE events - +
      printf 'XADD s * a 1\\nXLEN s\\n' | xs        (script mode)
      xs                                            (interactive, on a terminal)
    """
    mode = None
    for m, _, _ in context.MODES:
        if modes.get("mode_" + m):
            mode = m
    g = context.Globals(db, mode, not no_sync)
    try:
        context.from_environment(g)
    except context.UsageError as e:
        raise click.UsageError(str(e))
    ctx.obj = g
    if ctx.invoked_subcommand is None:
        if sys.stdin.isatty():
            interactive(g)
        else:
            from xstream_cli.runner import run_script
            sys.exit(run_script(g))


def interactive(g):
    """The interactive prompt (xstream_cli.prompt: prompt_toolkit when it
    can start, else a plain input() loop)."""
    from xstream_cli.prompt import run
    run(g)



register_all(cli)


def run_click(args):
    from storage.store import StoreError
    from storage.txn import StoreFailure
    try:
        return cli.main(args, prog_name="xs", standalone_mode=True)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except (StoreFailure, StoreError) as e:
        # the store failed under a porcelain command (a full disk while
        # tail acks, a link planted while it waits): one line, never a traceback
        try:
            context.fail(str(e))
        except SystemExit as x:
            return x.code
