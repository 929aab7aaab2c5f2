"""The JSON records of ``xs export`` / ``xs import`` (format xs), both
ways: byte strings as JSON values, an entry's record, IDs as text, and
a record as the engine's load record.  No click, no rich.

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
"""
import base64
import json

from storage import codec


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


def dumps(rec):
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


# ============================================================= records in

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
