"""xs archive: move old entries to Parquet with Spark, then trim them.

    xs archive STREAM|GLOB... --to DIR (--older-than DURATION | --before ID)
               [--url URL] [--master URL] [--fields-list] [--shared-dir] [--mode MODE] [--dry-run] [-q]

The entries with an ID below the cut (``--before ID``: exactly the
entries with a smaller ID; ``--older-than D``: below ``<now - D>-0``)
are written by a Spark job (local[*], or ``--master URL``) as Parquet
under DIR, partitioned ``stream=NAME/date=YYYY-MM-DD`` (UTC day of the
ID), read back and checked (row count, first and last IDs, no ID twice),
and only then trimmed from the stream, in one transaction.  Killed at
any point, nothing is lost and the next run finishes the job without
writing a row twice: see storage/spark/archive/, which does the work.

STREAM is a name (it must exist) or a glob (KEYS syntax; perhaps none).
DURATION as for xs trim: 500ms, 90s, 30m, 12h, 7d, 2w, 1h30m.  Needs
the ``spark`` extra (pyspark, pyarrow) and Java 17; --dry-run needs
neither: it says what a run would archive, from one read transaction.

Output: progress on stderr when it is a terminal, then one line on
stdout (``archived 3000 entries of 2 streams ...``); -q prints nothing
unless something fails (one line on stderr, exit 1).  A usage mistake
(no cut, both cuts, a bad ID or duration, a mode --mode refuses) exits
2 and changes nothing.

What a run makes in DIR is private (directories 0700, files 0600) unless
--mode MODE widens it on purpose, for a group that reads the archive:
directories MODE, files MODE without x (0750: 0640), exactly, whatever
the umask.  Only modes that leave the owner rwx and give nobody else
write are taken (storage.spark.archive.mode_problem); what earlier runs
made keeps its mode.
"""
import importlib.util
import os
import re
import sys
import time

import click

from xstream_cli import context
from xstream_cli.porcelain.ls import fail_missing, open_existing, parse_duration, select_streams


class Progress:
    """Steps on stderr, when it is a terminal: one line, rewritten."""

    def __init__(self, enabled):
        self.enabled = enabled
        self.width = 0

    def __call__(self, step, done=None, total=None):
        if not self.enabled:
            return
        text = "xs archive: %s" % step
        if total:
            text += ": %d/%d tasks" % (done, total)
        pad = " " * max(0, self.width - len(text))
        self.width = len(text)
        try:
            sys.stderr.write("\r" + text + pad)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    def end(self):
        if self.enabled and self.width:
            try:
                sys.stderr.write("\r" + " " * self.width + "\r")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            self.width = 0


def _cut(older_than, before):
    from storage import ids
    from storage.errors import RedisError
    if (older_than is None) == (before is None):
        context.fail("archive: give exactly one of --older-than DURATION and --before ID", context.EXIT_USAGE)
    if before is not None:
        try:
            return ids.parse_id(before.strip().encode("utf-8", "surrogateescape"), 0, strict=True)
        except RedisError:
            context.fail("archive: --before: %r is not a stream ID (ms or ms-seq)" % before, context.EXIT_USAGE)
    age = parse_duration("--older-than", older_than)
    return (max(0, int(time.time() * 1000) - age), 0)


def _mode(ctx, param, value):
    """--mode MODE: octal, as chmod takes it (750 or 0750); a mode that
    would lock the owner out or let others write is a usage error, named
    with the reason, before anything is touched."""
    from storage.spark.archive import DEFAULT_MODE, mode_problem
    if value is None:
        return DEFAULT_MODE
    if not re.fullmatch(r"[0-7]+", value):
        raise click.BadParameter("%r is not an octal mode: digits 0-7, as for chmod (750 or 0750)" % value)
    why = mode_problem(int(value, 8))
    if why:
        raise click.BadParameter("%r: %s" % (value, why))
    return int(value, 8)


def _plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def _say(line):
    context.write_out((line + "\n").encode("utf-8", "surrogateescape"))


def hold_text(hold, dry):
    """What consumer groups kept back below the cut (or, with
    --drop-unacked, what the run took from them):
    ``kept 10 not acknowledged (group mailer: 8 not yet delivered, 2 pending)``."""
    from xstream_cli.porcelain.retention import work_text
    if not hold.kept:
        return "%s work not done (%s)" % ("would take" if dry else "took", work_text(hold.groups))
    text = "%s %d" % ("would keep" if dry else "kept", hold.held)
    if hold.held != hold.unacked:
        text += ", %d of them" % hold.unacked
    return text + " not acknowledged (%s)" % work_text(hold.groups)


def untrimmed_text(hold):
    """Archived entries a group needs again (made or moved back since
    the run planned): left in the stream for a later run."""
    from xstream_cli.porcelain.retention import work_text
    return "left %d archived entries in the stream, not acknowledged (%s); a later run trims them" % (
        hold.held, work_text(hold.groups))


