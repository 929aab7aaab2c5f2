"""COPY through the engine (issue 26, item 6): everything a stream holds
reads back the same under the new name, and the copy lives apart from its
source.  Replies and errors against redis-server: tests/diffcases/09-keyspace.txt."""
from storage.options import AddOptions, GroupOptions, IdmpConfigOptions, IdsOptions, NackOptions, ReadOptions
from tests.harness.stores import write


def records(store, name):
    return store.run(lambda tx: list(tx.dump(name)))


def test_copy_makes_a_stream_with_the_same_records_as_its_source(store):
    for i in range(1, 6):
        write(store, lambda tx: tx.add(b"s", [b"f", b"%d" % i], AddOptions(id=(i, 0))))
    write(store, lambda tx: tx.add(b"s", [b"f", b"x"], AddOptions(idmp_pid=b"p", idmp_iid=b"i1")))
    write(store, lambda tx: tx.configure_idmp(b"s", IdmpConfigOptions(duration=300, maxsize=5)))
    write(store, lambda tx: tx.add(b"s", [b"f", b"y"], AddOptions(idmp_pid=b"p", idmp_iid=b"i2")))
    write(store, lambda tx: tx.create_group(b"s", b"g", GroupOptions(start=(0, 0))))
    write(store, lambda tx: tx.create_group(b"s", b"h", GroupOptions(start=b"$")))
    write(store, lambda tx: tx.read_group(ReadOptions(keys=(b"s",), ids=(b">",), count=3, group=b"g",
                                                      consumer=b"alice")))
    write(store, lambda tx: tx.read_group(ReadOptions(keys=(b"s",), ids=(b">",), count=1, group=b"g",
                                                      consumer=b"bob")))
    write(store, lambda tx: tx.nack(b"s", b"g", NackOptions(mode="fail", ids=((2, 0),))))
    write(store, lambda tx: tx.delete_entries(b"s", IdsOptions(ids=((4, 0),), given=1)))
    src = records(store, b"s")
    kinds = {r[0] for r in src}
    assert {"stream", "entry", "iid", "group", "consumer", "pending", "nacked"} <= kinds, kinds
    assert write(store, lambda tx: tx.copy(b"s", b"t")) == 1
    assert records(store, b"t") == src
    write(store, lambda tx: tx.add(b"t", [b"f", b"z"], AddOptions()))
    write(store, lambda tx: tx.ack(b"t", b"g", IdsOptions(ids=((1, 0),), given=1)))
    assert records(store, b"s") == src                 # the source is its own
    assert write(store, lambda tx: tx.copy(b"s", b"t")) == 0                 # exists: kept
    assert write(store, lambda tx: tx.copy(b"s", b"t", replace=True)) == 1
    assert records(store, b"t") == src
    assert write(store, lambda tx: tx.copy(b"nosuch", b"u")) == 0
    assert store.run(lambda tx: tx.exists([b"u"])) == 0
