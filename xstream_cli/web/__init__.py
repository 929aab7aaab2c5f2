"""xs web: a live page of the store, served by xs itself (issue 40).

``model`` reads what the page shows, in read transactions of the store
the command opened (xstream_cli.context), as JSON-ready dicts: the
numbers from THE overview (storage.ops.overview.snapshot, with the
rates of xs top: xstream_cli.porcelain.top.rows_of), entries formatted
as xs tail shows them (xstream_cli.output.pretty), pending entries,
dead letters, and the one write, a re-drive, through
storage.ops.worker.redrive as ``xs redrive`` does.  It imports no HTTP
library.

``server`` is the HTTP side (aiohttp, the ``web`` extra): the token and
cookie, the routes, server-sent events, and the one watcher thread
that waits in storage.blocking's wait loop and pushes a new overview
within a moment of each commit.  ``static/`` holds the page (one HTML,
one JS, one CSS file: no build step, nothing from a CDN).

Who imports it: xstream_cli.porcelain.web, only when ``xs web`` runs
(never on another command's start-up path).
"""
