"""Differential tests: the same command scripts run against a private
redis-server (7.0) and against `xs` (script mode, --json), replies compared.

Scripts live in tests/diffcases/*.txt.  Format (as ../shared/conformance):

    ## case_name [tag ...]
    COMMAND arg ...          one command per line, redis-cli quoting

Every case runs on a fresh redis (FLUSHALL) and a fresh xs store.

Normalisation (as xsdiff.py):
  * auto-generated IDs (ms >= 1e12) become <id1>, <id2>, ... in order of
    first appearance, separately for each side;
  * idle times are compared to the nearest 10 s; XINFO STREAM FULL times
    are masked; radix-tree-* values are skipped;
  * XINFO replies are compared loosely: xs may add keys, every key Redis has
    must match;
  * KEYS replies and complete SCAN replies are compared as sets.

A line followed by ``=> JSON`` expects that reply instead of redis-server
7.0's: used where Redis 8 (the contract) answers differently from the 7.0
reference server.  Cases tagged ``spec`` never touch redis: every line
needs ``=> JSON`` (or ``=> *`` for any reply).

Tags:
  spec   expected replies written in the file (Redis 8 behaviour)
  text   also compare `redis-cli --raw` with `xs --raw` and `redis-cli
         --no-raw` with `xs --no-raw`, byte for byte (auto IDs normalised).

`{NOW-n}` in a line is replaced by the current Unix time in ms minus n
(computed once per case, the same value for both sides).
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tests/
ROOT = os.path.dirname(HERE)
XS = [sys.executable, "-m", "xstream_cli"]


# ------------------------------------------------------------ redis-cli split

_SPACE = b" \n\r\t\v\f"
_ESC = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = b"0123456789abcdefABCDEF"


def split_args(line):
    """sdssplitargs(), independent of xs's own splitter."""
    out, i, n = [], 0, len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n:
            return out
        cur, inq, insq, done = bytearray(), False, False, False
        while not done:
            if inq:
                if i >= n:
                    raise ValueError("unbalanced quotes")
                c = line[i]
                if c == 0x5C and i + 3 < n and line[i + 1] == 0x78 and line[i + 2] in _HEX and line[i + 3] in _HEX:
                    cur.append(int(line[i + 2:i + 4], 16))
                    i += 3
                elif c == 0x5C and i + 1 < n:
                    i += 1
                    cur.append(_ESC.get(line[i], line[i]))
                elif c == 0x22:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        raise ValueError("closing quote must be followed by a space")
                    done = True
                else:
                    cur.append(c)
            elif insq:
                if i >= n:
                    raise ValueError("unbalanced quotes")
                c = line[i]
                if c == 0x5C and i + 1 < n and line[i + 1] == 0x27:
                    i += 1
                    cur.append(0x27)
                elif c == 0x27:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        raise ValueError("closing quote must be followed by a space")
                    done = True
                else:
                    cur.append(c)
            else:
                if i >= n:
                    break
                c = line[i]
                if c in _SPACE:
                    break
                if c == 0x22:
                    inq = True
                elif c == 0x27:
                    insq = True
                else:
                    cur.append(c)
            i += 1
        out.append(bytes(cur))


# ------------------------------------------------------------------ the cases


class Case:
    def __init__(self, name, tags, source):
        self.name, self.tags, self.source = name, tags, source
        self.lines = []
        self.expect = []     # per line: None (ask redis) or the expected reply

    def __repr__(self):
        return "Case(%s)" % self.name


def load_cases():
    cases = []
    for path in sorted(glob.glob(os.path.join(HERE, "diffcases", "*.txt"))):
        cur = None
        with open(path, encoding="utf-8") as f:
            for raw in f:
                line = raw.rstrip("\n")
                if line.startswith("## "):
                    head = line[3:].split()
                    cur = Case(head[0], set(head[1:]), os.path.basename(path))
                    cases.append(cur)
                elif not line.strip() or line.lstrip().startswith("#"):
                    continue
                elif line.startswith("=> "):
                    text = line[3:].strip()
                    cur.expect[-1] = "*" if text == "*" else json.loads(text)
                else:
                    cur.lines.append(line.strip())
                    cur.expect.append(None)
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, "duplicate case names: %s" % sorted(dup)
    return cases


