"""Redis's glob matching (``stringmatchlen`` in util.c), on bytes:
``*``, ``?``, ``[abc]``, ``[^a-z]``, ``\\x`` escapes.  An unterminated
``[`` matches up to the end of the pattern, as in Redis."""


def match(pattern, string, nocase=False):
    """KEYS / SCAN MATCH: ``*`` alone matches every name (the empty one
    too: Redis skips matching for it); any other pattern goes through
    the matcher, where even ``**`` does not match the empty name."""
    if pattern == b"*":
        return True
    if nocase:
        pattern, string = pattern.lower(), string.lower()
    return _match(pattern, 0, string, 0, 0)


def _match(p, pi, s, si, depth):
    if depth > 1000:
        return False
    plen, slen = len(p), len(s)
    entered = si < slen         # trailing stars are skipped only after a match step
    while pi < plen and si < slen:
        c = p[pi]
        if c == 42:  # '*'
            while pi + 1 < plen and p[pi + 1] == 42:
                pi += 1
            if pi + 1 == plen:
                return True
            for k in range(si, slen):
                if _match(p, pi + 1, s, k, depth + 1):
                    return True
            return False
        if c == 63:  # '?'
            si += 1
        elif c == 91:  # '['
            pi += 1
            neg = pi < plen and p[pi] == 94
            if neg:
                pi += 1
            ok = False
            while True:
                if pi >= plen:
                    pi -= 1
                    break
                if p[pi] == 92 and pi + 2 <= plen - 1 + 1 and pi + 1 < plen:
                    pi += 1
                    if p[pi] == s[si]:
                        ok = True
                elif p[pi] == 93:  # ']'
                    break
                elif pi + 2 < plen and p[pi + 1] == 45:  # a-z
                    lo, hi = p[pi], p[pi + 2]
                    if lo > hi:
                        lo, hi = hi, lo
                    if lo <= s[si] <= hi:
                        ok = True
                    pi += 2
                elif p[pi] == s[si]:
                    ok = True
                pi += 1
            if neg:
                ok = not ok
            if not ok:
                return False
            si += 1
        elif c == 92 and pi + 1 < plen:  # '\'
            pi += 1
            if p[pi] != s[si]:
                return False
            si += 1
        else:
            if c != s[si]:
                return False
            si += 1
        pi += 1
    if si == slen and entered:
        while pi < plen and p[pi] == 42:
            pi += 1
    return pi == plen and si == slen
