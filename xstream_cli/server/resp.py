"""The Redis wire protocol (RESP2 and RESP3) for ``xs serve``.

Requests: ``RequestParser`` takes the bytes a client sends, as they
arrive, and gives back the commands in them (multibulk ``*N $len ...``
or inline lines, as redis-server accepts both; a read that is exactly
one request in the form clients write with one split and no buffering,
``lone``; other well-formed multibulk requests with hiredis's C parser
where the ``serve`` extra is installed, unless the server is told not
to: XS_SERVE_PURE=1), with Redis's limits:
an argument longer than ``proto-max-bulk-len`` (512 MB) or a malformed
request is a ``ProtocolError`` (the server answers it and closes the
connection, as Redis does).

Replies: ``encode(reply, proto)`` writes one reply value of the reply
model (xstream_cli.output.reply: the same values the renderers print) to the
wire.  RESP3 sends maps as maps and nulls as ``_``; RESP2 sends a map as
the flat array or the array of pairs the map says (``Map.flat``), and a
null as a null bulk string, except in XREAD / XREADGROUP replies where
Redis sends null arrays (``array_null``).
"""
from storage.codec import Entries
from storage.errors import RedisError
from xstream_cli.commands.parsing import string2ll
from xstream_cli.output.reply import Map, NullArray, Status
from xstream_cli.server.frames import FAST_WINDOW, HIREDIS, native_frames, native_whole
from xstream_cli.splitargs import SplitError, split_line

MAX_BULK = 512 << 20            # proto-max-bulk-len
MAX_MULTIBULK = 1024 * 1024     # xs refuses a multibulk longer than this (Redis: INT_MAX)
INT_MAX = (1 << 31) - 1
MAX_INLINE = 64 << 10           # PROTO_INLINE_MAX_SIZE
LONE_MAX = 16 << 10             # RequestParser.lone: the longest read it looks at
UNAUTHED_MULTIBULK = 10         # before AUTH, as redis-server: at most 10 arguments ...
UNAUTHED_BULK = 16384           # ... of 16 KB each


class ProtocolError(Exception):
    """A request the server cannot read (the connection is closed after
    the error reply)."""


class Verbatim(bytes):
    """A RESP3 verbatim string (``=``, format ``txt``), e.g. INFO; a bulk
    string in RESP2."""
    __slots__ = ()


class Push(list):
    """A RESP3 push (``>``); an array in RESP2."""
    __slots__ = ()


# ------------------------------------------------------------------ requests

