"""xs top: a live terminal view of every stream and consumer group, as
``nats top`` and ``redis-cli --stat`` show a server.

    xs top [STREAM|GLOB]... [--group G] [-i SEC] [--sort KEY]

One row per stream and group (a stream without groups: one row, group
``-``): LENGTH, IN/S, DELIV/S, ACK/S, LAG, LAG AGE, PENDING, OLDEST,
CONS, DEAD.  Every number is THE overview's
(storage.ops.overview.snapshot, the one xs ls, xs metrics and xs check
read); the three rates are differences of two successive snapshots
divided by the time between them (their ``now``):

* IN/S: the stream's entries-added counter (XADD, ever: a trim or XDEL
  does not lower it);
* DELIV/S: the group's entries-read counter (XINFO GROUPS): new entries
  delivered (``>`` reads); re-deliveries (XCLAIM, XAUTOCLAIM, reading
  one's own history) are not counted; ``-`` when Redis's counter cannot
  tell, or when it went down (XGROUP SETID);
* ACK/S: entries that left the PEL: delivered less the growth of the
  PEL (NOACK reads, XACK, XACKDEL, the entries of a deleted consumer
  and those XAUTOCLAIM finds deleted all count); never below 0 (an
  XCLAIM FORCE or XNACK FORCE adds to a PEL without a read, making it
  undercount).

The first frame, and the single snapshot printed in a pipe, have no
rates (``-``).  DEAD: on a group's row, the dead letters xs worker wrote
from that group, in the dead-letter streams shown; on a dead-letter
stream's own row (no groups), the letters it holds.

Keys: ``l`` lag, ``s`` lag in seconds, ``p`` pending, ``r`` rate (IN/S),
``n`` name, Tab the next sort key, ``q`` quits (exit 0); Ctrl-C ends it
as Ctrl-C ends every xs command (130).  A resize re-lays out the view at
once: the columns that do not fit are left out (the least telling
first), the rows that do not fit are counted on the last line.

Each refresh opens the store read-only, reads one snapshot in one read
transaction and closes it again, so nothing is held between refreshes
(xs compact is never kept waiting longer than one snapshot).  Never
writes, never creates a store: a missing store is an error (exit 1).
Piped, prints one snapshot as plain columns and exits, as redis-cli
does.
"""
import os
import sys
import time

import click

from xstream_cli import context

SORTS = ("lag", "lag-seconds", "pending", "rate", "name")
KEYS = {"l": "lag", "s": "lag-seconds", "p": "pending", "r": "rate", "n": "name"}

# (header, right-aligned, priority: the lowest go first when the terminal is narrow)
COLUMNS = (("STREAM", False, 10), ("GROUP", False, 10), ("LENGTH", True, 5), ("IN/S", True, 7),
           ("DELIV/S", True, 6), ("ACK/S", True, 4), ("LAG", True, 9), ("LAG AGE", True, 8),
           ("PENDING", True, 8), ("OLDEST", True, 7), ("CONS", True, 2), ("DEAD", True, 3))
_GAP = 2


# ------------------------------------------------------------------ rows

