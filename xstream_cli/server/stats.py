"""What INFO's commandstats, errorstats and latencystats sections report,
and the counters of its stats and persistence sections that come from
replies: per command, its calls, the time the engine spent on them, how
many were rejected (refused before running: a wrong arity, NOAUTH) or
failed (ran and answered an error), and a histogram of their latencies;
per error code (the first word of an error reply: ERR, NOGROUP,
WRONGTYPE ...), how many were sent; and Redis's dirty counter,
``rdb_changes_since_last_save``.

Counted when a reply is sent (a blocked read once, with its final reply;
the commands of an EXEC as commands of their own, as Redis does): on the
event loop, and in the threads of the in-process client
(xstream_cli.client), hence the lock.

Who imports it: the server's connection (counts) and commands (INFO,
CONFIG).
"""

import threading

from storage.errors import RedisError
from xstream_cli.output.reply import Map
from xstream_cli.server.config import percentile_text
from xstream_cli.server.resp import Raw

# ================================================================ dirty
#
# Redis adds to ``server.dirty`` per change a command made (t_stream.c,
# db.c, expire.c, cluster.c): XDEL the entries deleted, XACK those
# acknowledged, DEL the keys deleted ...; a command that changed nothing
# adds 0.  Here the amount is read from the command's reply (and its
# parsed arguments): fn(item, reply) -> changes, for a write command
# that succeeded.  The consumers XREADGROUP, XCLAIM and XAUTOCLAIM create
# (Redis: 1 each) are counted by the engine (Engine.consumers_made, from
# storage.txn.Txn.consumers_made); INFO adds the two.  Not counted: the
# PEL entries of deleted entries XCLAIM drops and XCLAIM's LASTID (1
# each).


def _int(it, r):
    """The reply, a count of changes: XDEL, XTRIM, XACK, DEL, EXPIRE ..."""
    return r if type(r) is int and r > 0 else 0


def _one(it, r):
    """One change when it succeeded: XGROUP CREATE / SETID, XSETID, RESTORE."""
    return 1


def _xadd(it, r):
    return 0 if r is None else 1            # NOMKSTREAM on a missing key adds nothing


def _rename(it, r):
    return 0 if it.args[0] == it.args[1] or r == 0 else 1      # the same key: nothing is done


def _len(it, r):
    return len(r) if isinstance(r, list) else 0     # XCLAIM: one per entry claimed


def _xautoclaim(it, r):
    """One per entry claimed and one per deleted entry dropped from the PEL."""
    if not isinstance(r, list) or len(r) < 2:
        return 0
    return len(r[1]) + (len(r[2]) if len(r) > 2 else 0)


def _xreadgroup(it, r):
    """One per stream that delivered new entries (``>``: the entries are
    one change, as t_stream.c's propCount; a read of the PEL is none)."""
    if type(r) is Raw and r.streams is not None:
        return r.streams                 # read in pages (server.paged): new entries only, each stream delivered
    if not isinstance(r, Map):
        return 0
    opts = it.args[0]
    new = {k for k, i in zip(opts.keys, opts.ids) if i == b">"}
    return sum(1 for k, entries in r.pairs if entries and (k in new or opts.claim is not None))


def _codes(*counted):
    def fn(it, r):
        return sum(1 for x in r if x in counted) if isinstance(r, list) else 0
    return fn


def _zero(it, r):
    return 0


CHANGES = {
    "xadd": _xadd, "xdel": _int, "xtrim": _int, "xack": _int, "xclaim": _len, "xautoclaim": _xautoclaim,
    "xreadgroup": _xreadgroup, "xsetid": _one,
    "xdelex": _codes(1), "xackdel": _codes(1, 2), "xnack": _int,
    "xgroup|create": _one, "xgroup|setid": _one, "xgroup|destroy": _int,
    "xgroup|createconsumer": _int,
    "xgroup|delconsumer": _one,              # Redis: 0 for a consumer that does not exist (the reply is 0 too)
    "del": _int, "unlink": _int, "expire": _int, "pexpire": _int, "expireat": _int, "pexpireat": _int,
    "persist": _int, "copy": _int, "rename": _rename, "restore": _one,
    "config|set": _zero,                      # a setting, not data
    "flushdb": lambda it, r: it.changes,     # the keys removed (commands.py)
    "flushall": lambda it, r: it.changes,
}


def changes(item, r):
    """What the write command ``item``, answered ``r`` (not an error),
    adds to the dirty counter (1 for a write command not in CHANGES)."""
    fn = CHANGES.get(item.name)
    return 1 if fn is None else fn(item, r)


