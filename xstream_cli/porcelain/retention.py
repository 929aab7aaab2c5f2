"""xs trim: time- and length-based retention, and idle consumers, for
cron jobs and people (the module is named for what it does: XTRIM
itself is storage/verbs/trim.py).

    xs trim [STREAM|GLOB...] [--max-age DURATION] [--max-len N] [--approx] [--drop-unacked]
            [--idle-consumers DURATION] [--dry-run] [-q] [--json]

No STREAM: every stream.  A GLOB (KEYS syntax: * ? [abc] \\x) selects the
streams it matches, perhaps none; a name without glob characters must
exist: if one does not, xs trim says so ("xs: no such stream: NAME")
and exits 1 before changing anything.

--max-age D removes the entries older than D: XTRIM MINID with the ID
``<now - D>-0`` (now read once, so every stream gets the same cutoff);
--max-len N keeps the last N entries (XTRIM MAXLEN); with both, an entry
goes if either says so.  --approx trims as ``~`` does: whole nodes of
100 entries only, so a few more entries than asked may stay.

Work no group has done stays (the default, for every stream with
consumer groups): such a stream is trimmed with ACKED (Redis 8.2), so an
entry some group has not acknowledged -- not yet delivered to it, or
pending in it -- is kept, and the report counts them group by group.
Why this default: retention runs unattended from cron, and a trim that
deletes entries before a group has processed them loses work silently,
while keeping them only costs space that the same report points at
(an abandoned group shows up there night after night: delete it, or
trim with --drop-unacked).  ACKED looks at entries one by one and
ignores ``~``, as Redis does.  --drop-unacked trims with KEEPREF, as
XTRIM does by default (pending entries that point at trimmed entries
stay pending), and says on stderr, even with -q, what it took from each
group.  Streams without groups are trimmed with KEEPREF either way.
The counts are taken when a stream's trim starts.  DURATION is a number
and a unit: 500ms, 90s, 30m, 12h, 7d, 2w, or a sum such as 1h30m; a bad
one is a usage error (exit 2).

Streams whose TTL has passed (EXPIRE) are already gone for every
command; xs trim also removes what is left of them on disk (a writer
removes a few at a time) and says how many (``expired: removed 3
streams past their TTL``; "expired_streams" in --json).

--idle-consumers D deletes, in every group of the selected streams, the
consumers idle longer than D (XINFO CONSUMERS' idle: since the last read
or claim attempt) that own no pending entries (XGROUP DELCONSUMER, which
for them drops nothing).  A consumer with pending entries is never
deleted, however idle: its entries would be lost to the group.

Transactions.  Each stream is trimmed in write transactions of its own,
each removing at most 10000 entries (Redis's default LIMIT for ``~``),
repeated until nothing more goes: LMDB has one writer at a time, so a
nightly trim of a million entries holds producers up for one batch at a
time, never for the whole job, and a failure (a full disk) leaves every
finished batch done.  Nothing is gained by one transaction for all:
retention is idempotent, and the next run finishes what one left.  An
exact trim ends with one exact XTRIM, so the result is exactly what
XTRIM MINID / MAXLEN would leave.  The idle-consumer check and the
deletions of one stream are one transaction, so a consumer that becomes
busy meanwhile is never deleted.  --dry-run reads everything in one read
transaction and changes nothing.

Output: a line per stream and a total,

    events: removed 1200, 3400 left
    total: removed 1200 from 1 stream, 3400 left

(``would remove`` with --dry-run; ``; kept 7 not acknowledged (group
mailer: 5 not yet delivered, 2 pending)`` when groups held entries back,
which -q still says on stderr, one line per stream, so that cron mails
it: ``xs: events: kept 7 not acknowledged (group mailer: ...)``;
``; deleted idle consumers g/c1, g/c2`` when there were some).  -q prints nothing when all is well, so cron
mails only failures (on stderr, exit 1).  --json: one JSON object,
{"dry_run", "drop_unacked", "removed", "left", "kept",
"consumers_deleted", "expired_streams", "streams": [{"stream", "removed", "left", "kept",
"groups": [{"group", "undelivered", "pending"}], "consumers_deleted":
[{"group", "consumer", "idle_ms"}]}]}.
"""
import os
import time

import click

from xstream_cli import context
from xstream_cli.porcelain.ls import (
    emit_json,
    fail_missing,
    json_text,
    open_existing,
    parse_duration,
    select_streams,
    show,
)

BATCH = 10000            # entries per write transaction (Redis's default LIMIT for ~)
REAP_BATCH = 100         # expired streams removed per write transaction


