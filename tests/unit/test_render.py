"""xstream_cli.output.render: raw / no-raw output byte-identical to redis-cli
7.0.15 (transcripts in the research notes), and the JSON lines mode."""
import json

import pytest

from storage.errors import RedisError
from xstream_cli.output.render import json as render_json
from xstream_cli.output.render import noraw, quote, raw
from xstream_cli.output.reply import OK, Map, Status

EVAL_MIX = [1, None, [], [b"a", [], [None]], b"x", Status("OK"), -5, b""]


# ----------------------------------------------------------------- no-raw

def test_noraw_scalars():
    assert noraw(b"1-0") == b'"1-0"\n'
    assert noraw(b"") == b'""\n'
    assert noraw(1) == b"(integer) 1\n"
    assert noraw(-5) == b"(integer) -5\n"
    assert noraw(None) == b"(nil)\n"
    assert noraw(OK) == b"OK\n"
    assert noraw([]) == b"(empty array)\n"
    assert noraw(RedisError("ERR syntax error")) == b"(error) ERR syntax error\n"


def test_noraw_escapes_like_sdscatrepr():
    assert quote(b'say "hi" \'x\'') == b'"say \\"hi\\" \'x\'"'
    assert quote(b"a\\b") == b'"a\\\\b"'
    assert quote(b"a\nb\rc\td") == b'"a\\nb\\rc\\td"'
    assert quote(b"\x07\x08\x7f\x01\x1b\x80 ~") == b'"\\a\\b\\x7f\\x01\\x1b\\x80 ~"'
    assert quote("café".encode()) == b'"caf\\xc3\\xa9"'
    assert quote(b"\xff\xfe\x00") == b'"\\xff\\xfe\\x00"'


def test_noraw_nested_mix_matches_redis_cli():
    assert noraw(EVAL_MIX) == (
        b'1) (integer) 1\n'
        b'2) (nil)\n'
        b'3) (empty array)\n'
        b'4) 1) "a"\n'
        b'   2) (empty array)\n'
        b'   3) 1) (nil)\n'
        b'5) "x"\n'
        b'6) OK\n'
        b'7) (integer) -5\n'
        b'8) ""\n')


def test_noraw_error_inside_array():
    r = [Status("STATUS"), RedisError("MYERR inner"), b"after"]
    assert noraw(r) == b'1) STATUS\n2) (error) MYERR inner\n3) "after"\n'


def test_noraw_one_element_arrays_are_numbered():
    assert noraw([[]]) == b"1) (empty array)\n"
    assert noraw([None]) == b"1) (nil)\n"


def test_noraw_index_alignment_for_more_than_nine_elements():
    t = list(range(1, 13))
    t[2] = [b"a", b"b"]
    t[10] = [b"x", [b"y", b"z"]]
    assert noraw(t) == (
        b' 1) (integer) 1\n'
        b' 2) (integer) 2\n'
        b' 3) 1) "a"\n'
        b'    2) "b"\n'
        b' 4) (integer) 4\n'
        b' 5) (integer) 5\n'
        b' 6) (integer) 6\n'
        b' 7) (integer) 7\n'
        b' 8) (integer) 8\n'
        b' 9) (integer) 9\n'
        b'10) (integer) 10\n'
        b'11) 1) "x"\n'
        b'    2) 1) "y"\n'
        b'       2) "z"\n'
        b'12) (integer) 12\n')


def test_noraw_inner_array_of_ten_pads_its_own_indexes():
    out = noraw([list(range(1, 11))] * 3).split(b"\n")
    assert out[0] == b"1)  1) (integer) 1"
    assert out[1] == b"    2) (integer) 2"
    assert out[9] == b"   10) (integer) 10"
    assert out[10] == b"2)  1) (integer) 1"


def test_noraw_index_alignment_for_more_than_ninety_nine_elements():
    t = [b"v%d" % i for i in range(1, 102)]
    t[99] = [b"a", b"b"]
    t[8] = [b"p", b"q"]
    lines = noraw(t).split(b"\n")
    assert lines[0] == b'  1) "v1"'
    assert lines[8] == b'  9) 1) "p"'
    assert lines[9] == b'     2) "q"'
    assert lines[10] == b' 10) "v10"'
    assert lines[99] == b' 99) "v99"'
    assert lines[100] == b'100) 1) "a"'
    assert lines[101] == b'     2) "b"'
    assert lines[102] == b'101) "v101"'


def test_noraw_xread_reply_is_resp2_key_entries_pairs():
    r = Map([(b"s", [[b"1-0", [b"a", b"b"]], [b"2-0", [b"c", b"d", b"e", b"f"]]]),
             (b"s2", [[b"1-0", [b"x", b"y"]]])], flat=False)
    assert noraw(r) == (
        b'1) 1) "s"\n'
        b'   2) 1) 1) "1-0"\n'
        b'         2) 1) "a"\n'
        b'            2) "b"\n'
        b'      2) 1) "2-0"\n'
        b'         2) 1) "c"\n'
        b'            2) "d"\n'
        b'            3) "e"\n'
        b'            4) "f"\n'
        b'2) 1) "s2"\n'
        b'   2) 1) 1) "1-0"\n'
        b'         2) 1) "x"\n'
        b'            2) "y"\n')


