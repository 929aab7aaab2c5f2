"""Pretty output for people at a terminal.  Imported only in pretty mode.

Entries (XRANGE, XREVRANGE, XREAD, XREADGROUP, XCLAIM, XAUTOCLAIM, XINFO
STREAM FULL) are written one line per entry as they are formatted and
flushed in chunks: the first line shows at once and memory stays flat
however many entries a reply holds.  An entry line is

    ID  TIME  field=value  field=value ...

TIME is the ID's millisecond timestamp in UTC (ISO 8601, ``Z``), shown
when the ID looks like one (at least 1973); the widths of the ID and time
columns come from the first entries.  Long lines are wrapped at the
terminal's width, continuation lines indented under the fields; nothing
is cut.  A name or value is bare when it is printable text without
spaces, quotes or backslashes (or '=' in a name); otherwise it is
double-quoted, so empty values and values with spaces stay visible.

Every byte that is not printable -- control characters, ESC, DEL, C1
controls, bytes that are not UTF-8 -- is shown as an escape
(render.escape_text, shared with ``xs tail``), never written to the
terminal raw.  Colours (ANSI) only on a terminal, and not with NO_COLOR
or TERM=dumb.  Idle times read as ``3m12s``; unix-millisecond times
(XINFO's seen-time, delivery times) as UTC times.

Here: the Writer (a reply's shape to lines: maps, tables, lists, the
entries of a reply streamed in chunks), EntryLines (xs tail's line) and
the entry points.  How one value reads (quoting, cells, times,
colours) is pretty_text; how one entry is laid out and wrapped,
pretty_entries.
"""
import io
import re
import sys

from storage.errors import RedisError
from xstream_cli.output.pretty_entries import _EntryFormat
from xstream_cli.output.pretty_text import _Style, _use_colour, _width, cells, duration, id_time, plain, token, utc_ms
from xstream_cli.output.reply import Map, NullArray, Status, entry_reply

FIRST_CHUNK = 32          # entries formatted before the first flush (and column widths measured)
CHUNK_BYTES = 1 << 16     # flush at least this often
_IDLE_KEYS = frozenset((b"idle", b"inactive", "idle", "inactive"))
_TIME_KEYS = frozenset((b"seen-time", b"active-time", "seen-time", "active-time"))


# ------------------------------------------------------------------ writer

