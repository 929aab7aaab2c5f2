"""A connection's command flow, written once: a client's Items run in
order, their replies sent, and after a blocked read (XREAD / XREADGROUP
... BLOCK with nothing to serve) the wait, its reply, and the Items after
it.  The server's connections (asyncio: Server._flush and Server._answered,
xstream_cli.server.routing and reading) and the in-process client's
threads (xstream_cli.client) drive the same steps, each with its own way
of waiting.

``Flow`` does no I/O: iterated, it yields what to do next, and is sent
the outcome --

    (RUN, items)        run these Items as one job: send (replies, blocked)
    (BLOCK, blocked)    wait for this blocked read: send its reply, or
                        GONE when the client went away meanwhile

-- and it sends the replies itself (``send``) and counts them (``stats``:
xstream_cli.server.stats.Stats).

Who imports it: xstream_cli.server.routing, xstream_cli.server.reading,
xstream_cli.client.
"""
from xstream_cli.server.resp import encode, encode_replies

RUN = 0
BLOCK = 1
GONE = object()               # sent for a BLOCK: the client went away during the wait


class Flow:
    """The steps of one run of a client's Items (see the module).
    ``ran``: the Items ran already, their (replies, blocked) at hand (the
    job sent by Server._pump): their replies are sent first."""
    __slots__ = ("items", "proto", "send", "stats", "ran")

    def __init__(self, items, proto, send, stats, ran=None):
        self.items = items
        self.proto = proto
        self.send = send
        self.stats = stats
        self.ran = ran

    def __iter__(self):
        items, res = self.items, self.ran
        while items:
            if res is None:
                if all(it.cmd is None and it.fn is None for it in items):
                    res = [it.reply for it in items], None     # answered already: no job
                else:
                    res = yield RUN, items
            replies, blocked = res
            self.send(encode_replies(items, replies, self.proto))
            self.stats.replies(items, replies)
            if blocked is None:
                return
            r = yield BLOCK, blocked
            if r is GONE:
                return
            i = blocked[0]
            self.send(encode(r, self.proto, True))
            self.stats.reply(items[i], r)
            items, res = items[i + 1:], None
