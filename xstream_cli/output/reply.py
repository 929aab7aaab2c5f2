"""Reply values, in RESP3 terms, independent of how they are shown.

  bytes / str        bulk string
  Status(str)        simple string (OK, TYPE's answer, HELP lines)
  int                integer
  None               null
  NULL_ARRAY         null (RESP2's null array, ``*-1``, where Redis
                     sends one; shown as None is)
  list / tuple       array (a tuple (id, fields) is an entry)
  Map(pairs, flat)   map; in RESP2 views a flat key/value array when
                     ``flat`` (XINFO), else an array of [key, value]
                     pairs (XREAD / XREADGROUP)
  RedisError         error (from storage.errors)

Commands build these; ``render`` turns them into each output mode.
"""


class Status(str):
    """A RESP simple string."""
    __slots__ = ()


class Map:
    """A RESP3 map with an explicit RESP2 shape."""
    __slots__ = ("pairs", "flat")

    def __init__(self, pairs, flat=True):
        self.pairs = pairs
        self.flat = flat

    def resp2(self):
        """The RESP2 array this map is sent as."""
        if self.flat:
            out = []
            for k, v in self.pairs:
                out.append(k)
                out.append(v)
            return out
        return [[k, v] for k, v in self.pairs]


class NullArray:
    """An explicit null array (``*-1`` in RESP2, ``_`` in RESP3), e.g. an
    EXEC whose WATCHed keys changed, or XPENDING's consumers when none."""
    __slots__ = ()

    def __bool__(self):
        return False


NULL_ARRAY = NullArray()
OK = Status("OK")


def entry_reply(e):
    """One entry of the engine's (storage.info's Entry or ClaimedEntry, or
    a bare ``(ms, seq)`` ID: JUSTID) as a reply value: ``[id, fields]``,
    ``[id, fields, idle, deliveries]`` or the ID, each ID in its
    ``ms-seq`` text.  A reply value already (a list) is left as it is."""
    t = type(e)
    if t is list:
        return e
    if t is tuple:
        return b"%d-%d" % e
    i = b"%d-%d" % e[0]
    return [i, e[1]] if len(e) == 2 else [i, e[1], e[2], e[3]]


def entry_rows(rows):
    """``entry_reply`` of each of ``rows`` (a list, or a storage.codec
    Entries), as a list."""
    return list(map(entry_reply, rows))
