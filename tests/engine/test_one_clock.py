"""One clock per transaction (storage.txn.Txn.tick): every verb of one
transaction -- one EXEC, one script-mode batch, one snapshot -- sees the
same clock reading, as Redis keeps one clock per MULTI/EXEC.  A stream
does not expire between two verbs of one transaction, and an XADD after
its TTL passed mid-transaction does not make a new stream that never
expires.  The clock here moves 1 s at every reading, so a transaction
that read it per verb would see the stream expire at its second verb."""
import pytest

from storage.options import AddOptions

T0 = 1_700_000_000_000


@pytest.fixture
def fast_clock(monkeypatch):
    from storage.txn import Txn
    t = [T0]

    def now():
        t[0] += 1000
        return t[0]
    monkeypatch.setattr(Txn, "now", staticmethod(now))
    return t


def test_a_stream_does_not_expire_between_the_verbs_of_one_transaction(store, fast_clock):
    store.run(lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, 0))), write=True)
    with store.write() as tx:
        assert tx.expire(b"s", 500, True, 0, "pexpire") == 1      # TTL: 0.5 s from this transaction's clock
        assert tx.length(b"s") == 1                               # the clock has "moved" 1 s since, per reading
        assert tx.add(b"s", [b"f", b"w"], AddOptions(id=(2, 0))) == (2, 0)
        assert tx.length(b"s") == 2
    # the next transaction reads the clock anew: the stream (with both entries) has expired
    assert store.run(lambda tx: tx.length(b"s")) == 0
    assert store.run(lambda tx: tx.exists([b"s"])) == 0


def test_tick_reads_the_clock_anew_for_the_verbs_after_it(store, fast_clock):
    store.run(lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions(id=(1, 0))), write=True)
    with store.write() as tx:
        tx.expire(b"s", 500, True, 0, "pexpire")
        tx.tick()                                                  # xs serve: the next job
        assert tx.length(b"s") == 0


def test_automatic_ids_of_one_transaction_share_its_millisecond(store, fast_clock):
    from storage.options import AddOptions as A
    with store.write() as tx:
        a = tx.add(b"s", [b"f", b"1"], A())
        b = tx.add(b"s", [b"f", b"2"], A())
    assert a[0] == b[0] and b[1] == a[1] + 1
