"""xs ls and xs info: what a store holds, for people and scripts.

    xs ls [GLOB...] [--idle-consumers DURATION] [--json]
    xs info [--json]

``xs ls``: one row per stream (all of them, or those whose name matches
a GLOB, Redis KEYS syntax): length, first and last entry ID, groups,
pending entries (summed over the groups), the largest group lag, the
age of the last entry (from its ID's milliseconds: "3m ago") and, when a
listed stream has a TTL (EXPIRE), the time until it expires.  A GLOB
without glob characters (* ? [ \\) names one stream, which must exist
("xs: no such stream: NAME", exit 1).  With --idle-consumers DURATION,
one row per consumer idle longer than DURATION (XINFO CONSUMERS' idle
time: since its last read or claim attempt) instead: stream, group,
consumer, idle, pending.

``xs info``: the store's path, format version, data.mdb's size, number
of streams and entries, LMDB's map size and reader slots (other live
processes holding one, and those of them inside a read transaction).
When the store logs its changes for a replica (xs replicate), also the
change log (its last commit number, bytes kept) and, per registered
replica, its lag in commits and seconds and when it last acknowledged:
storage.ops.replicate.status's numbers, as xs replicate --status and
xs metrics show them; in --json, ``replication``: {"seq", "log_bytes",
"replicas": [{"id", "position", "acked_at", "lag_commits",
"lag_seconds"}, ...]} (absent when the store logs nothing).

Output: a rich table on a terminal, plain columns when piped (no
colours, no escapes; names with spaces or odd bytes quoted as xs tail
quotes them), and with --json (or xs --json ...) ONE JSON document on
one line: an array of objects for ls, an object for info; names decoded
from UTF-8 with surrogate escapes, as xs --json does; times in ms.

The store is opened read-only when it can be and is never created:
a missing store is an error.  This module also holds what xs trim
shares with it: durations, stream selection, and opening the store.
"""
import json
import os
import sys

import click

from xstream_cli import context
from xstream_cli.porcelain.durations import parse_duration  # noqa: F401 (trim and archive take it from here)

_WIDE = 10000            # rich tables are not expanded: lines keep their natural width


# ------------------------------------------------------------------ shared with xs trim

