#!/usr/bin/env python3
"""A differential fuzzer: seeded random command sequences run against a
private redis-server and against `xs`, replies compared one by one.

Run it:

    python3 tests/fuzz_diff.py --sequences 500 --seed 1            # JSON compare
    python3 tests/fuzz_diff.py --sequences 500 --seed 1 --raw-sample 50
    python3 tests/fuzz_diff.py --sequences 10000 --seed 7 --minimize --jobs 2
    python3 tests/fuzz_diff.py --replay 1:123                       # one sequence

It starts its own redis-server (7.0 from Debian is fine) on a free
loopback port and drives xs as users do: `xs --json` in script mode, one
process and one fresh store per sequence.  In pytest,
tests/compat/test_fuzz_differential.py runs a bounded number of sequences with a
fixed seed (XS_FUZZ_SEQUENCES, XS_FUZZ_SEED and XS_FUZZ_RAW_SAMPLE change
that: `XS_FUZZ_SEQUENCES=10000 python -m pytest
tests/compat/test_fuzz_differential.py` is the long run).

What a sequence is
------------------
10 to 40 commands (one sequence in eight first fills a stream with 20 to
130 entries, often read in part by a group) over every stream command and
option xs implements
(xstream_cli/commands/__init__.py), with small pools of keys, groups and
consumers so that commands interact: explicit IDs mostly (a per-sequence
clock keeps XADD succeeding), `*` sometimes, `ms-*`, edge IDs (0-0, 0-1,
the maximum 18446744073709551615-18446744073709551615, overflowing
numbers, junk), exclusive ranges, wrong arities, junk tokens, mixed case,
odd spacing and non-UTF-8 bytes.  (`--check-open` runs the reproduction of
every OPEN_DIVERGENCES entry and says which still diverge.)  One sequence in three is "redis8"
flavoured: it also uses what Redis 7.0 does not know (XDELEX, XACKDEL,
XNACK, XCFGSET, XIDMPRECORD, IDMP/IDMPAUTO, KEEPREF/DELREF/ACKED, CLAIM,
MAXCOUNT/MAXSIZE, XREAD +).  BLOCK appears only with timeouts of 1-5 ms
(a guard rewrites any other value that could block).

How replies are compared
------------------------
xs runs first (the whole sequence on stdin); then each command is sent to
redis-server over RESP3 (the client of tests/conftest.py, maps kept as
maps) and compared with xs's JSON reply:

  * Auto IDs (`*`): an ID whose ms is within a day of now is replaced by
    <id1>, <id2>, ... in order of first appearance, per side and per
    stream key (two streams may share an auto ID on one side only).  Edge
    IDs (the maximum ...) are not time based and compared exactly; in the
    text pass every auto ID is <auto>.
  * Time-based values are compared with a tolerance, not bucketed (a
    bucket edge makes a flaky test): XPENDING's idle (relative, 5 s),
    XINFO CONSUMERS idle/inactive (relative, 5 s), XINFO STREAM FULL
    seen-time/active-time/delivery times (absolute, 60 s).  Negative
    sentinels (-1) compare exactly.  The generator only uses min-idle
    times of 0 or hours and XCLAIM IDLE/TIME values far from now, so the
    tolerance can never hide a wrong choice of entries.
  * XINFO maps may hold fields Redis 7.0 lacks (8.x adds inactive,
    active-time, pel-count, nacked-count, idmp-*); radix-tree-* are
    estimates in xs and skipped.
  * KEYS as sets; SCAN 0 as sets when both sides finished; a SCAN from
    another cursor, or with COUNT below 10, only as a well-formed reply
    (what a cursor means is the implementation's business).
  * Commands Redis 7.0 cannot answer (redis8_only()) are not sent to redis;
    xs's reply is only checked for crashes.  If such a command succeeded
    in xs and may have changed state, the rest of the sequence is only
    checked for crashes (an error changes nothing: every xs command is
    atomic).
  * Every xs reply is checked for crashes: "internal error", a traceback,
    a wrong number of replies, an exit status other than 0/1.

A divergence is then classified: INTENDED_DIFFERENCES (Redis 8 behaviour
xs implements on purpose; some are emulated on the redis side by hidden
commands so that the state stays comparable), OPEN_DIVERGENCES (known
bugs being fixed: tolerated by CI, delete an entry when it is fixed) or
new.  After a divergence that is not "error against error" (which changes
nothing on either side) the sequence stops being compared.

With --raw-sample K, K sequences (those whose JSON comparison was clean)
are also run through `redis-cli --raw` / `--no-raw` and `xs --raw` /
`--no-raw` and compared byte for byte, command by command (a marker line
after each command splits the output); commands whose text shows times
(XPENDING ranges, XINFO) or unordered keys are left out of that pass.

--minimize reduces every new divergence (delta debugging over commands,
then over arguments) to the shortest sequence that still shows it, and
prints it as a redis-cli script; --show-known --minimize-known does the
same for the first example of every OPEN divergence.  XS_FUZZ_ROOT=DIR
runs the xstream_cli package of another checkout (python -m, cwd DIR):
a snapshot, while others edit the working tree.
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
for _p in (HERE, os.path.dirname(HERE)):        # tests/ (conftest) and the repository (tests.compat)
    if _p not in sys.path:
        sys.path.insert(0, _p)

from conftest import ROOT, XS, Resp3, json_key  # noqa: E402  (tests/ helpers)
from tests.compat.test_differential import split_args  # noqa: E402

MAX = 18446744073709551615
MAX_ID = b"18446744073709551615-18446744073709551615"
NOW_WINDOW_MS = 86400000          # an ID this close to now is an auto ID
REL_TOL_MS = 5000                 # tolerance for idle times
ABS_TOL_MS = 60000                # tolerance for absolute times (two runs apart)
MARKER = b"XFUZZMARK"             # splits redis-cli / xs text output per command


# =============================================================== generation

KEYS = [b"s", b"s", b"s", b"t", b"t", b"k\xff"]
GROUPS = [b"g", b"g", b"h"]
CONSUMERS = [b"alice", b"alice", b"bob", b"c\xe9"]
FIELDS = [b"f", b"f", b"v", b"name", b""]
VALUES = [b"1", b"1", b"hello", b"", b"a b", b'q"t', b"\xff\xfe", b"caf\xc3\xa9", b"x" * 300, b"line\nbreak",
          b"tab\there", b"nul\x00byte", b"-1", b"18446744073709551615"]
EDGE_IDS = [b"0-0", b"0-1", b"0", MAX_ID, b"18446744073709551615", b"18446744073709551615-0",
            b"18446744073709551614-18446744073709551615", b"18446744073709551616", b"1-18446744073709551616",
            b"99999999999999999999", b"-1", b"1-", b"-", b"+", b"abc", b"", b" 1", b"1.5", b"0x1", b"1-2-3",
            b"-0", b"+1", b"00001-00", b"1-*", b"*", b"$", b">", b"(", b"(1-0", b"((1", b"1-1\xff"]
NUMBERS = [b"0", b"1", b"2", b"3", b"5", b"10", b"-1", b"100", b"9223372036854775807", b"9223372036854775808",
           b"-9223372036854775808", b"18446744073709551615", b"abc", b"", b"1.5", b" 2", b"+3", b"0x10",
           b"1e3", b"007", b"576460752303423487", b"576460752303423488"]
JUNK = [b"FOO", b"", b"\x00", b"\xff", b"  ", b"MAXLEN", b"COUNT", b"~", b"=", b"STREAMS", b"JUSTID",
        b"caf\xc3\xa9", b"a\r\nb", b"x\x00y", b"LIMIT", b"IDS", b"1", b"-", b"*", b"$"]
JUNK_COMMANDS = [b"XFOO", b"XADDX", b"XGROUPS", b"X\xffY", b"x\r\ny", b"XINF", b"STREAMS", b"XLENGTH"]
LONG_NAME = b"XVERYLONG" * 20          # unknown-command text is cut at 128 chars


class Gen:
    """Commands for one sequence, from one seed.  A per-sequence clock
    gives explicit IDs that mostly succeed."""

    def __init__(self, seed, redis8=None):
        self.r = random.Random(seed)
        self.redis8 = self.r.random() < 0.33 if redis8 is None else redis8
        self.clock = 1
        self.ids = [b"1-0"]

    # ---------------------------------------------------------- pieces

    def p(self, prob):
        return self.r.random() < prob

    def pick(self, seq):
        return self.r.choice(seq)

    def key(self):
        return self.pick(KEYS) if not self.p(0.01) else b""

    def group(self):
        return self.pick(GROUPS) if not self.p(0.03) else self.pick(JUNK)

    def consumer(self):
        return self.pick(CONSUMERS) if not self.p(0.03) else self.pick(JUNK)

    def num(self, small=(0, 5)):
        if self.p(0.8):
            return b"%d" % self.r.randint(*small)
        return self.pick(NUMBERS)

    def word(self, u):
        """An option word, in a random case now and then."""
        if self.p(0.15):
            return u.lower()
        if self.p(0.05):
            return u[:1] + u[1:].lower()
        return u

    def new_id(self):
        """An explicit ID above the clock's last: XADD succeeds."""
        self.clock += self.r.choice((0, 1, 1, 2))
        i = b"%d-%d" % (self.clock, self.r.randint(0, 2))
        self.ids.append(i)
        return i

    def known_id(self):
        """An ID of this sequence, or near one, or an edge."""
        x = self.r.random()
        if x < 0.6:
            return self.pick(self.ids[-8:])
        if x < 0.85:
            return b"%d-%d" % (self.r.randint(0, self.clock + 1), self.r.randint(0, 2))
        if x < 0.92:
            return b"%d" % self.r.randint(0, self.clock + 1)
        return self.pick(EDGE_IDS)

    def add_id(self):
        x = self.r.random()
        if x < 0.62:
            return self.new_id()
        if x < 0.72:
            return b"*"
        if x < 0.82:
            self.clock += self.r.choice((0, 1))
            return b"%d-*" % self.clock
        if x < 0.88:
            return b"%d" % (self.clock + 1)
        if x < 0.92:
            return self.known_id()
        return self.pick(EDGE_IDS + [b"18446744073709551615-*", b"0-*", b"*"])

    def range_bound(self, low):
        x = self.r.random()
        if x < 0.35:
            return b"-" if low else b"+"
        if x < 0.55:
            return self.known_id()
        if x < 0.7:
            return b"(" + self.known_id()
        if x < 0.8:
            return b"%d" % self.r.randint(0, self.clock + 1)
        if x < 0.88:
            return b"+" if low else b"-"
        return self.pick(EDGE_IDS)

    def start_id(self):
        """XGROUP CREATE / SETID start."""
        return self.pick([b"$", b"0", b"0", b"0-0", b"$"]) if self.p(0.8) else self.known_id()

    def fields(self):
        n = self.r.choice((1, 1, 1, 2, 3))
        out = []
        for _ in range(n):
            out += [self.pick(FIELDS), self.pick(VALUES)]
        if self.p(0.04):
            out.pop()               # odd: wrong arity
        return out

    def trim(self, xtrim):
        """[MAXLEN | MINID [= | ~] threshold [LIMIT count]] as a list."""
        out = []
        strat = self.r.choice((b"MAXLEN", b"MAXLEN", b"MINID"))
        out.append(self.word(strat))
        op = self.r.random()
        approx = False
        if op < 0.25:
            out.append(b"=")
        elif op < 0.45:
            out.append(b"~")
            approx = True
        if strat == b"MAXLEN":
            out.append(self.num((0, 6)))
        else:
            out.append(self.known_id() if self.p(0.8) else b"%d" % self.r.randint(0, self.clock))
        if self.p(0.25 if approx else 0.07):
            out += [self.word(b"LIMIT"), self.num((0, 150))]
        return out

    def policy(self):
        return [self.pick([b"KEEPREF", b"DELREF", b"ACKED"])]

    def block(self):
        return [self.word(b"BLOCK"), self.pick([b"1", b"2", b"5", b"1", b"-1", b"abc"])]

    # ---------------------------------------------------------- commands

    def c_xadd(self):
        opts = []
        if self.p(0.1):
            opts.append([self.word(b"NOMKSTREAM")])
        if self.p(0.25):
            opts.append(self.trim(False))
        if self.redis8 and self.p(0.3):
            opts.append(self.policy())
        idmp = False
        if self.redis8 and self.p(0.3):
            idmp = True
            if self.p(0.5):
                opts.append([b"IDMP", self.pick([b"p1", b"p2", b""]), self.pick([b"i1", b"i2", b"i3", b""])])
            else:
                opts.append([b"IDMPAUTO", self.pick([b"p1", b"p2"])])
        self.r.shuffle(opts)
        argv = [self.word(b"XADD"), self.key()] + sum(opts, [])
        argv.append(b"*" if idmp and self.p(0.85) else self.add_id())
        return argv + self.fields()

    def c_xtrim(self):
        argv = [self.word(b"XTRIM"), self.key()] + self.trim(True)
        if self.redis8 and self.p(0.4):
            argv += self.policy()
        return argv

    def c_xdel(self):
        return [self.word(b"XDEL"), self.key()] + [self.known_id() for _ in range(self.r.choice((1, 1, 2, 3)))]

    def c_xrange(self):
        if self.p(0.5):
            argv = [self.word(b"XRANGE"), self.key(), self.range_bound(True), self.range_bound(False)]
        else:
            argv = [self.word(b"XREVRANGE"), self.key(), self.range_bound(False), self.range_bound(True)]
        if self.p(0.35):
            argv += [self.word(b"COUNT"), self.num((0, 4))]
        return argv

    def c_xlen(self):
        return [self.word(b"XLEN"), self.key()]

    def read_ids(self, n, group):
        out = []
        for _ in range(n):
            if group:
                x = self.r.random()
                out.append(b">" if x < 0.65 else b"0" if x < 0.85 else self.known_id())
            else:
                x = self.r.random()
                out.append(b"0" if x < 0.4 else b"$" if x < 0.55 else self.known_id())
        return out

    def c_xread(self):
        argv = [self.word(b"XREAD")]
        opts = []
        if self.p(0.4):
            opts.append([self.word(b"COUNT"), self.num((0, 3))])
        if self.p(0.1):
            opts.append(self.block())
        if self.redis8 and self.p(0.3):
            opts.append([self.pick([b"MAXCOUNT", b"MAXSIZE"]), self.num((1, 400))])
        self.r.shuffle(opts)
        keys = [self.key() for _ in range(self.r.choice((1, 1, 2)))]
        ids = self.read_ids(len(keys), False)
        if self.redis8 and self.p(0.3):
            ids[0] = b"+"
        return argv + sum(opts, []) + [self.word(b"STREAMS")] + keys + ids

    def c_xreadgroup(self):
        opts = [[self.word(b"GROUP"), self.group(), self.consumer()]]
        if self.p(0.4):
            opts.append([self.word(b"COUNT"), self.num((0, 3))])
        if self.p(0.1):
            opts.append(self.block())
        if self.p(0.15):
            opts.append([self.word(b"NOACK")])
        if self.redis8 and self.p(0.35):
            opts.append([b"CLAIM", self.pick([b"0", b"0", b"3600000", b"-1"])])
        if self.redis8 and self.p(0.2):
            opts.append([self.pick([b"MAXCOUNT", b"MAXSIZE"]), self.num((1, 400))])
        if self.p(0.8):
            first = opts.pop(0)
            self.r.shuffle(opts)
            opts.insert(0, first)
        else:
            self.r.shuffle(opts)
        keys = [self.key() for _ in range(self.r.choice((1, 1, 1, 2)))]
        return [self.word(b"XREADGROUP")] + sum(opts, []) + [self.word(b"STREAMS")] + keys + \
            self.read_ids(len(keys), True)

    def c_xack(self):
        return [self.word(b"XACK"), self.key(), self.group()] + [self.known_id()
                                                                  for _ in range(self.r.choice((1, 1, 2, 3)))]

    def c_xgroup(self):
        x = self.r.random()
        if x < 0.5:
            argv = [self.word(b"XGROUP"), self.word(b"CREATE"), self.key(), self.group(), self.start_id()]
            opts = []
            if self.p(0.35):
                opts.append([self.word(b"MKSTREAM")])
            if self.p(0.15):
                opts.append([self.word(b"ENTRIESREAD"), self.num((0, 12))])
            self.r.shuffle(opts)
            return argv + sum(opts, [])
        if x < 0.65:
            argv = [self.word(b"XGROUP"), self.word(b"SETID"), self.key(), self.group(), self.start_id()]
            if self.p(0.3):
                argv += [self.word(b"ENTRIESREAD"), self.num((0, 12))]
            return argv
        if x < 0.75:
            return [self.word(b"XGROUP"), self.word(b"DESTROY"), self.key(), self.group()]
        if x < 0.85:
            return [self.word(b"XGROUP"), self.word(b"CREATECONSUMER"), self.key(), self.group(), self.consumer()]
        if x < 0.95:
            return [self.word(b"XGROUP"), self.word(b"DELCONSUMER"), self.key(), self.group(), self.consumer()]
        if x < 0.98:
            return [self.word(b"XGROUP"), self.word(b"HELP")]
        return [self.word(b"XGROUP"), self.pick(JUNK_COMMANDS), self.key()]

    def c_xpending(self):
        argv = [self.word(b"XPENDING"), self.key(), self.group()]
        if self.p(0.4):
            return argv
        if self.p(0.25):
            argv += [self.word(b"IDLE"), self.pick([b"0", b"0", b"3600000", b"-5", b"abc"])]
        argv += [self.range_bound(True), self.range_bound(False), self.num((0, 12))]
        if self.p(0.4):
            argv.append(self.consumer())
        return argv

    def c_xclaim(self):
        argv = [self.word(b"XCLAIM"), self.key(), self.group(), self.consumer(),
                self.pick([b"0", b"0", b"0", b"3600000", b"-5", b"abc"])]
        argv += [self.known_id() for _ in range(self.r.choice((1, 1, 2, 3)))]
        opts = []
        if self.p(0.2):
            opts.append([self.word(b"IDLE"), self.pick([b"7200000", b"0", b"-1", b"abc"])])
        if self.p(0.15):
            opts.append([self.word(b"TIME"), self.pick([b"0", b"1", b"100000000000", b"99999999999999", b"abc"])])
        if self.p(0.15):
            opts.append([self.word(b"RETRYCOUNT"), self.pick([b"0", b"1", b"5", b"9223372036854775807", b"-1",
                                                               b"abc"])])
        if self.p(0.2):
            opts.append([self.word(b"FORCE")])
        if self.p(0.3):
            opts.append([self.word(b"JUSTID")])
        if self.p(0.1):
            opts.append([self.word(b"LASTID"), self.known_id()])
        self.r.shuffle(opts)
        return argv + sum(opts, [])

    def c_xautoclaim(self):
        argv = [self.word(b"XAUTOCLAIM"), self.key(), self.group(), self.consumer(),
                self.pick([b"0", b"0", b"0", b"3600000", b"-5", b"abc"]), self.range_bound(True)]
        opts = []
        if self.p(0.4):
            opts.append([self.word(b"COUNT"), self.num((1, 3))])
        if self.p(0.3):
            opts.append([self.word(b"JUSTID")])
        self.r.shuffle(opts)
        return argv + sum(opts, [])

    def c_xinfo(self):
        x = self.r.random()
        if x < 0.4:
            argv = [self.word(b"XINFO"), self.word(b"STREAM"), self.key()]
            if self.p(0.35):
                argv.append(self.word(b"FULL"))
                if self.p(0.3):
                    argv += [self.word(b"COUNT"), self.num((0, 3))]
            return argv
        if x < 0.7:
            return [self.word(b"XINFO"), self.word(b"GROUPS"), self.key()]
        if x < 0.95:
            return [self.word(b"XINFO"), self.word(b"CONSUMERS"), self.key(), self.group()]
        if x < 0.98:
            return [self.word(b"XINFO"), self.word(b"HELP")]
        return [self.word(b"XINFO"), self.pick(JUNK_COMMANDS)]

    def c_xsetid(self):
        argv = [self.word(b"XSETID"), self.key()]
        x = self.r.random()
        argv.append(b"%d-%d" % (self.clock + self.r.randint(0, 2), self.r.randint(0, 2)) if x < 0.5
                    else self.known_id())
        if self.p(0.3):
            argv += [self.word(b"ENTRIESADDED"), self.num((0, 12))]
        if self.p(0.3):
            argv += [self.word(b"MAXDELETEDID"), self.known_id()]
        return argv

    def c_keyspace(self):
        x = self.r.random()
        if x < 0.2:
            return [self.word(b"DEL")] + [self.key() for _ in range(self.r.choice((1, 1, 2)))]
        if x < 0.35:
            return [self.word(b"EXISTS")] + [self.key() for _ in range(self.r.choice((1, 2, 3)))]
        if x < 0.45:
            return [self.word(b"TYPE"), self.key()]
        if x < 0.6:
            return [self.word(b"KEYS"), self.pick([b"*", b"*", b"s*", b"?", b"[st]", b"k*", b"\\*", b"[^s]*",
                                                   b"**", b"", b"k?"])]
        if x < 0.8:
            argv = [self.word(b"SCAN"), self.pick([b"0", b"0", b"0", b"0", b"0", b"1", b"abc", b"-1", b"18446744073709551616",
                                                 b"+0", b" 0", b"00", b"18446744073709551615"])]
            if self.p(0.4):
                argv += [self.word(b"MATCH"), self.pick([b"*", b"s*", b"t", b"[a-z]"])]
            if self.p(0.3):
                argv += [self.word(b"COUNT"), self.pick([b"1", b"2", b"10", b"100", b"0", b"-1"])]
            if self.p(0.25):
                argv += [self.word(b"TYPE"), self.pick([b"stream", b"string", b"STREAM"])]
            return argv
        if x < 0.9:
            return [self.word(b"RENAME"), self.key(), self.key()]
        if x < 0.96:
            return [self.word(b"COPY"), self.key(), self.key()] + ([self.word(b"REPLACE")] if self.p(0.4) else [])
        if x < 0.97:
            return [self.word(b"UNLINK")] + [self.key() for _ in range(self.r.choice((1, 2)))]
        return self.c_expire()

    def c_expire(self):
        """Key expiry with times that do not depend on the clock: far off
        (2100 and later) or already past (deletes now)."""
        x = self.r.random()
        conds = [self.word(c) for c in (b"NX", b"XX", b"GT", b"LT") if self.p(0.15)]
        if x < 0.35:
            return [self.word(b"PEXPIREAT"), self.key(), self.pick([b"4102444800000", b"4102444800499",
                                                                    b"4102444900000", b"1", b"0", b"-5", b"x"])] + conds
        if x < 0.5:
            return [self.word(b"EXPIREAT"), self.key(), self.pick([b"4102444800", b"4102444700", b"100",
                                                                   b"9223372036854776"])] + conds
        if x < 0.6:
            return [self.word(b"EXPIRE"), self.key(), self.pick([b"0", b"-1", b"9223372036854775807", b"1.5"])] + conds
        if x < 0.85:
            return [self.word(self.pick([b"EXPIRETIME", b"PEXPIRETIME"])), self.key()]
        return [self.word(b"PERSIST"), self.key()]

    def c_junk(self):
        x = self.r.random()
        if x < 0.5:
            return [self.pick(JUNK_COMMANDS)] + [self.pick(JUNK) for _ in range(self.r.randint(0, 2))]
        if x < 0.6:
            return [LONG_NAME, b"a"]
        # a real command with too few arguments
        name = self.pick([b"XADD", b"XRANGE", b"XLEN", b"XDEL", b"XTRIM", b"XREAD", b"XREADGROUP", b"XACK",
                          b"XPENDING", b"XCLAIM", b"XAUTOCLAIM", b"XSETID", b"XGROUP", b"XINFO", b"DEL",
                          b"TYPE", b"KEYS", b"SCAN", b"RENAME", b"EXISTS"])
        return [self.word(name)] + [self.key() for _ in range(self.r.randint(0, 1))]

    # 8.x commands (redis8 flavour)

    def ids_block(self):
        ids = [self.known_id() for _ in range(self.r.choice((1, 1, 2)))]
        n = b"%d" % len(ids) if self.p(0.85) else self.num((0, 3))
        return [self.word(b"IDS"), n] + ids

    def c_xdelex(self):
        argv = [b"XDELEX", self.key()]
        if self.p(0.6):
            argv += self.policy()
        return argv + self.ids_block()

    def c_xackdel(self):
        argv = [b"XACKDEL", self.key(), self.group()]
        if self.p(0.6):
            argv += self.policy()
        return argv + self.ids_block()

    def c_xnack(self):
        argv = [b"XNACK", self.key(), self.group(), self.pick([b"SILENT", b"FAIL", b"FATAL", b"BAD"])]
        argv += self.ids_block()
        if self.p(0.3):
            argv += [b"RETRYCOUNT", self.num((0, 3))]
        if self.p(0.2):
            argv.append(b"FORCE")
        return argv

    def c_xcfgset(self):
        argv = [b"XCFGSET", self.key()]
        if self.p(0.7):
            argv += [b"IDMP-DURATION", self.pick([b"1", b"100", b"0", b"86401", b"abc"])]
        if self.p(0.6):
            argv += [b"IDMP-MAXSIZE", self.pick([b"1", b"2", b"100", b"0", b"10001"])]
        return argv

    def c_xidmprecord(self):
        return [b"XIDMPRECORD", self.key(), self.pick([b"p1", b"p2", b""]), self.pick([b"i1", b"i2", b""]),
                self.known_id()]

    CLASSIC = [(22, "c_xadd"), (4, "c_xtrim"), (4, "c_xdel"), (8, "c_xrange"), (3, "c_xlen"), (5, "c_xread"),
               (10, "c_xreadgroup"), (5, "c_xack"), (9, "c_xgroup"), (5, "c_xpending"), (4, "c_xclaim"),
               (4, "c_xautoclaim"), (6, "c_xinfo"), (2, "c_xsetid"), (6, "c_keyspace"), (2, "c_expire"), (2, "c_junk")]
    REDIS8 = [(4, "c_xdelex"), (4, "c_xackdel"), (4, "c_xnack"), (2, "c_xcfgset"), (1, "c_xidmprecord")]

    def command(self):
        table = self.CLASSIC + (self.REDIS8 if self.redis8 else [])
        total = sum(w for w, _ in table)
        x = self.r.uniform(0, total)
        for w, name in table:
            x -= w
            if x <= 0:
                break
        argv = getattr(self, name)()
        if self.p(0.05):
            argv = self.mutate(argv)
        return block_guard(argv)

    def mutate(self, argv):
        """Wrong arity or a junk token: drop, insert, duplicate, cut."""
        argv = list(argv)
        x = self.r.random()
        if x < 0.35 and len(argv) > 1:
            del argv[self.r.randrange(1, len(argv))]
        elif x < 0.7:
            argv.insert(self.r.randint(1, len(argv)), self.pick(JUNK))
        elif x < 0.85 and len(argv) > 1:
            i = self.r.randrange(1, len(argv))
            argv.insert(i, argv[i])
        else:
            argv = argv[:self.r.randint(1, max(1, len(argv) - 1))]
        return argv

    def prelude(self):
        """A bigger stream first (20-130 entries, so node boundaries, COUNT
        limits, cursors and the default XINFO FULL COUNT matter), often with
        a group that has read part of it."""
        key = self.pick([b"s", b"t"])
        big = self.p(0.3)
        out = []
        for _ in range(self.r.randint(20, 130)):
            v = b"x" * self.r.choice((1, 10, 300)) if big else self.pick([b"1", b"2", b"v"])
            out.append([b"XADD", key, self.new_id(), self.pick([b"f", b"g"]), v])
        if self.p(0.7):
            out.append([b"XGROUP", b"CREATE", key, b"g", b"0"])
            out.append([b"XREADGROUP", b"GROUP", b"g", self.pick(CONSUMERS[:3]), b"COUNT",
                        b"%d" % self.r.randint(1, 150), b"STREAMS", key, b">"])
        return out

    def sequence(self, n=None):
        pre = self.prelude() if n is None and self.p(0.12) else []
        n = n or self.r.randint(10, 40)
        return pre + [self.command() for _ in range(n)]


