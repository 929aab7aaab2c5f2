"""The request reader's fast paths with hiredis's C parser (the
``serve`` extra): functions of a ``resp.RequestParser``, which calls
them as its methods ``_native_whole`` and ``_native_frames``.  Either
takes only well-formed multibulk requests, and leaves anything else to
the parser's general loop, so that the commands and the protocol errors
are the same with and without hiredis.

Who imports it: xstream_cli.server.resp.
"""
import re
from itertools import chain, islice

try:
    import hiredis as HIREDIS  # the serve extra
except ImportError:
    HIREDIS = None

FAST_WINDOW = 64 << 10          # bytes the fast path of one step looks at
# what the readers' gets() answers when no whole request is left: a value
# no request can be (False would equal a request's integer 0), so that
# ``iter(gets, _MORE)`` takes the requests in a C-level loop
_MORE = object()


def _reader():
    return HIREDIS.Reader(notEnoughData=_MORE)


def _take(reader, limit):
    """(requests, done): up to ``limit`` requests read by ``reader`` (None
    after a protocol error), and whether it stopped for want of bytes
    (not at the limit, not at an error)."""
    try:
        got = list(islice(iter(reader.gets, _MORE), limit))
    except Exception:        # hiredis.ProtocolError
        return None, False
    return got, len(got) < limit        # at the limit, whether more follows is not known


def native_whole(parser, limit):
    """The usual step, shortest: a buffer that is nothing but whole,
    well-formed requests (no byte that ``_native_frames`` would look
    at twice), read by hiredis in one go and taken whole.  None when
    it is not so (nothing taken: the usual paths read it)."""
    buf = parser.buf
    marks = buf.translate(_MARKS)
    # the usual request has no number of three digits and no other type's
    # marker: one look each (single requests are most of a server's steps)
    if b"000" in marks and (buf[1:6].isdigit() or _big_header(marks, 0, buf, 0, len(buf))):
        return None                        # an aggregate header of 10,000 or more: see _native_frames
    # a type that may come back as bytes, or bytes that look like one
    suspect = b"!" in marks and _marked(marks, len(buf))
    r = parser._reader
    if r is None:
        r = _reader()
    r.feed(buf)
    got, done = _take(r, limit)
    if not done or not got or not _whole(r) or not all(got):
        parser._reader = None
        return None
    parser._reader = r
    try:
        # non-empty arrays of bulk strings: anything else in ``got`` (a
        # null, a number, an array in an array, a bulk string alone) is
        # not bytes in bytes' place; the markers refused above are
        # those that come back as bytes, lists or dicts
        size = len(b"".join(chain.from_iterable(got)))
    except TypeError:
        parser._reader = None
        return None
    if parser.max_bulk < size and max(map(len, chain.from_iterable(got))) > parser.max_bulk \
            or suspect and not _is_wire_of(got, buf):
        parser._reader = None
        return None
    buf.clear()
    parser._copy = None
    parser._clean = 0
    return got

def native_frames(parser, out, limit):
    """The fast path with hiredis: the complete requests of a window,
    taken only when each is a non-empty array of bulk strings within
    the limits (then its wire length is known from its arguments);
    else nothing is taken and the general loop reads from here.
    Returns the bytes it took.

    The usual window (a client's requests, all complete) is taken
    whole: hiredis read every byte of it and is back between two
    requests (``_whole``), so no length needs adding up."""
    buf = parser.buf
    pos = parser.pos
    stop = min(len(buf), pos + FAST_WINDOW)
    # hiredis makes the list of an array header as soon as it reads it,
    # and dropping a list of 2**31 slots stalls the loop for seconds:
    # a window where an aggregate header of 10,000 or more may be (5
    # digits: such a request hardly fits in a window anyway) never
    # reaches it -- the general loop reads it, and refuses a count
    # over MAX_MULTIBULK before making anything.  Each byte is looked
    # at once (``_clean``: the bytes before it have no such header).
    if buf[pos + 1:pos + 6].isdigit():
        return _refuse(parser, ())
    marks = buf[pos:stop].translate(_MARKS)
    start = parser._clean - 6
    if start < pos:
        start = pos
    if start < stop:
        if _big_header(marks, start - pos, buf, pos, stop):
            return _refuse(parser, ())
        parser._clean = stop
    r = parser._reader
    if r is None:
        r = _reader()
    r.feed(buf, pos, stop - pos)
    got, done = _take(r, max(0, limit - len(out)))    # a protocol error: the general loop says which
    whole = done and _whole(r)
    parser._reader = r if whole else None
    if not got:
        return _refuse(parser, got)
    if len(got) == 1:
        args = got[0]
        if type(args) is not list or not args:
            return _refuse(parser, got)     # *-1, *0, a simple string ...: the general loop reads it
    elif set(map(type, got)) != _LIST or not all(got):
        return _refuse(parser, got)
    else:
        args = list(chain.from_iterable(got))
    if set(map(type, args)) != _BYTES:
        return _refuse(parser, got)         # a null, an integer, an array ... element
    if whole:
        used = stop - pos
    else:
        lens = list(map(len, args))
        argcs = list(map(len, got))
        try:
            used = sum(lens) + sum(map(_HLEN.__getitem__, lens)) + sum(map(_ALEN.__getitem__, argcs))
        except IndexError:                   # an argument of 4 KB or more
            used = sum(lens) + sum(len(b"$%d\r\n" % n) for n in lens) + sum(len(b"*%d\r\n" % n) for n in argcs)
        used += 2 * len(lens)
    if parser.max_bulk < FAST_WINDOW and max(map(len, args)) > parser.max_bulk:
        return _refuse(parser, got)
    stop = pos + used
    # simple strings, big numbers, verbatim strings and sets come back
    # as bytes or lists, and attributes are dropped: refused where one
    # may be, unless the bytes are exactly the requests as bulk strings
    if _marked(marks, used) and not _is_wire_of(got, buf[pos:stop]):
        return _refuse(parser, got)
    out += got
    parser.pos = stop
    return used


