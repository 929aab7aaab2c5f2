"""How commands run: the one batch driver, the session (one command, or a
script on stdin) and the blocked read.

- ``batch``: the one driver for a transaction of many commands (runs of
  plain XADDs, shared XREADGROUP/XACK runs, one savepoint per command,
  the one-by-one fallback).  Script mode and ``xs serve`` both run their
  commands through it.
- ``session``: a store plus an output mode; single-command mode and
  script mode.
- ``blocked``: XREAD / XREADGROUP ... BLOCK served over storage.blocking's
  one wait loop.

Who imports it: the CLI (runner, prompt, porcelain) and the server; it
imports the engine (storage), the command table and the output modules,
never the CLI's app, runner or server.
"""
