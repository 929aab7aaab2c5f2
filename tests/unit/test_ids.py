"""storage.ids: Redis's stream ID parsing (streamGenericParseIDOrReply,
string2ull), checked against redis-server's behaviour."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from storage import ids
from storage.errors import RedisError

U64 = (1 << 64) - 1
INVALID = "ERR Invalid stream ID specified as stream command argument"


def bad(fn, *a):
    with pytest.raises(RedisError) as e:
        fn(*a)
    return e.value.text


# ------------------------------------------------------------ string2ull

@pytest.mark.parametrize("s,v", [
    (b"0", 0), (b"7", 7), (b"18446744073709551615", U64),
    (b"007", 7),                 # leading zeros: strtoull fallback
    (b"+7", 7),                  # '+' sign: strtoull fallback
    (b" 7", 7), (b"\t7", 7),     # leading white space: strtoull fallback
    (b"-0", 0),
    (b"-9223372036854775809", U64 - 9223372036854775809 + 1),   # below LLONG_MIN: wraps, like C
    (b"-18446744073709551615", 1),
])
def test_string2ull_accepts_what_redis_accepts(s, v):
    assert ids.string2ull(s) == v


@pytest.mark.parametrize("s", [
    b"", b"-", b"+", b" ", b"7 ", b"7x", b"0x10", b"1.5", b"1e3",
    b"-5", b"-9223372036854775808",          # string2ll succeeds, negative: rejected
    b"18446744073709551616", b"-18446744073709551616",
    b"\xd9\xa3",                             # a non-ASCII digit
])
def test_string2ull_rejects_what_redis_rejects(s):
    assert ids.string2ull(s) is None


# -------------------------------------------------------------- parse_id

def test_parse_id_full_form():
    assert ids.parse_id(b"1-2") == (1, 2)
    assert ids.parse_id(b"18446744073709551615-18446744073709551615") == (U64, U64)


def test_parse_id_bare_ms_takes_missing_seq():
    assert ids.parse_id(b"5") == (5, 0)
    assert ids.parse_id(b"5", U64) == (5, U64)


def test_parse_id_minus_and_plus_are_the_extremes():
    assert ids.parse_id(b"-") == (0, 0)
    assert ids.parse_id(b"+") == (U64, U64)


def test_parse_id_strict_rejects_minus_and_plus():
    assert bad(ids.parse_id, b"-", 0, True) == INVALID
    assert bad(ids.parse_id, b"+", 0, True) == INVALID


@pytest.mark.parametrize("s,v", [
    (b"5--0", (5, 0)), (b"5-+3", (5, 3)), (b"5- 3", (5, 3)), (b" 5-0", (5, 0)), (b"007-007", (7, 7)),
])
def test_parse_id_uses_string2ull_fallbacks_on_both_parts(s, v):
    assert ids.parse_id(s) == v


def test_parse_id_seq_below_llong_min_wraps_like_redis():
    # redis-server: XRANGE s 5--9223372036854775809 + starts at 5-9223372036854775807
    assert ids.parse_id(b"5--9223372036854775809") == (5, 9223372036854775807)
    assert ids.parse_id(b"5--18446744073709551615") == (5, 1)


@pytest.mark.parametrize("s", [
    b"", b"-5", b"5-", b"5--5", b"5-3-4", b"5-0x1", b"a-1", b"1-a", b"18446744073709551616-0",
    b"0-18446744073709551616", b"-*", b"1 ", b"1-1 ",
])
def test_parse_id_rejects_malformed(s):
    assert bad(ids.parse_id, s) == INVALID


def test_parse_id_accepts_127_bytes_and_rejects_128():
    ok = b"0" * 126 + b"5"
    assert len(ok) == 127
    assert ids.parse_id(ok) == (5, 0)
    assert bad(ids.parse_id, b"0" + ok) == INVALID


def test_parse_id_stops_at_an_embedded_nul_like_redis():
    # Redis copies the argument into a C buffer: strchr/strlen stop at NUL,
    # so redis-server's XRANGE s "5\x00zz" + starts at 5-0.
    assert ids.parse_id(b"5\x00zz") == (5, 0)


@given(st.integers(0, U64), st.integers(0, U64))
def test_parse_id_round_trips_fmt(ms, seq):
    assert ids.parse_id(ids.fmt((ms, seq))) == (ms, seq)
    assert ids.fmt((ms, seq)) == b"%d-%d" % (ms, seq)


# ---------------------------------------------------------- parse_add_id

def test_add_id_explicit():
    assert ids.parse_add_id(b"5-3") == ((5, 3), True)
    assert ids.parse_add_id(b"5") == ((5, 0), True)


def test_add_id_ms_star_form_leaves_seq_to_the_stream():
    assert ids.parse_add_id(b"5-*") == ((5, 0), False)
    assert ids.parse_add_id(b"0-*") == ((0, 0), False)


@pytest.mark.parametrize("s", [b"-", b"+", b"-*", b"*-*", b"1-*-*", b"x-*", b"1-**", b"18446744073709551616-*"])
def test_add_id_rejects_invalid_forms(s):
    assert bad(ids.parse_add_id, s) == INVALID


# ----------------------------------------------------- exclusive ranges

def test_exclusive_start_is_the_next_id():
    assert ids.parse_range_id(b"(5-3", 0, True) == (5, 4)
    assert ids.parse_range_id(b"(5-18446744073709551615", 0, True) == (6, 0)


def test_exclusive_end_is_the_previous_id():
    assert ids.parse_range_id(b"(5-3", U64, False) == (5, 2)
    assert ids.parse_range_id(b"(5-0", U64, False) == (4, U64)


def test_exclusive_bare_ms_end_uses_missing_seq_first():
    # Redis parses "(5" as an end with missing seq UINT64_MAX, then decrements
    assert ids.parse_range_id(b"(5", U64, False) == (5, U64 - 1)
    assert ids.parse_range_id(b"(5", 0, True) == (5, 1)


def test_exclusive_start_at_max_id_is_invalid_start():
    assert bad(ids.parse_range_id, b"(18446744073709551615-18446744073709551615", 0, True) == \
        "ERR invalid start ID for the interval"


def test_exclusive_end_at_zero_is_invalid_end():
    assert bad(ids.parse_range_id, b"(0-0", U64, False) == "ERR invalid end ID for the interval"
    assert bad(ids.parse_range_id, b"(0", 0, False) == "ERR invalid end ID for the interval"


def test_exclusive_bound_is_strict_so_minus_and_plus_are_invalid():
    assert bad(ids.parse_range_id, b"(-", 0, True) == INVALID
    assert bad(ids.parse_range_id, b"(+", U64, False) == INVALID


def test_lone_open_paren_is_an_invalid_id_not_an_exclusive_bound():
    assert bad(ids.parse_range_id, b"(", 0, True) == INVALID


def test_inclusive_range_bounds_accept_minus_and_plus():
    assert ids.parse_range_id(b"-", 0, True) == (0, 0)
    assert ids.parse_range_id(b"+", U64, False) == (U64, U64)


@given(st.integers(0, U64), st.integers(0, U64))
def test_incr_and_decr_are_inverse(ms, seq):
    i = (ms, seq)
    if i != ids.MAX_ID:
        assert ids.incr(i) > i
        assert ids.decr(ids.incr(i)) == i
    if i != ids.MIN_ID:
        assert ids.decr(i) < i
        assert ids.incr(ids.decr(i)) == i


def _by_parts(s):
    """parse_id's rule for ``<ms>-<seq>`` (no NUL, at most 127 bytes): each
    side of the first dash read by string2ull, either failing: invalid."""
    dash = s.find(b"-")
    if dash < 0:
        ms = ids.string2ull(s)
        return None if ms is None else (ms, 0)
    ms, seq = ids.string2ull(s[:dash]), ids.string2ull(s[dash + 1:])
    return None if ms is None or seq is None else (ms, seq)


@given(st.text(alphabet="0123456789-+ x", max_size=45).map(str.encode)
       | st.tuples(st.integers(0, 1 << 66), st.integers(0, 1 << 66)).map(lambda t: b"%d-%d" % t))
def test_parse_id_of_digits_is_each_side_read_by_string2ull(s):
    """The shortcut for two runs of digits (every ID a client sends back)
    gives what the general rule gives, out-of-range numbers included."""
    want = _by_parts(s)
    if s in (b"-", b"+"):
        want = ids.MIN_ID if s == b"-" else ids.MAX_ID
    if want is None:
        assert bad(ids.parse_id, s) == INVALID
    else:
        assert ids.parse_id(s) == want
