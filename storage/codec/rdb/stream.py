"""The stream value (RDB_TYPE_STREAM_LISTPACKS, _2, _3): its nodes read
as events and written from a stream.
"""

from storage.codec.keys import listpack_int
from storage.codec.rdb.base import (
    _I64_MAX,
    _ID,
    _U64,
    RDB_LISTPACK_MAX,
    RDB_STREAM_TYPES,
    RDB_TYPE_STREAM_LISTPACKS_2,
    RDB_TYPE_STREAM_LISTPACKS_3,
    STREAM_ITEM_FLAG_DELETED,
    STREAM_ITEM_FLAG_SAMEFIELDS,
    RdbError,
    rdb_len,
    rdb_ms_time,
    rdb_raw_id,
    rdb_string,
)
from storage.codec.rdb.listpack import _lp_head, _lp_next, _lp_skip, rdb_listpack

# ============================================================ stream values

def _lp_integer(v):
    """lpGetIntegerIfValid: an integer element, or a string holding one."""
    if type(v) is int:
        return v
    i = listpack_int(v)
    if i is None:
        raise RdbError("a stream listpack holds a string where an integer belongs")
    return i


def _text(v):
    return v if type(v) is not int else str(v).encode()


def _add_delta(a, d):
    return (a + d) % _U64


def rdb_stream_node(master, blob):
    """One listpack node of a stream whose radix-tree key is ``master``:
    (live entries [(ID, fields)], live count, deleted count, body bytes
    (the listpack without its two count elements), ID of its last entry,
    deleted or not, master field names).  Checks the layout as
    streamValidateListpackIntegrity does (deep), that the counts agree
    with the entries, and that IDs ascend from the master ID -- all of it
    here, walking the listpack in place.  The entries are a
    ``RdbNodeEntries``: a sequence that walks the listpack again each time
    it is iterated, one entry at a time (the node's elements are never
    all objects at once)."""
    count = _lp_head(blob)
    end = len(blob) - 1
    if end <= 6:
        raise RdbError("stream listpack without a master entry")
    live, p = _lp_next(blob, 6, end)
    if p >= end:
        raise RdbError("stream listpack without a master entry")
    deleted, p = _lp_next(blob, p, end)
    body = len(blob) - (p - 6)
    if p >= end:
        raise RdbError("stream listpack without a master entry")
    nf, p = _lp_next(blob, p, end)
    live, deleted, nf = _lp_integer(live), _lp_integer(deleted), _lp_integer(nf)
    if live < 0 or deleted < 0 or nf < 0 or (end - p) // 2 <= nf:      # an element is at least 2 bytes
        raise RdbError("bad stream listpack master entry")
    names = []
    for _ in range(nf):
        v, p = _lp_next(blob, p, end)
        names.append(_text(v))
    if p >= end:
        raise RdbError("bad stream listpack master entry")
    v, p = _lp_next(blob, p, end)
    if _lp_integer(v) != 0:
        raise RdbError("stream listpack master entry without its terminator")
    first = p
    elements = 4 + nf
    seen_live = seen_deleted = 0
    last = prev_live = None
    mms, mseq = master
    for _ in range(live + deleted):
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            flags = b
            p += 2
        else:
            flags, p = _lp_next(blob, p, end)
        if type(flags) is not int:
            flags = _lp_integer(flags)
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            d = b
            p += 2
        else:
            d, p = _lp_next(blob, p, end)
        ms = (mms + (d if type(d) is int else _lp_integer(d))) % _U64
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            d = b
            p += 2
        else:
            d, p = _lp_next(blob, p, end)
        i = (ms, (mseq + (d if type(d) is int else _lp_integer(d))) % _U64)
        if flags & STREAM_ITEM_FLAG_SAMEFIELDS:
            n = nf
            want = n + 3
        else:
            if p >= end:
                raise RdbError("stream listpack ends inside an entry")
            n, p = _lp_next(blob, p, end)
            n = _lp_integer(n)
            if n < 0 or (end - p) // 2 <= 2 * n:
                raise RdbError("stream listpack ends inside an entry")
            n *= 2
            want = n + 4
            elements += 1
        for _ in range(n):
            if p >= end:
                raise RdbError("stream listpack ends inside an entry")
            if blob[p] < 0x80 and p + 1 < end and blob[p + 1] == 1:
                p += 2
            else:
                p = _lp_skip(blob, p, end)
        if p >= end:
            raise RdbError("stream listpack ends inside an entry")
        b = blob[p]
        if b < 0x80 and p + 1 < end and blob[p + 1] == 1:       # small integers: inline
            v = b
            p += 2
        else:
            v, p = _lp_next(blob, p, end)
        if (v if type(v) is int else _lp_integer(v)) != want:
            raise RdbError("stream listpack entry with a wrong element count")
        elements += n + 4
        if i < master:
            raise RdbError("stream listpack entry before its node's master ID")
        last = i
        if flags & STREAM_ITEM_FLAG_DELETED:
            seen_deleted += 1
            continue
        if prev_live is not None and i <= prev_live:
            raise RdbError("stream listpack entries out of order")
        prev_live = i
        seen_live += 1
    if p != end:
        raise RdbError("stream listpack holds more than its entries")
    if count != 65535 and count != elements:
        raise RdbError("listpack header says %d elements, it has %d" % (count, elements))
    if seen_live != live or seen_deleted != deleted:
        raise RdbError("stream listpack counts do not match its entries")
    if last is None:
        last = master
    fixed = tuple(names)
    return RdbNodeEntries(master, blob, first, live + deleted, live, fixed), live, deleted, body, last, fixed