_NUMLIKE = re.compile(rb"\s*[+-]?\d+\s*")


def block_guard(argv):
    """No BLOCK that could wait long: any number after BLOCK that is not
    1..20 becomes 2 (a mutation may have moved things around)."""
    out = list(argv)
    for i, a in enumerate(out[:-1]):
        if a.upper() == b"BLOCK":
            v = out[i + 1]
            if _NUMLIKE.fullmatch(v) and not 1 <= int(v) <= 20:
                out[i + 1] = b"2"
    return out


def generate(seed, index, redis8=None, n=None):
    """Sequence ``index`` of run ``seed``: reproducible on its own."""
    return Gen("%s:%s" % (seed, index), redis8).sequence(n)


# =============================================================== rendering

_BARE = re.compile(rb"[A-Za-z0-9_.:*$><=~+()\[\]?^,/@!%&{}|#;-]+")


def quote(arg):
    """One argument in redis-cli syntax."""
    if _BARE.fullmatch(arg) and arg[:1] not in (b'"', b"'"):
        return arg
    out = bytearray(b'"')
    for c in arg:
        if c == 0x22:
            out += b'\\"'
        elif c == 0x5C:
            out += b"\\\\"
        elif c == 10:
            out += b"\\n"
        elif c == 13:
            out += b"\\r"
        elif c == 9:
            out += b"\\t"
        elif 0x20 <= c < 0x7F:
            out.append(c)
        else:
            out += b"\\x%02x" % c
    out += b'"'
    return bytes(out)


