"""Listpack nodes as Redis fills them (storage.parts.nodes), and the trimming
that depends on them: approximate trimming removes whole nodes only.

The pure arithmetic is pinned against listpack.c's encodings, and the
node table against its invariant and nodes.build, whatever the write
path.  The behaviour compared with a private redis-server, through
``xs``, is tests/cli/test_nodes_vs_redis.py.
"""
import os
import random

import pytest

from storage.parts import nodes
from storage.parts.nodes import Node, as_int, backlen_len, int_len, str_size

SEED = int(os.environ.get("XS_NODES_SEED", "1"))


# ============================================================ arithmetic

@pytest.mark.parametrize("v,size", [(0, 1), (127, 1), (128, 2), (-1, 2), (4095, 2), (-4096, 2), (4096, 3),
                                    (-4097, 3), (32767, 3), (32768, 4), (-8388608, 4), (8388608, 5),
                                    (2 ** 31 - 1, 5), (-2 ** 31, 5), (2 ** 31, 9), (-2 ** 63, 9)])
def test_integer_encoding_sizes_follow_listpack(v, size):
    assert int_len(v) == size


@pytest.mark.parametrize("n,size", [(1, 1), (127, 1), (128, 2), (16382, 2), (16383, 3), (2097150, 3),
                                    (2097151, 4), (268435455, 5)])
def test_back_length_sizes_follow_listpack(n, size):
    assert backlen_len(n) == size


@pytest.mark.parametrize("text,value", [(b"0", 0), (b"7", 7), (b"-7", -7), (b"123", 123),
                                        (b"9223372036854775807", 2 ** 63 - 1),
                                        (b"-9223372036854775808", -2 ** 63),
                                        (b"9223372036854775808", None), (b"-0", None), (b"01", None),
                                        (b"+1", None), (b"", None), (b"-", None), (b"1 ", None),
                                        (b"1a", None), (b"\xd9\xa1", None), (b"00000000000000000000001", None)])
def test_only_canonical_int64_strings_are_stored_as_integers(text, value):
    assert as_int(text) == value


@pytest.mark.parametrize("text,size", [(b"", 2), (b"v", 3), (b"x" * 62, 64), (b"x" * 63, 65), (b"x" * 64, 67),
                                       (b"x" * 125, 128), (b"x" * 126, 130), (b"x" * 4095, 4099),
                                       (b"x" * 4096, 4103), (b"5", 2), (b"127", 2), (b"128", 3), (b"-1", 3),
                                       (b"100000", 5), (b"05", 4), (b"18446744073709551615", 22)])
def test_string_sizes_include_header_and_back_length(text, size):
    assert str_size(text) == size


def test_a_one_entry_node_has_the_bytes_of_its_listpack():
    # header 6 + end 1; master: live 1, deleted 0, 1 field, "f", terminator;
    # entry: flags, ms delta 0, seq delta 0, "v", lp-count 4: two bytes each but "f"/"v" (three)
    node = nodes.open_node((5, 0), [b"f", b"v"])
    assert node.lp_bytes() == 7 + 2 + 2 + 2 + 3 + 2 + (2 + 2 + 2 + 3 + 2)
    # same field names: values only; other names: count and names too
    before = node.lp_bytes()
    node.append((5, 1), [b"f", b"w"])
    assert node.lp_bytes() - before == 2 + 2 + 2 + 3 + 2
    before = node.lp_bytes()
    node.append((6, 0), [b"g", b"w"])
    # seq delta 0 - 0; ms delta 1; count 1, "g", "w", lp-count 6
    assert node.lp_bytes() - before == 2 + 2 + 2 + 2 + 3 + 3 + 2


def test_seq_deltas_below_the_master_are_negative_integers():
    node = nodes.open_node((5, 10), [b"f", b"v"])
    before = node.lp_bytes()
    node.append((6, 0), [b"f", b"v"])           # seq delta -10: a 13-bit integer
    assert node.lp_bytes() - before == 2 + 2 + 3 + 3 + 2