class RdbNodeEntries:
    """The live entries [(ID, fields)] of a checked stream node, read from
    its listpack as they are iterated (``rdb_stream_node``).  Compares
    equal to the list of them."""

    __slots__ = ("master", "blob", "start", "total", "live", "names")

    def __init__(self, master, blob, start, total, live, names):
        self.master, self.blob, self.start, self.total, self.live, self.names = master, blob, start, total, live, names

    def __len__(self):
        return self.live

    def __iter__(self):
        blob, p, names = self.blob, self.start, self.names
        end = len(blob) - 1
        mms, mseq = self.master
        nxt = _lp_next
        nf = len(names)
        for _ in range(self.total):
            flags, p = nxt(blob, p, end)
            flags = _lp_integer(flags)
            d, p = nxt(blob, p, end)
            ms = (mms + _lp_integer(d)) % _U64
            d, p = nxt(blob, p, end)
            i = (ms, (mseq + _lp_integer(d)) % _U64)
            if flags & STREAM_ITEM_FLAG_DELETED:
                n = nf if flags & STREAM_ITEM_FLAG_SAMEFIELDS else 2 * _lp_integer(nxt(blob, p, end)[0])
                if not flags & STREAM_ITEM_FLAG_SAMEFIELDS:
                    p = _lp_skip(blob, p, end)
                for _ in range(n + 1):
                    if blob[p] < 0x80:
                        p += 2
                    else:
                        p = _lp_skip(blob, p, end)
                continue
            if flags & STREAM_ITEM_FLAG_SAMEFIELDS:
                fields: list[bytes | None] = [None] * (2 * nf)
                fields[0::2] = names
                for k in range(1, 2 * nf, 2):
                    v, p = nxt(blob, p, end)
                    fields[k] = v if type(v) is not int else str(v).encode()
            else:
                n, p = nxt(blob, p, end)
                fields = []
                for _ in range(2 * _lp_integer(n)):
                    v, p = nxt(blob, p, end)
                    fields.append(v if type(v) is not int else str(v).encode())
            p = _lp_skip(blob, p, end)
            yield i, fields

    def __getitem__(self, k):
        return list(self)[k]

    def __eq__(self, other):
        if isinstance(other, (list, tuple, RdbNodeEntries)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self):
        return repr(list(self))


def rdb_stream_events(r, rdbtype):
    """The value of a stream (``rdbtype`` 15, 19 or 21) read from ``r``,
    as events, lazily (one listpack node in memory at a time):

      ("node", master ID, entries, live, deleted, body, last ID, names)
                                              per node, in key order
      ("meta", length, last ID, first ID or None, max-deleted ID or None,
               entries-added or None)         (None: not in type 15)
      ("group", name, last ID, entries-read or None, [(ID, delivery time,
               count)])                       entries-read -1: unknown
      ("consumer", name, seen-time, active-time or None, [IDs])
                                              after its group
      ("end",)

    Checks what can be checked locally (RdbError): node keys of 16
    bytes, in ascending order with entries that do not overlap; the
    PEL's IDs unique; every consumer's IDs in its group's PEL, each
    owned once and every PEL entry owned."""
    if rdbtype not in RDB_STREAM_TYPES:
        raise RdbError("RDB type %d is not a stream" % rdbtype)
    nodes = r.length()
    prev: tuple | None = None       # (master ID, last ID) of the node before
    for _ in range(nodes):
        key = r.string(limit=16)
        if len(key) != 16:
            raise RdbError("stream node key entry is not the size of a stream ID")
        master = _ID.unpack(key)
        blob = r.string(limit=RDB_LISTPACK_MAX)
        entries, live, deleted, body, last, names = rdb_stream_node(master, blob)
        if prev is not None and (master <= prev[0] or master <= prev[1]):
            raise RdbError("stream nodes out of order or overlapping")
        prev = master, last
        yield "node", master, entries, live, deleted, body, last, names
    length = r.length()
    last_id = (r.length(), r.length())
    first = maxdel = added = None
    if rdbtype >= RDB_TYPE_STREAM_LISTPACKS_2:
        first = (r.length(), r.length())
        maxdel = (r.length(), r.length())
        added = r.length()
    yield "meta", length, last_id, first, maxdel, added
    ngroups = r.length()
    names = set()
    for _ in range(ngroups):
        name = r.string()
        if name in names:
            raise RdbError("duplicated consumer group name")
        names.add(name)
        glast = (r.length(), r.length())
        read = None
        if rdbtype >= RDB_TYPE_STREAM_LISTPACKS_2:
            read = r.length()
            if read >= 1 << 63:
                read -= _U64               # SCG_INVALID_ENTRIES_READ (-1) saved as a uint64
        pel = {}
        for _ in range(r.length()):
            i = r.raw_id()
            t = r.ms_time()
            cnt = r.length()
            if i in pel:
                raise RdbError("duplicated global PEL entry")
            pel[i] = (t, cnt)
        owned = set()
        consumers = []
        cnames = set()
        for _ in range(r.length()):
            cname = r.string()
            if cname in cnames:
                raise RdbError("duplicate stream consumer")
            cnames.add(cname)
            seen = r.ms_time()
            active = r.ms_time() if rdbtype >= RDB_TYPE_STREAM_LISTPACKS_3 else None
            ids = []
            for _ in range(r.length()):
                i = r.raw_id()
                if i not in pel:
                    raise RdbError("consumer entry not found in group global PEL")
                if i in owned:
                    raise RdbError("duplicated consumer PEL entry")
                owned.add(i)
                ids.append(i)
            consumers.append((cname, seen, active, ids))
        if len(owned) != len(pel):
            raise RdbError("stream CG PEL entry without consumer")
        yield "group", name, glast, read, sorted((i, t, c) for i, (t, c) in pel.items())
        for c in consumers:
            yield ("consumer",) + c
    yield ("end",)


