"""--json and --jsonl for scripts (issue 27, item 8): bytes that are not
UTF-8 as {"b64": ...} everywhere; --jsonl gives the entries of XRANGE,
XREVRANGE, XREAD and XREADGROUP one per line in the export shape; a long
range is written as it is read, byte for byte what the whole reply
rendered at once would be."""
import json
import subprocess

import pytest

from conftest import ROOT, XS, new_store


def xs(db, *args, input=None):
    return subprocess.run(XS + ["--db", str(db)] + list(args), input=input, capture_output=True, timeout=120,
                          cwd=ROOT)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """12,001 entries (more than two pages of a streamed range)."""
    db = tmp_path_factory.mktemp("big") / "db"
    lines = b"".join(b"XADD s %d-%d n %d v x%s\n" % (1000 + i // 3, i % 3, i, b"y" * (i % 5)) for i in range(12001))
    p = xs(db, "--no-sync", input=lines)
    assert p.returncode == 0, p.stderr
    return db


@pytest.mark.parametrize("mode", ["--json", "--jsonl", "--raw"])
@pytest.mark.parametrize("command", ["XRANGE s - +", "XREVRANGE s + -", "XRANGE s - + COUNT 7001",
                                     "XREVRANGE s + - COUNT 12001", "XRANGE s (1000-2 5000", "XRANGE s 0 0",
                                     "XRANGE none - +", "XRANGE s - + COUNT 0", "XREVRANGE s 1500 (1200-1"])
def test_a_streamed_range_is_byte_for_byte_the_whole_reply(big, mode, command):
    one_shot = xs(big, mode, *command.split())          # streamed, page by page
    script = xs(big, mode, input=command.encode() + b"\n")      # rendered whole, after its batch
    assert one_shot.returncode == script.returncode == 0, one_shot.stderr
    assert one_shot.stdout == script.stdout


def test_a_streamed_range_into_a_closed_pipe_ends_quietly(big):
    p = subprocess.run(["bash", "-c", " ".join(XS) + " --db '%s' --json XRANGE s - + | head -c 100" % big],
                       capture_output=True, timeout=120, cwd=ROOT)
    assert len(p.stdout) == 100 and p.stderr == b""


def test_jsonl_gives_one_export_shaped_line_per_entry(tmp_path):
    db = tmp_path / "db"
    p = xs(db, "--jsonl", input=b'XADD s 1-1 f "a\\xffb" g v\nXADD t 2-1 h w\nXRANGE s - +\nXREVRANGE t + -\n'
                                 b"XREAD STREAMS s t 0 0\nXGROUP CREATE s g 0\nXREADGROUP GROUP g c STREAMS s >\n"
                                 b"XREAD BLOCK 10 STREAMS s $\nXLEN s\nXRANGE none - +\n")
    assert p.returncode == 0, p.stderr
    s1 = {"stream": "s", "id": "1-1", "fields": ["f", {"b64": "Yf9i"}, "g", "v"]}
    t1 = {"stream": "t", "id": "2-1", "fields": ["h", "w"]}
    assert [json.loads(line) for line in p.stdout.decode("utf-8").splitlines()] == [
        "1-1", "2-1", s1, t1, s1, t1, "OK", s1, 1]
    one = xs(db, "--jsonl", "XRANGE", "s", "-", "+")
    assert json.loads(one.stdout) == s1
    assert xs(db, "--jsonl", "XREAD", "STREAMS", "t", "0").stdout == json.dumps(t1, separators=(",", ":")).encode() \
        + b"\n"


def test_json_writes_bytes_that_are_not_utf8_as_b64_objects(tmp_path):
    db = new_store(tmp_path / "db")
    assert xs(db, "XADD", "s", "1-1", "f", b"\xff\xfe").returncode == 0
    for argv in (["XRANGE", "s", "-", "+"], ["XREAD", "STREAMS", "s", "0"]):
        out = xs(db, "--json", *argv).stdout
        out.decode("utf-8")                                   # strictly UTF-8
        assert b'{"b64": "//4="}' in out and b"\\udc" not in out
