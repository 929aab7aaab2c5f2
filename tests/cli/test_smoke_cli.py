"""End-to-end smoke tests of the xs executable (script mode)."""


def test_script_mode_xadd_then_xrange_round_trips_fields(run):
    out = run(["XADD s 1-0 a 1", "XADD s 2-0 b 2", "XRANGE s - +"])
    assert out == ["1-0", "2-0", [["1-0", ["a", "1"]], ["2-0", ["b", "2"]]]]


def test_script_mode_error_is_printed_in_place_and_later_lines_run(run):
    out = run(["XADD s 1-0 a 1", "XADD s 1-0 a 1", "XLEN s"])
    assert out[1] == {"error": "ERR The ID specified in XADD is equal or smaller than the target stream top item"}
    assert out[2] == 1
