"""xs check: thresholds on THE overview (storage.ops.overview.snapshot),
with monitoring exit codes, the shape of ``nats server check consumer``
and of a Nagios / Icinga plugin.

    xs check [STREAM|GLOB]... [--group G] [--lag-warn N] [--lag-critical N]
             [--lag-seconds-warn D] ... [--format nagios|json|prometheus|text]
             [--outfile FILE]

Exit status: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no store, a stream
named that does not exist, a glob that matches nothing, a --group no
stream checked has, a command line that is wrong).  A value triggers a
threshold when it EXCEEDS it (value > threshold), as a Nagios range
``-w 10`` does; the worst state wins.

What each threshold measures, and where:
  --lag                     per group: entries not yet delivered (a lag
                            Redis's counters cannot tell is not checked)
  --lag-seconds             per group: age of the oldest undelivered entry
  --pending                 per group: its PEL
  --oldest-pending-seconds  per group: since the oldest delivery pending
  --dead-letters            per dead-letter stream checked (xs worker
                            --dead-letter), its dead letters (of --group's
                            origin only, with --group)
  --last-entry-age-seconds  per stream with an entry: a quiet producer
  --store-full-percent      the store: bytes in use of the room it can have
Durations take xs trim's syntax (90s, 30m, 1h30m); a bare number is
seconds.  Nothing is written to the store, and no store is created.
"""
import json
import os
import sys

import click

from xstream_cli import context

OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
STATES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")

# (name, kind, perfdata unit, help): kind "count", "duration" (ms) or "percent"
CHECKS = [
    ("lag", "count", "", "a group's lag in entries"),
    ("lag-seconds", "duration", "s", "a group's lag in time: age of the oldest undelivered entry"),
    ("pending", "count", "", "a group's pending entries"),
    ("oldest-pending-seconds", "duration", "s", "since the oldest delivery still pending in a group"),
    ("dead-letters", "count", "", "dead letters in a dead-letter stream"),
    ("last-entry-age-seconds", "duration", "s", "since a stream's last entry (a producer gone quiet)"),
    ("store-full-percent", "percent", "%", "percent of the store's room in use"),
]


class _Command(click.Command):
    """A command line error is UNKNOWN (exit 3), as monitoring plugins
    report it, not click's exit 2 (CRITICAL to a monitoring system)."""

    def parse_args(self, ctx, args):
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            e.show()
            ctx.exit(UNKNOWN)


def _usage(message):
    context.fail(message, UNKNOWN)


def parse_threshold(option, kind, text):
    """A threshold's value: a count (int), ms (duration) or a percent."""
    t = (text or "").strip()
    if kind == "count":
        if not t.isdigit():
            _usage("%s: %r is not a count (a whole number >= 0)" % (option, text))
        return int(t)
    if kind == "percent":
        try:
            v = float(t)
        except ValueError:
            v = -1.0
        if not 0 <= v <= 100:
            _usage("%s: %r is not a percent (0 to 100)" % (option, text))
        return v
    if t.isdigit():
        return int(t) * 1000
    from xstream_cli.porcelain.durations import parse_duration
    try:
        return parse_duration(option, text)
    except SystemExit:
        sys.exit(UNKNOWN)


class Result:
    """One measured value: its check, where (stream, group), value."""
    __slots__ = ("check", "stream", "group", "value", "state", "threshold")

    def __init__(self, check, stream, group, value):
        self.check, self.stream, self.group, self.value = check, stream, group, value
        self.state, self.threshold = OK, None


def measure(snap, group):
    """Every value the checks look at, from the snapshot: [Result]."""
    out = []
    for s in snap.streams:
        for g in s.groups:
            if group is not None and g.name != group:
                continue
            if g.lag is not None:
                out.append(Result("lag", s.name, g.name, g.lag))
            out.append(Result("lag-seconds", s.name, g.name, g.lag_ms))
            out.append(Result("pending", s.name, g.name, g.pending))
            out.append(Result("oldest-pending-seconds", s.name, g.name, g.oldest_pending_ms or 0))
        if s.dead_letters:
            n = sum(d.count for d in s.dead_letters if group is None or d.origin_group == group)
            out.append(Result("dead-letters", s.name, None, n))
        if s.last_entry_age_ms is not None:
            out.append(Result("last-entry-age-seconds", s.name, None, max(0, s.last_entry_age_ms)))
    if snap.store is not None:
        out.append(Result("store-full-percent", None, None, snap.store.full_ratio * 100.0))
    return out


