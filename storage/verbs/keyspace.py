"""Keyspace verbs a log needs: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME.
Every key is a stream.  Functions of ``p`` (storage.parts.Parts).

Keys iterate in name-key order (the ``keys`` database).  A SCAN cursor
is 1 + the first 8 bytes of the next name key, read as a big-endian
number: resuming seeks there, so a key present for the whole scan is
never missed; a page never ends inside a run of keys sharing those 8
bytes, so the cursor always moves forward.
"""
from storage import errors
from storage.codec import scan_cursor, scan_start
from storage.glob import match
from storage.verbs.groups import drop_group


def delete_keys(p, names):
    """DEL: delete streams with their entries, groups and IDMP history."""
    n = 0
    for name in names:
        m = p.streams.get(name)
        if m is None:
            continue
        drop_stream(p, m)
        p.streams.forget(name)
        n += 1
    return n


def drop_stream(p, m):
    """Remove every entry, group and IDMP record of stream ``m``."""
    p.log.drop(m)
    p.idmp.drop(m)
    for g in p.groups.list(m):
        drop_group(p, g)


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
        delete_keys(p, [dst])
    p.streams.forget(src)
    p.streams.adopt(dst, m)

