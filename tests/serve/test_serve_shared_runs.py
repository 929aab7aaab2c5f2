"""xs serve runs the XREADGROUPs and XACKs of one group commit under one
savepoint (engine._BatchRun, Txn.shared) and falls back to one savepoint
each when one of them fails.  Whatever the mix of commands, clients and
failures, the replies and the store must be exactly those of running
every command on its own, one after the other."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import Store
from storage.txn import Txn
from xstream_cli.server.engine import Engine
from xstream_cli.server.jobs import Job, item_for
from xstream_cli.server.resp import encode

CLOCK = 1_700_000_000_000
IDS = [b"1-%d" % k for k in range(1, 13)]


def _setup_argvs():
    out = []
    for s in (b"s1", b"s2"):
        out += [[b"XADD", s, i, b"f", b"v" + i] for i in IDS]
        out += [[b"XGROUP", b"CREATE", s, b"g1", b"0"], [b"XGROUP", b"CREATE", s, b"g2", b"0"]]
    return out


key = st.sampled_from([b"s1", b"s2", b"nokey"])
group = st.sampled_from([b"g1", b"g2", b"nogroup"])
consumer = st.sampled_from([b"c1", b"c2", b"c3"])

xreadgroup = st.builds(
    lambda g, c, count, noack, claim, k, want: (
        [b"XREADGROUP", b"GROUP", g, c] + count + noack + claim + [b"STREAMS", k, want]),
    group, consumer,
    st.sampled_from([[], [b"COUNT", b"1"], [b"COUNT", b"2"], [b"COUNT", b"0"], [b"COUNT", b"-1"]]),
    st.sampled_from([[], [], [b"NOACK"]]),
    st.sampled_from([[], [], [b"CLAIM", b"0"]]),
    key, st.sampled_from([b">", b">", b"0", b"1-3", b"bad-id"]))
xack = st.builds(lambda k, g, ids: [b"XACK", k, g] + ids,
                 key, group, st.lists(st.sampled_from(IDS + [b"bad", b"9-9"]), min_size=1, max_size=3))
other = st.sampled_from([
    [b"XADD", b"s1", b"*", b"f", b"new"],          # a plain add: a run of the other kind
    [b"XLEN", b"s1"],
    [b"XPENDING", b"s1", b"g1"],
    [b"XREADGROUP", b"GROUP", b"g1", b"c1", b"BLOCK", b"10", b"STREAMS", b"s2", b"0"],   # history: never waits
    [b"XGROUP", b"DELCONSUMER", b"s2", b"g2", b"c2"],
])
command = st.one_of(xreadgroup, xreadgroup, xack, other)


def _run(store, jobs):
    """Run ``jobs`` (lists of argv) as ONE group commit; the replies of
    each job, encoded in RESP3.  The jobs are queued before the engine
    thread starts, so that it takes them all in one batch."""
    eng = Engine(store)
    out = []
    for argvs in jobs:
        items = [item_for(a) for a in argvs]
        eng.submit(Job(items, lambda res, items=items: out.append(
            [encode(r, 3, it.array_null) for it, r in zip(items, res[0])])))
    eng.start()
    eng.stop()
    assert eng.commits <= 1                  # one group commit (none if nothing was written)
    return out


def _state(store):
    return _run(store, [[[b"XINFO", b"STREAM", s, b"FULL"] for s in (b"s1", b"s2")]
                        + [[b"XPENDING", s, g, b"-", b"+", b"100"] for s in (b"s1", b"s2") for g in (b"g1", b"g2")]])


@pytest.fixture
def fixed_clock(monkeypatch):
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: CLOCK))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(st.lists(command, min_size=1, max_size=4), min_size=1, max_size=8))
def test_a_batch_of_reads_and_acks_answers_and_leaves_the_store_as_one_command_at_a_time(tmp_path_factory, fixed_clock,
                                                                                          jobs):
    _same_as_one_at_a_time(tmp_path_factory.mktemp("shared"), jobs)


def _same_as_one_at_a_time(base, jobs):
    """``jobs`` as one group commit answer and leave the store as each
    of their commands alone, one after the other."""
    together, alone = Store(str(base / "together")), Store(str(base / "alone"))
    try:
        for s in (together, alone):
            _run(s, [_setup_argvs()])
        got = _run(together, jobs)
        want = [[_run(alone, [[a]])[0][0] for a in argvs] for argvs in jobs]
        assert got == want
        assert _state(together) == _state(alone)
    finally:
        together.close()
        alone.close()


# A pool of workers: neighbouring reads of new entries of one stream and
# group are delivered as one run (Txn.read_group_run), whatever their
# consumers and counts; an XACK, another stream, NOACK or a missing group
# between them ends a run.
pool_read = st.builds(
    lambda c, count, noack, k, g: [b"XREADGROUP", b"GROUP", g, c, b"COUNT", count] + noack + [b"STREAMS", k, b">"],
    consumer, st.sampled_from([b"1", b"1", b"2", b"5"]), st.sampled_from([[], [], [], [b"NOACK"]]),
    st.sampled_from([b"s1", b"s1", b"s1", b"s2", b"nokey"]), st.sampled_from([b"g1", b"g1", b"g1", b"g2", b"nogroup"]))
# the group's last ID moved back: the entries a run reads may be pending already
setid = st.builds(lambda k, g, i: [b"XGROUP", b"SETID", k, g, i],
                  st.sampled_from([b"s1", b"s2"]), st.sampled_from([b"g1", b"g2"]), st.sampled_from([b"0", b"1-4"]))
pool_command = st.one_of(pool_read, pool_read, pool_read, pool_read, xack, other, setid)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(st.lists(pool_command, min_size=1, max_size=3), min_size=2, max_size=12))
def test_a_pool_of_reads_delivered_as_one_run_answers_and_leaves_the_store_as_one_at_a_time(tmp_path_factory,
                                                                                              fixed_clock, jobs):
    _same_as_one_at_a_time(tmp_path_factory.mktemp("pool"), jobs)


def test_reads_of_one_stream_in_a_group_commit_are_delivered_as_one_run(tmp_path, fixed_clock, monkeypatch):
    """Thirty clients' COUNT 1 reads, by two consumers, of a stream of
    twelve entries: one run delivers them (one call of the engine's run
    verb), the first twelve get an entry each in order, the rest null,
    as one at a time."""
    from xstream_cli.execution.batch import Batch
    runs = []
    real = Batch._call_run
    monkeypatch.setattr(Batch, "_call_run", lambda self, reads: runs.append(len(reads)) or real(self, reads))
    together, alone = Store(str(tmp_path / "together")), Store(str(tmp_path / "alone"))
    try:
        for s in (together, alone):
            _run(s, [_setup_argvs()])
        # c0 and c1 take turns; "late" reads once nothing is left: made all the same
        jobs = [[[b"XREADGROUP", b"GROUP", b"g1", b"c%d" % (k % 2) if k < 28 else b"late", b"COUNT", b"1",
                  b"STREAMS", b"s1", b">"]] for k in range(30)]
        got = _run(together, jobs)
        assert runs == [30]
        want = [[_run(alone, [[a]])[0][0] for a in argvs] for argvs in jobs]
        assert got == want
        assert [IDS[k] in got[k][0] for k in range(12)] == [True] * 12
        assert got[12:] == [[b"_\r\n"]] * 18           # RESP3 null: nothing left to deliver
        assert _state(together) == _state(alone)
        assert b"late" in _run(together, [[[b"XINFO", b"CONSUMERS", b"s1", b"g1"]]])[0][0]
    finally:
        together.close()
        alone.close()


def test_a_run_after_the_group_was_moved_back_redelivers_pending_entries_as_one_at_a_time(tmp_path, fixed_clock,
                                                                                         monkeypatch):
    """Entries 1-1 .. 1-6 pending with c1, the group's last ID set back
    to 1-2: a run of reads by c2 and c3 (one commit, a later time) takes
    1-3 .. 1-6 over from c1 and delivers 1-7 .. 1-9 new, as one read at
    a time does (t_stream.c: a delivery count of 1 again, the old
    owner's PEL and time index emptied); 1-1 and 1-2 stay c1's."""
    together, alone = Store(str(tmp_path / "together")), Store(str(tmp_path / "alone"))
    try:
        for s in (together, alone):
            _run(s, [_setup_argvs()])
            _run(s, [[[b"XREADGROUP", b"GROUP", b"g1", b"c1", b"COUNT", b"6", b"STREAMS", b"s1", b">"],
                      [b"XGROUP", b"SETID", b"s1", b"g1", b"1-2"]]])
        monkeypatch.setattr(Txn, "now", staticmethod(lambda: CLOCK + 5000))
        jobs = [[[b"XREADGROUP", b"GROUP", b"g1", b"c%d" % (2 + k % 2), b"COUNT", b"1" if k < 5 else b"2",
                  b"STREAMS", b"s1", b">"]] for k in range(6)]
        got = _run(together, jobs)
        want = [[_run(alone, [[a]])[0][0] for a in argvs] for argvs in jobs]
        assert got == want
        assert _state(together) == _state(alone)
        pending = _run(together, [[[b"XPENDING", b"s1", b"g1", b"-", b"+", b"20"]]])[0][0]
        assert pending.count(b"$2\r\nc1\r\n:5000\r\n:1\r\n") == 2      # idle since the first read
        assert pending.count(b"\r\n:0\r\n:1\r\n") == 7                   # delivered again: count 1, as Redis
    finally:
        together.close()
        alone.close()


def test_one_failing_command_in_a_run_fails_alone(tmp_path, fixed_clock):
    """The run is undone and run again one by one: the reads before and
    after the failing XACK keep their deliveries."""
    store = Store(str(tmp_path / "s"))
    try:
        _run(store, [_setup_argvs()])
        got = _run(store, [
            [[b"XREADGROUP", b"GROUP", b"g1", b"c1", b"COUNT", b"2", b"STREAMS", b"s1", b">"]],
            [[b"XACK", b"s1", b"g1", b"bad"]],
            [[b"XREADGROUP", b"GROUP", b"g1", b"c2", b"COUNT", b"1", b"STREAMS", b"s1", b">"]],
            [[b"XACK", b"s1", b"g1", b"1-1"]],
        ])
        assert got[1] == [b"-ERR Invalid stream ID specified as stream command argument\r\n"]
        assert b"1-1" in got[0][0] and b"1-2" in got[0][0] and b"1-3" in got[2][0]
        assert got[3] == [b":1\r\n"]
        pending = _run(store, [[[b"XPENDING", b"s1", b"g1"]]])[0][0]
        assert pending.startswith(b"*4\r\n:2\r\n$3\r\n1-2\r\n$3\r\n1-3\r\n")
    finally:
        store.close()


def test_config_get_reads_the_store_through_the_engine_thread_only(tmp_path):
    """The event loop never opens a transaction: CONFIG GET's store
    settings are an engine job (issue 29, item 12), so they are read under
    the engine's lock like every other command."""
    from xstream_cli.server.commands import LOCAL
    from xstream_cli.server.config import Config
    from xstream_cli.server.connection import Server
    from xstream_cli.server.jobs import Item
    store = Store(str(tmp_path / "db"))
    calls = []
    real = store.run
    store.run = lambda *a, **kw: calls.append(a) or real(*a, **kw)
    try:
        srv = Server(store, Config())
        r = LOCAL[b"CONFIG"][0](srv, None, [b"CONFIG", b"GET", b"*"])
        assert isinstance(r, Item) and r.fn is not None and not calls
        got = real(r.fn)
        names = [k for k, _ in got.pairs]
        assert b"maxclients" in names and b"stream-node-max-entries" in names
    finally:
        store.close()
