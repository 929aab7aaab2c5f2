"""Hostile files, from Hypothesis strategies, for every format xs reads:
snapshots (``xs restore``) and the three import formats (xs JSON lines,
plain JSON objects, field=value lines).  Whatever the bytes, the reader
either takes them or raises its one documented error (SnapshotError,
ExchangeError), never anything else (a traceback is a bug), and a
refused file leaves every database of the store byte-identical.  The
files are valid ones mutated (bytes flipped, cut, spliced, lines
duplicated) and arbitrary JSON values, so that the checks past the first
bytes are reached too."""
import io
import json
import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from storage.ops import exchange, snapshot
from storage.options import AddOptions, GroupOptions, IdmpConfigOptions, IdsOptions, ReadOptions
from tests.harness.stores import full_dump, open_store

SETTINGS = settings(max_examples=int(os.environ.get("XS_HOSTILE_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _seed_store(path):
    """A store with a bit of everything a snapshot carries."""
    s = open_store(path)
    try:
        with s.write() as tx:
            tx.add(b"s", [b"a", b"1", b"b", b"2"], AddOptions(id=(1, 0)))
            tx.add(b"s", [b"a", b"3"], AddOptions(id=(2, 0)))
            tx.add(b"t\xff", [b"k", b"v\x00"], AddOptions(id=(1, 1)))
            tx.create_group(b"s", b"g", GroupOptions(start=(0, 0)))
            tx.read_group(ReadOptions(keys=(b"s",), ids=(b">",), count=1, group=b"g", consumer=b"alice"))
            tx.configure_idmp(b"s", IdmpConfigOptions(duration=60))
            tx.add(b"s", [b"z", b"9"], AddOptions(idmp_pid=b"p", idmp_iid=b"i1"))
            tx.delete_entries(b"s", IdsOptions(ids=((2, 0),), given=1))
    finally:
        s.close()


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """A valid snapshot and a valid export (bytes) of the seeded store."""
    d = tmp_path_factory.mktemp("valid")
    db = d / "db"
    _seed_store(db)
    s = open_store(db)
    try:
        snap = d / "snap.xs"
        snapshot.save_to_path(s, str(snap))
        out = io.StringIO()
        exchange.export_jsonl(s, out, meta=True)
    finally:
        s.close()
    return snap.read_bytes(), out.getvalue().encode("utf-8")


def mutated(data):
    """A strategy: ``data`` with a few bytes changed, cut, or spliced."""
    n = len(data)

    @st.composite
    def one(draw):
        b = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["flip", "cut", "splice", "dup"]))
            if not b:
                break
            i = draw(st.integers(0, len(b) - 1))
            if kind == "flip":
                b[i] = draw(st.integers(0, 255))
            elif kind == "cut":
                del b[i:]
            elif kind == "splice":
                b[i:i] = draw(st.binary(min_size=1, max_size=16))
            else:
                j = draw(st.integers(i, min(len(b), i + 64)))
                b[i:i] = b[i:j]
        return bytes(b)
    return one() if n else st.binary()


JSON = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False)
                    | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                max_size=4),
                    max_leaves=12)


@pytest.fixture
def store(tmp_path):
    db = tmp_path / "db"
    _seed_store(db)
    s = open_store(db)
    yield s
    s.close()


def _refused_changes_nothing(store, run, errors):
    before = full_dump(store)
    try:
        run()
    except errors as e:
        assert full_dump(store) == before, "a refused file changed the store"
        event("refused: %s" % str(e).split(":")[0][:40])
        return False
    event("taken")
    return True


@SETTINGS
@given(data=st.data())
def test_a_mutated_snapshot_is_restored_whole_or_refused_changing_nothing(valid, store, tmp_path, data):
    blob = data.draw(mutated(valid[0]) | st.binary(max_size=200))
    path = tmp_path / "in.xs"
    path.write_bytes(blob)
    replace = data.draw(st.booleans())
    _refused_changes_nothing(store, lambda: snapshot.restore(store, str(path), replace=replace),
                             snapshot.SnapshotError)


@SETTINGS
@given(data=st.data())
def test_mutated_export_lines_are_imported_or_refused_changing_nothing(valid, store, data):
    blob = data.draw(mutated(valid[1]))
    lines = blob.splitlines(keepends=True)
    _refused_changes_nothing(store, lambda: exchange.import_lines(store, lines, fmt="xs", batch=10 ** 6),
                             exchange.ExchangeError)


@SETTINGS
@given(values=st.lists(JSON, min_size=1, max_size=5))
def test_arbitrary_json_in_any_import_format_is_imported_or_refused_changing_nothing(store, values):
    lines = [json.dumps(v).encode() + b"\n" for v in values]
    for fmt in ("xs", "jsonl"):
        _refused_changes_nothing(store, lambda: exchange.import_lines(store, lines, fmt=fmt, stream=b"in",
                                                                      batch=10 ** 6),
                                 exchange.ExchangeError)


