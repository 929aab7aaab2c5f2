"""Keyspace verbs a log needs: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, and
key expiry (EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT, TTL, PTTL, EXPIRETIME,
PEXPIRETIME, PERSIST).  Every key is a stream.  Functions of ``p``
(storage.parts.Parts).

Keys iterate in name-key order (the ``keys`` database).  A SCAN cursor
is 1 + the first 8 bytes of the next name key, read as a big-endian
number: resuming seeks there, so a key present for the whole scan is
never missed; a page never ends inside a run of keys sharing those 8
bytes, so the cursor always moves forward.
"""
from storage import errors
from storage.codec import scan_cursor, scan_start
from storage.glob import match


def delete_keys(p, names):
    """DEL: delete streams with their entries, groups and IDMP history;
    how many existed."""
    n = drop_keys(p, names)
    p.dirty += n
    return n


def drop_keys(p, names):
    """``delete_keys`` for a verb that deletes keys as part of its own
    change (RENAME's target, EXPIRE in the past, RESTORE of an expired
    value), which counts that change itself."""
    n = 0
    for name in names:
        m = p.streams.get(name)
        if m is None:
            continue
        p.drop_stream(m, name)
        p.streams.forget(name)
        n += 1
    return n


def drop_stream(p, m, name):
    """Remove every entry, group and IDMP record of stream ``m`` (named
    ``name``) and its TTL."""
    p.drop_stream(m, name)


def exists(p, names):
    """EXISTS: how many of ``names`` exist (repeats count again)."""
    return sum(1 for name in names if p.streams.get(name) is not None)


def key_type(p, name):
    """TYPE: "stream" or "none"."""
    return "stream" if p.streams.get(name) is not None else "none"


def keys(p, pattern):
    """KEYS pattern."""
    return [name for _, name in p.streams.names() if match(pattern, name)]


def scan(p, cursor, pattern=None, count=10, type_=None):
    """SCAN: (next cursor, names).  ``type_`` filters by type name."""
    start = scan_start(cursor)
    out = []
    seen = 0
    nxt = 0
    boundary = None
    for k, name in p.streams.names(start):
        if seen >= count:
            if boundary is None:
                boundary = scan_cursor(k)
            if scan_cursor(k) != boundary:
                nxt = scan_cursor(k)
                break
        seen += 1
        if pattern is not None and not match(pattern, name):
            continue
        if type_ is not None and type_.lower() != b"stream":
            continue
        out.append(name)
    return nxt, out


def rename(p, src, dst):
    """RENAME: the stream keeps its entries and groups (they hang off its
    number, not its name); an existing ``dst`` is deleted."""
    m = p.streams.get(src)
    if m is None:
        raise errors.no_such_key()
    if src == dst:
        return
    if p.streams.get(dst) is not None:
        drop_keys(p, [dst])
    at = m.expire_at
    if at is not None:                # the TTL goes with the stream, as in Redis
        p.expiry.set(src, m, None)
    p.streams.forget(src)
    p.streams.adopt(dst, m)
    if at is not None:
        p.expiry.set(dst, m, at)
    p.dirty += 1


# ================================================================== expiry

LLONG_MAX = (1 << 63) - 1

NX, XX, GT, LT = 1, 2, 4, 8             # EXPIRE's conditions


def expire(p, name, when, relative, flag, command):
    """EXPIRE and its family: ``when`` in ms, from now (``relative``) or
    from the epoch; ``flag`` one of NX, XX, GT, LT or 0; ``command`` (its
    name) for the error.  1 if the TTL was set (or the key deleted, a time
    already past), 0 if the key is missing or the condition fails.
    Redis's expireGenericCommand, in its order."""
    base = p.now if relative else 0
    if when > LLONG_MAX - base:
        raise errors.invalid_expire_time(command)
    when += base
    m = p.streams.get(name)
    if m is None:
        return 0
    if flag:
        current = m.expire_at
        if flag & NX and current is not None:
            return 0
        if flag & XX and current is None:
            return 0
        if flag & GT and (current is None or when <= current):
            return 0
        if flag & LT and current is not None and when >= current:
            return 0
    p.dirty += 1
    if when <= p.now:
        drop_keys(p, [name])
        return 1
    p.expiry.set(name, m, when)
    return 1


def expire_time(p, name):
    """The key's expiry time (Unix ms), -1 if it has none, -2 if it does
    not exist (TTL, PTTL, EXPIRETIME, PEXPIRETIME)."""
    m = p.streams.get(name)
    if m is None:
        return -2
    return -1 if m.expire_at is None else m.expire_at


def persist(p, name):
    """PERSIST: 1 if a TTL was removed."""
    m = p.streams.get(name)
    if m is None or m.expire_at is None:
        return 0
    p.expiry.set(name, m, None)
    p.dirty += 1
    return 1


def reap_expired(p, limit):
    """Remove up to ``limit`` streams whose TTL has passed (``xs trim``;
    any writer removes a few, storage.parts.Parts.reap): how many.  Their
    data goes when the verb's parts are flushed, so in a read transaction
    this only counts them."""
    for _, name in p.expiry.due(p.now, limit):
        p.streams.get(name)
    return len(p.streams.expired)
