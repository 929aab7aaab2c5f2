"""xs worker: at-least-once processing of a stream by an external command.

    xs worker STREAM -g GROUP -c CONSUMER [OPTIONS] -- CMD [ARG...]

Reads STREAM through consumer group GROUP as CONSUMER (the group is
created if missing, at --start, and a line on stderr says so with the
start used, unless -q; a missing stream is created with it, as XGROUP
CREATE ... MKSTREAM does) and runs CMD once per entry.  The default
start is 0, every entry already there: a queue's jobs written before
the first worker started must not be skipped (xs tail --group starts at
$, new entries only, as tail -f does).
Where entries come from, in order: this consumer's own pending entries
(a previous run stopped before acknowledging them), then entries other
consumers left idle longer than --claim-idle ms and entries given back
with XNACK (XREADGROUP ... CLAIM), then new ones; when there is nothing,
it waits (the BLOCK machinery: no polling).

CMD is run without a shell (an argv list: entry data never becomes part
of a command line) with
  stdin   the entry as one JSON line, the shape of xs export / xs tail
          --json: {"stream": "s", "id": "1-0", "fields": ["f", "v", ...]}
          (a name or value that is not UTF-8 is {"b64": "..."}); with
          --batch N, up to N entries, one JSON line each;
  env     XS_STREAM, XS_GROUP, XS_CONSUMER, XS_ID (the first entry's ID),
          XS_IDS (all IDs, space-separated), XS_COUNT, XS_DELIVERIES (the
          delivery count, this one included; with --batch the highest);
  stdout  xs worker's stdout (its stderr with --json, which owns stdout);
  stderr  passed through to xs worker's stderr; the last 2 KiB are kept
          for a dead letter.

Exit status 0: the entries are acknowledged (XACK, committed before it is
reported).  Anything else, or --timeout exceeded (CMD's process group
gets SIGTERM, then SIGKILL a second later): they stay pending and are
delivered again -- with --retry-delay 0 at once (XNACK FAIL gives them
back to the group, the next CLAIM takes them); otherwise after the delay
(this worker keeps them and takes them back with XCLAIM; a worker that
restarts takes its own pending entries at once, and other workers take
them once idle longer than --claim-idle).  While CMD runs, the worker
resets its entries' idle time every third of --claim-idle, so a slow
command is not taken over by other workers; a worker that dies stops
doing so, and its entries are claimed.

With --max-deliveries N --dead-letter DL: an entry whose delivery count
reaches N and fails again is added to DL and acknowledged in one
transaction; an entry delivered more than N times (a worker died during
the Nth run) is dead-lettered without running CMD again.  A dead letter
holds seven origin pairs, always first and in this order -- xs-stream,
xs-id, xs-group, xs-consumer, xs-deliveries, xs-exit ("exit 3",
"signal 9", "timeout", "exec failed: ...", "not run: ..."), xs-stderr
-- then the entry's own fields.

--concurrency N runs up to N commands at once (the store is used from
one thread only).  --once processes what is there and exits when nothing
is left (each entry is run at most once per --once run; a failed one
stays pending for the next run).  SIGTERM / SIGINT: CMD's process groups
get SIGTERM (SIGKILL after 5 s), their entries are given back to the
group uncounted (XNACK SILENT: still pending, claimable at once) and xs
worker exits 0.

Progress on stderr when it is a terminal (CMD's output to that terminal
passes through the worker, which clears the status line first); a line
on stderr per failed entry ("1795...-0 failed (exit 3), attempt 2/3,
retry in 200ms") and per dead letter; a summary line on stderr at exit.
-q drops the progress and the summary, never a failure's line.
--once exits 1 when an entry failed (cron can alert), else 0.
--json: one JSON object per event on stdout:
  {"event": "acked" | "failed" | "dead-lettered" | "released" | "skipped",
   "stream": ..., "id": ..., "deliveries": n, ...}
("failed" has "status"; "dead-lettered" has "dead-letter": {"stream",
"id"}; "skipped": deleted from the stream while pending, acknowledged).
"""
import os
import sys

