"""One entry laid out in pretty output: ``ID  TIME  field=value ...``,
the ID and time columns padded to the widths measured, the fields
wrapped at the terminal's width by display cells (continuation lines
under the first field, or on lines of their own on a narrow terminal),
an item longer than a line broken over several, nothing cut.  The
common case -- printable ASCII names and values that fit on one line --
is built as bytes at once.

Who imports it: xstream_cli.output.pretty (Writer.entries, and
EntryLines, xs tail's pretty line).
"""
import re

from xstream_cli.output.pretty_text import cells, duration, id_time, token

_SAFE_VALUE = bytes(c for c in range(0x21, 0x7f) if c not in b"\"'\\")
_SAFE_NAME = bytes(c for c in _SAFE_VALUE if c != 0x3d)


class _EntryFormat:
    """Formats one entry into wrapped lines on a Writer."""

    def __init__(self, w, indent, id_w, time_w):
        self.w = w
        self.st = w.st
        self.pad = " " * indent
        self.id_w = id_w
        self.time_w = time_w
        head = indent + id_w + 2 + (time_w + 2 if time_w else 0)
        if w.width - head >= 24:
            self.cont = " " * head          # fields continue under the first field
            self.own_line = False
        else:                               # narrow terminal: fields on lines of their own
            self.cont = " " * (indent + 4)
            self.own_line = True
        self.avail = max(w.width - len(self.cont), 8)
        # narrower still: the time goes under the ID
        self.split_head = self.own_line and time_w and indent + id_w + 2 + time_w > w.width
        self.pad_b = self.pad.encode()
        self.cont_b = self.cont.encode()
        self.b_id, self.b_time, self.b_name, self.b_off = (x.encode() for x in (w.st.id, w.st.time, w.st.name,
                                                                                  w.st.off))

    def __call__(self, e):
        f = e[1]
        if len(e) == 2 and f:
            # the common case: every name and value printable ASCII without
            # spaces or quotes, and the line fits: built as bytes at once
            names = f[0::2]
            values = f[1::2]
            if len(names) == len(values) and all(names) and all(values) \
                    and not b"".join(names).translate(None, _SAFE_NAME) \
                    and not b"".join(values).translate(None, _SAFE_VALUE):
                k = len(names)
                if sum(map(len, f)) + 3 * k - 2 <= self.avail:
                    i = e[0]
                    if self.time_w:
                        ts = id_time(i).encode()
                        head = b"%s%s%s%s%s  %s%s%s%s  " % (self.pad_b, self.b_id, i, self.b_off,
                                                            b" " * (self.id_w - len(i)), self.b_time, ts,
                                                            self.b_off, b" " * (self.time_w - len(ts)))
                    else:
                        head = b"%s%s%s%s%s  " % (self.pad_b, self.b_id, i, self.b_off, b" " * (self.id_w - len(i)))
                    if self.own_line:
                        self.w.line_bytes(self._own_head(i).encode())
                        head = self.cont_b
                    nm = self.b_name
                    off = self.b_off
                    self.w.line_bytes(head + b"  ".join([nm + n + off + b"=" + v for n, v in zip(names, values)]))
                    return
        self._general(e)

    def _general(self, e):
        st = self.st
        i = e[0]
        sid = i.decode("ascii", "replace")
        head = self.pad + st.id + sid + st.off + " " * max(self.id_w - len(sid), 0)
        if self.time_w:
            ts = id_time(i)
            head += "  " + st.time + ts + st.off + " " * (self.time_w - len(ts))
        f = e[1]
        if f is None:
            items = [(st.dim + "(deleted)" + st.off, 9)]
        else:
            items = []
            for k in range(0, len(f) - 1, 2):
                n = token(f[k], True)
                v = token(f[k + 1])
                nw = len(n) if n.isascii() else cells(n)
                vw = len(v) if v.isascii() else cells(v)
                items.append((n, v, nw + 1 + vw))
        if len(e) == 4:
            s = "(idle %s, delivered %d×)" % (duration(e[2]), e[3])
            items.append((st.dim + s + st.off, len(s)))
        line = self.w.line
        avail = self.avail
        cur = head if not self.own_line else None
        used = -2                 # the head and its separator take the indentation's width
        if self.own_line:
            line(self._own_head(i))
        for it in items:
            width = it[-1]
            if cur is not None and used > 0 and used + 2 + width > avail:
                line(cur)
                cur = None
            if cur is None:
                cur = self.cont
                used = 0
            else:
                cur += "  "
                used += 2
            if width <= avail - used:
                cur += self._item(it)
                used += width
                continue
            # longer than a line: broken over several, nothing cut
            pieces = _break(it, avail - used, avail)
            if len(it) == 3 and st.name and pieces[0].startswith(it[0] + "="):
                pieces[0] = st.name + it[0] + st.off + pieces[0][len(it[0]):]
            for p in pieces[:-1]:
                line(cur + p)
                cur = self.cont
            cur += pieces[-1]
            used = cells(_strip(pieces[-1]))
        if cur is not None:
            line(cur)

    def _own_head(self, i):
        """The ID line of a narrow terminal: ID and time, or the time
        under the ID when both do not fit."""
        st = self.st
        ts = id_time(i) if self.time_w else ""
        head = self.pad + st.id + i.decode("ascii", "replace") + st.off
        if ts:
            head += ("\n" + self.cont if self.split_head else "  ") + st.time + ts + st.off
        return head

    def _item(self, it):
        if len(it) == 2:
            return it[0]
        return self.st.name + it[0] + self.st.off + "=" + it[1]


def _strip(s):
    return re.sub("\x1b\\[[0-9;]*m", "", s)


def _break(it, first, avail):
    """Split an item too long for a line into plain-text pieces (the
    first ``first`` columns wide, the rest ``avail``), at a space when
    there is one late enough in a piece."""
    if len(it) == 2:
        text = _strip(it[0])
    else:
        text = it[0] + "=" + it[1]
    pieces = []
    cur = []
    used = 0
    room = max(first, 1)
    for ch in text:
        w = 1 if ch.isascii() else cells(ch)
        if used + w > room and cur:
            # at a space in the second half of the piece if there is one
            cut = len(cur)
            for j in range(len(cur) - 1, len(cur) // 2, -1):
                if cur[j] == " ":
                    cut = j + 1
                    break
            pieces.append("".join(cur[:cut]))
            cur = cur[cut:]
            used = cells("".join(cur))
            room = avail
        cur.append(ch)
        used += w
    pieces.append("".join(cur))
    return pieces
