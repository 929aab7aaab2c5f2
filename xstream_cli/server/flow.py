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
xstream_cli.server.stats.Stats).  ``answered`` sends the replies of a
job that ran already, and gives the steps only if it stopped at a
blocked read: no Flow is made for the usual reply.

Who imports it: xstream_cli.server.routing, xstream_cli.server.reading,
xstream_cli.client.
"""
from xstream_cli.server.resp import encode, encode_replies

RUN = 0
BLOCK = 1
GONE = object()               # sent for a BLOCK: the client went away during the wait


class Flow:
    """The steps of one run of a client's Items (see the module).
    ``blocked``: the Items ran already up to this blocked read, their
    replies sent (``answered``): the steps begin with its wait."""
    __slots__ = ("items", "proto", "send", "stats", "blocked")

    def __init__(self, items, proto, send, stats, blocked=None):
        self.items = items
        self.proto = proto
        self.send = send
        self.stats = stats
        self.blocked = blocked

    def __iter__(self):
        items, blocked = self.items, self.blocked
        while True:
            if blocked is None:
                if not items:
                    return
                if all(it.cmd is None and it.fn is None for it in items):
                    res = [it.reply for it in items], None     # answered already: no job
                else:
                    res = yield RUN, items
                replies, blocked = res
                answered(items, self.proto, self.send, self.stats, (replies, None))
                if blocked is None:
                    return
            r = yield BLOCK, blocked
            if r is GONE:
                return
            i = blocked[0]
            self.send(encode(r, self.proto, True))
            self.stats.reply(items[i], r)
            items, blocked = items[i + 1:], None


def answered(items, proto, send, stats, res):
    """Send the replies of a job that ran (``res``: its (replies,
    blocked)), the usual end of a client's request, with no Flow made
    (Server._answered, on every reply's path).  None; or, when the job
    stopped at a blocked read, the Flow's steps from its wait on."""
    replies, blocked = res
    send(encode_replies(items, replies, proto))
    stats.replies(items, replies)
    return None if blocked is None else iter(Flow(items, proto, send, stats, blocked))