class RequestParser:
    """Incremental request reader: ``feed(data)``, then ``commands()``
    returns the complete commands (lists of bytes) read so far, in order.
    A ProtocolError is returned in the list (after the commands before
    it); nothing more is read after one.

    ``native``: read well-formed multibulk requests with hiredis's C
    parser (the ``serve`` extra; None or True: when it is installed);
    otherwise with the fast path of ``_whole_frames``.  Either way
    anything else (inline commands, malformed requests, requests cut
    short, before AUTH) goes to the one general loop, so the commands
    and the protocol errors are the same with and without hiredis."""

    def __init__(self, max_bulk=MAX_BULK, native=None):
        self.buf = bytearray()
        self.pos = 0
        self.max_bulk = max_bulk
        self.need = 0            # bytes the current incomplete request needs at least
        self.broken = False
        self._argv = None        # multibulk in progress: args read so far
        self._left = 0           # its arguments still to read
        self.unauthed = False    # before AUTH (with requirepass): Redis's small limits apply
        self._copy = None        # bytes of buf from _copy_base, copied when buf was _copy_end long
        self._copy_base = 0
        self._copy_end = -1
        self.native = HIREDIS is not None if native is None else bool(native) and HIREDIS is not None
        self._reader = None      # hiredis.Reader with nothing left in it, kept for the next step
        self._clean = 0          # buf[:_clean] holds no large aggregate header (_native_frames)

    def feed(self, data):
        self.buf += data

    def lone(self, data):
        """The request in ``data`` as ``[argv]``, without buffering it, when
        nothing is buffered and ``data`` is exactly one whole request in
        the form clients write (``*N``, then ``$len`` and the argument for
        each, no CRLF inside an argument): the usual read of a client
        that waits for each reply.  None otherwise (then ``feed`` and
        ``commands``: a pipeline is read faster by hiredis).

        One split on CRLF, no further than one request's tokens, and the
        headers checked all at once against those the arguments' lengths
        make: ``data`` is then exactly these arguments' encoding, so the
        general loop would read the same (hiredis plus the guards that
        keep it exact cost two to three times as much for one request)."""
        if self.buf or self._argv is not None or self.unauthed or self.broken or type(data) is not bytes \
                or len(data) > LONE_MAX or len(data) > self.max_bulk:
            return None
        argc = _ARGC.get(data[:data.find(b"\r\n")])
        if argc is None:
            return None
        toks = data.split(b"\r\n", 2 * argc + 1)
        if len(toks) != 2 * argc + 2 or toks[-1]:
            return None                      # cut short, or more after it (a pipeline)
        argv = toks[2::2]
        return [argv] if toks[1:-1:2] == _headers(argv) else None

    def pending(self):
        """Bytes buffered and not yet parsed."""
        return len(self.buf) - self.pos

    def commands(self, limit=None):
        """The complete commands read so far, at most ``limit`` of them
        (the rest stay buffered for the next call: a long pipeline is
        served in bounded steps, other clients in between)."""
        out = []
        if self.broken:
            return out
        buf = self.buf
        if len(buf) - self.pos < self.need:
            return out
        self.need = 0
        if limit is None:
            limit = 1 << 62
        if self.native and not self.pos and 0 < len(buf) <= FAST_WINDOW and self._argv is None and buf[0] == 42 \
                and not self.unauthed:
            got = self._native_whole(limit)
            if got is not None:
                return got
        fast = self._native_frames if self.native else self._python_frames
        end = len(buf)
        retry = True             # try the fast path (again)
        try:
            while self.pos < end and len(out) < limit:
                if retry and self._argv is None and not self.unauthed and buf[self.pos] == 42:
                    # the fast path looks at a bounded window: a step's work
                    # does not grow with what is buffered behind it
                    used = fast(out, limit)
                    if self.pos >= end or len(out) >= limit:
                        break
                    retry = used > 0     # it stopped at a request it does not take
                going_on = self._argv is not None
                if not self._one(out):
                    break                # incomplete: wait for more bytes
                if going_on:
                    retry = True         # a request cut by a read is done: back to the fast path
        except ProtocolError as e:
            self.broken = True
            out.append(e)
        pos = self.pos
        if pos == len(buf):
            buf.clear()
            self.pos = 0
            self._copy = None
            self._clean = 0
        elif pos > 65536 and pos > len(buf) // 2:
            del buf[:pos]
            self.pos = 0
            self._copy_base -= pos
            self._copy_end -= pos
            self._clean = max(0, self._clean - pos)
        return out

    def _data(self):
        """(bytes from ``base`` on, base): a copy of the buffer for the
        Python paths, kept while no bytes come (a long pipeline's steps
        share it)."""
        buf = self.buf
        if self._copy is not None and self._copy_end == len(buf):
            return self._copy, self._copy_base
        pos = self.pos
        data = bytes(buf) if pos == 0 else bytes(memoryview(buf)[pos:])
        self._copy, self._copy_base, self._copy_end = data, pos, len(buf)
        return data, pos

    def _python_frames(self, out, limit):
        """The fast path without hiredis: ``_whole_frames`` on windows of
        the buffer.  Returns the bytes it took."""
        data, base = self._data()
        pos = start = self.pos - base
        max_bulk = self.max_bulk
        while len(out) < limit and data[pos:pos + 1] == b"*":
            window = data if pos == 0 and len(data) <= FAST_WINDOW else data[pos:pos + FAST_WINDOW]
            used = _whole_frames(window, out, max_bulk, limit)
            if not used:
                break
            pos += used
        self.pos = base + pos
        return pos - start

    def _native_whole(self, limit):
        return native_whole(self, limit)

    def _native_frames(self, out, limit):
        return native_frames(self, out, limit)

    def _one(self, out):
        """The general loop: one request (or the rest of one cut by a
        read) from the buffer: False if it is incomplete.  As Redis
        reads (networking.c): a line's end is found with strchr (a NUL
        before it hides it: the request waits, up to the 64 KB limit); a
        multibulk header ends at its first CR, the byte after it skipped
        whatever it is, and nothing of it is checked before then."""
        data, base = self._data()
        pos = self.pos - base
        end = len(data)
        unauthed = self.unauthed
        argv = self._argv
        if argv is None:
            if data[pos] != 42:                # not '*': an inline command
                nl = _strchr(data, 10, pos)
                if nl < 0:
                    if end - pos > MAX_INLINE:
                        raise ProtocolError("Protocol error: too big inline request")
                    return False
                line = data[pos:nl]
                self.pos = base + nl + 1
                if line.endswith(b"\r"):
                    line = line[:-1]
                try:
                    words = split_line(line)
                except SplitError:
                    raise ProtocolError("Protocol error: unbalanced quotes in request")
                if words:
                    out.append(words)
                return True
            nl = _strchr(data, 13, pos)
            if nl < 0:
                if end - pos > MAX_INLINE:
                    raise ProtocolError("Protocol error: too big mbulk count string")
                return False
            if nl + 2 > end:                   # the byte after the CR is not here yet
                return False
            n = string2ll(data[pos + 1:nl])      # strict, as Redis: no "+1", " 1", "1_0", "01"
            if n is None or n > INT_MAX:
                raise ProtocolError("Protocol error: invalid multibulk length")
            if unauthed and n > UNAUTHED_MULTIBULK:
                raise ProtocolError("Protocol error: unauthenticated multibulk length")
            if n > MAX_MULTIBULK:                # xs's own limit (docs/serve.md): Redis waits for them
                raise ProtocolError("Protocol error: invalid multibulk length")
            pos = nl + 2
            if n <= 0:
                self.pos = base + pos
                return True
            argv = self._argv = []
            self._left = n
        left = self._left
        app = argv.append
        max_bulk = self.max_bulk
        while left:
            if pos >= end:
                break
            nl = _strchr(data, 13, pos)
            if nl < 0:
                if end - pos > MAX_INLINE:
                    raise ProtocolError("Protocol error: too big bulk count string")
                break
            if nl + 2 > end:
                break
            if data[pos] != 36:                # '$'; the byte as it came (surrogateescape: over 127 too)
                raise ProtocolError("Protocol error: expected '$', got '%s'"
                                    % data[pos:pos + 1].decode("utf-8", "surrogateescape"))
            ln = string2ll(data[pos + 1:nl])
            if ln is None or ln < 0 or ln > max_bulk:
                raise ProtocolError("Protocol error: invalid bulk length")
            if unauthed and ln > UNAUTHED_BULK:
                raise ProtocolError("Protocol error: unauthenticated bulk length")
            stop = nl + 2 + ln
            if end < stop + 2:
                self.need = stop + 2 - pos
                break
            app(data[nl + 2:stop])
            pos = stop + 2
            left -= 1
        self._left = left
        self.pos = base + pos
        if left:
            return False
        out.append(argv)
        self._argv = None
        return True


