"""JSON lines (``xs export`` / ``xs import``).  No click, no rich.

Documented in docs/snapshot-format.md, "JSON lines": one JSON object per
line.  An entry is

    {"stream": "s", "id": "1-1", "fields": ["a", "1", "a", "2"]}

(fields in order, duplicates kept).  A byte string that is valid UTF-8
is a JSON string; any other is ``{"b64": "<base64>"}``.  This is xs's
one JSON shape for an entry outside RESP3 replies: ``xs tail --json``
writes it too (``entry_record``).  Import also takes a string holding
surrogate escapes (U+DC80..U+DCFF, as ``xs --json`` writes bytes that
are not UTF-8) as those bytes.  With
``meta=True`` each stream's entries are followed by lines of other
types carrying everything a snapshot carries:

    {"type": "stream", "stream", "last-id", "max-deleted-id", "entries-added",
     "idmp-configured", "idmp-duration", "idmp-maxsize", "iids-added", "iids-duplicates",
     "expire-at" (Unix ms, only for a stream with a TTL)}
    {"type": "iid", "stream", "producer", "iid", "id"}
    {"type": "group", "stream", "group", "last-delivered-id", "entries-read"}
    {"type": "consumer", "stream", "group", "consumer", "seen-time", "active-time"}
    {"type": "pending", "stream", "group", "consumer", "id", "delivery-time", "delivery-count"}
    {"type": "nacked", "stream", "group", "id", "delivery-count"}

Every line names its stream (and group, consumer), so lines can be
filtered with jq; the only order import needs is entries before the
"stream" line of their stream, and a group before its consumers and
their pending entries -- the order export writes.

Import goes through the engine's load path (storage.verbs.load), one write
transaction per batch (10,000 lines by default): bulk speed, and a
failed line stops the import with everything before its batch committed
(the error says how far it got).  For an all-or-nothing copy use a
snapshot.

Other formats (``import_lines``, ``xs import --stream S --format F``):
every line is one entry of the stream S.

  jsonl  a JSON object per line, {"user": "u1", "n": 3}: each member a
         field and its value, in order, duplicate names kept.  A string
         is its text (UTF-8; U+DC80..U+DCFF as the bytes 80..FF); a
         number is its JSON text exactly as written (3, -1.50, 1e3);
         true / false are the words; an array or object is its compact
         JSON text ({"a":[1,2]}); null is an error (leave the member out
         instead).  A line that is not an object, or an empty object,
         is an error.
  kv     field=value words, split as redis-cli splits a line
         (xstream_cli's splitargs rules: "double quotes" with \\n \\t
         \\xHH escapes, 'single quotes', a quote may start in the middle
         of a word: name="Ann Lee"); each word is cut at its first "=",
         so a field name cannot hold "=" (a value can).  Bytes pass
         through as they are.
  xs     the export shape above (the default without --stream).

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
import base64
import json
import os
import re
import time
from itertools import repeat

from storage import codec
from storage.errors import RedisError
from storage.options import RangeOptions
from storage.txn import StoreFailure
from storage.verbs.dump import CorruptStore
from storage.verbs.load import LoadError, Stats

BATCH = 10000


class ExchangeError(Exception):
    """Export or import failed (the message is for a person)."""


# ============================================================ value coding

def enc(b):
    """bytes -> JSON value: a string if UTF-8, else {"b64": ...}."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(b).decode("ascii")}


def dec(v, what="value"):
    """JSON value -> bytes (inverse of ``enc``)."""
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, dict) and len(v) == 1 and isinstance(v.get("b64"), str):
        try:
            return base64.b64decode(v["b64"], validate=True)
        except ValueError:
            pass
    raise ExchangeError("bad %s: %s" % (what, _snippet(v)))


def _snippet(v):
    try:
        return json.dumps(v)[:80]
    except (TypeError, ValueError, RecursionError):
        return repr(v)[:80]


def _key_enc(k):
    """A name key (0x00 + name, or 0x01 + sha256 of a long name)."""
    name, digest = codec.name_key_parts(k)
    return enc(name) if digest is None else {"sha256": digest.hex()}


def _key_dec(v, what):
    if isinstance(v, dict) and "sha256" in v:
        try:
            h = bytes.fromhex(v["sha256"])
        except (TypeError, ValueError):
            h = b""
        if len(h) != 32:
            raise ExchangeError("bad %s: %s" % (what, _snippet(v)))
        return codec.hashed_name_key(h)
    return codec.name_key(dec(v, what))


def entry_record(stream, entry_id, fields):
    """The JSON shape of one entry (bytes in): {"stream", "id", "fields":
    [field, value, ...]}, each byte string through ``enc``."""
    return {"stream": enc(stream), "id": entry_id.decode("ascii"), "fields": [enc(f) for f in fields]}


