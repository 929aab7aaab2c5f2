"""Adds whose fields are argument lists (xs serve's pipelined and queued
XADDs, the in-process client's): Txn.add_auto_many encodes a run of one
field set a column at a time (Shapes._list_set) and must store exactly
what the entry-by-entry encoding stores -- the same IDs, keys, stored
values, field sets and listpack nodes -- and fall back to it for
anything else (unsafe bytes, several field sets, odd or mixed lengths,
too many field sets for the stream)."""
import random

import pytest

from storage.parts.shapes import Shapes

T0 = 1_700_000_000_000


@pytest.fixture
def still_clock(monkeypatch):
    from storage.txn import Txn
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: T0))


def _dump(store):
    with store.env.begin() as t:
        return {name: list(t.cursor(db=db)) for name, db in sorted(store.dbs.items())}


def _add(path, batches):
    from storage.store import Store
    store = Store(str(path), durable=False)
    try:
        ids = []
        for items in batches:
            ids.append(store.run(lambda tx: tx.add_auto_many(items, each=True), write=True, savepoints=True))
        return [[i if isinstance(i, tuple) else str(i) for i in got] for got in ids], _dump(store)
    finally:
        store.close()


def _both(tmp_path, monkeypatch, batches):
    got = _add(tmp_path / "columns", batches)
    with monkeypatch.context() as m:
        m.setattr(Shapes, "_list_set", lambda self, sid, items: None)     # the entry-by-entry encoding
        want = _add(tmp_path / "entries", batches)
    return got, want


def _value(rng):
    return rng.choice([b"u%d" % rng.randrange(10 ** 6), b"%d" % rng.choice([0, 127, 128, 32768, 2 ** 63 - 1, 2 ** 64]),
                       b"x" * rng.choice([1, 63, 64, 300]), b"007", b"-1", b"", b"click", b"a b\tc"])


def _rows(rng, n, names, key=b"s"):
    return [(key, [w for name in names for w in (name, _value(rng))]) for _ in range(n)]


@pytest.mark.parametrize("n", [1, 2, 100, 101, 3000])
def test_a_run_of_argument_lists_stores_what_entry_by_entry_adds_store(tmp_path, monkeypatch, still_clock, n):
    rng = random.Random(n)
    batches = [_rows(rng, n, [b"user", b"action", b"payload"]), _rows(rng, n, [b"f"]),
               _rows(rng, n, [b"user", b"action", b"payload"])]
    got, want = _both(tmp_path, monkeypatch, batches)
    assert got == want
    assert sum(map(len, got[0])) == 3 * n


@pytest.mark.parametrize("case", ["unsafe byte", "newline", "two field sets", "two lengths", "two streams",
                                  "joined text among lists", "many field sets"])
def test_runs_the_columns_cannot_take_are_stored_entry_by_entry(tmp_path, monkeypatch, still_clock, case):
    rng = random.Random(7)
    rows = _rows(rng, 50, [b"a", b"b"])
    if case == "unsafe byte":
        rows[20][1][1] = b"x\x01y"
    elif case == "newline":
        rows[20][1][3] = b"two\nlines"
    elif case == "two field sets":
        rows[30][1][2] = b"c"
    elif case == "two lengths":
        rows[10] = (b"s", rows[10][1] + [b"z", b"1"])
    elif case == "two streams":
        rows[10] = (b"t", rows[10][1])
    elif case == "joined text among lists":
        rows[10] = (b"s", b"\n".join(rows[10][1]))
    else:                                  # a stream holds at most MAX_SHAPES field sets
        rows = [(b"s", [b"f%d" % k, b"v"]) for k in range(300)] + rows
    got, want = _both(tmp_path, monkeypatch, [rows])
    assert got == want
