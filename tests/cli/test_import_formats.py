"""xs import --stream S --format jsonl|kv, --id-field, --skip-existing
(issue 11, item 4): what each format makes of a line, line numbers and
what stays committed on an error, a killed import re-run to completion,
progress on a terminal only."""
import base64
import json
import os
import signal
import subprocess
import time

import pytest

from tests.conftest import ROOT, XS
from tests.harness.terminal import stderr_on_pty  # noqa: E402

ENV = dict(os.environ, XS_NO_PROGRESS="1")


def xs(db, *args, input=None, timeout=300):
    return subprocess.run(XS + ["--db", str(db)] + list(args), input=input, capture_output=True, cwd=ROOT,
                          env=ENV, timeout=timeout)


def entries(db, stream):
    """[(id, [field, value, ...])], bytes, through xs export."""
    p = xs(db, "export", stream)
    assert p.returncode == 0, p.stderr
    out = []
    for line in p.stdout.decode("utf-8", "surrogateescape").splitlines():
        r = json.loads(line)
        out.append((r["id"], [f.encode("utf-8", "surrogateescape") if isinstance(f, str)
                              else base64.b64decode(f["b64"]) for f in r["fields"]]))
    return out


def fields_of(db, stream):
    return [f for _, f in entries(db, stream)]


def xlen(db, stream):
    p = xs(db, "XLEN", stream)
    assert p.returncode == 0, p.stderr
    return int(p.stdout)


# ------------------------------------------------------------------ jsonl

def test_jsonl_members_become_fields_in_order_with_duplicates_and_values_as_documented(tmp_path):
    db = tmp_path / "db"
    src = (b'{"user":"u1","n":3,"price":-1.50,"big":1e3,"ok":true,"no":false,"tags":["a",1],'
           b'"o":{"k":"v","k":2},"user":"again","text":"M\xc3\xbcnchen","raw":"\xff\xfe"}\n')
    p = xs(db, "import", "--stream", "ev", "-", input=src)
    assert p.returncode == 0, p.stderr
    assert fields_of(db, "ev") == [[b"user", b"u1", b"n", b"3", b"price", b"-1.50", b"big", b"1e3",
                                    b"ok", b"true", b"no", b"false", b"tags", b'["a",1]',
                                    b"o", b'{"k":"v","k":2}', b"user", b"again",
                                    b"text", "München".encode(), b"raw", b"\xff\xfe"]]


def test_jsonl_strings_with_newlines_and_plain_objects_round_trip(tmp_path):
    db = tmp_path / "db"
    src = b'{"a":"x\\ny","b":"1"}\n{"k":"v","n":12}\n  {"s p":"t\\u00fcr"}  \r\n'
    p = xs(db, "import", "--stream", "ev", input=src)
    assert p.returncode == 0, p.stderr
    assert fields_of(db, "ev") == [[b"a", b"x\ny", b"b", b"1"], [b"k", b"v", b"n", b"12"],
                                   [b"s p", "t\u00fcr".encode()]]


@pytest.mark.parametrize("line,why", [
    (b'{"a":null}', 'field "a" is null'),
    (b'[1,2]', "not a JSON object"),
    (b'"text"', "not a JSON object"),
    (b'{}', "no fields"),
    (b'{"a":1', "not JSON"),
])
def test_a_bad_jsonl_line_is_one_line_with_its_number_exit_1_nothing_imported(tmp_path, line, why):
    db = tmp_path / "db"
    p = xs(db, "import", "--stream", "ev", "--format", "jsonl", input=b'{"a":"1"}\n\n' + line + b"\n")
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith("xs: line 3: ") and why in err and err.count("\n") == 1, err
    assert "nothing was imported" in err
    assert xlen(db, "ev") == 0


# --------------------------------------------------------------------- kv

