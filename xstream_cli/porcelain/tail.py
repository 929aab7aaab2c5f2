"""xs tail: print the last entries of streams and follow new ones.

    xs tail [-f] [-n N] [--group G --consumer C] [--json] STREAM...

Without a group: the last N entries (default 10) of all the STREAMs
together, oldest first, in ID order; with -f, then every new entry as it
is committed (the watch is armed before the first read, so nothing is
missed between the two).

With --group G --consumer C: entries are read through the group like
XREADGROUP -- first this consumer's own pending entries (left by a run
that was interrupted before acknowledging), then new ones (">") -- and
each is acknowledged (XACK) once printed.  Without -f at most N entries
are read; with -f, -n is ignored and everything the group delivers is
printed.  The group must exist (NOGROUP otherwise, exit 1).

Output, one entry per line:
  terminal  time from the ID, stream (one colour per stream), ID and
            field=value pairs, aligned (rich);
  --json    one JSON object per line: {"stream": s, "id": id, "fields":
            {field: value, ...}} (a repeated field keeps its last value;
            non-UTF-8 bytes as surrogate escapes, like xs --json);
  piped     raw lines:  STREAM ID FIELD=VALUE FIELD=VALUE ...
            STREAM, FIELD and VALUE are written bare when they are made
            of printable ASCII other than space, quotes, backslash and
            (STREAM and FIELD only) '='; otherwise in double quotes with
            redis-cli escapes (\\n \\r \\t \\" \\\\ \\xHH).  So the first '='
            outside quotes ends the field, and a line never holds a raw
            newline.

Ctrl-C ends quietly with status 0, and so does a closed pipe (``| head``):
with -f, a reader that goes away ends the wait at once.
"""
import os
import stat
import sys

import click

from storage.ids import MAX_ID, MIN_ID
from storage.options import IdsOptions, RangeOptions, ReadOptions
from xstream_cli import context

BATCH = 1000                   # entries per read transaction while following
_BARE = frozenset(range(0x21, 0x7f)) - frozenset(b"\"'\\")
_BARE_NAME = _BARE - frozenset(b"=")
_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red",
            "bright_cyan", "bright_magenta", "bright_green", "bright_yellow")


# ------------------------------------------------------------------ output

def raw_token(b, name=False):
    """A stream name, field or value in the raw line format."""
    if b and all(c in (_BARE_NAME if name else _BARE) for c in b):
        return b
    from xstream_cli.render import quote
    return quote(b)


def raw_line(stream, entry):
    """``STREAM ID FIELD=VALUE ...`` (bytes, with the newline)."""
    i, fields = entry
    parts = [raw_token(stream, True), i]
    for k in range(0, len(fields), 2):
        parts.append(raw_token(fields[k], True) + b"=" + raw_token(fields[k + 1]))
    return b" ".join(parts) + b"\n"