def _strchr(data, byte, pos):
    """Where C's ``strchr(data + pos, byte)`` finds ``byte`` (an int):
    -1 when a NUL comes first, as when it is not there."""
    at = data.find(byte, pos)
    if at >= 0 and data.find(0, pos, at) >= 0:
        return -1
    return at


_ARGC = {b"*%d" % k: k for k in range(1, 1025)}     # "*N" -> N, the counts the fast path takes
_HEADER = [b"$%d" % k for k in range(4096)]          # length -> "$length" (arguments under 4 KB)
_BULK_HEAD = [b"$%d\r\n" % k for k in range(4096)]   # length -> a bulk string's header (replies)
_BYTES_ONLY = {bytes}


def _headers(args):
    """The ``$length`` tokens of ``args``' bulk headers: looked up by
    length (C-level passes) when all are under 4 KB."""
    try:
        return list(map(_HEADER.__getitem__, map(len, args)))
    except IndexError:                   # an argument of 4 KB or more
        return [b"$%d" % len(v) for v in args]


def _whole_frames(data, out, max_bulk, limit=1 << 62):
    """The fast path of the request reader: the complete, well-formed
    multibulk requests at the start of ``data``, found with one split on
    CRLF (an argument holding a CRLF, a malformed or an incomplete request
    ends it, and the general loop goes on from there).  Appends them to
    ``out``; returns how many bytes they took.

    Per request it does a constant number of Python steps: the arguments
    are every other token, and their ``$len`` headers are checked all at
    once against the headers their lengths make (table lookups in C)."""
    toks = data.split(b"\r\n")
    n = len(toks) - 1                    # the last token is not followed by CRLF
    argc_of = _ARGC.get
    check_big = max_bulk < len(_HEADER) - 1 or len(data) > max_bulk
    i = 0
    while i < n and len(out) < limit:
        argc = argc_of(toks[i])
        if argc is None:
            break
        j = i + 1 + 2 * argc
        if j > n:
            break
        argv = toks[i + 2:j:2]
        if toks[i + 1:j:2] != _headers(argv):
            break
        if check_big and max(map(len, argv)) > max_bulk:
            break
        out.append(argv)
        i = j
    return sum(map(len, toks[:i])) + 2 * i if i else 0


