"""Redis commands as typed, for the command-line tier: ``cmd`` runs one
through the command table's parser and run function on a store in this
process (as single-command mode does), ``xs`` runs the real ``xs`` with
``--json``.  The engine tier never uses these: it calls ``Txn``."""
import os
import subprocess

from storage.errors import RedisError
from tests.conftest import XS
from xstream_cli.commands import lookup
from xstream_cli.output.render import to_jsonable


def _b(a):
    if isinstance(a, bytes):
        return a
    return str(a).encode()


def run_reply(store, *args):
    """Run one command in its own transaction (as single-command mode
    does: an error aborts it): its reply value, or the RedisError."""
    argv = [_b(a) for a in args]
    try:
        c = lookup(argv)
        parsed = c.parse(argv)

        def run(tx):
            a = c.prepare(tx, *parsed) if c.prepare is not None else parsed
            return c.run(tx, *a)
        return store.run(run, write=True)
    except RedisError as e:
        return e


def cmd(store, *args):
    """``run_reply`` in JSON shape, errors as {"error": text}."""
    return to_jsonable(run_reply(store, *args))


def xs_on_path(tmp_path, db):
    """An environment where ``xs`` (this checkout's, as a script in
    ``tmp_path/bin``) is on PATH and XS_DB is ``db``: documented command
    lines run as written."""
    import sys

    from tests.conftest import ROOT
    env = dict(os.environ, XS_DB=str(db), PYTHONPATH=ROOT)
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    (bindir / "xs").write_text('#!/bin/sh\nexec "%s" -m xstream_cli "$@"\n' % sys.executable)
    (bindir / "xs").chmod(0o755)
    env["PATH"] = "%s:%s" % (bindir, env.get("PATH", ""))
    return env


def xs(db, *args, env=None):
    """``xs --db DB --json ARGS``: the CompletedProcess (bytes)."""
    e = dict(os.environ, **(env or {}))
    return subprocess.run(XS + ["--db", str(db), "--json"] + list(args), capture_output=True, env=e, timeout=60)


def argv_of(line, *binary):
    """A command line split as a shell splits it; each ``{}`` in it is the
    next of ``binary`` (bytes)."""
    import shlex
    out, it = [], iter(binary)
    for w in shlex.split(line):
        out.append(next(it) if w == "{}" else w.encode())
    return out


def run_line(store, line, *binary):
    """Parse the command ``line`` (argv_of) and run it in its own
    transaction (a write one if the command writes): the command's reply
    value; a Redis error is raised."""
    argv = argv_of(line, *binary)
    c = lookup(argv)
    args = c.parse(argv)
    return store.run(lambda tx: c.run(tx, *args), write=c.write)