class Writer:
    """Lines to a binary stream, flushed in chunks."""

    def __init__(self, out, width=None, colour=None):
        self.out = out
        self.width = width or _width()
        self.colour = _use_colour(out) if colour is None else colour
        self.st = _Style(self.colour)
        self.buf = []
        self.size = 0

    def line(self, s=""):
        b = s.encode("utf-8", "surrogateescape")
        self.buf.append(b)
        self.size += len(b) + 1
        if self.size >= CHUNK_BYTES:
            self.flush()

    def line_bytes(self, b):
        self.buf.append(b)
        self.size += len(b) + 1
        if self.size >= CHUNK_BYTES:
            self.flush()

    def flush(self):
        if self.buf:
            self.buf.append(b"")
            data = b"\n".join(self.buf)
            self.buf = []
            self.size = 0
            self.out.write(data)
        try:
            self.out.flush()
        except AttributeError:
            pass

    # -------------------------------------------------------------- entries

    def entries(self, entries, indent=0):
        """Entries ([id, fields] or [id, fields, idle, deliveries], fields
        None for a deleted one; or the engine's, storage.codec.Entries),
        streamed: formatted and flushed in chunks."""
        seq = map(entry_reply, entries)
        first = []
        for e in seq:
            first.append(e)
            if len(first) >= FIRST_CHUNK:
                break
        if not first:
            self.line(" " * indent + self.st.dim + "(empty)" + self.st.off)
            return
        id_w = max(len(e[0]) for e in first)
        time_w = 24 if any(id_time(e[0]) for e in first) else 0
        fmt = _EntryFormat(self, indent, id_w, time_w)
        for e in first:
            fmt(e)
        del first
        self.flush()
        for e in seq:
            fmt(e)
        self.flush()

    # -------------------------------------------------------------- generic

    def value(self, v, indent=0, key=None):
        """Any reply value, readable; nested values indented."""
        pad = " " * indent
        st = self.st
        t = type(v)
        if isinstance(v, RedisError):
            self.line(pad + st.err + "(error)" + st.off + " " + plain(v.text))
        elif v is None:
            self.line(pad + st.dim + "(nil)" + st.off)
        elif t is int or t is bool:
            self.line(pad + self._int(v, key))
        elif t is Status:
            self.line(pad + plain(v))
        elif t is bytes or t is str:
            self.line(pad + self._text(v))
        elif _is_entry_list(v):
            self.entries(v, indent)
        elif t is Map:
            if not v.flat:
                self._streams(v, indent)
            else:
                self._map(v, indent)
        elif t in (list, tuple):
            self._list(v, indent)
        else:
            self.line(pad + plain(repr(v)))

    def _text(self, b):
        t = token(b)
        if type(b) is bytes and len(b) < 48 and _ID.match(b):
            ts = id_time(b)
            if ts:
                return self.st.id + t + self.st.off + "  " + self.st.time + ts + self.st.off
            return self.st.id + t + self.st.off
        return t

    def _int(self, v, key):
        if key in _IDLE_KEYS:
            return duration(v)
        if key in _TIME_KEYS:
            return utc_ms(v) if v > 0 else "-"
        return str(int(v))

    def _streams(self, m, indent):
        """XREAD / XREADGROUP: a header per stream, its entries below."""
        for k, ents in m.pairs:
            self.line(" " * indent + self.st.head + plain(k) + self.st.off)
            self.value(ents, indent + 2)

    def _map(self, m, indent):
        pad = " " * indent
        st = self.st
        kw = max((cells(plain(k)) for k, _ in m.pairs), default=0)
        for k, v in m.pairs:
            name = plain(k)
            head = pad + st.key + name + st.off + " " * (kw - cells(name) + 2)
            if _scalar(v):
                self.line(head + self._scalar(v, k))
            elif type(v) in (list, tuple) and len(v) in (2, 4) and type(v[0]) is bytes \
                    and (v[1] is None or type(v[1]) is list):   # first-entry / last-entry
                self.line(pad + st.key + name + st.off)
                self.entries([v], indent + 2)
            elif k in (b"pending", "pending") and type(v) is list:
                self.line(head + "%d" % len(v))
                if v:
                    self._pel(v, indent + 2)
            elif type(v) is list and v and all(type(x) is Map for x in v):
                self.line(pad + st.key + name + st.off)
                for x in v:
                    self._block(x, indent + 2)
            else:
                self.line(pad + st.key + name + st.off)
                self.value(v, indent + 2, k)

    def _block(self, m, indent):
        """A map in a list (a group or consumer of XINFO STREAM FULL): its
        name as a heading, the rest indented."""
        pairs = list(m.pairs)
        name = [v for k, v in pairs if k in (b"name", "name")]
        if name:
            self.line(" " * indent + self.st.head + token(name[0]) + self.st.off)
            self._map(Map([(k, v) for k, v in pairs if k not in (b"name", "name")]), indent + 2)
        else:
            self._map(m, indent)

    def _scalar(self, v, key=None):
        if v is None:
            return self.st.dim + "(nil)" + self.st.off
        if type(v) in (int, bool):
            return self._int(v, key)
        if type(v) is Status:
            return plain(v)
        return self._text(v)

    def _pel(self, rows, indent):
        """Pending rows: XINFO STREAM FULL's [id, consumer, delivery ms,
        count] or a consumer's [id, delivery ms, count]."""
        table = []
        for r in rows:
            if len(r) == 4:
                i, c, t, n = r
                table.append([token(i), token(c) if c else "(nacked)", "delivered " + (utc_ms(t) if t > 0 else "-"),
                              "%d×" % n])
            elif len(r) == 3:
                i, t, n = r
                table.append([token(i), "delivered " + (utc_ms(t) if t > 0 else "-"), "%d×" % n])
            else:
                table.append([plain(repr(r))])
        self._table(None, table, indent)

    def _list(self, v, indent):
        pad = " " * indent
        st = self.st
        if not v:
            self.line(pad + st.dim + "(empty)" + st.off)
            return
        if all(type(x) is Map for x in v):
            self._maps(v, indent)
            return
        if all(type(x) is Status for x in v):        # HELP lines
            for x in v:
                self.line(pad + plain(x))
            return
        if _is_pending_summary(v):
            self._pending_summary(v, indent)
            return
        if _is_autoclaim(v):
            self._autoclaim(v, indent)
            return
        if len(v) == 2 and type(v[0]) is bytes and v[0].isdigit() and type(v[1]) is list:   # SCAN
            self.line(pad + st.key + "cursor" + st.off + "  " + plain(v[0]))
            self.value(v[1], indent)
            return
        if all(_is_pending_row(x) for x in v):       # XPENDING key group start end count
            self._table(["id", "time", "consumer", "idle", "deliveries"],
                        [[token(i), id_time(i), token(c) if c else "(nacked)", duration(idle), str(n)]
                         for i, c, idle, n in v], indent)
            return
        w = len(str(len(v)))
        for n, x in enumerate(v, 1):
            num = pad + st.dim + str(n).rjust(w) + ")" + st.off + " "
            if _scalar(x):
                self.line(num + self._scalar(x))
            else:
                self.line(num.rstrip())
                self.value(x, indent + w + 2)

    def _pending_summary(self, v, indent):
        """XPENDING key group: count, first and last ID, per consumer."""
        n, lo, hi, per = v
        pad = " " * indent
        st = self.st
        self.line(pad + st.key + "pending" + st.off + "    %d" % n)
        if lo is not None:
            self.line(pad + st.key + "first" + st.off + "      " + self._text(lo))
            self.line(pad + st.key + "last" + st.off + "       " + self._text(hi))
        if per:
            self.line(pad + st.key + "consumers" + st.off)
            self._table(None, [[token(c), plain(k)] for c, k in per], indent + 2)

    def _autoclaim(self, v, indent):
        """XAUTOCLAIM: the next start ID, what was claimed, deleted IDs."""
        nxt, claimed, deleted = v
        pad = " " * indent
        st = self.st
        self.line(pad + st.key + "next start" + st.off + "  " + plain(nxt)
                  + ("  (scan complete)" if nxt == b"0-0" else ""))
        self.line(pad + st.key + "claimed" + st.off + "     %d" % len(claimed))
        if claimed:
            self.value(claimed, indent + 2)
        self.line(pad + st.key + "deleted" + st.off + "     %d" % len(deleted)
                  + ("  " + " ".join(plain(i) for i in deleted) if deleted else ""))

    def _maps(self, rows, indent):
        """XINFO GROUPS / CONSUMERS: a table, one row per map; as blocks
        when the table is wider than the terminal."""
        cols = []
        for r in rows:
            for k, _ in r.pairs:
                if k not in cols:
                    cols.append(k)
        table = []
        for r in rows:
            d = dict(r.pairs)
            table.append([self._cell(d.get(c), c) for c in cols])
        if not self._table([plain(c) for c in cols], table, indent, fit=True):
            for r in rows:
                self._block(r, indent)

    def _cell(self, v, key):
        if v is None:
            return "-"
        if type(v) in (int, bool):
            return self._int(v, key)
        if type(v) in (bytes, str, Status):
            return token(v)
        return plain(repr(v))

    def _table(self, header, rows, indent, fit=False):
        """Columns padded to their widest cell (plain text cells).  With
        ``fit``, False (nothing written) when wider than the terminal."""
        n = max(len(r) for r in rows + ([header] if header else []))
        ws = [0] * n
        for r in rows + ([header] if header else []):
            for j, c in enumerate(r):
                ws[j] = max(ws[j], cells(c))
        if fit and indent + sum(ws) + 2 * (n - 1) > self.width:
            return False
        pad = " " * indent
        st = self.st
        if header:
            self.line(pad + st.key + "  ".join(c + " " * (ws[j] - cells(c)) for j, c in enumerate(header)).rstrip()
                      + st.off)
        for r in rows:
            self.line(pad + "  ".join(c + " " * (ws[j] - cells(c)) for j, c in enumerate(r)).rstrip())
        return True