# ------------------------------------------------------------------ trimming

def _criteria(minid, maxlen):
    out = []
    if minid is not None:
        out.append(("minid", minid))
    if maxlen is not None:
        out.append(("maxlen", maxlen))
    return out


def trim_stream(store, name, minid, maxlen, approx, keep=True):
    """Trim one stream in batches of at most BATCH entries per criterion
    and transaction (``~`` trims with LIMIT), while a batch was cut
    short by its limit; an exact trim ends with exact XTRIMs in the
    last transaction.  ``keep``: a stream with consumer groups is
    trimmed with ACKED (an entry some group has not acknowledged stays),
    decided in each transaction, so work delivered or added meanwhile is
    kept too.  Returns (removed, left).  Producers adding entries
    meanwhile cannot keep it going: only a full batch asks for another."""
    from storage.options import ACKED, KEEPREF, TrimOptions
    from storage.verbs.trim import NODE_ENTRIES
    crit = _criteria(minid, maxlen)

    def batch(tx):
        policy = ACKED if keep and tx.group_names(name) else KEEPREF
        counts = [tx.trim(name, TrimOptions(s, t, approx=True, limit=BATCH, policy=policy)) for s, t in crit]
        more = any(c > BATCH - NODE_ENTRIES for c in counts)     # stopped by LIMIT, not by the threshold
        n = sum(counts)
        if not more and not approx:
            n += sum(tx.trim(name, TrimOptions(s, t, policy=policy)) for s, t in crit)
        return n, more, tx.length(name)

    removed = 0
    while True:
        n, more, left = store.run(batch, write=True)
        removed += n
        if not more:
            return removed, left


def _idle_consumers(tx, name, idle_ms, delete):
    """The consumers of ``name`` idle longer than ``idle_ms`` that own no
    pending entries, deleted if ``delete``: [(group, consumer, idle)]."""
    out = []
    for group in tx.group_names(name):
        for c in tx.consumers_info(name, group):
            if c.idle > idle_ms and c.pending == 0:
                if delete:
                    tx.delete_consumer(name, group, c.name)
                out.append((group, c.name, c.idle))
    return out


def gc_consumers(store, name, idle_ms):
    return store.run(lambda tx: _idle_consumers(tx, name, idle_ms, True), write=True)


def preview(tx, names, minid, maxlen, approx, idle_ms, keep=True):
    """--dry-run: [Result] from one read transaction."""
    out = []
    for name in names:
        r = Result(name, 0, tx.length(name))
        if minid is not None or maxlen is not None:
            r.look(tx, minid, maxlen, approx, keep)
            r.removed = r.selected - r.kept
            r.left = r.length - r.removed
        r.gone = _idle_consumers(tx, name, idle_ms, False) if idle_ms is not None else []
        out.append(r)
    return out


class Result:
    """One stream's trim: ``removed`` entries, ``left`` after; of the
    ``selected`` entries the criteria pick, ``kept`` stayed because a
    group still needs them (``keep``), and ``groups`` [GroupWork] says
    which groups had work among them (kept, or removed with
    --drop-unacked); ``gone``: idle consumers deleted."""

    def __init__(self, name, removed=0, left=0):
        self.name, self.removed, self.left = name, removed, left
        self.length = left
        self.selected = self.kept = 0
        self.groups = []
        self.gone = []
        self.keep = True

    def look(self, tx, minid, maxlen, approx, keep):
        """Count, before trimming, what the criteria select and which
        groups have work among it (ACKED ignores ``~``, as in Redis)."""
        from storage.ops.overview import trim_preview
        p = trim_preview(tx, self.name, minid, maxlen, approx and not (keep and tx.group_names(self.name)))
        self.length = p.length or 0
        self.selected = p.removed
        self.groups = p.groups
        self.keep = keep
        self.kept = p.unacked if keep else 0


# ------------------------------------------------------------------ output

def _plural(n, word):
    return "%d %s%s" % (n, word, "" if n == 1 else "s")


def work_text(groups):
    """``group mailer: 5 not yet delivered, 2 pending; group audit: 1 pending``"""
    parts = []
    for w in groups:
        counts = []
        if w.undelivered:
            counts.append("%d not yet delivered" % w.undelivered)
        if w.pending:
            counts.append("%d pending" % w.pending)
        parts.append("group %s: %s" % (show(w.group), ", ".join(counts)))
    return "; ".join(parts)


