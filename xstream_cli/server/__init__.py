"""``xs serve``: a RESP2/RESP3 server over an xs store.

- ``connection``: the asyncio Server and its life cycle, with its parts
  ``clients`` (a client and its protocol), ``reading`` (requests in,
  replies out), ``routing`` (where each command runs) and ``tls``;
- ``commands``: the connection and server commands (PING, HELLO, AUTH,
  CLIENT, INFO, CONFIG, MULTI / EXEC, WATCH ...);
- ``config``: the settings CONFIG GET / SET see;
- ``jobs``: what the engine runs (Item, Job);
- ``engine``: the engine thread (group commit through the one batch
  driver, xstream_cli.execution.batch) and blocked reads, with
  ``storelock`` (one transaction of the process at a time) and
  ``paged`` (big reads a page at a time);
- ``stats``: INFO's counters; ``docs``: COMMAND DOCS;
- ``resp``: the wire format (RESP2 / RESP3 parser and encoder).

It runs the CLI's command table and execution layer; it never imports
the CLI's session, runner, prompt or app.

``serve(store, config)`` runs until SIGTERM or SIGINT, then drains and
returns 0.
"""
import asyncio
import gc
import logging
import os
import signal
import sys

LEVELS = {"debug": logging.DEBUG, "verbose": logging.INFO, "info": logging.INFO, "notice": logging.INFO,
          "warning": logging.WARNING, "error": logging.ERROR}


def setup_logging(level="notice"):
    """Log lines on stderr: time, level, message."""
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    log = logging.getLogger("xs.serve")
    log.handlers[:] = [h]
    log.setLevel(LEVELS[level])
    log.propagate = False
    return log


def _runner(config):
    """uvloop's run (the ``serve`` extra) where installed, unless the
    config says the pure-Python path; else asyncio's."""
    if config.native:
        try:
            import uvloop
            return uvloop.run
        except ImportError:
            pass
    return asyncio.run


def _settle_collector():
    """The cyclic collector for a server: what exists once it is up (the
    modules, the command table, the store's objects) is frozen out of
    its scans, and the youngest generation is collected a tenth as
    often.  A block of 1,000 queued XADDs makes some 10,000 objects,
    almost none in a cycle: with the default thresholds the collections
    took about 5% of xs serve's time."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 10, 10)


def serve(store, config, ready=None):
    """Serve ``store`` until SIGTERM / SIGINT; returns the exit status."""
    from xstream_cli.server.connection import Server
    log = logging.getLogger("xs.serve")
    srv = Server(store, config)

    async def main():
        await srv.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if ready is not None:
            ready(srv)
        _settle_collector()
        await stop.wait()
        log.info("signal received: draining %d client(s)", len(srv.clients))
        await srv.stop()
        log.info("stopped; every acknowledged write is on disk")
    _runner(config)(main())
    if srv.engine_stuck:
        # the engine thread is inside LMDB, waiting for another process's
        # write lock: the store cannot be closed under it, and nothing it
        # holds was acknowledged, so leave now
        logging.shutdown()
        os._exit(0)
    return 0
