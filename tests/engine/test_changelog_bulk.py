"""The change log's bulk paths (storage.changelog, issue 41's cost): a
bulk put's pairs are packed when they are logged (storage.parts.kv), not
kept as tuples until the commit, and the record is the same bytes as if
they had been; the final values of many nodes are read in one call.
Either way, replaying the records on a copy taken before them gives the
store byte for byte."""
from storage import changelog
from storage.codec import changes
from storage.options import AddOptions
from storage.parts.kv import KV
from tests.engine.test_changelog import _all, _base, _ops, _replay
from tests.harness.stores import attempt


def _logged(store):
    """A logged write transaction of ``store`` (the log on), as Store.run makes one."""
    lt = store.env.begin(write=True)
    with store.env.begin() as t:
        raw = t.get(changes.META_CHANGELOG, db=store.dbs[b"meta"])
    return changelog.logged(store, lt, raw)


def _logging_from_a_base(store, tmp_path):
    """The log on, a stream made, and a copy of the store then (the base
    the records replay on): its path."""
    changelog.enable(store, "r")
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"v"], AddOptions()))
    base = str(tmp_path / "base.mdb")
    _base(store, base)
    return base


def test_a_bulk_put_is_logged_packed_and_the_record_is_the_same_bytes(store, tmp_path):
    changelog.enable(store, "r")
    base = str(tmp_path / "base.mdb")
    _base(store, base)
    kept = []

    def ingest(tx):
        tx.add_auto_many([(b"s", b"f\n%d\ng\nx" % i) for i in range(3000)])
        kept.extend(tx._lt.ops)
    store.run(ingest, write=True)
    multi = [op for op in kept if op[0] == changes.OP_MULTI]
    assert multi and all(type(op[2]) is bytes for op in multi)     # no pair left for the collector
    attempt(store, lambda tx: tx.add(b"s", [b"f", b"after"], AddOptions()))
    store.run(lambda tx: tx.add_auto_many([(b"t", [b"a", b"%d" % i]) for i in range(500)]), write=True)
    recs = changelog.records(store, 0, 1 << 40)[1]
    for _, _, rec in recs:
        t, ops = changes.decode_record(rec)
        unpacked = [op if op[0] != changes.OP_MULTI else (op[0], op[1], list(op[2])) for op in ops]
        assert changes.encode_record(t, unpacked) == rec      # as the pairs themselves encode
    env, dbs, _ = _replay(base, store, tmp_path)
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()


def test_a_rolled_back_savepoint_takes_its_bulk_put_out_of_the_record(store, tmp_path):
    base = _logging_from_a_base(store, tmp_path)
    cnames = store.dbs[b"cnames"]
    lg = _logged(store)
    try:
        kv = KV(lg, store.dbs)
        kv.putmulti(cnames, [(b"kept%02d" % i, b"v") for i in range(10)])
        sp = lg.child()
        KV(sp, store.dbs).putmulti(cnames, [(b"gone%02d" % i, b"v") for i in range(10)])
        sp.abort()
        sp = lg.child()
        KV(sp, store.dbs).putmulti(cnames, [(b"also%02d" % i, b"v") for i in range(3)])
        sp.commit()
        lg.commit()
    except BaseException:
        lg.abort()
        raise
    (ops,) = _ops(store, 1)
    assert [[k for k, _ in op[2]] for op in ops] == [[b"kept%02d" % i for i in range(10)],
                                                   [b"also%02d" % i for i in range(3)]]
    env, dbs, _ = _replay(base, store, tmp_path)
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()


def test_many_nodes_written_and_deleted_in_a_commit_are_logged_once_each_with_their_final_value(store, tmp_path):
    base = _logging_from_a_base(store, tmp_path)
    nodes = store.dbs[b"nodes"]
    with store.env.begin() as t:
        before = list(t.cursor(db=nodes))
    lg = _logged(store)
    try:
        kv = KV(lg, store.dbs)
        for i in reversed(range(20)):
            kv.put(nodes, b"\xffnode%02d" % i, b"first")
        kv.putmulti(nodes, [(b"\xffnode%02d" % i, b"second") for i in range(0, 20, 2)])
        for i in range(0, 20, 5):
            assert kv.delete(nodes, b"\xffnode%02d" % i)
        for k, _ in before:
            assert kv.delete(nodes, k)           # one that was there before the commit
        assert lg.ops == []                      # nodes are logged at commit only
        lg.commit()
    except BaseException:
        lg.abort()
        raise
    (ops,) = _ops(store, 1)
    with store.env.begin() as t:
        final = dict(t.cursor(db=nodes))
    keys = sorted({b"\xffnode%02d" % i for i in range(20)} | {k for k, _ in before})
    assert list(ops) == [(changes.OP_PUT, b"nodes", k, final[k]) if k in final else (changes.OP_DEL, b"nodes", k)
                         for k in keys]
    assert final[b"\xffnode02"] == b"second" and final[b"\xffnode01"] == b"first"
    env, dbs, _ = _replay(base, store, tmp_path)
    assert _all(env, dbs) == _all(store.env, store.dbs)
    env.close()


def test_the_pairs_of_a_bulk_put_pack_as_encode_record_packs_them():
    pairs = [(b"k%05d" % i, b"v" * (i % 300)) for i in range(2000)] + [(b"k00001", b"again")]
    packed = changes.pack_pairs(pairs)
    for ops in ([(changes.OP_MULTI, b"log", None)],
                [(changes.OP_PUT, b"meta", b"a", b"1"), (changes.OP_MULTI, b"log", None),
                 (changes.OP_DEL, b"keys", b"x"), (changes.OP_MULTI, b"pel", None)]):
        plain = [op if op[0] != changes.OP_MULTI else op[:2] + (pairs,) for op in ops]
        given = [op if op[0] != changes.OP_MULTI else op[:2] + (packed,) for op in ops]
        assert changes.encode_record(9, given) == changes.encode_record(9, plain)
        small = [op if op[0] != changes.OP_MULTI else op[:2] + (changes.pack_pairs(pairs[:30]),) for op in ops]
        assert changes.decode_record(changes.encode_record(9, small))[1] == tuple(
            op if op[0] != changes.OP_MULTI else op[:2] + (tuple(pairs[:30]),) for op in ops)