def id_text(i):
    return "%d-%d" % tuple(i)


def id_parse(s, what="id"):
    """"ms-seq" -> (ms, seq)."""
    try:
        a, b = s.split("-")
        if a.isdigit() and b.isdigit() and a.isascii() and b.isascii():
            i = (int(a), int(b))
            if i[0] <= (1 << 64) - 1 and i[1] <= (1 << 64) - 1:
                return i
    except (AttributeError, ValueError):
        pass
    raise ExchangeError("bad %s: %s" % (what, _snippet(s)))


# ================================================================== export

def export_records(tx, names=None, meta=False):
    """Records (dicts, JSON-ready) of the named streams (default: all), in
    one read transaction ``tx``.  Missing names raise ExchangeError."""
    if names is None:
        names = tx.stream_names()
    else:
        for n in names:
            if not tx.exists([n]):
                raise ExchangeError("no such stream: %s" % n.decode("utf-8", "backslashreplace"))
    for name in names:
        s = enc(name)
        group = consumer = stream_line = None
        try:
            for r in tx.dump(name):
                kind = r[0]
                if kind == "entry":
                    idt, fields = codec.decode_entry(r[2])
                    yield entry_record(name, idt, fields)
                    continue
                if not meta:
                    if kind != "stream":
                        break                      # entries are all we want
                    continue
                if kind == "stream":
                    v = r[1]
                    stream_line = {"type": "stream", "stream": s,
                                   "last-id": id_text(v["last-id"]), "max-deleted-id": id_text(v["max-deleted-id"]),
                                   "entries-added": v["entries-added"], "idmp-configured": v["idmp-configured"],
                                   "idmp-duration": v["idmp-duration"], "idmp-maxsize": v["idmp-maxsize"],
                                   "iids-added": v["iids-added"], "iids-duplicates": v["iids-duplicates"]}
                    if "expire-at" in v:
                        stream_line["expire-at"] = v["expire-at"]
                    continue
                if stream_line is not None:
                    yield stream_line
                    stream_line = None
                if kind == "iid":
                    yield {"type": "iid", "stream": s, "producer": _key_enc(r[1]), "iid": _key_enc(r[2]),
                           "id": id_text(r[3])}
                elif kind == "group":
                    group = enc(r[1])
                    yield {"type": "group", "stream": s, "group": group,
                           "last-delivered-id": id_text(r[2]), "entries-read": r[3]}
                elif kind == "consumer":
                    consumer = enc(r[1])
                    yield {"type": "consumer", "stream": s, "group": group, "consumer": consumer,
                           "seen-time": r[2], "active-time": r[3]}
                elif kind == "pending":
                    yield {"type": "pending", "stream": s, "group": group, "consumer": consumer,
                           "id": id_text(r[1]), "delivery-time": r[2], "delivery-count": r[3]}
                elif kind == "nacked":
                    yield {"type": "nacked", "stream": s, "group": group, "id": id_text(r[1]),
                           "delivery-count": r[2]}
        except CorruptStore as e:
            raise ExchangeError(str(e))
        if meta and stream_line is not None:
            yield stream_line


def dumps(rec):
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def _write(out, lines):
    """Write ``lines`` to the text file ``out``; returns the bytes they
    take in UTF-8 (what lands in the file: a character is not a byte)."""
    text = "".join(lines)
    out.write(text)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogateescape"))


def export_jsonl(store, out, names=None, meta=False, progress=None):
    """Write JSON lines to the text file ``out``; returns Stats.  One
    read transaction: a consistent view."""
    st = Stats()
    t0 = time.monotonic()
    with store.read() as tx:
        last = None
        buf = []
        for rec in export_records(tx, names, meta):
            if rec.get("stream") != last:
                last = rec.get("stream")
                st.streams += 1
            if "type" not in rec:
                st.entries += 1
            buf.append(dumps(rec) + "\n")
            if len(buf) >= 1000:
                st.bytes += _write(out, buf)
                buf = []
                if progress is not None:
                    progress("export", st.entries, None)
        st.bytes += _write(out, buf)
    out.flush()
    st.seconds = time.monotonic() - t0
    return st


# ================================================================== import

