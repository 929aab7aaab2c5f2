"""Output modes: a reply value (see reply.py) to the bytes printed.

  raw     byte-identical to ``redis-cli --raw``
  noraw   byte-identical to ``redis-cli --no-raw`` (RESP2 view)
  json    one RESP3-shaped JSON document per reply

Each renderer returns the full bytes for one reply, newline included.
The pretty mode lives in pretty.py.  ``escape_text`` / ``terminal_text``
here are the one place that decides how stored bytes are shown on a
terminal (pretty output and ``xs tail``): control characters, ESC, DEL,
C1 controls and bytes that are not UTF-8 are escaped, never written raw.
"""
import sys

from storage.errors import RedisError
from xstream_cli.output.reply import Map, NullArray, Status, entry_rows

# storage.codec.Entries (the engine's entries of a range, rendered without
# a list of rows) once storage.codec.entries is loaded, which a one-shot
# command that reads no entries (XLEN) never does; before that no reply
# can hold one, and None is no reply's type.  Each renderer binds it
# (_bind_entries) while it is None.
Entries = None


def _bind_entries():
    global Entries
    m = sys.modules.get("storage.codec.entries")
    if m is not None:
        Entries = m.Entries

# --------------------------------------------------------------------- raw


def raw(reply):
    if Entries is None:
        _bind_entries()
    if type(reply) is Entries:
        text = reply.text()
        if text is not None:
            return text + b"\n"
    out = []
    _raw(reply, out)
    try:
        return b"\n".join(out) + b"\n"
    except TypeError:  # the entry fast path met something that is not bytes
        out = []
        _raw(reply, out, False)
        return b"\n".join(out) + b"\n"


def _raw(r, out, fast=True):
    t = type(r)
    if t is Entries:
        r = entry_rows(r)
        t = list
    if t is bytes:
        out.append(r)
    elif t is list or t is tuple:
        if not r:
            out.append(b"")
        app = out.append
        ext = out.extend
        for x in r:
            tx = type(x)
            if tx is bytes:
                app(x)
            elif fast and tx is list and len(x) == 2 and type(x[0]) is bytes and type(x[1]) is list and x[1] \
                    and type(x[1][0]) is bytes:
                # an entry [id, [field, value, ...]]: flattened in one step
                app(x[0])
                ext(x[1])
            else:
                _raw(x, out, fast)
    elif t is int or t is bool:
        out.append(b"%d" % r)
    elif r is None or t is NullArray:
        out.append(b"")
    elif t is Status or t is str:
        out.append(r.encode("utf-8", "surrogateescape"))
    elif t is Map:
        _raw(r.resp2(), out, fast)
    elif isinstance(r, RedisError):
        out.append(r.text.encode("utf-8", "surrogateescape") + b"\n")
    else:
        raise TypeError("cannot render %r" % (r,))


# ------------------------------------------------------------------- no-raw

_REPR = None       # byte -> its text in a quoted string; with _SAFE, made by the first quote()
_SAFE = None


def _quote_tables():
    global _REPR, _SAFE
    rep = {}
    for b in range(256):
        if b == 92:
            rep[b] = b"\\\\"
        elif b == 34:
            rep[b] = b'\\"'
        elif b == 10:
            rep[b] = b"\\n"
        elif b == 13:
            rep[b] = b"\\r"
        elif b == 9:
            rep[b] = b"\\t"
        elif b == 7:
            rep[b] = b"\\a"
        elif b == 8:
            rep[b] = b"\\b"
        elif 32 <= b <= 126:
            rep[b] = bytes([b])
        else:
            rep[b] = b"\\x%02x" % b
    _REPR = rep
    _SAFE = frozenset(b for b in range(32, 127) if b not in (92, 34))


def quote(b):
    """sdscatrepr: a bulk string as redis-cli shows it."""
    if _SAFE is None:
        _quote_tables()
    if all(c in _SAFE for c in b):
        return b'"' + b + b'"'
    return b'"' + b"".join(_REPR[c] for c in b) + b'"'


def noraw(reply):
    if Entries is None:
        _bind_entries()
    out = []
    _noraw(reply, b"", out)
    return b"".join(out)


def _as_array(r):
    """The RESP2 array behind a list, tuple or map, else None."""
    t = type(r)
    if t is Entries:
        return entry_rows(r)
    if t is tuple:
        return list(r)
    if t is Map:
        return r.resp2()
    if t is list:
        return r
    return None


def _noraw(r, prefix, out):
    arr = _as_array(r)
    if arr is not None:
        n = len(arr)
        if n == 0:
            out.append(b"(empty array)\n")
            return
        w = len(str(n))
        child = prefix + b" " * (w + 2)
        for i, x in enumerate(arr, 1):
            if i > 1:
                out.append(prefix)
            out.append(str(i).rjust(w).encode() + b") ")
            _noraw(x, child, out)
        return
    t = type(r)
    if t is bytes:
        out.append(quote(r) + b"\n")
    elif t is int or t is bool:
        out.append(b"(integer) %d\n" % r)
    elif r is None or t is NullArray:
        out.append(b"(nil)\n")
    elif t is Status:
        out.append(r.encode("utf-8", "surrogateescape") + b"\n")
    elif t is str:
        out.append(quote(r.encode("utf-8", "surrogateescape")) + b"\n")
    elif isinstance(r, RedisError):
        out.append(b"(error) " + r.text.encode("utf-8", "surrogateescape") + b"\n")
    else:
        raise TypeError("cannot render %r" % (r,))


