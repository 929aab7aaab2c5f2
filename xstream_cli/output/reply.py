"""Reply values, in RESP3 terms, independent of how they are shown.

  bytes / str        bulk string
  Status(str)        simple string (OK, TYPE's answer, HELP lines)
  int                integer
  None               null
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


OK = Status("OK")
