"""A command that answers with an error changes nothing -- in
single-command mode and inside a script-mode batch, where the batch's
other commands still commit -- and a batch wakes the readers of every
stream it changed.

The first tests drive the real ``xs`` (they failed before the engine
rebuild); the property tests run random command sequences through the
engine and compare every database, change counters included, before and
after each command that fails.
"""
import os
import subprocess
import time

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from storage import codec
from tests.conftest import XS

MAX_ID = "18446744073709551615-18446744073709551615"


def full_dump(store, lt=None):
    """Every database's rows, change counters included."""
    def read(t):
        return {name: list(t.cursor(db=store.dbs[name])) for name in codec.DATABASES}
    if lt is not None:
        return read(lt)
    with store.env.begin() as t:
        return read(t)


def xs(db, *args, env=None):
    e = dict(os.environ, **(env or {}))
    return subprocess.run(XS + ["--db", str(db), "--json"] + list(args), capture_output=True, env=e, timeout=60)


def open_store(db):
    from storage.store import Store
    return Store(str(db))


# ========================================================== the two defects

def test_failing_idmp_xadd_on_an_exhausted_stream_keeps_the_idmp_history(tmp_path):
    db = tmp_path / "db"
    for line in (["XADD", "s", "*", "a", "0"], ["XCFGSET", "s", "IDMP-DURATION", "1"],
                 ["XADD", "s", "IDMP", "p", "i1", "*", "a", "1"], ["XSETID", "s", MAX_ID]):
        assert xs(db, *line).returncode == 0
    time.sleep(1.3)                  # i1 expires: the next IDMP XADD would drop it first
    store = open_store(db)
    before = full_dump(store)
    store.close()
    p = xs(db, "XADD", "s", "IDMP", "p", "i2", "*", "a", "2")
    assert p.returncode == 1 and b"exhausted" in p.stderr
    store = open_store(db)
    assert full_dump(store) == before
    store.close()
    # i1's history (expired, so XINFO no longer counts it) is still stored
    assert b'"type":"iid","stream":"s","producer":"p","iid":"i1"' in xs(db, "export", "--meta", "s").stdout


# ==================================================== the atomicity property

KEYS = ["s", "t"]
IDS = ["0", "0-0", "1-0", "2", "2-0", "3-1", "5-0", "9-0", "-", "+", "$", ">", "x-1", MAX_ID, "(1-0"]
NUMS = ["0", "1", "2", "-1", "100", "abc", "86401", "9223372036854775807"]


def _readgroup(a):
    g, c, opts, k1, i1, k2, i2 = a
    if k1 == k2:
        return "XREADGROUP GROUP %s %s %s STREAMS %s %s" % (g, c, opts, k1, i1)
    return "XREADGROUP GROUP %s %s %s STREAMS %s %s %s %s" % (g, c, opts, k1, k2, i1, i2)


def _pick(*options):
    return st.sampled_from(options)