def test_a_node_is_full_at_100_entries_live_or_deleted():
    node = nodes.open_node((1, 0), [b"f", b"v"])
    for k in range(1, 99):
        node.append((1, k), [b"f", b"v"])
    assert node.fits(2)
    node.mark_deleted(50)
    node.append((1, 99), [b"f", b"v"])
    assert node.count == 100 and node.live == 50
    assert not node.fits(2)
    assert node.fits(2, max_entries=0)


def test_a_node_is_full_when_its_bytes_and_the_new_lengths_reach_4096():
    node = nodes.open_node((1, 0), [b"f", b"x" * 1000])
    node.append((1, 1), [b"f", b"x" * 1000])
    node.append((1, 2), [b"f", b"x" * 1000])
    room = nodes.MAX_BYTES - node.lp_bytes()
    assert node.fits(room - 1) and not node.fits(room)


def test_counts_are_sized_by_their_value():
    node = Node((1, 0), 127, 0, 100, (1, 0), (b"f",))
    assert node.lp_bytes() == 100 + 2 + 2
    node.live = 128
    assert node.lp_bytes() == 100 + 3 + 2


def test_build_splits_an_in_order_stream_like_xadd():
    got = nodes.build([((1, k), [b"f", b"%d" % k]) for k in range(250)])
    assert [n.live for n in got] == [100, 100, 50]
    assert [n.master for n in got] == [(1, 0), (1, 100), (1, 200)]
    assert got[-1].last == (1, 249)


# ====================================================== the node table


def check_node_table(p, m):
    """storage.parts.log's invariant: nodes are ordered and disjoint, every live
    entry lies in exactly one, and a node's ``live`` counts its entries."""
    from storage import codec
    stored = [i for i, _ in p.log.records(m)]
    table = [p.log._decode_node(k, v)[0] for k, v in p.kv.iter_prefix(p.kv.db(b"nodes"), codec.sid_prefix(m.sid))]
    assert sum(n.live for n in table) == m.length == len(stored)
    prev = None
    for n in table:
        assert n.master <= n.last and (prev is None or prev.last < n.master)
        assert n.live == sum(1 for i in stored if n.master <= i <= n.last)
        assert n.live >= 0 and n.count <= nodes.MAX_ENTRIES
        prev = n
    return table


def test_every_write_path_keeps_the_node_table_whole(store):
    """XADD one by one, bulk appends (nodes made later, on first need),
    XDEL, exact and approximate trims, in random order, checked against
    the invariant and against nodes.build for what was never deleted."""
    from storage.options import KEEPREF, TrimOptions
    from storage.parts import Parts
    from storage.verbs.trim import trim
    r = random.Random(SEED)
    nxt = [1]

    def new_entries(k):
        out = []
        for _ in range(k):
            nxt[0] += r.choice([1, 1, 2])
            out.append(((nxt[0], 0), [b"f", b"x" * r.choice([1, 5, 300, 1500])]))
        return out

    for step in range(60):
        lt = store.env.begin(write=True)
        p = Parts(lt, store.dbs, 0)
        m = p.streams.get_or_create(b"s")
        op = r.random()
        if op < 0.3:
            for i, f in new_entries(r.randint(1, 150)):
                p.log.append(m, i, f)
        elif op < 0.5:
            items = new_entries(r.randint(1, 300))
            p.log.append_many(m, items)
        elif op < 0.65:
            ids = [i for i, _ in p.log.records(m)]
            for i in r.sample(ids, min(len(ids), r.randint(1, 40))):
                assert p.log.delete(m, i)
        else:
            approx = r.random() < 0.6
            limit = r.choice([0, 0, 100, 250]) if approx else 0
            if r.random() < 0.5:
                t = TrimOptions("maxlen", max(0, m.length - r.randint(0, 250)), approx, limit, KEEPREF)
            else:
                t = TrimOptions("minid", (max(0, nxt[0] - r.randint(0, 400)), 0), approx, limit, KEEPREF)
            trim(p.log, p.refs, m, t)
        if r.random() < 0.3:
            p.log.sync_nodes(m)
            check_node_table(p, m)
        p.flush()
        lt.commit()
    lt = store.env.begin(write=True)
    p = Parts(lt, store.dbs, 0)
    m = p.streams.get(b"s")
    count = p.log.node_count(m)           # counted without writing first
    p.log.sync_nodes(m)
    assert len(check_node_table(p, m)) == count
    lt.abort()