def _summary(r, trimming, gc, dry):
    parts = []
    if trimming:
        text = "%s %d, %d left" % ("would remove" if dry else "removed", r.removed, r.left)
        if r.groups:
            if r.keep:
                text += "; %s %d not acknowledged (%s)" % ("would keep" if dry else "kept", r.kept,
                                                         work_text(r.groups))
            else:
                text += "; %s work not done (%s)" % ("would take" if dry else "took", work_text(r.groups))
        parts.append(text)
    if gc:
        if r.gone:
            parts.append("%s idle consumer%s %s" % ("would delete" if dry else "deleted",
                                                    "" if len(r.gone) == 1 else "s",
                                                    ", ".join("%s/%s" % (show(g), show(c)) for g, c, _ in r.gone)))
        else:
            parts.append("no idle consumers")
    return "%s: %s" % (show(r.name), "; ".join(parts))


def _total(results, trimming, gc, dry):
    removed = sum(r.removed for r in results)
    left = sum(r.left for r in results)
    gone = sum(len(r.gone) for r in results)
    kept = sum(r.kept for r in results)
    parts = []
    if trimming:
        parts.append("%s %d from %s, %d left" % ("would remove" if dry else "removed", removed,
                                                 _plural(len(results), "stream"), left))
        if kept:
            parts.append("%s %d not acknowledged" % ("would keep" if dry else "kept", kept))
    else:
        parts.append(_plural(len(results), "stream"))
    if gc:
        parts.append("%s %s" % ("would delete" if dry else "deleted", _plural(gone, "idle consumer")))
    return "total: " + "; ".join(parts)


def _json(results, dry, keep):
    return {"dry_run": dry, "drop_unacked": not keep, "removed": sum(r.removed for r in results),
            "left": sum(r.left for r in results), "kept": sum(r.kept for r in results),
            "consumers_deleted": sum(len(r.gone) for r in results),
            "streams": [{"stream": json_text(r.name), "removed": r.removed, "left": r.left, "kept": r.kept,
                         "groups": [{"group": json_text(w.group), "undelivered": w.undelivered, "pending": w.pending}
                                    for w in r.groups],
                         "consumers_deleted": [{"group": json_text(g), "consumer": json_text(c), "idle_ms": i}
                                               for g, c, i in r.gone]}
                        for r in results]}


def _warn_taken(r):
    """On stderr, even with -q: a trim removed work some group had not
    done (--drop-unacked)."""
    import sys
    try:
        sys.stderr.write("xs: %s: removed work not done: %s\n" % (show(r.name), work_text(r.groups)))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _warn_kept(r):
    """On stderr with -q (cron mails it): entries the criteria select
    stayed because groups have not acknowledged them -- a group nobody
    reads any more stops retention, and should not do so silently."""
    import sys
    try:
        sys.stderr.write("xs: %s: kept %d not acknowledged (%s)\n" % (show(r.name), r.kept, work_text(r.groups)))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _say(line):
    context.write_out((line + "\n").encode("utf-8", "surrogateescape"))


# ------------------------------------------------------------------ the command

def _max_len(text):
    if text is None:
        return None
    t = text.strip()
    if not t.isdigit() or not t.isascii():
        context.fail("--max-len: %r is not a count (an integer, 0 or more)" % text, context.EXIT_USAGE)
    return int(t)


def run_trim(g, streams, max_age, max_len, approx, idle, dry, quiet, json_flag, keep=True):
    age_ms = parse_duration("--max-age", max_age) if max_age is not None else None
    maxlen = _max_len(max_len)
    idle_ms = parse_duration("--idle-consumers", idle) if idle is not None else None
    trimming = age_ms is not None or maxlen is not None
    if not trimming and idle_ms is None:
        context.fail("trim: nothing to do: give --max-age, --max-len and/or --idle-consumers", context.EXIT_USAGE)
    if approx and not trimming:
        context.fail("trim: --approx goes with --max-age or --max-len", context.EXIT_USAGE)
    if not keep and not trimming:
        context.fail("trim: --drop-unacked goes with --max-age or --max-len", context.EXIT_USAGE)
    as_json = json_flag or g.mode in ("json", "jsonl")
    minid = (max(0, int(time.time() * 1000) - age_ms), 0) if age_ms is not None else None
    args = [os.fsencode(s) for s in streams]
    store = open_existing(g, write=not dry)
    try:
        expired = reap_expired(store, dry)
        if dry:
            def look(tx):
                names, missing = select_streams(tx, args)
                return (None if missing else preview(tx, names, minid, maxlen, approx, idle_ms, keep)), missing
            results, missing = store.run(look)
            if missing:
                fail_missing(missing)
        else:
            names, missing = store.run(lambda tx: select_streams(tx, args))
            if missing:
                fail_missing(missing)
            results = []
            for name in names:
                r = Result(name)
                if trimming:
                    store.run(lambda tx: r.look(tx, minid, maxlen, approx, keep))
                    r.removed, r.left = trim_stream(store, name, minid, maxlen, approx, keep)
                    r.kept = min(r.kept, max(0, r.selected - r.removed))
                else:
                    r.left = store.run(lambda tx: tx.length(name))
                r.gone = gc_consumers(store, name, idle_ms) if idle_ms is not None else []
                results.append(r)
                if r.groups and not keep:
                    _warn_taken(r)
                elif quiet and r.kept:
                    _warn_kept(r)
                if not quiet and not as_json:
                    _say(_summary(r, trimming, idle_ms is not None, False))
    finally:
        store.close()
    if quiet:
        return
    if as_json:
        doc = _json(results, dry, keep)
        doc["expired_streams"] = expired
        return emit_json(doc)
    if dry:
        for r in results:
            _say(_summary(r, trimming, idle_ms is not None, True))
    _say(_total(results, trimming, idle_ms is not None, dry))
    if expired:
        _say("expired: %s %s past their TTL" % ("would remove" if dry else "removed", _plural(expired, "stream")))