# --------------------------------------------------------------------- JSON


def _text(b):
    """A byte string as a JSON value: a string when it is UTF-8, else
    ``{"b64": "<base64>"}`` -- the convention of xs export, xs tail and
    xs worker, lossless and read the same by jq, Node and Python."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        import base64
        return {"b64": base64.b64encode(b).decode("ascii")}


def _key(k):
    """A map key (an object's name must be a string, so not {"b64"}):
    decoded with surrogateescape.  Each byte that is not part of valid
    UTF-8 becomes U+DC80..U+DCFF, which ``json`` writes as the JSON
    escape ``\\udcXX`` (XX: the byte) -- a code point that text decoded
    from valid UTF-8 never holds, so the convention is unambiguous and
    reversible: ``json.loads`` then ``key.encode("utf-8",
    "surrogateescape")`` gives the bytes back (docs/guide.md)."""
    return k.decode("utf-8", "surrogateescape") if type(k) is bytes else str(k)


def to_jsonable(r):
    """Reply -> plain Python (str/int/None/list/dict), RESP3 shape."""
    if Entries is None:
        _bind_entries()
    t = type(r)
    if t is bytes:
        return _text(r)
    if t is Entries:
        r = entry_rows(r)
        t = list
    if t is list or t is tuple:
        return [to_jsonable(x) for x in r]
    if t is int or t is bool or r is None:
        return r
    if t is NullArray:
        return None
    if t is Status or t is str:
        return str(r)
    if t is Map:
        pairs = [(_key(k), to_jsonable(v)) for k, v in r.pairs]
        d = dict(pairs)
        return d if len(d) == len(pairs) else _RepeatedKeys(pairs)
    if isinstance(r, RedisError):
        return {"error": r.text}
    raise TypeError("cannot render %r" % (r,))


class _RepeatedKeys(dict):
    """A RESP3 map that names a key twice (XREAD STREAMS s s 0 0): Redis
    sends both pairs, so the JSON object has the key twice too (valid
    JSON; a parser that keeps one key sees the last).  The json module
    writes a dict subclass through its items()."""

    def __init__(self, pairs):
        super().__init__(pairs)
        self._pairs = pairs

    def items(self):
        return list(self._pairs)


def json(reply, argv=None):
    import json as _json
    # backslashreplace: an error text may echo an argument that is not UTF-8
    return _json.dumps(to_jsonable(reply), ensure_ascii=False).encode("utf-8", "backslashreplace") + b"\n"


def entry_line(stream, entry):
    """One entry in the shape of xs export (b64 for bytes that are not
    UTF-8), as a JSON line; a deleted entry (fields nil) has "fields": null."""
    import json as _json
    i, fields = entry[0], entry[1]
    rec = {"stream": _text(stream), "id": i.decode("ascii") if type(i) is bytes else str(i),
           "fields": None if fields is None else [_text(f) for f in fields]}
    return _json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


_RANGES = frozenset((b"XRANGE", b"XREVRANGE"))
_READS = frozenset((b"XREAD", b"XREADGROUP"))


def jsonl(reply, argv=None):
    """--jsonl: the entries of XRANGE / XREVRANGE and of XREAD /
    XREADGROUP (``argv``: the command, which names the stream of a
    range), one JSON line each in the shape of xs export; a nil reply of
    those prints nothing; every other reply is one JSON document, as
    --json."""
    if Entries is None:
        _bind_entries()
    name = argv[0].upper() if argv else None
    t = type(reply)
    if name in _RANGES and len(argv) > 1 and (t is Entries or (t is list and all(map(_is_entry, reply)))):
        return b"".join(entry_line(argv[1], e) for e in entry_rows(reply))
    if name in _READS:
        if reply is None:
            return b""
        if t is Map and all(type(v) in (list, Entries) for _, v in reply.pairs):
            return b"".join(entry_line(k, e) for k, v in reply.pairs for e in entry_rows(v))
    return json(reply)


def _is_entry(e):
    return type(e) in (list, tuple) and len(e) >= 2 and type(e[0]) is bytes and (e[1] is None or type(e[1]) is list)


RENDERERS = {"raw": raw, "noraw": noraw, "json": json, "jsonl": jsonl}


# ------------------------------------------------------ text for a terminal

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a", "\b": "\\b"}


def escape_text(t, quoting=True):
    """Text ``t`` (decoded with surrogateescape) with printable characters
    as they are and the others as redis-cli escapes (``\\n``, ``\\x1b``,
    ``\\xHH`` for each byte of a non-printable character or of a byte
    that is not UTF-8); ``quoting``: also escape '"' and backslash (the
    text goes inside double quotes).  Printable non-ASCII (München, 日本)
    stays as it is."""
    if t.isprintable() and (not quoting or ('"' not in t and "\\" not in t)):
        return t
    out = []
    for ch in t:
        e = _ESCAPES.get(ch)
        if e is not None and (quoting or ch not in '"\\'):
            out.append(e)
        elif ch.isprintable():
            out.append(ch)
        elif "\udc80" <= ch <= "\udcff":          # a byte that is not UTF-8
            out.append("\\x%02x" % (ord(ch) - 0xdc00))
        else:
            out.extend("\\x%02x" % c for c in ch.encode("utf-8", "surrogatepass"))
    return "".join(out)


def terminal_text(b):
    """Bytes for a terminal, unquoted: printable characters as they are,
    the rest (control characters, ESC, bytes that are not UTF-8) escaped."""
    return escape_text(b.decode("utf-8", "surrogateescape"), quoting=False)
