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
    by one, with the arithmetic inlined and the sizes of repeated values
    remembered (event data repeats its values), so that the bulk paths
    can afford to keep the node table current.  Returns the nodes touched, in order: ``tail`` first if an entry went
    to it, the last one the new tail."""
    if max_bytes == 0 or max_bytes > LISTPACK_MAX_SIZE:
        max_bytes = LISTPACK_MAX_SIZE
    touched: list[Node] = []
    node = tail
    sizes: dict[bytes, int] = {}
    size_of = sizes.get
    names = list(node.names) if node is not None else None
    for i, fields in items:
        if node is not None:
            live, deleted = node.live, node.deleted
            lp = (node.body + (2 if 0 <= live <= 127 else int_len(live) + 1)
                  + (2 if 0 <= deleted <= 127 else int_len(deleted) + 1))
            tot = sum(map(len, fields))
            if lp + tot < max_bytes and not (max_entries and live + deleted >= max_entries):
                master = node.master
                d = i[0] - master[0]
                size = 2 + (2 if 0 <= d <= 127 else int_size(delta(i[0], master[0])))
                d = i[1] - master[1]
                size += 2 if 0 <= d <= 127 else int_size(delta(i[1], master[1]))
                same = fields[0::2] == names
                k = 0
                for v in (fields[1::2] if same else fields):
                    s = size_of(v)
                    if s is None:
                        if len(sizes) > 65536:
                            sizes.clear()
                        s = sizes[v] = str_size(v)
                    k += s
                n = len(fields) >> 1
                lp_count = n + 3 if same else 2 * n + 4
                size += k + (0 if same else int_size(n)) + (2 if lp_count <= 127 else int_size(lp_count))
                node.body += size
                node.live = live + 1
                node.last = i
                if not touched:
                    touched.append(node)
                continue
        node = open_node(i, fields)
        names = list(node.names)
        touched.append(node)
    return touched
