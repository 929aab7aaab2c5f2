"""Each part of the engine on its own (storage.parts): the KV walks, the
stream and group record tables, the entry log, the three-index PEL, IDMP
history, reference policies, MAXSIZE budgets and trimming -- driven
directly, not through commands, and checked against simple models."""
import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from storage import codec
from storage.ids import MAX_ID, MIN_ID
from storage.options import ACKED, DELREF, KEEPREF, TrimOptions
from storage.parts import Parts
from storage.parts.refs import DELETED, KEPT, MISSING
from storage.verbs.budget import Budget, entry_size
from storage.verbs.trim import NODE_ENTRIES, trim
from tests.harness.stores import check_pel_indexes, id_text

NOW = 1_700_000_000_000


@contextlib.contextmanager
def parts(store, now=NOW, commit=True):
    """Parts on a write transaction of ``store``; flushed and committed
    at the end of the block."""
    lt = store.env.begin(write=True)
    p = Parts(lt, store.dbs, now)
    try:
        yield p
        p.flush()
        lt.commit() if commit else lt.abort()
    except BaseException:
        lt.abort()
        raise


def raw(store, name):
    with store.env.begin() as t:
        return list(t.cursor(db=store.dbs[name]))


# ===================================================================== KV

def test_kv_walks_stay_inside_their_prefix_and_range(store):
    db = store.dbs[b"meta"]
    keys = [b"a", b"ab", b"ab\x00", b"ab\xff", b"ac", b"b", b"\xff", b"\xff\xff"]
    with parts(store) as p:
        for k in keys:
            p.kv.put(db, k, k)
    with parts(store) as p:
        kv = p.kv
        assert [k for k, _ in kv.iter_prefix(db, b"ab")] == [b"ab", b"ab\x00", b"ab\xff"]
        assert list(kv.iter_prefix(db, b"ab", start=b"ab\x00", values=False)) == [b"ab\x00", b"ab\xff"]
        assert kv.first_key(db, b"ab") == b"ab" and kv.last_key(db, b"ab") == b"ab\xff"
        assert kv.last_key(db, b"\xff") == b"\xff\xff" and kv.first_key(db, b"zz") is None
        assert list(kv.iter_range(db, b"ab", b"ac", values=False)) == [b"ab", b"ab\x00", b"ab\xff", b"ac"]
        assert list(kv.iter_range(db, b"ab\x00", b"b", values=False, reverse=True)) == [b"b", b"ac", b"ab\xff",
                                                                                    b"ab\x00"]
        assert kv.nth_key(db, b"ab", 2) == b"ab\xff" and kv.nth_key(db, b"ab", 3) is None
        assert [v for _, v in kv.pairs_from(db, b"ab", b"ab", 2)] == [b"ab", b"ab\x00"]
        assert [k for k, _ in kv.pairs_from(db, b"ab", b"ab", 2, reverse=True)] == [b"ab\xff", b"ab\x00"]
        assert kv.delete_below(db, b"ab", b"ab\xff") == 2
        assert kv.delete_prefix(db, b"\xff") == 2
    assert [k for k, _ in raw(store, b"meta") if k in keys] == [b"a", b"ab\xff", b"ac", b"b"]


def test_prefix_end_is_the_first_key_after_the_prefix():
    assert codec.prefix_end(b"ab") == b"ac"
    assert codec.prefix_end(b"a\xff") == b"b"
    assert codec.prefix_end(b"\xff\xff") == b""


# ========================================================== stream records

def test_stream_records_are_written_back_only_when_they_change(store):
    with parts(store) as p:
        m = p.streams.create(b"s")
        assert m.sid == 1
        changed = p.flush()
    assert changed == {b"s"}
    before = raw(store, b"keys"), raw(store, b"meta")
    with parts(store) as p:
        p.streams.get(b"s")                     # read, not changed
        assert p.flush() == set()
    assert (raw(store, b"keys"), raw(store, b"meta")) == before
    with parts(store) as p:
        p.streams.get(b"s").entries_added = 5
        assert p.flush() == {b"s"}
    assert codec.StreamMeta.decode(raw(store, b"keys")[0][1]).entries_added == 5