import click

from xstream_cli import context
from xstream_cli.porcelain.worker.loop import Worker

__all__ = ["Worker", "register"]


# ================================================================ command

class _WorkerCommand(click.Command):
    """Everything after ``--`` is CMD, untouched; a usage error is one
    line (``xs: worker: ...``) and exit status 2."""

    def parse_args(self, ctx, args):
        args = list(args)
        if "--" in args:
            i = args.index("--")
            ctx.meta["xs.worker.cmd"] = args[i + 1:]
            args = args[:i]
        elif not any(a in ("-h", "--help") for a in args):
            _usage("missing -- before CMD (xs worker STREAM -g GROUP -c CONSUMER [OPTIONS] -- CMD [ARG]...)")
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            _usage(e.format_message())

    def collect_usage_pieces(self, ctx):
        return ["STREAM", "-g GROUP", "-c CONSUMER", "[OPTIONS]", "-- CMD [ARG]..."]


def _usage(message):
    context.fail("worker: %s" % message, context.EXIT_USAGE)


def _executable(cmd):
    """Why CMD cannot be run, or None."""
    name = cmd[0]
    if not name:
        return "empty command name"
    if "/" in name:
        if not os.path.isfile(name) or not os.access(name, os.X_OK):
            return "cannot execute %s" % name
        return None
    import shutil
    if shutil.which(name) is None:
        return "command not found: %s" % name
    return None


