"""``xs _complete``: names for the shell completion scripts (hidden).

    xs [--db PATH] _complete keys [PREFIX]      stream names, one a line
    xs [--db PATH] _complete groups STREAM      group names of STREAM

The store is opened read-only (never created, never written), and any
error at all -- no store, a bad path, not an xs store, a bad argument --
prints nothing and exits 0: a completion must never spoil the shell
line with an error message.  Names are written as raw bytes.
"""
import os
import sys

import click

from xstream_cli import context

MAX_NAMES = 10000       # a completion menu longer than this helps nobody


def _names(g, what, arg):
    """The names to print (bytes), or [] on any problem."""
    store = context.store_at(context.db_path(g), readonly=True, create=False)
    try:
        with store.read() as tx:
            if what == "keys":
                prefix = arg or b""
                return [n for n in tx.stream_names() if n.startswith(prefix)][:MAX_NAMES]
            if what == "groups" and arg is not None:
                return tx.group_names(arg)[:MAX_NAMES]
            return []
    finally:
        store.close()


@click.command(name="_complete", hidden=True, add_help_option=False,
               context_settings={"ignore_unknown_options": True})
@click.argument("what", required=False)
@click.argument("arg", required=False)
@click.argument("rest", nargs=-1, type=click.UNPROCESSED)
@click.pass_obj
def complete(obj, what, arg, rest):
    """Stream or group names for shell completion (used by completions/)."""
    try:
        names = _names(obj or context.Globals(), what, os.fsencode(arg) if arg is not None else None)
        out = sys.stdout.buffer
        for n in names:
            if b"\n" not in n:
                out.write(n + b"\n")
        out.flush()
    except BaseException:       # noqa: BLE001  (silence is the contract)
        pass
    sys.exit(0)


def register(cli):
    cli.add_command(complete)
