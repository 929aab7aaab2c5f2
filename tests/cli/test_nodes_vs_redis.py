"""Listpack nodes as Redis fills them (storage.parts.nodes), and the trimming
that depends on them: approximate trimming removes whole nodes only.

The behaviour is compared with a private redis-server (7.0: same listpack
layout and node defaults as 8.x) by a seeded random generator mixing
XADD of varied field sizes and counts, XDEL, exact and approximate
XTRIM and XADD trimming with and without LIMIT, DEL.  Every reply is
compared, and XLEN and XINFO STREAM's radix-tree-keys (the node count,
exact now) after every few commands.  These tests run ``xs`` (script
mode), so they left tests/engine/test_nodes.py, whose tier calls the
engine only (the arithmetic and the node table are tested there).

    XS_NODES_SEQUENCES=500 XS_NODES_SEED=3 python -m pytest -q tests/cli/test_nodes_vs_redis.py

runs a longer randomized comparison (default: 40 sequences, seed 1).
"""
import os
import random

from tests.conftest import run_xs

SEQUENCES = int(os.environ.get("XS_NODES_SEQUENCES", "40"))
SEED = int(os.environ.get("XS_NODES_SEED", "1"))


# ======================================================= against redis


def line(argv):
    return " ".join(a if a else "''" for a in argv)


def compare(redis, tmp_path, lines, label):
    """Run ``lines`` (argv lists) on a fresh xs store and on redis; assert
    every reply is the same."""
    redis.flushall()
    import json
    p = run_xs(tmp_path / ("db-%s" % label), [line(a) for a in lines])
    got = [json.loads(l) for l in p.stdout.decode("utf-8", "surrogateescape").splitlines() if l.strip()]
    assert len(got) == len(lines), (label, p.stderr[-2000:])
    for n, (argv, mine) in enumerate(zip(lines, got)):
        want = redis.call(*argv)
        if argv[0] == "XINFO" and "error" not in want:
            want = {k: want[k] for k in INFO_KEYS}
            mine = {k: mine.get(k) for k in INFO_KEYS} if isinstance(mine, dict) else mine
        assert mine == want, "%s: command %d %s\n%s" % (
            label, n, line(argv)[:200], "\n".join(line(a)[:120] for a in lines[max(0, n - 30):n + 1]))
    return got


INFO_KEYS = ("length", "radix-tree-keys", "last-generated-id", "max-deleted-entry-id", "entries-added",
             "recorded-first-entry-id")


def test_the_issue_example_removes_55_then_100(redis, tmp_path):
    """Redis's own "XTRIM with MAXLEN option basic test"."""
    lines = [["XADD", "s", "1-%d" % k, "f", str(k)] for k in range(1000)]
    lines += [["XTRIM", "s", "MAXLEN", "666"], ["XTRIM", "s", "MAXLEN", "=", "555"],
              ["XTRIM", "s", "MAXLEN", "~", "444"], ["XLEN", "s"],
              ["XTRIM", "s", "MAXLEN", "~", "400"], ["XLEN", "s"], ["XINFO", "STREAM", "s"]]
    got = compare(redis, tmp_path, lines, "issue")
    assert got[1000:1006] == [334, 111, 55, 500, 100, 400]


def test_a_node_with_a_deleted_last_entry_is_not_below_minid(redis, tmp_path):
    got = compare(redis, tmp_path, [["XADD", "s", "1-0", "f", "v"], ["XADD", "s", "4-1", "f", "v"],
                                    ["XDEL", "s", "4-1"], ["XTRIM", "s", "MINID", "~", "4-1"],
                                    ["XTRIM", "s", "MINID", "~", "4-2"], ["XLEN", "s"]], "minid")
    assert got[3:] == [0, 1, 0]


def test_exact_minid_may_leave_a_node_without_live_entries_that_xadd_fills(redis, tmp_path):
    lines = [["XADD", "s", "1-%d" % k, "f", "v"] for k in range(1, 6)]
    lines += [["XDEL", "s", "1-5"], ["XTRIM", "s", "MINID", "1-5"], ["XLEN", "s"], ["XINFO", "STREAM", "s"]]
    lines += [["XADD", "s", "2-%d" % k, "f", "v"] for k in range(200)]
    lines += [["XINFO", "STREAM", "s"], ["XTRIM", "s", "MAXLEN", "~", "10"], ["XLEN", "s"]]
    compare(redis, tmp_path, lines, "zombie")


