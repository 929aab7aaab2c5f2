"""Big reads written as they are read: XRANGE / XREVRANGE / XREAD, and
XREADGROUP of new entries, in pages (xstream_cli.execution.pages) inside
one transaction, each page rendered and written as the whole reply
would have been.

Who imports it: xstream_cli.execution.session (Session.stream_range),
for those four commands only.
"""
from storage.errors import RedisError
from xstream_cli.execution.pages import is_paged_range, is_paged_read, range_pages, read_pages, span_pages


def stream_range(session, cmd, args, out):
    """XRANGE / XREVRANGE / XREAD (``cmd`` and its parsed ``args``),
    read in pages of PAGE entries inside ONE read transaction (one
    consistent view, as a single read) and written page by page, in
    every output mode: memory stays that of a page, the first entry
    shows at once however long the reply, a reader that went away
    (``| head -1``) stops the read at the next page, and the bytes
    are exactly those of the whole reply rendered at once.  Returns
    False (nothing done) for any other command, a reply bounded to a
    page (COUNT), and an XREAD that has nothing yet and will block:
    the usual path answers it."""
    name = cmd.name
    if session.mode not in ("raw", "json", "jsonl", "pretty"):
        return False          # --no-raw numbers a reply's items across it: written whole
    if name in ("xrange", "xrevrange"):
        key, opts = args
        if not is_paged_range(opts):
            return False
        with session.store.read() as tx:
            pages = range_pages(tx, key, opts.start, opts.end, opts.count, opts.rev)
            _write_paged(session, out, [(key, pages)], False)
        return True
    if name == "xreadgroup":
        return _stream_group_read(session, args[0], out)
    if name != "xread":
        return False
    opts = args[0]
    if not is_paged_read(opts):
        return False
    with session.store.read() as tx:
        try:
            streams = read_pages(tx, opts)
        except RedisError:
            return False                  # the usual path answers the error
        if not streams and opts.block is not None:
            return False                  # it blocks: the usual path waits
        _write_paged(session, out, streams, True)
    return True


def _stream_group_read(session, opts, out):
    """XREADGROUP of new entries (every ID ``>``; no CLAIM, MAXCOUNT
    or MAXSIZE; no COUNT or one above a page), streamed: the write
    transaction delivers them without holding them (Txn.deliver_spans)
    and opens, before it commits, a read snapshot that holds them as
    the delivery saw them (it changes no entry, and no other writer
    runs before its commit); after the commit the reply is written
    from that snapshot a page at a time.  A reply still follows its
    commit; and an error, or a read that has nothing yet and will
    block, goes the usual way (False; nothing committed)."""
    if not is_paged_read(opts, group=True) or session.store.readonly:
        return False
    snapshot = []

    def deliver(tx):
        spans = tx.deliver_spans(opts)
        if not spans and opts.block is not None:
            raise _Nothing()         # it blocks: roll back, the usual path waits
        if spans:
            snapshot.append(session.store.read())
            snapshot.append(snapshot[0].__enter__())
        return spans
    try:
        spans = session.store.run(deliver, write=True)
    except (RedisError, _Nothing):
        for ctx in snapshot[:1]:
            ctx.__exit__(None, None, None)
        return False
    except BaseException:
        for ctx in snapshot[:1]:
            ctx.__exit__(None, None, None)
        raise
    if not spans:
        _write_paged(session, out, [], True)
        return True
    ctx, tx = snapshot
    try:
        _write_paged(session, out, span_pages(tx, spans), True)
    finally:
        ctx.__exit__(None, None, None)
    return True


def _write_paged(session, out, streams, read):
    """Write a reply made of pages as ``output`` writes it whole:
    ``streams`` is [(key, pages)]; ``read``: the XREAD map of streams
    (an empty one is the nil reply), else one XRANGE list of entries."""
    import json as _json

    from xstream_cli import context
    from xstream_cli.output.render import entry_line, to_jsonable
    from xstream_cli.output.reply import Map, entry_rows
    mode = session.mode
    try:
        if read and not streams:
            session.output(None, out, argv=[b"XREAD"])     # XREAD's nil reply
            return
        if mode == "pretty":
            from xstream_cli.output.pretty import write_pretty_paged
            write_pretty_paged(streams if read else None, None if read else streams[0][1], out)
            return
        if mode == "jsonl":
            for key, pages in streams:
                for page in pages:
                    out.write(b"".join(entry_line(key, e) for e in entry_rows(page)))
        elif mode == "json":
            out.write(b"{" if read else b"[")
            for n, (key, pages) in enumerate(streams):
                if read:
                    head = session.render(Map([(key, [])], flat=False))     # {"key": []}
                    out.write((b", " if n else b"") + head[1:-4] + b"[")
                sep = b""
                for page in pages:
                    if len(page):
                        out.write(sep + b", ".join(_json.dumps(to_jsonable(e), ensure_ascii=False)
                                                   .encode("utf-8", "backslashreplace")
                                                   for e in entry_rows(page)))
                        sep = b", "
                if read:
                    out.write(b"]")
            out.write(b"}\n" if read else b"]\n")
        else:
            written = False
            for key, pages in streams:
                if read:
                    out.write(session.render(key))
                for page in pages:
                    if len(page):
                        out.write(session.render(page))
                        written = True
            if not read and not written:
                out.write(session.render([]))
        out.flush()
    except BrokenPipeError:
        context.quiet_exit()


class _Nothing(Exception):
    """A streamed XREADGROUP found nothing and will block."""
