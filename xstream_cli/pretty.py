"""Pretty output for people at a terminal (rich).  Imported only in
pretty mode.  Colours follow rich's rules: off with NO_COLOR or when not
a terminal."""
import io

from storage.errors import RedisError
from xstream_cli.reply import Map, Status


def _s(b):
    return b.decode("utf-8", "backslashreplace") if isinstance(b, bytes) else str(b)


def _is_entry(x):
    return type(x) in (list, tuple) and len(x) in (2, 4) and type(x[0]) is bytes \
        and (x[1] is None or type(x[1]) is list)


def render_pretty(reply):
    from rich.console import Console
    from rich.table import Table
    from storage.codec import Entries
    if type(reply) is Entries:
        reply = reply.decoded()
    buf = io.StringIO()
    import sys
    console = Console(file=buf, force_terminal=sys.stdout.isatty(), width=_width(), highlight=False,
                      soft_wrap=True)
    if isinstance(reply, RedisError):
        console.print("[bold red](error)[/] " + _esc(reply.text))
    elif type(reply) is list and reply and all(_is_entry(e) for e in reply):
        console.print(_entries_table(reply, Table))
    elif type(reply) is list and reply and all(type(x) is Map for x in reply):
        # XINFO GROUPS / CONSUMERS: one row per map
        cols = [k for k, _ in reply[0].pairs]
        t = Table(box=None, pad_edge=False, header_style="bold")
        for c in cols:
            t.add_column(_esc(_s(c)))
        for row in reply:
            d = dict(row.pairs)
            t.add_row(*[_esc(_plain(d.get(c))) for c in cols])
        console.print(t)
    elif type(reply) is list and reply and all(_is_pending_row(x) for x in reply):
        # XPENDING's extended form
        t = Table(box=None, pad_edge=False, header_style="bold")
        for c in ("id", "consumer", "idle ms", "deliveries"):
            t.add_column(c)
        for i, c, idle, n in reply:
            t.add_row(_esc(_s(i)), _esc(_s(c)) if c else "[dim](nacked)[/]", str(idle), str(n))
        console.print(t)
    elif type(reply) is Map and not reply.flat:
        for k, ents in reply.pairs:
            console.print("[bold cyan]%s[/]" % _esc(_s(k)))
            console.print(_entries_table(ents, Table))
    elif type(reply) is Map:
        t = Table(show_header=False, box=None, pad_edge=False)
        t.add_column(style="bold")
        t.add_column()
        for k, v in reply.pairs:
            t.add_row(_esc(_s(k)), _esc(_plain(v)))
        console.print(t)
    else:
        console.print(_esc(_plain(reply)))
    return buf.getvalue().encode("utf-8", "surrogateescape")


def _is_pending_row(x):
    return type(x) is list and len(x) == 4 and type(x[0]) is bytes and type(x[1]) is bytes \
        and type(x[2]) is int and type(x[3]) is int


def _entries_table(entries, Table):
    t = Table(box=None, pad_edge=False, header_style="bold")
    t.add_column("id", style="cyan", no_wrap=True)
    t.add_column("time", style="dim", no_wrap=True)
    t.add_column("fields")
    for e in entries:
        i, f = e[0], e[1]
        fields = "(deleted)" if f is None else "  ".join(
            "[green]%s[/]=%s" % (_esc(_s(f[j])), _esc(_s(f[j + 1]))) for j in range(0, len(f) - 1, 2))
        if len(e) > 2:
            fields += "  [dim](idle %s ms, delivered %s)[/]" % (e[2], e[3])
        t.add_row(_esc(_s(i)), _id_time(i), fields)
    return t


def _id_time(i):
    import datetime
    try:
        ms = int(i.split(b"-")[0])
        if ms < 10 ** 11:
            return ""
        return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    except (ValueError, OverflowError, OSError):
        return ""


def _plain(v):
    from xstream_cli.render import noraw
    if type(v) is bytes:
        return _s(v)
    if type(v) is Status:
        return str(v)
    if v is None:
        return "(nil)"
    if type(v) is int:
        return str(v)
    return noraw(v).decode("utf-8", "backslashreplace").rstrip("\n")


def _esc(s):
    from rich.markup import escape
    return escape(s)


def _width():
    import shutil
    return shutil.get_terminal_size((100, 24)).columns
