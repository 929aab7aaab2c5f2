"""The node model (approximate trimming), through the command line: these
tests run ``xs`` (or script mode), so they left
tests/engine/test_nodes.py, whose tier uses the library API only."""
import os

from tests.conftest import run_xs

SEQUENCES = int(os.environ.get("XS_NODES_SEQUENCES", "40"))
SEED = int(os.environ.get("XS_NODES_SEED", "1"))


# ============================================================ arithmetic


def test_a_bulk_ingest_leaves_its_nodes_made_not_to_the_next_write(tmp_path):
    """Script-mode runs of plain XADDs used to leave the node table to the
    next other write, which then built it for the whole ingest in one
    transaction (three minutes after 9M entries, holding the write lock)."""
    import lmdb

    from storage import codec
    db = tmp_path / "db"
    p = run_xs(db, ["XADD s * user u%d action click" % (i % 97) for i in range(3000)], mode="raw")
    assert p.returncode == 0, p.stderr
    env = lmdb.open(str(db), readonly=True, lock=False, max_dbs=16)
    try:
        with env.begin() as t:
            m = codec.StreamMeta.decode(t.get(codec.name_key(b"s"), db=env.open_db(b"keys", txn=t)))
            live = sum(codec.node_live(v) for _, v in t.cursor(db=env.open_db(b"nodes", txn=t)))
    finally:
        env.close()
    assert m.nodes_from is None and m.length == 3000 and live == 3000
