"""Importing lines (``import_lines``, ``xs import``): each line parsed
in its format (storage.ops.line_formats), gathered into batches of new-ID
entries and load records, each batch one write transaction (``_Batch``:
the run of adds); lines read as they come (storage.lines), what a slow
producer sent committed before a read that would wait.  No click, no
rich.

IDs: ``*`` (new IDs, as XADD * at bulk speed, through add_auto_many)
unless ``id_field`` names a member / field whose value is the entry's
ID: "ms-seq" (kept) or "*"; that member is not stored as a field.

``skip_existing`` makes an import with explicit IDs re-runnable: an
entry whose ID is at or below its stream's last ID is skipped if the
stream holds that ID with the same fields, an error if it holds it with
other fields, and skipped (counted as "below") if the stream has no
such entry any more -- deleted or trimmed since, or never there: XADD
cannot put an entry below the top, so there is nothing else to do.
Other records (--meta lines) are loaded as usual: a group that exists
is an error.  New IDs (``*``) are never skipped: re-running such an
import adds the entries again.

Blank lines are skipped; line numbers count every physical line (lines
end at \\n only).  Batches: ``batch`` entries per transaction.  On an
error the batches before the one holding the bad line stay imported,
and ImportFailed says up to which line.
"""
import os
import time
from itertools import repeat

from storage.errors import RedisError
from storage.lines import source_blocks
from storage.ops.json_records import ExchangeError, _snippet, id_parse, id_text, load_record
from storage.ops.line_formats import (
    _JSON,
    _KV_NOT_SEP,
    _KV_NOT_SEP1,
    _KV_ONE,
    _KV_SEPS,
    _KV_SEPS1,
    _KV_SLOW,
    FORMATS,
    _Bad,
    _kv_block,
    _Obj,
    _parse_jsonl,
    _parse_kv,
    _parse_xs,
    _plain_kv,
)
from storage.options import RangeOptions
from storage.txn import StoreFailure
from storage.verbs.load import LoadError, Stats

BATCH = 10000


class ImportFailed(ExchangeError):
    """An import stopped at a line.  ``line``: its number; ``committed``:
    the last line of the batches that stay imported (0: none);
    ``entries``: the entries they added."""

    def __init__(self, line, reason, committed, entries):
        self.line, self.reason, self.committed, self.entries = line, reason, committed, entries
        if committed:
            kept = ("lines 1-%d stay imported (%d entr%s, earlier batches); nothing from line %d on was"
                    % (committed, entries, "y" if entries == 1 else "ies", committed + 1))
        else:
            kept = "nothing was imported"
        ExchangeError.__init__(self, "line %d: %s (%s)" % (line, reason, kept))


class ImportInterrupted(KeyboardInterrupt):
    """Ctrl-C during an import: ``committed``, the last line of the
    batches that stay imported (0: none), and the ``entries`` they added
    (at least: a batch whose commit had just finished may not be counted
    yet)."""

    def __init__(self, committed, entries):
        KeyboardInterrupt.__init__(self, committed, entries)
        self.committed, self.entries = committed, entries


class ImportStats(Stats):
    """Stats of an import, with ``skipped`` (entries already in the store,
    identical) and ``below`` (IDs below a stream's last ID that it no
    longer holds) of --skip-existing, and ``lines`` read."""

    __slots__ = ("skipped", "below", "lines")

    def __init__(self):
        Stats.__init__(self)
        self.skipped = self.below = self.lines = 0


def import_jsonl(store, lines, batch=BATCH, progress=None):
    """Import JSON lines in the export shape from an iterable of lines
    (bytes, or text); returns Stats.  See ``import_lines``."""
    return import_lines(store, lines, "xs", batch=batch, progress=progress)


