"""The Redis wire protocol (RESP2 and RESP3) for ``xs serve``.

Requests: ``RequestParser`` takes the bytes a client sends, as they
arrive, and gives back the commands in them (multibulk ``*N $len ...``
or inline lines, as redis-server accepts both), with Redis's limits:
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
from xstream_cli.output.reply import Map, Status
from xstream_cli.splitargs import SplitError, split_line

MAX_BULK = 512 << 20            # proto-max-bulk-len
MAX_MULTIBULK = 1024 * 1024     # Redis refuses a multibulk longer than this
MAX_INLINE = 64 << 10           # PROTO_INLINE_MAX_SIZE
UNAUTHED_MULTIBULK = 10         # before AUTH, as redis-server: at most 10 arguments ...
UNAUTHED_BULK = 16384           # ... of 16 KB each
FAST_WINDOW = 64 << 10          # bytes the fast path of one step looks at


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


class NullArray:
    """An explicit null array (``*-1`` in RESP2, ``_`` in RESP3), e.g. an
    EXEC whose WATCHed keys changed."""
    __slots__ = ()


NULL_ARRAY = NullArray()


# ------------------------------------------------------------------ requests

class RequestParser:
    """Incremental request reader: ``feed(data)``, then ``commands()``
    returns the complete commands (lists of bytes) read so far, in order.
    A ProtocolError is returned in the list (after the commands before
    it); nothing more is read after one."""

    def __init__(self, max_bulk=MAX_BULK):
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

    def feed(self, data):
        self.buf += data

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
        n = len(buf)
        if self._copy is not None and self._copy_end == n:
            data = self._copy            # nothing came since the last step: go on in the same copy
            pos = self.pos - self._copy_base
        else:
            data = bytes(buf) if self.pos == 0 else bytes(memoryview(buf)[self.pos:])
            self._copy, self._copy_base, self._copy_end = data, self.pos, n
            pos = 0
        unauthed = self.unauthed
        if limit is None:
            limit = 1 << 62
        if self._argv is None and not unauthed:
            # the fast path looks at bounded windows: a step's work does
            # not grow with what is buffered behind it
            while len(out) < limit and data[pos:pos + 1] == b"*":
                window = data if pos == 0 and len(data) <= FAST_WINDOW else data[pos:pos + FAST_WINDOW]
                used = _whole_frames(window, out, self.max_bulk, limit)
                if not used:
                    break
                pos += used
        end = len(data)
        find = data.find
        try:
            while pos < end and len(out) < limit:
                argv = self._argv
                if argv is None:
                    if data[pos] != 42:                # not '*': an inline command
                        nl = find(b"\n", pos)
                        if nl < 0:
                            if end - pos > MAX_INLINE:
                                raise ProtocolError("Protocol error: too big inline request")
                            break
                        line = data[pos:nl]
                        pos = nl + 1
                        if line.endswith(b"\r"):
                            line = line[:-1]
                        try:
                            words = split_line(line)
                        except SplitError:
                            raise ProtocolError("Protocol error: unbalanced quotes in request")
                        if words:
                            out.append(words)
                        continue
                    nl = find(b"\r\n", pos)
                    if nl < 0:
                        if end - pos > MAX_INLINE:
                            raise ProtocolError("Protocol error: too big mbulk count string")
                        break
                    n = string2ll(data[pos + 1:nl])      # strict, as Redis: no "+1", " 1", "1_0", "01"
                    if n is None or n > MAX_MULTIBULK:
                        raise ProtocolError("Protocol error: invalid multibulk length")
                    if unauthed and n > UNAUTHED_MULTIBULK:
                        raise ProtocolError("Protocol error: unauthenticated multibulk length")
                    pos = nl + 2
                    if n <= 0:
                        continue
                    argv = self._argv = []
                    self._left = n
                left = self._left
                app = argv.append
                max_bulk = UNAUTHED_BULK if unauthed else self.max_bulk
                while left:
                    if pos >= end:
                        break
                    if data[pos] != 36:                # '$'
                        raise ProtocolError("Protocol error: expected '$', got '%s'" % chr(data[pos]))
                    nl = find(b"\r\n", pos)
                    if nl < 0:
                        if end - pos > MAX_INLINE:
                            raise ProtocolError("Protocol error: too big bulk count string")
                        break
                    ln = string2ll(data[pos + 1:nl])
                    if ln is not None and unauthed and ln > max_bulk:
                        raise ProtocolError("Protocol error: unauthenticated bulk length")
                    if ln is None or ln < 0 or ln > max_bulk:
                        raise ProtocolError("Protocol error: invalid bulk length")
                    stop = nl + 2 + ln
                    if end < stop + 2:
                        self.need = stop + 2 - pos
                        break
                    app(data[nl + 2:stop])
                    pos = stop + 2
                    left -= 1
                self._left = left
                if left:
                    break
                out.append(argv)
                self._argv = None
        except ProtocolError as e:
            self.broken = True
            out.append(e)
        self.pos = self._copy_base + pos
        if self.pos == len(buf):
            buf.clear()
            self.pos = 0
            self._copy = None
        elif self.pos > 65536 and self.pos > len(buf) // 2:
            removed = self.pos
            del buf[:removed]
            self.pos = 0
            self._copy_base -= removed
            self._copy_end -= removed
        return out


_ARGC = {b"*%d" % k: k for k in range(1, 1025)}     # "*N" -> N, the counts the fast path takes
_HEADER = [b"$%d" % k for k in range(4096)]          # length -> "$length" (arguments under 4 KB)


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
    header = _HEADER.__getitem__
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
        try:
            if toks[i + 1:j:2] != list(map(header, map(len, argv))):
                break
        except IndexError:               # an argument of 4 KB or more
            if toks[i + 1:j:2] != [b"$%d" % len(v) for v in argv]:
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


def encode(reply, proto=2, array_null=False):
    """The wire bytes of one reply value."""
    out = []
    _enc(reply, proto == 3, array_null, out)
    return b"".join(out)


def _enc(r, resp3, array_null, out):
    t = type(r)
    app = out.append
    if t is bytes:
        app(b"$%d\r\n%s\r\n" % (len(r), r))
    elif t is list or t is tuple or t is Entries:
        if t is Entries:
            r = r.decoded()
        app(b"*%d\r\n" % len(r))
        for x in r:
            tx = type(x)
            if tx is bytes:
                app(b"$%d\r\n%s\r\n" % (len(x), x))
            else:
                _enc(x, resp3, array_null, out)
    elif t is int:
        app(b":%d\r\n" % r)
    elif t is bool:
        app((b"#t\r\n" if r else b"#f\r\n") if resp3 else (b":1\r\n" if r else b":0\r\n"))
    elif r is None:
        app(b"_\r\n" if resp3 else (b"*-1\r\n" if array_null else b"$-1\r\n"))
    elif t is Status:
        app(b"+%s\r\n" % _line(_text(r)))
    elif t is str:
        b = _text(r)
        app(b"$%d\r\n%s\r\n" % (len(b), b))
    elif t is Map:
        if resp3:
            app(b"%%%d\r\n" % len(r.pairs))
            for k, v in r.pairs:
                _enc(k, resp3, array_null, out)
                _enc(v, resp3, array_null, out)
        else:
            _enc(r.resp2(), resp3, array_null, out)
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
