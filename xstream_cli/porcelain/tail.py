"""xs tail: print the last entries of streams and follow new ones.

    xs tail [-f] [-n N | --since WHEN | --from ID] [-c N]
            [--group G --consumer C [--start ID] [--no-ack]] [--json] STREAM...

Without a group: the last N entries (default 10) of EACH STREAM, merged
oldest first in ID order (``-n 2 a b`` prints up to four lines); with
-f, then every new entry as it is committed (the watch is armed before
the first read, so nothing is missed between the two).  A STREAM given
twice counts once.

--since WHEN prints every entry since WHEN (IDs from ``<WHEN in ms>-0``):
a duration back from now (90s, 30m, 1h30m, 7d) or an ISO 8601 date or
time (``2026-11-27``: its midnight; ``2026-11-27T10:00[:SS[.fff]]``; with
``Z`` or an offset such as ``+01:00``; without them, local time, as the
TZ variable says) -- anything else is a usage error naming both forms;
--from ID every entry from ID on, instead of the last N (a long history
is read and written a page at a time); -c N stops after N entries in
all, -f or not (kcat's -o s@ and -c, nats's --since and --count).
--since and --from go without --group.

A STREAM that does not exist is an error ("xs: no such stream: NAME" on
stderr), like tail(1) with a missing file: the streams that exist are
still printed, and the status is 1.  With -f it is not an error: following
a stream before its first XADD is legitimate, so xs tail waits for it
(saying so on stderr when stderr is a terminal) -- and for the store
too, when it does not exist yet: a consumer may start before the first
producer, and creates nothing.

With --group G --consumer C: entries are read through the group like
XREADGROUP -- first this consumer's own pending entries (left by a run
that was interrupted before acknowledging, or by --no-ack), then new
ones (">") -- and each is acknowledged (XACK) once its line has been
written and flushed, and, when stdout is a pipe, taken out of the pipe
by the reader (a pipe holds 64 KiB: a reader that dies leaves what it
did not read pending).  A write that fails (the reader is gone) stops
xs tail: that entry and the rest stay pending.  --no-ack acknowledges
nothing: entries are still delivered (they enter the consumer's pending
list, as XREADGROUP does).  How many: -n N (default 10), at most N
entries of each stream, from what the group has now, without waiting;
-c N, the next N entries in all, waiting for them as -f does, then exit
0 (kcat -G g -c N, nats consumer next --count N; the streams are read in
turn, never more than is left to take, so no entry is delivered that is
not printed); -f, everything, for ever.  -n goes with neither -f nor -c.
A group that does not exist is created on each STREAM, as ``XGROUP
CREATE STREAM G ID MKSTREAM`` does, at --start, and a line on stderr
says so with the start used.  The default start is $ (new entries only:
tail -f's habit, and a group started by a look at a busy stream does not
pour out its history); xs worker's is 0 (everything already there: a
queue's jobs written before the first worker must not be skipped).  A
reader
can still take a line and then fail to process it: for at-least-once
processing (ack after the handler succeeded, retries, dead letters) use
``xs worker``.

Output, one entry per line:
  terminal  the stream (one colour per stream), then the entry exactly
            as XRANGE shows it (xstream_cli.output.pretty): ID, its time
            in UTC, field=value pairs quoted where needed and wrapped to
            the terminal's width by display cells; characters that are
            not printable are shown as escapes; no colour with NO_COLOR;
  --json    the entry shape of xs export / xs import, one object per line:
              {"stream": "s", "id": "1-0", "fields": ["f1", "v1", "f2", "v2"]}
            fields in order, duplicates kept; a name or value that is not
            valid UTF-8 is {"b64": "<base64>"} (lossless; xs import takes
            these lines back);
  piped     raw lines:  STREAM ID FIELD=VALUE FIELD=VALUE ...
            STREAM, FIELD and VALUE are UTF-8 text, written bare when they
            are made of printable characters other than space, quotes,
            backslash and (STREAM and FIELD only) '='; otherwise in double
            quotes, where printable characters (space, non-ASCII letters)
            stay as they are and the rest take redis-cli escapes (\\n \\r
            \\t \\a \\b \\" \\\\, \\xHH for each byte of a control or other
            non-printable character and for each byte that is not valid
            UTF-8).  So ``grep München`` finds München, the first '='
            outside quotes ends the field, and a line never holds a raw
            newline or control character.

Ctrl-C ends quietly, as a process killed by SIGINT (the shell's status
130, as every read does), a closed pipe (``| head``) with status 0:
with -f, a reader that goes away ends the wait at once.
"""
import os
import re
import sys