def test_bulk_appends_make_the_same_nodes_as_single_ones(store):
    from storage.parts import Parts
    items = [((5, k), [b"f", b"v" * (k * 37 % 700)]) for k in range(700)]
    lt = store.env.begin(write=True)
    p = Parts(lt, store.dbs, 0)
    a, b = p.streams.create(b"a"), p.streams.create(b"b")
    for i, f in items:
        p.log.append(a, i, f)
    for k in range(0, 700, 130):
        p.log.append_many(b, items[k:k + 130])
    p.log.sync_nodes(b)
    built = nodes.build(items)
    assert check_node_table(p, a) == check_node_table(p, b) == built
    lt.abort()


def test_a_rolled_back_verb_leaves_no_trace_in_the_cached_last_node(store, monkeypatch):
    """The last node is cached across the verbs of a transaction; a verb
    that fails after filling it (here: its trimming raises) is rolled
    back, and so is the cache."""
    import storage.verbs.trim
    from storage.options import KEEPREF, AddOptions, TrimOptions
    from storage.parts import Parts
    with store.write() as tx:
        for k in range(1, 61):
            tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, k)))

        def boom(*a):
            raise RuntimeError("disk on fire")
        monkeypatch.setattr(storage.verbs.trim, "trim", boom)
        for k in range(61, 71):
            with pytest.raises(RuntimeError):
                tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, k), trim=TrimOptions("maxlen", 5, True, 0, KEEPREF)))
        monkeypatch.undo()
        for k in range(61, 111):
            tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, k)))
    lt = store.env.begin()
    try:
        p = Parts(lt, store.dbs, 0)
        table = check_node_table(p, p.streams.get(b"s"))
        assert [(n.master, n.live) for n in table] == [((1, 1), 100), ((1, 101), 10)]
        assert table == nodes.build([((1, k), [b"f", b"v"]) for k in range(1, 111)])
    finally:
        lt.abort()


def test_extend_makes_the_same_nodes_as_adding_one_by_one():
    """The bulk paths' ``extend`` (inlined arithmetic, remembered value
    sizes) against ``add``, over random IDs,
    field names, integer-like and long values and node sizes."""
    import copy

    rng = random.Random(11)
    for trial in range(300):
        mb, me = rng.choice([0, 60, 200, 4096]), rng.choice([0, 1, 2, 10, 100])
        ms, seq, items = rng.randrange(1 << 50), 0, []
        for _ in range(rng.randrange(0, 250)):
            if rng.random() < 0.3:
                ms, seq = ms + rng.randrange(0, 300), 0
            else:
                seq += rng.randrange(0, 200)
            names = rng.choice([[b"a", b"b"], [b"a", b"c"], [b"x"] * rng.randrange(0, 4), [b"1", b"-5"], [b"n\nl"]])
            vals = [rng.choice([b"", b"0", b"-1", b"123", b"00", b"9223372036854775807", b"x" * rng.randrange(5000),
                                b"-0", b"a\nb"]) for _ in names]
            items.append(((ms, seq), [x for p in zip(names, vals) for x in p]))
        tail = nodes.open_node(*items.pop(0)) if items and rng.random() < 0.5 else None
        want, t = [], copy.deepcopy(tail)
        for i, f in items:
            t, opened = nodes.add(t, i, f, mb, me)
            if opened or not want:
                want.append(t)
        assert nodes.extend(copy.deepcopy(tail), items, mb, me) == want, trial