def test_touch_bumps_the_change_counter_without_rewriting_the_record(store):
    with parts(store) as p:
        p.streams.create(b"s")
    keys = raw(store, b"keys")
    with parts(store) as p:
        p.streams.touch(b"s")
        assert p.streams.change_counters([b"s", b"t"]) == [b"1", None]
    assert raw(store, b"keys") == keys
    with parts(store) as p:
        assert p.streams.change_counters([b"s"]) == [b"2"]


def test_rename_moves_the_record_and_keeps_the_number(store):
    with parts(store) as p:
        m = p.streams.create(b"a")
    with parts(store) as p:
        m = p.streams.get(b"a")
        p.streams.forget(b"a")
        p.streams.adopt(b"x" * 500, m)
        assert p.flush() == {b"a", b"x" * 500}
    with parts(store) as p:
        assert p.streams.get(b"a") is None
        assert p.streams.get(b"x" * 500).sid == m.sid
        assert [n for _, n in p.streams.names()] == [b"x" * 500]


def test_a_record_that_only_gains_default_fields_is_not_a_change(store):
    db = store.dbs[b"keys"]
    with parts(store) as p:
        p.kv.put(db, codec.name_key(b"s"), codec.packb({"sid": 9}))
    before = raw(store, b"keys")
    with parts(store) as p:
        assert p.streams.get(b"s").sid == 9
        assert p.flush() == set()
    assert raw(store, b"keys") == before


# ================================================================ entry log

class LogMachine(RuleBasedStateMachine):
    """The entry log against a list: ``length`` always equals what is
    stored, and ranges answer as the model does."""

    def __init__(self):
        super().__init__()
        import tempfile

        from storage.store import Store
        self.store = Store(tempfile.mkdtemp())
        with parts(self.store) as p:
            self.sid = p.streams.create(b"s").sid
        self.model = []
        self.next = 1

    def teardown(self):
        self.store.close()

    def _m(self, p):
        return p.streams.get(b"s")

    @rule(n=st.integers(1, 5))
    def append(self, n):
        with parts(self.store) as p:
            m = self._m(p)
            for _ in range(n):
                p.log.append(m, (self.next, 0), [b"f", b"%d" % self.next])
                self.model.append((self.next, 0))
                self.next += 1

    @rule(k=st.integers(0, 30))
    def delete(self, k):
        with parts(self.store) as p:
            i = (k, 0)
            assert p.log.delete(self._m(p), i) == (i in self.model)
            if i in self.model:
                self.model.remove(i)

    @rule(n=st.integers(0, 4))
    def delete_first(self, n):
        n = min(n, len(self.model))
        with parts(self.store) as p:
            assert p.log.delete_first(self._m(p), n) == n
        del self.model[:n]

    @rule(k=st.integers(0, 30))
    def delete_below(self, k):
        with parts(self.store) as p:
            gone = p.log.delete_below(self._m(p), (k, 0))
        assert gone == sum(1 for i in self.model if i < (k, 0))
        self.model = [i for i in self.model if i >= (k, 0)]

    @rule(a=st.integers(0, 30), b=st.integers(0, 30), count=st.integers(0, 3), rev=st.booleans())
    def ranges_match(self, a, b, count, rev):
        with parts(self.store, commit=False) as p:
            got = [id_text(e[0]) for e in p.log.entries(self._m(p), (a, 0), (b, 0), count, rev)]
        want = ["%d-%d" % i for i in self.model if (a, 0) <= i <= (b, 0)]
        want = want[::-1] if rev else want
        assert got == (want[:count] if count else want)

    @invariant()
    def length_is_what_is_stored(self):
        with parts(self.store, commit=False) as p:
            m = self._m(p)
            stored = [i for i, _ in p.log.records(m)]
            assert m.length == len(stored) == len(self.model)
            assert stored == self.model
            assert p.log.first_id(m) == (self.model[0] if self.model else MIN_ID)
            assert p.log.last_id(m) == (self.model[-1] if self.model else None)


TestEntryLog = LogMachine.TestCase
TestEntryLog.settings = settings(max_examples=40, stateful_step_count=20, deadline=None)


# ==================================================================== PEL

def _group(p):
    m = p.streams.get_or_create(b"s")
    g = p.groups.get(m, b"g") or p.groups.create(m, b"g", MIN_ID, -1)
    return m, g