import click

from storage.ids import MAX_ID, MIN_ID
from storage.options import IdsOptions, RangeOptions, ReadOptions
from xstream_cli import context
from xstream_cli.output.render import terminal_text as _text  # one owner of terminal escaping
from xstream_cli.output.reply import entry_reply
from xstream_cli.porcelain.tail_output import (
    _Closed,
    _Out,
    _WriteError,
    json_line,
    raw_line,
    raw_token,  # noqa: F401 (re-exported: xs ls takes it from here)
)

BATCH = 1000                   # entries per read transaction while following


# ------------------------------------------------------------------ reading

def _id_key(row):
    """A row's (stream, storage.info.Entry) sort key: the entry's ID."""
    return row[1].id


def _last_entries(tx, keys, n):
    """The last ``n`` entries of each of ``keys``, merged oldest first,
    the streams' last IDs (where following starts) and the keys that do
    not exist."""
    rows = []
    after = []
    missing = []
    for k in keys:
        last = tx.last_generated_id(k)
        if last is None:
            missing.append(k)
        after.append(last if last is not None else MIN_ID)
        if n and last is not None:
            rows += [(k, e) for e in tx.range(k, RangeOptions(MIN_ID, MAX_ID, n, True)) or ()]
    rows.sort(key=_id_key)
    return rows, after, missing


def _history_from(store, keys, start):
    """The entries of ``keys`` from ``start`` ((ms, seq), inclusive) to
    each stream's last ID when this is called, merged in ID order and
    read a page of BATCH at a time per stream (a long history is never
    held whole); returns (rows iterator, the streams' last IDs, the keys
    that do not exist)."""
    import heapq

    def lasts(tx):
        return [tx.last_generated_id(k) for k in keys]
    ends = store.run(lasts, write=False)
    missing = [k for k, e in zip(keys, ends) if e is None]

    def pages(k, end):
        lo = start
        while lo <= end:
            ents = store.run(lambda tx: tx.range(k, RangeOptions(lo, end, BATCH, False)), write=False) or ()
            for e in ents:
                yield _id_key((k, e)), k, e
            if len(ents) < BATCH:
                return
            ms, seq = ents[len(ents) - 1].id
            lo = (ms, seq + 1) if seq < MAX_ID[1] else (ms + 1, 0)
    merged = heapq.merge(*[pages(k, e) for k, e in zip(keys, ends) if e is not None])
    return ((k, e) for _, k, e in merged), [e if e is not None else MIN_ID for e in ends], missing


def _new_entries(tx, keys, after):
    rows = []
    for k, ents in tx.read_streams(ReadOptions(tuple(keys), tuple(after), BATCH)):
        rows += [(k, e) for e in ents]
    rows.sort(key=_id_key)
    return rows


def _group_read(tx, keys, group, consumer, ids, count):
    """XREADGROUP ... STREAMS keys ids: rows sorted by ID."""
    o = ReadOptions(tuple(keys), tuple(ids), count, None, 0, 0, group, consumer, False, None)
    rows = []
    for k, ents in tx.read_group(o):
        rows += [(k, e) for e in ents]
    rows.sort(key=_id_key)
    return rows


def _ack(tx, group, rows):
    by = {}
    for k, e in rows:
        by.setdefault(k, []).append(e.id)
    for k, ids in by.items():
        tx.ack(k, group, IdsOptions(tuple(ids), len(ids)))


