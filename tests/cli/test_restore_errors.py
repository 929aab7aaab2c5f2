"""``xs restore`` of damaged and hostile files (issue 37, items 5 and 12):
a truncated RDB file or snapshot is refused with one line naming ONE
offset, the right one (where the file ends); an RDB file is read with
every expansion bounded -- a string of another type is skipped without
being decompressed, an LZF length no LZF data can reach is refused
before anything is allocated -- its peak memory (ru_maxrss of the xs
process) pinned against the file's size."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT, XS, new_store
from storage.codec import rdb as R
from tests.engine.test_rdb_bounds import deleted_node, lzf_repeat, lzf_string

MB = 1 << 20


def xs(db, *args):
    return subprocess.run(XS + ["--db", str(db)] + [str(a) for a in args], capture_output=True, cwd=ROOT,
                          timeout=300, env=dict(os.environ, XS_NO_SYNC="1"))


def xs_peak(db, *args):
    """(process, peak RSS in bytes) of one xs run, measured from a fresh
    parent (RUSAGE_CHILDREN holds the largest child it waited for)."""
    code = ("import json, os, resource, subprocess, sys\n"
            "p = subprocess.run(sys.argv[1:], capture_output=True, env=dict(os.environ, XS_NO_SYNC='1'))\n"
            "print(json.dumps([p.returncode, p.stdout.decode('latin-1'), p.stderr.decode('latin-1'),\n"
            "                  resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024]))\n")
    out = subprocess.run([sys.executable, "-c", code] + XS + ["--db", str(db)] + [str(a) for a in args],
                         capture_output=True, cwd=ROOT, timeout=300, check=True)
    rc, stdout, stderr, peak = json.loads(out.stdout)
    return subprocess.CompletedProcess(args, rc, stdout.encode("latin-1"), stderr.encode("latin-1")), peak


def rdb_file(*keys):
    """An RDB file (version 10, checksummed) of ``keys``: (name, value with
    its type byte first)."""
    body = R.rdb_file_header([(b"redis-ver", b"7.0.15")]) + R.rdb_file_db(0, len(keys), 0)
    body += b"".join(R.rdb_file_key(k, v) for k, v in keys) + R.rdb_file_end()
    return body + R.rdb_file_crc(R.rdb_crc64(body))


def offsets(line):
    return [int(n) for n in re.findall(rb"at byte (\d+)", line)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A store with a stream, saved both ways."""
    d = tmp_path_factory.mktemp("files")
    db = new_store(d / "store")
    script = "".join("XADD s * f v%d name n%d\n" % (i, i) for i in range(300)).encode()
    p = subprocess.run(XS + ["--db", str(db)], input=script, capture_output=True, cwd=ROOT, timeout=60,
                       env=dict(os.environ, XS_NO_SYNC="1"))
    assert p.returncode == 0, p.stderr
    for fmt, name in (("rdb", "d.rdb"), ("xs", "d.xs")):
        p = xs(db, "save", "--format", fmt, d / name)
        assert p.returncode == 0, p.stderr
    return d


# ============================================================ item 12: offsets

