"""storage.lines: the one reader of lines as they come (script mode's
stdin, xs import), held to its rules alone: lines end at \\n only, the
last needs none, an over-long line is reported in its place and not
kept, and a consumer is told before a read that would wait."""
import io
import os
import threading

from storage.lines import blocks, source_blocks


def _reads(*pieces):
    """A ``read(n)`` that returns ``pieces`` one by one, then b""."""
    it = iter(pieces + (b"",))
    return lambda n: next(it)


def _all(read, **kw):
    got = []
    for lines, size in blocks(read, **kw):
        got.append((list(lines), size))
    return got


def test_lines_end_at_newline_only_and_the_last_needs_none():
    got = _all(_reads(b"a\r\nb", b"c\n\nd"))
    assert [l for ls, _ in got for l in ls] == [b"a\r", b"bc", b"", b"d"]
    assert sum(n for _, n in got) == len(b"a\r\nbc\n\nd")


def test_a_final_newline_makes_no_empty_line():
    assert _all(_reads(b"a\n", b"b\n")) == [([b"a"], 2), ([b"b"], 2)]
    assert _all(_reads()) == []


def test_a_line_over_the_limit_is_reported_in_its_place_and_dropped():
    events = []
    for lines, _ in blocks(_reads(b"ok\n" + b"x" * 10 + b"\nyes\n" + b"y" * 4, b"y" * 8, b"\nlast"), limit=5,
                           too_long=lambda n: events.append(n)):
        events.append(list(lines))
    assert events == [[b"ok"], 10, [b"yes"], 12, [b"last"]]


def test_an_over_long_line_at_the_end_without_newline_is_reported():
    got = []
    for lines, _ in blocks(_reads(b"a\n" + b"z" * 3, b"z" * 3), limit=4, too_long=got.append):
        got.append(list(lines))
    assert got == [[b"a"], 6]


def test_the_consumer_is_told_before_a_read_that_would_wait():
    r, w = os.pipe()
    os.write(w, b"one\n")                # there before the first read: no telling
    told = []
    go = threading.Event()

    def feed():
        go.wait(10)
        os.write(w, b"two\n")
        os.close(w)
    t = threading.Thread(target=feed)
    t.start()
    seen = []

    def before_wait():
        told.append(list(seen))
        go.set()
    try:
        for lines, _ in blocks(lambda n: os.read(r, n), r, before_wait=before_wait):
            seen += lines
    finally:
        go.set()
        t.join()
        os.close(r)
    assert seen == [b"one", b"two"]
    assert told[0] == [b"one"]          # told once "one" was handed on, before waiting for "two"


def test_an_import_source_may_be_a_binary_file_or_lines_of_text():
    f = io.BytesIO(b"a\nb")
    assert [l for ls, _ in source_blocks(f) for l in ls] == [b"a", b"b"]
    text = ["\u00e9\n", "x\udcff\n", "no newline"]
    assert [l for ls, _ in source_blocks(text) for l in ls] == [b"\xc3\xa9", b"x\xff", b"no newline"]