def test_noraw_flat_map_is_numbered_key_value_list():
    r = Map([("length", 0), ("first-entry", None)])
    assert noraw(r) == b'1) "length"\n2) (integer) 0\n3) "first-entry"\n4) (nil)\n'


def test_noraw_help_lines_are_status_strings_unquoted():
    assert noraw([Status("HELP"), Status("    Prints this help.")]) == b"1) HELP\n2)     Prints this help.\n"


# -------------------------------------------------------------------- raw

def test_raw_scalars():
    assert raw(b"1-0") == b"1-0\n"
    assert raw(7) == b"7\n"
    assert raw(-5) == b"-5\n"
    assert raw(None) == b"\n"
    assert raw([]) == b"\n"
    assert raw(b"") == b"\n"
    assert raw(OK) == b"OK\n"


def test_raw_error_is_followed_by_a_blank_line():
    assert raw(RedisError("ERR syntax error")) == b"ERR syntax error\n\n"


def test_raw_bytes_are_verbatim():
    assert raw(b"a\nb\r\t\xff\x00") == b"a\nb\r\t\xff\x00\n"


def test_raw_nested_mix_flattens_with_blank_lines_for_nil_and_empty():
    assert raw(EVAL_MIX) == b"1\n\n\na\n\n\nx\nOK\n-5\n\n"


def test_raw_error_inside_array():
    assert raw([Status("STATUS"), RedisError("MYERR inner"), b"after"]) == b"STATUS\nMYERR inner\n\nafter\n"


def test_raw_entries_flatten_and_deleted_history_entry_is_blank():
    assert raw([[b"1-0", [b"a", b"b"]], [b"2-0", None]]) == b"1-0\na\nb\n2-0\n\n"


def test_raw_empty_stream_xinfo_shows_blank_entries():
    r = Map([("groups", 1), ("first-entry", None), ("last-entry", None)])
    assert raw(r) == b"groups\n1\nfirst-entry\n\nlast-entry\n\n"


def test_raw_xread_map_flattens_key_then_entries():
    r = Map([(b"s", [[b"3-0", [b"e", b"f"]]])], flat=False)
    assert raw(r) == b"s\n3-0\ne\nf\n"


def test_raw_nested_empty_arrays():
    assert raw([[]]) == b"\n"
    assert raw([None]) == b"\n"
    assert raw([1, [2, 3], []]) == b"1\n2\n3\n\n"


# ------------------------------------------------------------------- JSON

def j(r):
    b = render_json(r)
    assert b.endswith(b"\n") and b.count(b"\n") == 1
    return json.loads(b.decode("utf-8", "surrogateescape"))


def test_json_scalars():
    assert j(b"1-0") == "1-0"
    assert j(5) == 5
    assert j(None) is None
    assert j([]) == []
    assert j(OK) == "OK"


def test_json_error_object_carries_full_text():
    assert j(RedisError("NOGROUP No such key 's'")) == {"error": "NOGROUP No such key 's'"}


def test_json_map_is_an_object_in_order():
    r = Map([("length", 2), ("first-entry", [b"1-0", [b"a", b"b"]]), ("last-entry", None)])
    out = render_json(r)
    assert out == b'{"length": 2, "first-entry": ["1-0", ["a", "b"]], "last-entry": null}\n'


def test_json_xread_map_keyed_by_stream():
    r = Map([(b"s", [[b"1-0", [b"a", b"b"]]]), (b"t", [])], flat=False)
    assert j(r) == {"s": [["1-0", ["a", "b"]]], "t": []}


def test_json_map_naming_a_stream_twice_keeps_both_pairs_like_redis():
    # XREAD STREAMS s s 0 1-0: Redis's RESP3 map carries "s" twice
    r = Map([(b"s", [[b"1-0", [b"a", b"b"]]]), (b"s", [])], flat=False)
    out = render_json(r)
    assert out == b'{"s": [["1-0", ["a", "b"]]], "s": []}\n'
    assert json.loads(out, object_pairs_hook=list) == [("s", [["1-0", ["a", "b"]]]), ("s", [])]


def test_json_bytes_that_are_not_utf8_are_b64_objects_as_in_export():
    b = render_json([b"\xff\xfe", b"caf\xc3\xa9", b"\x00"])
    v = json.loads(b.decode("utf-8"))      # strict UTF-8: no lone surrogates for jq or Node to mangle
    assert v == [{"b64": "//4="}, "café", "\x00"]


def test_json_map_key_that_is_not_utf8_is_shown_escaped():
    # surrogateescape (\\udcXX), reversible and distinct from a real backslash (issue 38 item 9)
    v = json.loads(render_json(Map([(b"\xffk", 1)], flat=False)).decode("utf-8"))
    assert v == {"\udcffk": 1}


def test_json_escapes_quotes_and_control_characters():
    out = render_json(b'a"b\\c\nd')
    assert out == b'"a\\"b\\\\c\\nd"\n'


def test_json_keeps_unicode_unescaped():
    assert render_json("é".encode()) == '"é"\n'.encode()


@pytest.mark.parametrize("r", [EVAL_MIX, [b"x", [1, [None, []]]], Map([("a", Map([("b", 1)]))])])
def test_every_renderer_ends_with_one_newline(r):
    assert noraw(r).endswith(b"\n")
    assert raw(r).endswith(b"\n")
    assert render_json(r).endswith(b"\n") and render_json(r).count(b"\n") == 1