def rows_of(snap, prev, group=None):
    """One dict a row: stream, group (None: a stream without groups) and
    its numbers, with the rates against ``prev`` (the previous snapshot,
    or None)."""
    dt = None if prev is None else (snap.now - prev.now) / 1000.0
    before_s, before_g = {}, {}
    if prev is not None:
        for s in prev.streams:
            before_s[s.name] = s.entries_added
            for g in s.groups:
                before_g[(s.name, g.name)] = (g.entries_read, g.pending)
    letters: dict = {}          # (origin stream, origin group) -> dead letters, in the streams shown
    for s in snap.streams:
        for d in s.dead_letters:
            k = (d.origin_stream, d.origin_group)
            letters[k] = letters.get(k, 0) + d.count
    out = []
    for s in snap.streams:
        rate_in = None
        if dt and s.name in before_s and s.entries_added >= before_s[s.name]:
            rate_in = (s.entries_added - before_s[s.name]) / dt
        base = {"stream": s.name, "length": s.length, "in": rate_in}
        if not s.groups:
            if group is None:
                out.append(dict(base, group=None, delivered=None, acked=None, lag=None, lag_ms=None, pending=None,
                                oldest_ms=None, consumers=None, dead=s.dead_letter_count))
            continue
        for g in s.groups:
            if group is not None and g.name != group:
                continue
            delivered = acked = None
            old = before_g.get((s.name, g.name))
            if dt and old is not None and old[0] is not None and g.entries_read is not None \
                    and g.entries_read >= old[0]:
                read = g.entries_read - old[0]
                delivered = read / dt
                acked = max(0, read - (g.pending - old[1])) / dt
            out.append(dict(base, group=g.name, delivered=delivered, acked=acked, lag=g.lag, lag_ms=g.lag_ms,
                            pending=g.pending, oldest_ms=g.oldest_pending_ms, consumers=g.consumer_count,
                            dead=letters.get((s.name, g.name), 0)))
    return out


def _desc(v):
    return -1 if v is None else v


def sort_rows(rows, key):
    """Largest first (name: by stream, then group); ties by name."""
    rows = sorted(rows, key=lambda r: (r["stream"], r["group"] or b""))
    if key == "lag":
        rows.sort(key=lambda r: _desc(r["lag"]), reverse=True)
    elif key == "lag-seconds":
        rows.sort(key=lambda r: _desc(r["lag_ms"]), reverse=True)
    elif key == "pending":
        rows.sort(key=lambda r: _desc(r["pending"]), reverse=True)
    elif key == "rate":
        rows.sort(key=lambda r: (_desc(r["in"]), _desc(r["delivered"])), reverse=True)
    return rows


def _rate(x):
    if x is None:
        return "-"
    return "%.1f" % x if x < 10 else "%d" % round(x)


def cells(r):
    """The row's cells, in COLUMNS order (names as bytes)."""
    from xstream_cli.porcelain.ls import human_ms
    if r["group"] is None:
        return [r["stream"], "-", str(r["length"]), _rate(r["in"]), "", "", "", "", "", "", "", str(r["dead"])]
    return [r["stream"], r["group"], str(r["length"]), _rate(r["in"]), _rate(r["delivered"]), _rate(r["acked"]),
            "?" if r["lag"] is None else str(r["lag"]), human_ms(r["lag_ms"]),
            str(r["pending"]), human_ms(r["oldest_ms"]), str(r["consumers"]), str(r["dead"])]


def fit_columns(table, width):
    """The indexes of the COLUMNS to show in ``width`` characters: all that
    fit, leaving out the lowest priorities first (STREAM and GROUP stay)."""
    widths = [max([len(COLUMNS[n][0])] + [len(row[n]) for row in table]) for n in range(len(COLUMNS))]
    shown = list(range(len(COLUMNS)))
    for n in sorted(shown, key=lambda n: COLUMNS[n][2]):
        if sum(widths[k] for k in shown) + _GAP * (len(shown) - 1) <= width or COLUMNS[n][2] >= 10:
            break
        shown.remove(n)
    return shown


# ------------------------------------------------------------------ reading

def take(g, args):
    """One snapshot: the store opened read-only for it and closed again
    (raises StoreError)."""
    from storage.ops.overview import snapshot
    store = context.try_open(g, write=False, create=False)
    try:
        return snapshot(store, args, consumers=False, store_facts=False)
    finally:
        store.close()


# ------------------------------------------------------------------ a pipe: one snapshot

def first_snapshot(g, args):
    """The first snapshot, or exit 1 saying why there is none (no store,
    a stream named that does not exist)."""
    from storage.store import StoreError
    from xstream_cli.porcelain.ls import fail_missing
    try:
        snap = take(g, args)
    except StoreError as e:
        context.fail(str(e))
    if snap.missing:
        fail_missing(snap.missing)
    return snap