def line_of(argv, spacing=b" "):
    line = spacing.join(quote(a) for a in argv)
    assert split_args(line) == list(argv), (argv, line)
    return line


def lines_of(seq, seed=None):
    """redis-cli script lines; now and then odd spacing (both splitters
    must agree on it)."""
    r = random.Random(seed)
    out = []
    for argv in seq:
        sp = b" " if r.random() < 0.9 else r.choice([b"  ", b"\t", b" \t "])
        line = line_of(argv, sp)
        if r.random() < 0.03:
            line = b"  " + line + b"  "
        out.append(line)
    return out


def script(seq):
    """A sequence as a redis-cli script (text)."""
    return "\n".join(line_of(a).decode("utf-8", "backslashreplace") for a in seq)


# ==================================================== what 7.0 cannot answer

def _up(argv, start=1):
    return [a.upper() for a in argv[start:]]


def cmd_name(argv):
    """"XADD", "XGROUP CREATE", ..."""
    if not argv:
        return ""
    n = argv[0].upper().decode("latin-1")
    if n in ("XGROUP", "XINFO") and len(argv) > 1:
        return n + " " + argv[1].upper().decode("latin-1")
    return n


def read_options(argv):
    """XREAD / XREADGROUP options as Redis's loop reads them: (index of
    STREAMS or None, {option: index}, the word it stopped at)."""
    seen = {}
    i, n = 1, len(argv)
    while i < n:
        u, more = argv[i].upper(), n - i - 1
        if u in (b"BLOCK", b"COUNT", b"MAXCOUNT", b"MAXSIZE", b"CLAIM") and more:
            seen[u] = i
            i += 2
        elif u == b"GROUP" and more >= 2:
            seen[u] = i
            i += 3
        elif u == b"NOACK":
            seen[u] = i
            i += 1
        elif u == b"STREAMS" and more:
            return i, seen, None
        else:
            return None, seen, u
    return None, seen, None


