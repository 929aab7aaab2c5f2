"""resp.reply_end: where one RESP2 / RESP3 reply ends in a buffer (the
in-process client reads a forwarded command's reply whole with it)."""
from hypothesis import given
from hypothesis import strategies as st

from storage.errors import RedisError
from xstream_cli.output.reply import Map, Status
from xstream_cli.server.resp import encode, reply_end

scalars = st.one_of(st.binary(max_size=40), st.integers(-2**63, 2**63 - 1), st.none(), st.booleans(),
                    st.builds(Status, st.text("abcOK ", max_size=8)),
                    st.builds(lambda s: RedisError("ERR " + s), st.text("abc xyz\r\n", max_size=12)))
replies = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5),
    st.builds(lambda ps, flat: Map(ps, flat=flat), st.lists(st.tuples(st.binary(max_size=8), inner), max_size=4),
              st.booleans())), max_leaves=20)


@given(replies, st.sampled_from([2, 3]), st.booleans(), st.binary(max_size=20))
def test_a_reply_ends_where_its_encoding_ends_and_no_prefix_is_whole(reply, proto, array_null, after):
    wire = encode(reply, proto, array_null)
    assert reply_end(wire + after) == len(wire)               # what follows is not part of it
    for cut in range(len(wire)):
        assert reply_end(wire[:cut]) == -1


def test_resp3_shapes_the_encoder_does_not_make_are_counted_too():
    for wire in (b"~2\r\n:1\r\n:2\r\n", b">2\r\n$3\r\nmsg\r\n:1\r\n", b"=7\r\ntxt:abc\r\n", b"!3\r\nERR\r\n",
                 b"|1\r\n+key\r\n+value\r\n:5\r\n", b",1.5\r\n", b"(12345678901234567890\r\n", b"*-1\r\n",
                 b"%0\r\n", b"$0\r\n\r\n"):
        assert reply_end(wire) == len(wire), wire
        assert reply_end(wire[:-1]) == -1, wire
    assert reply_end(b"+OK\r\n:1\r\n", 5) == 9