_ID = re.compile(rb"\A\d+-\d+\Z")


def _scalar(v):
    return v is None or type(v) in (int, bool, bytes, str, Status)


def _is_entry(x):
    return type(x) in (list, tuple) and len(x) in (2, 4) and type(x[0]) is bytes \
        and (x[1] is None or type(x[1]) is list) and _ID.match(x[0]) is not None


def _is_entry_list(v):
    from storage.codec import Entries
    if type(v) is Entries:
        return True
    return type(v) is list and bool(v) and _is_entry(v[0]) and _is_entry(v[-1])


def _is_pending_summary(v):
    return len(v) == 4 and type(v[0]) is int and type(v[1]) in (bytes, type(None)) \
        and type(v[2]) in (bytes, type(None)) and type(v[3]) in (list, NullArray)


def _is_autoclaim(v):
    return len(v) == 3 and type(v[0]) is bytes and _ID.match(v[0]) is not None and type(v[1]) is list \
        and type(v[2]) is list and all(type(x) is bytes for x in v[2])


def _is_pending_row(x):
    return type(x) is list and len(x) == 4 and type(x[0]) is bytes and type(x[1]) is bytes \
        and type(x[2]) is int and type(x[3]) is int


# ------------------------------------------------------------------ one entry at a time

_LABEL_COLOURS = ("\x1b[1;36m", "\x1b[1;35m", "\x1b[1;32m", "\x1b[1;33m", "\x1b[1;34m", "\x1b[1;31m")