class PelMachine(RuleBasedStateMachine):
    """The three PEL indexes, driven through storage.parts.pel alone, against a
    dict model: after every step pel, cpel and ptime agree and the counts
    in the group and consumer records match."""

    def __init__(self):
        super().__init__()
        import tempfile

        from storage.store import Store
        self.store = Store(tempfile.mkdtemp())
        self.model = {}              # id -> (owner name or None, count)
        self.t = NOW

    def teardown(self):
        self.store.close()

    def _with(self):
        self.t += 1
        return parts(self.store, now=self.t)

    @rule(k=st.integers(1, 12), who=st.sampled_from([b"a", b"b", b"c"]))
    def deliver(self, k, who):
        with self._with() as p:
            m, g = _group(p)
            c = p.groups.seen(g, who, self.t)
            old = p.pel.get(g, (k, 0))
            p.pel.put(g, (k, 0), c.cid, self.t, (old[2] + 1) if old else 1, old)
        self.model[(k, 0)] = (who, (self.model[(k, 0)][1] + 1) if (k, 0) in self.model else 1)

    @rule(k=st.integers(1, 12), count=st.integers(0, 5))
    def nack(self, k, count):
        with self._with() as p:
            m, g = _group(p)
            p.pel.nack(g, (k, 0), count, p.pel.get(g, (k, 0)))
        self.model[(k, 0)] = (None, count)

    @rule(k=st.integers(1, 12))
    def ack(self, k):
        with self._with() as p:
            m, g = _group(p)
            assert p.pel.discard(g, (k, 0)) == ((k, 0) in self.model)
        self.model.pop((k, 0), None)

    @rule(who=st.sampled_from([b"a", b"b", b"c"]), n=st.integers(0, 5))
    def claim_oldest(self, who, n):
        with self._with() as p:
            m, g = _group(p)
            c = p.groups.seen(g, who, self.t)
            moves = [(i, p.pel.get(g, i)) for _, i in list(p.pel.by_time(g))[:n]]
            p.pel.deliver_many(g, moves, c, self.t)
        for i, (_, _, cnt) in moves:
            self.model[i] = (who, cnt + 1)

    @invariant()
    def indexes_agree_with_the_model(self):
        check_pel_indexes(self.store)
        with parts(self.store, commit=False) as p:
            m = p.streams.get(b"s")
            if m is None:
                assert not self.model
                return
            g = p.groups.get(m, b"g")
            got = {}
            for i, (cid, _, cnt) in p.pel.items(g, MIN_ID, MAX_ID):
                got[i] = (p.groups.consumer_name(g, cid) if cid else None, cnt)
            assert got == self.model
            # NACKed (unowned) entries come first in the time index
            owned = [bool(p.pel.get(g, i)[0]) for t, i in p.pel.by_time(g)]
            assert owned == sorted(owned)


TestPel = PelMachine.TestCase
TestPel.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)


# =================================================================== IDMP

def test_idmp_history_keeps_counts_evicts_the_oldest_and_expires(store):
    with parts(store) as p:
        m = p.streams.create(b"s")
        m.idmp_maxsize = 2
        for n, iid in enumerate((b"i1", b"i2", b"i3")):
            p.idmp.record(m, b"p", iid, (NOW + n, 0), NOW + n)
        assert m.idmp_stats == [1, 2, 3, 0]
        assert p.idmp.find(m, b"p", b"i1", NOW + 3) is None        # evicted, the oldest
        assert p.idmp.find(m, b"p", b"i3", NOW + 3) == (NOW + 2, 0)
        p.idmp.record(m, b"q", b"i" * 600, (NOW + 4, 0), NOW + 4)   # a key too long: hashed
        assert p.idmp.find(m, b"q", b"i" * 600, NOW + 4) == (NOW + 4, 0)
        assert m.idmp_stats[:2] == [2, 3]
        assert [(pk, i) for pk, i, _ in p.idmp.history(m)] == [
            (codec.name_key(b"p"), (NOW + 1, 0)), (codec.name_key(b"p"), (NOW + 2, 0)),
            (codec.name_key(b"q"), (NOW + 4, 0))]
    with parts(store) as p:
        m = p.streams.get(b"s")
        later = NOW + m.idmp_duration * 1000 + 3
        assert p.idmp.find(m, b"p", b"i3", later) is None           # expired on use
        assert m.idmp_stats[:2] == [1, 1]
        p.idmp.clear(m)
        assert m.idmp_stats[:2] == [0, 0]
    assert raw(store, b"idmp") == []


