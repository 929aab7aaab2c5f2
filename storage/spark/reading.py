"""The ``xstream`` data source's batch read: planning ID ranges on the driver, reading them in the executors

``spark.read.format("xstream")``: the options are storage/spark/options.py's
(``_ReadPlan``), the columns storage/spark/columns.py's.

Planning (on the driver, one read transaction): for each stream, the
first and last entries inside [start, end] and the stream's length; the
ms span between them is split evenly into ``partitions`` ID ranges
(fewer when the span or the length is smaller), the first range starting
at the first entry and the last ending at the last one, so together they
cover every entry exactly once.  Entries bunched in one millisecond land
in one partition (even ms split, not sampling).  Each partition opens the
store read-only in the executor, reads its range in ONE read transaction
(a consistent snapshot of that range) ``chunk`` entries at a time with a
moving start, yields its rows as Arrow record batches of 10000 entries
(``chunk`` when larger), built column by column straight from the stored
form (IDs from the keys, a shaped entry's names from its field set),
as it goes (never a whole partition in memory), and closes the store
when done.  Partitions are separate snapshots:
entries added after planning are not read (ranges end at the planned
last ID); entries deleted between planning and reading are not returned.
Filters on ``id``/``ms``/``ts`` are not pushed down (Spark 4.3 does that
only with spark.sql.python.filterPushdown.enabled, off by default): use
``start`` / ``end`` to narrow a read.

Over the network (``url``: storage/spark/options.py).  Planning, on the
driver, per endpoint: the streams from ``SCAN 0 MATCH glob TYPE stream`` (a
name: ``TYPE``; a key of another type is an error), their length and
first and last entries from ``XINFO STREAM`` (``XRANGE`` / ``XREVRANGE
... COUNT 1`` when ``start`` / ``end`` narrow the read), then the same
planner as the path mode (``plan_stream``): partitions over all
endpoints together.  Each partition connects from its executor and pages
its ID range: from xs serve with ``XS.PAGE`` (entries in stored form,
built into Arrow batches by the path mode's own ``_batch``:
storage.spark.stored), from any other server with ``XRANGE key lo hi
COUNT chunk``, then from ``(`` the page's last ID, built with the path
mode's ``_assemble`` (``binary`` and ``fields_list`` behave the same
either way); then it checks with ``TYPE`` that the stream is still there.  A partition
is therefore NOT one snapshot: each page is read when it is asked for.
Entries added after planning are still not read (ranges end at the
planned last ID); an entry trimmed or deleted before its page is read is
simply not read; nothing is read twice or out of order, since every
page starts after the previous page's last ID; a stream deleted (DEL)
after planning fails the read ("... stream 'x': deleted since the read
was planned"), never an empty read.  An endpoint that is down, a wrong
password, a key that is not a stream: the read fails with one line
naming the endpoint (and the stream): ``xstream: redis://edge-2:6380:
cannot connect (...)``, never skipped.

Where executors cannot open the store.  The store is an LMDB file on
one host (never on a network file system), and executors read it
directly.  So: executors on the store's host (``local[*]``, or a
standalone cluster whose workers run there): the default.  A real
cluster: run the driver on the store's host (client mode) and read with
``driver_read=true``: the batch read then reads every planned range on
the driver while planning and ships the rows to the executors inside
the partitions (the whole result passes through the driver's memory:
for what outgrows it, archive to Parquet on shared storage with ``xs
archive`` and read that); the streaming read uses Spark's simple stream
reader, which reads each micro-batch on the driver (bound it with
``maxEntriesPerTrigger``).  One exception Spark imposes: a micro-batch
replayed after a restart (planned, not committed) is re-read by
``readBetweenOffsets`` in an executor, so that one batch needs an
executor on the store's host, or the restart fails there ("cannot
open the store").  Group commits always run on the driver.
"""
from pyspark.sql.datasource import DataSourceReader, InputPartition

from storage import codec, ids
from storage.options import RangeOptions
from storage.spark.columns import Damaged, _arrow_schema, _batch, _page_batch, _text
from storage.spark.options import XStreamError, _open


