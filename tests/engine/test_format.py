"""The store format can evolve: a store written by an older xs is
upgraded once, on open, under the write lock, and reads back exactly as
before; a newer one is refused with a clear message.  (What the upgraded
stores answer to the commands recorded with them, through ``xs``:
tests/cli/test_format_upgrade_replies.py.)

tests/fixtures/format1.data.mdb.gz was written by the xs of commit
d86fcd4 (format 1) with tests/fixtures/make_format1.py, which also
recorded what that xs answered about it (format1.expected.json).
"""
import re

import pytest

from storage import codec
from storage.ids import MAX_ID, MIN_ID
from storage.options import AddOptions, RangeOptions, StreamInfoOptions
from tests.harness.format_fixtures import (
    EXPECTED,
    entry_forms,
    fixture_store,
    format1_store,
    format2_store,
    stored_format,
)
from tests.harness.stores import id_text


def test_idmp_history_survives_the_upgrade(tmp_path, monkeypatch):
    """A duplicate is still recognised (with the clock of the fixture)."""
    from storage.store import Store
    from storage.txn import Txn
    db = format1_store(tmp_path)
    setup = dict(zip(EXPECTED["setup"], EXPECTED["setup-replies"]))
    monkeypatch.setattr(Txn, "now", staticmethod(lambda: EXPECTED["made-ms"] + 1000))
    store = Store(str(db))

    def add(fields, pid, iid=None):
        return id_text(store.run(lambda tx: tx.add(b"idem", fields, AddOptions(idmp_pid=pid, idmp_iid=iid)),
                                 write=True))
    try:
        assert add([b"n", b"again"], b"p1", b"i3") == setup["XADD idem IDMP p1 i3 * n 3"]
        assert add([b"b", b"2", b"a", b"1"], b"p2") == setup["XADD idem IDMPAUTO p2 * a 1 b 2"]
        big = [c for c in EXPECTED["setup"] if c.startswith("XADD idem IDMP p3")][0]
        _, _, _, pid, iid, star, *fields = big.replace("n big", "n other").encode().split()
        assert star == b"*" and add(fields, pid, iid) == setup[big]
        info = store.run(lambda tx: tx.stream_info(b"idem", StreamInfoOptions()))
        assert info.idmp.iids_duplicates == 5 and info.length == 7
    finally:
        store.close()


def test_an_old_store_opened_read_only_asks_for_write_access(tmp_path):
    from storage.store import Store, StoreError
    db = format1_store(tmp_path)
    with pytest.raises(StoreError, match="open it once with write access"):
        Store(str(db), readonly=True)
    assert stored_format(db) == 1


def test_a_new_store_is_written_in_the_current_format(tmp_path):
    from storage.store import Store
    Store(str(tmp_path / "db")).close()
    assert stored_format(tmp_path / "db") == codec.FORMAT_VERSION


# ------------------------------------------------------ format 2 -> 3 (nodes)
# tests/fixtures/format2.data.mdb.gz was written by the xs of commit b6e5379
# (format 2, no node table) with tests/fixtures/make_format2.py.


def test_a_format_2_upgrade_builds_no_node_before_it_is_needed(tmp_path):
    """The upgrade only marks each stream (nodes-from = its first entry):
    it stays quick for big stores; nodes are made on first need."""
    import lmdb
    db = format2_store(tmp_path)
    from storage.store import Store
    Store(str(db)).close()
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2, readonly=True, lock=False)
    try:
        with env.begin() as t:
            assert t.stat(env.open_db(b"nodes", txn=t, create=False))["entries"] == 0
            keys = env.open_db(b"keys", txn=t, create=False)
            marks = {codec.name_from_key(k): codec.StreamMeta.decode(v).nodes_from for k, v in t.cursor(keys)}
    finally:
        env.close()
    assert marks[b"nodes"] == (1, 0) and marks[b"holes"] == (3, 0) and marks[b"empty"] is None


# ---------------------------------------------- format 3 -> 4 (compact entries)
# tests/fixtures/format3.data.mdb.gz was written by the xs of commit 1d807e9
# (format 3: every entry a record under a 24-byte key) with
# tests/fixtures/make_format3.py.


@pytest.mark.parametrize("name", ["format1", "format2", "format3"])
def test_every_older_store_is_written_compact_after_the_upgrade(tmp_path, name):
    """The upgrade and later writes alike: an upgraded store's new
    entries with a known field set are shaped."""
    from storage.store import Store
    db = fixture_store(tmp_path, name)
    store = Store(str(db))
    try:
        new = store.run(lambda tx: tx.add(b"plain", [b"user", b"carol", b"action", b"login"], AddOptions()),
                        write=True)
        store.run(lambda tx: tx.range(b"plain", RangeOptions(MIN_ID, MAX_ID, 1)))
    finally:
        store.close()
    assert re.fullmatch(r"\d+-\d+", id_text(new))
    forms, _ = entry_forms(db)
    assert forms[b"plain"][0] >= 1 and forms[b"plain"][1] == 0
