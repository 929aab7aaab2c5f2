"""How one value reads in pretty output: a name or value bare or
double-quoted with escapes (``token``), unquoted text (``plain``), the
columns a string takes on a terminal (``cells``), idle times
(``duration``), unix-millisecond times and the times of entry IDs in UTC
(``utc_ms``, ``id_time``), and the terminal's width and colours
(``_Style``: ANSI only on a terminal, not with NO_COLOR or TERM=dumb).

Who imports it: xstream_cli.output.pretty (which re-exports these names
for xs web and the prompt) and pretty_entries.
"""
import io
import os
import re
import time

from xstream_cli.output.render import escape_text

_MIN_TS = 10 ** 11        # an ID whose ms part is below this (1973) is not shown as a time
_QUOTE = re.compile(r"[\s\"'\\]")
_QUOTE_NAME = re.compile(r"[\s\"'\\=]")


def _decode(b):
    return b.decode("utf-8", "surrogateescape") if type(b) is bytes else str(b)


def token(b, name=False):
    """A stored string for the terminal: bare, or double-quoted with
    escapes (empty, spaces, quotes, backslashes, control bytes)."""
    t = _decode(b)
    if t and t.isprintable() and not (_QUOTE_NAME if name else _QUOTE).search(t):
        return t
    return '"' + escape_text(t, True) + '"'


def plain(b):
    """Unquoted text for the terminal (names in headers, error texts)."""
    return escape_text(_decode(b), False)


def cells(s):
    """Columns ``s`` takes on a terminal (wide CJK characters take two)."""
    if s.isascii():
        return len(s)
    import unicodedata
    n = 0
    for ch in s:
        if unicodedata.combining(ch):
            continue
        n += 2 if unicodedata.east_asian_width(ch) in "WF" else 1
    return n


def duration(ms):
    """Milliseconds as ``450ms``, ``12.3s``, ``3m12s``, ``2h05m``, ``3d04h``;
    a negative value (never) as ``-``."""
    if ms is None or ms < 0:
        return "-"
    if ms < 1000:
        return "%dms" % ms
    s = ms // 1000
    if s < 60:
        return "%.1fs" % (ms / 1000.0) if s < 10 else "%ds" % s
    m, s = divmod(s, 60)
    if m < 60:
        return "%dm%02ds" % (m, s)
    h, m = divmod(m, 60)
    if h < 24:
        return "%dh%02dm" % (h, m)
    d, h = divmod(h, 24)
    return "%dd%02dh" % (d, h)


_sec_cache = [None, ""]


def utc_ms(ms):
    """Unix milliseconds as ``2024-05-01T12:00:00.123Z`` ('' when out of range)."""
    sec, milli = divmod(ms, 1000)
    if _sec_cache[0] != sec:
        try:
            _sec_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
        except (OverflowError, OSError, ValueError):
            return ""
        _sec_cache[0] = sec
    return "%s.%03dZ" % (_sec_cache[1], milli)


def id_time(i):
    """The time of an entry ID (bytes), or '' when it does not look like one."""
    try:
        ms = int(i.partition(b"-")[0])
    except ValueError:
        return ""
    return utc_ms(ms) if ms >= _MIN_TS else ""


def _width():
    import shutil
    try:
        w = shutil.get_terminal_size((100, 24)).columns
    except (OSError, ValueError):
        w = 100
    return max(w, 20)


def _use_colour(out):
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return os.isatty(out.fileno())
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return False


class _Style:
    def __init__(self, on):
        if on:
            self.id, self.time, self.name, self.key, self.err, self.head, self.dim, self.off = (
                "\x1b[36m", "\x1b[2m", "\x1b[32m", "\x1b[1m", "\x1b[1;31m", "\x1b[1;36m", "\x1b[2m", "\x1b[0m")
        else:
            self.id = self.time = self.name = self.key = self.err = self.head = self.dim = self.off = ""
