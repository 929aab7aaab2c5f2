"""The node model: how Redis would split a stream into listpack nodes.

Redis keeps a stream as a radix tree of listpacks ("nodes").  XADD
appends to the last node until it is full, then starts a new one
(``streamAppendItem``): a node is full when its listpack's bytes plus
the new entry's field and value lengths reach ``stream-node-max-bytes``
(4096), or when it holds ``stream-node-max-entries`` (100) entries,
live and deleted ones counted together.  XDEL only flags an entry
deleted (the listpack keeps its bytes) and frees the node when its last
live entry goes; exact trimming flags entries of a partly trimmed node;
approximate trimming (``~``) frees whole nodes only.  So which entries
``XTRIM ... ~`` removes depends on where nodes begin, which depends on
the byte sizes of what was added -- and deleted -- since.

This module is the arithmetic, pure (no storage): a ``Node`` carries
what Redis's trimming and appending read from a listpack -- its master
ID (the radix tree key: the ID of the entry that opened it), live and
deleted counts, its size in bytes, the ID of its last entry (deleted or
not) and the master entry's field names -- and ``append`` / ``fits``
follow ``streamAppendItem`` with the listpack encodings of listpack.c
(``lpEncodeGetType``, ``lpEncodeIntegerGetType``, ``lpEncodeBacklen``).

Listpack layout of a node, element by element (each element is its
encoding plus a back-length of that encoding's size):

  header (6 bytes: total bytes, element count)
  master entry: live count, deleted count, field count, field names..., 0
  per entry:    flags, ms - master ms, seq - master seq,
                [field count, field names...]  (only if the names differ
                                                 from the master's)
                values... (field, value pairs if names differ),
                element count of the entry (lp-count)
  end byte (0xFF)

The counts are stored as listpack integers whose size depends on their
value, so ``body`` is the node's bytes without the two count elements
and ``lp_bytes`` adds them for the current counts.
"""
from itertools import accumulate, compress, islice, repeat
from operator import add as _plus
from operator import getitem
from operator import gt as _gt

from storage.codec.keys import listpack_int as as_int

MAX_BYTES = 4096          # stream-node-max-bytes (Redis's default)
MAX_ENTRIES = 100         # stream-node-max-entries (Redis's default)
LISTPACK_MAX_SIZE = 1 << 30   # STREAM_LISTPACK_MAX_SIZE: the byte rule's cap

_LONG_STR_SIZE = 21       # lpStringToInt64: strings this long are never integers
_EMPTY_LISTPACK = 7       # header + end byte
_U64 = 1 << 64
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


def int_len(v):
    """Encoded size of integer ``v`` in a listpack (lpEncodeIntegerGetType)."""
    if 0 <= v <= 127:
        return 1
    if -4096 <= v <= 4095:
        return 2
    if -32768 <= v <= 32767:
        return 3
    if -8388608 <= v <= 8388607:
        return 4
    if -2147483648 <= v <= 2147483647:
        return 5
    return 9


def backlen_len(n):
    """Size of the back-length of an element whose encoding is ``n`` bytes
    (lpEncodeBacklen)."""
    if n <= 127:
        return 1
    if n < 16383:
        return 2
    if n < 2097151:
        return 3
    if n < 268435455:
        return 4
    return 5


def int_size(v):
    """Bytes an integer element takes (encoding + back-length: at most 10)."""
    return int_len(v) + 1


def str_size(b):
    """Bytes a field name or value takes in a listpack (lpEncodeGetType):
    as an integer if it is one, else as a string with a 1-, 2- or 5-byte
    header."""
    n = len(b)
    if 0 < n < _LONG_STR_SIZE and 48 <= b[-1] <= 57 and (48 <= b[0] <= 57 or b[0] == 45):
        v = as_int(b)                     # digits at both ends: maybe an integer
        if v is not None:
            return int_len(v) + 1
    if n < 64:
        return n + 2                      # 1 header byte, back-length 1 (n + 1 <= 64)
    enc = n + 2 if n < 4096 else n + 5
    return enc + backlen_len(enc)


def delta(a, b):
    """``a - b`` as Redis stores an ID part difference: uint64 subtraction
    read as an int64 (the seq part goes negative when ms grew)."""
    d = (a - b) % _U64
    return d - _U64 if d > _I64_MAX else d


def element_bytes(fields):
    """Sum of the field and value lengths (``totelelen``: what the byte
    rule adds to the listpack's size)."""
    return sum(map(len, fields))