# ============================================================ latencies
#
# Redis keeps an HdrHistogram per command (1 ns .. 1 s, 2 significant
# digits) of the call's microseconds times 1000, and INFO latencystats
# prints chosen percentiles of it in microseconds with 3 decimals.  The
# same buckets here: values 0..255 exact, then for each power of two 128
# sub-buckets, so that a percentile prints as Redis prints it (the
# highest value of its bucket: 1 usec is "1.003").

HIST_MIN, HIST_MAX = 1, 1000000000            # ns, as LATENCY_HISTOGRAM_MIN/MAX_VALUE


def hist_index(ns):
    """The bucket of a value in ns (clamped to HIST_MIN..HIST_MAX)."""
    v = HIST_MIN if ns < HIST_MIN else HIST_MAX if ns > HIST_MAX else ns
    b = (v | 255).bit_length() - 8
    return ((b + 1) << 7) + (v >> b) - 128


def _bucket_range(idx):
    """(lowest value, size of the range) of the bucket ``idx``."""
    b = (idx >> 7) - 1
    sub = (idx & 127) + 128
    if b < 0:
        sub -= 128
        b = 0
    return sub << b, 1 << b


def hist_percentile(counts, p):
    """hdr_value_at_percentile over ``counts`` ({bucket: count}), in ns."""
    total = sum(counts.values())
    want = max(int(min(p, 100.0) / 100 * total + 0.5), 1)
    seen = 0
    idx = 0
    for idx in sorted(counts):
        seen += counts[idx]
        if seen >= want:
            break
    low, size = _bucket_range(idx)
    return low if p == 0.0 else low + size - 1


# ================================================================ Stats

class Stats:
    """The server's reply counters (INFO; CONFIG RESETSTAT zeroes all but
    the dirty counter, as in Redis)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.dirty = 0                # changes made (rdb_changes_since_last_save; there is no SAVE)
        self.tracking = True          # CONFIG latency-tracking
        self.reset()

    def reset(self):
        with self.lock:
            self._reset()

    def _reset(self):
        self.commands = {}            # name -> [calls, usec, rejected, failed]
        self.latency = {}             # name -> {histogram bucket: calls}
        self.errors = {}              # error code -> replies
        self.error_replies = 0

    def error(self, e):
        with self.lock:
            self._error(e)

    def _error(self, e):
        code = str(e).split(" ", 1)[0] or "ERR"
        self.errors[code] = self.errors.get(code, 0) + 1
        self.error_replies += 1

    def _latency(self, name, usec):
        h = self.latency.get(name)
        if h is None:
            h = self.latency[name] = {}
        i = hist_index(usec * 1000)
        h[i] = h.get(i, 0) + 1

    def reply(self, item, r):
        """Count the reply ``r`` sent for the Item ``item``."""
        with self.lock:
            self._reply(item, r)

    def replies(self, items, replies):
        """Count a job's replies."""
        with self.lock:
            self._replies(items, replies)

    def _reply(self, item, r):
        failed = isinstance(r, RedisError)
        if failed:
            self._error(r)
        name = item.name
        if name is None:              # an unknown command: an error, no command
            return
        st = self.commands.get(name)
        if st is None:
            st = self.commands[name] = [0, 0, 0, 0]
        if item.rejected:
            st[2] += 1
            return
        st[0] += 1
        st[1] += item.usec
        if self.tracking:
            self._latency(name, item.usec)
        if failed:
            st[3] += 1
        elif item.write:
            self.dirty += changes(item, r)

    def _replies(self, items, replies):
        commands = self.commands
        for it, r in zip(items, replies):
            st = commands.get(it.name)
            if st is None or it.rejected or isinstance(r, RedisError):
                self._reply(it, r)
                continue
            st[0] += 1                # the common case of reply(): a call that succeeded
            st[1] += it.usec
            if self.tracking:
                self._latency(it.name, it.usec)
            if it.write:
                self.dirty += changes(it, r)

    def commandstats(self):
        with self.lock:
            rows = sorted((name, list(st)) for name, st in self.commands.items())
        out = []
        for name, (calls, usec, rejected, failed) in rows:
            out.append(("cmdstat_" + name, "calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d"
                        % (calls, usec, usec / calls if calls else 0.0, rejected, failed)))
        return out

    def errorstats(self):
        with self.lock:
            rows = sorted(self.errors.items())
        return [("errorstat_" + code, "count=%d" % n) for code, n in rows]

    def latencystats(self, percentiles):
        """``latency_percentiles_usec_<name>`` lines (none while tracking
        is off).  INFO runs in the engine thread: the histograms are
        copied under the lock first."""
        if not self.tracking:
            return []
        with self.lock:
            hists = sorted((name, dict(h)) for name, h in self.latency.items())
        out = []
        for name, h in hists:
            out.append(("latency_percentiles_usec_" + name,
                        ",".join("p%s=%.3f" % (percentile_text(p), hist_percentile(h, p) / 1000.0)
                                 for p in percentiles)))
        return out
