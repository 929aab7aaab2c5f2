"""Parsed command options: what a parser (xstream_cli/commands/) hands to
an engine verb.  A parser never touches the store; everything it can
decide from the arguments alone is here.

Frozen, so a verb cannot change what the user asked for.  IDs are
``(ms, seq)`` tuples; names and field values are bytes.

Deferred errors.  Redis checks some arguments only after looking up the
key (or the group): ``XINFO STREAM nokey BADOPT`` answers "no such key",
not a syntax error.  A parser that meets such an error does not raise
it: it stores it in the options' ``deferred`` field, and the verb raises
it at the point where Redis would (``raise_deferred``), after its own
lookups.  (A small frozen-record base instead of dataclasses: this
module is on every command's start-up path, and dataclasses imports
inspect.)
"""

KEEPREF, DELREF, ACKED = "keepref", "delref", "acked"


class _Options:
    """Frozen record: subclasses list ``FIELDS`` as (name, default)."""
    __slots__ = ()
    FIELDS: tuple = ()

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

    def replace(self, **kw):
        """A copy with some fields changed."""
        vals = dict(zip((n for n, _ in self.FIELDS), self._values()))
        vals.update(kw)
        return type(self)(**vals)

    def __eq__(self, other):
        return type(other) is type(self) and other._values() == self._values()

    def __hash__(self):
        return hash(self._values())

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % (n, getattr(self, n)) for n, _ in self.FIELDS))


def raise_deferred(opts):
    """Raise the error a parser deferred to this point, if any."""
    err = getattr(opts, "deferred", None)
    if err is not None:
        raise err


class TrimOptions(_Options):
    """MAXLEN | MINID [= | ~] threshold [LIMIT n] [KEEPREF | DELREF | ACKED]."""
    __slots__ = ("strategy", "threshold", "approx", "limit", "policy")
    FIELDS = (
        ("strategy", None),   # "maxlen" or "minid"
        ("threshold", None),  # int for MAXLEN, (ms, seq) for MINID
        ("approx", False),    # "~": whole nodes only, at most ``limit`` entries
        ("limit", 0),         # 0: no limit; None with ``approx``: 100 x stream-node-max-entries
        ("policy", KEEPREF),  # what happens to PEL references of trimmed entries
    )


class AddOptions(_Options):
    """XADD's options, all but the fields."""
    __slots__ = ("id", "seq_given", "nomkstream", "trim", "policy", "idmp_pid", "idmp_iid")
    FIELDS = (
        ("id", None),          # (ms, seq) for an explicit ID, None for "*"
        ("seq_given", True),   # False for "<ms>-*"
        ("nomkstream", False),
        ("trim", None),        # TrimOptions or None
        ("policy", KEEPREF),   # reference policy (also used by ``trim``)
        ("idmp_pid", None),    # producer id (bytes) for IDMP / IDMPAUTO
        ("idmp_iid", None),    # idempotent id (bytes); None with IDMPAUTO
    )


class RangeOptions(_Options):
    """XRANGE / XREVRANGE."""
    __slots__ = ("start", "end", "count", "rev")
    FIELDS = (
        ("start", (0, 0)),     # inclusive lower bound
        ("end", (0, 0)),       # inclusive upper bound
        ("count", None),       # None: no COUNT; 0: a null reply for an existing key
        ("rev", False),        # XREVRANGE
    )


class IdsOptions(_Options):
    """The IDs of XDEL, XDELEX, XACK, XACKDEL, with a reference policy."""
    __slots__ = ("ids", "given", "policy", "deferred")
    FIELDS = (
        ("ids", ()),           # (ms, seq) each
        ("given", 0),          # how many IDs were given (the reply to a missing key)
        ("policy", KEEPREF),
        ("deferred", None),    # an invalid ID: raised once the key (and group) exist
    )


class SetIdOptions(_Options):
    """XSETID."""
    __slots__ = ("id", "entries_added", "max_deleted")
    FIELDS = (
        ("id", (0, 0)),
        ("entries_added", -1),  # -1: not given
        ("max_deleted", None),  # None: not given
    )


