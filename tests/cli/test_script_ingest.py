"""Script mode's bulk-ingest paths must store exactly what the general
path stores: single-spaced lines, white-space-split lines and quoted
lines all end as the same entries."""
import pytest

from xstream_cli.execution.script import _plainness


@pytest.mark.parametrize("buf,level", [
    (b"XADD s * a 1\nXADD s * b 2\n", 2),
    (b"XADD s * a 1\nXADD  s * b 2\n", 1),      # double space
    (b"XADD s * a 1\t\n", 1),                    # tab
    (b"XADD s * a 1\r\n", 1),                    # CRLF
    (b" XADD s * a 1\n", 1),                     # leading space
    (b'XADD s * a "1"\n', 0),                    # quotes
    (b"XADD s * a\x0b1\n", 0),                   # VT does not split in redis-cli
])
def test_plainness_picks_the_simplest_safe_split(buf, level):
    assert _plainness(buf) == level


@pytest.mark.parametrize("lines", [
    ["XADD s * f1 v1 f2 v2", "XADD t * x y", "XADD s * f3 v3"],
    ["XADD  s  *  f1 v1 f2 v2", "XADD t * x\ty", "XADD s * f3 v3 "],
    ['XADD s * "f1" v1 f2 "v2"', "XADD t * 'x' y", 'XADD s * f3 "v3"'],
    ["xadd s * f1 v1 f2 v2", "XaDd t * x y", "XADD s * f3 v3"],
])
def test_bulk_xadd_paths_store_the_same_entries(run, lines):
    out = run(lines + ["XRANGE s - +", "XRANGE t - +", "XLEN s"])
    ids = out[:3]
    assert out[3] == [[ids[0], ["f1", "v1", "f2", "v2"]], [ids[2], ["f3", "v3"]]]
    assert out[4] == [[ids[1], ["x", "y"]]]
    assert out[5] == 2


def test_bulk_xadd_with_odd_fields_is_an_arity_error_in_place(run):
    out = run(["XADD s * a 1", "XADD s * a", "XADD s * b 2"])
    assert out[1] == {"error": "ERR wrong number of arguments for 'xadd' command"}
    assert out[2] != out[0] and isinstance(out[2], str)


def test_bulk_xadd_newline_in_quoted_field_round_trips(run):
    out = run(['XADD s * "a\\nb" "c\\nd"', "XRANGE s - +"])
    assert out[1] == [[out[0], ["a\nb", "c\nd"]]]