def print_once(g, args, group, key):
    from xstream_cli.porcelain.ls import emit_table
    snap = first_snapshot(g, args)
    table = [cells(r) for r in sort_rows(rows_of(snap, None, group), key)]
    emit_table("plain", [c[0] for c in COLUMNS], table, {n for n, c in enumerate(COLUMNS) if c[1]}, "")


# ------------------------------------------------------------------ the live view

class View:
    """What is on the screen: the last snapshot's rows, the sort key, and
    a line saying how it went."""

    def __init__(self, path, args, group, interval, key):
        self.path, self.args, self.group, self.interval, self.key = path, args, group, interval, key
        self.rows: list = []
        self.streams = self.groups = 0
        self.when = None
        self.problem = None

    def update(self, snap, prev):
        self.rows = rows_of(snap, prev, self.group)
        self.streams = len(snap.streams)
        self.groups = sum(len(s.groups) for s in snap.streams)
        self.when = snap.now
        from xstream_cli.porcelain.ls import show
        self.problem = "no such stream: %s" % ", ".join(show(m) for m in snap.missing) if snap.missing else None

    def render(self, width, height):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        from xstream_cli.porcelain.ls import show
        stamp = time.strftime("%H:%M:%S", time.localtime(self.when / 1000)) if self.when else "--:--:--"
        title = Text.assemble(("xs top", "bold"), "  sort: %s  every %gs  %d streams, %d groups  %s  %s"
                              % (self.key, self.interval, self.streams, self.groups, stamp,
                                 show(os.fsencode(self.path))))
        title.truncate(width, overflow="ellipsis")
        table_rows = [cells(r) for r in sort_rows(self.rows, self.key)]
        room = max(0, height - 4)          # title, the table's header, the footer, and one to spare
        more = len(table_rows) - room
        if more > 0:
            table_rows = table_rows[:room]
        shown = fit_columns(table_rows, width)
        table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, _GAP // 2), show_edge=False)
        for n in shown:
            head, right, _ = COLUMNS[n]
            table.add_column(head, justify="right" if right else "left", no_wrap=True, overflow="ellipsis",
                             style="bold cyan" if n == 0 else None)
        for row in table_rows:
            table.add_row(*[Text(show(row[n]) if isinstance(row[n], bytes) else row[n]) for n in shown])
        parts = [title, table]
        if self.problem:
            parts.append(Text(self.problem, style="red"))
        elif not self.rows:
            parts.append(Text("no group %s on the streams shown" % show(self.group) if self.group is not None
                              else "no streams", style="dim"))
        foot = "l lag  s lag-seconds  p pending  r rate  n name  Tab next  q quit"
        if more > 0:
            foot = "... %d more row%s   %s" % (more, "" if more == 1 else "s", foot)
        parts.append(Text(foot, style="dim", overflow="ellipsis", no_wrap=True))
        return Group(*parts)


