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

MAX_NAMES = 10000       # a completion menu longer than this helps nobody


def _names(db, what, arg):
    """The names to print (bytes), or [] on any problem."""
    from storage import codec
    from storage.store import Store
    from xstream_cli.session import default_db
    store = Store(db or default_db(), readonly=True, create=False)
    try:
        # Store(readonly=True) opens its database handles inside a read
        # transaction, and LMDB drops handles opened in a read-only
        # transaction when it ends: reopen them outside one (no-op once
        # storage/store.py does this itself).
        store.dbs = {n: store.env.open_db(n, create=False) for n in codec.DATABASES}
        def run(tx):
            if what == "keys":
                prefix = arg or b""
                return [n for n in tx.keys(b"*") if n.startswith(prefix)][:MAX_NAMES]
            if what == "groups" and arg is not None:
                m = tx.meta(arg)
                return [] if m is None else [g.name for g in tx.group_list(m)][:MAX_NAMES]
            return []
        with store.read() as tx:
            return run(tx)
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
        db = (obj or {}).get("db") or os.environ.get("XS_DB") or None
        names = _names(db, what, os.fsencode(arg) if arg is not None else None)
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
