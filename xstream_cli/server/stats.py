"""What INFO's commandstats, errorstats and latencystats sections report,
and the counters of its stats and persistence sections that come from
replies: per command, its calls, the time the engine spent on them, how
many were rejected (refused before running: a wrong arity, NOAUTH) or
failed (ran and answered an error), and a histogram of their latencies;
per error code (the first word of an error reply: ERR, NOGROUP,
WRONGTYPE ...), how many were sent.  (Redis's dirty counter,
``rdb_changes_since_last_save``, is the engine's: the verbs count their
changes in storage.txn.Txn.dirty, and the engine adds up what it
commits.)

Counted when a reply is sent (a blocked read once, with its final reply;
the commands of an EXEC as commands of their own, as Redis does): on the
event loop, and in the threads of the in-process client
(xstream_cli.client), hence the lock.

Who imports it: the server's connection (counts) and commands (INFO,
CONFIG).
"""

import threading
from operator import attrgetter

from storage.errors import RedisError
from xstream_cli.server.config import percentile_text

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


_NO_TIME = hist_index(0)       # the bucket of a call that took no engine time
_US_BUCKETS = 4096
_US_BUCKET = [hist_index(us * 1000) for us in range(_US_BUCKETS)]   # whole microseconds -> bucket, looked up


# ================================================================ Stats

_BULK_ONLY = {bytes}
_name = attrgetter("name")


class Stats:
    """The server's reply counters (INFO; CONFIG RESETSTAT zeroes them)."""

    def __init__(self):
        self.lock = threading.Lock()
        # calls answered where they were read (``instant``), counted by the
        # event loop's thread alone, without the lock, since the start;
        # the others see them through ``_quick``: less what RESETSTAT saw,
        # and for the histograms, those made while latency tracking was on
        # (``quick_hist``: of the periods it was on before this one, which
        # began at ``quick_hist_base``)
        self.quick = {"ping": 0, "echo": 0}
        self.quick_base = self.quick_hist_base = dict(self.quick)
        self.quick_hist = dict.fromkeys(self.quick, 0)
        self._tracking = True
        self.reset()

    @property
    def tracking(self):
        """CONFIG latency-tracking (set by the event loop's thread, as
        the instant calls are counted)."""
        return self._tracking

    @tracking.setter
    def tracking(self, on):
        with self.lock:
            if on and not self._tracking:
                self.quick_hist_base = dict(self.quick)
            elif self._tracking and not on:
                for name, n in self._quick(self.quick_hist_base):
                    self.quick_hist[name] += n
            self._tracking = on

    def reset(self):
        with self.lock:
            self._reset()

    def _reset(self):
        self.quick_base = self.quick_hist_base = dict(self.quick)
        self.quick_hist = dict.fromkeys(self.quick, 0)
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
        i = _US_BUCKET[usec] if usec < _US_BUCKETS else hist_index(usec * 1000)
        h[i] = h.get(i, 0) + 1

    def reply(self, item, r):
        """Count the reply ``r`` sent for the Item ``item``."""
        with self.lock:
            self._reply(item, r)

    def replies(self, items, replies):
        """Count a job's replies."""
        with self.lock:
            if len(replies) == 1 == len(items):      # the usual job: one call (_replies' loop, unrolled)
                it, r = items[0], replies[0]
                st = self.commands.get(it.name)
                if st is None or it.rejected or isinstance(r, RedisError):
                    self._reply(it, r)
                else:
                    self._calls(it.name, st, 1, it.usec)
                return
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
        if self._tracking:
            self._latency(name, item.usec)
        if failed:
            st[3] += 1

    def _replies(self, items, replies):
        """The common case of reply() in bulk: the calls of a job that
        succeeded, counted a run of one command at a time (a job's items
        share its time: one histogram step per run, not per call)."""
        commands = self.commands
        if len(replies) > 1 and set(map(type, replies)) == _BULK_ONLY and len(set(map(_name, items))) == 1:
            # the usual pipeline: calls of one command, each answered with a bulk string
            st = commands.get(items[0].name)
            if st is not None:
                self._calls(items[0].name, st, len(items), items[0].usec)
                return
        name = st = None
        run = usec = 0
        for it, r in zip(items, replies):
            if run and (it.name is not name or it.usec != usec):
                self._calls(name, st, run, usec)
                run = 0
            if it.rejected or isinstance(r, RedisError):
                if run:
                    self._calls(name, st, run, usec)
                    run = 0
                self._reply(it, r)
                continue
            if not run:
                name, usec = it.name, it.usec
                st = commands.get(name)
                if st is None:
                    self._reply(it, r)       # its first call: made there
                    continue
            run += 1
        if run:
            self._calls(name, st, run, usec)

    def _calls(self, name, st, n, usec):
        st[0] += n
        st[1] += n * usec
        if self._tracking:
            h = self.latency.get(name)
            if h is None:
                h = self.latency[name] = {}
            i = _US_BUCKET[usec] if usec < _US_BUCKETS else hist_index(usec * 1000)
            h[i] = h.get(i, 0) + n

    def instant(self, name, n):
        """``n`` calls of the command ``name`` (PING or ECHO) answered
        where they were read (no engine time), that succeeded: one
        addition, by the event loop's thread (the only one that calls
        this)."""
        self.quick[name] += n

    def _quick(self, base):
        """(under the lock) The instant calls since ``base`` was taken, by name."""
        return [(name, n - base[name]) for name, n in list(self.quick.items()) if n != base[name]]

    def commandstats(self):
        with self.lock:
            cmds = {name: list(st) for name, st in self.commands.items()}
            for name, n in self._quick(self.quick_base):
                cmds.setdefault(name, [0, 0, 0, 0])[0] += n
        rows = sorted(cmds.items())
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
            hists = {name: dict(h) for name, h in self.latency.items()}
            made = dict(self.quick_hist)
            for name, n in self._quick(self.quick_hist_base):
                made[name] += n
            for name, n in made.items():
                if n:
                    h = hists.setdefault(name, {})
                    h[_NO_TIME] = h.get(_NO_TIME, 0) + n
        out = []
        for name, h in sorted(hists.items()):
            out.append(("latency_percentiles_usec_" + name,
                        ",".join("p%s=%.3f" % (percentile_text(p), hist_percentile(h, p) / 1000.0)
                                 for p in percentiles)))
        return out