CASES = load_cases()
TEXT_CASES = [c for c in CASES if "text" in c.tags]


def expand(lines):
    now = int(time.time() * 1000)
    return [re.sub(r"\{NOW-(\d+)\}", lambda m: str(now - int(m.group(1))), l) for l in lines]


# ---------------------------------------------------------------- normalising

AUTO_ID = re.compile(r"^(\d{13,})-(\d+)$")
BUCKET = 10000


def bucket(v):
    return "~%d" % round(v / BUCKET) if isinstance(v, int) and v >= 0 else v


def norm_ids(tree, table):
    if isinstance(tree, str):
        if AUTO_ID.match(tree):
            return table.setdefault(tree, "<id%d>" % (len(table) + 1))
        return tree
    if isinstance(tree, list):
        return [norm_ids(x, table) for x in tree]
    if isinstance(tree, dict):
        return {k: norm_ids(v, table) for k, v in tree.items()}
    return tree


def _u(a):
    return a.decode("utf-8", "surrogateescape").upper()


def norm_reply(args, reply):
    """Mask wall-clock values; order-free replies as sorted lists."""
    if isinstance(reply, dict) and "error" in reply:
        return reply
    name = _u(args[0])
    sub = _u(args[1]) if len(args) > 1 else ""
    if name == "KEYS" and isinstance(reply, list):
        return sorted(reply, key=repr)
    if name == "SCAN" and isinstance(reply, list) and len(reply) == 2 and reply[0] == "0":
        return ["0", sorted(reply[1], key=repr)]
    if name == "XPENDING" and len(args) > 3 and isinstance(reply, list):
        return [[e[0], e[1], bucket(e[2]), e[3]] if isinstance(e, list) and len(e) == 4 else e
                for e in reply]
    if name == "XINFO" and sub == "CONSUMERS" and isinstance(reply, list):
        out = []
        for c in reply:
            if isinstance(c, dict):
                c = dict(c)
                for k in ("idle", "inactive"):
                    if k in c:
                        c[k] = bucket(c[k])
            out.append(c)
        return out
    if name == "XINFO" and sub == "STREAM" and isinstance(reply, dict):
        r = {k: v for k, v in reply.items() if not k.startswith("radix-tree")}
        groups = r.get("groups")
        if isinstance(groups, list):
            r["groups"] = groups = [dict(g) if isinstance(g, dict) else g for g in groups]
            for g in groups:
                if not isinstance(g, dict):
                    continue
                g["pending"] = [[p[0], p[1], "T", p[3]] if isinstance(p, list) and len(p) == 4 else p
                                for p in g.get("pending", [])]
                cons = []
                for c in g.get("consumers", []):
                    c = dict(c)
                    for k in ("seen-time", "active-time"):
                        if k in c:
                            c[k] = "T"
                    c["pending"] = [[p[0], "T", p[2]] if isinstance(p, list) and len(p) == 3 else p
                                    for p in c.get("pending", [])]
                    cons.append(c)
                if "consumers" in g:
                    g["consumers"] = cons
        return r
    return reply


def same(ref, got, loose_maps):
    if isinstance(ref, dict) and isinstance(got, dict):
        keys = set(ref) if loose_maps else set(ref) | set(got)
        return all(k in got and k in ref and same(ref[k], got[k], loose_maps) for k in keys)
    if isinstance(ref, list) and isinstance(got, list):
        return len(ref) == len(got) and all(same(a, b, loose_maps) for a, b in zip(ref, got))
    return ref == got and type(ref) is type(got)


# ------------------------------------------------------------------- runners


