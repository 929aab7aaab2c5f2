"""The stores of older formats in tests/fixtures (format1..3.data.mdb.gz,
written by older xs with tests/fixtures/make_format*.py) and what those
xs answered about them (format*.expected.json): fresh copies to open,
and what is stored in them, read with LMDB directly."""
import gzip
import json
import os

from storage import codec
from tests.conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
EXPECTED = json.load(open(os.path.join(FIXTURES, "format1.expected.json")))
EXPECTED2 = json.load(open(os.path.join(FIXTURES, "format2.expected.json")))
EXPECTED3 = json.load(open(os.path.join(FIXTURES, "format3.expected.json")))


def format1_store(tmp_path):
    """A fresh copy of the format-1 fixture store."""
    return fixture_store(tmp_path, "format1")


def format2_store(tmp_path):
    """A fresh copy of the format-2 fixture store."""
    return fixture_store(tmp_path, "format2")


def fixture_store(tmp_path, name):
    """A fresh copy of the fixture store ``name`` ("format1" .. "format3")."""
    d = tmp_path / name
    d.mkdir()
    with open(os.path.join(FIXTURES, "%s.data.mdb.gz" % name), "rb") as f:
        (d / "data.mdb").write_bytes(gzip.decompress(f.read()))
    return d


def stored_format(db):
    """The format version stored in the store ``db`` (not opened as a Store)."""
    import lmdb
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2, readonly=True, lock=False)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as t:
            return int(t.get(codec.META_FORMAT, db=meta))
    finally:
        env.close()


def entry_forms(db):
    """{stream name: (entries shaped, entries stored as records)} and the
    names of the databases in the store."""
    import lmdb
    env = lmdb.open(str(db), max_dbs=len(codec.DATABASES) + 2, readonly=True, lock=False)
    try:
        with env.begin() as t:
            names = {k for k, _ in t.cursor()}
            if b"log" not in names:
                return {}, names
            keys = env.open_db(b"keys", txn=t, create=False)
            log = env.open_db(b"log", txn=t, create=False)
            out = {}
            for k, v in t.cursor(keys):
                sid = codec.StreamMeta.decode(v).sid
                vals = [val for key, val in t.cursor(log) if key[:8] == codec.sid_prefix(sid)]
                shaped = sum(1 for val in vals if codec.is_shaped(val))
                out[codec.name_from_key(k)] = (shaped, len(vals) - shaped)
            return out, names
    finally:
        env.close()