def import_lines(store, lines, fmt="xs", stream=None, id_field=None, skip_existing=False, batch=BATCH,
                 progress=None, split=None):
    """Import the lines of ``lines`` -- a binary file (read as it comes:
    what a pipe has delivered is committed before waiting for more) or
    an iterable of lines (bytes or text) -- in the format ``fmt``
    (FORMATS; jsonl and kv need ``stream``, a bytes name; kv needs
    ``split``, the word splitter); returns ImportStats.  Raises
    ImportFailed, or ImportInterrupted on Ctrl-C."""
    if fmt not in FORMATS:
        raise ExchangeError("unknown format %s (formats: %s)" % (_snippet(fmt), ", ".join(FORMATS)))
    if fmt != "xs" and not stream:
        raise ExchangeError("format %s needs a stream name" % fmt)
    t0 = time.monotonic()
    st = ImportStats()
    if fmt == "kv" and split is None:
        raise ExchangeError("format kv needs a word splitter")
    parse = {"xs": _parse_xs, "jsonl": _parse_jsonl, "kv": lambda line, i: _parse_kv(line, i, split)}[fmt]
    idf = None if id_field is None else (id_field if fmt == "jsonl" else os.fsencode(id_field))
    run = _Batch(store, skip_existing, st)
    items = run.items
    kv_fast = fmt == "kv" and idf is None
    js_fast = fmt == "jsonl" and idf is None
    decode = _JSON.decode
    seps, not_sep, slow = _KV_SEPS, _KV_NOT_SEP, _KV_SLOW.search
    seps1, not_sep1 = _KV_SEPS1, _KV_NOT_SEP1
    try:
        n = 0
        nbytes = 0
        for block, size in _blocks(lines, run):
            nbytes += size
            plain = simple = False
            if kv_fast:
                joined = b"\n".join(block)
                plain = not slow(joined)
                # words separated by single spaces only
                simple = plain and not (b"\t" in joined or b"\r" in joined or b"  " in joined or b"\n " in joined
                                        or b" \n" in joined or joined[:1] == b" " or joined[-1:] == b" ")
            if simple and len(items) + len(block) <= batch:
                texts = _kv_block(block, joined)
                if texts is not None:           # every line as the per-line test below takes it
                    items += zip(repeat(stream), texts)
                    n += len(block)
                    run.line = n
                    continue
            for line in block:
                n += 1
                if len(items) >= batch:
                    run.commit(n - 1)
                    if progress is not None:
                        progress("import", n - 1, None)
                if simple:
                    k = line.count(b" ") + 1
                    if k < _KV_ONE and line.translate(None, not_sep1) == seps1[k] and line[:1] != b"=" \
                            and b" =" not in line:
                        # each word holds exactly one "=" and starts with a field name
                        items.append((stream, line.replace(b" ", b"\n").replace(b"=", b"\n")))
                        continue
                if plain or (kv_fast and not slow(line)):
                    # no quotes, NULs, VT or FF: words split at white space, and
                    # the entry in its text form (fields joined by newlines)
                    words = line.split()
                    joined = b"\n".join(words)
                    k = len(words)
                    if 0 < k < _KV_ONE and joined.translate(None, not_sep) == seps[k] and joined[:1] != b"=" \
                            and b"\n=" not in joined:
                        # each word holds exactly one "=" and starts with a field name
                        items.append((stream, joined.replace(b"=", b"\n")))
                        continue
                    if k and _plain_kv(words):
                        items.append((stream, b"\n".join([w.replace(b"=", b"\n", 1) for w in words])))
                        continue
                elif js_fast:
                    try:
                        obj = decode(line.decode("utf-8", "surrogateescape"))
                        # strings and numbers only (a _Num is its text): the text form
                        text = "\n".join([x for pair in obj for x in pair]) if type(obj) is _Obj and obj else None
                    except (ValueError, TypeError, RecursionError):
                        text = None
                    if text is not None and text.count("\n") == 2 * len(obj) - 1:
                        items.append((stream, text.encode("utf-8", "surrogateescape")))
                        continue
                if not line.strip():
                    continue
                try:
                    got = parse(line, idf)
                    if fmt == "xs":
                        run.add_record(n, load_record(got, "line %d" % n))
                    else:
                        i, fields = got
                        if not fields:
                            raise _Bad("no fields")
                        if i is None or i == "*":
                            items.append((stream, fields))
                        else:
                            run.add_record(n, ("entry", "line %d" % n, stream, id_parse(i, "entry ID"), fields))
                except (_Bad, ExchangeError) as e:
                    raise ImportFailed(n, str(e), run.committed, st.entries)
            run.line = n
        run.commit(n)
    except KeyboardInterrupt:
        raise ImportInterrupted(run.committed, st.entries) from None
    st.lines = n
    st.bytes = nbytes
    st.streams = len(run.streams)
    st.seconds = time.monotonic() - t0
    return st


