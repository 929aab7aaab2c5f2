"""Stateful property: whatever sequence of group commands runs, the three
PEL indexes (pel, cpel, ptime) agree exactly and the pel_count fields of
groups and consumers match them."""
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from storage.store import Store
from storage.txn import Txn
from tests._helpers import check_pel_indexes, cmd, pel_view

GROUPS = st.sampled_from(["g1", "g2"])
CONSUMERS = st.sampled_from(["alice", "bob", "carol"])
IDNUM = st.integers(1, 14)
IDS = st.lists(IDNUM, min_size=1, max_size=4).map(lambda l: ["%d-0" % i for i in l])
IDLE = st.sampled_from([0, 50, 200, 1000])


class PelMachine(RuleBasedStateMachine):

    @initialize()
    def open_store(self):
        self.dir = tempfile.mkdtemp(prefix="xs-pel-")
        self.store = Store(self.dir + "/store", durable=False)
        self.t = 1_700_000_000_000
        self._saved_now = Txn.__dict__["now"]
        Txn.now = staticmethod(lambda: self.t)
        self.next_id = 1
        for _ in range(3):
            self.xadd()
        for g in ("g1", "g2"):
            assert cmd(self.store, "XGROUP", "CREATE", "s", g, "0") == "OK"

    def teardown(self):
        if hasattr(self, "store"):
            Txn.now = self._saved_now
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def c(self, *args):
        r = cmd(self.store, *args)
        # no command here may fail with anything but a Redis error reply
        if isinstance(r, dict) and "error" in r:
            assert not r["error"].startswith("ERR internal"), r
        return r

    # ------------------------------------------------------------ rules

    @rule()
    def xadd(self):
        assert self.c("XADD", "s", "%d-0" % self.next_id, "f", "v") == "%d-0" % self.next_id
        self.next_id += 1

    @rule(ms=st.integers(1, 2000))
    def tick(self, ms):
        self.t += ms

    @rule(g=GROUPS, c=CONSUMERS, count=st.integers(0, 3), noack=st.booleans())
    def read_new(self, g, c, count, noack):
        opts = (["COUNT", str(count)] if count else []) + (["NOACK"] if noack else [])
        self.c("XREADGROUP", "GROUP", g, c, *opts, "STREAMS", "s", ">")

    @rule(g=GROUPS, c=CONSUMERS, start=st.integers(0, 10), count=st.integers(0, 3))
    def read_history(self, g, c, start, count):
        opts = ["COUNT", str(count)] if count else []
        r = self.c("XREADGROUP", "GROUP", g, c, *opts, "STREAMS", "s", str(start))
        mine = sorted(i for i, (owner, _) in pel_view(self.store, b"s", g.encode()).items()
                      if owner == c.encode())
        assert all(tuple(map(int, e[0].split("-"))) in mine for e in r["s"])

    @rule(g=GROUPS, c=CONSUMERS, idle=IDLE, count=st.integers(0, 3))
    def read_claim(self, g, c, idle, count):
        opts = ["COUNT", str(count)] if count else []
        r = self.c("XREADGROUP", "GROUP", g, c, "CLAIM", str(idle), *opts, "STREAMS", "s", ">")
        if r:
            assert all(len(e) == 4 for e in r["s"])
            if count:
                assert len(r["s"]) <= count

    @rule(g=GROUPS, ids=IDS)
    def xack(self, g, ids):
        self.c("XACK", "s", g, *ids)

    @rule(g=GROUPS, c=CONSUMERS, idle=IDLE, ids=IDS, force=st.booleans(), justid=st.booleans(),
          set_idle=st.sampled_from([None, 0, 500, 5000]))
    def xclaim(self, g, c, idle, ids, force, justid, set_idle):
        extra = (["FORCE"] if force else []) + (["JUSTID"] if justid else [])
        if set_idle is not None:
            extra += ["IDLE", str(set_idle)]
        self.c("XCLAIM", "s", g, c, str(idle), *ids, *extra)

    @rule(g=GROUPS, c=CONSUMERS, idle=IDLE, start=st.integers(0, 10), count=st.integers(1, 4),
          justid=st.booleans())
    def xautoclaim(self, g, c, idle, start, count, justid):
        self.c("XAUTOCLAIM", "s", g, c, str(idle), str(start), "COUNT", str(count),
               *(["JUSTID"] if justid else []))

    @rule(g=GROUPS, mode=st.sampled_from(["SILENT", "FAIL", "FATAL"]), ids=IDS, force=st.booleans(),
          retry=st.sampled_from([None, 0, 3]))
    def xnack(self, g, mode, ids, force, retry):
        extra = (["FORCE"] if force else []) + (["RETRYCOUNT", str(retry)] if retry is not None else [])
        n = self.c("XNACK", "s", g, mode, "IDS", str(len(ids)), *ids, *extra)
        assert isinstance(n, int)

    @rule(g=GROUPS, c=CONSUMERS)
    def delconsumer(self, g, c):
        self.c("XGROUP", "DELCONSUMER", "s", g, c)

    @rule(ids=IDS)
    def xdel(self, ids):
        self.c("XDEL", "s", *ids)

    @rule(n=st.integers(0, 6), policy=st.sampled_from(["DELREF", "ACKED", "KEEPREF"]))
    def xtrim(self, n, policy):
        self.c("XTRIM", "s", "MAXLEN", str(n), policy)

    @rule(g=GROUPS, ids=IDS, policy=st.sampled_from(["DELREF", "ACKED", "KEEPREF"]))
    def xackdel(self, g, ids, policy):
        self.c("XACKDEL", "s", g, policy, "IDS", str(len(ids)), *ids)

    @rule(ids=IDS, policy=st.sampled_from(["DELREF", "ACKED", "KEEPREF"]))
    def xdelex(self, ids, policy):
        self.c("XDELEX", "s", policy, "IDS", str(len(ids)), *ids)

    @rule(g=GROUPS, to=st.integers(0, 10))
    def setid(self, g, to):
        self.c("XGROUP", "SETID", "s", g, str(to))

    # -------------------------------------------------------- invariants

    @invariant()
    def pel_indexes_agree(self):
        if not hasattr(self, "store"):
            return
        check_pel_indexes(self.store)
        for g in ("g1", "g2"):
            view = pel_view(self.store, b"s", g.encode())
            summary = self.c("XPENDING", "s", g)
            assert summary[0] == len(view)
            owned = {}
            for owner, _ in view.values():
                if owner:
                    owned[owner.decode()] = owned.get(owner.decode(), 0) + 1
            assert dict((n, int(k)) for n, k in (summary[3] or [])) == owned
            rows = self.c("XPENDING", "s", g, "-", "+", "1000")
            assert [tuple(map(int, r[0].split("-"))) for r in rows] == sorted(view)


PelMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestPelIndexes = PelMachine.TestCase
