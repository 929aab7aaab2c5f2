"""xstream_cli.splitargs: redis-cli's line splitting (sdssplitargs), as
observed with redis-cli 7.0.15 (see the research transcript A8, A9)."""
import pytest

from xstream_cli.splitargs import SplitError, split_line


@pytest.mark.parametrize("line,args", [
    (b"XADD s * a 1", [b"XADD", b"s", b"*", b"a", b"1"]),
    (b"  ECHO   spaced   ", [b"ECHO", b"spaced"]),
    (b"ECHO\ta\tb\r", [b"ECHO", b"a", b"b"]),
    (b"ECHO crlf\r", [b"ECHO", b"crlf"]),
    (b"", []),
    (b"   ", []),
    (b"\t", []),
])
def test_unquoted_words_split_on_blanks(line, args):
    assert split_line(line) == args


def test_backslash_is_literal_outside_quotes():
    assert split_line(b"ECHO a\\nb") == [b"ECHO", b"a\\nb"]


@pytest.mark.parametrize("line", [b"ECHO a\x0bb", b"ECHO a\x0cb", b'ECHO a\x0bb "q"'])
def test_vertical_tab_and_form_feed_do_not_end_an_unquoted_word(line):
    # sdssplitargs ends an unquoted token only at SP, \n, \r, \t, NUL
    assert split_line(line)[1] == line.split(b" ")[1]


def test_vertical_tab_between_words_is_skipped_as_blank():
    assert split_line(b"ECHO \x0b x") == [b"ECHO", b"x"]


@pytest.mark.parametrize("line,arg", [
    (b'ECHO "a\\nb\\rc\\td\\be\\af"', b"a\nb\rc\td\be\af"),
    (b'ECHO "\\x41\\x7a\\xff\\x00Z"', b"Az\xff\x00Z"),
    (b'ECHO "\\xFF\\xfF\\x4g"', b"\xff\xffx4g"),
    (b'ECHO "\\xZZ"', b"xZZ"),
    (b'ECHO "\\q\\z\\0\\x4"', b"qz0x4"),
    (b'ECHO "q\\"q"', b'q"q'),
    (b'ECHO "b\\\\s"', b"b\\s"),
    (b'ECHO "it\'s"', b"it's"),
    (b'ECHO ""', b""),
    (b'ECHO "a b"', b"a b"),
])
def test_double_quotes_take_escapes(line, arg):
    assert split_line(line) == [b"ECHO", arg]


@pytest.mark.parametrize("line,arg", [
    (b"ECHO 'it\\'s'", b"it's"),
    (b"ECHO 'a\\nb'", b"a\\nb"),
    (b"ECHO 'x\\\\y'", b"x\\\\y"),
    (b"ECHO 'dq\"'", b'dq"'),
    (b"ECHO 'a\\\"b'", b'a\\"b'),
    (b"ECHO ''", b""),
])
def test_single_quotes_are_literal_but_for_escaped_quote(line, arg):
    assert split_line(line) == [b"ECHO", arg]


def test_quote_in_the_middle_of_a_word_starts_quoting():
    assert split_line(b'ECHO a"b c"') == [b"ECHO", b"ab c"]
    assert split_line(b"ECHO a'b c'") == [b"ECHO", b"ab c"]


def test_closing_quote_followed_by_blank_or_end_is_fine():
    assert split_line(b'ECHO "a"\t') == [b"ECHO", b"a"]
    assert split_line(b'ECHO "q"\r') == [b"ECHO", b"q"]
    assert split_line(b'ECHO "ab" c') == [b"ECHO", b"ab", b"c"]


@pytest.mark.parametrize("line", [
    b'ECHO "ab"c', b"ECHO 'ab'c", b"ECHO 'a'b",          # closing quote not followed by a blank
    b'ECHO "unbalanced', b"ECHO 'unb", b'ECHO x"', b"ECHO x'", b'ECHO "\\"', b'ECHO "abc\\',
])
def test_unbalanced_or_glued_quotes_reject_the_line(line):
    with pytest.raises(SplitError):
        split_line(line)


def test_nul_ends_the_line():
    assert split_line(b"ECHO a\x00 b") == [b"ECHO", b"a"]
    with pytest.raises(SplitError):
        split_line(b'ECHO "a\x00b"')


def test_non_utf8_bytes_pass_through():
    assert split_line(b"XADD s * \xff \xfe") == [b"XADD", b"s", b"*", b"\xff", b"\xfe"]
    assert split_line(b"XADD s * '\xff' \"\xfe\"") == [b"XADD", b"s", b"*", b"\xff", b"\xfe"]
