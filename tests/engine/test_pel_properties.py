"""Stateful property: whatever sequence of group verbs runs, the three
PEL indexes (pel, cpel, ptime) agree exactly and the pel_count fields of
groups and consumers match them."""
import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from storage.errors import RedisError
from storage.ids import MAX_ID
from storage.options import (
    AddOptions,
    AutoClaimOptions,
    ClaimOptions,
    GroupOptions,
    IdsOptions,
    NackOptions,
    PendingOptions,
    ReadOptions,
    TrimOptions,
)
from storage.store import Store
from storage.txn import Txn
from tests.harness.stores import check_pel_indexes, id_pair, id_text, pel_view

GROUPS = st.sampled_from([b"g1", b"g2"])
CONSUMERS = st.sampled_from([b"alice", b"bob", b"carol"])
IDNUM = st.integers(1, 14)
IDS = st.lists(IDNUM, min_size=1, max_size=4).map(lambda l: tuple((i, 0) for i in l))
IDLE = st.sampled_from([0, 50, 200, 1000])
POLICIES = st.sampled_from(["delref", "acked", "keepref"])


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
        for g in (b"g1", b"g2"):
            assert self.c(lambda tx: tx.create_group(b"s", g, GroupOptions(start=(0, 0)))) is None

    def teardown(self):
        if hasattr(self, "store"):
            Txn.now = self._saved_now
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def c(self, verb):
        """Run one verb in its own write transaction: its result, or the
        RedisError it raised (which changed nothing)."""
        try:
            return self.store.run(verb, write=True)
        except RedisError as e:
            # no verb here may fail with anything but a Redis error reply
            assert not e.text.startswith("ERR internal"), e
            return e

    # ------------------------------------------------------------ rules

    @rule()
    def xadd(self):
        new = self.c(lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(self.next_id, 0))))
        assert id_text(new) == "%d-0" % self.next_id
        self.next_id += 1

    @rule(ms=st.integers(1, 2000))
    def tick(self, ms):
        self.t += ms

    @rule(g=GROUPS, c=CONSUMERS, count=st.integers(0, 3), noack=st.booleans())
    def read_new(self, g, c, count, noack):
        opts = ReadOptions(keys=(b"s",), ids=(b">",), count=count, group=g, consumer=c, noack=noack)
        self.c(lambda tx: tx.read_group(opts))

    @rule(g=GROUPS, c=CONSUMERS, start=st.integers(0, 10), count=st.integers(0, 3))
    def read_history(self, g, c, start, count):
        opts = ReadOptions(keys=(b"s",), ids=((start, 0),), count=count, group=g, consumer=c)
        r = self.c(lambda tx: tx.read_group(opts))
        mine = sorted(i for i, (owner, _) in pel_view(self.store, b"s", g).items() if owner == c)
        assert all(id_pair(e[0]) in mine for e in dict(r)[b"s"])

    @rule(g=GROUPS, c=CONSUMERS, idle=IDLE, count=st.integers(0, 3))
    def read_claim(self, g, c, idle, count):
        opts = ReadOptions(keys=(b"s",), ids=(b">",), count=count, group=g, consumer=c, claim=idle)
        r = self.c(lambda tx: tx.read_group(opts))
        if r:
            entries = dict(r)[b"s"]
            assert all(len(e) == 4 for e in entries)
            if count:
                assert len(entries) <= count

    @rule(g=GROUPS, ids=IDS)
    def xack(self, g, ids):
        self.c(lambda tx: tx.ack(b"s", g, IdsOptions(ids=ids, given=len(ids))))

    @rule(g=GROUPS, c=CONSUMERS, idle=IDLE, ids=IDS, force=st.booleans(), justid=st.booleans(),
          set_idle=st.sampled_from([None, 0, 500, 5000]))
    def xclaim(self, g, c, idle, ids, force, justid, set_idle):
        opts = ClaimOptions(min_idle=idle, ids=ids, idle=set_idle, force=force, justid=justid)
        self.c(lambda tx: tx.claim(b"s", g, c, opts))

    @rule(g=GROUPS, c=CONSUMERS, idle=IDLE, start=st.integers(0, 10), count=st.integers(1, 4),
          justid=st.booleans())
    def xautoclaim(self, g, c, idle, start, count, justid):
        opts = AutoClaimOptions(min_idle=idle, start=(start, 0), count=count, justid=justid)
        self.c(lambda tx: tx.autoclaim(b"s", g, c, opts))

    @rule(g=GROUPS, mode=st.sampled_from(["silent", "fail", "fatal"]), ids=IDS, force=st.booleans(),
          retry=st.sampled_from([None, 0, 3]))
    def xnack(self, g, mode, ids, force, retry):
        n = self.c(lambda tx: tx.nack(b"s", g, NackOptions(mode=mode, ids=ids, retrycount=retry, force=force)))
        assert isinstance(n, int)

    @rule(g=GROUPS, c=CONSUMERS)
    def delconsumer(self, g, c):
        self.c(lambda tx: tx.delete_consumer(b"s", g, c))

    @rule(ids=IDS)
    def xdel(self, ids):
        self.c(lambda tx: tx.delete_entries(b"s", IdsOptions(ids=ids, given=len(ids))))

    @rule(n=st.integers(0, 6), policy=POLICIES)
    def xtrim(self, n, policy):
        self.c(lambda tx: tx.trim(b"s", TrimOptions("maxlen", n, policy=policy)))

    @rule(g=GROUPS, ids=IDS, policy=POLICIES)
    def xackdel(self, g, ids, policy):
        self.c(lambda tx: tx.ack_delete(b"s", g, IdsOptions(ids=ids, given=len(ids), policy=policy)))

    @rule(ids=IDS, policy=POLICIES)
    def xdelex(self, ids, policy):
        self.c(lambda tx: tx.delete_entries_ex(b"s", IdsOptions(ids=ids, given=len(ids), policy=policy)))

    @rule(g=GROUPS, to=st.integers(0, 10))
    def setid(self, g, to):
        self.c(lambda tx: tx.set_group_id(b"s", g, GroupOptions(start=(to, 0))))

    # -------------------------------------------------------- invariants

    @invariant()
    def pel_indexes_agree(self):
        if not hasattr(self, "store"):
            return
        check_pel_indexes(self.store)
        for g in (b"g1", b"g2"):
            view = pel_view(self.store, b"s", g)
            summary = self.c(lambda tx: tx.pending_summary(b"s", g))
            assert summary.count == len(view)
            owned = {}
            for owner, _ in view.values():
                if owner:
                    owned[owner] = owned.get(owner, 0) + 1
            assert dict(summary.consumers or []) == owned
            rows = self.c(lambda tx: tx.pending_range(b"s", g, PendingOptions(start=(0, 0), end=MAX_ID, count=1000)))
            assert [id_pair(r.id) for r in rows] == sorted(view)


PelMachine.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
TestPelIndexes = PelMachine.TestCase
