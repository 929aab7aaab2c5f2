"""xs redrive: put the dead letters of ``xs worker --dead-letter`` back
on the streams they came from.

    xs redrive DEADSTREAM [--stream ORIGIN]... [--count N] [--dry-run] [-q] [--json]

Each dead letter holds its origin first (xs-stream, xs-id, ...: see xs
worker) and then the entry's own fields.  Redriving adds those fields to
the origin stream again, with a new ID (so the origin's groups deliver
it as a new entry, to be tried afresh), and deletes the dead letter, in
one transaction (storage.ops.worker.redrive): a dead letter is redriven
once, however the run ends, and running it again only takes what is
left.  Dead letters are taken oldest first, in transactions of 1000.
--stream takes only those of the given origin streams; --count N at most
N; entries of DEADSTREAM that are not dead letters are left as they are
(and counted).  A dead letter its origin refuses (a stream at the
largest ID, ``18446744073709551615-18446744073709551615``) stays in
DEADSTREAM, is named on stderr (even with -q) and counted, and the
others are redriven; the exit status is then 1.  Prints a line per
origin stream and a total on stdout; -q nothing; --json one object
("stuck": those left).  Exit 1 if DEADSTREAM does not exist.
"""
import os
import sys

import click

from xstream_cli import context

BATCH = 1000


def run_redrive(g, dead, only, count, dry, quiet, as_json):
    from storage.errors import RedisError
    from storage.ops.worker import redrive
    from storage.txn import StoreFailure
    from xstream_cli.porcelain.ls import emit_json, id_text, json_text, open_existing, show
    dl = os.fsencode(dead)
    streams = None if not only else {os.fsencode(s) for s in only}
    store = open_existing(g, write=not dry)
    done, foreign, stuck = [], 0, []
    try:
        if store.run(lambda tx: tx.last_generated_id(dl)) is None:
            context.fail("no such stream: %s" % show(dl))
        after = (0, 0)
        while count is None or len(done) < count:
            want = BATCH if count is None else min(BATCH, count - len(done))
            try:
                got, last, other = store.run(lambda tx: redrive(tx, dl, after, streams, want, dry, stuck),
                                             write=not dry, savepoints=not dry)
            except RedisError as e:
                context.fail("redrive: %s (dead letters redriven so far stay redriven; nothing of this batch was)"
                             % e.text)
            except StoreFailure as e:
                context.fail("redrive: %s" % e)
            done += got
            foreign += len(other)
            if last is None:
                break
            after = (last[0], last[1] + 1) if last[1] < 2 ** 64 - 1 else (last[0] + 1, 0)
    finally:
        store.close()
    for x in stuck:                      # on stderr, -q or not: cron mails it, and the exit status is 1
        try:
            sys.stderr.write("xs: redrive: dead letter %s cannot go back to %s: %s (left in %s)\n"
                             % (id_text(x.dead), show(x.stream), x.error, show(dl)))
        except (OSError, ValueError):
            pass
    status = context.EXIT_ERROR if stuck else context.EXIT_OK
    if quiet:
        return status
    per = {}
    for r in done:
        per[r.stream] = per.get(r.stream, 0) + 1
    if as_json:
        emit_json({"dry_run": dry, "dead_letter_stream": json_text(dl), "redriven": len(done),
                   "not_dead_letters": foreign,
                   "stuck": [{"dead": id_text(x.dead), "stream": json_text(x.stream), "error": x.error}
                             for x in stuck],
                   "entries": [{"dead": id_text(r.dead), "stream": json_text(r.stream),
                                "original": r.original.decode("ascii", "replace"),
                                "new": id_text(r.new)} for r in done]})
        return status
    verb = "would redrive" if dry else "redrove"
    lines = ["%s: %s %d" % (show(s), verb, n) for s, n in sorted(per.items())]
    total = "total: %s %d dead letter%s from %s" % (verb, len(done), "" if len(done) == 1 else "s", show(dl))
    if foreign:
        total += ("; 1 entry that is not a dead letter left there" if foreign == 1 else
                  "; %d entries that are not dead letters left there" % foreign)
    if stuck:
        total += "; %d could not go back (named on stderr), left there" % len(stuck)
    context.write_out(("\n".join(lines + [total]) + "\n").encode("utf-8", "surrogateescape"))
    return status


def register(cli):
    @cli.command("redrive")
    @click.argument("dead")
    @click.option("--stream", "only", multiple=True, metavar="ORIGIN",
                  help="Only the dead letters of this origin stream (repeatable).")
    @click.option("-c", "--count", type=click.IntRange(min=1), metavar="N", help="At most N dead letters.")
    @click.option("--dry-run", "dry", is_flag=True, help="Say what would be redriven; change nothing.")
    @click.option("-q", "--quiet", is_flag=True, help="Print nothing unless something fails (for cron).")
    @click.option("--json", "json_", is_flag=True, help="One JSON object: counts and each entry's IDs.")
    @click.pass_obj
    def redrive_cmd(obj, dead, only, count, dry, quiet, json_):
        """Put the dead letters of DEAD back on their origin streams.

        \b
        Each dead letter (written by xs worker --dead-letter DEAD) is
        added to the stream it came from again, with a new ID and its
        own fields, and deleted from DEAD, in one transaction: it is
        redriven once, and a second run takes only what is left.
        --stream ORIGIN: only those of ORIGIN.  Entries of DEAD that are
        not dead letters stay; a dead letter its origin refuses stays,
        named on stderr, the others go back (exit 1).
        \b
        xs redrive jobs:dead --dry-run
        xs redrive jobs:dead --stream jobs
        """
        g = obj or context.Globals()
        try:
            status = run_redrive(g, dead, only, count, dry, quiet, json_ or g.mode in ("json", "jsonl"))
        except KeyboardInterrupt:
            context.fail("redrive: interrupted (dead letters redriven so far stay redriven; run it again "
                         "for the rest)", context.EXIT_INTERRUPTED)
        if status:
            sys.exit(status)
