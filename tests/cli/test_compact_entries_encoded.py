"""Format 4's compact entries as xs serve's encoder writes them: a range
read whose shaped runs the encoder formats whole (xstream_cli.server.resp)
encodes exactly as its entries one at a time would, whatever their bytes.
These checks left tests/engine/test_compact_entries.py, whose tier does
not import the command line."""
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.store import Store
from tests.engine.test_compact_entries import _opts, add_drawn, check_reads, name_sets
from tests.harness.commands import cmd
from xstream_cli.server.resp import encode


def check_encoded(store, name, added):
    """check_reads, and xs serve's encoder (shaped runs formatted whole)
    gives for every read what it gives for ``added`` one entry at a time."""
    check_reads(store, name, added)
    with store.read() as tx:
        got = tx.range(name, _opts())
        rev = tx.range(name, _opts(rev=True, count=7))
        for proto in (2, 3):
            assert encode(got, proto) == encode([[i, f] for i, f in added], proto)
            assert encode(rev, proto) == encode([[i, f] for i, f in added[::-1][:7]], proto)


@settings(max_examples=60, deadline=None)
@given(name_sets, st.data())
def test_serve_s_encoder_formats_any_compact_range_as_each_entry_alone(tmp_path_factory, sets, data):
    store = Store(str(tmp_path_factory.mktemp("compact")))
    try:
        check_encoded(store, b"s", add_drawn(store, sets, data))
    finally:
        store.close()


def test_serve_s_encoder_formats_wide_sequence_numbers_and_percent_names_as_each_entry_alone(store):
    for i in ("1-4294967294", "1-4294967295", "1-4294967296", "2-0"):          # short, then wide keys, then short
        cmd(store, "XADD", "s", i, "100%", "%d", "%b", "x%sy")
    cmd(store, "XADD", "s", "3-0", "line", "a\nb")                             # a record among the shaped
    added = [(e[0].encode(), [f.encode() for f in e[1]]) for e in cmd(store, "XRANGE", "s", "-", "+")]
    assert len(added) == 5
    check_encoded(store, b"s", added)