def test_deleted_entries_still_count_toward_a_full_node(redis, tmp_path):
    lines = [["XADD", "s", "1-%d" % k, "f", "v"] for k in range(1, 91)]
    lines += [["XDEL", "s"] + ["1-%d" % k for k in range(50, 91)]]
    lines += [["XADD", "s", "2-%d" % k, "f", "v"] for k in range(1, 31)]
    lines += [["XINFO", "STREAM", "s"], ["XTRIM", "s", "MAXLEN", "~", "30"], ["XLEN", "s"],
              ["XTRIM", "s", "MAXLEN", "~", "20"], ["XLEN", "s"]]
    got = compare(redis, tmp_path, lines, "deleted-count")
    # the first node took 10 of the 30 (90 + 10 = 100 entries, 41 of them deleted)
    assert got[-5]["radix-tree-keys"] == 2
    assert got[-4:] == [0, 79, 59, 20]


VALUE_KINDS = ("small", "int", "edge-int", "mid", "big", "huge", "empty")


def value(r, kind):
    if kind == "small":
        return "v%d" % r.randint(0, 999)
    if kind == "int":
        return str(r.randint(-100000, 10 ** 7))
    if kind == "edge-int":
        return str(r.choice([0, 127, 128, -1, 4095, 4096, -4097, 32767, 32768, 8388607, 8388608, 2 ** 31,
                             2 ** 63 - 1, -2 ** 63, 2 ** 63, 10 ** 19])) if r.random() < 0.9 else "0%d" % r.randint(0, 9)
    if kind == "mid":
        return "m" * r.randint(50, 300)
    if kind == "big":
        return "b" * r.randint(900, 2100)
    if kind == "huge":
        return "h" * r.randint(3900, 4300)
    return ""


def trim_args(r, ids, length, in_xadd):
    """MAXLEN|MINID [=|~] threshold [LIMIT n]."""
    approx = r.random() < 0.7
    out = []
    if r.random() < 0.55:
        out += ["MAXLEN"]
        mark = ["~"] if approx else r.choice([[], ["="]])
        out += mark + [str(max(0, length - r.choice([0, 1, 5, 50, 99, 100, 101, 150, 250, 1000])))]
    else:
        out += ["MINID"]
        mark = ["~"] if approx else r.choice([[], ["="]])
        if ids and r.random() < 0.8:
            ms, seq = r.choice(ids[:max(1, len(ids) // (1 if in_xadd else 2) + 1)])
            seq = max(0, seq + r.choice([-1, 0, 0, 1]))
            thr = "%d-%d" % (ms, seq)
        else:
            thr = str(r.randint(0, 5000))
        out += mark + [thr]
    if approx and r.random() < 0.35:
        out += ["LIMIT", str(r.choice([0, 1, 50, 99, 100, 101, 150, 200, 250, 1000]))]
    return out


def sequence(r):
    """A random command sequence on streams s and t (argv lists)."""
    lines = []
    ms, seq = r.randint(1, 50), 0
    ids = {"s": [], "t": []}
    length = {"s": 0, "t": 0}
    kinds = r.sample(VALUE_KINDS, r.randint(1, 3))
    nfields = r.choice([1, 1, 2, 3])
    for _ in range(r.randint(3, 12)):
        key = "s" if r.random() < 0.85 else "t"
        burst = r.choice([1, 5, 30, 99, 100, 101, 150, 260])
        for _ in range(burst):
            if r.random() < 0.2:
                ms, seq = ms + r.choice([1, 1, 7, 1000]), r.choice([0, 0, 3, 5000])
            else:
                seq += r.choice([1, 1, 1, 2, 200, 70000])
            k = nfields if r.random() < 0.9 else r.randint(1, 4)
            fields = []
            for q in range(k):
                fields += ["f%d" % q if r.random() < 0.95 else value(r, r.choice(kinds)), value(r, r.choice(kinds))]
            argv = ["XADD", key, "%d-%d" % (ms, seq)] + fields
            ids[key].append((ms, seq))
            length[key] += 1
            if r.random() < 0.04:
                argv[3:3] = trim_args(r, ids[key], length[key], True)
            lines.append(argv)
        for _ in range(r.randint(0, 4)):
            op = r.random()
            if op < 0.35 and ids[key]:
                pool = ids[key] if r.random() < 0.5 else ids[key][-100:]     # often in the last node
                dels = r.sample(pool, min(len(pool), r.choice([1, 1, 3, 20, 120])))
                lines.append(["XDEL", key] + ["%d-%d" % i for i in dels])
            elif op < 0.85:
                lines.append(["XTRIM", key] + trim_args(r, ids[key], length[key], False))
            elif op < 0.9:
                lines.append(["DEL", key])
                ids[key], length[key] = [], 0
            lines.append(["XLEN", key])
            lines.append(["XINFO", "STREAM", key])
    lines += [["XLEN", "s"], ["XLEN", "t"], ["XRANGE", "s", "-", "+", "COUNT", "3"]]
    return lines


def test_random_node_sequences_trim_as_redis_does(redis, tmp_path):
    r0 = random.Random(SEED)
    for n in range(SEQUENCES):
        r = random.Random(r0.getrandbits(64))
        lines = sequence(r)
        compare(redis, tmp_path, lines, "seed %d sequence %d" % (SEED, n))
