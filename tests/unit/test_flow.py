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
