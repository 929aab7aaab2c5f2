"""Script mode's block of plain adds (xstream_cli.execution.script
._add_block): a block of lines is taken whole only when every line is
what the line loop would take as a plain ``XADD key * field value ...``
to the same stream, and then its pairs are the loop's."""
import pytest

from xstream_cli.execution.script import _add_block, _plainness

LINES = [b"XADD events * user u%d action click n %d" % (i, i) for i in range(50)]


def _loop(lines):
    """What run's loop of single-spaced lines makes of plain adds."""
    out = []
    for line in lines:
        p = line.split(b" ", 3)
        assert len(p) == 4 and p[2] == b"*" and p[0].upper() == b"XADD" and p[3].count(b" ") & 1
        out.append((p[1], p[3].replace(b" ", b"\n")))
    return out


@pytest.mark.parametrize("lines", [
    LINES,
    LINES[:1],
    [b"xadd s * a 1", b"xadd s * a 2"],
    [b"XADD * * f XADD", b"XADD * * XADD *"],
    [b"XADD s * " + b" ".join(b"f%d v%d" % (k, j) for k in range(30)) for j in range(5)],
    [b"XADD s * user XADD s * n 1"] * 3,
])
def test_a_block_of_plain_adds_is_what_the_loop_makes_of_it(lines):
    text = b"\n".join(lines)
    assert _plainness(text) == 2
    block = _add_block(lines, text)
    assert block is not None and len(block) == len(lines)
    assert block.pairs() == _loop(lines)
    assert block.words == block.text.split(b"\n") and block.c == lines[0].count(b" ") - 2


@pytest.mark.parametrize("line", [
    b"",                                       # a blank line
    b"XADD events * user u1 action click n",   # an odd word count
    b"XADD events * user u1 action click",     # another entry length
    b"XADD events * user  u1 action click",    # two spaces: an empty word
    b"XADD events * user u1 action click n 1 ",
    b" XADD events * user u1 action click n 1",
    b"XADD events *  user u1 action click n",
    b"XADD  * user u1 action click n 1",        # no key
    b"XADD other * user u1 action click n 1",  # another stream
    b"xadd events * user u1 action click n 1",  # the same command, spelt otherwise
    b"XADD events MAXLEN 5 * a b c 1",
    b"XLEN events",
    b"quit",
    b"3 XADD events * a b c d e f",
    b"XADD events * user\tu1 action click n 1",
    b"XADD events * user u1\r",
    b'XADD events * user "u 1" action click n 1',
    b"XADD events * user u\x00 action click n 1",
])
def test_a_block_with_any_other_line_is_left_to_the_loop(line):
    for at in (0, 20, 49):
        lines = LINES[:at] + [line] + LINES[at + 1:]
        assert _add_block(lines, b"\n".join(lines)) is None, (at, line)