# ------------------------------------------------------------------ command

def _follow(store, keys, n, follow, out, line, start=None, count=None):
    """Without a group: the last ``n`` entries of each stream, or with
    ``start`` every entry from that ID on; then (``follow``) new ones;
    at most ``count`` lines in all.  Returns the exit status."""
    if start is None:
        rows, after, missing = store.run(lambda tx: _last_entries(tx, keys, n), write=False)
    else:
        rows, after, missing = _history_from(store, keys, start)
    status = 1 if missing and not follow else 0
    if missing and (status or sys.stderr.isatty()):
        for k in missing:
            sys.stderr.write(("xs: no such stream: %s\n" if status else
                              "xs: no such stream (yet): %s; waiting for it\n") % _text(k))
        sys.stderr.flush()
    left = [count]

    def emit(rows):
        """Write ``rows`` (at most what --count leaves); False once
        --count is reached."""
        rows = list(rows)
        if left[0] is not None:
            rows = rows[:left[0]]
            left[0] -= len(rows)
        if rows and not out.write(b"".join(line(k, entry_reply(e)) for k, e in rows)):
            raise _Closed
        return left[0] is None or left[0] > 0

    if start is None:
        more = emit(rows)
    else:
        more = True
        page = []
        for r in rows:                       # a long history: written as it is read
            page.append(r)
            if len(page) >= BATCH:
                more = emit(page)
                page = []
                if not more:
                    break
        if more and page:
            more = emit(page)
    if not follow or not more:
        return status
    pos = [after]

    def follow_(woken):
        """Print what came after ``pos``; None when there is no more
        (0 once --count lines were printed)."""
        while True:
            rows = store.run(lambda tx: _new_entries(tx, keys, pos[0]), write=False)
            if not rows:
                return None
            last = {}
            for k, e in rows:
                last[k] = e.id
            pos[0] = [last.get(k, a) for k, a in zip(keys, pos[0])]
            if not emit(rows):
                return 0
    return _wait(store, keys, follow_, out)


def _wait(store, keys, attempt, out):
    """storage.blocking's one wait loop, until ``attempt`` returns a status
    (never, for -f without a group) or stdout's reader goes away."""
    from storage.blocking import Cancelled, wait_until
    try:
        return wait_until(store, keys, attempt, hangup_fds=out.watch())
    except Cancelled:
        raise _Closed


def _through_group(store, keys, n, follow, group, consumer, ack, out, line, count=None):
    """With a group: history first, then new entries; each entry
    acknowledged once the reader has its line (unless not ``ack``).
    ``count``: take that many entries in all, waiting for them as -f
    does, then stop (kcat -G -c N, nats consumer next --count N)."""
    pos = {k: MIN_ID for k in keys}      # this consumer's pending entries first, then b">"
    left = {k: n for k in keys}          # without -f: entries still to print per stream
    total = [count]

    def deliver(rows):
        taken = []
        try:
            for k, e in rows:
                if e[1] is None:         # deleted while pending: nothing to show; left pending
                    continue
                if not out.put(line(k, entry_reply(e))):
                    raise _Closed
                taken.append((k, e))
        finally:
            if ack and taken:
                store.run(lambda tx: _ack(tx, group, taken), write=True)

    def rounds(woken):
        """Read and deliver until nothing is left: 0 when done, None to
        wait for more (-f)."""
        while True:
            active = [k for k in keys if follow or left[k] > 0]
            if not active:
                return 0
            count = BATCH if follow else min(BATCH, min(left[k] for k in active))
            ids = [pos[k] for k in active]
            rows = store.run(lambda tx: _group_read(tx, active, group, consumer, ids, count), write=True)
            seen = set()
            for k, e in rows:
                seen.add(k)
                if pos[k] != b">":
                    pos[k] = e.id
                if not follow and e[1] is not None:
                    left[k] -= 1
            history_done = [k for k in active if pos[k] != b">" and k not in seen]
            for k in history_done:
                pos[k] = b">"
            if rows:
                deliver(rows)
                continue
            if history_done:
                continue                 # now the new entries of those streams
            return None if follow else 0
    def counted(woken):
        """-c N: read each stream in turn, never more than what is left
        to take (so no entry is delivered that is not printed): 0 once N
        entries were printed, None to wait for more."""
        while True:
            progress = False
            for k in keys:
                if total[0] <= 0:
                    return 0
                rows = store.run(lambda tx: _group_read(tx, [k], group, consumer, [pos[k]],
                                                        min(BATCH, total[0])), write=True)
                if pos[k] != b">":
                    if not rows:
                        pos[k] = b">"            # own pending entries done: now new ones
                        progress = True
                        continue
                    pos[k] = rows[len(rows) - 1][1].id
                if rows:
                    progress = True
                    total[0] -= sum(1 for _, e in rows if e[1] is not None)
                    deliver(rows)
            if total[0] <= 0:
                return 0
            if not progress:
                return None
    if count is not None:
        return _wait(store, keys, counted, out)
    if not follow:
        return rounds(False)
    return _wait(store, keys, rounds, out)