class EntryLines:
    """Entries one at a time, each as XRANGE shows it (ID, its time in
    UTC, fields quoted and wrapped the same way, widths by display
    cells), after a label naming its stream, padded to the widest of
    ``streams`` and coloured per stream: xs tail's pretty output, which
    is therefore the same look as every other command's."""

    def __init__(self, streams, out=None, width=None, colour=None):
        out = out if out is not None else sys.stdout
        self.buf = io.BytesIO()
        self.w = Writer(self.buf, width, _use_colour(out) if colour is None else colour)
        names = list(dict.fromkeys(streams))
        self.labels = {s: token(s, True) for s in names}
        self.label_w = max([cells(t) for t in self.labels.values()] or [0])
        self.colours = {s: _LABEL_COLOURS[n % len(_LABEL_COLOURS)] for n, s in enumerate(names)}
        self.id_w = 0
        self.fmt = {}

    def __call__(self, stream, entry):
        i = entry[0]
        if len(i) > self.id_w:
            self.id_w = len(i)
            self.fmt = {}
        fmt = self.fmt.get(stream)
        if fmt is None:
            label = self.labels.get(stream) or token(stream, True)
            width = max(self.label_w, cells(label))
            fmt = _EntryFormat(self.w, width + 2, self.id_w, 24 if id_time(i) else 0)
            on = self.w.colour
            text = ((self.colours.get(stream, _LABEL_COLOURS[0]) if on else "") + label
                    + (self.w.st.off if on else "") + " " * (width - cells(label) + 2))
            fmt.pad, fmt.pad_b = text, text.encode("utf-8", "surrogateescape")
            self.fmt[stream] = fmt
        fmt(entry)
        w = self.w
        if w.buf:
            w.buf.append(b"")
            self.buf.write(b"\n".join(w.buf))
            w.buf, w.size = [], 0
        out = self.buf.getvalue()
        self.buf.seek(0)
        self.buf.truncate()
        return out


# ------------------------------------------------------------------ entry points

def write_pretty(reply, out, width=None, colour=None):
    """Write ``reply`` to the binary stream ``out``, flushing as it goes.
    Ctrl-C while writing: colours reset, then KeyboardInterrupt goes on."""
    _written(lambda w: w.value(reply), out, width, colour)


def write_pretty_paged(streams, pages, out, width=None, colour=None):
    """What ``write_pretty`` writes for an XREAD reply or an XRANGE list
    of entries, from pages read as they are written (xs's streamed reads,
    xstream_cli.execution.session): ``streams`` [(key, pages)] for XREAD,
    else ``pages``, the entries' pages of one range."""
    def entries(ps):
        for page in ps:
            yield from page

    def write(w):
        if streams is None:
            w.entries(entries(pages))
            return
        for key, ps in streams:
            w.line(w.st.head + plain(key) + w.st.off)
            w.entries(entries(ps), 2)
    _written(write, out, width, colour)


def _written(fn, out, width, colour):
    w = Writer(out, width, colour)
    try:
        fn(w)
        w.flush()
    except KeyboardInterrupt:
        try:
            w.buf = []
            out.write(b"\x1b[0m\n" if w.colour else b"\n")
            out.flush()
        except (OSError, ValueError):
            pass
        raise


def render_pretty(reply):
    """The pretty bytes of one reply (script mode, where replies are
    printed after their batch commits)."""
    buf = io.BytesIO()
    write_pretty(reply, buf, colour=_use_colour(sys.stdout))
    return buf.getvalue()