def load_record(rec, where):
    """A JSON record (a dict) -> a storage.verbs.load record."""
    if not isinstance(rec, dict):
        raise ExchangeError("not a JSON object")
    t = rec.get("type", "entry")
    name = dec(rec.get("stream"), "stream name")
    if t == "entry":
        i = id_parse(rec.get("id"))
        fields = rec.get("fields")
        if not isinstance(fields, list) or not fields or len(fields) % 2:
            raise ExchangeError("fields must be a non-empty list of field, value, ...")
        return "entry", where, name, i, [dec(f, "field") for f in fields]
    if t == "stream":
        meta = {k: rec[k] for k in ("entries-added", "idmp-configured", "idmp-duration", "idmp-maxsize",
                                    "iids-added", "iids-duplicates", "expire-at") if k in rec}
        meta["last-id"] = id_parse(rec.get("last-id"), "last-id")
        meta["max-deleted-id"] = id_parse(rec.get("max-deleted-id", "0-0"), "max-deleted-id")
        return "stream", where, name, meta
    if t == "iid":
        return ("iid", where, name, _key_dec(rec.get("producer"), "producer"), _key_dec(rec.get("iid"), "iid"),
                id_parse(rec.get("id")))
    if t not in ("group", "consumer", "pending", "nacked"):
        raise ExchangeError("unknown record type %s" % _snippet(t))
    group = dec(rec.get("group"), "group name")
    if t == "group":
        return ("group", where, name, group, id_parse(rec.get("last-delivered-id"), "last-delivered-id"),
                rec.get("entries-read"))
    if t == "consumer":
        return ("consumer", where, name, group, dec(rec.get("consumer"), "consumer name"), rec.get("seen-time"),
                rec.get("active-time", -1))
    if t == "pending":
        return ("pending", where, name, group, dec(rec.get("consumer"), "consumer name"), id_parse(rec.get("id")),
                rec.get("delivery-time", 0), rec.get("delivery-count"))
    return "nacked", where, name, group, id_parse(rec.get("id")), rec.get("delivery-count")


class Importer:
    """Applies JSON records (dicts) to a store, one write transaction per
    ``batch`` records, through the engine's load path."""

    def __init__(self, store, batch=BATCH):
        self.store = store
        self.batch = batch
        self.pending = []            # (line number, record)
        self.stats = Stats()
        self.lineno = 0              # the last line committed
        self.streams = set()

    def feed(self, rec, lineno=None):
        self.pending.append((lineno if lineno is not None else self.lineno + len(self.pending) + 1, rec))
        if len(self.pending) >= self.batch:
            self.commit()

    def commit(self):
        recs = self.pending
        if not recs:
            return

        def records():
            for n, rec in recs:
                where = "line %d" % n
                try:
                    r = load_record(rec, where)
                except ExchangeError as e:
                    raise ExchangeError("%s: %s" % (where, e))
                self.streams.add(r[2])
                yield r
        try:
            st = self.store.run(lambda tx: tx.load(records()), write=True)
        except (LoadError, StoreFailure, RedisError) as e:
            raise ExchangeError(str(e))
        self.stats.entries += st.entries
        self.stats.streams = len(self.streams)
        self.lineno = recs[-1][0]
        self.pending = []

    def close(self):
        self.commit()
        return self.stats


def import_jsonl(store, lines, batch=BATCH, progress=None):
    """Import JSON lines in the export shape from an iterable of lines
    (bytes, or text); returns Stats.  See ``import_lines``."""
    return import_lines(store, lines, "xs", batch=batch, progress=progress)


# ====================================================== import: formats

FORMATS = ("xs", "jsonl", "kv")


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


class _Bad(Exception):
    """A line that cannot be imported (the text says why)."""


class _Num(str):
    """A JSON number, as its text."""


class _Obj(list):
    """A JSON object as its (name, value) pairs, duplicates kept."""


_JSON = json.JSONDecoder(object_pairs_hook=_Obj, parse_int=_Num, parse_float=_Num, parse_constant=_Num)


def _json_text(v):
    """Compact JSON text of a value parsed by _JSON (numbers as written)."""
    if isinstance(v, _Num):
        return str(v)
    if isinstance(v, _Obj):
        return "{%s}" % ",".join("%s:%s" % (json.dumps(k, ensure_ascii=False), _json_text(x)) for k, x in v)
    if isinstance(v, list):
        return "[%s]" % ",".join(_json_text(x) for x in v)
    return json.dumps(v, ensure_ascii=False)


def _json_value(name, v):
    if type(v) is str:
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, _Num):
        return v.encode("ascii")
    if v is True:
        return b"true"
    if v is False:
        return b"false"
    if v is None:
        raise _Bad("field %s is null (leave the member out, or give a value)" % json.dumps(name, ensure_ascii=False))
    return _json_text(v).encode("utf-8", "surrogateescape")


def _parse_jsonl(line, id_field):
    """One jsonl line (bytes) -> (id text or None, fields)."""
    try:
        obj = _JSON.decode(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError) as e:
        raise _Bad("not JSON (%s)" % e)
    if not isinstance(obj, _Obj):
        raise _Bad("not a JSON object")
    fields = []
    i = None
    for k, v in obj:
        if id_field is not None and k == id_field:
            if type(v) is not str:
                raise _Bad("the ID member %s must be a string (\"ms-seq\" or \"*\")" % json.dumps(k))
            i = v
            continue
        fields.append(k.encode("utf-8", "surrogateescape"))
        fields.append(_json_value(k, v))
    return i, fields


