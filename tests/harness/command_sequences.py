"""Random sequences of Redis commands as typed (Hypothesis strategies),
for the atomicity properties of tests/cli: a command that answers with
an error changes nothing, alone and inside a script-mode batch."""
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

MAX_ID = "18446744073709551615-18446744073709551615"

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


def clocked(fn):
    """``fn`` run with Txn.now a SteppingClock."""
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
