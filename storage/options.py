"""Parsed command options: what a parser hands to a domain verb.

Frozen, so a verb cannot change what the user asked for.  IDs are
``(ms, seq)`` tuples; names and field values are bytes.  (A small
frozen-record base instead of dataclasses: this module is on every
command's start-up path, and dataclasses imports inspect.)
"""

KEEPREF, DELREF, ACKED = "keepref", "delref", "acked"


class _Options:
    """Frozen record: subclasses list ``FIELDS`` as (name, default)."""
    __slots__ = ()
    FIELDS = ()

    def __init__(self, *args, **kw):
        names = [n for n, _ in self.FIELDS]
        if len(args) > len(names):
            raise TypeError("%s takes at most %d arguments" % (type(self).__name__, len(names)))
        vals = dict(self.FIELDS)
        vals.update(zip(names, args))
        for k, v in kw.items():
            if k not in vals:
                raise TypeError("%s has no field %r" % (type(self).__name__, k))
            vals[k] = v
        for n in names:
            object.__setattr__(self, n, vals[n])

    def __setattr__(self, name, value):
        raise AttributeError("%s is frozen" % type(self).__name__)

    def _values(self):
        return tuple(getattr(self, n) for n, _ in self.FIELDS)

    def __eq__(self, other):
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self):
        return hash(self._values())

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % (n, getattr(self, n)) for n, _ in self.FIELDS))


class TrimOptions(_Options):
    """MAXLEN | MINID [= | ~] threshold [LIMIT n] [KEEPREF | DELREF | ACKED]."""
    __slots__ = ("strategy", "threshold", "approx", "limit", "policy")
    FIELDS = (
        ("strategy", None),  # "maxlen" or "minid"
        ("threshold", None),  # int for MAXLEN, (ms, seq) for MINID
        ("approx", False),  # "~": whole nodes only, at most ``limit`` entries
        ("limit", 0),  # 0: no limit
        ("policy", KEEPREF),  # what happens to PEL references of trimmed entries
    )


class AddOptions(_Options):
    """XADD's options, all but the fields."""
    __slots__ = ("id", "seq_given", "nomkstream", "trim", "policy", "idmp_pid", "idmp_iid")
    FIELDS = (
        ("id", None),  # (ms, seq) for an explicit ID, None for "*"
        ("seq_given", True),  # False for "<ms>-*"
        ("nomkstream", False),
        ("trim", None),  # TrimOptions or None
        ("policy", KEEPREF),  # reference policy (also used by ``trim``)
        ("idmp_pid", None),  # producer id (bytes) for IDMP / IDMPAUTO
        ("idmp_iid", None),  # idempotent id (bytes); None with IDMPAUTO
    )


class ReadOptions(_Options):
    """XREAD / XREADGROUP, parsed."""
    __slots__ = ("keys", "ids", "count", "block", "maxcount", "maxsize", "group", "consumer", "noack", "claim")
    FIELDS = (
        ("keys", None),  # stream names
        ("ids", None),  # per stream: (ms, seq), "$", "+" or ">"
        ("count", 0),  # per stream, 0: no limit
        ("block", None),  # None: no BLOCK; else milliseconds (0: forever)
        ("maxcount", 0),  # total over all streams, 0: no limit
        ("maxsize", 0),  # soft cap on reply bytes, 0: no limit
        ("group", None),  # XREADGROUP: group name
        ("consumer", None),  # XREADGROUP: consumer name
        ("noack", False),
        ("claim", None),  # XREADGROUP CLAIM min-idle-time (ms) or None
    )


class ClaimOptions(_Options):
    """XCLAIM's options."""
    __slots__ = ("idle", "time", "retrycount", "force", "justid", "lastid")
    FIELDS = (
        ("idle", None),  # IDLE ms, or None
        ("time", None),  # TIME unix-ms, or None
        ("retrycount", None),
        ("force", False),
        ("justid", False),
        ("lastid", None),  # (ms, seq) or None
    )


class PendingOptions(_Options):
    """XPENDING's extended form."""
    __slots__ = ("start", "end", "count", "consumer", "min_idle")
    FIELDS = (
        ("start", (0, 0)),
        ("end", (0, 0)),
        ("count", 0),
        ("consumer", None),
        ("min_idle", 0),
    )


class NackOptions(_Options):
    """XNACK."""
    __slots__ = ("mode", "ids", "retrycount", "force")
    FIELDS = (
        ("mode", "fail"),  # "silent", "fail" or "fatal"
        ("ids", ()),
        ("retrycount", None),
        ("force", False),
    )