class XStreamPartition(InputPartition):
    """One ID range of one stream: [lo, hi], both inclusive."""

    def __init__(self, stream, lo, hi):
        InputPartition.__init__(self, (stream, lo, hi))
        self.stream, self.lo, self.hi = stream, lo, hi


class XStreamNetPartition(InputPartition):
    """One ID range of one stream on one endpoint (url mode): [lo, hi],
    both inclusive; ``endpoint`` is its index in the plan's endpoints."""

    def __init__(self, endpoint, stream, lo, hi):
        InputPartition.__init__(self, (endpoint, stream, lo, hi))
        self.endpoint, self.stream, self.lo, self.hi = endpoint, stream, lo, hi


class XStreamRowsPartition(InputPartition):
    """Rows already read on the driver (``driver_read=true``)."""

    def __init__(self, rows):
        InputPartition.__init__(self, None)
        self.rows = rows


def plan_stream(p, first, last, length):
    """The planner both modes share: a stream's partitions (ID ranges)
    from its first and last entries inside [start, end] and its length."""
    if first is None:
        return []
    return split_range(first, last, length, p.partitions)


def split_range(first, last, length, n):
    """[first, last] (IDs) as at most ``n`` contiguous inclusive ID ranges
    covering it exactly, cut at evenly spaced ms boundaries."""
    span = last[0] - first[0]
    k = max(1, min(n, length, span + 1))
    cuts = [first[0] + (span + 1) * i // k for i in range(1, k)]   # strictly increasing
    out = []
    lo = first
    for c in cuts:
        out.append((lo, (c - 1, ids.U64)))
        lo = (c, 0)
    out.append((lo, last))
    return out


class XStreamReader(DataSourceReader):
    """Plans ID ranges on the driver; reads each in an executor (or, with
    ``driver_read``, reads them on the driver while planning)."""

    def __init__(self, plan):
        self.plan = plan

    def partitions(self):
        p = self.plan
        if p.url:
            return self._net_partitions()
        store = _open(p.path, False)
        try:
            with store.read() as tx:
                parts = [XStreamPartition(name, lo, hi) for name in p.names(tx)
                         for lo, hi in self._ranges(tx, name)]
        finally:
            store.close()
        if p.driver_read:
            return [XStreamRowsPartition(list(_read_range(p, part))) for part in parts]
        return parts

    def _ranges(self, tx, name):
        p = self.plan
        if p.start > p.end:
            return []
        first = tx.range(name, RangeOptions(p.start, p.end, 1))
        if not first:
            return []
        last = tx.range(name, RangeOptions(p.start, p.end, 1, rev=True))
        return plan_stream(p, first[0].id, last[0].id, tx.length(name))

    def _net_partitions(self):
        """Planning over the network: on each endpoint, the streams from
        SCAN (or TYPE for a name), their length and first and last
        entries from XINFO STREAM (XRANGE / XREVRANGE ... COUNT 1 when
        ``start`` or ``end`` narrow the read), then ``plan_stream``."""
        p = self.plan
        parts: list[XStreamNetPartition] = []
        for k, ep in enumerate(p.endpoints):
            with ep.connect() as conn:
                names = p.net_names(conn)
                if not names or p.start > p.end:
                    continue
                infos = conn.infos(names)
                names = [n for n in names if infos[n] is not None]       # gone since SCAN
                if (p.start, p.end) == (ids.MIN_ID, ids.MAX_ID):
                    bounds = {n: (_id(infos[n]["first-entry"][0]), _id(infos[n]["last-entry"][0]))
                              if infos[n]["first-entry"] else None for n in names}
                else:
                    bounds = conn.first_last(names, p.start, p.end)
                for n in names:
                    first, last = bounds[n] or (None, None)
                    parts.extend(XStreamNetPartition(k, n, lo, hi)
                                 for lo, hi in plan_stream(p, first, last, int(infos[n]["length"])))
        return parts

    def read(self, partition):
        if isinstance(partition, XStreamRowsPartition):
            return iter(partition.rows)
        if isinstance(partition, XStreamNetPartition):
            return _read_net_range(self.plan, partition)
        if not isinstance(partition, XStreamPartition):
            return iter(())     # no range planned: Spark still runs one task, with a placeholder partition
        return _read_range(self.plan, partition)


_BATCH_ROWS = 10000     # entries per Arrow batch a partition yields (its memory bound)


def _read_range(p, partition):
    """One partition's ID range as Arrow record batches of ``_BATCH_ROWS``
    entries (``chunk`` when larger; the last one fewer), in one read
    transaction, ``p.chunk`` entries per range call."""
    name = partition.stream
    stream = _text(name, "stream name", name, None)
    schema = _arrow_schema(p.binary, p.fields_list)
    target = max(p.chunk, _BATCH_ROWS)
    store = _open(p.path, False)
    try:
        with store.read() as tx:
            lo = partition.lo
            buf: list[tuple[bytes, bytes]] = []     # (entry key, stored value)
            shapes: dict = {}
            while lo is not None and lo <= partition.hi:
                got = tx.range(name, RangeOptions(lo, partition.hi, p.chunk))
                pairs = got.pairs if got is not None else []
                if got is not None:
                    shapes.update(got.shapes)     # a stream's field sets: the same for the whole transaction
                buf.extend(pairs)
                lo = None
                if len(pairs) == p.chunk:
                    last = codec.id_from_entry_key(pairs[-1][0])
                    lo = ids.incr(last) if last < partition.hi else None
                while len(buf) >= target or (buf and lo is None):
                    yield _batch(schema, stream, buf[:target], shapes, p.binary, p.fields_list, name)
                    buf = buf[target:]
    finally:
        store.close()


def _read_net_range(p, partition):
    """One partition of the url mode: its ID range paged over one
    connection (``p.chunk`` a page: XS.PAGE in stored form from xs
    serve, XRANGE from any other server, storage.spark.network.Conn.pages),
    as Arrow record batches of ``_BATCH_ROWS`` entries (``chunk`` when
    larger), built as the path mode builds them, plus the ``source``
    column.  Not one snapshot: each page is read when it is asked for."""
    from storage.spark import stored as sp
    ep = p.endpoints[partition.endpoint]
    name = partition.stream
    stream = _text(name, "stream name", name, None)
    schema = _arrow_schema(p.binary, p.fields_list, True)
    target = max(p.chunk, _BATCH_ROWS)
    shapes: dict = {}

    def batch(rows):
        if conn.stored:
            return _stored_batch(schema, stream, rows, shapes, p.binary, p.fields_list, name, ep.name)
        return _page_batch(schema, stream, rows, p.binary, p.fields_list, name, ep.name)
    with ep.connect() as conn:
        buf: list = []
        for page in conn.pages(name, partition.lo, partition.hi, p.chunk, stored=True):
            if type(page) is sp.Page:
                if buf and not sp.merge(shapes, page.shapes):
                    yield batch(buf)                 # a field set's tag changed meaning between pages
                    buf = []
                    shapes.clear()
                shapes.update(page.shapes)
                page = page.pairs
            buf.extend(page)
            while len(buf) >= target:
                yield batch(buf[:target])
                buf = buf[target:]
        if buf:
            yield batch(buf)


def _stored_batch(schema, stream, pairs, shapes, binary, with_list, name, source):
    """The record batch of pages in stored form (``_batch``, as the path
    mode builds it, plus the ``source`` column): a value that does not
    decode (a server that sent damaged entries) is one line naming the
    endpoint and the stream."""
    what = "%s stream %r: the server sent an entry that cannot be read (%s)"
    try:
        return _batch(schema, stream, pairs, shapes, binary, with_list, name, source)
    except Damaged as e:
        raise XStreamError(what % (source, stream, e.detail)) from None
    except XStreamError:
        raise                         # text that is not UTF-8: as the XRANGE pages' read says it
    except Exception as e:            # anything a malformed value makes the decoders raise
        raise XStreamError(what % (source, stream, "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:200])))


def _id(text):
    ms, _, seq = bytes(text).partition(b"-")
    return int(ms), int(seq)
