"""Porcelain: ``xs save``, ``xs restore``, ``xs export``, ``xs import``.

Each command parses its options, makes one call into storage.ops.snapshot or
storage.ops.exchange, and renders: a rich progress bar on a terminal (none
when stderr is not one) and a one-line summary on stderr.  Failures are
one line on stderr and exit status 1, never a traceback.
"""
import io
import os
import shutil
import sys

import click

from xstream_cli import context

# ---------------------------------------------------------------- helpers

def _store(ctx, create):
    """The store, opened for this command (``create``: a write that may
    make a missing store; the reads, save and export, never do)."""
    g = ctx.find_root().obj or context.Globals()
    store = context.open_store(g, create=create)
    ctx.call_on_close(store.close)
    return store


_fail = context.fail


def _temp_dir():
    """Where ``restore -`` keeps its copy of stdin: $TMPDIR (or $TEMP,
    $TMP), else /tmp, taken as it is.  tempfile.gettempdir() probes each
    candidate by creating and removing a file of its own, which a SIGKILL
    in between leaves behind under a name nothing sweeps (seen once in
    240 kills, tests/system/test_chaos_restore_growth_full_disk.py)."""
    for var in ("TMPDIR", "TEMP", "TMP"):
        d = os.environ.get(var)
        if d and os.path.isdir(d):
            return d
    return "/tmp" if os.path.isdir("/tmp") else os.getcwd()


def _names(values):
    return [os.fsencode(v) for v in values] if values else None


class _Progress:
    """A rich progress display on stderr when it is a terminal; a no-op
    otherwise.  Usable as the ``progress(phase, done, total)`` callback:
    with a total, a bar, done/total and the time left; with total None
    (a stream of unknown length: stdin, an export), a spinner, the count
    so far and the rate."""

    def __init__(self, unit):
        self.bar = None
        self.unit = unit
        self.tasks = {}
        if sys.stderr.isatty() and not os.environ.get("XS_NO_PROGRESS") and not _quiet():
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                _count_column(unit), TimeElapsedColumn(), TimeRemainingColumn(),
                                console=Console(stderr=True), transient=True)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *a):
        if self.bar is not None:
            self.bar.stop()
        return False

    def __call__(self, phase, done, total):
        if self.bar is None:
            return
        t = self.tasks.get(phase)
        if t is None:
            t = self.tasks[phase] = self.bar.add_task(phase, total=total)
        self.bar.update(t, completed=done or 0, total=total)