def human_ms(ms):
    """A duration for people: 450ms, 12s, 3m, 5h, 2d."""
    if ms is None:
        return "-"
    if ms < 1000:
        return "%dms" % ms
    s = ms // 1000
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm" % (s // 60)
    if s < 48 * 3600:
        return "%dh" % (s // 3600)
    return "%dd" % (s // 86400)


def human_age(ms):
    """``3m ago`` (``in 3m`` for an ID ahead of the clock)."""
    if ms is None:
        return "-"
    return "in %s" % human_ms(-ms) if ms < 0 else "%s ago" % human_ms(ms)


def human_bytes(n):
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1024.0


def is_pattern(arg):
    from storage.ops.overview import is_pattern as pattern
    return pattern(arg)


def select_streams(tx, args):
    """The streams ``args`` (bytes: names or globs) select, in store
    order, each once (no args: all), and the names given literally that
    do not exist (storage.ops.overview.select_streams)."""
    from storage.ops.overview import select_streams as select
    return select(tx, args)


def fail_missing(missing):
    """``xs: no such stream: NAME`` for each, then exit 1."""
    for name in missing[:-1]:
        sys.stderr.write("xs: no such stream: %s\n" % show(name))
    context.fail("no such stream: %s" % show(missing[-1]))


def open_existing(g, write=False):
    """The store ``g`` names, which must exist (never created): read-only
    when ``write`` is false and the store allows it; exit 1 with the
    reason when it cannot be opened (context.open_store)."""
    return context.open_store(g, write=write, create=False)


def show(b):
    """A name for a person: printable characters as they are, the rest
    (control characters, ESC, bytes that are not UTF-8) as \\xHH."""
    out = []
    for ch in b.decode("utf-8", "surrogateescape"):
        if ch.isprintable():
            out.append(ch)
        elif "\udc80" <= ch <= "\udcff":
            out.append("\\x%02x" % (ord(ch) - 0xdc00))
        else:
            out.extend("\\x%02x" % c for c in ch.encode("utf-8"))
    return "".join(out)


def plain_name(b):
    """A name in plain columns: as xs tail writes it (quoted when it has
    spaces, quotes or bytes that are not printable UTF-8)."""
    from xstream_cli.porcelain.tail import raw_token
    return raw_token(b).decode("utf-8", "surrogateescape")


def json_text(b):
    return None if b is None else b.decode("utf-8", "surrogateescape")


def id_text(i):
    """``ms-seq`` for an ID given as (ms, seq) or as its text (bytes)."""
    if i is None:
        return None
    if isinstance(i, bytes):
        return i.decode("ascii")
    return "%d-%d" % tuple(i)


def output_mode(g, json_flag):
    """"json", "pretty" (a rich table) or "plain"."""
    if json_flag or g.mode == "jsonl":
        return "json"
    mode = context.resolve_mode(g.mode)
    return mode if mode in ("json", "pretty") else "plain"


def emit_json(doc):
    context.write_out((json.dumps(doc, separators=(", ", ": ")) + "\n").encode("utf-8", "surrogateescape"))


def _console(Console):
    """A rich console for a terminal: no styles at all (bold included)
    with NO_COLOR or TERM=dumb, as every other xs output."""
    plain = bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb"
    return Console(highlight=False, width=_WIDE, **({"color_system": None} if plain else {}))


def emit_table(mode, headers, rows, right, empty):
    """``rows`` of cells (bytes names are shown per mode) as a rich table
    (mode "pretty") or plain aligned columns; ``right``: indexes of the
    right-aligned columns; ``empty``: what a terminal says for no rows
    (plain output prints nothing then)."""
    if mode == "pretty":
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
        console = _console(Console)     # never cut a value: a long line wraps
        if not rows:
            console.print(Text(empty, style="dim"))
            return
        table = Table(box=None, header_style="bold", pad_edge=False)
        for n, h in enumerate(headers):
            table.add_column(h, justify="right" if n in right else "left", no_wrap=True,
                             style="bold cyan" if n == 0 else None)
        for r in rows:
            table.add_row(*[Text(show(c) if isinstance(c, bytes) else str(c)) for c in r])
        console.print(table)
        return
    if not rows:
        return
    cells = [list(headers)] + [[plain_name(c) if isinstance(c, bytes) else str(c) for c in r] for r in rows]
    widths = [max(len(r[n]) for r in cells) for n in range(len(headers))]
    lines = []
    for r in cells:
        out = [c.rjust(w) if n in right else c.ljust(w) for n, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(out).rstrip())
    context.write_out(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))


# ------------------------------------------------------------------ xs ls

def _stream_rows(snap):
    return [{"stream": v.name, "length": v.length, "first_id": id_text(v.first_id), "last_id": id_text(v.last_id),
             "last_generated_id": id_text(v.last_generated_id), "groups": len(v.groups), "pending": v.pending,
             "max_lag": v.max_lag, "last_entry_age_ms": v.last_entry_age_ms, "ttl_ms": v.ttl_ms}
            for v in snap.streams]


def _idle_rows(snap, idle_ms):
    return [{"stream": v.name, "group": g.name, "consumer": c.name, "idle_ms": c.idle_ms,
             "inactive_ms": c.inactive_ms, "pending": c.pending}
            for v in snap.streams for g in v.groups for c in g.consumers if c.idle_ms > idle_ms]


def _bytes_to_text(rows, keys):
    return [{k: (json_text(v) if k in keys else v) for k, v in r.items()} for r in rows]


def run_ls(g, globs, idle, json_flag):
    mode = output_mode(g, json_flag)
    idle_ms = parse_duration("--idle-consumers", idle) if idle is not None else None
    from storage.ops.overview import snapshot
    store = open_existing(g)
    try:
        snap = snapshot(store, [os.fsencode(a) for a in globs], detail=False, consumers=idle_ms is not None,
                        dead_letters=False, store_facts=False)
    finally:
        store.close()
    missing = snap.missing
    rows = _idle_rows(snap, idle_ms) if idle_ms is not None else _stream_rows(snap)
    if missing:
        fail_missing(missing)
    if idle_ms is not None:
        if mode == "json":
            return emit_json(_bytes_to_text(rows, ("stream", "group", "consumer")))
        emit_table(mode, ["STREAM", "GROUP", "CONSUMER", "IDLE", "PENDING"],
                   [(r["stream"], r["group"], r["consumer"], human_ms(r["idle_ms"]), r["pending"]) for r in rows],
                   {3, 4}, "no consumer idle longer than %s" % human_ms(idle_ms))
        return
    if mode == "json":
        return emit_json(_bytes_to_text(rows, ("stream",)))
    headers = ["STREAM", "LENGTH", "FIRST", "LAST", "GROUPS", "PENDING", "LAG", "LAST ENTRY"]
    table = [[r["stream"], r["length"], r["first_id"] or "-", r["last_id"] or "-", r["groups"], r["pending"],
              "-" if not r["groups"] else ("?" if r["max_lag"] is None else r["max_lag"]),
              human_age(r["last_entry_age_ms"])] for r in rows]
    if any(r["ttl_ms"] is not None for r in rows):        # EXPIRE: the column only when a stream has a TTL
        headers.append("EXPIRES IN")
        for row, r in zip(table, rows):
            row.append("-" if r["ttl_ms"] is None else human_ms(r["ttl_ms"]))
    emit_table(mode, headers, table, {1, 4, 5, 6}, "no streams")


# ------------------------------------------------------------------ xs info

_INFO_FIELDS = ("path", "format", "code_format", "streams", "entries", "file_size", "disk_usage", "used_size",
                "free_size", "map_size", "page_size", "last_txn", "max_readers", "readers", "reading", "stale_readers")


def run_info(g, json_flag):
    from storage.ops.overview import store_overview
    from storage.ops.replicate import status
    mode = output_mode(g, json_flag)
    store = open_existing(g)
    try:
        o = store_overview(store)
        repl = status(store)          # the numbers of xs replicate --status and xs metrics
    finally:
        store.close()
    if mode == "json":
        doc = {k: getattr(o, k) for k in _INFO_FIELDS}
        if repl["logging"]:
            doc["replication"] = {k: repl[k] for k in ("seq", "log_bytes", "replicas")}
        return emit_json(doc)
    fmt = "-" if o.format is None else str(o.format)
    if o.format is not None and o.format != o.code_format:
        fmt += " (this xs writes %d)" % o.code_format
    rows = [("path", o.path),
            ("format", fmt),
            ("streams", str(o.streams)),
            ("entries", str(o.entries)),
            ("data.mdb", "%s (%s on disk, %s in use, %s free: xs compact gives it back)"
             % (human_bytes(o.file_size), human_bytes(o.disk_usage), human_bytes(o.used_size),
                human_bytes(o.free_size))),
            ("map size", human_bytes(o.map_size)),
            ("readers", "%d other process%s (%d reading now), %d stale, %d slots"
             % (o.readers, "" if o.readers == 1 else "es", o.reading, o.stale_readers, o.max_readers)),
            ("last txn", str(o.last_txn))] + _replication_rows(repl)
    if mode == "pretty":
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text
        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold")
        t.add_column()
        for k, v in rows:
            t.add_row(k, Text(v))
        _console(Console).print(t)
        return
    w = max(len(k) for k, _ in rows)
    context.write_out("".join("%s  %s\n" % (k.ljust(w), v) for k, v in rows).encode("utf-8", "surrogateescape"))


def _replication_rows(repl):
    """xs info's lines about the change log and each registered replica
    (none when the store logs nothing): ``repl`` is
    storage.ops.replicate.status's document."""
    if not repl["logging"]:
        return []
    rows = [("change log", "last commit %d, %s kept" % (repl["seq"], human_bytes(repl["log_bytes"])))]
    for r in repl["replicas"]:
        lag = "?" if r["lag_seconds"] is None else "%.3f s" % r["lag_seconds"]
        rows.append(("replica %s" % r["id"], "at commit %d, lag %d commit%s, %s; last acknowledged %s"
                     % (r["position"], r["lag_commits"], "" if r["lag_commits"] == 1 else "s", lag,
                        _local_time(r["acked_at"]))))
    return rows


def _local_time(ms):
    """An ISO 8601 local time, to the millisecond."""
    import datetime
    return datetime.datetime.fromtimestamp(ms / 1000.0).astimezone().isoformat(timespec="milliseconds")


# ------------------------------------------------------------------ commands

def register(cli):
    @cli.command("ls")
    @click.argument("globs", nargs=-1, metavar="[GLOB]...")
    @click.option("--idle-consumers", "idle", metavar="DURATION",
                  help="List consumers idle longer than DURATION (e.g. 30m, 7d) instead of streams.")
    @click.option("--json", "json_", is_flag=True, help="One JSON array (on one line) of one object per row.")
    @click.pass_obj
    def ls(obj, globs, idle, json_):
        """List streams: length, first/last ID, groups, pending, lag, age.

        \b
        GLOB is a KEYS pattern (* ? [abc] \\x); a name without glob
        characters must exist.  Columns: LENGTH, FIRST and LAST entry
        IDs, GROUPS, PENDING (over all groups), LAG (the largest group
        lag; ? when a group's lag is unknown), LAST ENTRY (age of the
        last entry, from its ID), and EXPIRES IN when a listed stream has
        a TTL (EXPIRE).
        \b
        --json: [{"stream", "length", "first_id", "last_id",
        "last_generated_id", "groups", "pending", "max_lag",
        "last_entry_age_ms", "ttl_ms"}, ...] (null where there is no
        value).
        --idle-consumers D: [{"stream", "group", "consumer", "idle_ms",
        "inactive_ms", "pending"}, ...] for consumers idle longer than D.
        A rich table on a terminal, plain columns when piped.
        """
        run_ls(obj or context.Globals(), globs, idle, json_)

    @cli.command("info")
    @click.option("--json", "json_", is_flag=True, help="One JSON object.")
    @click.pass_obj
    def info(obj, json_):
        """Show the store: path, format, size, streams, entries, readers.

        \b
        --json: {"path", "format", "code_format", "streams", "entries",
        "file_size", "disk_usage", "used_size", "free_size", "map_size",
        "page_size", "last_txn", "max_readers", "readers", "reading",
        "stale_readers"} (sizes in bytes; used_size: live pages, what a
        compacted copy takes; free_size: pages LMDB reuses, which xs
        compact gives back; readers: other live processes holding an LMDB
        reader slot, reading: those inside a read transaction now).
        """
        run_info(obj or context.Globals(), json_)