def _blocks(src, run):
    """(lines, bytes) blocks of ``src`` (storage.lines.source_blocks):
    before a read that would wait, the entries gathered so far are
    committed (``run.commit``), so a slow producer's entries do not
    wait for a full batch."""
    return source_blocks(src, lambda: run.commit(run.line))


class _Batch:
    """The entries of one transaction, applied in order: (name, fields)
    pairs of new-ID entries (through ``add_auto_many``, at bulk speed)
    and ("rec", line, record) triples (through the load path)."""

    def __init__(self, store, skip_existing, stats):
        self.store = store
        self.skip = skip_existing
        self.stats = stats
        self.items = []
        self.records = False       # some items are records
        self.committed = 0         # the last line of the batches committed
        self.line = 0              # the last line read into items (between blocks)
        self.streams = set()

    def add_record(self, n, rec):
        self.items.append(("rec", n, rec))
        self.records = True

    def commit(self, last):
        """Commit the items, read up to line ``last``, in one transaction."""
        items = self.items
        if not items:
            return
        first = self.committed + 1
        counts: dict = {}
        try:
            self.store.run(lambda tx: self._apply(tx, items, counts), write=True)
        except LoadError as e:
            line, reason = _line_of(str(e), first)
            raise ImportFailed(line, reason, self.committed, self.stats.entries)
        except RedisError as e:
            where = "line %d" % first if first == last else "lines %d-%d" % (first, last)
            raise ImportFailed(first, "%s: %s" % (where, e), self.committed, self.stats.entries)
        except StoreFailure as e:
            raise ImportFailed(first, str(e), self.committed, self.stats.entries)
        self.stats.entries += counts["entries"]
        self.stats.skipped += counts["skipped"]
        self.stats.below += counts["below"]
        self.streams.update(counts["streams"])
        self.committed = last
        del items[:]               # the same list: import_lines holds it
        self.records = False

    def _apply(self, tx, items, counts):
        counts.update(entries=0, skipped=0, below=0, streams=set())
        if not self.records:
            tx.add_auto_many(items)
            counts["entries"] = len(items)
            counts["streams"].update({name for name, _ in items})
            return
        tops: dict = {}
        k = 0
        while k < len(items):
            auto = len(items[k]) == 2
            j = k
            while j < len(items) and (len(items[j]) == 2) == auto:
                j += 1
            run = items[k:j]
            k = j
            if auto:
                tx.add_auto_many(run)
                counts["entries"] += len(run)
                counts["streams"].update({name for name, _ in run})
                continue
            recs = []
            for _, n, rec in run:
                if rec[0] == "entry" and self.skip:
                    what = self._existing(tx, tops, rec)
                    if what is not None:
                        counts[what] += 1
                        counts["streams"].add(rec[2])
                        continue
                recs.append(rec)
            if recs:
                st = tx.load(recs)
                counts["entries"] += st.entries
                counts["streams"].update(r[2] for r in recs)

    def _existing(self, tx, tops, rec):
        """For --skip-existing: "skipped" if the stream holds this entry,
        "below" if its ID is below the stream's top but not there, None
        to add it; LoadError if it holds the ID with other fields."""
        _, where, name, i, fields = rec
        if name not in tops:
            tops[name] = tx.last_generated_id(name) if tx.key_type(name) == "stream" else None
        top = tops[name]
        if top is None or tuple(i) > tuple(top):
            return None
        got = tx.range(name, RangeOptions(start=i, end=i, count=1))
        if got:
            _, have = got[0]
            if list(have) != list(fields):
                raise LoadError("%s: entry %s of stream %s exists with other fields" % (
                    where, id_text(i), name.decode("utf-8", "backslashreplace")))
            return "skipped"
        return "below"


def _line_of(text, default):
    """(line number, reason) of a loader message "line N: reason"."""
    head, sep, rest = text.partition(": ")
    if sep and head.startswith("line ") and head[5:].isdigit():
        return int(head[5:]), rest
    return default, text