class Node:
    """One listpack node of a stream (see the module docstring)."""

    __slots__ = ("master",    # (ms, seq): the radix tree key, the ID that opened the node
                 "live",      # entries not deleted
                 "deleted",   # entries flagged deleted (still in the listpack)
                 "body",      # listpack bytes without the two count elements
                 "last",      # (ms, seq) of the last entry in it, deleted or not
                 "names")     # the master entry's field names (a tuple of bytes)

    def __init__(self, master, live, deleted, body, last, names):
        self.master = master
        self.live = live
        self.deleted = deleted
        self.body = body
        self.last = last
        self.names = names

    def __repr__(self):
        return "Node(%r, live=%d, deleted=%d, bytes=%d, last=%r, names=%r)" % (
            self.master, self.live, self.deleted, self.lp_bytes(), self.last, self.names)

    def __eq__(self, other):
        return isinstance(other, Node) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable

    @property
    def count(self):
        """Entries in the listpack, live and deleted (the entry-count rule)."""
        return self.live + self.deleted

    def lp_bytes(self):
        """The listpack's size in bytes (``lpBytes``)."""
        live, deleted = self.live, self.deleted
        return (self.body + (2 if 0 <= live <= 127 else int_len(live) + 1)
                + (2 if 0 <= deleted <= 127 else int_len(deleted) + 1))

    def fits(self, totelelen, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
        """Whether XADD appends an entry whose fields and values have
        ``totelelen`` bytes in all to this node rather than opening a new
        one (streamAppendItem's ``new_node`` test)."""
        if max_bytes == 0 or max_bytes > LISTPACK_MAX_SIZE:
            max_bytes = LISTPACK_MAX_SIZE
        if self.lp_bytes() + totelelen >= max_bytes:
            return False
        return not (max_entries and self.count >= max_entries)

    def append(self, i, fields):
        """Add entry ``i`` (fields: the flat field/value list) at the end."""
        self.body += entry_size(self.master, self.names, i, fields)
        self.live += 1
        self.last = i

    def mark_deleted(self, n=1):
        """Flag ``n`` live entries deleted (a flag's size never changes)."""
        self.live -= n
        self.deleted += n


def entry_size(master, names, i, fields):
    """Bytes entry ``i`` adds to a node with master ID ``master`` and master
    field names ``names``."""
    k = len(fields) >> 1
    d = i[0] - master[0]
    size = 2 + (2 if 0 <= d <= 127 else int_size(delta(i[0], master[0])))   # flags, ms delta
    d = i[1] - master[1]
    size += 2 if 0 <= d <= 127 else int_size(delta(i[1], master[1]))        # seq delta
    if len(names) == k and tuple(fields[0::2]) == names:
        lp_count = k + 3
        size += sum(map(str_size, fields[1::2]))
    else:
        lp_count = 2 * k + 4
        size += int_size(k) + sum(map(str_size, fields))
    return size + (2 if lp_count <= 127 else int_size(lp_count))


def open_node(i, fields):
    """The node XADD creates for entry ``i``: the master entry (its field
    names) and the entry itself."""
    names = tuple(fields[0::2])
    body = (_EMPTY_LISTPACK + int_size(len(names)) + sum(map(str_size, names))
            + int_size(0))                          # master entry terminator
    node = Node(i, 0, 0, body, i, names)
    node.append(i, fields)
    return node


def add(tail, i, fields, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
    """XADD of entry ``i`` to a stream whose last node is ``tail`` (None:
    no node).  Returns ``(node, opened)``: the node the entry went to, and
    whether it is a new one (``tail`` is then complete)."""
    if tail is not None and tail.fits(element_bytes(fields), max_bytes, max_entries):
        tail.append(i, fields)
        return tail, False
    return open_node(i, fields), True


def build(entries, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
    """The nodes of a stream whose ``(ID, fields)`` entries were added in
    this order and never deleted."""
    nodes = []
    tail = None
    for i, fields in entries:
        tail, opened = add(tail, i, fields, max_bytes, max_entries)
        if opened:
            nodes.append(tail)
    return nodes


def extend(tail, items, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
    """XADD of many ``(ID, fields)`` entries, in order, to a stream whose
    last node is ``tail`` (None: no node): the same nodes as ``add`` one
    by one, computed a run of entries with one field-name list at a time
    (``Extender.run``), so that the bulk paths can afford to keep the
    node table current.  ``items`` may be an iterator (read in chunks).
    Returns the nodes touched, in order: ``tail`` first if an entry went
    to it, the last one the new tail."""
    return extend_runs(tail, runs(items), max_bytes, max_entries)


def extend_runs(tail, runs, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
    """``extend`` of entries given as ``(ids, names, columns)`` runs (as
    ``runs`` makes them, or storage.parts.shapes from joined text)."""
    x = Extender(tail, max_bytes, max_entries)
    for r in runs:
        x.run(*r)
    return x.touched


def runs(items):
    """``(ids, names, columns)`` of each run of consecutive ``(ID,
    fields)`` items whose field names are the same list (``columns[c][j]``:
    the value of ``names[c]`` in entry ``ids[j]``), as ``Extender.run``
    takes them; an iterator is read ``_CHUNK`` items at a time."""
    it = iter(items)
    while True:
        chunk = list(islice(it, _CHUNK))
        if not chunk:
            return
        n = len(chunk)
        start = 0
        while start < n:
            first = chunk[start][1]
            names = first[0::2]
            end = start + 1
            while end < n and chunk[end][1][0::2] == names:
                end += 1
            run = chunk[start:end]
            yield [i for i, _ in run], names, [[f[c] for _, f in run] for c in range(1, len(first), 2)]
            start = end


_CHUNK = 10000                # extend: entries read from an iterator at a time
_SMALL = 16                   # columns shorter than this are sized value by value
# int_size of a canonical integer of d (1..18) digits: _INT_SIZE2[2 * d]
# if its digits are not above _INT_STEP[d], else _INT_SIZE2[2 * d + 1]
# (int_len's steps 127, 4095, 32767, 8388607, 2147483647 fall at 3, 4, 5,
# 7 and 10 digits; _INT_STEP of other lengths is no number's)
_INT_STEP = tuple({3: b"127", 4: b"4095", 5: b"32767", 7: b"8388607", 10: b"2147483647"}.get(d, b"9" * d)
                  for d in range(19))
_INT_SIZE2 = tuple(int_size(int(_INT_STEP[d] or 0) + up) for d in range(19) for up in (0, 1))


def _string_size(n):
    """str_size of an ``n``-byte value that is not an integer."""
    if n < 64:
        return n + 2
    enc = n + 2 if n < 4096 else n + 5
    return enc + backlen_len(enc)


def column_sizes(col):
    """(``str_size`` of each value, ``len`` of each value) of a column
    of byte strings, in a few C-level passes: the column is read twice
    (joined, and each value's length) and the rest is scans of the
    joined bytes.  A column without a value that begins with a digit or
    '-' holds no integer; a column of canonical integers below 10**18
    is sized by each value's length and one comparison (_INT_STEP);
    other columns size the values that may be integers one by one."""
    n = len(col)
    if n < _SMALL:
        return list(map(str_size, col)), list(map(len, col))
    first = col[0]
    if col[-1] == first and col[n >> 1] == first and col.count(first) == n:
        return [str_size(first)] * n, [len(first)] * n    # one value throughout ("action click")
    try:
        if not (b"0" <= first[:1] <= b"9" or first[:1] == b"-") and min(col) >= b":":
            # every value begins after '9' (and '-'): no integer (not
            # asked when the first value begins as an integer does)
            lens = list(map(len, col))
            return ([v + 2 for v in lens] if max(lens) < 64 else list(map(_string_size, lens))), lens
        joined = b"\n" + b"\n".join(col)            # every value follows a newline
    except TypeError:                 # not all bytes (a bytearray, a memoryview)
        return list(map(str_size, col)), list(map(len, col))
    lens = list(map(len, col))
    longest = max(lens)
    if joined.count(b"\n") != n:                     # a value holds a newline
        return list(map(str_size, col)), lens
    if not any(s in joined for s in _INT_STARTS):
        return ([v + 2 for v in lens] if longest < 64 else list(map(_string_size, lens))), lens
    if (longest <= 18 and min(lens) and not joined.translate(None, b"0123456789\n")
            and _no_leading_zero(joined)):
        # digits only, no leading zero (every value beginning with 0 is
        # "0"): an integer whose size is its length's (_INT_SIZE2), one
        # step up past _INT_STEP[length]
        return list(map(getitem, repeat(_INT_SIZE2), map(_plus, map(_plus, lens, lens),
                        map(_gt, col, map(getitem, repeat(_INT_STEP), lens))))), lens
    sizes = [v + 2 for v in lens] if longest < 64 else list(map(_string_size, lens))
    for j in compress(range(n), map(bytes.isdigit, col)):
        sizes[j] = str_size(col[j])
    if b"\n-" in joined:
        for j in compress(range(n), map(bytes.startswith, col, repeat(b"-"))):
            sizes[j] = str_size(col[j])
    return sizes, lens


_DIGITS_TO_1 = bytes.maketrans(b"23456789", b"11111111")


def _no_leading_zero(joined):
    """Whether no value of ``joined`` (digits only, each after a
    newline) begins with a 0 followed by another digit."""
    ones = joined.translate(_DIGITS_TO_1)
    return b"\n00" not in ones and b"\n01" not in ones


_INT_STARTS = tuple(b"\n" + bytes((c,)) for c in b"0123456789-")    # a value that may be an integer


class Extender:
    """``extend``'s state: the last node, its counts and size in locals
    while a run is added, and the nodes touched so far."""

    __slots__ = ("node", "max_bytes", "max_entries", "touched")

    def __init__(self, tail, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
        if max_bytes == 0 or max_bytes > LISTPACK_MAX_SIZE:
            max_bytes = LISTPACK_MAX_SIZE
        self.node = tail
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self.touched: list[Node] = []

    def run(self, ids, names, cols):
        """Append entries ``ids[j]`` whose fields are ``names[c]``,
        ``cols[c][j]`` (one column of values per name) -- the sizes of
        ``entry_size``/``open_node``, column by column (``column_sizes``),
        then one pass deciding where nodes begin (``Node.fits``); for
        IDs of one millisecond with consecutive sequence numbers (a bulk
        ingest), where each node opened here ends is found in C-level
        passes (``_fill``)."""
        n = len(ids)
        if not n:
            return
        names = tuple(names)
        k = len(names)
        if k:
            vs, tl = column_sizes(cols[0])
            for col in cols[1:]:
                a, b = column_sizes(col)
                vs = list(map(_plus, vs, a))
                tl = list(map(_plus, tl, b))
        else:
            vs = tl = [0] * n
        names_len = sum(map(len, names))
        names_size = sum(map(str_size, names))
        lpc_same = 2 if k + 3 <= 127 else int_size(k + 3)
        lpc_other = int_size(k) + names_size + (2 if 2 * k + 4 <= 127 else int_size(2 * k + 4))
        open_body = _EMPTY_LISTPACK + int_size(k) + names_size + int_size(0)
        max_bytes, max_entries, touched = self.max_bytes, self.max_entries, self.touched
        limit = max_bytes - names_len        # lp + totelelen < max_bytes, totelelen = names_len + tl[j]
        fast = (n >= _SMALL and 0 < max_entries <= 128 and ids[0][0] == ids[-1][0]
                and ids[-1][1] - ids[0][1] == n - 1)
        node = self.node
        if node is not None:
            live, deleted, body, last = node.live, node.deleted, node.body, node.last
            mms, mseq = node.master
            extra = lpc_same if tuple(node.names) == names else lpc_other
            fresh = not touched or touched[-1] is not node
        for j in range(n):
            i = ids[j]
            if node is not None:
                if (body + (2 if live <= 127 else int_len(live) + 1) + (2 if deleted <= 127 else int_len(deleted) + 1)
                        + tl[j] < limit and not (max_entries and live + deleted >= max_entries)):
                    ms, seq = i
                    d = ms - mms
                    e = seq - mseq
                    body += ((2 if 0 <= d <= 127 else int_size(delta(ms, mms)))
                             + (2 if 0 <= e <= 127 else int_size(delta(seq, mseq))) + 2 + vs[j] + extra)
                    live += 1
                    last = i
                    if fresh:
                        touched.append(node)
                        fresh = False
                    continue
                node.live, node.deleted, node.body, node.last = live, deleted, body, last
            if fast:
                self.node = self._fill(ids, j, names, vs, tl, open_body + lpc_same, 6 + lpc_same, limit)
                return
            node = Node(i, 1, 0, 0, i, names)
            touched.append(node)
            mms, mseq = i
            live, deleted, last, extra, fresh = 1, 0, i, lpc_same, False
            body = open_body + 6 + vs[j] + lpc_same          # flags, ms and seq deltas 0: 2 bytes each
        node.live, node.deleted, node.body, node.last = live, deleted, body, last
        self.node = node

    def _fill(self, ids, j, names, vs, tl, opening, step, limit):
        """``run``'s nodes from entry ``j`` on, each opened here, when
        the IDs are one millisecond's consecutive sequence numbers and a
        node holds at most 128 entries: then every entry after a node's
        first adds ``step + vs[i]`` bytes (flags, ms delta 0 and a seq
        delta below 128: 2 bytes each; its lp-count) and the counts take
        2 bytes each, so entry i joins the node opened at j0 while
        ``P[i] + tl[i] < limit - body(j0) - 4 + P[j0 + 1]`` (``P``: the
        sums of those sizes) and it is not the max_entries-th: one
        C-level comparison per entry.  Returns the last node."""
        cap, touched = self.max_entries, self.touched
        n = len(ids)
        sums = [0]
        sums += accumulate(map(_plus, vs, repeat(step)))
        need = list(map(_plus, sums, tl))
        node = None
        while j < n:
            body = opening + 6 + vs[j]                # the node's listpack with entry j in it
            bound = limit - body - 4 + sums[j + 1]
            ahead = need[j + 1:j + cap]
            if ahead and max(ahead) >= bound:         # the byte rule ends the node before the count
                end = j + 1 + list(map(bound.__le__, ahead)).index(True)
            else:
                end = j + 1 + len(ahead)
            node = Node(ids[j], end - j, 0, body + sums[end] - sums[j + 1], ids[end - 1], names)
            touched.append(node)
            j = end
        return node
