"""Argument parsing shared by all command parsers: Redis's integer rules
and deferred errors.  Errors are raised through storage.errors."""
from storage import errors
from storage.errors import RedisError

LLONG_MAX = (1 << 63) - 1
LLONG_MIN = -(1 << 63)


def string2ll(s):
    """Redis ``string2ll``: optional '-', no leading zeros, no '+', no
    spaces, within a signed 64-bit integer.  Returns int or None."""
    n = len(s)
    if n == 0 or n > 20:
        return None
    if s == b"0":
        return 0
    neg = s[0] == 45
    d = s[1:] if neg else s
    if not d or not d.isdigit() or d[0] == 48:
        return None
    v = -int(d) if neg else int(d)
    if v > LLONG_MAX or v < LLONG_MIN:
        return None
    return v


def ll(s, err=None):
    """An integer argument, or the given error (default: not an integer)."""
    v = string2ll(s)
    if v is None:
        raise (err or errors.not_integer)()
    return v


class deferring:
    """``with deferring() as d:`` -- a Redis error raised in the block is
    kept in ``d.error`` instead of propagating (the block stops there).
    For the part of a grammar Redis checks only after its key lookup:
    the parser stores ``d.error`` in the options and the engine raises
    it at that point (storage.options)."""

    __slots__ = ("error",)

    def __init__(self):
        self.error = None

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None and issubclass(et, RedisError):
            self.error = ev
            return True
        return False