def judge(results, limits):
    """Set each Result's state from ``limits`` ({check: (warn, crit)});
    the worst state."""
    worst = OK
    for r in results:
        warn, crit = limits.get(r.check, (None, None))
        if crit is not None and r.value > crit:
            r.state, r.threshold = CRITICAL, crit
        elif warn is not None and r.value > warn:
            r.state, r.threshold = WARNING, warn
        worst = max(worst, r.state)
    return worst


# ------------------------------------------------------------------ output

def _kind(check):
    return next(c[1] for c in CHECKS if c[0] == check)


def _dec(x, places=3):
    """``x`` with at most ``places`` decimals, no trailing zeros."""
    t = "%.*f" % (places, x)
    return t.rstrip("0").rstrip(".") if "." in t else t


def _value_text(check, v):
    kind = _kind(check)
    if kind == "duration":
        return "%ss" % _dec(v / 1000.0)
    if kind == "percent":
        return "%s%%" % _dec(v, 4)
    return str(v)


def _where(r):
    from xstream_cli.porcelain.ls import show
    parts = []
    if r.stream is not None:
        parts.append(show(r.stream))
    if r.group is not None:
        parts.append("group " + show(r.group))
    return " (%s)" % ", ".join(parts) if parts else ""


def _problem_text(r):
    return "%s %s > %s%s" % (r.check, _value_text(r.check, r.value), _value_text(r.check, r.threshold), _where(r))


def _perf_label(check):
    return check.replace("-", "_")


def _perfdata(results, limits):
    """Nagios perfdata: per check measured, the largest value, with its
    warn;crit;min (seconds for durations)."""
    out = []
    for name, kind, unit, _ in CHECKS:
        vals = [r.value for r in results if r.check == name]
        if not vals:
            continue
        warn, crit = limits.get(name, (None, None))

        def f(v):
            if v is None:
                return ""
            if kind == "duration":
                return _dec(v / 1000.0)
            return _dec(v, 4) if kind == "percent" else str(v)
        out.append("%s=%s%s;%s;%s;0" % (_perf_label(name), f(max(vals)), unit, f(warn), f(crit)))
    return " ".join(out)


def summary(state, results, reason, counts):
    if state == UNKNOWN:
        return reason
    bad = sorted((r for r in results if r.state), key=lambda r: -r.state)
    if not bad:
        return "%d stream%s, %d group%s checked" % (counts[0], "" if counts[0] == 1 else "s",
                                                      counts[1], "" if counts[1] == 1 else "s")
    text = _problem_text(bad[0])
    if len(bad) > 1:
        text += "; %d more" % (len(bad) - 1)
    return text


def render(fmt, state, results, limits, reason, counts):
    head = summary(state, results, reason, counts)
    bad = [r for r in results if r.state]
    if fmt == "nagios":
        perf = _perfdata(results, limits)
        return ("XS %s - %s%s\n" % (STATES[state], head, " | " + perf if perf else "")).encode("utf-8", "replace")
    if fmt == "text":
        lines = ["%s: %s" % (STATES[state], head)]
        lines += ["  %s: %s" % (STATES[r.state], _problem_text(r)) for r in sorted(bad, key=lambda r: -r.state)]
        return ("\n".join(lines) + "\n").encode("utf-8", "replace")
    if fmt == "json":
        def name(b):
            return None if b is None else b.decode("utf-8", "surrogateescape")

        def value(r, v):
            return None if v is None else (round(v / 1000.0, 3) if _kind(r.check) == "duration" else v)
        doc = {"status": STATES[state], "code": state, "summary": head,
               "streams": counts[0], "groups": counts[1],
               "problems": [{"status": STATES[r.state], "check": r.check, "stream": name(r.stream),
                             "group": name(r.group), "value": value(r, r.value),
                             "threshold": value(r, r.threshold)} for r in bad]}
        return (json.dumps(doc, separators=(", ", ": ")) + "\n").encode("utf-8", "surrogateescape")
    # prometheus
    from xstream_cli.porcelain.metrics import Family, label_value
    from xstream_cli.porcelain.metrics import render as render_text
    st = Family("xs_check_status", "gauge", "xs check's state: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.")
    st.add((), state)
    pr = Family("xs_check_problem_value", "gauge",
                "A value over a threshold (seconds for durations), by check, stream, group and state.")
    for r in bad:
        labels = (("check", _perf_label(r.check)),)
        if r.stream is not None:
            labels += (("stream", label_value(r.stream)),)
        if r.group is not None:
            labels += (("group", label_value(r.group)),)
        labels += (("state", STATES[r.state].lower()),)
        pr.add(labels, r.value / 1000.0 if _kind(r.check) == "duration" else r.value)
    return render_text([st, pr])


