"""xs export / xs import: JSON lines, lossless (IDs, field order and
duplicates, non-UTF-8 bytes), with --meta for groups and PEL."""
import json

import pytest

from storage.ops import exchange
from tests.cli.test_snapshot import build, dump, frozen_clock, invoke, probe_idmp, session  # noqa: F401


def test_entries_export_as_json_lines_with_order_duplicates_and_b64(tmp_path):
    s = session(tmp_path / "src")
    s.execute([b"XADD", b"s", b"1-1", b"a", b"1", b"b", b"2", b"a", b"3"])
    s.execute([b"XADD", b"s", b"2-0", b"\xff\xfe", b"caf\xc3\xa9"])
    r = invoke(["--db", str(tmp_path / "src"), "export"])
    assert r.exit_code == 0
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    assert lines == [{"stream": "s", "id": "1-1", "fields": ["a", "1", "b", "2", "a", "3"]},
                     {"stream": "s", "id": "2-0", "fields": [{"b64": "//4="}, "café"]}]
    assert "exported 1 stream, 2 entries" in r.stderr


@pytest.mark.parametrize("meta", [False, True])
def test_export_then_import_round_trips(tmp_path, meta):
    src = build(tmp_path / "src")
    out = tmp_path / "x.jsonl"
    args = ["--db", str(tmp_path / "src"), "export", "-o", str(out)] + (["--meta"] if meta else [])
    assert invoke(args).exit_code == 0
    r = invoke(["--db", str(tmp_path / "dst"), "import", str(out)])
    assert r.exit_code == 0, r.stderr
    # exporting the import gives the same file
    r = invoke(["--db", str(tmp_path / "dst"), "export", "-o", str(tmp_path / "y.jsonl")]
               + (["--meta"] if meta else []))
    assert (tmp_path / "y.jsonl").read_bytes() == out.read_bytes()
    dst = session(tmp_path / "dst")
    a, b = dump(src), dump(dst)
    if meta:
        assert a == b
        assert probe_idmp(src) == probe_idmp(dst)
    else:
        for name in (b"s", b"t", b"l" * 700):
            q = (name, "XRANGE {s} - +")
            assert a[q] == b[q]


def test_import_from_stdin_in_batches(tmp_path):
    lines = "".join(json.dumps({"stream": "big", "id": "%d-0" % i, "fields": ["n", str(i)]}) + "\n"
                    for i in range(1, 2502))
    r = invoke(["--db", str(tmp_path / "dst"), "import", "--batch", "1000"], input=lines)
    assert r.exit_code == 0, r.stderr
    assert "imported 1 stream, 2501 entries" in r.stderr
    s = session(tmp_path / "dst")
    assert s.execute([b"XLEN", b"big"]) == 2501


@pytest.mark.parametrize("line,msg", [
    ("not json", "not JSON"),
    ('{"stream": "s", "id": "1-0", "fields": ["odd"]}', "fields"),
    ('{"stream": "s", "id": "x", "fields": ["a", "b"]}', "bad id"),
    ('{"stream": "s", "id": "0-0", "fields": ["a", "b"]}', ""),
    ('{"stream": {"b64": "!!"}, "id": "1-0", "fields": ["a", "b"]}', "bad stream name"),
    ('[1, 2]', "not a JSON object"),
    ('{"type": "pending", "stream": "s", "group": "g", "id": "1-0"}', ""),
])
def test_bad_import_lines_are_refused_with_line_number(tmp_path, line, msg):
    r = invoke(["--db", str(tmp_path / "dst"), "import"], input=line + "\n")
    assert r.exit_code == 1
    assert r.stderr.startswith("xs: line 1") and msg in r.stderr
    assert "Traceback" not in r.stderr


def test_import_refuses_ids_not_above_the_last(tmp_path):
    s = session(tmp_path / "dst")
    s.execute([b"XADD", b"s", b"5-0", b"a", b"b"])
    r = invoke(["--db", str(tmp_path / "dst"), "import"],
               input='{"stream":"s","id":"5-0","fields":["a","b"]}\n')
    assert r.exit_code == 1 and "equal or smaller" in r.stderr


def test_encoding_helpers_round_trip_any_bytes():
    for b in (b"", b"abc", b"\xff", "é".encode(), bytes(range(256))):
        assert exchange.dec(json.loads(json.dumps(exchange.enc(b)))) == b


def test_import_takes_surrogate_escapes_as_the_bytes_they_stand_for(tmp_path):
    # the convention of xs --json (RESP3 replies): bytes that are not UTF-8
    # as lone surrogates U+DC80..U+DCFF; import accepts them as well as b64
    r = invoke(["--db", str(tmp_path / "dst"), "import"],
               input='{"stream":"s","id":"1-0","fields":["\\udcff","caf\\u00e9", {"b64": "/w=="}, "x"]}\n')
    assert r.exit_code == 0, r.stderr
    r = invoke(["--db", str(tmp_path / "dst"), "export"])
    assert json.loads(r.stdout) == {"stream": "s", "id": "1-0", "fields": [{"b64": "/w=="}, "café", {"b64": "/w=="}, "x"]}


def test_entry_record_is_the_one_entry_shape():
    assert exchange.entry_record(b"s", b"1-0", [b"a", b"1", b"a", b"\xff"]) == \
        {"stream": "s", "id": "1-0", "fields": ["a", "1", "a", {"b64": "/w=="}]}
