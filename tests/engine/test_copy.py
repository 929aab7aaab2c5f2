"""COPY through the engine (issue 26, item 6): everything a stream holds
reads back the same under the new name, and the copy lives apart from its
source.  Replies and errors against redis-server: tests/diffcases/09-keyspace.txt."""
import shlex

from xstream_cli.commands import lookup


def run(store, line):
    argv = [a.encode() for a in shlex.split(line)]
    cmd = lookup(argv)
    args = cmd.parse(argv)
    return store.run(lambda tx: cmd.run(tx, *args), write=cmd.write)


def records(store, name):
    return store.run(lambda tx: list(tx.dump(name)))


def test_copy_makes_a_stream_with_the_same_records_as_its_source(store):
    for i in range(1, 6):
        run(store, "XADD s %d-0 f %d" % (i, i))
    run(store, "XADD s IDMP p i1 * f x")
    run(store, "XCFGSET s IDMP-DURATION 300 IDMP-MAXSIZE 5")
    run(store, "XADD s IDMP p i2 * f y")
    run(store, "XGROUP CREATE s g 0")
    run(store, "XGROUP CREATE s h $")
    run(store, "XREADGROUP GROUP g alice COUNT 3 STREAMS s >")
    run(store, "XREADGROUP GROUP g bob COUNT 1 STREAMS s >")
    run(store, "XNACK s g FAIL IDS 1 2-0")
    run(store, "XDEL s 4-0")
    src = records(store, b"s")
    kinds = {r[0] for r in src}
    assert {"stream", "entry", "iid", "group", "consumer", "pending", "nacked"} <= kinds, kinds
    assert run(store, "COPY s t") == 1
    assert records(store, b"t") == src
    run(store, "XADD t * f z")
    run(store, "XACK t g 1-0")
    assert records(store, b"s") == src                 # the source is its own
    assert run(store, "COPY s t") == 0                 # exists: kept
    assert run(store, "COPY s t REPLACE") == 1
    assert records(store, b"t") == src
    assert run(store, "COPY nosuch u") == 0
    assert run(store, "EXISTS u") == 0
