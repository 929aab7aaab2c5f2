"""Txn.add_auto_many, the one verb for runs of automatic-ID adds, and
its policy for a refused item: all or nothing naming the item
(``each=False``), or each item on its own (``each=True``, in a
transaction with savepoints: script mode, xs serve)."""
import pytest

from storage.errors import RedisError
from storage.ids import U64
from storage.options import AddOptions
from tests.harness.stores import id_pair


def fill_to_the_top(store, name=b"full"):
    store.run(lambda tx: tx.add(name, [b"f", b"v"], AddOptions(id=(U64, U64))), write=True)


def test_all_or_nothing_names_the_refused_item_and_adds_none(store):
    fill_to_the_top(store)
    items = [(b"s", [b"n", b"1"]), (b"full", [b"n", b"2"]), (b"s", [b"n", b"3"])]
    with pytest.raises(RedisError) as e:
        store.run(lambda tx: tx.add_auto_many(items), write=True)
    assert e.value.item == 1 and "exhausted the last possible ID" in e.value.text
    assert store.run(lambda tx: tx.length(b"s")) == 0


def test_each_on_its_own_adds_the_others_and_gives_the_refused_its_error(store):
    fill_to_the_top(store)
    items = [(b"s", [b"n", b"1"]), (b"full", b"n\n2"), (b"s", b"n\n3")]
    with store.write() as tx:
        got = tx.add_auto_many(items, each=True)
    assert isinstance(got[1], RedisError) and "exhausted" in got[1].text
    first, third = (id_pair(g) for g in (got[0], got[2]))
    assert third > first
    assert store.run(lambda tx: tx.length(b"s")) == 2
    assert store.run(lambda tx: tx.length(b"full")) == 1


def test_each_without_a_refusal_is_the_bulk_path(store):
    with store.write() as tx:
        got = tx.add_auto_many([(b"s", [b"a", b"1"])] * 3, each=True)
    assert len(got) == 3 and all(isinstance(id_pair(g), tuple) for g in got)      # IDs, no error among them