@pytest.mark.parametrize("name", ["d.rdb", "d.xs"])
def test_a_truncated_file_names_one_offset_where_it_ends(files, tmp_path, name):
    whole = (files / name).read_bytes()
    db = new_store(tmp_path / "store")
    for cut in sorted({20, len(whole) // 3, len(whole) // 2, len(whole) - 20, len(whole) - 1}):
        path = tmp_path / ("cut-" + name)
        path.write_bytes(whole[:cut])
        for args in (("restore", path), ("restore", "--check", path)):
            p = xs(db, *args)
            assert p.returncode == 1 and p.stderr.count(b"\n") == 1, p.stderr
            assert b"Traceback" not in p.stderr
            assert offsets(p.stderr) == [cut], (cut, p.stderr)


def test_an_rdb_error_inside_the_file_names_one_offset_inside_it(tmp_path):
    db = new_store(tmp_path / "store")
    data = bytearray(rdb_file((b"s", bytes((R.RDB_TYPE_STREAM_LISTPACKS_2,)) + b"\x00" + b"\x00" * 8 + b"\x00")))
    data[9] = 0xF0                                  # an opcode that does not exist
    path = tmp_path / "bad.rdb"
    path.write_bytes(bytes(data))
    p = xs(db, "restore", path)
    assert p.returncode == 1 and offsets(p.stderr) == [9], p.stderr


# ====================================================== item 5: bounded expansion

def _baseline(tmp_path):
    db = new_store(tmp_path / "base")
    path = tmp_path / "small.rdb"
    path.write_bytes(rdb_file((b"k", b"\x00" + R.rdb_string(b"v"))))
    p, peak = xs_peak(db, "restore", path)
    assert p.returncode == 0, p.stderr
    return peak


def test_a_huge_lzf_string_of_another_type_is_skipped_not_decompressed(tmp_path):
    """A 3 MB file holding a 256 MB string (LZF): read over at the cost of
    the file, not of the string (before: the string, twice)."""
    value = b"\x00" + lzf_string(lzf_repeat(b"", b"a", 256 * MB), 256 * MB)
    path = tmp_path / "big.rdb"
    path.write_bytes(rdb_file((b"big", value), (b"k", b"\x00" + R.rdb_string(b"v"))))
    size = path.stat().st_size
    db = new_store(tmp_path / "store")
    p, peak = xs_peak(db, "restore", path)
    assert p.returncode == 0, p.stderr
    assert b"skipped 2 strings" in p.stderr, p.stderr
    assert peak - _baseline(tmp_path) < 10 * size, (peak, size)


def test_an_lzf_length_no_data_can_reach_is_refused_before_reading(tmp_path):
    data = lzf_repeat(b"", b"\x01\x01", 500_000)
    cases = {
        "string": b"\x00" + lzf_string(data, len(data) * 100),
        "stream": (bytes((R.RDB_TYPE_STREAM_LISTPACKS_2,)) + b"\x01" + R.rdb_string(R.rdb_raw_id((5, 5)))
                   + lzf_string(data, 1 << 30)),
        "past-the-end": b"\x00" + b"\xc3" + R.rdb_len(1 << 40) + R.rdb_len(1 << 41),
    }
    db = new_store(tmp_path / "store")
    base = _baseline(tmp_path)
    for what, value in cases.items():
        path = tmp_path / ("%s.rdb" % what)
        path.write_bytes(rdb_file((b"k", value)))
        p, peak = xs_peak(db, "restore", path)
        assert p.returncode == 1 and p.stderr.count(b"\n") == 1, (what, p.stderr)
        assert p.stderr.startswith(b"xs: not a valid RDB file: ") and len(offsets(p.stderr)) == 1, p.stderr
        assert peak - base < 10 * path.stat().st_size + 4 * MB, (what, peak - base)


def test_a_stream_node_of_many_deleted_entries_is_loaded_in_place(tmp_path):
    """A valid stream whose one node holds 50,000 deleted entries (LZF):
    loaded, at the cost of the node's bytes."""
    total, s = deleted_node(50_000)
    value = (bytes((R.RDB_TYPE_STREAM_LISTPACKS_2,)) + b"\x01" + R.rdb_string(R.rdb_raw_id((5, 5))) + s
             + b"".join(R.rdb_len(v) for v in (0, 5, 5, 0, 0, 0, 0, 0)) + b"\x00")
    path = tmp_path / "del.rdb"
    path.write_bytes(rdb_file((b"s", value)))
    db = new_store(tmp_path / "store")
    base = _baseline(tmp_path)
    p, peak = xs_peak(db, "restore", path)
    assert p.returncode == 0, p.stderr
    assert peak - base < 5 * total + 4 * MB, (peak - base, total)
