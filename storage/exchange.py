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
     "idmp-configured", "idmp-duration", "idmp-maxsize", "iids-added", "iids-duplicates"}
    {"type": "iid", "stream", "producer", "iid", "id"}
    {"type": "group", "stream", "group", "last-delivered-id", "entries-read"}
    {"type": "consumer", "stream", "group", "consumer", "seen-time", "active-time"}
    {"type": "pending", "stream", "group", "consumer", "id", "delivery-time", "delivery-count"}
    {"type": "nacked", "stream", "group", "id", "delivery-count"}

Every line names its stream (and group, consumer), so lines can be
filtered with jq; the only order import needs is entries before the
"stream" line of their stream, and a group before its consumers and
their pending entries -- the order export writes.

Import goes through the engine's load path (storage.load), one write
transaction per batch (10,000 lines by default): bulk speed, and a
failed line stops the import with everything before its batch committed
(the error says how far it got).  For an all-or-nothing copy use a
snapshot.
"""
import base64
import json
import time

from storage import codec
from storage.dump import CorruptStore
from storage.errors import RedisError
from storage.load import LoadError, Stats
from storage.txn import StoreFailure

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
            line = dumps(rec) + "\n"
            st.bytes += len(line)
            buf.append(line)
            if len(buf) >= 1000:
                out.write("".join(buf))
                buf = []
                if progress is not None:
                    progress("export", st.entries, None)
        out.write("".join(buf))
    out.flush()
    st.seconds = time.monotonic() - t0
    return st


# ================================================================== import

def load_record(rec, where):
    """A JSON record (a dict) -> a storage.load record."""
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
                                    "iids-added", "iids-duplicates") if k in rec}
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
    """Import JSON lines from an iterable of text lines; returns Stats.
    Blank lines are skipped (line numbers count them)."""
    t0 = time.monotonic()
    imp = Importer(store, batch)
    nbytes = 0
    for n, line in enumerate(lines, 1):
        nbytes += len(line)
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError) as e:
            imp.commit()
            raise ExchangeError("line %d: not JSON (%s)" % (n, e))
        imp.feed(rec, n)
        if progress is not None and n % 10000 == 0:
            progress("import", nbytes, None)
    st = imp.close()
    st.bytes = nbytes
    st.seconds = time.monotonic() - t0
    return st
