"""A connection's one command flow (xstream_cli.server.flow.Flow): the
steps both drivers -- the server's connections and the in-process
client's threads -- take for a client's Items, driven here by hand."""
from xstream_cli.server.flow import BLOCK, GONE, RUN, Flow, answered
from xstream_cli.server.jobs import Item, item_for
from xstream_cli.server.stats import Stats


def _items():
    return [item_for([b"XADD", b"s", b"*", b"f", b"v"]),
            item_for([b"XREAD", b"BLOCK", b"0", b"STREAMS", b"t", b"$"]),
            item_for([b"XLEN", b"s"])]


def _flow(items):
    sent = []
    return Flow(items, 2, sent.append, Stats()), sent


def test_a_blocked_read_is_waited_for_then_the_items_after_it_run_as_a_job_of_their_own():
    items = _items()
    flow, sent = _flow(items)
    steps = iter(flow)
    assert next(steps) == (RUN, items)
    blocked = (1, "cmd", "args", "wait")
    assert steps.send((["1-1"], blocked)) == (BLOCK, blocked)
    assert sent == [b"$3\r\n1-1\r\n"]                     # the reply before the wait went out first
    assert steps.send(None) == (RUN, items[2:])          # the wait timed out: a null array, then XLEN
    assert sent[1] == b"*-1\r\n"
    try:
        steps.send(([3], None))
        raise AssertionError("the flow went on after its last job")
    except StopIteration:
        pass
    assert sent[2] == b":3\r\n"


def test_a_client_gone_during_its_wait_ends_the_flow_with_nothing_more_sent():
    items = _items()
    sent = []
    steps = answered(items, 2, sent.append, Stats(), (["1-1"], (1, "cmd", "args", "wait")))
    assert sent == [b"$3\r\n1-1\r\n"]                   # the replies of the job ran already go first
    assert next(steps)[0] == BLOCK
    try:
        steps.send(GONE)
        raise AssertionError("the flow went on for a client that is gone")
    except StopIteration:
        pass
    assert sent == [b"$3\r\n1-1\r\n"]


def test_items_answered_already_need_no_job():
    flow, sent = _flow([Item(reply=7, name="x"), Item(reply=b"ok", name="y")])
    assert list(flow) == []
    assert sent == [b":7\r\n$2\r\nok\r\n"]


def test_a_job_that_ran_without_blocking_is_answered_with_no_steps_left():
    items = _items()[:1]
    sent = []
    assert answered(items, 2, sent.append, Stats(), (["1-1"], None)) is None
    assert sent == [b"$3\r\n1-1\r\n"]


def test_a_plain_add_item_is_the_item_the_general_constructor_makes():
    from xstream_cli.server.jobs import _XADD, Item, add_item, item_for
    add = (b"s", [b"f", b"v"])
    fast, general = add_item(add), Item(cmd=_XADD, args=(), plain_add=add)
    assert {k: getattr(fast, k) for k in Item.__slots__} == {k: getattr(general, k) for k in Item.__slots__}
    assert item_for([b"xadd", b"s", b"*", b"f", b"v"]).plain_add == (b"s", [b"f", b"v"])


def test_a_jobs_calls_are_counted_alike_in_bulk_and_one_by_one():
    from storage.errors import RedisError
    cases = [
        [("xadd", b"1-1"), ("xadd", b"1-2"), ("xadd", b"1-3")],                     # the bulk path
        [("xadd", b"1-1"), ("xadd", RedisError("ERR x")), ("xadd", b"1-3")],
        [("xadd", b"1-1"), ("xlen", b"1-2"), ("xadd", b"1-3")],
        [("ping", b"a"), ("ping", b"b")],
    ]
    for case in cases:
        for tracking in (False, True):
            bulk, each = Stats(), Stats()
            for st in (bulk, each):
                st.tracking = tracking
                st.commands["xadd"] = [1, 5, 0, 0]                       # seen before: the run path
            items = []
            for name, _ in case:
                it = Item(name=name)
                it.usec = 7
                items.append(it)
            replies = [r for _, r in case]
            bulk.replies(items, replies)
            for it, r in zip(items, replies):
                each.reply(it, r)
            assert (bulk.commands, bulk.errors, bulk.latency) == (each.commands, each.errors, each.latency), case


def test_a_pipeline_of_plain_adds_added_at_once_gets_each_its_id(tmp_path, monkeypatch):
    from storage.store import Store
    from storage.txn import Txn
    from xstream_cli.execution.batch import Batch
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: 1_700_000_000_000))
    adds = [(b"s", [b"f", b"%d" % k]) for k in range(5)] + [(b"t", [b"g", b"h"])]
    got = []
    for kind in ("all", "each"):
        store = Store(str(tmp_path / kind), durable=False)

        def run(tx):
            b, out = Batch(tx), [None] * len(adds)
            if kind == "all":
                b.add_all(out, adds)
            else:
                for i, (k, f) in enumerate(adds):
                    b.add(out, i, k, f)
            b.flush()
            return out
        got.append(store.run(run, write=True, savepoints=True))
        store.close()
    assert got[0] == got[1] and got[0][0] == b"1700000000000-0" and got[0][-1] == b"1700000000000-0"
    store = Store(str(tmp_path / "ro"), durable=False)
    out = [None] * 3
    store.run(lambda tx: Batch(tx, "opened read-only").add_all(out, adds[:3]), write=True)
    store.close()
    assert [str(e) for e in out] == ["READONLY You can't write against a read only store (opened read-only)"] * 3