def test_kv_words_split_as_redis_cli_with_quotes_escapes_and_equals_in_values(tmp_path):
    db = tmp_path / "db"
    src = (b'user=u1 n=3\n'
           b'  note="two words" path=/a=b   empty=\n'
           b"q='single quoted' esc=\"tab\\there\\x41\"\n"
           b'raw=\xff\xfe dup=1 dup=2\r\n')
    p = xs(db, "import", "--stream", "ev", "--format", "kv", input=src)
    assert p.returncode == 0, p.stderr
    assert fields_of(db, "ev") == [
        [b"user", b"u1", b"n", b"3"],
        [b"note", b"two words", b"path", b"/a=b", b"empty", b""],
        [b"q", b"single quoted", b"esc", b"tab\thereA"],
        [b"raw", b"\xff\xfe", b"dup", b"1", b"dup", b"2"],
    ]


def test_kv_lines_without_quotes_cut_each_word_at_its_first_equals_sign(tmp_path):
    db = tmp_path / "db"
    src = b"a=1 b=2\na==1 b=c=d\nx= y=\n\t a=1\tb=2 \n" + b" ".join(b"f%d=%d" % (i, i) for i in range(300)) + b"\n"
    p = xs(db, "import", "--stream", "ev", "--format", "kv", input=src)
    assert p.returncode == 0, p.stderr
    assert fields_of(db, "ev") == [[b"a", b"1", b"b", b"2"], [b"a", b"=1", b"b", b"c=d"], [b"x", b"", b"y", b""],
                                   [b"a", b"1", b"b", b"2"],
                                   [x for i in range(300) for x in (b"f%d" % i, b"%d" % i)]]


@pytest.mark.parametrize("line,why", [
    (b"a=1 oops", '"oops" is not field=value'),
    (b"=1", '"=1" is not field=value'),
    (b'a="unbalanced', "unbalanced quotes"),
])
def test_a_bad_kv_line_names_its_physical_line(tmp_path, line, why):
    db = tmp_path / "db"
    p = xs(db, "import", "--stream", "ev", "--format", "kv", input=b"a=1\n\n\nb=2\n" + line + b"\nc=3\n")
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith("xs: line 5: ") and why in err and err.count("\n") == 1, err
    assert xlen(db, "ev") == 0


def test_ids_are_new_unless_an_id_field_gives_them(tmp_path):
    db = tmp_path / "db"
    p = xs(db, "import", "--stream", "a", "--format", "kv", "--id-field", "id",
           input=b"id=5-1 x=1\nx=2 id=*\nid=9-0 x=3\n")
    # a new ID (now) is above 9-0, so the third line is refused: 9-0 is below the top
    assert p.returncode == 1 and b"line 3: " in p.stderr and b"equal or smaller" in p.stderr
    p = xs(db, "import", "--stream", "b", "--id-field", "id", input=b'{"id":"7-1","x":"1"}\n{"x":"2","id":"7-2"}\n')
    assert p.returncode == 0, p.stderr
    assert entries(db, "b") == [("7-1", [b"x", b"1"]), ("7-2", [b"x", b"2"])]
    p = xs(db, "import", "--stream", "c", input=b'{"id":"7-1","x":"1"}\n')
    assert p.returncode == 0
    assert fields_of(db, "c") == [[b"id", b"7-1", b"x", b"1"]]         # without --id-field: a field
    p = xs(db, "import", "--stream", "d", "--id-field", "id", input=b'{"id":"seven","x":"1"}\n')
    assert p.returncode == 1 and p.stderr.startswith(b"xs: line 1: bad entry ID")


@pytest.mark.parametrize("args", [
    ["--format", "kv"],                               # needs --stream
    ["--format", "jsonl"],
    ["--stream", "s", "--format", "xs"],
    ["--id-field", "id"],
    ["--format", "csv", "--stream", "s"],
    ["--stream", "s", "--batch", "0"],
    ["--from", "redis://127.0.0.1:1", "--stream", "s"],
])
def test_import_option_misuse_is_a_usage_error_changing_nothing(tmp_path, args):
    db = tmp_path / "db"
    p = xs(db, "import", *args, input=b"a=1\n")
    assert p.returncode == 2 and b"Traceback" not in p.stderr, p.stderr
    assert not db.exists()


# ------------------------------------------------------- batches on error

