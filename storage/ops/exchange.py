"""JSON lines (``xs export`` / ``xs import``).  No click, no rich.

The module the porcelain and library users import: the export is
here, and every name of the import is here too.  By idea:

  storage.ops.json_records  the JSON shape of an entry and of the --meta
                            lines, both ways (docs/snapshot-format.md)
  storage.ops.line_formats  the lines of --format jsonl, kv and xs
  storage.ops.line_import   import_lines: lines -> batches, one write
                            transaction each
  storage.lines             lines read as they come

Here: ``export_records`` / ``export_jsonl`` (the streams as records, in
one read transaction) and ``Importer`` (records, dicts, applied in
batches: xs import --from a live Redis).

Import goes through the engine's load path (storage.verbs.load), one write
transaction per batch (10,000 lines by default): bulk speed, and a
failed line stops the import with everything before its batch committed
(the error says how far it got).  For an all-or-nothing copy use a
snapshot.
"""
import time

from storage import codec
from storage.errors import RedisError
from storage.ops.json_records import (
    ExchangeError,
    _key_enc,
    dec,
    dumps,
    enc,
    entry_record,
    id_parse,
    id_text,
    load_record,
)
from storage.ops.line_formats import FORMATS
from storage.ops.line_import import BATCH, ImportFailed, ImportInterrupted, ImportStats, import_jsonl, import_lines
from storage.txn import StoreFailure
from storage.verbs.dump import CorruptStore
from storage.verbs.load import LoadError, Stats

__all__ = ["BATCH", "FORMATS", "ExchangeError", "ImportFailed", "ImportInterrupted", "ImportStats", "Importer", "dec",
           "dumps", "enc", "entry_record", "export_jsonl", "export_records", "id_parse", "id_text", "import_jsonl",
           "import_lines", "load_record"]


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