def hold_lines(res, dry):
    """``NAME: kept ...`` for every stream whose groups held entries back
    (or lost them, with --drop-unacked), and archived entries left for
    them: what -q still says, on stderr."""
    lines = []
    for p in res.plans:
        if p.hold is not None:
            lines.append("%s: %s" % (p.name, hold_text(p.hold, dry)))
    for name, hold in sorted(res.untrimmed.items()):
        lines.append("%s: %s" % (name, untrimmed_text(hold)))
    return lines


def _dry_run_lines(res, cut, to):
    from storage.spark.archive import id_text
    todo = [p for p in res.plans if p.rows]
    lines = []
    for p in res.plans:
        text = "%s: would archive %d" % (p.name, p.rows)
        if p.rows:
            text += " (%s..%s)" % (id_text(p.first), id_text(p.last))
        if p.leftover:
            text += ", would trim %d already archived" % p.leftover
        if p.hold is not None:
            text += "; " + hold_text(p.hold, True)
        lines.append(text)
    total = "total: would archive %d entries of %s below %s to %s" % (
        sum(p.rows for p in todo), _plural(len(todo), "stream"), id_text(cut), to)
    kept = sum(p.hold.held for p in res.plans if p.hold is not None and p.hold.kept)
    if kept:
        total += "; would keep %d for consumer groups" % kept
    lines.append(total)
    return lines


def _summary(res, cut, to):
    from storage.spark.archive import id_text
    trimmed = sum(res.trimmed.values())
    rows = sum(res.archived.values())
    if not rows:
        text = "nothing to archive below %s in %s" % (id_text(cut), _plural(len(res.plans), "stream"))
    else:
        dates = res.dates[0] if len(res.dates) == 1 else "%s..%s" % (res.dates[0], res.dates[-1])
        text = "archived %d entries of %s to %s (%s, %s)" % (
            rows, _plural(len(res.archived), "stream"), to, dates, _plural(res.files, "file"))
    if res.recovered:
        text += "; finished an interrupted run of %d entries" % res.recovered
    if trimmed or rows:
        text += "; trimmed %d" % trimmed
    for line in hold_lines(res, False):
        text += "; " + line
    return text


class _Served:
    """What select_streams asks of a store, asked of a server (--url)."""

    def __init__(self, conn):
        self.conn = conn

    def stream_names(self):
        return self.conn.stream_names(b"*")


def _net_source(url):
    """--url: (the store opener, the data source's options, the selected
    streams' opener); exit 1 with the one-line reason when the server
    cannot be reached."""
    from storage.spark import archive
    from storage.spark.network import NetworkError, parse_endpoints
    try:
        eps = parse_endpoints(url)
    except NetworkError as e:
        context.fail("archive: %s" % str(e).removeprefix("xstream: "), context.EXIT_USAGE)
    if len(eps) != 1:
        context.fail("archive: --url names one server (%d given)" % len(eps), context.EXIT_USAGE)
    ep = eps[0]

    def open_store():
        try:
            return archive.open_served(ep)
        except NetworkError as e:
            context.fail("archive: %s" % str(e).removeprefix("xstream: "))
    return open_store, {"url": url}


def run_archive(g, streams, to, older_than, before, master, fields_list, dry, quiet, shared=False, binary=False,
                mode=None, url=None, drop_unacked=False):
    cut = _cut(older_than, before)
    if not to:
        context.fail("archive: --to DIR must not be empty", context.EXIT_USAGE)
    to = os.path.expanduser(to)
    if not dry:
        for mod, what in (("pyspark", "pyspark"), ("pyarrow", "pyarrow")):
            if importlib.util.find_spec(mod) is None:
                context.fail("archive needs %s: pip install 'xstreamlog[spark]' (and Java 17)" % what)
    from storage.spark import archive
    from storage.txn import StoreFailure
    args = [os.fsencode(s) for s in streams]
    if url:
        open_store, source = _net_source(url)
        store = open_store()
        try:
            names, missing = select_streams(_Served(store.conn), args)
        except ValueError as e:           # the server failed (storage.spark.network.NetworkError)
            context.fail("archive: %s" % str(e).removeprefix("xstream: "))
        finally:
            store.close()
    else:
        store = open_existing(g, write=False)
        try:
            names, missing = store.run(lambda tx: select_streams(tx, args))
        finally:
            store.close()
        source = context.db_path(g)

        def open_store():
            return open_existing(g, write=not dry)
    if missing:
        fail_missing(missing)
    progress = Progress(not quiet and sys.stderr.isatty())
    try:
        res = archive.archive(open_store, source, names, cut, to,
                              master=master, fields_list=fields_list, progress=progress, dry_run=dry,
                              shared=shared, binary=binary, drop_unacked=drop_unacked,
                              **({} if mode is None else {"mode": mode}))
    except archive.ArchiveError as e:
        progress.end()
        context.fail("archive: %s" % e)
    except (StoreFailure, ValueError) as e:        # ValueError: the server failed (--url)
        progress.end()
        context.fail("archive: %s" % str(e).removeprefix("xstream: "))
    except OSError as e:
        progress.end()
        context.fail("archive: %s%s" % (e.strerror or e, " (%s)" % e.filename if e.filename else ""))
    except KeyboardInterrupt:
        progress.end()              # the "interrupted" line starts a line of its own
        raise
    except archive.Terminated as e:
        # SIGTERM or SIGHUP while Spark ran: its JVM is ended; xs dies of the signal, as it would elsewhere
        progress.end()
        _die_of(e.signum)
    progress.end()
    if quiet:
        # cron mails stderr: work a group has not done, kept back (or
        # taken, with --drop-unacked), is worth a line even when all is well
        for line in hold_lines(res, dry):
            try:
                sys.stderr.write("xs archive: %s\n" % line)
            except (OSError, ValueError):
                pass
        return
    if dry:
        for line in _dry_run_lines(res, cut, to):
            _say(line)
        return
    _say(_summary(res, cut, to))


