"""xs compact: give the free pages of a store back to the file system.

    xs compact [--wait SECONDS] [--dry-run] [-q] [--json]

A compacting copy of data.mdb replaces it (storage.ops.compact, whose
docstring explains the exclusion): it needs the store to itself.  It
asks the long-running processes that have the store open (xs tail -f,
xs worker, a blocked XREAD, xs serve) to step aside, which they do at
once while idle and come back to the new file after; it waits up to
--wait seconds (default 30) for the others (a process busy in a
transaction, the prompt) -- on a terminal saying which -- and then fails
with exit 1, having changed nothing.  Commands started while it runs
wait for it.

Output: one line, ``compacted STORE: 12.8 MB -> 40.0 kB (freed 12.8 MB)
in 0.05 s`` (with --dry-run ``would compact``, an estimate); -q nothing
unless something fails; --json one object {"path", "dry_run", "before",
"after", "freed", "seconds", "waited", "holders"} (sizes in bytes).
"""
import sys

import click

from xstream_cli import context
from xstream_cli.porcelain.ls import emit_json, human_bytes


def run_compact(g, wait, dry, quiet, json_flag):
    from storage.ops.compact import CompactError, compact, describe
    if wait < 0:
        context.fail("compact: --wait must be 0 or more seconds", context.EXIT_USAGE)
    as_json = json_flag or g.mode in ("json", "jsonl")
    path = context.db_path(g)

    def waiting(hs):
        if quiet or as_json or not sys.stderr.isatty():
            return
        n = len(hs)
        who = ("%d process%s using the store (%s)" % (n, "" if n == 1 else "es", describe(hs)) if hs
               else "other processes using the store")
        sys.stderr.write("xs: waiting up to %gs for %s to close it...\n" % (wait, who))
        sys.stderr.flush()

    try:
        res = compact(path, wait=wait, dry_run=dry, durable=g.durable, on_wait=waiting)
    except CompactError as e:
        context.fail(str(e))
    if quiet:
        return
    if as_json:
        doc = res.as_dict()
        doc["holders"] = [{"pid": p, "command": c} for p, c in doc["holders"]]
        return emit_json(doc)
    freed = max(0, res.before - res.after)
    if dry:
        line = "would compact %s: %s -> about %s (would free about %s)" % (
            path, human_bytes(res.before), human_bytes(res.after), human_bytes(freed))
        if res.holders:
            line += "; now in use by %s" % describe(res.holders)
    else:
        line = "compacted %s: %s -> %s (freed %s) in %.2f s" % (
            path, human_bytes(res.before), human_bytes(res.after), human_bytes(freed), res.seconds)
    context.write_out((line + "\n").encode("utf-8", "surrogateescape"))


def register(cli):
    @cli.command("compact")
    @click.option("--wait", "wait", type=float, default=30.0, show_default=True, metavar="SECONDS",
                  help="How long to wait for other processes to close the store before failing.")
    @click.option("--dry-run", "dry", is_flag=True, help="Say how much would be freed; change nothing.")
    @click.option("-q", "--quiet", is_flag=True, help="Print nothing unless something fails (for cron).")
    @click.option("--json", "json_", is_flag=True, help="One JSON object with the sizes in bytes.")
    @click.pass_obj
    def compact(obj, wait, dry, quiet, json_):
        """Give the space freed by trims and deletes back to the disk.

        \b
        Copies the live pages of data.mdb into a new file and renames it
        over data.mdb (a compaction killed at any point leaves the old
        file or the complete new one).  It needs the store to itself:
        every xs process holds <store>/lock shared while it has the
        store open, compaction holds it exclusively.  Long-running
        readers (tail -f, worker, a blocked XREAD, xs serve) step aside
        when it asks and reopen the store after.  It waits up to --wait
        SECONDS for the others (a process busy in a transaction, the
        prompt), naming them on a terminal, then fails with exit 1 and
        changes nothing.  Commands started meanwhile wait for the
        compaction.
        \b
        crontab:  47 3 * * 0  xs compact -q
        """
        try:
            run_compact(obj or context.Globals(), wait, dry, quiet, json_)
        except KeyboardInterrupt:
            context.fail("compact: interrupted (the store is as it was, or compacted)", context.EXIT_INTERRUPTED)
