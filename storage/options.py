"""Parsed command options: what a parser hands to a domain verb.

Frozen, so a verb cannot change what the user asked for.  IDs are
``(ms, seq)`` tuples; names and field values are bytes.
"""
from dataclasses import dataclass, field

KEEPREF, DELREF, ACKED = "keepref", "delref", "acked"


@dataclass(frozen=True)
class TrimOptions:
    """MAXLEN | MINID [= | ~] threshold [LIMIT n] [KEEPREF | DELREF | ACKED]."""
    strategy: str                 # "maxlen" or "minid"
    threshold: object             # int for MAXLEN, (ms, seq) for MINID
    approx: bool = False          # "~": whole nodes only, at most ``limit`` entries
    limit: int = 0                # 0: no limit
    policy: str = KEEPREF         # what happens to PEL references of trimmed entries


@dataclass(frozen=True)
class AddOptions:
    """XADD's options, all but the fields."""
    id: object = None             # (ms, seq) for an explicit ID, None for "*"
    seq_given: bool = True        # False for "<ms>-*"
    nomkstream: bool = False
    trim: object = None           # TrimOptions or None
    policy: str = KEEPREF         # reference policy (also used by ``trim``)
    idmp_pid: object = None       # producer id (bytes) for IDMP / IDMPAUTO
    idmp_iid: object = None       # idempotent id (bytes); None with IDMPAUTO


@dataclass(frozen=True)
class ReadOptions:
    """XREAD / XREADGROUP, parsed."""
    keys: tuple                   # stream names
    ids: tuple                    # per stream: (ms, seq), "$", "+" or ">"
    count: int = 0                # per stream, 0: no limit
    block: object = None          # None: no BLOCK; else milliseconds (0: forever)
    maxcount: int = 0             # total over all streams, 0: no limit
    maxsize: int = 0              # soft cap on reply bytes, 0: no limit
    group: object = None          # XREADGROUP: group name
    consumer: object = None       # XREADGROUP: consumer name
    noack: bool = False
    claim: object = None          # XREADGROUP CLAIM min-idle-time (ms) or None


@dataclass(frozen=True)
class ClaimOptions:
    """XCLAIM's options."""
    idle: object = None           # IDLE ms, or None
    time: object = None           # TIME unix-ms, or None
    retrycount: object = None
    force: bool = False
    justid: bool = False
    lastid: object = None         # (ms, seq) or None


@dataclass(frozen=True)
class PendingOptions:
    """XPENDING's extended form."""
    start: tuple = (0, 0)
    end: tuple = (0, 0)
    count: int = 0
    consumer: object = None
    min_idle: int = 0


@dataclass(frozen=True)
class NackOptions:
    """XNACK."""
    mode: str = "fail"            # "silent", "fail" or "fatal"
    ids: tuple = field(default_factory=tuple)
    retrycount: object = None
    force: bool = False