def _count_column(unit):
    """A rich column: "done/total UNIT", or "done UNIT  rate/s" when the
    total is not known."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class Count(ProgressColumn):
        def render(self, task):
            if task.total is None:
                speed = task.speed
                rate = "" if not speed else "  %s/s" % format(int(speed), ",")
                return Text("%s %s%s" % (format(int(task.completed), ","), unit, rate))
            return Text("%s/%s %s" % (format(int(task.completed), ","), format(int(task.total), ","), unit))
    return Count()


def _replacing(path):
    """``with _replacing(path) as f``: a text file that becomes ``path``
    when the block ends without an exception (storage.files.AtomicFile:
    a private temporary file, fsynced, renamed over ``path``), with the
    mode of the file it replaces, else 0666 less the umask, as ``> path``
    would give it."""
    from storage.files import AtomicFile
    return AtomicFile(path, mode="inherit", text=True)


def _summary(verb, st, extra=""):
    """The one line on stderr a finished command prints (none with -q)."""
    if _quiet():
        return
    click.echo("xs: %s %d stream%s, %d entr%s, %s in %.2f s%s"
               % (verb, st.streams, "" if st.streams == 1 else "s", st.entries,
                  "y" if st.entries == 1 else "ies", size_text(st.bytes), st.seconds, extra), err=True)


def size_text(n):
    """``32,104 bytes (32.1 kB)``: the exact count, and a rounded one a
    person reads at a glance (none below 1 kB)."""
    exact = "%s byte%s" % (format(n, ","), "" if n == 1 else "s")
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return "%s (%.1f %s)" % (exact, n / size, unit)
    return exact


def _quiet():
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.meta.get("xs_quiet"))


def _quiet_option(f):
    """-q: print nothing unless something fails (a nightly backup from
    cron mails only failures): no summary line, no progress display."""
    def keep(ctx, param, value):
        ctx.meta["xs_quiet"] = value
        return value
    return click.option("-q", "--quiet", is_flag=True, expose_value=False, callback=keep,
                        help="Print nothing unless something fails (for cron).")(f)


# ================================================================ commands

@click.command("save")
@_quiet_option
@click.argument("file", metavar="FILE")
@click.option("--stream", "streams", multiple=True, metavar="NAME",
              help="Save only this stream (repeatable). Default: every stream.")
@click.option("--format", "fmt", type=click.Choice(["xs", "rdb"]), default="xs", show_default=True,
              help="xs: xs's snapshot format; rdb: a Redis RDB file (version 10) that redis-server 7.0 "
                   "and later load at start-up.")
@click.pass_context
def save(ctx, file, streams, fmt):
    """Write a snapshot of the store to FILE ('-': stdout).

    One consistent view (a single read transaction) of every stream with
    its entries, metadata, groups, consumers, pending entries and
    idempotency state, in xs's checksummed binary format (see
    docs/snapshot-format.md).  FILE is written to a temporary file and
    renamed into place.

    With --format rdb, an RDB file for redis-server (its dir and
    dbfilename): the streams with their groups, pending entries and
    TTLs as Redis 7.0 holds them (not the IDMP history nor consumers'
    active-time, which Redis 7.0 does not know; a stream with NACKed
    entries is refused)."""
    from storage.ops.snapshot import SnapshotError, save_to_path
    from storage.ops.snapshot import save as save_
    store = _store(ctx, False)
    if file == "-" and sys.stdout.isatty():
        _fail("refusing to write a binary snapshot to a terminal (redirect stdout or give a FILE)")
    extra = ""
    try:
        with _Progress("entries") as pr:
            if fmt == "rdb":        # issue 26, item 8: storage.ops.rdbfile
                from storage.ops.rdbfile import save_rdb, save_rdb_to_path
                if file == "-":
                    st, notes = save_rdb(store, sys.stdout.buffer, _names(streams), pr)
                else:
                    st, notes = save_rdb_to_path(store, file, _names(streams), pr)
                if notes["idmp"]:
                    extra = "; IDMP history not carried (RDB version 10 has no place for it): %d stream%s" % (
                        notes["idmp"], "" if notes["idmp"] == 1 else "s")
            elif file == "-":
                st = save_(store, sys.stdout.buffer, _names(streams), pr)
            else:
                st = save_to_path(store, file, _names(streams), pr)
    except SnapshotError as e:
        _fail(str(e))
    except BrokenPipeError:
        _fail("output closed before the snapshot was complete")
    except KeyboardInterrupt:
        _interrupted("save", "the snapshot on stdout is incomplete: do not restore it" if file == "-" else
                     "%s was not written (nothing changed; run the save again)" % file)
    _summary("saved", st, extra)


@click.command("restore")
@_quiet_option
@click.argument("file", metavar="FILE", required=False)
@click.option("--replace", is_flag=True, help="Replace streams that already exist in the store.")
@click.option("--check", is_flag=True, help="Only verify FILE (structure and checksum); change nothing.")
@click.option("--from", "from_dir", metavar="DIR",
              help="Restore from a replica directory (xs replicate --to DIR) instead of a FILE.")
@click.option("--at", "at", metavar="TIME",
              help="With --from: the store as it was at TIME, an ISO 8601 time or a duration ago "
                   "(2026-11-27T10:00:00Z, 90s, 1h): its last commit at or before TIME.")
@click.option("--at-id", "at_id", metavar="N", type=click.IntRange(min=0),
              help="With --from: the store as it was after commit number N (see --list).")
@click.option("--list", "list_", is_flag=True, help="With --from: show the commits and times DIR can restore.")
@click.pass_context
def restore(ctx, file, replace, check, from_dir, at, at_id, list_):
    """Restore a snapshot FILE ('-': stdin) into the store.

    The whole file is verified (magic, version, every record, checksum)
    before anything changes, then applied in one transaction: a refused
    or interrupted restore leaves the store as it was.  A stream that
    already exists is refused unless --replace.

    FILE may also be an RDB file written by redis-server (SAVE, BGSAVE;
    RDB versions up to 12): its streams (of database 0) are loaded with
    their groups, pending entries and TTLs; keys of other types, of
    other databases and already expired ones are skipped and counted.

    With --from DIR (a replica directory of xs replicate): the store as
    it was at one commit -- the latest, or the last at or before --at
    TIME, or --at-id N -- with its groups, consumers, pending entries
    (delivery times and counts), IDMP history, TTLs and settings, in one
    transaction.  Into a store without streams; with --replace, every
    stream of the store is replaced (streams made since are removed)."""
    if from_dir is not None or at is not None or at_id is not None or list_:
        return _restore_from(ctx, file, from_dir, at, at_id, list_, replace, check)
    if file is None:
        raise click.UsageError("give a FILE (or --from DIR)")
    from storage.ops.snapshot import SnapshotError, verify
    from storage.ops.snapshot import restore as restore_
    tmp = None
    extra = ""
    try:
        if file == "-":
            from storage.files import temp_file
            fd, tmp = temp_file(_temp_dir(), "xs-restore-", ".snap")
            with os.fdopen(fd, "wb") as f:
                shutil.copyfileobj(sys.stdin.buffer, f, 1 << 20)
            file = tmp
        from storage.ops.rdbfile import is_rdb
        with _Progress("bytes") as pr:
            if is_rdb(file):        # issue 26, item 8: storage.ops.rdbfile
                from storage.ops.rdbfile import restore_rdb, verify_rdb
                if check:
                    st, skipped = verify_rdb(file, pr)
                else:
                    st, skipped = restore_rdb(_store(click.get_current_context(), True), file, replace, pr)
                extra = skipped.text()
            elif check:
                st = verify(file, None, False, pr)
            else:
                st = restore_(_store(click.get_current_context(), True), file, replace, pr)
    except SnapshotError as e:
        _fail(str(e))
    except KeyboardInterrupt:
        _interrupted("restore", "nothing was checked" if check else
                     "the store is as it was: a restore commits all at once, or not at all (run it again)")
    finally:
        if tmp:
            os.unlink(tmp)
    _summary("verified" if check else "restored", st, extra)


def _restore_from(ctx, file, from_dir, at, at_id, list_, replace, check):
    """xs restore --from DIR [--at TIME | --at-id N | --list] (issue 41)."""
    from storage.ops.replicate import ReplicaError, catalog, restore_at
    if from_dir is None:
        raise click.UsageError("--at, --at-id and --list go with --from DIR")
    if file is not None or check:
        raise click.UsageError("--from DIR restores from a replica: no FILE, no --check")
    if at is not None and at_id is not None:
        raise click.UsageError("--at and --at-id: give one")
    if list_ and (at is not None or at_id is not None or replace):
        raise click.UsageError("--list only shows what DIR holds")
    try:
        if list_:
            return _list(catalog(from_dir))
        at_ms = None
        if at is not None:
            from xstream_cli.porcelain.tail import since_ms
            at_ms = since_ms(at)
        store = _store(ctx, True)
        st, seq, when = restore_at(store, from_dir, at_ms, at_id, replace)
    except ReplicaError as e:
        _fail("restore: %s" % e)
    except OSError as e:
        _fail("restore: %s: %s" % (from_dir, e.strerror or e))
    except KeyboardInterrupt:
        _interrupted("restore", "the store is as it was: a restore commits all at once, or not at all "
                     "(run it again)")
    _summary("restored", st, "; commit %d of %s (%s)" % (seq, from_dir, _time_text(when)))


def _time_text(ms):
    import datetime
    return datetime.datetime.fromtimestamp(ms / 1000.0).astimezone().isoformat(timespec="milliseconds") \
        if ms else "the beginning"


def _list(gens):
    if not gens:
        click.echo("no generation yet")
        return
    prev = None
    for g in gens:
        gap = "" if prev is None or (g["follows"] and prev["last_seq"] == g["first_seq"]) else \
            "   (a gap before it: commits %d..%d are not in the replica)" % (prev["last_seq"] + 1,
                                                                            g["first_seq"] - 1) \
            if g["first_seq"] > prev["last_seq"] + 1 else ""
        click.echo("generation %d: commits %d..%d, %s .. %s%s" % (
            g["generation"], g["first_seq"], g["last_seq"], _time_text(g["first_time"]),
            _time_text(g["last_time"]), gap))
        prev = g
    click.echo("restorable: commits %d..%d (--at-id), %s .. %s (--at)" % (
        gens[0]["first_seq"], gens[-1]["last_seq"], _time_text(gens[0]["first_time"]),
        _time_text(gens[-1]["last_time"])))


@click.command("export")
@_quiet_option
@click.argument("streams", nargs=-1, metavar="[STREAM]...")
@click.option("-o", "--output", metavar="FILE", default="-", help="Write to FILE (default: stdout).")
@click.option("--meta", is_flag=True,
              help="Also export stream metadata, IDMP history, groups, consumers and pending entries.")
@click.option("--to", "to_url", metavar="redis://HOST:PORT",
              help="Copy to a live Redis or Valkey instead (entries, metadata, groups, PEL).")
@click.option("--replace", is_flag=True, help="With --to: overwrite keys that exist on the server.")
@click.pass_context
def export(ctx, streams, output, meta, to_url, replace):
    """Export streams (default: all) as JSON lines, or to a live Redis.

    \b
    One line per entry:  {"stream": "s", "id": "1-0", "fields": ["f", "v"]}
    Fields keep their order and duplicates; bytes that are not UTF-8 are
    written as {"b64": "..."}.  --meta adds lines for everything else
    (see docs/snapshot-format.md)."""
    from storage.ops.exchange import ExchangeError, export_jsonl
    from storage.ops.snapshot import SnapshotError
    from xstream_cli.bridge import to_redis
    store = _store(ctx, False)
    try:
        if to_url:
            with _Progress("entries") as pr:
                st, notes = to_redis(store, to_url, _names(streams), replace, pr)
            lost = ", ".join("%d %s" % (n, k) for k, n in notes.items() if n)
            _summary("exported", st, "; not representable on the server: " + lost if lost else "")
            return
        if output == "-":
            out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", errors="surrogateescape",
                                   newline="\n")
            try:
                with _Progress("entries") as pr:
                    st = export_jsonl(store, out, _names(streams), meta, pr)
            finally:
                out.detach()
        else:
            with _replacing(output) as out, _Progress("entries") as pr:
                st = export_jsonl(store, out, _names(streams), meta, pr)
    except (ExchangeError, SnapshotError) as e:
        _fail(str(e))
    except BrokenPipeError:
        # the reader had what it wanted (xs export | head -1), as for
        # XRANGE and tail: quietly, status 0 (the store is unchanged)
        from xstream_cli.context import quiet_exit
        quiet_exit()
    except OSError as e:
        _fail("cannot write %s: %s" % (output, e.strerror or e))
    except KeyboardInterrupt:
        if to_url:
            why = ("the server holds part of the streams: run the export again with --replace "
                   "(the store is unchanged)")
        elif output == "-":
            why = "the output is incomplete (the store is unchanged)"
        else:
            why = "%s was not written (the store is unchanged)" % output
        _interrupted("export", why)
    _summary("exported", st)


@click.command("import")
@_quiet_option
@click.argument("args", nargs=-1, metavar="[FILE|-] | --from URL [STREAM]...")
@click.option("--stream", "stream", metavar="NAME",
              help="Import every line as an entry of the stream NAME (formats jsonl and kv).")
@click.option("--format", "fmt", type=click.Choice(["xs", "jsonl", "kv"]), default=None,
              help="xs: the export shape (default without --stream); jsonl: a JSON object per line "
                   "(default with --stream); kv: field=value words per line.")
@click.option("--id-field", "id_field", metavar="NAME",
              help="With --stream: the member / field holding the entry ID (ms-seq or *); default: new IDs (*).")
@click.option("--skip-existing", is_flag=True,
              help="Skip entries whose ID the stream already holds with the same fields (re-run an "
                   "interrupted import).")
@click.option("--from", "from_url", metavar="redis://HOST:PORT",
              help="Copy from a live Redis or Valkey instead; then the arguments are stream names.")
@click.option("--replace", is_flag=True, help="With --from: replace streams that exist in the store.")
@click.option("--batch", default=10000, show_default=True, type=click.IntRange(min=1),
              help="Entries per transaction.")
@click.pass_context
def import_(ctx, args, stream, fmt, id_field, skip_existing, from_url, replace, batch):
    """Import entries from FILE or stdin: JSON lines as written by xs
    export, or with --stream, plain JSON objects or field=value lines.

    \b
    --format xs     {"stream": "s", "id": "1-1", "fields": ["f", "v"]}
                    (and the --meta lines of xs export); IDs are kept.
    --format jsonl  {"user": "u1", "n": 3} per line, into --stream NAME:
                    members in order, duplicates kept; numbers as
                    written, true/false as words, arrays and objects
                    as JSON text; null is an error.
    --format kv     user=u1 n=3 per line, into --stream NAME, split as
                    redis-cli splits: note="two words" quoted,
                    \\xHH escapes in double quotes; a field name
                    cannot hold "=".
    \b
    IDs are new (as XADD *) unless --id-field NAME names the member or
    field that holds them; an explicit ID must be above the stream's
    last ID, or, with --skip-existing, is skipped if the stream already
    holds it with the same fields (an error if with other fields) or no
    longer holds it (deleted or trimmed since).  So an interrupted
    import of explicit IDs (an export) can be re-run to completion;
    one with new IDs cannot (it would add the entries again).
    \b
    One transaction per --batch entries (a batch ends early when the
    input pauses: what arrived is committed).  On an error (a malformed
    line, a refused ID) the import stops with the line's number (every
    physical line counts) and exit 1: the batches before the one
    holding that line stay imported, the message says up to which
    line; nothing from that batch on is.  With --from, copy streams
    from a live Redis: entries, metadata, groups, consumers, pending
    entries."""
    from storage.ops.exchange import ExchangeError, import_lines
    from xstream_cli.bridge import from_redis
    from xstream_cli.splitargs import split_line
    if from_url and (stream or fmt or id_field or skip_existing):
        raise click.UsageError("--from copies from Redis: --stream, --format, --id-field and --skip-existing "
                               "are for files")
    if not from_url and len(args) > 1:
        raise click.UsageError("give one FILE (or - for stdin)")
    fmt_given = fmt
    if fmt is None:
        fmt = "jsonl" if stream else "xs"
    if fmt == "xs" and (stream or id_field):
        raise click.UsageError("--format xs takes the stream and ID from each line: --stream and --id-field "
                               "are for --format jsonl or kv")
    if fmt != "xs" and not stream:
        raise click.UsageError("--format %s needs --stream NAME" % fmt)
    if stream == "":
        raise click.UsageError("--stream needs a name")
    file = args[0] if args and not from_url else "-"
    store = _store(ctx, True)
    try:
        if from_url:
            names = list(args) or None
            with _Progress("entries") as pr:
                st = from_redis(store, from_url, _names(names), replace, pr)
        else:
            f = sys.stdin.buffer if file == "-" else open(file, "rb")
            try:
                with _Progress("lines") as pr:
                    st = import_lines(store, f, fmt, os.fsencode(stream) if stream else None, id_field,
                                      skip_existing, batch, pr, split_line)
            finally:
                if file != "-":
                    f.close()
    except ExchangeError as e:
        _fail(str(e) + ("" if from_url or skip_existing else _skip_existing_hint(e)))
    except OSError as e:
        _fail("cannot read %s: %s" % (file, e.strerror or e))
    except KeyboardInterrupt as e:
        again = _import_command(ctx, file, stream, fmt_given, id_field, skip_existing, from_url, replace, batch,
                                list(args))
        _interrupted("import", _import_resume(e, file, from_url, fmt == "xs" or id_field is not None, again))
    extra = ""
    if getattr(st, "skipped", 0) or getattr(st, "below", 0):
        extra = "; skipped %d already there" % st.skipped
        if st.below:
            extra += ", %d below the stream's last ID and not there (deleted or trimmed)" % st.below
    _summary("imported", st, extra)


def _skip_existing_hint(e):
    """After an import refused an explicit ID at or below a stream's last
    ID (the stream holds entries already: a second import of the same
    export, an import into a restored copy): how to skip them."""
    if "is equal or smaller than the stream's last ID" not in getattr(e, "reason", ""):
        return ""
    return "; to skip the entries the stream already holds, run it again with --skip-existing"


def _interrupted(verb, why):
    """Ctrl-C: say what stays and how to go on, exit 130."""
    _fail("%s: interrupted; %s" % (verb, why), context.EXIT_INTERRUPTED)


def _import_command(ctx, file, stream, fmt, id_field, skip_existing, from_url, replace, batch, names):
    """The words of the import the user ran, with every option they gave
    (the store always named, so the line works from any shell): a
    function of the words to add (``extra``) and of the input."""
    g = ctx.find_root().obj or context.Globals()
    head = ["xs", "--db", context.db_path(g)] + ([] if g.durable else ["--no-sync"]) + ["import"]
    opts = []
    if from_url:
        opts += ["--from", _url_without_password(from_url)]
    if stream:
        opts += ["--stream", stream]
    if fmt:
        opts += ["--format", fmt]
    if id_field is not None:
        opts += ["--id-field", id_field]
    if batch != 10000:
        opts += ["--batch", str(batch)]

    def command(extra, source):
        import shlex
        words = head + opts + [w for w in extra if w not in opts]
        if skip_existing and "--skip-existing" not in words:
            words.append("--skip-existing")
        if replace and "--replace" not in words:
            words.append("--replace")
        return " ".join(shlex.quote(w) for w in words + source)
    return command


def _url_without_password(url):
    """``redis://user:secret@host`` with the password left out (it is not
    written to a terminal or a log): ``redis://user:PASSWORD@host``."""
    import re
    return re.sub(r"^([a-z]+://[^:@/]*:)[^@/]*@", r"\1PASSWORD@", url)