def rdb_stream_value(nodes, meta, groups, active_time=False):
    """The RDB_TYPE_STREAM_LISTPACKS_2 value (type byte first) of a stream
    -- with ``active_time``, RDB_TYPE_STREAM_LISTPACKS_3 (Redis 7.2 and
    later), which also holds each consumer's active-time:

      nodes   [(master ID, names, [(ID, fields)], deleted count, last ID)]
              (names: the master entry's field names; the deleted
              entries, whose data is gone, are written as empty
              SAMEFIELDS entries at the last ID, flagged deleted)
      meta    (length, last ID, first ID, max-deleted ID, entries-added)
      groups  [(name, last ID, entries-read, [(ID, time, count)],
               [(consumer, seen-time, [IDs], active-time)])]

    Groups and consumers are written in name order and PELs in ID order,
    as Redis's radix trees hold them."""
    kind = RDB_TYPE_STREAM_LISTPACKS_3 if active_time else RDB_TYPE_STREAM_LISTPACKS_2
    out = [bytes((kind,)), rdb_len(len(nodes))]
    for master, names, entries, deleted, last in nodes:
        out.append(rdb_string(rdb_raw_id(master)))
        out.append(rdb_string(_node_listpack(master, names, entries, deleted, last)))
    length, last_id, first, maxdel, added = meta
    for v in (length, last_id[0], last_id[1], first[0], first[1], maxdel[0], maxdel[1], added):
        out.append(rdb_len(v))
    out.append(rdb_len(len(groups)))
    for name, glast, read, pel, consumers in sorted(groups, key=lambda g: g[0]):
        out += [rdb_string(name), rdb_len(glast[0]), rdb_len(glast[1]), rdb_len(read % _U64)]
        out.append(rdb_len(len(pel)))
        for i, t, cnt in sorted(pel):
            out += [rdb_raw_id(i), rdb_ms_time(t), rdb_len(cnt)]
        out.append(rdb_len(len(consumers)))
        for cname, seen, ids, active in sorted(consumers, key=lambda c: c[0]):
            out += [rdb_string(cname), rdb_ms_time(seen)]
            if active_time:
                out.append(rdb_ms_time(active))        # -1: never active, as Redis 7.2 writes it
            out.append(rdb_len(len(ids)))
            out += [rdb_raw_id(i) for i in sorted(ids)]
    return b"".join(out)


def _delta(a, b):
    d = (a - b) % _U64
    return d - _U64 if d > _I64_MAX else d


def _node_listpack(master, names, entries, deleted, last):
    """A stream node's listpack as streamAppendItem builds it."""
    names = list(names)
    nf = len(names)
    els = [len(entries), deleted, nf]
    els += names
    els.append(0)
    mms, mseq = master
    for (ms, seq), fields in entries:
        n = len(fields) >> 1
        same = n == nf and fields[0::2] == names
        els += [STREAM_ITEM_FLAG_SAMEFIELDS if same else 0, _delta(ms, mms), _delta(seq, mseq)]
        if same:
            els += fields[1::2]
            els.append(n + 3)
        else:
            els.append(n)
            els += fields
            els.append(2 * n + 4)
    if deleted:
        tomb = [STREAM_ITEM_FLAG_DELETED | STREAM_ITEM_FLAG_SAMEFIELDS, _delta(last[0], mms),
                _delta(last[1], mseq)] + [b""] * nf + [nf + 3]
        els += tomb * deleted
    return rdb_listpack(els)
