"""Stream verbs on the library surface (storage.store.Store, Txn): what
they return and what is stored.  The stream commands as typed (their
parsers, replies and error texts) are tested in
tests/cli/test_stream_commands.py."""
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import codec
from storage.options import ACKED, AddOptions, GroupOptions, RangeOptions, TrimOptions
from tests.harness.stores import entries_text, id_text, rows, stream_meta


def test_xadd_stores_entry_under_sid_prefix_in_id_order(store):
    store.run(lambda tx: tx.add(b"s", [b"b", b"2"], AddOptions(id=(2, 0))), write=True)
    store.run(lambda tx: tx.add(b"s", [b"c", b"3"], AddOptions(id=(10, 0))), write=True)
    m = stream_meta(store, b"s")
    ks = [k for k, _ in rows(store, b"log", codec.sid_prefix(m.sid))]
    assert [codec.id_from_entry_key(k) for k in ks] == [(2, 0), (10, 0)]
    assert (m.length, m.last_id, m.entries_added) == (2, (10, 0), 2)


def test_xadd_library_api_with_write_context(store):
    with store.write() as tx:
        assert tx.add(b"s", [b"a", b"1"], AddOptions(id=(5, 5))) == (5, 5)
    with store.read() as tx:
        assert entries_text(tx.range(b"s", RangeOptions((0, 0), (9, 9)))) == [["5-5", [b"a", b"1"]]]


def test_trim_acked_library_call_reports_count(store):
    for i in range(1, 4):
        new = store.run(lambda tx: tx.add(b"mystream", [b"f", b"v%d" % i], AddOptions(id=(i, 0))), write=True)
        assert id_text(new) == "%d-0" % i
    store.run(lambda tx: tx.create_group(b"mystream", b"mygroup", GroupOptions(start=(0, 0))), write=True)
    with store.write() as tx:
        assert tx.trim(b"mystream", TrimOptions("maxlen", 0, policy=ACKED)) == 0
    assert store.run(lambda tx: tx.length(b"mystream"), write=True) == 3


# ====================================================== bounded range reads

@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 700), lo=st.integers(0, 800), span=st.integers(-5, 800), count=st.integers(0, 900),
       rev=st.booleans(), dels=st.sets(st.integers(1, 700), max_size=40))
def test_bounded_xrange_returns_exactly_the_entries_a_full_scan_would(tmp_path_factory, n, lo, span, count, rev,
                                                                      dels):
    """XRANGE/XREVRANGE with bounds and COUNT read the cursor in growing
    chunks (storage.parts.kv.values_between): the chunk edges must not lose,
    repeat or overrun an entry."""
    from storage.options import IdsOptions, RangeOptions
    from storage.store import Store
    d = tmp_path_factory.mktemp("range")
    s = Store(str(d / "st"), durable=False)
    try:
        with s.write() as tx:
            for i in range(1, n + 1):
                tx.add(b"s", [b"f", b"%d" % i], AddOptions(id=(i, 0)))
                tx.add(b"t", [b"g", b"%d" % i], AddOptions(id=(i, 0)))      # a neighbour stream after s
            for i in dels:
                if i <= n:
                    tx.delete_entries(b"s", IdsOptions(ids=((i, 0),), given=1))
        hi = lo + span
        with s.read() as tx:
            got = tx.range(b"s", RangeOptions((lo, 0), (hi, 0), count or None, rev=rev))     # None: no COUNT
            got = [] if got is None else [f[1] for _, f in got]
        want = [b"%d" % i for i in range(1, n + 1) if i not in dels and lo <= i <= hi]
        if rev:
            want.reverse()
        if count:
            want = want[:count]
        assert got == want
    finally:
        s.close()