def _parse_kv(line, id_field, split):
    """One kv line (bytes) -> (id text or None, fields); ``split``
    cuts a line into words (redis-cli's rules: xstream_cli.splitargs)."""
    try:
        words = split(line)
    except ValueError:
        raise _Bad("unbalanced quotes")
    fields = []
    i = None
    for w in words:
        k, eq, v = w.partition(b"=")
        if not eq or not k:
            raise _Bad("%s is not field=value" % _show_bytes(w))
        if id_field is not None and k == id_field:
            i = v.decode("ascii", "replace")
            continue
        fields.append(k)
        fields.append(v)
    return i, fields


_KV_SLOW = re.compile(rb"[\"'\x00\x0b\x0c]")
# the separators of k words joined by newlines, each with one "=": "=\n=\n...="
_KV_ONE = 256
_KV_SEPS = [b""] + [b"=\n" * (k - 1) + b"=" for k in range(1, _KV_ONE)]
_KV_NOT_SEP = bytes(b for b in range(256) if b not in b"=\n")
# the same for a line of words separated by single spaces: "= = ... ="
_KV_SEPS1 = [b""] + [b"= " * (k - 1) + b"=" for k in range(1, _KV_ONE)]
_KV_NOT_SEP1 = bytes(b for b in range(256) if b not in b"= ")


_KV_NOT_SEP1_NL = bytes(b for b in range(256) if b not in b"= \n")
_KV_LONG = b"= " * (_KV_ONE - 1)            # in a line of _KV_ONE words or more


def _kv_block(block, joined):
    """The text forms (fields joined by newlines) of a block of kv lines
    whose words are separated by single spaces (``joined``: the lines
    joined by newlines, checked for that and for no quote, NUL, VT or
    FF by import_lines), when every line passes import_lines' per-line
    test: no empty line, fewer than _KV_ONE words, each word holding
    exactly one "=", not at its start -- checked for the whole block in
    C-level passes over the "=", space and newline bytes, in which "="
    and space must alternate on every line, beginning and ending with
    "=".  None if a line does not pass (the lines are then taken one
    by one)."""
    if joined[:1] == b"=" or b"\n=" in joined or b" =" in joined:
        return None
    p = joined.translate(None, _KV_NOT_SEP1_NL)
    if p[:1] != b"=" or p[-1:] != b"=" or b"==" in p or b"  " in p or b"\n " in p or b" \n" in p \
            or b"\n\n" in p or _KV_LONG in p:
        return None
    return b"\0".join(block).replace(b" ", b"\n").replace(b"=", b"\n").split(b"\0")


def _plain_kv(words):
    """Every word field=value with a field name."""
    for w in words:
        if w[:1] == b"=" or b"=" not in w:
            return False
    return True


def _show_bytes(b):
    t = json.dumps(b.decode("utf-8", "backslashreplace"), ensure_ascii=False)
    return t if len(t) <= 40 else t[:37] + "..."


def _parse_xs(line, _id_field):
    """One export-shape line -> a JSON record (a dict)."""
    try:
        return json.loads(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError) as e:
        raise _Bad("not JSON (%s)" % e)


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


BLOCK = 1 << 16          # bytes read at a time


def _blocks(src, run):
    """(lines, bytes) blocks of ``src``: lines without their newline (a
    line ends at \\n only).  From a binary file, each read takes what
    is there (read1); before a read that would wait, the entries
    gathered so far are committed (``run.commit``), so a slow producer's
    entries do not wait for a full batch."""
    read = getattr(src, "read1", None)
    if read is None:
        buf = []
        size = 0
        for line in src:
            if type(line) is not bytes:
                line = line.encode("utf-8", "surrogateescape")
            size += len(line)
            buf.append(line[:-1] if line[-1:] == b"\n" else line)
            if len(buf) >= 1024:
                yield buf, size
                buf = []
                size = 0
        if buf:
            yield buf, size
        return
    try:
        fd = src.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    import select
    tail = []
    while True:
        if fd is not None and run.items:
            try:
                ready = bool(select.select([fd], [], [], 0)[0])
            except (OSError, ValueError):
                ready = True
            if not ready:
                run.commit(run.line)           # the producer is slow: commit what it sent
        chunk = read(BLOCK)
        if not chunk:
            break
        cut = chunk.rfind(b"\n")
        if cut < 0:
            tail.append(chunk)
            continue
        if tail:
            tail.append(chunk[:cut])
            body = b"".join(tail)
        else:
            body = chunk[:cut]
        rest = chunk[cut + 1:]
        tail = [rest] if rest else []
        yield body.split(b"\n"), len(body) + 1
    if tail:
        body = b"".join(tail)
        yield [body], len(body)


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