def _is_wire_of(got, data):
    """Whether ``data`` is exactly ``got`` (requests, lists of bytes) as
    arrays of bulk strings: then hiredis read no other type there.  The
    look for the markers of other types (``_MARKS``, ``_NOT_BULK``) also
    stops at an argument that only begins like one -- a worker's
    ``XREADGROUP ... >`` above all -- which this tells apart, exactly."""
    try:
        return b"".join([b"*%d\r\n%s" % (len(a), b"".join([b"$%d\r\n%s\r\n" % (len(x), x) for x in a]))
                         for a in got]) == data
    except TypeError:        # not bytes in bytes' place (a number, a dict ...)
        return False


def _big_header(marks, i, buf, base, stop):
    """Whether an aggregate header of 10,000 or more begins in ``buf``
    at ``base + i`` or after (before ``stop``); ``marks``: ``buf[base:]``
    translated by ``_MARKS``.  A look for the candidates -- a header of
    1,000 or more -- in the translation first (a plain ``find``, several
    times faster than a regular expression over RESP's frequent line
    ends), then the exact look from the first one on."""
    for candidate in (b"\n*000", b"\n!000"):
        j = marks.find(candidate, i)
        if j >= 0 and _BIG_HEADER(buf, base + j, stop) is not None:
            return True
    return False


def _marked(marks, end):
    """Whether a line of ``marks[:end]`` (a translation by ``_MARKS``)
    begins with the marker of a type that is not an array or a bulk
    string (or bytes that look like one): first a look for the rare
    marker alone, at memchr's speed."""
    return marks.find(b"!", 0, end) >= 0 and marks.find(b"\n!", 0, end) >= 0


def _refuse(parser, got):
    parser._reader = None
    return 0


_LIST = {list}
_BYTES = {bytes}
# an aggregate (array, map, set, push, attribute) header of 10,000 or more
_BIG_HEADER = re.compile(rb"\n[*%~>|][0-9]{5}").search
_PROBE = b"*0\r\n"
# the fast paths' look at a window, one translation: a type that is not an
# array or a bulk string but may come back as bytes, a list or a dict (a
# simple string, a big number, a verbatim string, a map, a set, a push,
# an attribute) -> "!"; digits -> "0"; line feeds and "*" kept; any other
# byte -> ".": an array header of 1,000 or more is then "\n*000", a
# map's, set's, push's or attribute's "\n!000"
_MARKS = bytes.maketrans(bytes(range(256)), bytes(
    b"!"[0] if b in b"+(=%~>|" else b"0"[0] if b in b"0123456789" else b if b in b"\n*" else b"."[0]
    for b in range(256)))


def _whole(reader):
    """Whether hiredis's ``reader``, which answered _MORE, took every byte
    it was fed and is between two requests: then an empty array fed to
    it comes back alone (inside a request cut short it would be one of
    its elements, or the bytes of one)."""
    if reader.has_data():
        return False
    reader.feed(_PROBE)
    try:
        return reader.gets() == []
    except Exception:
        return False
_HLEN = [len(b"$%d\r\n" % k) for k in range(4096)]     # length -> len("$length\r\n")
_ALEN = [len(b"*%d\r\n" % k) for k in range(4096)]     # count -> len("*count\r\n")
