"""Durations as people type them for the porcelain commands (xs ls,
trim, archive, tail): ``7d``, ``90s``, ``1h30m``."""
import re

from xstream_cli import context

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d|w)")


def parse_duration(option, text):
    """``7d``, ``12h``, ``30m``, ``90s``, ``500ms``, ``2w`` or a sum such
    as ``1h30m``, in ms; anything else is a usage error (exit 2)."""
    t = (text or "").strip().lower()
    pos, total = 0, 0
    for m in _DURATION.finditer(t):
        if m.start() != pos:
            break
        total += int(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not t or pos != len(t):
        context.fail("%s: bad duration %r: a number and a unit (ms, s, m, h, d, w), e.g. 500ms, 90s, 30m, "
                     "12h, 7d, 1h30m" % (option, text), context.EXIT_USAGE)
    return total