# ------------------------------------------------------------------- replies

def _text(s):
    return s.encode("utf-8", "surrogateescape") if type(s) is not bytes else s


def _line(b):
    """A simple string or error text on one line."""
    return b.replace(b"\r", b" ").replace(b"\n", b" ")


class Raw:
    """A reply already encoded (EXEC's array of differently shaped replies,
    HELLO's reply in the protocol it sets)."""
    __slots__ = ("data",)

    def __init__(self, data):
        self.data = data


def encode(reply, proto=2, array_null=False):
    """The wire bytes of one reply value."""
    t = type(reply)
    if t is bytes:
        return b"$%d\r\n%s\r\n" % (len(reply), reply)
    if t is Raw:
        return reply.data
    out = []
    _enc(reply, proto == 3, array_null, out)
    return b"".join(out)


def encode_replies(items, replies, proto=2):
    """The wire bytes of a job's replies in one piece (``items``: the
    engine Items they answer, for their ``array_null``)."""
    if len(replies) == 1:
        return encode(replies[0], proto, items[0].array_null)
    if set(map(type, replies)) == _BYTES_ONLY:          # a pipeline of XADDs: their IDs
        return b"".join([b"$%d\r\n%s\r\n" % (len(r), r) for r in replies])
    out = []
    app = out.append
    resp3 = proto == 3
    for it, r in zip(items, replies):
        t = type(r)
        if t is bytes:
            app(b"$%d\r\n%s\r\n" % (len(r), r))
        elif t is int:
            app(b":%d\r\n" % r)
        else:
            _enc(r, resp3, it.array_null, out)
    return b"".join(out)


def _bulks(xs):
    """An array of bulk strings, or None if some element is not bytes."""
    try:
        return b"*%d\r\n" % len(xs) + b"".join([b"$%d\r\n%s\r\n" % (len(x), x) for x in xs])
    except TypeError:
        return None


def _entries(r, resp3, array_null, out):
    """A range of entries as stored (XRANGE pages: where a reader over the
    network spends the server's time): a run of one shape is formatted
    in one ``%`` over a format made for the shape, its arguments laid out
    by slices (Entries.columns)."""
    out.append(b"*%d\r\n" % len(r))
    _entries_body(r, resp3, array_null, out)


def entries_body(r):
    """The entries of a range page without their array's header (a page
    of a longer reply: xstream_cli.server.paged)."""
    out = []
    if type(r) is Entries:
        _entries_body(r, False, False, out)
    else:                                # entries decoded: [id, [field, value, ...]]
        for e in r:
            _enc(e, False, False, out)
    return b"".join(out)


def _entries_body(r, resp3, array_null, out):
    """The entries of ``r`` (Entries), each ``*2 $id *2n $name $value
    ...``, into ``out``: a run of one shape as one join of its parts
    laid out by slices -- the bulk headers of the IDs and values looked
    up by length (``_bulk_heads``), the names' parts made once a run."""
    app = out.append
    for names, ids, flat in r.columns():
        if names is None:
            for e in ids:
                _enc(e, resp3, array_null, out)
            continue
        n = len(names)
        count = len(ids)
        stride = 3 + 3 * n
        parts = [None] * (count * stride)
        parts[0::stride] = [b"\r\n*2\r\n"] * count         # the CRLF ending the entry before
        parts[1::stride] = _bulk_heads(ids)
        parts[2::stride] = ids
        for j, name in enumerate(names):
            vals = flat[j::n]
            head = (b"\r\n*%d\r\n" % (2 * n) if j == 0 else b"\r\n") + b"$%d\r\n%b\r\n" % (len(name), name)
            parts[3 + 3 * j::stride] = [head] * count
            parts[4 + 3 * j::stride] = _bulk_heads(vals)
            parts[5 + 3 * j::stride] = vals
        parts[0] = b"*2\r\n"
        parts.append(b"\r\n")
        app(b"".join(parts))


def bulk_run(values):
    """``values`` (bytes) as consecutive bulk strings, no array header: a
    few C-level passes (XS.PAGE's keys and stored values)."""
    n = len(values)
    parts: list = [b"\r\n"] * (3 * n)
    parts[0::3] = _bulk_heads(values)
    parts[1::3] = values
    return b"".join(parts)