def _cmd():
    k, g, c, i, n = (st.sampled_from(KEYS), _pick("g", "h"), _pick("c1", "c2"), st.sampled_from(IDS),
                     st.sampled_from(NUMS))
    opt = _pick("", "NOMKSTREAM", "MAXLEN 1", "MAXLEN ~ 1", "MINID 2-0", "IDMP p i1", "IDMPAUTO p",
                "ACKED MAXLEN 0", "DELREF MAXLEN 1", "LIMIT 5", "MAXLEN = 0 LIMIT 2", "KEEPREF")
    pol = _pick("", "KEEPREF", "DELREF", "ACKED")
    templates = [
        st.tuples(k, opt, _pick("*", "*", "1-*", "5-0", "9-0", "0-0", "x")).map(lambda a: "XADD %s %s %s f v" % a),
        st.tuples(k, i, i).map(lambda a: "XDEL %s %s %s" % a),
        st.tuples(k, pol, i, i).map(lambda a: "XDELEX %s %s IDS 2 %s %s" % a),
        st.tuples(k, _pick("MAXLEN", "MINID"), _pick("", "~", "="), i, pol).map(lambda a: "XTRIM %s %s %s %s %s" % a),
        st.tuples(k, i, n, i).map(lambda a: "XSETID %s %s ENTRIESADDED %s MAXDELETEDID %s" % a),
        st.tuples(k, i).map(lambda a: "XSETID %s %s" % a),
        st.tuples(k, n, n).map(lambda a: "XCFGSET %s IDMP-DURATION %s IDMP-MAXSIZE %s" % a),
        st.tuples(k, g, i, _pick("", "MKSTREAM", "ENTRIESREAD 1", "MKSTREAM MKSTREAM MKSTREAM MKSTREAM"))
          .map(lambda a: "XGROUP CREATE %s %s %s %s" % a),
        st.tuples(k, g, i, _pick("", "ENTRIESREAD 2", "ENTRIESREAD -2", "x"))
          .map(lambda a: "XGROUP SETID %s %s %s %s" % a),
        st.tuples(_pick("DESTROY", "CREATECONSUMER", "DELCONSUMER"), k, g, c)
          .map(lambda a: "XGROUP %s %s %s" % (a[0], a[1], a[2]) + ("" if a[0] == "DESTROY" else " " + a[3])),
        st.tuples(g, c, _pick("", "COUNT 1", "CLAIM 0", "NOACK", "COUNT 2 CLAIM 0"), k, i, k, i).map(_readgroup),
        st.tuples(k, g, i, i).map(lambda a: "XACK %s %s %s %s" % a),
        st.tuples(k, g, pol, i).map(lambda a: "XACKDEL %s %s %s IDS 1 %s" % a),
        st.tuples(k, g, _pick("FAIL", "SILENT", "FATAL", "BAD"), i, _pick("", "FORCE", "RETRYCOUNT 3", "RETRYCOUNT x"))
          .map(lambda a: "XNACK %s %s %s IDS 1 %s %s" % a),
        st.tuples(k, g, c, n, i, _pick("", "FORCE", "JUSTID", "LASTID 9-0", "IDLE x", "BOGUS"))
          .map(lambda a: "XCLAIM %s %s %s %s %s %s" % a),
        st.tuples(k, g, c, n, i, _pick("", "COUNT 1", "JUSTID", "COUNT 0"))
          .map(lambda a: "XAUTOCLAIM %s %s %s %s %s %s" % a),
        st.tuples(k, k).map(lambda a: "RENAME %s %s" % a),
        k.map(lambda a: "DEL %s" % a),
        st.tuples(k, _pick("", "FULL", "FULL COUNT x", "BADOPT")).map(lambda a: "XINFO STREAM %s %s" % a),
        _pick("KEYS *", "SCAN 0", "SCAN x"),
        st.tuples(k, g).map(lambda a: "XPENDING %s %s" % a),
    ]
    return st.one_of(templates)


sequences = st.lists(_cmd(), min_size=1, max_size=25)


class SteppingClock:
    """Txn.now that moves 700 ms per reading: IDMP history (IDMP-DURATION
    1) expires within a sequence, so verbs that write before they fail
    get exercised."""

    def __init__(self):
        self.t = 1_700_000_000_000

    def __call__(self):
        self.t += 700
        return self.t


def _clocked(fn):
    from unittest import mock

    from storage.txn import Txn

    def run(*a, **kw):
        with mock.patch.object(Txn, "now", staticmethod(SteppingClock())):
            return fn(*a, **kw)
    return run


# the sequence of the IDMP defect: the failing XADD first drops expired history
WRITE_THEN_FAIL = ["XCFGSET s IDMP-DURATION 1", "XADD s IDMP p i1 * f v", "XADD s * f v",
                   "XSETID s " + MAX_ID, "XADD s IDMP p i2 * f v", "XADD t * f v", "XADD s * f v",
                   "XADD t * f v"]
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(sequences)
@example(["XADD s * f v"] + WRITE_THEN_FAIL)
def test_every_failing_command_leaves_the_store_byte_identical(tmp_path_factory, seq):
    """Single-command mode: each command in its own transaction."""
    from tests._helpers import cmd
    store = open_store(tmp_path_factory.mktemp("single") / "db")

    @_clocked
    def check():
        for line in seq:
            before = full_dump(store)
            r = cmd(store, *line.split())
            if isinstance(r, dict) and "error" in r:
                assert full_dump(store) == before, (line, r)
    try:
        check()
    finally:
        store.close()