def _die_of(signum):
    """Say so, then die of ``signum`` (exit status 128+signum to a shell)."""
    import signal
    try:
        sys.stderr.write("xs: archive: %s (nothing is lost; run it again to finish)\n"
                         % ("terminated" if signum == signal.SIGTERM else "hung up"))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    sys.exit(128 + signum)          # (not reached)


def register(cli):
    @cli.command("archive")
    @click.argument("streams", nargs=-1, required=True, metavar="STREAM|GLOB...")
    @click.option("--to", "to", required=True, metavar="DIR", help="Archive directory (Parquet, made if missing).")
    @click.option("--older-than", metavar="DURATION",
                  help="Archive entries older than DURATION (500ms, 90s, 30m, 12h, 7d, 2w, 1h30m).")
    @click.option("--before", metavar="ID", help="Archive exactly the entries with an ID below ID (ms or ms-seq).")
    @click.option("--master", metavar="URL", help="Spark master (default local[*]).")
    @click.option("--url", metavar="URL",
                  help="Archive a store served over the network (xs serve, or any Redis 7+ server): "
                       "redis://[:PASSWORD@]HOST:PORT, rediss:// for TLS; Spark's executors read it over the "
                       "network and the trim is an XTRIM MINID on the server.  Instead of --db.")
    @click.option("--fields-list", is_flag=True,
                  help="Also write fields_list (every field in order, repeated names kept).")
    @click.option("--binary", is_flag=True,
                  help="Write every value as binary, losslessly (needed for values that are not UTF-8; "
                       "a directory holds one kind of values).")
    @click.option("--shared-dir", "shared", is_flag=True,
                  help="DIR may belong to another user or be writable by others (links in it are still never "
                       "followed, and only your own manifest is obeyed).")
    @click.option("--mode", metavar="MODE", callback=_mode,
                  help="Octal mode of what this run makes in DIR: directories MODE, files MODE without x "
                       "(0750: 0640), whatever the umask; default 0700 (private, as the store).  The owner keeps "
                       "rwx, group and others never get w.  What earlier runs made (DIR, directories, the lock, "
                       "the log) keeps its mode.")
    @click.option("--drop-unacked", is_flag=True,
                  help="Also archive and trim entries a consumer group has not acknowledged (not yet delivered, "
                       "or pending); by default a stream is archived only below the oldest entry any of its "
                       "groups still needs, as xs trim keeps them.")
    @click.option("--dry-run", "dry", is_flag=True, help="Say what would be archived; change nothing.")
    @click.option("-q", "--quiet", is_flag=True, help="Print nothing unless something fails (for cron).")
    @click.pass_obj
    def archive_cmd(obj, streams, to, older_than, before, master, url, fields_list, binary, shared, mode,
                    drop_unacked, dry, quiet):
        """Move old entries to Parquet with Spark, then trim them.

        \b
        Entries below the cut (--before ID, or --older-than D: below
        <now-D>-0) are written as DIR/stream=NAME/date=YYYY-MM-DD/*.parquet,
        read back and checked (count, first and last IDs), and only then
        trimmed (XTRIM MINID, one transaction).  Killed at any point,
        nothing is lost; the next run finishes without duplicating rows.
        Work a consumer group has not done stays: a stream is archived
        only below the oldest entry any of its groups has not
        acknowledged (the summary, and stderr with -q, say what was
        kept); --drop-unacked takes it too.
        Values are strings; a value that is not UTF-8 stops the run
        (nothing trimmed) until it runs with --binary, which writes every
        value as binary into a directory of binary values.
        \b
        Progress on stderr on a terminal, then one summary line; -q:
        nothing unless something fails (stderr, exit 1).
        \b
        crontab:  30 3 * * *  xs archive 'events:*' --to /srv/archive --older-than 7d -q
        """
        try:
            run_archive(obj or context.Globals(), streams, to, older_than, before, master, fields_list, dry, quiet,
                        shared, binary, mode, url, drop_unacked)
        except KeyboardInterrupt:
            context.fail("archive: interrupted (nothing is lost; run it again to finish)", context.EXIT_INTERRUPTED)