def _int_texts(rng):
    """Integer-like texts around every listpack size step, and near misses."""
    steps = [0, 1, 99, 127, 128, 999, 4095, 4096, 9999, 32767, 32768, 99999, 8388607, 8388608,
             2147483647, 2147483648, 10 ** 17, 10 ** 18 - 1, 10 ** 18, (1 << 63) - 1, 1 << 63, 10 ** 19, 10 ** 20]
    v = rng.choice(steps) + rng.choice([-1, 0, 0, 1])
    return b"%d" % max(v, 0)


def test_column_sizes_are_str_size_of_each_value():
    """``column_sizes`` (C-level passes over a column) against ``str_size``
    value by value: all-digit columns (one pass by value), digits mixed
    with text, leading zeros, signs, long and empty values."""
    rng = random.Random(7)
    kinds = [
        lambda: _int_texts(rng),
        lambda: b"u%d" % rng.randrange(10 ** 6),
        lambda: rng.choice([b"0", b"00", b"007", b"-0", b"-", b"-1", b"-128", b"-9223372036854775808",
                            b"-9223372036854775809", b"", b" 1", b"1 ", b"+1", b"1a", b"a1"]),
        lambda: b"x" * rng.choice([62, 63, 64, 65, 126, 127, 128, 4094, 4095, 4096, 4097, 16383, 16384]),
        lambda: b"%d" % rng.randrange(-10 ** 19, 10 ** 19),
        lambda: rng.choice([b"1\n2", b"a\nb", b"\n", b"12\n", b"\n7"]),
    ]
    for trial in range(400):
        mix = rng.sample(kinds, rng.randrange(1, len(kinds) + 1))
        col = [rng.choice(mix)() for _ in range(rng.choice([1, 5, 15, 16, 17, 40, 300]))]
        if trial % 8 == 0:
            col = [col[0]] * len(col)              # one value throughout
        sizes, lens = nodes.column_sizes(col)
        assert sizes == [str_size(v) for v in col], (trial, col[:20])
        assert lens == [len(v) for v in col]


def test_extend_in_long_runs_makes_the_same_nodes_as_adding_one_by_one():
    """``extend`` over long runs of one field-name list (the bulk paths:
    script mode, imports, restores), with the run's names changing now
    and then and a tail node of other names, against ``add``."""
    import copy

    rng = random.Random(12)
    for trial in range(120):
        mb, me = rng.choice([0, 200, 4096, 4096, 10000]), rng.choice([0, 1, 7, 100, 100, 127, 128, 129, 300])
        ms, seq, items = rng.randrange(1 << 40), 0, []
        names = [b"user", b"action", b"n"]
        ingest = trial % 2 == 0              # one millisecond, consecutive sequence numbers
        for _ in range(rng.randrange(1, 1500)):
            if rng.random() < 0.01:
                names = rng.choice([[b"user", b"action", b"n"], [b"a"], [b"1", b"b"], [b"x"] * 3, []])
            if ingest:
                seq += 1
            elif rng.random() < 0.05:
                ms, seq = ms + rng.randrange(1, 1 << 20), rng.randrange(0, 3)
            else:
                seq += rng.choice([1, 1, 1, 2, 300])
            vals = [rng.choice([b"u%d" % rng.randrange(10 ** 5), _int_texts(rng), b"click",
                                b"y" * rng.choice([1, 70, 3000])]) if rng.random() < 0.2 else
                    (b"%d" % rng.randrange(10 ** 6) if j % 2 else b"u%d" % rng.randrange(10 ** 6))
                    for j, _ in enumerate(names)]
            items.append(((ms, seq), [x for p in zip(names, vals) for x in p]))
        tail = None
        if rng.random() < 0.6:
            tail = nodes.open_node((ms - 5 if ms >= 5 else 0, 0), [b"other", b"1"])
            tail.deleted = rng.choice([0, 3, 200])
            tail.master, tail.last = (0, 0), (0, 0)
        want, t = [], copy.deepcopy(tail)
        for i, f in items:
            t, opened = nodes.add(t, i, f, mb, me)
            if opened or not want:
                want.append(t)
        assert nodes.extend(copy.deepcopy(tail), items, mb, me) == want, trial
        assert nodes.extend(copy.deepcopy(tail), iter(items), mb, me) == want, trial
