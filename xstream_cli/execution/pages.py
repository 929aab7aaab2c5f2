"""A long read in pages: XRANGE, XREVRANGE, XREAD and XREADGROUP replies
read PAGE entries at a time from one transaction, so that memory is that
of a page however long the reply.  Used by the command line's streamed
output (xstream_cli.execution.session.Session.stream_range) and by xs
serve's big reads (xstream_cli.server.paged)."""

PAGE = 5000                    # entries per page


def range_pages(tx, key, lo, hi, left, rev):
    """The entries of ``key`` from ``lo`` to ``hi`` (XRANGE's bounds,
    XREVRANGE's order with ``rev``), at most ``left`` (None: all), in
    pages of at most PAGE entries read as they are asked for."""
    from storage.options import RangeOptions
    while lo <= hi and (left is None or left > 0):
        n = PAGE if left is None else min(PAGE, left)
        page = tx.range(key, RangeOptions(lo, hi, n, rev))
        got = len(page)
        if got:
            yield page
        if got < n:
            return
        if left is not None:
            left -= got
        last = page[got - 1].id
        nxt = id_before(last) if rev else id_after(last)
        if nxt is None:
            return
        if rev:
            hi = nxt
        else:
            lo = nxt


def id_after(i):
    """The ID after ``i`` (None after the largest)."""
    ms, seq = i
    if seq < (1 << 64) - 1:
        return ms, seq + 1
    return (ms + 1, 0) if ms < (1 << 64) - 1 else None


def id_before(i):
    """The ID before ``i`` (None before 0-0)."""
    ms, seq = i
    if seq:
        return ms, seq - 1
    return (ms - 1, (1 << 64) - 1) if ms else None


def chain(page, rest):
    yield page
    if rest is not None:
        yield from rest


def is_paged_range(opts):
    """Whether an XRANGE / XREVRANGE reply may be longer than a page."""
    return opts.count is None or opts.count > PAGE


def is_paged_read(opts, group=False):
    """Whether an XREAD (``group``: XREADGROUP) may be read in pages: no
    COUNT or one above a page, no MAXCOUNT or MAXSIZE (their budgets
    count the whole reply) and, for XREADGROUP, new entries only (every
    ID ``>``, no CLAIM)."""
    if (opts.count and opts.count <= PAGE) or opts.maxcount or opts.maxsize:
        return False
    return not group or (opts.claim is None and all(i == b">" for i in opts.ids))


def read_pages(tx, opts):
    """XREAD in pages: [(key, pages)] for the streams with entries after
    their ID (empty: nothing yet).  The first page of each is read at
    once (errors raise here), the rest as they are asked for.  Pages are
    storage.codec.Entries, or lists of reply entries."""
    from storage.ids import MAX_ID
    from xstream_cli.output.reply import entry_rows
    streams = []
    for key, page in tx.read_streams(opts.replace(count=PAGE)):
        rest = None
        if len(page) == PAGE and opts.count != PAGE:
            after = id_after(page[PAGE - 1].id)
            if after is not None:
                rest = range_pages(tx, key, after, MAX_ID, opts.count - PAGE if opts.count else None, False)
        streams.append((key, chain(entry_rows(page), rest)))
    return streams


def span_pages(tx, spans):
    """XREADGROUP's delivered spans (Txn.deliver_spans) in pages:
    [(key, pages)], read from ``tx`` (one that sees the delivery)."""
    return [(key, range_pages(tx, key, span.first, span.last, None, False)) for key, span in spans]
