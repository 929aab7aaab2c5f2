"""Stream IDs: ``<ms>-<seq>``, two unsigned 64-bit integers.

In the engine an ID is a tuple ``(ms, seq)``; tuples compare exactly as
Redis compares IDs.  This module turns user text into IDs with Redis's
own rules (``streamGenericParseIDOrReply`` in t_stream.c), formats IDs
back, and does the increment / decrement used by exclusive ranges.
"""
from storage import errors

U64 = (1 << 64) - 1
MIN_ID = (0, 0)
MAX_ID = (U64, U64)

_SPACE = b" \t\n\v\f\r"
_DIGITS = b"0123456789"


def string2ull(s):
    """Parse an unsigned 64-bit integer the way Redis's string2ull does.

    First the strict ``string2ll`` form (no sign other than '-', no leading
    zeros, no spaces); a negative result is rejected.  If that fails, the
    ``strtoull`` fallback: leading white space, an optional sign (a '-'
    wraps around, as C does), decimal digits to the end.  Returns the
    value or None.
    """
    if not s:
        return None
    if s.isdigit() and (s[0] != 48 or len(s) == 1):  # 48 == ord('0')
        v = int(s)
        return v if v <= U64 else None
    if s[0] == 45 and len(s) > 1 and s[1:].isdigit() and s[1] != 48 and int(s[1:]) <= 1 << 63:
        return None  # a negative number string2ll accepts: rejected
    # strtoull fallback
    i = 0
    n = len(s)
    while i < n and s[i] in _SPACE:
        i += 1
    neg = False
    if i < n and s[i] in b"+-":
        neg = s[i] == 45
        i += 1
    digits = s[i:]
    if not digits or not digits.isdigit():
        return None
    v = int(digits)
    if v > U64:
        return None
    return ((-v) & U64) if neg else v


def parse_id(s, missing_seq=0, strict=False):
    """Parse an ID argument.  ``-`` and ``+`` are the smallest and largest
    IDs unless ``strict``.  A bare ``<ms>`` takes ``missing_seq``.
    Raises the Redis "Invalid stream ID" error."""
    if len(s) > 127:
        raise errors.invalid_id()
    ms_text, dash, seq_text = s.partition(b"-")
    if dash and ms_text.isdigit() and seq_text.isdigit():     # the usual <ms>-<seq>: string2ull of digits
        ms, seq = int(ms_text), int(seq_text)
        if ms > U64 or seq > U64:
            raise errors.invalid_id()
        return (ms, seq)
    if b"\x00" in s:  # Redis reads the argument as a C string
        s = s[:s.index(b"\x00")]
    if s == b"-" or s == b"+":
        if strict:
            raise errors.invalid_id()
        return MIN_ID if s == b"-" else MAX_ID
    dash = s.find(b"-")
    if dash < 0:
        ms = string2ull(s)
        if ms is None:
            raise errors.invalid_id()
        return (ms, missing_seq)
    ms = string2ull(s[:dash])
    seq = string2ull(s[dash + 1:])
    if ms is None or seq is None:
        raise errors.invalid_id()
    return (ms, seq)


def parse_add_id(s):
    """Parse XADD's ID: ``<ms>-<seq>``, ``<ms>-*`` or ``<ms>`` (strict).
    Returns ``(id, seq_given)``; for ``<ms>-*`` the seq is 0 and not given."""
    if len(s) <= 127 and b"\x00" in s:
        s = s[:s.index(b"\x00")]
    if s.endswith(b"-*") and len(s) > 2:
        ms = string2ull(s[:-2]) if len(s) <= 127 else None
        if ms is None or s.count(b"-") != 1:
            raise errors.invalid_id()
        return (ms, 0), False
    return parse_id(s, 0, strict=True), True


def parse_range_id(s, missing_seq, start):
    """An XRANGE bound: ``-``, ``+``, an ID, or ``(ID`` for an exclusive
    bound, which is turned into the next (start) or previous (end) ID."""
    if len(s) > 1 and s[0] == 40:  # '('
        i = parse_id(s[1:], missing_seq, strict=True)
        if start:
            if i == MAX_ID:
                raise errors.invalid_start()
            return incr(i)
        if i == MIN_ID:
            raise errors.invalid_end()
        return decr(i)
    return parse_id(s, missing_seq)


def incr(i):
    """The ID right after ``i`` (caller makes sure ``i`` is not the maximum)."""
    ms, seq = i
    if seq == U64:
        return (ms + 1, 0)
    return (ms, seq + 1)


def decr(i):
    """The ID right before ``i`` (caller makes sure ``i`` is not 0-0)."""
    ms, seq = i
    if seq == 0:
        return (ms - 1, U64)
    return (ms, seq - 1)


def fmt(i):
    """``(ms, seq)`` -> ``b"ms-seq"``."""
    return b"%d-%d" % i
