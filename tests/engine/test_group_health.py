"""Txn.group_health (storage.verbs.health): every group's facts at a
glance, without a walk of its PEL, agree with XINFO GROUPS, XINFO STREAM
FULL (every PEL row) and XRANGE whatever sequence of group commands ran
-- NACKed entries, owned entries among them (XCLAIM ... TIME 0), deleted
and trimmed entries, consumers deleted."""
import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from storage.errors import RedisError
from storage.ids import MAX_ID, incr
from storage.options import (
    AddOptions,
    ClaimOptions,
    GroupOptions,
    IdsOptions,
    NackOptions,
    RangeOptions,
    ReadOptions,
    StreamInfoOptions,
    TrimOptions,
)
from storage.parts.pel import Pel
from storage.store import Store
from storage.txn import Txn
from tests.harness.stores import attempt, id_pair

GROUPS = st.sampled_from([b"g1", b"g2", b"g3"])
CONSUMERS = st.sampled_from([b"alice", b"bob", b"carol"])
IDS = st.lists(st.integers(1, 14), min_size=1, max_size=4).map(lambda l: tuple((i, 0) for i in l))


def expected(tx, name):
    """What group_health must say, from the walks it avoids: XINFO
    STREAM FULL (every PEL row and consumer) and an XRANGE per group."""
    full = tx.stream_info(name, StreamInfoOptions(True, 0))
    out = []
    for d in full.groups:
        nxt = tx.range(name, RangeOptions(incr(d.last_delivered_id), MAX_ID, 1, False)) \
            if d.last_delivered_id != MAX_ID else None
        out.append({"name": d.name, "consumers": len(d.consumers), "pending": d.pel_count,
                    "last_delivered_id": d.last_delivered_id, "entries_read": d.entries_read, "lag": d.lag,
                    "nacked": d.nacked_count, "next_id": id_pair(nxt[0][0]) if nxt else None,
                    "consumer_rows": [(c.name, c.seen_time, c.active_time, c.pel_count) for c in d.consumers]})
    return out


def owned_times(tx, name, group):
    """Delivery times of the owned pending entries (XPENDING's rows: a
    NACKed one has no owner)."""
    from storage.options import PendingOptions
    rows = tx.pending_range(name, group, PendingOptions(start=(0, 0), end=MAX_ID, count=10 ** 6))
    return [r for r in rows if r.consumer]


def check(store, name=b"s"):
    def look(tx):
        return tx.group_health(name, True), expected(tx, name), tx.groups_info(name)
    health, want, info = store.run(look)
    assert [h.name for h in health] == [w["name"] for w in want] == [i.name for i in info]
    for h, w, i in zip(health, want, info):
        assert (h.consumers, h.pending, h.last_delivered_id, h.entries_read, h.lag) == \
            (i.consumers, i.pending, i.last_delivered_id, i.entries_read, i.lag)
        assert h.nacked == w["nacked"]
        assert h.next_id == w["next_id"]
        assert [(c.name, c.seen_time, c.active_time, c.pel_count) for c in h.consumer_details] == w["consumer_rows"]
    return health