def register(cli):
    @cli.command("worker", cls=_WorkerCommand)
    @click.argument("stream")
    @click.option("-g", "--group", required=True, metavar="GROUP", help="Consumer group (created if missing).")
    @click.option("-c", "--consumer", required=True, metavar="CONSUMER", help="Consumer name within the group.")
    @click.option("--start", default="0", show_default=True, metavar="ID",
                  help="Where a group that does not exist yet starts: 0 (the default: every entry already "
                       "there, as a queue needs: jobs written before the first worker are not skipped), $ "
                       "(new entries only: xs tail --group's default) or an ID.  Creating it is said on "
                       "stderr (not with -q).")
    @click.option("--claim-idle", type=click.IntRange(min=1), default=60000, show_default=True, metavar="MS",
                  help="Take entries other consumers left pending longer than MS.")
    @click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SEC",
                  help="Kill CMD after SEC seconds (the entry stays pending).")
    @click.option("--retry-delay", type=click.IntRange(min=0), default=1000, show_default=True, metavar="MS",
                  help="Deliver a failed entry again after MS (0: give it back to the group at once).")
    @click.option("--max-deliveries", type=click.IntRange(min=1), metavar="N",
                  help="After N failed deliveries move the entry to --dead-letter.")
    @click.option("--dead-letter", metavar="STREAM", help="Where entries go after --max-deliveries.")
    @click.option("--concurrency", type=click.IntRange(min=1, max=1024), default=1, show_default=True,
                  metavar="N", help="Run up to N commands at once.")
    @click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
                  help="Hand CMD up to N entries at once, one JSON line each (all acked on exit 0).")
    @click.option("--once", is_flag=True, help="Process what is there, then exit.")
    @click.option("--ack-alone", is_flag=True,
                  help="Commit each acknowledgement on its own (by default it rides in the transaction "
                       "that reads the next entries: half the disk syncs, still at least once).")
    @click.option("--json", "json_", is_flag=True, help="One JSON object per event on stdout.")
    @click.option("-q", "--quiet", is_flag=True,
                  help="No progress and no summary line; a failure still prints its line (for cron).")
    @click.pass_context
    def worker(ctx, stream, group, consumer, start, claim_idle, timeout, retry_delay, max_deliveries,
               dead_letter, concurrency, batch, once, ack_alone, json_, quiet):
        """Run CMD for each entry of STREAM, at least once (XACK on exit 0).

        \b
        The group is created if missing (at --start, by default 0: every
        entry already there; a missing stream too), and stderr says so.
        Order: this consumer's own pending entries, then entries
        idle longer than --claim-idle (and NACKed ones), then new ones;
        then it waits for more (unless --once).
        \b
        CMD runs without a shell: stdin is the entry as one JSON line
        ({"stream", "id", "fields": [f, v, ...]}, as xs export writes;
        with --batch N, up to N lines), env XS_STREAM, XS_GROUP,
        XS_CONSUMER, XS_ID, XS_IDS, XS_COUNT, XS_DELIVERIES.  Exit 0:
        acknowledged, in the commit that reads the next entries (or
        alone before waiting; --ack-alone: at once).  Otherwise (or --timeout): pending, delivered again
        after --retry-delay; once an entry was delivered --max-deliveries
        times it is added to --dead-letter with its origin and
        acknowledged, in one transaction.
        \b
        SIGTERM / Ctrl-C: running commands are stopped and their entries
        given back to the group (still pending); exit 0.  --once: exit 1
        if an entry failed.  Each failure prints a line on stderr (which
        entry, why, which attempt, what happens next), also with -q.
        """
        from storage.errors import RedisError
        from storage.ids import parse_id
        cmd = ctx.meta.get("xs.worker.cmd")
        if not cmd:
            _usage("missing CMD after --")
        if (max_deliveries is None) != (dead_letter is None):
            _usage("--max-deliveries and --dead-letter go together (an entry is never dropped)")
        skey = os.fsencode(stream)
        if dead_letter is not None and os.fsencode(dead_letter) == skey:
            _usage("--dead-letter must be another stream than STREAM")
        if start == "$":
            start_id = b"$"
        else:
            try:
                start_id = parse_id(os.fsencode(start), strict=True)
            except RedisError:
                _usage("bad --start ID: %s" % start)
        why = _executable(cmd)
        if why:
            _usage(why)
        g = ctx.obj or context.Globals()
        json_events = json_ or g.mode in ("json", "jsonl")
        store = context.open_store(g)
        from storage.consumers import ConsumerBusy, ConsumerLock
        from storage.ops import worker as W
        try:
            held = ConsumerLock(store, skey, os.fsencode(group), os.fsencode(consumer))
        except ConsumerBusy as e:
            context.fail("worker: consumer %s of group %s on stream %s is already served by a live xs worker%s; "
                         "give this one another --consumer" % (consumer, group, stream,
                                                               " (pid %d)" % e.pid if e.pid else ""))
        try:
            if W.ensure_group(store, skey, os.fsencode(group), start_id) and not quiet:
                from click.core import ParameterSource

                from xstream_cli.output.render import terminal_text
                from xstream_cli.porcelain.tail import start_text
                why = ("" if ctx.get_parameter_source("start") != ParameterSource.DEFAULT
                       else ", the default of xs worker; --start $ for new entries only")
                sys.stderr.write("xs: worker: created group %s on stream %s at %s\n"
                                 % (terminal_text(os.fsencode(group)), terminal_text(skey),
                                    start_text(start_id, why)))
                sys.stderr.flush()
            w = Worker(store, skey, os.fsencode(group), os.fsencode(consumer), list(cmd),
                       claim_idle=claim_idle, timeout=timeout, retry_delay=retry_delay,
                       max_deliveries=max_deliveries,
                       dead_letter=None if dead_letter is None else os.fsencode(dead_letter),
                       concurrency=concurrency, batch=batch, once=once, json_events=json_events,
                       ack_alone=ack_alone, quiet=quiet)
            code = w.run()
        except RedisError as e:
            context.fail(e.text)
        finally:
            held.close()
        if w.stdout_gone:
            context.quiet_exit(0)
        sys.exit(code)
