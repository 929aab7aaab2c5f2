"""Listpacks (listpack.c): written, and walked in place on reading.
"""

from storage.codec.keys import listpack_int
from storage.codec.rdb.base import _U16LE, _U32LE, RdbError

# ================================================================= listpacks

def _lp_int(v):
    """lpEncodeIntegerGetType: the encoding of integer ``v``."""
    if 0 <= v <= 127:
        return bytes((v,))
    if -4096 <= v <= 4095:
        if v < 0:
            v += 1 << 13
        return bytes(((v >> 8) | 0xC0, v & 0xFF))
    if -32768 <= v <= 32767:
        return b"\xf1" + (v & 0xFFFF).to_bytes(2, "little")
    if -8388608 <= v <= 8388607:
        return b"\xf2" + (v & 0xFFFFFF).to_bytes(3, "little")
    if -2147483648 <= v <= 2147483647:
        return b"\xf3" + (v & 0xFFFFFFFF).to_bytes(4, "little")
    return b"\xf4" + (v & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")


def _lp_backlen(n):
    """lpEncodeBacklen, in the order it is stored (after the element)."""
    if n <= 127:
        return bytes((n,))
    if n < 16383:
        return bytes((n >> 7, (n & 127) | 128))
    if n < 2097151:
        return bytes((n >> 14, ((n >> 7) & 127) | 128, (n & 127) | 128))
    if n < 268435455:
        return bytes((n >> 21, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128, (n & 127) | 128))
    return bytes((n >> 28, ((n >> 21) & 127) | 128, ((n >> 14) & 127) | 128, ((n >> 7) & 127) | 128,
                  (n & 127) | 128))


_SMALL = [bytes((v, 1)) for v in range(128)]      # 0..127 with their back-length


def rdb_listpack(elements):
    """A listpack of ``elements`` (ints, or bytes: a canonical integer
    string is stored as an integer, as lpAppend does)."""
    out = [b"\x00" * 6]
    for e in elements:
        if type(e) is not int:
            v = listpack_int(e)
            if v is None:
                n = len(e)
                if n < 64:
                    enc = bytes((n | 0x80,)) + e
                elif n < 4096:
                    enc = bytes(((n >> 8) | 0xE0, n & 0xFF)) + e
                else:
                    enc = b"\xf0" + _U32LE.pack(n) + e
                out.append(enc)
                out.append(_lp_backlen(len(enc)))
                continue
            e = v
        if 0 <= e <= 127:
            out.append(_SMALL[e])
        else:
            enc = _lp_int(e)
            out.append(enc)
            out.append(bytes((len(enc),)))
    out.append(b"\xff")
    blob = bytearray(b"".join(out))
    count = len(elements)
    blob[0:6] = _U32LE.pack(len(blob)) + _U16LE.pack(count if count < 65535 else 65535)
    return bytes(blob)


_PAST = "listpack element runs past the end or has a wrong back-length"


def _lp_head(blob):
    """Check a listpack's header (total bytes) and end byte; its element
    count (65535: unknown)."""
    n = len(blob)
    if n < 7:
        raise RdbError("listpack shorter than its header")
    total = _U32LE.unpack_from(blob, 0)[0]
    if total != n:
        raise RdbError("listpack header says %d bytes, it has %d" % (total, n))
    if blob[n - 1] != 0xFF:
        raise RdbError("listpack does not end with its end byte")
    return _U16LE.unpack_from(blob, 4)[0]


def _lp_next(blob, p, end):
    """The element at ``p`` (< ``end``, the end byte's position) of a
    listpack: (value, position of the next), its encoding and back-length
    checked; value an int, or bytes."""
    b = blob[p]
    if b < 0x80:                             # the common small integer
        if p + 1 >= end or blob[p + 1] != 1:
            raise RdbError(_PAST)
        return b, p + 2
    if b < 0xC0:
        ln = b & 0x3F
        v, size = blob[p + 1:p + 1 + ln], 1 + ln
    elif b < 0xE0:
        if p + 1 >= end:
            raise RdbError("listpack element runs past the end")
        v = ((b & 0x1F) << 8) | blob[p + 1]
        if v >= 4096:
            v -= 8192
        size = 2
    elif b < 0xF0:
        if p + 1 >= end:
            raise RdbError("listpack element runs past the end")
        ln = ((b & 0x0F) << 8) | blob[p + 1]
        v, size = blob[p + 2:p + 2 + ln], 2 + ln
    elif b == 0xF0:
        if p + 5 > end:
            raise RdbError("listpack element runs past the end")
        ln = _U32LE.unpack_from(blob, p + 1)[0]
        if p + 5 + ln > end:
            raise RdbError(_PAST)
        v, size = blob[p + 5:p + 5 + ln], 5 + ln
    elif b <= 0xF4:
        w = (2, 3, 4, 8)[b - 0xF1]
        if p + 1 + w > end:
            raise RdbError("listpack element runs past the end")
        v = int.from_bytes(blob[p + 1:p + 1 + w], "little", signed=True)
        size = 1 + w
    else:
        raise RdbError("bad listpack element encoding 0x%02x" % b)
    q = p + size
    if size <= 127:
        if q >= end or blob[q] != size:
            raise RdbError(_PAST)
        return v, q + 1
    bl = _lp_backlen(size)
    if q + len(bl) > end or blob[q:q + len(bl)] != bl:
        raise RdbError(_PAST)
    return v, q + len(bl)


def _lp_skip(blob, p, end):
    """``_lp_next`` without the value: the position of the next element."""
    b = blob[p]
    if b < 0x80:
        if p + 1 >= end or blob[p + 1] != 1:
            raise RdbError(_PAST)
        return p + 2
    if b < 0xC0:
        size = 1 + (b & 0x3F)
    elif b < 0xF0:
        if p + 1 >= end:
            raise RdbError("listpack element runs past the end")
        size = 2 if b < 0xE0 else 2 + (((b & 0x0F) << 8) | blob[p + 1])
    elif b == 0xF0:
        if p + 5 > end:
            raise RdbError("listpack element runs past the end")
        size = 5 + _U32LE.unpack_from(blob, p + 1)[0]
    elif b <= 0xF4:
        size = 1 + (2, 3, 4, 8)[b - 0xF1]
    else:
        raise RdbError("bad listpack element encoding 0x%02x" % b)
    q = p + size
    if size <= 127:
        if q >= end or blob[q] != size:
            raise RdbError(_PAST)
        return q + 1
    bl = _lp_backlen(size)
    if q + len(bl) > end or blob[q:q + len(bl)] != bl:
        raise RdbError(_PAST)
    return q + len(bl)


def rdb_listpack_items(blob):
    """The elements of a listpack, each (value, encoded size with its
    back-length): value an int, or bytes.  Checks the header (total
    bytes, element count unless unknown), every element's encoding and
    back-length, and the end byte (lpValidateIntegrity, deep).  (A list:
    for small listpacks and tests; streams walk theirs in place.)"""
    count = _lp_head(blob)
    out = []
    p = 6
    end = len(blob) - 1
    while p < end:
        v, q = _lp_next(blob, p, end)
        out.append((v, q - p))
        p = q
    if count != 65535 and count != len(out):
        raise RdbError("listpack header says %d elements, it has %d" % (count, len(out)))
    return out