def test_an_error_keeps_exactly_the_batches_before_its_line_and_says_so(tmp_path):
    db = tmp_path / "db"
    lines = [b"n=%d" % i for i in range(1, 8)] + [b"broken"] + [b"n=9"]
    src = b"\n".join(lines[:3]) + b"\n\n" + b"\n".join(lines[3:]) + b"\n"    # a blank line 4
    p = xs(db, "import", "--stream", "s", "--format", "kv", "--batch", "3", input=src)
    assert p.returncode == 1
    err = p.stderr.decode()
    # entries 1-3 (lines 1-3) and 4-6 (lines 5-7) were two batches; 7 was in the batch of line 9
    assert err == ("xs: line 9: \"broken\" is not field=value (lines 1-7 stay imported (6 entries, earlier "
                   "batches); nothing from line 8 on was)\n"), err
    assert fields_of(db, "s") == [[b"n", b"%d" % i] for i in range(1, 7)]


def test_a_refused_record_in_the_export_shape_keeps_the_earlier_batches(tmp_path):
    db = tmp_path / "db"
    recs = [{"stream": "s", "id": "%d-0" % i, "fields": ["n", str(i)]} for i in range(1, 6)]
    recs.insert(4, {"stream": "s", "id": "2-0", "fields": ["n", "dup"]})       # line 5: below the top
    src = "".join(json.dumps(r) + "\n" for r in recs).encode()
    p = xs(db, "import", "--batch", "2", input=src)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert err.startswith("xs: line 5: ID 2-0 is equal or smaller") and "lines 1-4 stay imported (4 entries" in err
    assert xlen(db, "s") == 4


# ---------------------------------------------------------- skip-existing

def test_skip_existing_skips_identical_entries_refuses_different_ones_and_counts_missing_ones(tmp_path):
    src_db, db = tmp_path / "src", tmp_path / "db"
    script = "".join("XADD s %d-0 n %d\n" % (i, i) for i in range(1, 11)).encode()
    assert xs(src_db, input=script).returncode == 0
    dump = xs(src_db, "export").stdout
    first = b"".join(dump.splitlines(True)[:6])
    assert xs(db, "import", input=first).returncode == 0
    assert xs(db, "XDEL", "s", "3-0").returncode == 0           # gone since: below the top, not there
    p = xs(db, "import", input=dump)
    assert p.returncode == 1 and b"line 1: ID 1-0 is equal or smaller" in p.stderr
    p = xs(db, "import", "--skip-existing", input=dump)
    assert p.returncode == 0, p.stderr
    assert b"imported 1 stream, 4 entries" in p.stderr
    assert b"skipped 5 already there, 1 below the stream's last ID and not there (deleted or trimmed)" in p.stderr
    assert [i for i, _ in entries(db, "s")] == ["%d-0" % i for i in range(1, 11) if i != 3]
    other = dump.replace(b'"id":"2-0","fields":["n","2"]', b'"id":"2-0","fields":["n","two"]')
    assert other != dump
    p = xs(db, "import", "--skip-existing", input=other)
    assert p.returncode == 1
    assert p.stderr.startswith(b"xs: line 2: entry 2-0 of stream s exists with other fields"), p.stderr