def _bulk_heads(values):
    """``$length\r\n`` of each of ``values``: looked up by length (C-level
    passes) when all are under 4 KB."""
    try:
        return list(map(_BULK_HEAD.__getitem__, map(len, values)))
    except IndexError:                   # a value of 4 KB or more
        return [b"$%d\r\n" % len(v) for v in values]


def _enc(r, resp3, array_null, out):
    t = type(r)
    app = out.append
    if t is bytes:
        app(b"$%d\r\n%s\r\n" % (len(r), r))
    elif t is Entries:
        _entries(r, resp3, array_null, out)
    elif t is list or t is tuple:
        app(b"*%d\r\n" % len(r))
        for x in r:
            tx = type(x)
            if tx is bytes:
                app(b"$%d\r\n%s\r\n" % (len(x), x))
            elif (tx is list or tx is tuple) and len(x) == 2 and type(x[0]) is bytes and type(x[1]) is list:
                # an entry: [id, [field, value, ...]]
                fields = _bulks(x[1])
                if fields is None:
                    _enc(x, resp3, array_null, out)
                else:
                    i = x[0]
                    app(b"*2\r\n$%d\r\n%s\r\n" % (len(i), i))
                    app(fields)
            else:
                _enc(x, resp3, array_null, out)
    elif t is int:
        app(b":%d\r\n" % r)
    elif t is Map:
        pairs = r.pairs
        if resp3:
            app(b"%%%d\r\n" % len(pairs))
            for k, v in pairs:
                _enc(k, resp3, array_null, out)
                _enc(v, resp3, array_null, out)
        elif r.flat:
            app(b"*%d\r\n" % (2 * len(pairs)))
            for k, v in pairs:
                _enc(k, resp3, array_null, out)
                _enc(v, resp3, array_null, out)
        else:
            app(b"*%d\r\n" % len(pairs))
            for k, v in pairs:
                app(b"*2\r\n")
                _enc(k, resp3, array_null, out)
                _enc(v, resp3, array_null, out)
    elif t is bool:
        app((b"#t\r\n" if r else b"#f\r\n") if resp3 else (b":1\r\n" if r else b":0\r\n"))
    elif r is None:
        app(b"_\r\n" if resp3 else (b"*-1\r\n" if array_null else b"$-1\r\n"))
    elif t is Status:
        app(b"+%s\r\n" % _line(_text(r)))
    elif t is str:
        b = _text(r)
        app(b"$%d\r\n%s\r\n" % (len(b), b))
    elif t is Raw:
        app(r.data)
    elif t is Verbatim:
        if resp3:
            app(b"=%d\r\ntxt:%s\r\n" % (len(r) + 4, bytes(r)))
        else:
            app(b"$%d\r\n%s\r\n" % (len(r), bytes(r)))
    elif t is Push:
        app((b">%d\r\n" if resp3 else b"*%d\r\n") % len(r))
        for x in r:
            _enc(x, resp3, array_null, out)
    elif t is NullArray:
        app(b"_\r\n" if resp3 else b"*-1\r\n")
    elif t is float:
        if resp3:
            app(b",%s\r\n" % repr(r).encode())
        else:
            b = repr(r).encode()
            app(b"$%d\r\n%s\r\n" % (len(b), b))
    elif isinstance(r, RedisError):
        app(b"-%s\r\n" % _line(_text(r.text)))
    else:
        raise TypeError("cannot encode %r" % (r,))


_AGGREGATES = {ord("*"): 1, ord("~"): 1, ord(">"): 1, ord("%"): 2, ord("|"): 2}
_BULKS = {ord("$"), ord("="), ord("!")}


def reply_end(buf, pos=0):
    """Where the reply that starts at ``pos`` of ``buf`` ends (the index
    after it), or -1 if ``buf`` does not hold all of it yet.  Any RESP2 or
    RESP3 reply (an attribute ``|`` counts with the reply it annotates).
    For the in-process client (xstream_cli.client), which reads a
    forwarded command's reply from the server."""
    todo = 1                       # replies still to skip
    n = len(buf)
    while todo:
        if pos >= n:
            return -1
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return -1
        kind = buf[pos]
        todo -= 1
        if kind in _BULKS:
            size = int(buf[pos + 1:eol])
            pos = eol + 2 + (size + 2 if size >= 0 else 0)
            if pos > n:
                return -1
            continue
        per = _AGGREGATES.get(kind)
        if per is not None:
            count = int(buf[pos + 1:eol])
            if count > 0:
                todo += per * count
            if kind == ord("|"):
                todo += 1              # the reply the attribute annotates
        pos = eol + 2
    return pos
