"""Format 4's compact entries (storage.codec, storage.parts.log): an entry whose
field names the stream interns keeps only its values under a 20-byte
key; every read gives back exactly what was added, whatever the bytes.
(How xs serve's encoder writes such reads: tests/cli/test_compact_entries_encoded.py.)
"""
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from storage import codec
from storage.ids import MAX_ID, MIN_ID
from storage.options import AddOptions, RangeOptions
from storage.store import Store
from tests.harness.stores import entries_text, rows, stream_meta

# names and values that exercise every form: plain text, the tag and
# separator bytes, NUL, newline, '%' (the encoder formats), empty
PIECES = [b"user", b"u1", b"action", b"", b"%s", b"%b", b"100%", b"\x00", b"a\nb", b"\x01", b"\x08", b"\x0e",
          b"x\x1fy", b"\t\r\x0b\x0c", "é".encode(), b"\xff\xfe", b"-1", b"9223372036854775808"]
piece = st.one_of(st.sampled_from(PIECES), st.binary(max_size=6))
name_sets = st.lists(st.lists(piece, min_size=1, max_size=22), min_size=1, max_size=12)


def entries_of(draw_names, data):
    """Entries: each takes one of the drawn field sets (so sets repeat,
    and some streams have more than a stream may intern)."""
    out = []
    for _ in range(data.draw(st.integers(1, 40))):
        names = data.draw(st.sampled_from(draw_names))
        out.append([x for n in names for x in (n, data.draw(piece))])
    return out


def check_reads(store, name, added):
    """Every read path gives back ``added`` ([(id_text, fields)]) exactly."""
    with store.read() as tx:
        got = tx.range(name, _opts())
        assert entries_text(got.decoded()) == entries_text(added)
        assert got.values == [codec.encode_entry(i, f) for i, f in added]
        text = got.text()
        records = [codec.encode_entry(i, f) for i, f in added]
        if text is not None:
            assert text == b"\n".join(records)
        else:
            assert any(r[:1] == b"\x00" or b"\n\x00" in r for r in records)
        rev = tx.range(name, _opts(rev=True, count=7))
        assert entries_text(rev.decoded()) == entries_text(added[::-1][:7])
        for i, f in added[:3]:
            one = tuple(map(int, i.split(b"-")))
            assert entries_text(tx.range(name, RangeOptions(one, one, None)).decoded()) == entries_text([(i, f)])


def _opts(rev=False, count=None):
    return RangeOptions(MIN_ID, MAX_ID, count, rev=rev)


def add_drawn(store, sets, data):
    """Add to stream s the entries entries_of draws, each under a drawn
    sequence number (wide ones among them): [(b"ms-seq", fields)]."""
    added = []
    with store.write() as tx:
        for k, fields in enumerate(entries_of(sets, data)):
            seq = data.draw(st.sampled_from([0, 1, 0xFFFFFFFE, 0xFFFFFFFF, 1 << 32, (1 << 64) - 1]))
            assert tx.add(b"s", fields, AddOptions(id=(k + 1, seq))) == (k + 1, seq)
            added.append((b"%d-%d" % (k + 1, seq), fields))
    return added


@settings(max_examples=60, deadline=None)
@given(name_sets, st.data())
def test_every_entry_reads_back_exactly_whatever_its_bytes(tmp_path_factory, sets, data):
    store = Store(str(tmp_path_factory.mktemp("compact")))
    try:
        added = add_drawn(store, sets, data)
        check_reads(store, b"s", added)
        # the bulk path (a snapshot's entries go through append_many) and
        # back: the same entries in a second stream
        with store.write() as tx:
            tx._write(_bulk, b"t", [((k + 1, 0), f) for k, (_, f) in enumerate(added)])
        check_reads(store, b"t", [(b"%d-0" % (k + 1), f) for k, (_, f) in enumerate(added)])
    finally:
        store.close()


def _bulk(p, name, items):
    """What restores and imports do (storage.verbs.load): many entries at once."""
    m = p.streams.create(name)
    p.log.append_many(m, items)
    m.last_id = items[-1][0]
    m.entries_added = len(items)


def add(store, name, id, fields):
    """One XADD with an explicit ID, in its own transaction."""
    return store.run(lambda tx: tx.add(name, fields, AddOptions(id=id)), write=True)


def read_all(store, name, start=MIN_ID):
    """The entries of ``name`` from ``start`` on, as [["ms-seq", fields]]."""
    return store.run(lambda tx: entries_text(tx.range(name, RangeOptions(start, MAX_ID))))


def test_a_stream_interns_at_most_eight_field_sets_and_stores_the_rest_whole(store):
    for k in range(10):
        add(store, b"s", (k + 1, 0), [b"f%d" % k, b"v", b"common", b"x"])
        add(store, b"s", (k + 1, 1), [b"f%d" % k, b"w", b"common", b"y"])
    m = stream_meta(store, b"s")
    assert len(rows(store, b"shapes", codec.sid_prefix(m.sid))) == codec.MAX_SHAPES == 8
    forms = [codec.is_shaped(v) for _, v in rows(store, b"log", codec.sid_prefix(m.sid))]
    assert forms == [True] * 16 + [False] * 4
    assert read_all(store, b"s", (10, 0)) == [["10-0", [b"f9", b"v", b"common", b"x"]],
                                              ["10-1", [b"f9", b"w", b"common", b"y"]]]


def test_deleting_a_stream_forgets_its_field_sets(store):
    add(store, b"s", (1, 0), [b"a", b"1"])
    assert rows(store, b"shapes") != []
    store.run(lambda tx: tx.delete_keys([b"s"]), write=True)
    assert rows(store, b"shapes") == [] and rows(store, b"log") == []
    add(store, b"s", (1, 0), [b"b", b"2"])
    assert read_all(store, b"s") == [["1-0", [b"b", b"2"]]]


def test_a_field_set_made_by_a_failed_command_is_forgotten_with_it(store):
    """Script mode rolls a failing command back; the shape it made must
    not linger in the transaction's cache for the next command."""
    with store.write() as tx:
        tx.add(b"s", [b"a", b"1"], AddOptions(id=(1, 0)))
        try:
            tx._write(_add_then_fail, b"s")
        except RuntimeError:
            pass
        tx.add(b"s", [b"new", b"2"], AddOptions(id=(3, 0)))
    assert read_all(store, b"s") == [["1-0", [b"a", b"1"]], ["3-0", [b"new", b"2"]]]
    m = stream_meta(store, b"s")
    shapes = [codec.decode_shape(k, v).names for k, v in rows(store, b"shapes", codec.sid_prefix(m.sid))]
    assert shapes == [(b"a",), (b"new",)]


def _add_then_fail(p, name):
    m = p.streams.get(name)
    p.log.append(m, (2, 0), [b"gone", b"x"])
    raise RuntimeError("fails after making a field set")


def test_an_event_of_four_short_fields_takes_at_most_64_bytes(store):
    """Issue 9's goal, in pages of the log database (LMDB's own count):
    the ID only in the key, the names interned."""
    n, base = 20000, 1763900000000
    with store.write() as tx:
        tx._write(_bulk, b"s", [((base + k // 3, k % 3), [b"user", b"u%d" % (k % 1000), b"action", b"click",
                                                            b"page", b"/home", b"ts", b"%d" % (1700000000 + k)])
                                for k in range(n)])
    with store.env.begin() as t:
        s = t.stat(store.dbs[b"log"])
    per_entry = (s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]) * s["psize"] / n
    assert per_entry <= 64, per_entry
    assert struct.calcsize(">QQI") == len(codec.entry_key(1, (base, 2)))