_ISO = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
                  r"(Z|[+-]\d{2}(?::?\d{2})?)?)?", re.IGNORECASE)
_SINCE_FORMS = ("a duration back from now (500ms, 90s, 30m, 12h, 7d, 1h30m) or an ISO 8601 time or date "
                "(2026-11-27, 2026-11-27T10:00, 2026-11-27T10:00:00.250Z, 2026-11-27T10:00+01:00; without Z "
                "or an offset it is local time)")


def since_ms(text, now=None):
    """--since WHEN as a ms time: a duration back from ``now`` (seconds;
    default: the clock), or an ISO 8601 date or time (``2026-11-27``:
    its midnight; ``2026-11-27T10:00[:SS[.fff]]``, a space for T
    allowed; ``Z`` or ``+HH:MM`` / ``+HHMM`` / ``+HH``; naive: local
    time, as date(1) and nats read it).  Anything else: exit 2 naming
    both forms."""
    import datetime
    import time

    from xstream_cli.porcelain.durations import parse_duration
    t = (text or "").strip()
    if re.fullmatch(r"(?:\d+(?:ms|s|m|h|d|w))+", t.lower()):
        now = time.time() if now is None else now
        return max(0, int(now * 1000) - parse_duration("--since", t))
    m = _ISO.fullmatch(t)
    if m is None:
        context.fail("--since: bad value %r: give %s" % (text, _SINCE_FORMS), context.EXIT_USAGE)
    y, mo, d, hh, mm, ss, frac, tz = m.groups()
    try:
        micro = int((frac or "0")[:6].ljust(6, "0"))
        zone = None
        if tz:
            if tz.upper() == "Z":
                zone = datetime.timezone.utc
            else:
                digits = tz[1:].replace(":", "")
                off = datetime.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
                zone = datetime.timezone(-off if tz[0] == "-" else off)
        when = datetime.datetime(int(y), int(mo), int(d), int(hh or 0), int(mm or 0), int(ss or 0), micro,
                                 tzinfo=zone)
        ms = int(when.timestamp() * 1000)      # naive: local time (mktime)
    except (ValueError, OverflowError, OSError) as e:
        context.fail("--since: bad time %r (%s): give %s" % (text, e, _SINCE_FORMS), context.EXIT_USAGE)
    return max(0, ms)


def start_text(start, default_why):
    """How a group's start reads in the line that says it was created."""
    if start == b"$":
        what = "$: new entries only"
    elif start == (0, 0):
        what = "0: every entry already there"
    else:
        what = "%d-%d" % start
    return "%s%s" % (what, default_why)