def _import_resume(e, file, from_url, ids_kept, again):
    """What an interrupted import left, and the whole command that
    finishes it without importing anything twice (``again``: see
    _import_command)."""
    if from_url:
        cmd = again(["--replace"], [])
        if "PASSWORD@" in cmd and "PASSWORD@" not in from_url:
            cmd += "   (your password in place of PASSWORD)"
        return "streams copied so far stay in the store; to copy them whole, run: %s" % cmd
    committed = getattr(e, "committed", None)
    src = [file]
    fed = "" if file != "-" else " (with the same input on stdin)"
    if committed is None:
        return "nothing was imported"
    if not committed:
        return "nothing was imported; run it again: %s%s" % (again([], src), fed)
    kept = "%s imported (%d entr%s)" % ("line 1 stays" if committed == 1 else "lines 1-%d stay" % committed,
                                         e.entries, "y" if e.entries == 1 else "ies")
    if ids_kept:
        return "%s; to finish, run the same import again with --skip-existing: %s%s" % (
            kept, again(["--skip-existing"], src), fed)
    import shlex
    rest = "tail -n +%d %s" % (committed + 1, "FILE" if file == "-" else shlex.quote(file))
    return ("%s; the IDs were new, so running it again would add them twice: import the rest with "
            "%s | %s%s" % (kept, rest, again([], ["-"]),
                           " (FILE: the input that was on stdin)" if file == "-" else ""))


def register(cli):
    for cmd in (save, restore, export, import_):
        cli.add_command(cmd)