def redis8_only(argv):
    """Why Redis 7.0 cannot answer ``argv`` as Redis 8 does (None if it can)."""
    name = argv[0].upper()
    if name in (b"XDELEX", b"XACKDEL", b"XNACK", b"XCFGSET", b"XIDMPRECORD"):
        return "%s is a Redis 8 command" % name.decode()
    u = _up(argv, 2)
    if name in (b"XADD", b"XTRIM"):
        for w in (b"KEEPREF", b"DELREF", b"ACKED", b"IDMP", b"IDMPAUTO"):
            if w in u:
                return "%s is a Redis 8.2+ option of %s" % (w.decode(), name.decode())
    if name in (b"XREAD", b"XREADGROUP"):
        s, seen, stop = read_options(argv)
        for w in (b"MAXCOUNT", b"MAXSIZE", b"CLAIM"):
            if w in seen or stop == w:
                return "%s is a Redis 8 option of %s" % (w.decode(), name.decode())
        rest = argv[s + 1:] if s is not None else []
        if name == b"XREAD" and b"+" in rest[len(rest) // 2:]:
            return "XREAD with the + ID is Redis 7.4+"
    return None


NAMES = {"XADD", "XTRIM", "XDEL", "XDELEX", "XRANGE", "XREVRANGE", "XLEN", "XREAD", "XREADGROUP", "XACK", "XACKDEL",
         "XNACK", "XGROUP", "XPENDING", "XCLAIM", "XAUTOCLAIM", "XINFO", "XSETID", "XCFGSET", "XIDMPRECORD", "DEL",
         "EXISTS", "TYPE", "KEYS", "SCAN", "RENAME", "COPY", "UNLINK", "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT",
         "EXPIRETIME", "PEXPIRETIME", "PERSIST"}
SUBS = {"CREATE", "SETID", "DESTROY", "CREATECONSUMER", "DELCONSUMER", "HELP", "STREAM", "GROUPS", "CONSUMERS"}
WRITES = {b"XADD", b"XTRIM", b"XDEL", b"XDELEX", b"XACKDEL", b"XNACK", b"XCFGSET", b"XIDMPRECORD", b"XSETID",
          b"XREADGROUP", b"XACK", b"XGROUP", b"XCLAIM", b"XAUTOCLAIM", b"DEL", b"RENAME", b"COPY", b"UNLINK",
          b"EXPIRE", b"PEXPIRE", b"EXPIREAT", b"PEXPIREAT", b"PERSIST"}


# ============================================================ normalising

class Time:
    """A wall-clock value: compared with a tolerance."""
    __slots__ = ("v", "tol")

    def __init__(self, v, tol):
        self.v, self.tol = v, tol

    def __eq__(self, other):
        if not isinstance(other, Time):
            return False
        if self.v < 0 or other.v < 0 or not isinstance(self.v, int) or not isinstance(other.v, int):
            return self.v == other.v
        return abs(self.v - other.v) <= self.tol

    def __repr__(self):
        return "T(%r)" % (self.v,)


class Dup(list):
    """A map with a repeated key, kept as [key, value] pairs."""


def _pairs_to_map(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        return dict(pairs)
    return Dup([[k, v] for k, v in pairs])


class Resp3Pairs(Resp3):
    """tests/conftest.py's client, keeping a map with a repeated key (XREAD
    STREAMS s s ...) instead of collapsing it."""

    def __init__(self, port):
        super().__init__(port)
        self.port = port
        self.sock.settimeout(30)

    def _read(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        if self.buf[:1] in (b"+", b"-"):       # may echo non-UTF-8 arguments
            line = self._line()
            text = line[1:].decode("utf-8", "surrogateescape")
            return text if line[:1] == b"+" else {"error": text}
        if self.buf[:1] in (b"%", b"|"):
            line = self._line()
            pairs = []
            for _ in range(int(line[1:])):
                k = self._read()
                pairs.append((json_key(k), self._read()))
            return _pairs_to_map(pairs)
        return super()._read()


def auto_ids(tree, table, now, key=None):
    """Auto IDs (ms within a day of ``now``) -> <idN>, numbered per stream
    key in order of first appearance: two streams may get the same auto ID
    on one side and not on the other, one stream never."""
    if isinstance(tree, str):
        m = _ID_RE.match(tree)
        if m and abs(int(m.group(1)) - now) < NOW_WINDOW_MS:
            t = table.setdefault(key, {})
            return t.setdefault(tree, "<id%d>" % (len(t) + 1))
        return tree
    if isinstance(tree, Dup):
        return Dup([[k, auto_ids(v, table, now, k)] for k, v in tree])
    if isinstance(tree, list):
        return [auto_ids(x, table, now, key) for x in tree]
    if isinstance(tree, dict):
        return {k: auto_ids(v, table, now, key) for k, v in tree.items()}
    return tree


def reply_ids(argv, reply, table, now):
    """auto_ids with the stream key a reply is about (XREAD maps: each
    stream's own)."""
    name = argv[0].upper()
    if name in (b"XREAD", b"XREADGROUP"):
        if isinstance(reply, Dup):
            return Dup([[k, auto_ids(v, table, now, k)] for k, v in reply])
        if isinstance(reply, dict) and not is_error(reply):
            return {k: auto_ids(v, table, now, k) for k, v in reply.items()}
    key = argv[2] if name == b"XINFO" and len(argv) > 2 else argv[1] if len(argv) > 1 else None
    if isinstance(key, bytes):
        key = key.decode("utf-8", "surrogateescape")
    return auto_ids(reply, table, now, key)


_ID_RE = re.compile(r"^(\d{12,})-(\d+)$")


def is_error(r):
    return isinstance(r, dict) and set(r) == {"error"}


def norm_times(argv, reply, taints):
    """Wall-clock values -> Time; dropped fields (taints); XINFO's
    radix-tree estimates out."""
    if is_error(reply):
        return reply
    name = cmd_name(argv)
    rel = lambda v: Time(v, REL_TOL_MS)  # noqa: E731
    ab = lambda v: Time(v, ABS_TOL_MS)  # noqa: E731
    if name == "XPENDING" and len(argv) > 3 and isinstance(reply, list):
        return [[e[0], e[1], rel(e[2]), e[3]] if isinstance(e, list) and len(e) == 4 else e for e in reply]
    if name == "XINFO CONSUMERS" and isinstance(reply, list):
        out = []
        for c in reply:
            if isinstance(c, dict):
                c = {k: (rel(v) if k in ("idle", "inactive") else v) for k, v in c.items()}
            out.append(c)
        return out
    if name == "XINFO GROUPS" and isinstance(reply, list) and "lag" in taints:
        return [{k: v for k, v in g.items() if k not in ("lag", "entries-read")} if isinstance(g, dict) else g
                for g in reply]
    if name == "XINFO STREAM" and isinstance(reply, dict):
        r = {k: v for k, v in reply.items() if not k.startswith("radix-tree")}
        if isinstance(r.get("groups"), list):
            groups = []
            for g in r["groups"]:
                if isinstance(g, dict):
                    g = dict(g)
                    if "lag" in taints:
                        g.pop("lag", None)
                        g.pop("entries-read", None)
                    if isinstance(g.get("pending"), list):
                        g["pending"] = [[p[0], p[1], ab(p[2]), p[3]] if isinstance(p, list) and len(p) == 4 else p
                                        for p in g["pending"]]
                    if isinstance(g.get("consumers"), list):
                        cons = []
                        for c in g["consumers"]:
                            if isinstance(c, dict):
                                c = {k: (ab(v) if k in ("seen-time", "active-time") else v) for k, v in c.items()}
                                if isinstance(c.get("pending"), list):
                                    c["pending"] = [[p[0], ab(p[1]), p[2]] if isinstance(p, list) and len(p) == 3
                                                    else p for p in c["pending"]]
                            cons.append(c)
                        g["consumers"] = cons
                groups.append(g)
            r["groups"] = groups
        return r
    return reply


def _scan_args(argv):
    count = None
    u = _up(argv, 2)
    for i in range(0, len(u) - 1, 2):
        if u[i] == b"COUNT":
            count = argv[2 + i + 1]
    return argv[1] if len(argv) > 1 else b"", count


def norm_pair(argv, ref, got):
    """Order-free replies: KEYS as sets, SCAN as sets when both finished,
    else its shape only."""
    name = cmd_name(argv)
    if name == "KEYS" and isinstance(ref, list) and isinstance(got, list):
        return sorted(ref, key=repr), sorted(got, key=repr)
    if name == "SCAN" and not is_error(ref) and not is_error(got):
        ok = lambda r: (isinstance(r, list) and len(r) == 2 and isinstance(r[0], str)  # noqa: E731
                        and isinstance(r[1], list) and all(isinstance(k, (str, dict)) for k in r[1]))
        if ok(ref) and ok(got):
            cursor, count = _scan_args(argv)
            if cursor != b"0":                   # a cursor means something else in xs
                return ["<scan>"], ["<scan>"]
            if ref[0] == "0" and got[0] == "0":
                return ["0", sorted(ref[1], key=repr)], ["0", sorted(got[1], key=repr)]
            if count is not None and not (count.isdigit() and int(count) >= 10):
                return ["<scan>"], ["<scan>"]
    return ref, got


def same(ref, got, loose):
    """Equal; with ``loose`` a map of xs may hold more keys."""
    if isinstance(ref, dict) and isinstance(got, dict):
        if is_error(ref) or is_error(got):
            return ref == got
        keys = set(ref) if loose else set(ref) | set(got)
        return all(k in got and k in ref and same(ref[k], got[k], loose) for k in keys)
    if isinstance(ref, list) and isinstance(got, list):
        return type(ref) is type(got) and len(ref) == len(got) and all(same(a, b, loose) for a, b in zip(ref, got))
    if isinstance(ref, Time) or isinstance(got, Time):
        return ref == got
    return ref == got and type(ref) is type(got)


def diff_leaves(ref, got, path=()):
    """[(path, ref leaf, xs leaf)] where they differ (for classifying)."""
    if isinstance(ref, dict) and isinstance(got, dict) and not is_error(ref) and not is_error(got):
        out = []
        for k in sorted(set(ref) | set(got), key=repr):
            if k not in ref:
                continue                      # xs may add fields (XINFO); same() decides
            out += diff_leaves(ref[k], got.get(k, "<missing>"), path + (k,))
        return out
    if isinstance(ref, list) and isinstance(got, list) and len(ref) == len(got) and type(ref) is type(got):
        out = []
        for i, (a, b) in enumerate(zip(ref, got)):
            out += diff_leaves(a, b, path + (i,))
        return out
    return [] if same(ref, got, True) else [(path, ref, got)]


def show(v):
    def conv(x):
        if isinstance(x, Time):
            return "T(%s)" % x.v
        if isinstance(x, list):
            return [conv(i) for i in x]
        if isinstance(x, dict):
            return {k: conv(i) for k, i in x.items()}
        return x
    return json.dumps(conv(v), ensure_ascii=True)


# ================================================= known differences, one place

class Check:
    """What a classifier sees about one command whose replies differ."""

    def __init__(self, argv, ref, got, raw_ref, raw_got, before, history, text=False):
        self.argv, self.ref, self.got = argv, ref, got
        self.raw_ref, self.raw_got = raw_ref, raw_got
        self.before = before            # hidden redis queries made before the command
        self.history = history          # [(argv, redis reply, xs reply)] before it
        self.text = text                # a --raw / --no-raw divergence
        self.name = cmd_name(argv)
        self.leaves = diff_leaves(ref, got) if not text else []

    def err(self, side):
        r = self.raw_ref if side == "redis" else self.raw_got
        return r["error"] if is_error(r) else None

    def both_errors(self):
        return self.err("redis") is not None and self.err("xs") is not None

    def option(self, word):
        """The argument after option ``word`` (case-insensitive), or None."""
        u = _up(self.argv, 0)
        return self.argv[u.index(word) + 1] if word in u and u.index(word) + 1 < len(u) else None

    def earlier(self, pred):
        """Did an earlier command (a Step) satisfy ``pred``?"""
        return any(pred(h) for h in self.history)


class Step:
    """One command already run: argv, redis's reply (None if not sent),
    xs's reply, and the consumers the emulation created on redis."""
    __slots__ = ("argv", "ref", "got", "created")

    def __init__(self, argv, ref, got, created=0):
        self.argv, self.ref, self.got, self.created = argv, ref, got, created

    @property
    def ok(self):
        return self.ref is not None and not is_error(self.ref)


class Known:
    """One known difference: its name, why it exists, and how to recognise
    it (``match(Check)``).  ``taint``: reply fields ignored from then on
    (state that differs on purpose).  ``after(check, redis)``: hidden
    commands that bring the redis side back to what Redis 8 would hold.
    ``emulate``: a hook on every command (see Emulation) that makes the
    redis side behave as Redis 8 so that no divergence appears at all."""

    def __init__(self, name, why, match=None, taint=(), after=None, emulate=None, new=False, stateless=False,
                 repro=None, tail=None):
        self.name, self.why = name, why
        self.repro = repro              # redis-cli lines that show it (--check-open)
        self.tail = tail                # lines only a redis-cli script knows, after repro (text pass)
        self.stateless = stateless      # a reply-only difference: keep comparing after it
        self.match = match or (lambda c: False)
        self.taint = set(taint)
        self.after = after
        self.emulate = emulate
        self.new = new

    def __repr__(self):
        return "Known(%s)" % self.name


def _xinfo_stream(redis, key):
    r = redis.call(b"XINFO", b"STREAM", key)
    return r if isinstance(r, dict) and not is_error(r) else None


def _parse_id(b):
    m = re.fullmatch(rb"(\d+)(?:-(\d+))?", b or b"")
    if not m:
        return None
    ms, seq = int(m.group(1)), int(m.group(2) or 0)
    return (ms, seq) if ms <= MAX and seq <= MAX else None


def _sid(s):
    ms, seq = s.split("-")
    return int(ms), int(seq)


# ---- emulations: hidden commands on the redis side (before / after)

def _emulate_consumer_creation(argv, reply, redis):
    """Redis 7.2+ creates the consumer on every XREADGROUP / XCLAIM /
    XAUTOCLAIM that passes its checks, served or not (7.0 only when it
    served something).  Returns the hidden commands to run after."""
    if is_error(reply):
        return []
    name = argv[0].upper()
    if name == b"XREADGROUP":
        s, seen, _ = read_options(argv)
        if b"GROUP" not in seen or s is None:
            return []
        g = seen[b"GROUP"]
        group, consumer = argv[g + 1], argv[g + 2]
        keys = argv[s + 1:s + 1 + (len(argv) - s - 1) // 2]
        return [[b"XGROUP", b"CREATECONSUMER", k, group, consumer] for k in keys]
    if name in (b"XCLAIM", b"XAUTOCLAIM"):
        return [[b"XGROUP", b"CREATECONSUMER", argv[1], argv[2], argv[3]]]
    return []


def _emulate_entriesread_clamp(argv, redis):
    """Redis 8 clamps XGROUP CREATE/SETID ENTRIESREAD to entries-added:
    rewrite the argument before 7.0 sees it.  Returns argv for redis."""
    if cmd_name(argv) not in ("XGROUP CREATE", "XGROUP SETID"):
        return argv
    u = _up(argv, 0)
    if b"ENTRIESREAD" not in u[5:]:
        return argv
    i = 5 + u[5:].index(b"ENTRIESREAD")
    if i + 1 >= len(argv) or not re.fullmatch(rb"-?[1-9]\d*|0", argv[i + 1]) \
            or not -(1 << 63) <= int(argv[i + 1]) < 1 << 63:
        return argv
    info = _xinfo_stream(redis, argv[2])
    added = info["entries-added"] if info else 0
    if int(argv[i + 1]) > added:
        argv = list(argv)
        argv[i + 1] = b"%d" % added
    return argv


def _xsetid_restore(c, redis):
    """Undo on redis an XSETID that Redis 8 refuses."""
    b = c.before.get("xinfo")
    if b:
        redis.call(b"XSETID", c.argv[1], b["last-generated-id"], b"ENTRIESADDED", b"%d" % b["entries-added"],
                   b"MAXDELETEDID", b["max-deleted-entry-id"])


def _xsetid_below_maxdel(c):
    b = c.before.get("xinfo")
    i = _parse_id(c.argv[2]) if len(c.argv) > 2 else None
    top = "ERR The ID specified in XSETID is smaller than the target stream top item"
    return (c.name == "XSETID" and c.raw_ref in ("OK", {"error": top}) and b is not None and i is not None
            and c.err("xs") == "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
            and i < _sid(b["max-deleted-entry-id"]))


def _lag_history(c):
    """Something earlier made entries-read / lag depend on the Redis
    version: entries removed (tombstones, max-deleted-entry-id, an emptied
    stream), or the counters set by hand (ENTRIESREAD, XSETID, XGROUP
    SETID)."""
    def touches(h):
        a = h.argv
        n = a[0].upper()
        if not h.ok:
            return False
        if n in (b"XDEL", b"XTRIM", b"XDELEX", b"XACKDEL", b"XSETID"):
            return True
        if n == b"XADD" and (b"MAXLEN" in _up(a) or b"MINID" in _up(a)):
            return True
        return n == b"XGROUP" and (b"ENTRIESREAD" in _up(a) or _up(a)[:1] == [b"SETID"])
    return c.earlier(touches)


def _string2ull(b):
    """Redis 8's cursor parser (util.c string2ull): string2ll, else
    strtoull with its leading spaces and sign; None if invalid."""
    if re.fullmatch(rb"0|-?[1-9][0-9]*", b) and len(b) < 21 and -(1 << 63) <= int(b) < 1 << 63:
        return int(b) if int(b) >= 0 else None
    m = re.fullmatch(rb"[ \t\n\v\f\r]*([+-]?)([0-9]+)", b)
    if not m or int(m.group(2)) > MAX:
        return None
    v = int(m.group(2))
    return (-v) & MAX if m.group(1) == b"-" else v


def scan_redis8_error(argv):
    """The error Redis 8's SCAN gives for ``argv`` (its cursor parser and
    its unknown TYPE check, in its order of checks), or None."""
    if _string2ull(argv[1]) is None:
        return "ERR invalid cursor"
    i = 2
    while i < len(argv):
        if i + 1 >= len(argv):
            return "ERR syntax error"
        o, v = argv[i].lower(), argv[i + 1]
        if o == b"count":
            if not re.fullmatch(rb"0|-?[1-9][0-9]*", v) or not -(1 << 63) <= int(v) < 1 << 63:
                return "ERR value is not an integer or out of range"
            if int(v) < 1:
                return "ERR syntax error"
        elif o == b"type":
            if v.lower() not in (b"string", b"list", b"set", b"zset", b"hash", b"stream"):
                return _cleaned("ERR unknown type name '%s'" % v.decode("utf-8", "surrogateescape"))
        elif o != b"match":
            return "ERR syntax error"
        i += 2
    return None


def _scan_redis8(c):
    """xs answers SCAN as Redis 8 does where 7.0 differs."""
    if c.name != "SCAN" or len(c.argv) < 2:
        return False
    want = scan_redis8_error(c.argv)
    if want is not None:
        return c.err("xs") == want
    x = c.raw_got
    return (c.err("xs") is None and c.err("redis") == "ERR invalid cursor" and isinstance(x, list)
            and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], list))


def _only_lag_fields(c):
    return bool(c.leaves) and all(p and p[-1] in ("lag", "entries-read") for p, _, _ in c.leaves)


INTENDED_DIFFERENCES = [
    Known("consumer_created_by_every_read_or_claim",
          "Redis 7.2+ (t_stream.c xreadCommand / xclaimCommand / xautoclaimCommand) creates the consumer "
          "whenever XREADGROUP, XCLAIM or XAUTOCLAIM passes its checks, served or not; 7.0 only when it "
          "delivered or claimed something (diffcases xreadgroup_consumer_created_even_without_entries). "
          "Emulated: after such a command redis also gets a hidden XGROUP CREATECONSUMER.",
          emulate="consumer"),
    Known("entriesread_clamped_to_entries_added",
          "Redis 8 clamps XGROUP CREATE / SETID ENTRIESREAD to the stream's entries-added (7.0 kept it and "
          "showed a negative lag; diffcases xgroup_create_entriesread_larger_than_entries_added). Emulated: "
          "the argument is clamped before redis sees it.",
          emulate="entriesread"),
    Known("xsetid_below_max_deleted_id_refused",
          "Redis 7.2+ (#11444) refuses XSETID below the stream's max-deleted-entry-id, even on an empty "
          "stream, and checks that before the top item (7.0 accepted it, or said 'smaller than the target "
          "stream top item'; diffcases xsetid_below_max_deleted_id_is_refused). The redis side is restored "
          "to its state before the command.",
          match=_xsetid_below_maxdel, after=_xsetid_restore),
    Known("xadd_ms_star_with_exhausted_seq",
          "XADD <ms>-* when <ms>-18446744073709551615 exists: Redis 8 says 'equal or smaller than the target "
          "stream top item', 7.0 'Elements are too large to be stored' (stream.tcl 'partial ID with maximal "
          "seq'; diffcases xadd_seq_overflow_at_ms_max_seq).",
          match=lambda c: (c.name == "XADD" and c.err("redis") == "ERR Elements are too large to be stored"
                           and c.err("xs") == "ERR The ID specified in XADD is equal or smaller than the "
                                              "target stream top item")),
    Known("lag_and_entries_read_redis8_rules",
          "Redis 7.2+ computes a group's lag / entries-read differently once entries were deleted or trimmed "
          "or the counters were set by hand (ENTRIESREAD, XSETID, XGROUP SETID): an emptied stream has lag 0, "
          "a group behind the first entry with no tombstone ahead has lag = length, tombstones after the "
          "group's last ID invalidate the counter (streamReplyWithCGLag, streamEstimateDistanceFromFirst"
          "EverEntry, the entries_read update in streamReplyWithRange; #13338, #13473); xs follows Redis 8 "
          "(diffcases xtrim_maxlen_keeps_entries_read_bookkeeping, xgroup_create_entriesread_larger_than_"
          "entries_added). From the first such difference on, lag and entries-read are not compared.",
          match=lambda c: c.name in ("XINFO GROUPS", "XINFO STREAM") and _only_lag_fields(c)
          and _lag_history(c), taint=("lag",)),
    Known("unbalanced_streams_error_text",
          "Redis 7.4+ names the command and the accepted IDs: \"Unbalanced 'xread' list of streams: for each "
          "stream key an ID, '+', or '$' must be specified.\" / \"Unbalanced 'xreadgroup' ... an ID or '>' "
          "...\" (#11799, #12238, #13474; 7.0: \"Unbalanced XREAD list of streams: for each stream key an ID "
          "or '$' must be specified.\" for both).",
          match=lambda c: (c.name in ("XREAD", "XREADGROUP") and c.both_errors()
                           and c.err("redis").startswith("ERR Unbalanced XREAD list of streams")
                           and c.err("xs") == "ERR Unbalanced '%s' list of streams: for each stream key an %s "
                                              "must be specified." % (c.name.lower(), "ID or '>'" if c.name ==
                                                                      "XREADGROUP" else "ID, '+', or '$'"))),
    Known("scan_cursor_and_type_redis8",
          "Redis 8 parses a SCAN cursor with string2ull (leading spaces, '+', '-0' and leading zeros are "
          "accepted, '-1' is refused; 7.0: strtoul, '-1' wraps, ' 0' refused) and refuses an unknown TYPE "
          "with \"ERR unknown type name 'foo'\" (7.0 returned nothing; db.c parseScanCursorOrReply / "
          "getObjectTypeByName, #12209). Recognised only when xs gives exactly Redis 8's error, or a scan "
          "reply where 7.0 refused the cursor.",
          match=_scan_redis8),
    Known("plus_in_xreadgroup_redis74",
          "Redis 7.4+ refuses the '+' ID in XREADGROUP with \"The + ID is meaningless in the context of "
          "XREADGROUP ...\" (t_stream.c xreadCommand, after the key and group checks, as for '$'); 7.0 did "
          "not know '+' and said 'Invalid stream ID'.",
          match=lambda c: (c.name == "XREADGROUP" and c.err("redis") == "ERR Invalid stream ID specified as "
                                                                        "stream command argument"
                           and (c.err("xs") or "").startswith("ERR The + ID is meaningless in the context of "
                                                             "XREADGROUP")),
          stateless=True),
    Known("auto_ids_in_one_millisecond",
          "Not a behaviour: two '*' IDs made in the same millisecond on one side only (a stream deleted and "
          "made again, or RENAMEd onto another, within one ms) get one <idN> label there and two on the "
          "other side.  Recognised only when every differing value is an auto-ID label on both sides.",
          match=lambda c: bool(c.leaves) and all(
              isinstance(a, str) and isinstance(b, str) and _AUTO_LABEL.match(a) and _AUTO_LABEL.match(b)
              for _, a, b in c.leaves)),
    Known("xinfo_stream_idmp_fields_in_text",
          "Redis 8.6+ XINFO STREAM prints idmp-* fields that 7.0 cannot; compared in JSON (xs may add "
          "fields), left out of the text pass.",
          match=lambda c: c.text and c.name == "XINFO STREAM"),
]


_AUTO_LABEL = re.compile(r"^<id\d+>$")


def _cleaned(text):
    """An error text as Redis sends it: an echoed argument ends at a NUL
    (C %s), trailing \r\n trimmed, the others become spaces."""
    text = re.sub("\x00[^']*", "", text).rstrip("\r\n")
    return text.replace("\r", " ").replace("\n", " ")



def _glob_only_stars(c):
    pat = c.argv[1] if c.name == "KEYS" and len(c.argv) > 1 else c.option(b"MATCH") if c.name == "SCAN" else None
    if pat is None or not pat or set(pat) != {ord("*")}:
        return False
    r, x = c.ref, c.got
    if c.name == "SCAN":
        r = r[1] if isinstance(r, list) and len(r) == 2 else r
        x = x[1] if isinstance(x, list) and len(x) == 2 else x
    return isinstance(r, list) and isinstance(x, list) and set(r) ^ set(x) == {""}


def _big_number_leaves(c):
    return bool(c.leaves) and all(any(isinstance(v, int) and not isinstance(v, bool) and (v >= 1 << 62 or v < 0)
                                      for v in (a, b)) for _, a, b in c.leaves)


def _consumer_listing(c):
    """A difference in what lists or counts consumers."""
    if c.name in ("XINFO CONSUMERS", "XGROUP CREATECONSUMER"):
        return True
    return c.name in ("XINFO GROUPS", "XINFO STREAM") and bool(c.leaves) and all(
        "consumers" in p for p, _, _ in c.leaves)


OPEN_DIVERGENCES = [
    # none: approx_trim_by_nodes (issue 10) was fixed by tracking Redis's
    # listpack nodes (storage/parts/nodes.py, tests/engine/test_nodes.py)
]

ALL_KNOWN = INTENDED_DIFFERENCES + OPEN_DIVERGENCES
EMULATIONS = {k.emulate for k in INTENDED_DIFFERENCES if k.emulate}


def classify(check):
    """The Known entry that explains ``check``, or None (a new divergence)."""
    for k in ALL_KNOWN:
        try:
            if k.match(check):
                return k
        except Exception:       # a matcher must never break a run
            continue
    return None


def signature(check):
    """What "the same divergence" means for the minimizer."""
    r, x = check.raw_ref, check.raw_got
    kind = ("text" if check.text else "error-text" if check.both_errors() else
            "error-vs-reply" if is_error(r) else "reply-vs-error" if is_error(x) else "reply")
    return (check.name, kind)


# ================================================================== running

XS_ROOT = os.environ.get("XS_FUZZ_ROOT") or ROOT   # a checkout whose xstream_cli runs (python -m)


def xs_env():
    return dict(os.environ, XS_NO_SYNC="1", NO_COLOR="1")


_TEMPLATE = []
_TEMPLATE_LOCK = __import__("threading").Lock()


def _empty_store(path):
    """A new, empty store at ``path`` (a read never creates one, and
    redis-server is running before the first command): copied from one
    made once per process by the xs under test (XTRIM of a missing key
    writes, so it makes the store, and adds nothing)."""
    with _TEMPLATE_LOCK:
        if not _TEMPLATE:
            import atexit
            t = tempfile.mkdtemp(prefix="xs-fuzz-template-")
            atexit.register(shutil.rmtree, t, True)
            subprocess.run(XS + ["--db", os.path.join(t, "store"), "XTRIM", "xs-fuzz-none", "MAXLEN", "0"],
                           capture_output=True, timeout=120, cwd=XS_ROOT, env=xs_env(), check=True)
            _TEMPLATE.append(os.path.join(t, "store"))
    shutil.copytree(_TEMPLATE[0], path, ignore=shutil.ignore_patterns("notify", "lock"))


def run_xs(lines, mode="json", timeout=120):
    """(stdout bytes, stderr text, exit status) of xs in script mode on a
    fresh store."""
    d = tempfile.mkdtemp(prefix="xs-fuzz-")
    try:
        _empty_store(os.path.join(d, "store"))
        data = b"".join(l + b"\n" for l in lines)
        try:
            p = subprocess.run(XS + ["--db", os.path.join(d, "store"), "--" + mode], input=data,
                               capture_output=True, timeout=timeout, cwd=XS_ROOT, env=xs_env())
        except subprocess.TimeoutExpired:
            return b"", "timeout after %ss" % timeout, None
        return p.stdout, p.stderr.decode("utf-8", "replace"), p.returncode
    finally:
        shutil.rmtree(d, ignore_errors=True)


def xs_json(lines):
    out, err, rc = run_xs(lines)
    replies = []
    for l in out.decode("utf-8", "surrogateescape").splitlines():
        if l.strip():
            try:
                replies.append(json.loads(l, object_pairs_hook=_pairs_to_map))
            except ValueError:
                replies.append({"unparsable": l})
    return replies, err, rc


class Divergence:
    def __init__(self, index, check, known, seq, seed_label=None):
        self.index, self.check, self.known, self.seq = index, check, known, seq
        self.label = seed_label

    @property
    def cls(self):
        if self.known is None:
            return "NEW:%s:%s" % signature(self.check)
        return self.known.name

    def describe(self):
        c = self.check
        return "%s\n    command %d: %s\n    redis: %s\n    xs:    %s" % (
            self.cls, self.index + 1, line_of(c.argv).decode("utf-8", "backslashreplace"),
            show(c.ref)[:700], show(c.got)[:700])


class Result:
    def __init__(self, seq):
        self.seq = seq
        self.divergences = []       # Divergence, in order
        self.crashes = []           # text descriptions
        self.compared = 0           # commands compared with redis
        self.skipped8 = 0           # Redis 8 commands not sent to redis
        self.stopped = None         # why comparison stopped early
        self.clean_prefix = 0       # commands compared before any divergence / stop
        self.redis_calls = []       # per command: [(argv, hidden)]
        self.emulated = 0

    @property
    def new(self):
        return [d for d in self.divergences if d.known is None]


def crash_checks(seq, replies, err, rc):
    out = []
    if rc is None:
        out.append("xs did not finish: %s" % err)
    elif rc not in (0, 1):
        out.append("xs exit status %s; stderr: %s" % (rc, err.strip()[-300:]))
    if "Traceback" in err:
        out.append("traceback on stderr: %s" % err.strip()[-600:])
    if len(replies) != len(seq):
        out.append("%d replies for %d commands; stderr: %s" % (len(replies), len(seq), err.strip()[-300:]))
    for i, r in enumerate(replies):
        if is_error(r) and "internal error" in str(r["error"]):
            out.append("command %d (%s): %s" % (i + 1, line_of(seq[i]).decode("utf-8", "backslashreplace"),
                                                r["error"][:300]))
        elif isinstance(r, dict) and "unparsable" in r:
            out.append("command %d: unparsable JSON %r" % (i + 1, r["unparsable"][:200]))
    return out


def compare_sequence(redis, seq, xs_result=None, now=None):
    """Run ``seq`` on xs (or take its (replies, stderr, rc)) and on redis;
    return a Result."""
    now = now or int(time.time() * 1000)
    res = Result(seq)
    if xs_result is None:
        xs_result = xs_json(lines_of(seq))
    replies, err, rc = xs_result
    res.crashes = crash_checks(seq, replies, err, rc)
    if len(replies) != len(seq):
        res.stopped = "reply count"
        return res
    redis.flushall()
    ref_ids, got_ids = {}, {}
    taints = set()
    history = []
    for i, argv in enumerate(seq):
        got_raw = replies[i]
        if res.stopped:
            res.redis_calls.append([])
            continue
        why8 = redis8_only(argv)
        if why8:
            res.skipped8 += 1
            res.redis_calls.append([])
            history.append(Step(argv, None, got_raw))
            if not is_error(got_raw) and argv[0].upper() in WRITES:
                res.stopped = "Redis 8 command changed state: " + why8
            continue
        calls = []
        before = {}
        sent = argv
        if "entriesread" in EMULATIONS:
            sent = _emulate_entriesread_clamp(argv, redis)
        if argv[0].upper() == b"XSETID" and len(argv) > 1:
            before["xinfo"] = _xinfo_stream(redis, argv[1])
        ref_raw = redis.call(*sent)
        calls.append((sent, False))
        if sent is not argv:
            res.emulated += 1
        created = 0
        if "consumer" in EMULATIONS:
            for h in _emulate_consumer_creation(argv, ref_raw, redis):
                if redis.call(*h) == 1:
                    created += 1
                calls.append((h, True))
        res.emulated += created
        res.compared += 1
        ref = norm_times(argv, reply_ids(argv, ref_raw, ref_ids, now), taints)
        got = norm_times(argv, reply_ids(argv, got_raw, got_ids, now), taints)
        ref, got = norm_pair(argv, ref, got)
        if is_error(got_raw) and "internal error" in str(got_raw["error"]):
            res.stopped = "xs crashed at command %d" % (i + 1)      # counted as a crash
        elif not same(ref, got, loose=argv[0].upper() == b"XINFO"):
            c = Check(argv, ref, got, ref_raw, got_raw, before, list(history))
            k = classify(c)
            res.divergences.append(Divergence(i, c, k, seq))
            if k is not None and k.after:
                k.after(c, redis)
                calls.append((None, True))
            if k is not None:
                taints |= k.taint
            if k is None or not (c.both_errors() or k.after or k.taint or k.stateless):
                res.stopped = "divergence at command %d (%s)" % (i + 1, k.name if k else "new")
        if not res.divergences and not res.stopped:
            res.clean_prefix = i + 1
        res.redis_calls.append(calls)
        history.append(Step(argv, ref_raw, got_raw, created))
    if not res.divergences and not res.stopped:
        res.clean_prefix = len(seq)
    return res


# ------------------------------------------------------------ text pass

TEXT_SKIP = {"XPENDING", "XINFO STREAM", "XINFO CONSUMERS", "KEYS", "SCAN"}
_MARK_OUT = {"raw": b"ERR unknown command 'XFUZZMARK', with args beginning with: \n\n",
             "no-raw": b"(error) ERR unknown command 'XFUZZMARK', with args beginning with: \n"}


def text_norm(b, now):
    """Auto IDs -> <auto> (the JSON pass has checked which is which)."""
    def sub(m):
        return m.group(0) if abs(int(m.group(1)) - now) >= NOW_WINDOW_MS else b"<auto>"
    return re.sub(rb"\b(\d{12,})-\d+\b", sub, b)


def redis_cli(port, lines, flag):
    data = b"".join(l + b"\n" for l in lines)
    p = subprocess.run(["redis-cli", "-p", str(port), flag], input=data, capture_output=True, timeout=120)
    return p.stdout


SCRIPT_TAILS = [[b"3 XLEN s"], [b"2 XRANGE s - + COUNT 1"], [b"quit", b"XLEN s"], [b"EXIT", b"XLEN s"],
                [b"0 XLEN s"], [b"-1 XLEN s"], [b"exit now"], [b"2 TYPE s", b"quit"]]


def text_pass(redis, res, now=None, tail=None):
    """Byte-for-byte --raw / --no-raw comparison of the clean prefix of a
    compared sequence; returns [Divergence] (text ones).  ``tail``: lines
    that only a redis-cli script knows (a leading repeat count, exit,
    quit), appended after the prefix and compared as one block."""
    now = now or int(time.time() * 1000)
    tail = list(tail or [])
    n = res.clean_prefix
    if n == 0:
        return []
    seq = res.seq[:n]
    # redis-cli: every call redis got (hidden ones too), each followed by the marker
    rlines, rmap = [], []
    for i in range(n):
        for argv, hidden in res.redis_calls[i]:
            if argv is None:
                return []           # a state restore we cannot replay in text
            rlines += [line_of(argv), MARKER]
            rmap.append(None if hidden else i)
    xlines = []
    for argv in seq:
        xlines += [line_of(argv), MARKER]
    rlines += tail
    xlines += tail
    out = []
    for mode in ("raw", "no-raw"):
        redis.flushall()
        want = redis_cli(redis.port, rlines, "--" + mode).split(_MARK_OUT[mode])
        got_b, err, rc = run_xs(xlines, mode)
        got = got_b.split(_MARK_OUT[mode])
        if len(want) != len(rmap) + 1 or len(got) != n + 1:
            c = Check(seq[-1], "chunks %d" % len(want), "chunks %d" % len(got), None, None, {}, [], text=True)
            out.append(Divergence(n - 1, c, classify(c), seq))
            break
        wanted = {rmap[j]: want[j] for j in range(len(rmap)) if rmap[j] is not None}
        for i in range(n):
            argv = seq[i]
            if redis8_only(argv) or cmd_name(argv) in TEXT_SKIP or not res.redis_calls[i]:
                continue
            w, g = text_norm(wanted.get(i, b""), now), text_norm(got[i], now)
            if w != g:
                c = Check(argv, "%s: %r" % (mode, w), "%s: %r" % (mode, g), None, None, {}, [], text=True)
                out.append(Divergence(i, c, classify(c), seq))
                break
        else:
            w, g = text_norm(want[-1], now), text_norm(got[-1], now)
            if tail and w != g:
                c = Check(split_args(tail[0]), "%s: %r" % (mode, w), "%s: %r" % (mode, g), None, None, {}, [],
                          text=True)
                out.append(Divergence(n, c, classify(c), seq + [split_args(l) for l in tail]))
    return out


# ================================================================ minimizer

def run_json(seq):
    """xs's (replies, stderr, exit status) for ``seq`` (the default "xs" of
    the minimizer; tests pass a stand-in)."""
    return xs_json(lines_of(seq))


def _reproduces(redis, seq, sig, xs=run_json):
    """Does ``seq`` still show a NEW divergence with signature ``sig``
    (or the same crash)?"""
    try:
        res = compare_sequence(redis, seq, xs(seq))
    except Exception:
        return False
    if sig[0] == "CRASH":
        return bool(res.crashes)
    if sig[0] == "CLASS":
        return any(d.cls == sig[1] for d in res.divergences)
    return any(d.known is None and signature(d.check) == sig for d in res.divergences)


def minimize(redis, seq, sig, budget_s=120, xs=run_json):
    """Delta debugging: drop chunks of commands, then single commands,
    then arguments and simpler argument values; the shortest sequence that
    still shows the divergence ``sig``."""
    deadline = time.time() + budget_s
    cur = list(seq)
    # cut everything after the first divergence of this signature
    res = compare_sequence(redis, cur, xs(cur))
    for d in res.divergences:
        if (d.cls == sig[1]) if sig[0] == "CLASS" else (d.known is None and signature(d.check) == sig):
            cur = cur[:d.index + 1]
            break
    n = 2
    while len(cur) >= 2 and time.time() < deadline:
        chunk = max(1, len(cur) // n)
        reduced = False
        for start in range(0, len(cur), chunk):
            cand = cur[:start] + cur[start + chunk:]
            if cand and _reproduces(redis, cand, sig, xs):
                cur = cand
                n = max(n - 1, 2)
                reduced = True
                break
            if time.time() > deadline:
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(cur), n * 2)
    # arguments: drop one, or make it simpler
    simpler = [b"s", b"g", b"alice", b"0", b"1", b"1-0", b"f", b"v"]
    for ci in range(len(cur)):
        j = 1
        while j < len(cur[ci]) and time.time() < deadline:
            cmd = cur[ci]
            cand = cur[:ci] + [cmd[:j] + cmd[j + 1:]] + cur[ci + 1:]
            if _reproduces(redis, cand, sig, xs):
                cur = cand
                continue
            rank = simpler.index(cmd[j]) if cmd[j] in simpler else len(simpler)
            for s in simpler[:rank]:                             # strictly simpler: this ends
                    cand = cur[:ci] + [cmd[:j] + [s] + cmd[j + 1:]] + cur[ci + 1:]
                    if _reproduces(redis, cand, sig, xs):
                        cur = cand
                        break
            j += 1
    return cur


# =================================================================== driver

class RedisServer:
    """A private redis-server on a free loopback port."""

    def __init__(self, binary="redis-server"):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.dir = tempfile.mkdtemp(prefix="xs-fuzz-redis-")
        self.proc = subprocess.Popen([binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.client = None
        for _ in range(200):
            try:
                self.client = Resp3Pairs(self.port)
                break
            except OSError:
                time.sleep(0.05)
        if self.client is None:
            self.close()
            raise RuntimeError("redis-server did not start")

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Report:
    def __init__(self):
        self.sequences = 0
        self.commands = 0
        self.compared = 0
        self.skipped8 = 0
        self.emulated = 0
        self.stopped = 0
        self.by_class = {}          # class -> count
        self.first = {}             # class -> (label, Divergence)
        self.crashes = []           # (label, text)
        self.text_checked = 0
        self.per_command = {}       # command name -> commands compared with redis
        self.flaky = []             # labels whose new divergence did not come back on a re-run

    def add(self, label, res, text_divs=()):
        self.sequences += 1
        for i, argv in enumerate(res.seq):
            if res.redis_calls[i:i + 1] and res.redis_calls[i]:
                n = cmd_name(argv)
                w = n.split(" ")
                n = n if w[0] in NAMES and (len(w) == 1 or w[1] in SUBS) else \
                    w[0] + " (junk)" if w[0] in NAMES else "(junk command)"
                self.per_command[n] = self.per_command.get(n, 0) + 1
        self.commands += len(res.seq)
        self.compared += res.compared
        self.skipped8 += res.skipped8
        self.emulated += res.emulated
        self.stopped += res.stopped is not None
        for d in list(res.divergences) + list(text_divs):
            self.by_class[d.cls] = self.by_class.get(d.cls, 0) + 1
            self.first.setdefault(d.cls, (label, d))
        for c in res.crashes:
            self.crashes.append((label, c))
            self.by_class["CRASH"] = self.by_class.get("CRASH", 0) + 1

    @property
    def new_classes(self):
        return sorted(c for c in self.by_class if c.startswith("NEW:") or c == "CRASH")

    def summary(self):
        lines = ["sequences %d, commands %d, compared with redis %d, Redis-8-only (xs crash checks only) %d, "
                 "emulated on redis %d, sequences stopped early %d, text-compared sequences %d"
                 % (self.sequences, self.commands, self.compared, self.skipped8, self.emulated, self.stopped,
                    self.text_checked)]
        lines.append("compared per command: " + ", ".join("%s %d" % kv for kv in sorted(self.per_command.items())))
        if self.flaky:
            lines.append("did not come back on a re-run (the tree changed? a race?): " + ", ".join(self.flaky))
        kinds = {k.name: ("intended" if k in INTENDED_DIFFERENCES else "open") for k in ALL_KNOWN}
        for cls in sorted(self.by_class, key=lambda c: (-self.by_class[c], c)):
            lines.append("  %6d  %-8s %s" % (self.by_class[cls], kinds.get(cls, "NEW"), cls))
        return "\n".join(lines)


def fuzz(redis, seed, count, jobs=2, raw_sample=0, start=0, progress=None, redis8=None):
    """Run ``count`` sequences of run ``seed``; returns (Report, [(label,
    Result, text divergences)] of sequences with a new divergence or a
    crash)."""
    report = Report()
    bad = []
    now = int(time.time() * 1000)
    seqs = [(("%s:%d" % (seed, i)), generate(seed, i, redis8)) for i in range(start, start + count)]
    sample = set(random.Random("sample:%s" % seed).sample(range(count), min(raw_sample, count)))
    ahead = max(1, jobs) * 2            # xs runs ahead of redis, but not far: times stay comparable
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futs = {}
        for n, (label, seq) in enumerate(seqs):
            for m in range(n, min(n + ahead, len(seqs))):
                if m not in futs:
                    futs[m] = pool.submit(xs_json, lines_of(seqs[m][1], seqs[m][0]))
            res = compare_sequence(redis, seq, futs.pop(n).result(), now)
            texts = []
            if n in sample and not res.divergences and not res.crashes:
                r = random.Random("tail:" + label)
                texts = text_pass(redis, res, now, r.choice(SCRIPT_TAILS) if r.random() < 0.3 else None)
                report.text_checked += 1
            report.add(label, res, texts)
            if res.crashes or res.new or any(d.known is None for d in texts):
                bad.append((label, res, texts))
                again = compare_sequence(redis, seq, xs_json(lines_of(seq, label)))
                if not (again.crashes or again.new or texts):
                    report.flaky.append(label)
            if progress and (n + 1) % progress == 0:
                print("... %d sequences, %s" % (n + 1, ", ".join("%s=%d" % kv for kv in sorted(
                    report.by_class.items()))), file=sys.stderr, flush=True)
    return report, bad


def describe_new(redis, label, res, texts, do_minimize, budget_s=120):
    """A report paragraph for one bad sequence (minimized if asked)."""
    out = []
    if res.crashes:
        out.append("CRASH in %s:\n    %s" % (label, "\n    ".join(res.crashes)))
        seq = minimize(redis, res.seq, ("CRASH",), budget_s) if do_minimize else res.seq
        out.append("  reproduction (redis-cli script):\n" + _indent(script(seq)))
    for d in res.new + [t for t in texts if t.known is None]:
        out.append("%s in %s\n    %s" % (d.cls, label, d.describe().split("\n", 1)[1]))
        if do_minimize and not d.check.text:
            seq = minimize(redis, res.seq, signature(d.check), budget_s)
            again = compare_sequence(redis, seq)
            last = [x for x in again.divergences if x.known is None]
            out.append("  minimized to %d command(s) (redis-cli script):\n%s" % (len(seq), _indent(script(seq))))
            if last:
                out.append("  which gives:\n    redis: %s\n    xs:    %s" % (show(last[0].check.ref)[:500],
                                                                          show(last[0].check.got)[:500]))
        else:
            out.append("  sequence (redis-cli script):\n" + _indent(script(res.seq[:d.index + 1])))
    return "\n".join(out)


def check_open(redis):
    """For every OPEN_DIVERGENCES entry: does its reproduction still show
    it?  [(name, still diverges, what it showed)]."""
    out = []
    for k in OPEN_DIVERGENCES:
        if not k.repro:
            out.append((k.name, None, "no reproduction listed"))
            continue
        seq = [split_args(l.encode("utf-8")) for l in k.repro]
        res = compare_sequence(redis, seq, run_json(seq))
        divs = [d for d in res.divergences if d.cls == k.name]
        if k.tail:
            divs += [d for d in text_pass(redis, res, tail=[l.encode() for l in k.tail]) if d.cls == k.name]
        other = [d.cls for d in res.divergences if d.cls != k.name] + ["CRASH"] * len(res.crashes)
        shown = divs[0].describe().split("\n", 1)[1] if divs else "no divergence" + (
            " (but: %s)" % ", ".join(other) if other else "")
        out.append((k.name, bool(divs), shown))
    return out


def _indent(s):
    return "\n".join("    " + l for l in s.splitlines())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sequences", type=int, default=200)
    ap.add_argument("--seed", default="1")
    ap.add_argument("--start", type=int, default=0, help="index of the first sequence")
    ap.add_argument("--minimize", action="store_true", help="minimize every new divergence")
    ap.add_argument("--raw-sample", type=int, default=0, help="sequences also compared in --raw/--no-raw")
    ap.add_argument("--jobs", type=int, default=2, help="xs processes run ahead in parallel")
    ap.add_argument("--progress", type=int, default=0, help="print counts every N sequences")
    ap.add_argument("--replay", help="SEED:INDEX: run one sequence and print it with both replies")
    ap.add_argument("--check-open", action="store_true",
                    help="run each OPEN_DIVERGENCES reproduction: which are still open, which look fixed")
    ap.add_argument("--redis-server", default="redis-server")
    ap.add_argument("--max-report", type=int, default=20, help="new divergences described at most")
    ap.add_argument("--show-known", action="store_true", help="print the first example of every known class")
    ap.add_argument("--minimize-known", action="store_true",
                    help="with --show-known: minimize the first example of every OPEN divergence")
    a = ap.parse_args(argv)
    if not shutil.which(a.redis_server):
        print("redis-server not found (apt-get install redis-server)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so that the redis-server is stopped too
    server = RedisServer(a.redis_server)
    try:
        redis = server.client
        if a.check_open:
            results = check_open(redis)
            for name, still, shown in results:
                print("%-30s %s\n    %s" % (name, {True: "STILL OPEN", False: "looks FIXED: delete the entry",
                                                None: "?"}[still], shown.replace("\n", "\n    ")))
            return 0
        if a.replay:
            seed, idx = a.replay.rsplit(":", 1)
            seq = generate(seed, int(idx))
            replies, err, rc = xs_json(lines_of(seq, a.replay))
            res = compare_sequence(redis, seq, (replies, err, rc))
            for i, argv in enumerate(seq):
                print("%3d %s" % (i + 1, line_of(argv).decode("utf-8", "backslashreplace")))
                print("      xs: %s" % show(replies[i] if i < len(replies) else "<none>")[:300])
            for d in res.divergences:
                print(d.describe())
            for c in res.crashes:
                print("CRASH", c)
            return 1 if res.new or res.crashes else 0
        t0 = time.time()
        report, bad = fuzz(redis, a.seed, a.sequences, a.jobs, a.raw_sample, a.start, a.progress)
        print(report.summary())
        print("time %.1f s" % (time.time() - t0))
        if a.show_known:
            for cls, (label, d) in sorted(report.first.items()):
                if d.known is not None:
                    print("\nfirst %s (%s):\n    %s" % (cls, label, d.describe().split("\n", 1)[1]))
                    if a.minimize_known and d.known in OPEN_DIVERGENCES and not d.check.text:
                        small = minimize(redis, d.seq, ("CLASS", cls), 120)
                        again = [x for x in compare_sequence(redis, small, run_json(small)).divergences
                                 if x.cls == cls]
                        print("  minimized (redis-cli script):\n" + _indent(script(small)))
                        if again:
                            print("  which gives:\n    redis: %s\n    xs:    %s" % (
                                show(again[0].check.ref)[:500], show(again[0].check.got)[:500]))
        described = set()
        for label, res, texts in bad:
            key = tuple(sorted({d.cls for d in res.new + [t for t in texts if t.known is None]}
                               | ({"CRASH"} if res.crashes else set())))
            if key in described or len(described) >= a.max_report:
                continue
            described.add(key)
            print()
            print(describe_new(redis, label, res, texts, a.minimize))
        return 1 if report.new_classes else 0
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