class IdmpConfigOptions(_Options):
    """XCFGSET."""
    __slots__ = ("duration", "maxsize", "deferred")
    FIELDS = (
        ("duration", None),    # IDMP-DURATION seconds, or None
        ("maxsize", None),     # IDMP-MAXSIZE, or None
        ("deferred", None),    # any option error: raised once the key exists
    )


class ReadOptions(_Options):
    """XREAD / XREADGROUP, parsed."""
    __slots__ = ("keys", "ids", "count", "block", "maxcount", "maxsize", "group", "consumer", "noack", "claim")
    FIELDS = (
        ("keys", None),        # stream names
        ("ids", None),         # per stream: (ms, seq), "$", "+" or ">", or the
                               # RedisError its ID argument gives (raised after
                               # that stream's key and group are checked)
        ("count", 0),          # per stream, 0: no limit
        ("block", None),       # None: no BLOCK; else milliseconds (0: forever)
        ("maxcount", 0),       # total over all streams, 0: no limit
        ("maxsize", 0),        # soft cap on reply bytes, 0: no limit
        ("group", None),       # XREADGROUP: group name
        ("consumer", None),    # XREADGROUP: consumer name
        ("noack", False),
        ("claim", None),       # XREADGROUP CLAIM min-idle-time (ms) or None
    )


class StreamInfoOptions(_Options):
    """XINFO STREAM key [FULL [COUNT n]]."""
    __slots__ = ("full", "count", "deferred")
    FIELDS = (
        ("full", False),
        ("count", 10),         # FULL: entries and PEL rows shown (0: all)
        ("deferred", None),    # an option error: raised once the key exists
    )


class GroupOptions(_Options):
    """XGROUP CREATE / SETID: the start ID and options."""
    __slots__ = ("start", "mkstream", "entries_read", "deferred")
    FIELDS = (
        ("start", None),       # (ms, seq) or b"$"
        ("mkstream", False),
        ("entries_read", -1),  # -1: not given (unknown)
        ("deferred", None),    # wrong arity or an invalid ID: raised after
                               # the key (and, for SETID, the group) checks
    )


class ClaimOptions(_Options):
    """XCLAIM's options."""
    __slots__ = ("min_idle", "ids", "idle", "time", "retrycount", "force", "justid", "lastid", "deferred")
    FIELDS = (
        ("min_idle", 0),
        ("ids", ()),
        ("idle", None),        # IDLE ms, or None
        ("time", None),        # TIME unix-ms, or None
        ("retrycount", None),
        ("force", False),
        ("justid", False),
        ("lastid", None),      # (ms, seq) or None
        ("deferred", None),    # any argument error: raised once the group exists
    )


class AutoClaimOptions(_Options):
    """XAUTOCLAIM's options."""
    __slots__ = ("min_idle", "start", "count", "justid")
    FIELDS = (
        ("min_idle", 0),
        ("start", (0, 0)),
        ("count", 100),
        ("justid", False),
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
    __slots__ = ("mode", "ids", "retrycount", "force", "deferred")
    FIELDS = (
        ("mode", "fail"),      # "silent", "fail" or "fatal"
        ("ids", ()),
        ("retrycount", None),
        ("force", False),
        ("deferred", None),    # any argument error: raised once the group exists
    )


# ------------------------------------------------- RESTORE (issue 26, item 7)

class RestoreOptions(_Options):
    """RESTORE's options (the key and the payload are arguments of their own)."""
    __slots__ = ("ttl", "replace", "absttl", "idletime", "freq", "deferred")
    FIELDS = (
        ("ttl", 0),            # ms: from now, or Unix ms with ``absttl``; 0: no TTL
        ("replace", False),
        ("absttl", False),
        ("idletime", None),    # IDLETIME / FREQ: checked as Redis does, then unused
        ("freq", None),        # (xs keeps no LRU / LFU data)
        ("deferred", None),    # a TTL that is not an integer: raised after the key check
    )