def _ensure_groups(store, keys, group, start, start_given):
    """Create ``group`` at ``start`` on each stream that lacks it (and
    the stream, as MKSTREAM does), saying so on stderr with the start
    used; exit 1 with the reason if it cannot."""
    from storage.errors import RedisError
    from storage.ops.worker import ensure_group
    from storage.txn import StoreFailure
    why = "" if start_given else ", the default of xs tail; --start 0 reads what is there"
    for k in dict.fromkeys(keys):
        try:
            made = ensure_group(store, k, group, start)
        except RedisError as e:
            context.fail(e.text)
        except StoreFailure as e:
            context.fail(str(e))
        if made:
            try:
                sys.stderr.write("xs: tail: created group %s on stream %s at %s\n"
                                 % (_text(group), _text(k), start_text(start, why)))
                sys.stderr.flush()
            except (OSError, ValueError):
                pass


def run_tail(store, keys, n, follow, group, consumer, line, ack=True, start=None, count=None):
    """The loop of ``xs tail``; ``line(stream, entry) -> bytes``;
    ``start``: print from this ID on instead of the last ``n``;
    ``count``: stop after that many lines.  Returns the exit status."""
    from storage.errors import RedisError
    keys = list(dict.fromkeys(keys))
    out = _Out(confirm=group is not None and ack)
    try:
        if group is None:
            return _follow(store, keys, n, follow, out, line, start, count)
        return _through_group(store, keys, n, follow, group, consumer, ack, out, line, count)
    except _Closed:
        context.quiet_exit()
    except RedisError as e:
        sys.stderr.write("%s\n" % e.text)
        return 1
    except _WriteError as e:
        try:
            sys.stderr.write("xs: cannot write output: %s\n" % e)
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        context.quiet_exit(context.EXIT_ERROR)


