"""xs serve's big reads: a reply that may be longer than a page (XRANGE or
XREVRANGE without COUNT or above a page, XREAD and XREADGROUP of new
entries likewise) is read a page at a time and each page encoded as it
is read, so the server holds the encoded reply -- about what Redis's
output buffer would hold -- and never the entries' objects, which take
ten times the room (issue 38 item 2: 300,000 entries took ... MB).

Big reads never run in the event loop's thread (Item.heavy, and XINFO
STREAM FULL of a large COUNT): they go to the engine thread, where the
loop's clients wait only for the interpreter's switch interval, not for
the read (issue 42 item 1).

A reply is encoded here once, in its final form for the client's
protocol, and joined once: the server holds the pages' encodings and
then the reply, never the entries' objects."""
from xstream_cli.execution.pages import PAGE, is_paged_range, is_paged_read, range_pages, read_pages, span_pages
from xstream_cli.server.resp import Raw, entries_body


def heavy(cmd, args):
    """Whether the command ``cmd`` with its parsed ``args`` may read more
    than a page: it runs in the engine thread, never in the loop's."""
    name = cmd.name
    if name == "xrange" or name == "xrevrange":
        return is_paged_range(args[1])
    if name == "xread" or name == "xreadgroup":
        return is_paged_read(args[0], name == "xreadgroup")
    if name == "xinfo|stream":
        opts = args[1]
        return opts.full and (opts.count == 0 or opts.count > PAGE)
    return False


def run(tx, cmd, args, proto):
    """The reply of a big read in the protocol ``proto``, encoded a page
    at a time and joined once; None when it is to go the usual way (an
    XREAD or XREADGROUP with nothing to serve, which may block).  A Redis
    error raises, as the usual path's."""
    name = cmd.name
    parts = []
    if name == "xrange" or name == "xrevrange":
        key, opts = args
        parts.append(None)
        parts[0] = b"*%d\r\n" % _entries(range_pages(tx, key, opts.start, opts.end, opts.count, opts.rev), parts)
        return Raw(b"".join(parts))
    if name == "xread":
        streams = read_pages(tx, args[0])
    elif name == "xreadgroup":
        spans = tx.deliver_spans(args[0])
        if not spans:
            return None
        streams = span_pages(tx, spans)
    else:
        return None
    if not streams:
        return None
    # XREAD's map of streams: RESP3 a map, RESP2 an array of [key, entries]
    parts.append((b"%%%d\r\n" if proto == 3 else b"*%d\r\n") % len(streams))
    for key, pages in streams:
        at = len(parts)
        parts.append(None)
        n = _entries(pages, parts)
        parts[at] = (b"" if proto == 3 else b"*2\r\n") + b"$%d\r\n%s\r\n*%d\r\n" % (len(key), key, n)
    return Raw(b"".join(parts))


def _entries(pages, parts):
    """Append each page's entries, encoded, to ``parts``; their number."""
    n = 0
    for page in pages:
        n += len(page)
        parts.append(entries_body(page))
    return n
