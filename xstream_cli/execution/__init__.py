"""How commands run: the one batch driver, the session (one command, or a
script on stdin) and the blocked read.

- ``batch``: the one driver for a transaction of many commands (runs of
  plain XADDs, shared XREADGROUP/XACK runs, one savepoint per command,
  the one-by-one fallback).  Script mode and ``xs serve`` both run their
  commands through it.
- ``session``: a store plus an output mode; single-command mode.
- ``script``: script mode (commands on stdin, a batch a transaction,
  read through storage.lines).
- ``streamed`` and ``pages``: big reads written a page at a time as
  they are read (``pages`` is shared with xs serve's big reads).
- ``blocked``: XREAD / XREADGROUP ... BLOCK served over storage.blocking's
  one wait loop.

``run_command(tx, cmd, args)`` is the one way a parsed command runs in a
transaction: single-command mode (the session), the batch driver (script
mode, ``xs serve``, the in-process client) call it; a blocked read's
retries run its prepared arguments (``blocked.serve``).

Who imports it: the CLI (runner, prompt, porcelain) and the server; it
imports the engine (storage), the command table and the output modules,
never the CLI's app, runner or server.
"""


def run_command(tx, cmd, args):
    """Run the command ``cmd`` (an xstream_cli.commands.Command) with its
    parsed ``args`` in the transaction ``tx``: (the arguments as the
    command's ``prepare`` step left them, the reply value).  A Redis
    error raises; the caller decides what becomes of the transaction."""
    if cmd.prepare is not None:
        args = cmd.prepare(tx, *args)
    return args, cmd.run(tx, *args)