def register(cli):
    @cli.command("tail")
    @click.option("-f", "--follow", is_flag=True, help="Keep printing new entries as they arrive.")
    @click.option("-n", "--lines", "n", type=click.IntRange(min=0), default=None,
                  metavar="N", help="How many of the last entries of each stream to print first (default 10); "
                                    "with --group and no -f: at most N of each stream, from what is there.")
    @click.option("--since", metavar="WHEN",
                  help="Print every entry since WHEN instead of the last N: a duration back from now (90s, "
                       "30m, 1h, 7d) or an ISO 8601 time or date (2026-11-27, 2026-11-27T10:00, with Z or "
                       "+01:00; without them: local time).")
    @click.option("--from", "from_", metavar="ID",
                  help="Print every entry from ID on (an ID or a ms time) instead of the last N.")
    @click.option("-c", "--count", type=click.IntRange(min=1), metavar="N",
                  help="Stop after N entries in all (with -f too), then exit 0; with --group: take the "
                       "next N through the group, waiting for them as -f does.")
    @click.option("--group", metavar="G",
                  help="Read through consumer group G (XREADGROUP), acking each entry its reader took.")
    @click.option("--consumer", metavar="C", help="Consumer name within the group (with --group).")
    @click.option("--start", metavar="ID",
                  help="With --group: where a group that does not exist yet starts: $ (the default, "
                       "as tail -f: new entries only), 0 (everything already there: xs worker's default) "
                       "or an ID.  Creating it is said on stderr.")
    @click.option("--no-ack", "no_ack", is_flag=True,
                  help="With --group: acknowledge nothing (entries stay in the consumer's pending list).")
    @click.option("--json", "json_", is_flag=True,
                  help='One JSON object per entry, as xs export writes: {"stream", "id", "fields": [f, v, ...]}.')
    @click.argument("streams", nargs=-1, required=True)
    @click.pass_obj
    def tail(obj, follow, n, since, from_, count, group, consumer, start, no_ack, json_, streams):
        """Print the last entries of STREAMs; with -f follow new ones.

        \b
        -n N is per stream: the last N entries of each STREAM, merged in
        ID order.  A missing STREAM is an error (exit 1, after printing
        the others); with -f, xs tail waits for it to be created.
        \b
        Pretty on a terminal; --json: one line per entry in the shape of
        xs export (fields as a list [f, v, ...], duplicates kept; bytes
        that are not UTF-8 as {"b64": ...}); piped: raw lines
          STREAM ID FIELD=VALUE ...
        STREAM, FIELD, VALUE are UTF-8 text, bare when made of printable
        characters other than space, quotes, backslash and, for STREAM
        and FIELD, '='; otherwise double-quoted, with redis-cli escapes
        (\\n, \\", \\xHH) for control characters and bytes that are not
        UTF-8.
        \b
        With --group/--consumer, entries are read through the group (this
        consumer's pending ones first) and each is acknowledged once its
        line was written, flushed and, on a pipe, read by the reader; if
        the reader goes away, the rest stay pending.  -n N: at most N of
        each stream, from what is there (no waiting); -c N: the next N
        in all, waiting for them; -f: everything, for ever.  A missing
        group is created at --start, by default $ (new entries only, as
        tail -f; xs worker's default is 0, every entry, as a queue
        needs), and stderr says so.  --no-ack leaves every entry
        pending.  xs tail cannot know that the reader processed a line:
        for at-least-once processing use xs worker.
        Ctrl-C ends quietly as killed by SIGINT (status 130), a closed
        pipe with 0.
        """
        if (group is None) != (consumer is None):
            raise click.UsageError("--group and --consumer go together")
        if no_ack and group is None:
            raise click.UsageError("--no-ack goes with --group and --consumer")
        if start is not None and group is None:
            raise click.UsageError("--start goes with --group and --consumer")
        if since is not None and from_ is not None:
            raise click.UsageError("--since and --from: give one")
        if (since is not None or from_ is not None) and n is not None:
            raise click.UsageError("-n and --%s: give one (-n is the last N, --%s is every entry from a point)"
                                   % (("since",) * 2 if since is not None else ("from",) * 2))
        if group is not None and (since is not None or from_ is not None):
            raise click.UsageError("--since and --from go without --group (the group says where it "
                                   "starts; --start, for a group that does not exist yet)")
        if group is not None and n is not None and (follow or count is not None):
            raise click.UsageError("with --group, -n N takes at most N of each stream from what is there, "
                                   "then exits: it goes without %s (-c N: the next N in all, waiting for "
                                   "them; -f: everything, for ever)" % ("-f" if follow else "-c"))
        history = None
        if since is not None:
            history = (since_ms(since), 0)
        elif from_ is not None:
            from storage.errors import RedisError
            from storage.ids import parse_range_id
            try:
                history = parse_range_id(os.fsencode(from_), 0, True)
            except RedisError:
                raise click.UsageError("bad --from ID: %s (an ID such as 1700000000000-0, or a ms time)" % from_)
        if n is None:
            n = 10
        start_id = b"$"
        if start not in (None, "$"):
            from storage.errors import RedisError
            from storage.ids import parse_id
            try:
                start_id = parse_id(os.fsencode(start), strict=True)
            except RedisError:
                raise click.UsageError("bad --start ID: %s (an ID such as 0 or 1700000000000-0, or $)" % start)
        g = obj or context.Globals()
        mode = "json" if json_ or g.mode == "jsonl" else context.resolve_mode(g.mode)
        keys = [os.fsencode(s) for s in streams]
        if mode == "json":
            line = json_line
        elif mode == "pretty":
            from xstream_cli.output.pretty import EntryLines
            line = EntryLines(keys)
        else:
            line = raw_line
        if follow and not context.store_exists(g):
            try:
                context.wait_for_store(g)       # started before the first write: wait, creating nothing
            except KeyboardInterrupt:
                sys.exit(context.EXIT_INTERRUPTED)
        store = context.open_store(g, create=False)     # a read: a missing store is an error
        try:
            if group is not None:
                _ensure_groups(store, keys, os.fsencode(group), start_id, start is not None)
            code = run_tail(store, keys, n, follow,
                            None if group is None else os.fsencode(group),
                            None if consumer is None else os.fsencode(consumer), line, not no_ack,
                            history, count)
        except KeyboardInterrupt:
            code = context.EXIT_INTERRUPTED      # Ctrl-C: 130, as the man page says
        sys.exit(code)