def xs_run(db, lines, mode="json", timeout=60):
    if not os.path.exists(str(db)):
        from conftest import new_store
        new_store(db)         # the store is there, as redis-server is running: a script of reads is answered
    data = b"".join(l.encode("utf-8") + b"\n" for l in lines)
    env = dict(os.environ, XS_NO_SYNC="1")  # durability is not under test here: skip fsync
    return subprocess.run(XS + ["--db", str(db), "--" + mode], input=data, capture_output=True,
                          timeout=timeout, cwd=ROOT, env=env)


def xs_json(db, lines):
    p = xs_run(db, lines, "json")
    out = p.stdout.decode("utf-8", "surrogateescape")
    replies = []
    for l in out.splitlines():
        if l.strip():
            try:
                replies.append(json.loads(l))
            except ValueError:
                replies.append({"unparsable": l})
    return replies, p.stderr.decode("utf-8", "replace")


def redis_replies(redis, lines):
    redis.flushall()
    return [redis.call(*split_args(l.encode("utf-8"))) for l in lines]


def compare(redis, tmp_path, lines, expect=None, spec=False):
    """Run ``lines`` on both sides; return a list of failure descriptions."""
    expect = expect or [None] * len(lines)
    want = [None] * len(lines) if spec else redis_replies(redis, lines)
    want = [w if e is None else e for w, e in zip(want, expect)]
    got, err = xs_json(tmp_path / "xs-store", lines)
    failures = []
    if len(got) != len(lines):
        failures.append("xs gave %d replies for %d commands; stderr: %s"
                        % (len(got), len(lines), err.strip()[-400:]))
    ref_ids, got_ids = {}, {}
    for i, line in enumerate(lines):
        if i >= len(got):
            break
        args = split_args(line.encode("utf-8"))
        if want[i] == "*":
            continue
        ref = norm_reply(args, norm_ids(want[i], ref_ids))
        mine = norm_reply(args, norm_ids(got[i], got_ids))
        if not same(ref, mine, loose_maps=_u(args[0]) == "XINFO"):
            failures.append("%s\n    redis: %s\n    xs:    %s"
                            % (line, json.dumps(ref)[:600], json.dumps(mine)[:600]))
    return failures


def text_norm(b):
    table = {}
    return re.sub(rb"\b\d{13,}-\d+\b",
                  lambda m: table.setdefault(m.group(0), b"<id%d>" % (len(table) + 1)), b)


def redis_cli_text(redis, lines, flag):
    redis.flushall()
    data = b"".join(l.encode("utf-8") + b"\n" for l in lines)
    p = subprocess.run(["redis-cli", "-p", str(redis.port), flag], input=data,
                       capture_output=True, timeout=60)
    return p.stdout


# --------------------------------------------------------------------- tests


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_replies_match_redis(case, request, tmp_path):
    lines = expand(case.lines)
    spec = "spec" in case.tags
    redis = None if spec else request.getfixturevalue("redis")
    failures = compare(redis, tmp_path, lines, case.expect, spec)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("flag", ["--raw", "--no-raw"])
@pytest.mark.parametrize("case", TEXT_CASES, ids=[c.name for c in TEXT_CASES])
def test_text_output_is_byte_identical_to_redis_cli(case, flag, redis, tmp_path):
    if not shutil.which("redis-cli"):
        pytest.skip("redis-cli is not installed")
    # XINFO STREAM is compared in JSON only (test_replies_match_redis, where
    # newer fields are allowed): Redis 8.6+ prints idmp-* fields for every
    # stream, which the 7.0 reference server does not have.
    lines = [l for l in expand(case.lines) if not re.match(r"(?i)\s*XINFO\s+STREAM\b", l)]
    want = text_norm(redis_cli_text(redis, lines, flag))
    p = xs_run(tmp_path / ("xs-store" + flag), lines, flag.lstrip("-"))
    got = text_norm(p.stdout)
    assert got == want, "text differs with %s\n--- redis-cli\n%s\n--- xs\n%s\n%s" % (
        flag, want.decode("utf-8", "replace"), got.decode("utf-8", "replace"),
        p.stderr.decode("utf-8", "replace")[-400:])