# ====================================================== reference policies

def _refs_setup(store):
    """s has 1-0 .. 5-0; group g delivered up to 3-0 with 2-0 pending."""
    with parts(store) as p:
        m = p.streams.create(b"s")
        for k in range(1, 6):
            p.log.append(m, (k, 0), [b"f", b"v"])
        m.last_id = (5, 0)
        g = p.groups.create(m, b"g", (3, 0), 3)
        c = p.groups.create_consumer(g, b"c", NOW)
        p.pel.put(g, (2, 0), c.cid, NOW, 1, None)


@pytest.mark.parametrize("policy,want", [
    (KEEPREF, {(1, 0): DELETED, (2, 0): DELETED, (4, 0): DELETED, (0, 5): MISSING, (9, 0): MISSING}),
    (DELREF, {(1, 0): DELETED, (2, 0): DELETED, (4, 0): DELETED, (0, 5): MISSING, (9, 0): MISSING}),
    # as Redis: ACKED asks "still referenced?" before "is it there?", so an
    # ID no group has reached yet is KEPT even when it does not exist
    (ACKED, {(1, 0): DELETED, (2, 0): KEPT, (4, 0): KEPT, (0, 5): MISSING, (9, 0): KEPT}),
])
def test_one_place_applies_each_reference_policy(store, policy, want):
    _refs_setup(store)
    with parts(store) as p:
        m = p.streams.get(b"s")
        groups = p.refs.groups_for(m, policy)
        got = {i: p.refs.delete(m, groups, i, policy) for i in want}
        g = p.groups.get(m, b"g")
        still_pending = p.pel.contains(g, (2, 0))
    assert got == want
    assert still_pending == (policy != DELREF)
    check_pel_indexes(store)


# ================================================================= budget

def test_budget_is_soft_the_first_entry_always_fits():
    rows = [(b"1-0", [b"f", b"v" * 100]), (b"2-0", [b"f", b"v"])]
    b = Budget(10)
    assert b.fit(rows) == rows[:1] and b.spent
    b = Budget(0)
    assert b.fit(rows) == rows and not b.spent
    b = Budget(entry_size(b"1-0", rows[0][1]) + entry_size(b"2-0", rows[1][1]))
    assert b.fit(rows) == rows and b.spent
    assert Budget(10**9).fit([]) == []


# ================================================================== trim

@given(n=st.integers(0, 450), maxlen=st.integers(0, 500), limit=st.sampled_from([0, 100, 150, 250]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_approximate_trim_removes_whole_chunks_and_keeps_the_threshold(tmp_path_factory, n, maxlen, limit):
    from storage.store import Store
    store = Store(str(tmp_path_factory.mktemp("trim")))
    try:
        with parts(store) as p:
            m = p.streams.create(b"s")
            p.log.append_many(m, [((k, 0), [b"f", b"v"]) for k in range(1, n + 1)])
            gone = trim(p.log, p.refs, m, TrimOptions("maxlen", maxlen, True, limit, KEEPREF))
            assert gone % NODE_ENTRIES == 0 or gone == n
            assert m.length == n - gone >= min(n, maxlen)
            assert not limit or gone <= limit
            assert m.length - maxlen < NODE_ENTRIES or (limit and gone + NODE_ENTRIES > limit)
    finally:
        store.close()


# ============================================================ group records

def test_group_records_list_in_name_order_and_remove_with_consumers(store):
    with parts(store) as p:
        m = p.streams.create(b"s")
        for name in (b"b", b"a", b"c" * 500):
            g = p.groups.create(m, name, MIN_ID, -1)
            p.groups.create_consumer(g, b"x", NOW)
        assert [g.name for g in p.groups.list(m)] == [b"a", b"b", b"c" * 500]
    with parts(store) as p:
        m = p.streams.get(b"s")
        g = p.groups.get(m, b"b")
        assert [c.name for c in p.groups.consumers(g)] == [b"x"]
        p.groups.remove(g)
        assert [g.name for g in p.groups.list(m)] == [b"a", b"c" * 500]
    with parts(store) as p:
        assert [g.name for g in p.groups.list(p.streams.get(b"s"))] == [b"a", b"c" * 500]
    assert len(raw(store, b"consumers")) == 2 and len(raw(store, b"cnames")) == 2
