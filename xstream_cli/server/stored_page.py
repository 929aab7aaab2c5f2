"""XS.PAGE: a page of a stream in xs's stored form, xs serve's one
command of its own (Redis has none like it).

    XS.PAGE format key start end count

What the Spark data source's url mode reads a stream with when the
server is xs serve (storage.spark.stored; any other server answers
"unknown command" and is read with XRANGE).  XRANGE makes the server
split every stored value into its fields and encode each as a bulk
string: two to three times the CPU a redis-server spends on the same
page.  XS.PAGE sends each entry as stored -- its key and its value --
and the stream's field sets once a page, and the reader builds its
Arrow columns from them as the path mode does from the store.

``format`` is the stored form the client reads (storage.codec's
FORMAT_VERSION); a server that stores another answers an error and the
client falls back to XRANGE.  ``start`` and ``end`` are XRANGE's bounds
(``-``, ``+``, ``ms-seq``, ``(`` for an exclusive one), ``count`` at
most ``MAX_COUNT`` entries (a page is read and encoded in the event
loop's thread: its size bounds how long other clients wait).

The reply, in RESP2 and RESP3 alike:

    *2+2n  :format  *k [*m :tag $name ...] ...  ($key $value) * n

the field sets ``[tag, name, ...]`` of the stream, then each entry's
key (20 bytes, or 28 for a sequence number of 2**32-1 or more: the
server's own number for the stream (8 bytes, meaningless to a client),
the ID's ms (8, big-endian) and seq (4, or 0xffffffff and 8)) and its
stored value (storage.codec.entries: a record, a msgpack one, or a
shaped entry's values).  No stream: no entries, as XRANGE's empty reply.
"""
from itertools import chain

from storage import codec, errors, ids
from storage.options import RangeOptions
from xstream_cli.commands.parsing import string2ll
from xstream_cli.execution.pages import PAGE as MAX_COUNT  # a page the loop's thread may read, as XRANGE's
from xstream_cli.server.jobs import Item
from xstream_cli.server.resp import Raw, bulk_run


def xs_page(srv, c, argv):
    """XS.PAGE format key start end count (a LOCAL command of
    xstream_cli.server.commands): its Item, or the error of an argument."""
    fmt = string2ll(argv[1])
    if fmt != codec.FORMAT_VERSION:
        return errors.page_format(argv[1].decode("utf-8", "replace"), codec.FORMAT_VERSION)
    key = argv[2]
    try:
        lo = ids.parse_range_id(argv[3], 0, True)
        hi = ids.parse_range_id(argv[4], ids.U64, False)
    except errors.RedisError as e:
        return e
    count = string2ll(argv[5])
    if count is None or not 1 <= count <= MAX_COUNT:
        return errors.page_count(MAX_COUNT)
    opts = RangeOptions(lo, hi, count)

    def fn(tx):
        got = tx.range(key, opts)
        pairs = got.pairs if got is not None else ()
        shapes = got.shapes if got is not None else {}
        head = b"*%d\r\n:%d\r\n*%d\r\n" % (2 + 2 * len(pairs), codec.FORMAT_VERSION, len(shapes))
        sets = [b"*%d\r\n:%d\r\n" % (1 + len(s.names), t) + bulk_run(list(s.names)) for t, s in shapes.items()]
        return Raw(head + b"".join(sets) + bulk_run(list(chain.from_iterable(pairs))))
    return Item(fn=fn)