def json_line(stream, entry):
    import json
    i, fields = entry

    def s(b):
        return b.decode("utf-8", "surrogateescape")
    doc = {"stream": s(stream), "id": s(i),
           "fields": {s(fields[k]): s(fields[k + 1]) for k in range(0, len(fields), 2)}}
    return json.dumps(doc, ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"


class Pretty:
    """Rich lines for a terminal: time, stream, ID, aligned fields."""

    def __init__(self, streams):
        import io

        from rich.console import Console
        self.buf = io.StringIO()
        self.console = Console(file=self.buf, force_terminal=sys.stdout.isatty(), highlight=False,
                               soft_wrap=True, width=10000)
        self.colour = {s: _COLOURS[n % len(_COLOURS)] for n, s in enumerate(dict.fromkeys(streams))}
        self.name_w = max(len(_text(s)) for s in streams)
        self.id_w = 0
        self.value_w = {}          # field -> widest value seen (capped)

    def __call__(self, stream, entry):
        import datetime

        from rich.text import Text
        i, fields = entry
        ms = int(i.split(b"-")[0])
        try:
            when = datetime.datetime.fromtimestamp(ms / 1000.0).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        except (OverflowError, OSError, ValueError):
            when = "-"
        sid = _text(i)
        self.id_w = max(self.id_w, len(sid))
        t = Text()
        t.append(when, style="dim")
        t.append("  ")
        t.append(_text(stream).ljust(self.name_w), style="bold " + self.colour.get(stream, "cyan"))
        t.append("  ")
        t.append(sid.ljust(self.id_w), style="dim")
        for k in range(0, len(fields), 2):
            f, v = _text(fields[k]), _text(fields[k + 1])
            w = self.value_w[f] = min(max(self.value_w.get(f, 0), len(v)), 40)
            t.append("  ")
            t.append(f, style="bold")
            t.append("=")
            t.append(v.ljust(w) if k + 2 < len(fields) else v)
        self.console.print(t)
        out = self.buf.getvalue()
        self.buf.seek(0)
        self.buf.truncate()
        return out.encode("utf-8", "backslashreplace")


def _text(b):
    return b.decode("utf-8", "backslashreplace")


def _id_key(entry):
    ms, seq = entry[1][0].split(b"-")
    return int(ms), int(seq)


def _parse_id(b):
    ms, seq = b.split(b"-")
    return int(ms), int(seq)


# ------------------------------------------------------------------ reading

def _last_entries(tx, keys, n):
    """The last ``n`` entries of ``keys`` together, oldest first, and the
    streams' last IDs (where following starts)."""
    rows = []
    after = []
    for k in keys:
        last = tx.last_generated_id(k)
        after.append(last if last is not None else MIN_ID)
        if n:
            rows += [(k, e) for e in tx.range(k, RangeOptions(MIN_ID, MAX_ID, n, True))]
    rows.sort(key=_id_key)
    return rows[-n:] if n else [], after


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
        by.setdefault(k, []).append(_parse_id(e[0]))
    for k, ids in by.items():
        tx.ack(k, group, IdsOptions(tuple(ids), len(ids)))


# ------------------------------------------------------------------ command

def _stdout_watch():
    """stdout's descriptor if a reader can go away (pipe, socket)."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return ()
    return (fd,) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else ()


def run_tail(store, keys, n, follow, group, consumer, line):
    """The loop of ``xs tail``; ``line(stream, entry) -> bytes``.
    Returns the exit status."""
    from storage.blocking import Waiter
    from storage.errors import RedisError
    write_out, _quiet_exit = context.write_out, context.quiet_exit

    def emit(rows):
        out = [line(k, e) for k, e in rows if e[1] is not None]
        if out:
            write_out(b"".join(out))

    waiter = Waiter(store, keys, _stdout_watch()) if follow else None
    try:
        if group is None:
            rows, after = store.run(lambda tx: _last_entries(tx, keys, n), write=False)
            emit(rows)
            while follow:
                rows = store.run(lambda tx: _new_entries(tx, keys, after), write=False)
                if rows:
                    last = {}
                    for k, e in rows:
                        last[k] = _parse_id(e[0])
                    after = [last.get(k, a) for k, a in zip(keys, after)]
                    emit(rows)
                    continue
                waiter.wait(None)
                if waiter.hangup:
                    _quiet_exit()
            return 0
        left = n
        ids = [MIN_ID] * len(keys)          # this consumer's pending entries first
        while follow or left > 0:
            count = BATCH if follow else min(left, BATCH)
            rows = store.run(lambda tx: _group_read(tx, keys, group, consumer, ids, count), write=True)
            if rows:
                emit(rows)
                store.run(lambda tx: _ack(tx, group, rows), write=True)
                left -= len(rows)
                continue
            if ids[0] != b">":
                ids = [b">"] * len(keys)    # history done: new entries
                continue
            if not follow:
                break
            waiter.wait(None)
            if waiter.hangup:
                _quiet_exit()
        return 0
    except RedisError as e:
        sys.stderr.write("%s\n" % e.text)
        return 1
    finally:
        if waiter is not None:
            waiter.close()


def register(cli):
    @cli.command("tail")
    @click.option("-f", "--follow", is_flag=True, help="Keep printing new entries as they arrive.")
    @click.option("-n", "--lines", "n", type=click.IntRange(min=0), default=10, show_default=True,
                  metavar="N", help="How many of the last entries to print first.")
    @click.option("--group", metavar="G", help="Read through consumer group G (XREADGROUP), acking each entry.")
    @click.option("--consumer", metavar="C", help="Consumer name within the group (with --group).")
    @click.option("--json", "json_", is_flag=True, help="One JSON object per entry.")
    @click.argument("streams", nargs=-1, required=True)
    @click.pass_obj
    def tail(obj, follow, n, group, consumer, json_, streams):
        """Print the last entries of STREAMs; with -f follow new ones.

        \b
        Pretty on a terminal, JSON lines with --json, and raw lines when
        piped:  STREAM ID FIELD=VALUE ...  (STREAM, FIELD, VALUE bare when
        made of printable ASCII other than space, quotes, backslash and,
        for STREAM and FIELD, '='; otherwise double-quoted with redis-cli
        escapes).  With --group/--consumer, entries are read through the
        group (this consumer's pending ones first) and acknowledged once
        printed.  Ctrl-C and a closed pipe end quietly (status 0).
        """
        if (group is None) != (consumer is None):
            raise click.UsageError("--group and --consumer go together")
        g = obj or context.Globals()
        mode = "json" if json_ else context.resolve_mode(g.mode)
        keys = [os.fsencode(s) for s in streams]
        if mode == "json":
            line = json_line
        elif mode == "pretty":
            line = Pretty(keys)
        else:
            line = raw_line
        store = context.open_store(g)
        try:
            code = run_tail(store, keys, n, follow,
                            None if group is None else os.fsencode(group),
                            None if consumer is None else os.fsencode(consumer), line)
        except KeyboardInterrupt:
            code = 0
        sys.exit(code)