# ------------------------------------------------------------------ run

def run_check(g, targets, group, limits, fmt, outfile):
    from storage.store import StoreError
    from xstream_cli.porcelain.ls import is_pattern, show
    from xstream_cli.porcelain.metrics import read_snapshot
    args = [os.fsencode(a) for a in targets]
    gname = None if group is None else os.fsencode(group)
    results: list = []
    counts = (0, 0)
    reason = ""
    try:
        snap = read_snapshot(g, args, consumers=False)
    except StoreError as e:
        state, reason = UNKNOWN, str(e)
    else:
        ngroups = sum(1 for s in snap.streams for x in s.groups if gname is None or x.name == gname)
        counts = (len(snap.streams), ngroups)
        if snap.missing:
            state, reason = UNKNOWN, "no such stream: %s" % ", ".join(show(m) for m in snap.missing)
        elif args and not snap.streams:
            state, reason = UNKNOWN, "no stream matches %s" % " ".join(show(a) for a in args if is_pattern(a))
        elif gname is not None and not ngroups:
            state, reason = UNKNOWN, "no group %s on the streams checked" % show(gname)
        else:
            lacking = [s.name for s in snap.streams if gname is not None and s.name in args
                       and all(x.name != gname for x in s.groups)]
            if lacking:
                state, reason = UNKNOWN, "no group %s on stream %s" % (show(gname), show(lacking[0]))
            else:
                results = measure(snap, gname)
                state = judge(results, limits)
    data = render(fmt, state, results, limits, reason, counts)
    if outfile is not None:
        from xstream_cli.porcelain.metrics import write_file
        write_file(outfile, data)
    else:
        context.write_out(data)
    return state


def _threshold_options(f):
    for name, kind, _, text in reversed(CHECKS):
        meta = {"count": "N", "duration": "DURATION", "percent": "PERCENT"}[kind]
        for level in ("critical", "warn"):
            f = click.option("--%s-%s" % (name, level), "%s_%s" % (name.replace("-", "_"), level), metavar=meta,
                             help="%s above %s: %s." % ("CRITICAL" if level == "critical" else "WARNING",
                                                        meta, text))(f)
    return f


def register(cli):
    @cli.command("check", cls=_Command)
    @click.argument("targets", nargs=-1, metavar="[STREAM|GLOB]...")
    @click.option("--group", metavar="G", help="Check only the consumer group G (on every stream checked).")
    @_threshold_options
    @click.option("--format", "fmt", type=click.Choice(["nagios", "json", "prometheus", "text"]), default="nagios",
                  show_default=True, help="nagios: one status line with perfdata; text: a line per problem.")
    @click.option("--outfile", metavar="FILE", help="Write the report to FILE atomically instead of stdout.")
    @click.pass_obj
    def check(obj, targets, group, fmt, outfile, **thresholds):
        """Check lag, pending, dead letters and the store against thresholds.

        \b
        Exit status: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no store,
        no such stream or group, a glob matching nothing, a wrong
        command line).  A value over a -warn threshold is WARNING, over
        a -critical one CRITICAL; the worst wins.  Per group: --lag
        (entries), --lag-seconds (age of the oldest undelivered entry),
        --pending, --oldest-pending-seconds; per stream:
        --last-entry-age-seconds, --dead-letters (in a dead-letter
        stream of xs worker); the store: --store-full-percent.
        DURATION: 90s, 30m, 1h30m, or a bare number of seconds.  Reads
        one snapshot; never writes, never creates a store.
        """
        limits = {}
        for name, kind, _, _ in CHECKS:
            key = name.replace("-", "_")
            w, c = thresholds["%s_warn" % key], thresholds["%s_critical" % key]
            if w is not None or c is not None:
                limits[name] = (None if w is None else parse_threshold("--%s-warn" % name, kind, w),
                                None if c is None else parse_threshold("--%s-critical" % name, kind, c))
        code = run_check(obj or context.Globals(), targets, group, limits, fmt, outfile)
        sys.exit(code)