def run_live(g, args, group, interval, key):
    """The live view until ``q`` (0) or Ctrl-C (130)."""
    import select
    import signal

    from rich.console import Console
    from rich.live import Live

    from storage.store import StoreError
    snap = first_snapshot(g, args)
    view = View(context.db_path(g), args, group, interval, key)
    view.update(snap, None)
    out = sys.stdout.fileno()
    keys_fd = sys.stdin.fileno() if _isatty(sys.stdin) else None
    plain = bool(os.environ.get("NO_COLOR")) or os.environ.get("TERM") == "dumb"
    console = Console(highlight=False, **({"color_system": None} if plain else {}))
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)

    def on_resize(signum, frame):
        try:
            os.write(wake_w, b"w")
        except OSError:
            pass
    saved_tty = None
    old_winch = signal.signal(signal.SIGWINCH, on_resize)
    try:
        if keys_fd is not None:
            import termios
            import tty
            saved_tty = termios.tcgetattr(keys_fd)
            tty.setcbreak(keys_fd)         # keys one at a time, not echoed; Ctrl-C is still SIGINT

        def frame():
            try:
                cols, lines = os.get_terminal_size(out)
            except OSError:
                cols, lines = 80, 24
            console.size = (cols, lines)   # the terminal's size now (not $COLUMNS), so a resize re-lays out
            return view.render(cols, lines)
        with Live(frame(), console=console, screen=True, auto_refresh=False, redirect_stdout=False,
                  redirect_stderr=False) as live:
            prev = snap
            due = time.monotonic() + interval
            while True:
                fds = [wake_r] + ([keys_fd] if keys_fd is not None else [])
                ready, _, _ = select.select(fds, [], [], max(0.0, due - time.monotonic()))
                if wake_r in ready:
                    os.read(wake_r, 4096)
                if keys_fd is not None and keys_fd in ready:
                    try:
                        data = os.read(keys_fd, 64)
                    except OSError:
                        data = b""
                    if not data:                   # the terminal hung up
                        return context.EXIT_OK
                    for ch in data.decode("latin-1"):
                        if ch == "q":
                            return context.EXIT_OK
                        if ch in KEYS:
                            view.key = KEYS[ch]
                        elif ch == "\t":
                            view.key = SORTS[(SORTS.index(view.key) + 1) % len(SORTS)]
                if time.monotonic() >= due:
                    due = time.monotonic() + interval
                    try:
                        snap = take(g, args)
                    except StoreError as e:
                        view.problem = str(e)
                    else:
                        view.update(snap, prev)
                        prev = snap
                live.update(frame(), refresh=True)
    except KeyboardInterrupt:
        return context.EXIT_INTERRUPTED
    finally:
        if saved_tty is not None:
            import termios
            termios.tcsetattr(keys_fd, termios.TCSADRAIN, saved_tty)
        signal.signal(signal.SIGWINCH, old_winch)
        os.close(wake_r)
        os.close(wake_w)


def _isatty(f):
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


# ------------------------------------------------------------------ command

def register(cli):
    @cli.command("top")
    @click.argument("targets", nargs=-1, metavar="[STREAM|GLOB]...")
    @click.option("--group", metavar="G", help="Show only the consumer group G (on every stream shown).")
    @click.option("-i", "--interval", type=float, default=1.0, show_default=True, metavar="SEC",
                  help="Seconds between refreshes.")
    @click.option("--sort", "key", type=click.Choice(SORTS), default="lag", show_default=True,
                  help="Sort key (largest first; name: by stream and group).  Keys change it live.")
    @click.pass_obj
    def top(obj, targets, group, interval, key):
        """Watch streams and groups live: rates, lag, pending, dead letters.

        \b
        One row per stream and group: LENGTH, IN/S (entries added),
        DELIV/S (new entries delivered), ACK/S (entries that left the
        PEL), LAG (entries) and LAG AGE (of the oldest undelivered
        entry), PENDING, OLDEST (pending delivery), CONS (consumers),
        DEAD (dead letters).  Rates compare successive snapshots.
        Keys: l lag, s lag-seconds, p pending, r rate, n name, Tab
        next, q quit.  Piped: one snapshot (no rates), then exit.
        Opens the store read-only at each refresh; never writes, never
        creates a store.
        """
        if not interval > 0:
            raise click.BadParameter("must be above 0", param_hint="'-i' / '--interval'")
        g = obj or context.Globals()
        args = [os.fsencode(a) for a in targets]
        gname = None if group is None else os.fsencode(group)
        try:
            if not _isatty(sys.stdout):
                print_once(g, args, gname, key)
                return
            code = run_live(g, args, gname, interval, key)
        except KeyboardInterrupt:
            code = context.EXIT_INTERRUPTED      # Ctrl-C: 130, and xs ends as killed by SIGINT
        sys.exit(code)