def test_an_import_killed_midway_is_completed_by_a_rerun_with_skip_existing(tmp_path):
    src_db, db = tmp_path / "src", tmp_path / "db"
    from storage.store import Store
    store = Store(str(src_db), durable=False)      # 120,000 entries in one transaction (fast)
    try:
        store.run(lambda tx: tx.load(("entry", i, s.encode(), (i // 3 + 1, i % 3), [b"n", b"%d" % i, b"pad", b"p" * 40])
                                     for s in ("a", "b", "c") for i in range(40000)), write=True)
    finally:
        store.close()
    dump = tmp_path / "dump.jsonl"
    assert xs(src_db, "export", "-o", str(dump)).returncode == 0
    p = subprocess.Popen(XS + ["--db", str(db), "import", "--batch", "500", str(dump)], cwd=ROOT, env=ENV,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 120
    while time.monotonic() < end and p.poll() is None:
        if (db / "data.mdb").exists() and xs(db, "XLEN", "a").stdout.strip() not in (b"", b"0"):
            break
        time.sleep(0.05)
    assert p.poll() is None, "the import finished before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    got = sum(xlen(db, s) for s in ("a", "b", "c"))
    assert 0 < got < 120000
    p = xs(db, "import", str(dump))                 # without --skip-existing: refused at line 1
    assert p.returncode == 1 and b"line 1: " in p.stderr
    p = xs(db, "import", "--skip-existing", str(dump))
    assert p.returncode == 0, p.stderr
    assert ("skipped %d already there" % got).encode() in p.stderr
    assert xs(db, "export").stdout == xs(src_db, "export").stdout      # no duplicates, nothing missing


# ------------------------------------------------------------- progress

def on_pty(argv, stdin, timeout=300):
    """Run ``argv`` with stderr on a pseudo-terminal; (status, shown)."""
    return stderr_on_pty(argv, stdin, timeout)[:2]


def test_import_progress_shows_on_a_terminal_and_not_on_a_pipe(tmp_path):
    src = tmp_path / "in.kv"
    src.write_bytes(b"".join(b"user=u%d action=click n=%d\n" % (i, i) for i in range(60000)))
    with open(src, "rb") as f:
        status, shown = on_pty(XS + ["--db", str(tmp_path / "t"), "import", "--stream", "ev", "--format", "kv",
                                     "--batch", "1000", "-"], f)
    assert status == 0, shown
    assert "Traceback" not in shown
    assert " lines" in shown and "/s" in shown, shown            # the spinner's count and rate
    assert "imported 1 stream, 60000 entries" in shown
    env = dict(os.environ)
    env.pop("XS_NO_PROGRESS", None)
    with open(src, "rb") as f:
        p = subprocess.run(XS + ["--db", str(tmp_path / "p"), "import", "--stream", "ev", "--format", "kv",
                                 "--batch", "1000", "-"], stdin=f, capture_output=True, cwd=ROOT, env=env,
                           timeout=300)
    assert p.returncode == 0
    assert p.stderr.count(b"\n") == 1 and p.stderr.startswith(b"xs: imported 1 stream, 60000 entries")
    assert xlen(tmp_path / "p", "ev") == 60000


def test_a_slow_producers_entries_are_committed_while_import_waits_for_more(tmp_path):
    db = tmp_path / "db"
    p = subprocess.Popen(XS + ["--db", str(db), "import", "--stream", "ev", "--format", "kv", "-"],
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    try:
        p.stdin.write(b"n=1\nn=2\nn=3\n")
        p.stdin.flush()
        end = time.monotonic() + 30
        while time.monotonic() < end:
            if (db / "data.mdb").exists() and xs(db, "XLEN", "ev").stdout == b"3\n":
                break
            time.sleep(0.1)
        assert xs(db, "XLEN", "ev").stdout == b"3\n"          # the batch of 10000 is not full: committed anyway
        assert p.poll() is None
        p.stdin.write(b"n=4\n")
        p.stdin.close()
        assert p.wait(timeout=30) == 0
        assert p.stderr.read().startswith(b"xs: imported 1 stream, 4 entries")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert xlen(db, "ev") == 4


def test_kv_lines_with_single_spaces_only_take_the_fast_path_with_the_same_results(tmp_path):
    db = tmp_path / "db"
    src = b"a=1 b=2\na==1 b=c=d\nx= y=\nk=v\n"
    p = xs(db, "import", "--stream", "ev", "--format", "kv", input=src)
    assert p.returncode == 0, p.stderr
    assert fields_of(db, "ev") == [[b"a", b"1", b"b", b"2"], [b"a", b"=1", b"b", b"c=d"], [b"x", b"", b"y", b""],
                                   [b"k", b"v"]]
    for bad, why in ((b"a=1 =x", b'"=x" is not field=value'), (b"a=1 b", b'"b" is not field=value'),
                     (b"ab", b'"ab" is not field=value')):
        p = xs(db, "import", "--stream", "ev", "--format", "kv", input=b"k=v\n" + bad + b"\n")
        assert p.returncode == 1 and p.stderr.startswith(b"xs: line 2: " + why), p.stderr
    assert xlen(db, "ev") == 4
