"""MAXSIZE accounting (XREAD / XREADGROUP ... MAXSIZE bytes): how many
entries fit a reply.

The cap is soft, as in Redis: the first entry of a reply always goes,
and the reply stops once it reaches the cap.  One ``Budget`` spans all
the streams of one command.
"""


def entry_size(i, fields, id_text=False):
    """Approximate RESP size of one entry in a reply: an ID counts 21
    bytes, or (``id_text``: XREAD's budget) its text's length."""
    idlen = len(i) if type(i) is bytes else (len(str(i[0])) + len(str(i[1])) + 1 if id_text else 21)
    return idlen + (sum(len(x) for x in fields) + 8 * len(fields) if fields else 0) + 16


class Budget:
    """Reply bytes spent so far against ``cap`` bytes (0: no cap)."""

    __slots__ = ("cap", "used")

    def __init__(self, cap=0):
        self.cap = cap
        self.used = 0

    @property
    def spent(self):
        """True once no more entries may be added."""
        return bool(self.cap) and self.used >= self.cap

    def fit(self, rows, id_text=False):
        """The leading ``(id, fields, ...)`` rows that fit; spends them
        (``id_text``: see entry_size)."""
        if not self.cap:
            return rows
        kept = []
        for r in rows:
            n = entry_size(r[0], r[1], id_text)
            if self.used and self.used + n > self.cap:
                break
            kept.append(r)
            self.used += n
            if self.used >= self.cap:
                break
        return kept