def reap_expired(store, dry):
    """Remove the data of every stream whose TTL has passed (no command
    sees them; a writer removes a few at a time), REAP_BATCH streams a
    transaction; with ``dry``, count them."""
    if dry:
        return store.run(lambda tx: tx.reap_expired(1 << 62))
    total = 0
    while True:
        n = store.run(lambda tx: tx.reap_expired(REAP_BATCH), write=True)
        total += n
        if n < REAP_BATCH:
            return total


def register(cli):
    @cli.command("trim")
    @click.argument("streams", nargs=-1, metavar="[STREAM|GLOB]...")
    @click.option("--max-age", metavar="DURATION",
                  help="Remove entries older than DURATION (500ms, 90s, 30m, 12h, 7d, 2w, 1h30m): MINID now-DURATION.")
    @click.option("--max-len", metavar="N", help="Keep at most the last N entries of each stream (MAXLEN N).")
    @click.option("--approx", is_flag=True, help="Trim whole nodes only, as ~ does (a few more entries may stay).")
    @click.option("--idle-consumers", "idle", metavar="DURATION",
                  help="Delete consumers idle longer than DURATION that have no pending entries.")
    @click.option("--drop-unacked", is_flag=True,
                  help="Also remove entries a consumer group has not acknowledged (not yet delivered, or "
                       "pending); by default they stay.")
    @click.option("--dry-run", "dry", is_flag=True, help="Say what would be removed; change nothing.")
    @click.option("-q", "--quiet", is_flag=True, help="Print nothing unless something fails (for cron).")
    @click.option("--json", "json_", is_flag=True, help="One JSON object with the counts per stream.")
    @click.pass_obj
    def trim(obj, streams, max_age, max_len, approx, idle, drop_unacked, dry, quiet, json_):
        """Remove old entries (by age or count) and idle consumers.

        \b
        No STREAM: every stream; GLOB: KEYS syntax (* ? [abc] \\x); a
        name without glob characters must exist (else exit 1, nothing
        changed).  --max-age D: XTRIM MINID <now-D>-0; --max-len N:
        XTRIM MAXLEN N; both: either removes.  --idle-consumers D:
        XGROUP DELCONSUMER for consumers idle longer than D that own no
        pending entries.  Each stream is trimmed in transactions of at
        most 10000 entries, so producers are never held up for long.
        \b
        Work no group has done stays: an entry a consumer group has not
        acknowledged (not yet delivered to it, or pending) is kept, as
        XTRIM ... ACKED does, and the report says how many and for which
        group.  --drop-unacked removes them too, and says on stderr what
        it took from each group (even with -q).  Streams past their TTL
        (EXPIRE) are gone already; xs trim also frees their space.
        \b
        Prints "STREAM: removed N, M left" per stream and a total;
        -q: nothing unless something fails (stderr, exit 1).  A bad
        DURATION or N is a usage error (exit 2).
        \b
        crontab:  17 3 * * *  xs trim --max-age 7d -q
        """
        try:
            run_trim(obj or context.Globals(), streams, max_age, max_len, approx, idle, dry, quiet, json_,
                     keep=not drop_unacked)
        except KeyboardInterrupt:
            context.fail("trim: interrupted (streams trimmed so far stay trimmed)", context.EXIT_INTERRUPTED)
