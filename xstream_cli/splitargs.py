"""Split a script line into arguments exactly as redis-cli does
(``sdssplitargs``): spaces separate; "double quotes" take backslash
escapes (\\n \\r \\t \\b \\a \\xHH, any other escaped char is itself);
'single quotes' are literal but for \\'; a quote in the middle of a word
starts quoting; a closing quote must be followed by white space (isspace: \\v and \\f
too) or the end.
"""

_SKIP = frozenset(b" \n\r\t\v\f")  # skipped between words (isspace)
_SPACE = frozenset(b" \n\r\t")      # ends an unquoted word (\v and \f do not)
_ESC = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = frozenset(b"0123456789abcdefABCDEF")


class SplitError(ValueError):
    """Unbalanced quotes: redis-cli prints "Invalid argument(s)"."""


def split_line(line):
    """bytes -> list of bytes arguments; raises SplitError."""
    if b"\x00" in line:  # redis-cli reads C strings: a NUL ends the line
        line = line[:line.index(b"\x00")]
    if b'"' not in line and b"'" not in line and b"\x0b" not in line and b"\x0c" not in line:
        return line.split()
    out = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _SKIP:
            i += 1
        if i >= n:
            return out
        cur = bytearray()
        inq = insq = False
        while True:
            if inq:
                if i >= n:
                    raise SplitError()
                ch = line[i]
                if ch == 92 and i + 3 < n and line[i + 1] == 120 and line[i + 2] in _HEX and line[i + 3] in _HEX:
                    cur.append(int(line[i + 2:i + 4], 16))
                    i += 3
                elif ch == 92 and i + 1 < n:
                    i += 1
                    c2 = line[i]
                    cur.append(_ESC.get(c2, c2))
                elif ch == 34:
                    if i + 1 < n and line[i + 1] not in _SKIP:
                        raise SplitError()
                    i += 1
                    break
                else:
                    cur.append(ch)
            elif insq:
                if i >= n:
                    raise SplitError()
                ch = line[i]
                if ch == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    cur.append(39)
                elif ch == 39:
                    if i + 1 < n and line[i + 1] not in _SKIP:
                        raise SplitError()
                    i += 1
                    break
                else:
                    cur.append(ch)
            else:
                if i >= n:
                    break
                ch = line[i]
                if ch in _SPACE:
                    break
                if ch == 34:
                    inq = True
                elif ch == 39:
                    insq = True
                else:
                    cur.append(ch)
            i += 1
        out.append(bytes(cur))
