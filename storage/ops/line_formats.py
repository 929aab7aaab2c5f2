"""The lines of ``xs import --stream S --format jsonl|kv|xs``: one line
-> the fields of an entry (or, for xs, a JSON record), and the checks
that let a block of plain kv lines be taken at once.  No click, no rich.

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
"""
import json
import re

FORMATS = ("xs", "jsonl", "kv")


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