class HealthMachine(RuleBasedStateMachine):

    @initialize()
    def open_store(self):
        self.dir = tempfile.mkdtemp(prefix="xs-health-")
        self.store = Store(self.dir + "/store", durable=False)
        self.t = 1_700_000_000_000
        self._saved_now = Txn.__dict__["now"]
        Txn.now = staticmethod(lambda: self.t)
        self.next_id = 1
        for _ in range(3):
            self.xadd()
        for g in (b"g1", b"g2", b"g3"):
            assert self.c(lambda tx: tx.create_group(b"s", g, GroupOptions(start=(0, 0)))) is None

    def teardown(self):
        if hasattr(self, "store"):
            Txn.now = self._saved_now
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    def c(self, verb):
        r = attempt(self.store, verb)
        if isinstance(r, RedisError):
            assert not r.text.startswith("ERR internal"), r
        return r

    @rule()
    def xadd(self):
        self.c(lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(self.next_id, 0))))
        self.next_id += 1

    @rule(ms=st.integers(1, 2000))
    def tick(self, ms):
        self.t += ms

    @rule(g=GROUPS, c=CONSUMERS, count=st.integers(0, 3), noack=st.booleans())
    def read_new(self, g, c, count, noack):
        opts = ReadOptions(keys=(b"s",), ids=(b">",), count=count, group=g, consumer=c, noack=noack)
        self.c(lambda tx: tx.read_group(opts))

    @rule(g=GROUPS, c=CONSUMERS, idle=st.sampled_from([0, 500]), count=st.integers(0, 3))
    def read_claim(self, g, c, idle, count):
        opts = ReadOptions(keys=(b"s",), ids=(b">",), count=count, group=g, consumer=c, claim=idle)
        self.c(lambda tx: tx.read_group(opts))

    @rule(g=GROUPS, ids=IDS)
    def xack(self, g, ids):
        self.c(lambda tx: tx.ack(b"s", g, IdsOptions(ids=ids, given=len(ids))))

    @rule(g=GROUPS, c=CONSUMERS, ids=IDS, force=st.booleans(),
          when=st.sampled_from([{}, {"time": 0}, {"time": 1}, {"time": 2}, {"idle": 5000}]))
    def xclaim(self, g, c, ids, force, when):
        # TIME 0 / 1 / 2: an owned entry whose time key sorts among the NACKed ones
        self.c(lambda tx: tx.claim(b"s", g, c, ClaimOptions(min_idle=0, ids=ids, force=force, **when)))

    @rule(g=GROUPS, mode=st.sampled_from(["silent", "fail", "fatal"]), ids=IDS, force=st.booleans())
    def xnack(self, g, mode, ids, force):
        self.c(lambda tx: tx.nack(b"s", g, NackOptions(mode=mode, ids=ids, force=force)))

    @rule(g=GROUPS, c=CONSUMERS)
    def delconsumer(self, g, c):
        self.c(lambda tx: tx.delete_consumer(b"s", g, c))

    @rule(ids=IDS)
    def xdel(self, ids):
        self.c(lambda tx: tx.delete_entries(b"s", IdsOptions(ids=ids, given=len(ids))))

    @rule(n=st.integers(0, 6))
    def xtrim(self, n):
        self.c(lambda tx: tx.trim(b"s", TrimOptions("maxlen", n)))

    @rule(g=GROUPS, to=st.sampled_from([(0, 0), (3, 0), (10, 0), b"$"]))
    def setid(self, g, to):
        self.c(lambda tx: tx.set_group_id(b"s", g, GroupOptions(start=to)))

    @invariant()
    def agrees(self):
        if not hasattr(self, "store"):
            return
        health = check(self.store)
        for h in health:
            rows = self.store.run(lambda tx: owned_times(tx, b"s", h.name))
            # XPENDING's idle is now - delivery time: the oldest owned delivery
            want = None if not rows else self.t - max(r.idle for r in rows)
            assert h.oldest_pending_time == want, (h, rows)


HealthMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])
TestGroupHealth = HealthMachine.TestCase


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "store"), durable=False)
    yield s
    s.close()


def test_a_missing_stream_is_no_such_key(store):
    with pytest.raises(RedisError, match="no such key"):
        store.run(lambda tx: tx.group_health(b"nope"))


def test_a_stream_without_groups_has_none(store):
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    assert store.run(lambda tx: tx.group_health(b"s")) == []


def test_consumers_only_when_asked(store):
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, 0))))
    attempt(store, lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=(0, 0))))
    attempt(store, lambda tx: tx.read_group(ReadOptions(keys=(b"s",), ids=(b">",), group=b"g", consumer=b"c")))
    [h] = store.run(lambda tx: tx.group_health(b"s"))
    assert h.consumer_details is None and h.consumers == 1 and h.pending == 1 and h.next_id is None
    [h] = store.run(lambda tx: tx.group_health(b"s", True))
    assert [c.name for c in h.consumer_details] == [b"c"]


def test_no_pel_walk_however_long_the_pel(store, monkeypatch):
    """A thousand pending entries, three of them NACKed: the time index is
    read for four keys (the NACKed ones, then the oldest owned one); the
    PEL's rows and a consumer's rows are never walked."""
    attempt(store, lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=b"$", mkstream=True)))
    store.run(lambda tx: tx.add_auto_many([(b"s", [b"f", b"v"])] * 1000), write=True)
    attempt(store, lambda tx: tx.read_group(ReadOptions(keys=(b"s",), ids=(b">",), group=b"g", consumer=b"c")))
    first = attempt(store, lambda tx: tx.range(b"s", RangeOptions((0, 0), MAX_ID, 3)).decoded())
    ids = tuple(id_pair(i) for i, _ in first)
    assert attempt(store, lambda tx: tx.nack(b"s", b"g", NackOptions(mode="fail", ids=ids))) == 3
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    seen = []
    by_time = Pel.by_time

    def counted(self, g):
        for x in by_time(self, g):
            seen.append(x)
            yield x

    def refuse(*a, **k):
        raise AssertionError("a walk of the PEL")
    monkeypatch.setattr(Pel, "by_time", counted)
    monkeypatch.setattr(Pel, "items", refuse)
    monkeypatch.setattr(Pel, "owned", refuse)
    monkeypatch.setattr(Pel, "nacked", refuse)
    [h] = store.run(lambda tx: tx.group_health(b"s", True))
    assert (h.pending, h.nacked, h.lag) == (1000, 3, 1)
    assert h.oldest_pending_time is not None and len(seen) == 4
    assert h.next_id is not None and h.next_id > h.last_delivered_id
