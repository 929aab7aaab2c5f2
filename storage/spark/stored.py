"""The url mode's pages from xs serve in stored form (XS.PAGE), checked
before they are used

xs serve answers ``XS.PAGE format key start end count``
(xstream_cli.server.stored_page) with a page of entries as its store
holds them: ``[format, [[tag, name, ...], ...], key, value, key, value,
...]``.  The reader builds its Arrow batches from them with the path
mode's code (storage.spark.columns._batch), as it does from the store
itself: the server splits and encodes nothing, and the reader parses
two bulk strings an entry instead of two plus two a field.  The reader
asks ``COMMAND INFO XS.PAGE`` once a connection (storage.spark.network):
a redis-server answers a nil, with no error reply to count in its
errorstats, and is read with XRANGE; so is an xs serve that stores
another format, which refuses the format (``unsupported``).

The server may be anything on the network, so nothing of a reply is
trusted: ``page`` checks its shape, the format, the field sets (tags 1
to 8, at most codec.SHAPE_MAX_FIELDS names each, no tag twice), every
key (20 bytes, or 28 with the wide sequence number's marker), IDs in
strictly increasing order inside the range asked for, at most ``count``
entries, and every value's first byte (a record's digit, 0 for a
msgpack record, or one of the page's tags).  Decoding that still fails
(a shaped value with the wrong number of separators, a record that is
not one) raises through storage.spark.reading's ``_stored_batch`` as one
line naming the endpoint and the stream; nothing is skipped, nothing is
read twice.
"""
from storage import codec, ids
from storage.errors import RedisError

COMMAND = "XS.PAGE"
MAX_COUNT = 5000                  # the server's limit (xstream_cli.server.stored_page.MAX_COUNT)
_DIGITS = frozenset(range(0x30, 0x3A))
_RECORD_FIRST = _DIGITS | {0}


class BadPage(ValueError):
    """A reply that is not a page in stored form: what is wrong with it
    (storage.spark.network says which endpoint and stream sent it)."""


class Page:
    """One page: (entry key, stored value) pairs, the field sets they
    use ({tag: codec.Shape}), and the ID of the last entry."""

    __slots__ = ("pairs", "shapes", "last")

    def __init__(self, pairs, shapes, last):
        self.pairs, self.shapes, self.last = pairs, shapes, last

    def __len__(self):
        return len(self.pairs)


def ask(name, lo, hi, count):
    """The command for the entries of ``name`` in [lo, hi], at most ``count``."""
    return (COMMAND, codec.FORMAT_VERSION, name, "%d-%d" % lo, "%d-%d" % hi, count)


def unsupported(error):
    """Whether the error a server answered XS.PAGE with says it has no
    such command (redis-server) or does not send this format: read with
    XRANGE instead."""
    text = str(error)
    if text.startswith("ERR "):
        text = text[4:]
    low = text.lower()
    return (low.startswith("unknown command") or low.startswith("unsupported command")     # Envoy's proxy
            or text.startswith(COMMAND + " format "))


def page(reply, lo, hi, count):
    """XS.PAGE's ``reply`` for [lo, hi] and ``count``, checked: a Page
    (BadPage if it is not one)."""
    bad = BadPage
    if type(reply) is not list or len(reply) < 2 or len(reply) % 2:
        raise bad("not an array of the format, the field sets and key-value pairs")
    if reply[0] != codec.FORMAT_VERSION:
        raise bad("format %r, not %d" % (reply[0], codec.FORMAT_VERSION))
    shapes = _shapes(reply[1], bad)
    keys, values = reply[2::2], reply[3::2]
    n = len(keys)
    if n > count:
        raise bad("%d entries, more than the %d asked for" % (n, count))
    if n == 0:
        return Page([], shapes, None)
    if not {type(k) for k in keys} | {type(v) for v in values} <= {bytes}:
        raise bad("a key or a value that is not a bulk string")
    first, last = _ids(keys, bad)
    if first < lo or last > hi:
        raise bad("an entry outside the range %d-%d .. %d-%d" % (lo + hi))
    if b"" in values:
        raise bad("an empty value")
    firsts = set(map(_first, values))
    if not firsts <= _RECORD_FIRST | set(shapes):
        raise bad("a value of an unknown kind (first byte %d)" % min(firsts - _RECORD_FIRST - set(shapes)))
    if not firsts.isdisjoint(_DIGITS):
        for v in values:                  # a record: its ID and its field names and values, a line each
            if v[0] in _DIGITS and (v.count(b"\n") < 2 or v.count(b"\n") % 2):
                raise bad("a record that is not an ID and field-value pairs")
    if 0 in firsts:
        for v in values:                  # a record in msgpack form: [ID, [field, value, ...]], all bytes
            if v[0] == 0 and not _msgpack_record(v):
                raise bad("a msgpack record that is not an ID and field-value pairs")
    return Page(list(zip(keys, values)), shapes, last)


