"""Script mode's bulk ingest given as one block (codec.AddBlock: the
fields of a whole block of ``XADD key * ...`` lines as one text and its
split): Txn.add_auto_many stores exactly what it stores for the same
entries given as (key, fields joined by newlines) pairs -- the same IDs,
keys, stored values, field sets and listpack nodes -- whether the block
takes the column-at-a-time path or falls back to the pairs (unsafe
bytes, several field sets, too many fields, IDs running out)."""
import random

import pytest

from storage import codec
from storage.ids import U64
from storage.options import AddOptions
from storage.parts import nodes
from storage.parts.nodes import str_size

T0 = 1_700_000_000_000


@pytest.fixture
def still_clock(monkeypatch):
    from storage.txn import Txn
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: T0))


def _block(key, entries):
    """The AddBlock of ``entries`` (field lists of one length), as script
    mode makes it."""
    text = b"\n\0\n".join(b"\n".join(f) for f in entries)
    return codec.AddBlock(key, text, text.split(b"\n"), len(entries[0]), len(entries))


def _dump(store):
    """Every record of every database of ``store``."""
    with store.env.begin() as t:
        return {name: list(t.cursor(db=db)) for name, db in sorted(store.dbs.items())}


def _both(tmp_path, key, entries, before=None):
    """Add ``entries`` to ``key`` as a block in one store and as pairs in
    another (``before(tx)`` run first in each): (IDs, dump) of each."""
    from storage.store import Store
    out = []
    for kind in ("block", "pairs"):
        store = Store(str(tmp_path / kind), durable=False)
        try:
            if before is not None:
                store.run(before, write=True)
            items = _block(key, entries) if kind == "block" else [(key, b"\n".join(f)) for f in entries]
            ids = store.run(lambda tx: tx.add_auto_many(items, each=True), write=True, savepoints=True)
            out.append(([i if isinstance(i, tuple) else i.text for i in ids], _dump(store)))
        finally:
            store.close()
    return out


def _entries(rng, n, names, value):
    return [[w for name in names for w in (name, value(rng))] for _ in range(n)]


VALUES = [
    lambda rng: b"u%d" % rng.randrange(10 ** 6),
    lambda rng: b"%d" % rng.choice([0, 1, 127, 128, 4095, 4096, 32767, 32768, 10 ** 7, 2 ** 31, 2 ** 63 - 1, 2 ** 64]),
    lambda rng: b"x" * rng.choice([1, 63, 64, 200, 5000]),
    lambda rng: rng.choice([b"007", b"0", b"-1", b"1.5", b"-", b"00"]),
    lambda rng: b"click",
]


@pytest.mark.parametrize("n", [1, 2, 99, 100, 101, 2500])
def test_a_block_stores_what_its_pairs_store(tmp_path, still_clock, n):
    rng = random.Random(n)
    for trial, value in enumerate(VALUES):
        names = [b"user", b"action", b"n"][:1 + trial % 3]
        (ids, got), (want_ids, want) = _both(tmp_path / str(trial), b"events", _entries(rng, n, names, value))
        assert ids == want_ids and len(ids) == n
        assert got == want, trial


def test_a_block_after_a_tail_of_other_names_and_a_known_field_set(tmp_path, still_clock):
    def before(tx):
        tx.add(b"s", [b"a", b"1", b"b", b"2"], AddOptions())
        tx.add(b"s", [b"user", b"u0", b"n", b"0"], AddOptions())
    rng = random.Random(3)
    entries = _entries(rng, 700, [b"user", b"n"], VALUES[0])
    (ids, got), (want_ids, want) = _both(tmp_path, b"s", entries, before)
    assert ids == want_ids and got == want


@pytest.mark.parametrize("case", ["unsafe", "field sets", "wide", "many fields"])
def test_a_block_that_falls_back_to_its_pairs(tmp_path, still_clock, case):
    rng = random.Random(5)
    entries = _entries(rng, 300, [b"user", b"n"], VALUES[0])
    if case == "unsafe":
        entries[150][1] = b"u\x01"                 # a tag byte: stored as a record
    elif case == "field sets":
        for j in range(0, 300, 7):
            entries[j][0] = b"f%d" % (j % 11)      # more field sets than a stream interns
    elif case == "many fields":
        entries = [[w for k in range(25) for w in (b"f%d" % k, b"%d" % j)] for j in range(300)]

    def before(tx):
        if case == "wide":                         # sequence numbers past 32 bits in the run
            tx.add(b"s", [b"a", b"1"], AddOptions(id=(T0 + 5, 0xFFFFFFFF - 100)))
    (ids, got), (want_ids, want) = _both(tmp_path, b"s", entries, before)
    assert ids == want_ids and got == want


def test_a_block_whose_ids_run_out_gives_each_refused_entry_its_error(tmp_path, still_clock):
    def before(tx):
        tx.add(b"s", [b"a", b"1"], AddOptions(id=(U64, U64 - 3)))
    entries = [[b"a", b"%d" % j] for j in range(10)]
    (ids, got), (want_ids, want) = _both(tmp_path, b"s", entries, before)
    assert ids == want_ids and got == want
    assert ids[:3] == [(U64, U64 - 2), (U64, U64 - 1), (U64, U64)]
    assert all("exhausted" in e for e in ids[3:])


def test_a_block_reads_as_its_pairs():
    b = _block(b"k", [[b"a", b"1", b"b", b"2"], [b"a", b"3", b"b", b"4"]])
    assert len(b) == 2 and list(b) == [(b"k", b"a\n1\nb\n2"), (b"k", b"a\n3\nb\n4")] and b[1] == (b"k", b"a\n3\nb\n4")


def test_column_sizes_of_digit_columns_with_and_without_leading_zeros():
    """The all-digit pass of ``column_sizes`` (its leading-zero test on
    the joined text) against ``str_size`` value by value, and a column
    whose first value begins as a number but which holds none."""
    rng = random.Random(11)
    odd = [b"0", b"00", b"01", b"007", b"0000000000000000001", b"10", b"100", b"1000000000000000000"]
    for trial in range(300):
        n = rng.choice([16, 17, 40, 300])
        col = [b"%d" % rng.randrange(10 ** rng.randrange(1, 19)) for _ in range(n)]
        for _ in range(trial % 4):
            col[rng.randrange(n)] = rng.choice(odd)
        sizes, lens = nodes.column_sizes(col)
        assert sizes == [str_size(v) for v in col], (trial, col[:20])
        assert lens == [len(v) for v in col]
    col = [b"1a"] + [b"u%d" % j for j in range(40)]
    assert nodes.column_sizes(col) == ([str_size(v) for v in col], [len(v) for v in col])