def _msgpack_record(v):
    try:
        got = codec.decode_entry(v)
    except Exception:                     # whatever msgpack makes of bytes that are not its own
        return False
    if type(got) is not list or len(got) != 2 or type(got[0]) is not bytes or type(got[1]) is not list:
        return False
    fields = got[1]
    return len(fields) >= 2 and not len(fields) % 2 and all(type(f) is bytes for f in fields)


def xrange_last(page, start, hi):
    """The last ID of an XRANGE page for [start, hi] (None: no entry),
    checked as far as paging depends on it: its first and last IDs
    inside the range, in order, so every page starts after the one
    before (a server without XS.PAGE that sends anything else fails the
    read, never loops on it).  BadPage says what is wrong."""
    if type(page) is not list:
        raise BadPage("an XRANGE reply that is not an array")
    if not page:
        return None
    a, b = page[0], page[-1]
    if not (type(a) is list and type(b) is list and a and b and type(a[0]) is bytes and type(b[0]) is bytes):
        raise BadPage("an XRANGE page whose entries are not [ID, fields]")
    try:
        first, last = ids.parse_id(a[0], strict=True), ids.parse_id(b[0], strict=True)
    except RedisError:
        raise BadPage("an XRANGE page with an entry ID that is not ms-seq") from None
    if not start <= first <= last <= hi:
        raise BadPage("an XRANGE page outside the range asked for")
    return last


def _first(v):
    return v[0]


def _shapes(raw, bad):
    if type(raw) is not list:
        raise bad("field sets that are not an array")
    out = {}
    for s in raw:
        if (type(s) is not list or len(s) < 2 or type(s[0]) is not int or not 0 < s[0] <= codec.MAX_SHAPES
                or s[0] in out or len(s) - 1 > codec.SHAPE_MAX_FIELDS
                or not all(type(x) is bytes for x in s[1:])):
            raise bad("a field set that is not [tag 1-%d, up to %d names]" % (codec.MAX_SHAPES,
                                                                              codec.SHAPE_MAX_FIELDS))
        out[s[0]] = codec.Shape(s[0], s[1:])
    return out


def _ids(keys, bad):
    """The first and last IDs of the entries' keys, checked: strictly
    increasing.  Keys of 20 bytes (nearly all) in one numpy pass."""
    import numpy as np
    if set(map(len, keys)) == {codec.SHORT_KEY}:
        a = np.frombuffer(b"".join(keys), dtype=np.dtype(codec.SHORT_KEY_DTYPE))
        ms, seq = a["ms"], a["seq"]
        if (seq == codec.SEQ_WIDE).any():
            raise bad("a 20-byte entry key with the wide sequence number's marker")
        rising = (ms[1:] > ms[:-1]) | ((ms[1:] == ms[:-1]) & (seq[1:] > seq[:-1]))
        if not rising.all():
            raise bad("entries not in increasing ID order")
        return (int(ms[0]), int(seq[0])), (int(ms[-1]), int(seq[-1]))
    if not all(map(codec.is_entry_key, keys)):
        raise bad("an entry key that is not one of xs's (%d bytes)"
                  % min(len(k) for k in keys if not codec.is_entry_key(k)))
    got = list(map(codec.id_from_entry_key, keys))
    if not all(a < b for a, b in zip(got, got[1:])):
        raise bad("entries not in increasing ID order")
    return got[0], got[-1]


def merge(shapes, new):
    """Whether the field sets ``new`` (a page's) agree with ``shapes``
    (those of the pages before): a tag that changed its names (the
    stream deleted and made again between pages) starts a new batch."""
    return all(shapes[t].names == s.names for t, s in new.items() if t in shapes)
