"""The Spark data source ``xstream``: batch reads and writes of a store from PySpark (Python Data Source API)

Register it once per session, then use the format by name::

    from storage.spark import register
    register(spark)
    df = (spark.read.format("xstream").option("path", "/data/store")
          .option("stream", "events:*").option("partitions", 4).load())
    df.write.format("xstream").option("path", "/data/store").option("stream", "copy").mode("append").save()

Reading.  Columns: ``stream`` string, ``id`` string (``ms-seq``, exact),
``ms`` and ``seq`` long (null for a part above 2**63-1, which a long cannot
hold), ``ts`` timestamp (the ms part; null past year 9999), ``fields``
map<string,string> (a field given twice keeps its last value), and with
``fields_list=true`` a ``fields_list`` array<struct<name,value>> with every
field in order, duplicates included.  Lossless by rule: a field name or
value that is not UTF-8 fails the read with a message naming the entry,
unless ``binary=true``, which makes ``fields`` map<string,binary> and
``fields_list``'s values (and names) binary; names must still be UTF-8
in ``fields``.  Stream names must be UTF-8.

Options: ``path`` (the store, on the executors' host), ``stream`` (a name
or a Redis glob: ``*``, ``?``, ``[...]``, ``\\``), ``start`` / ``end``
(XRANGE bounds: ``-``, ``+``, ``ms``, ``ms-seq``, ``(`` for exclusive),
``partitions`` (per stream, default 1), ``fields_list``, ``binary``,
``chunk`` (entries per range call, default 1000).

Planning (on the driver, one read transaction): for each stream, the
first and last entries inside [start, end] and the stream's length; the
ms span between them is split evenly into ``partitions`` ID ranges
(fewer when the span or the length is smaller), the first range starting
at the first entry and the last ending at the last one, so together they
cover every entry exactly once.  Entries bunched in one millisecond land
in one partition (even ms split, not sampling).  Each partition opens the
store read-only in the executor, reads its range in ONE read transaction
(a consistent snapshot of that range) ``chunk`` entries at a time with a
moving start, yields rows as it goes (never a whole partition in memory)
and closes the store when done.  Partitions are separate snapshots:
entries added after planning are not read (ranges end at the planned
last ID); entries deleted between planning and reading are not returned.
Filters on ``id``/``ms``/``ts`` are not pushed down (Spark 4.3 does that
only with spark.sql.python.filterPushdown.enabled, off by default): use
``start`` / ``end`` to narrow a read.

Writing (mode "append" only).  Input columns: ``fields`` map<string,
string or binary> or ``fields_list`` array<struct<name,value>> (wins when
both are there); optional ``id`` string (an XADD ID: ``ms-seq``, ``ms-*``,
``*`` or null for an automatic ID); optional ``stream`` string routing
each row (null: the ``stream`` option); ``ms``, ``seq`` and ``ts`` (what
a read gives) are ignored, any other column is an error.  Each Spark task
opens the store (creating it if needed) and adds its rows in write
transactions of ``batch_size`` rows (default 1000), each committed
durably before the next begins.  No job-level atomicity: a batch that
fails (an explicit ID not above the stream's top, a bad row) is rolled
back whole, but batches committed before it, and other tasks' batches,
stay; a retried task adds its rows again (new automatic IDs; explicit
IDs then fail).  The driver's commit and abort do nothing.
"""
import datetime

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceWriter, InputPartition, WriterCommitMessage

from storage import glob, ids
from storage.errors import RedisError
from storage.options import AddOptions, RangeOptions

NAME = "xstream"
LONG_MAX = (1 << 63) - 1
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MAX_TS_MS = 253402300799999                # 9999-12-31T23:59:59.999Z
_GLOB_CHARS = "*?[\\"

READ_OPTIONS = {"path", "stream", "start", "end", "partitions", "fields_list", "binary", "chunk"}
WRITE_OPTIONS = {"path", "stream", "batch_size"}
IGNORED_WRITE_COLUMNS = {"ms", "seq", "ts"}


class XStreamError(ValueError):
    """A bad option, a bad row or an entry the read cannot represent."""

    def __init__(self, text):
        ValueError.__init__(self, "xstream: " + text)


def register(spark):
    """Make ``spark.read.format("xstream")`` and ``df.write.format("xstream")`` available."""
    spark.dataSource.register(XStreamDataSource)


# ============================================================== options


def _bool(options, key):
    v = options.get(key, "false").strip().lower()
    if v not in ("true", "false"):
        raise XStreamError("option %s must be true or false, not %r" % (key, options.get(key)))
    return v == "true"


def _positive(options, key, default):
    v = options.get(key)
    if v is None:
        return default
    try:
        n = int(v)
    except ValueError:
        n = 0
    if n < 1:
        raise XStreamError("option %s must be a positive integer, not %r" % (key, v))
    return n


def _required(options, key):
    v = options.get(key)
    if not v:
        raise XStreamError("option %r is required" % key)
    return v


def _check_known(options, known, what):
    unknown = sorted(k for k in options if k.lower() not in known)
    if unknown:
        raise XStreamError("unknown %s option(s) %s; known: %s" % (what, ", ".join(unknown), ", ".join(sorted(known))))


def _bound(options, key):
    text = options.get(key, "-" if key == "start" else "+")
    try:
        return ids.parse_range_id(text.encode("utf-8"), 0 if key == "start" else ids.U64, key == "start")
    except RedisError as e:
        raise XStreamError("option %s=%r is not a stream ID (-, +, ms, ms-seq, or ( before one for an "
                           "exclusive bound): %s" % (key, text, e))


class _ReadPlan:
    """The read options, checked (on the driver, before anything runs)."""

    def __init__(self, options):
        _check_known(options, READ_OPTIONS, "read")
        self.path = _required(options, "path")
        self.stream = _required(options, "stream").encode("utf-8")
        self.start = _bound(options, "start")
        self.end = _bound(options, "end")
        self.partitions = _positive(options, "partitions", 1)
        self.chunk = _positive(options, "chunk", 1000)
        self.fields_list = _bool(options, "fields_list")
        self.binary = _bool(options, "binary")

    def schema(self):
        value = "binary" if self.binary else "string"
        cols = ["stream string", "id string", "ms long", "seq long", "ts timestamp",
                "fields map<string,%s>" % value]
        if self.fields_list:
            cols.append("fields_list array<struct<name:%s,value:%s>>" % (value, value))
        return ", ".join(cols)


# ========================================================= data source


class XStreamDataSource(DataSource):
    """``format("xstream")``: see the module's docstring for options and columns."""

    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        return _ReadPlan(self.options).schema()

    def reader(self, schema):
        return XStreamReader(_ReadPlan(self.options))

    def writer(self, schema, overwrite):
        if overwrite:
            raise XStreamError("only mode('append') is supported: an xs stream is an append-only log")
        return XStreamWriter(self.options, schema)


# ============================================================== reading


class XStreamPartition(InputPartition):
    """One ID range of one stream: [lo, hi], both inclusive."""

    def __init__(self, stream, lo, hi):
        InputPartition.__init__(self, (stream, lo, hi))
        self.stream, self.lo, self.hi = stream, lo, hi


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


def _open(path, write):
    from storage.store import Store, StoreError
    try:
        return Store(path) if write else Store(path, readonly=True)
    except StoreError as e:
        raise XStreamError(str(e))


class XStreamReader(DataSourceReader):
    """Plans ID ranges on the driver; reads each in an executor."""

    def __init__(self, plan):
        self.plan = plan

    def partitions(self):
        p = self.plan
        store = _open(p.path, False)
        try:
            with store.read() as tx:
                return [XStreamPartition(name, lo, hi) for name in self._names(tx)
                        for lo, hi in self._ranges(tx, name)]
        finally:
            store.close()

    def _names(self, tx):
        text = self.plan.stream
        if any(c.encode() in text for c in _GLOB_CHARS):
            return [n for n in tx.stream_names() if glob.match(text, n)]
        return [text] if tx.length(text) else []

    def _ranges(self, tx, name):
        p = self.plan
        if p.start > p.end:
            return []
        first = tx.range(name, RangeOptions(p.start, p.end, 1))
        if not first:
            return []
        last = tx.range(name, RangeOptions(p.start, p.end, 1, rev=True))
        return split_range(_id(first[0][0]), _id(last[0][0]), tx.length(name), p.partitions)

    def read(self, partition):
        if not isinstance(partition, XStreamPartition):
            return          # no range planned: Spark still runs one task, with a placeholder partition
        p = self.plan
        name = partition.stream
        stream = _text(name, "stream name", name, None)
        store = _open(p.path, False)
        try:
            with store.read() as tx:
                lo = partition.lo
                while True:
                    entries = tx.range(name, RangeOptions(lo, partition.hi, p.chunk))
                    if not entries:
                        return
                    for id_text, fields in entries:
                        yield _row(stream, id_text, fields, p.binary, p.fields_list, name)
                    last = _id(id_text)
                    if len(entries) < p.chunk or last >= partition.hi:
                        return
                    lo = ids.incr(last)
        finally:
            store.close()


def _id(text):
    ms, _, seq = bytes(text).partition(b"-")
    return int(ms), int(seq)


def _text(b, what, stream, id_text):
    try:
        return bytes(b).decode("utf-8")
    except UnicodeDecodeError:
        where = "stream %r" % (stream,) if id_text is None else "entry %s of stream %r" % (
            bytes(id_text).decode(), stream)
        hint = " (read it with option binary=true)" if what == "field value" else ""
        raise XStreamError("%s %r in %s is not UTF-8%s" % (what, bytes(b), where, hint))


def _row(stream, id_text, fields, binary, with_list, name):
    ms, seq = _id(id_text)
    ts = _EPOCH + datetime.timedelta(milliseconds=ms) if ms <= _MAX_TS_MS else None
    keys = [_text(f, "field name", name, id_text) for f in fields[0::2]]
    if binary:
        values = [bytes(v) for v in fields[1::2]]
    else:
        values = [_text(v, "field value", name, id_text) for v in fields[1::2]]
    row = (stream, bytes(id_text).decode(), ms if ms <= LONG_MAX else None, seq if seq <= LONG_MAX else None,
           ts, dict(zip(keys, values)))
    if with_list:
        names = [bytes(f) for f in fields[0::2]] if binary else keys
        row += ([(k, v) for k, v in zip(names, values)],)
    return row


# ============================================================== writing


class XStreamCommit(WriterCommitMessage):
    """What one task wrote: its row count."""

    def __init__(self, rows):
        self.rows = rows


class XStreamWriter(DataSourceWriter):
    """Adds each task's rows in batched write transactions."""

    def __init__(self, options, schema):
        _check_known(options, WRITE_OPTIONS, "write")
        self.path = _required(options, "path")
        self.stream = options.get("stream")
        self.batch_size = _positive(options, "batch_size", 1000)
        cols = set(schema.fieldNames())
        extra = sorted(cols - {"fields", "fields_list", "id", "stream"} - IGNORED_WRITE_COLUMNS)
        if extra:
            raise XStreamError("unexpected column(s) %s: write takes fields (or fields_list), and optionally "
                               "id and stream" % ", ".join(extra))
        if not cols & {"fields", "fields_list"}:
            raise XStreamError("a 'fields' column (map of field to value) or a 'fields_list' column is required")
        if "stream" not in cols and not self.stream:
            raise XStreamError("option 'stream' or a 'stream' column is required")
        self.use_list = "fields_list" in cols
        self.has_id = "id" in cols
        self.has_stream = "stream" in cols
        self.has_fields = "fields" in cols

    def write(self, iterator):
        store = _open(self.path, True)
        n = 0
        try:
            batch = []
            for row in iterator:
                batch.append(self._item(row))
                if len(batch) >= self.batch_size:
                    n += self._commit(store, batch)
                    batch = []
            if batch:
                n += self._commit(store, batch)
        finally:
            store.close()
        return XStreamCommit(n)

    def _item(self, row):
        name = row["stream"] if self.has_stream else None
        if name is None:
            name = self.stream
            if not name:
                raise XStreamError("a row has a null stream and there is no 'stream' option")
        given = row["id"] if self.has_id else None
        if self.use_list and row["fields_list"] is not None:
            pairs = [(p[0], p[1]) for p in row["fields_list"]]
        else:
            fmap = row["fields"] if self.has_fields else None
            pairs = list(fmap.items()) if fmap else []
        if not pairs:
            raise XStreamError("row for stream %r (id %r) has no fields: an entry needs at least one" % (name, given))
        fields = []
        for k, v in pairs:
            if k is None or v is None:
                raise XStreamError("row for stream %r (id %r): field %r has a null name or value" % (name, given, k))
            fields.append(_bytes(k))
            fields.append(_bytes(v))
        if given is None or given == "*":
            opts = AddOptions()
        else:
            try:
                i, seq_given = ids.parse_add_id(given.encode("utf-8"))
            except RedisError:
                raise XStreamError("id %r is not an XADD ID (ms-seq, ms-*, * or null)" % (given,))
            opts = AddOptions(id=i, seq_given=seq_given)
        return name.encode("utf-8"), fields, opts, given

    def _commit(self, store, batch):
        def add_all(tx):
            for name, fields, opts, given in batch:
                try:
                    tx.add(name, fields, opts)
                except RedisError as e:
                    raise XStreamError("adding to stream %r (id %s): %s; this batch of %d rows was rolled back, "
                                       "earlier batches stay" % (name.decode(), given or "*", e, len(batch)))
            return len(batch)
        return store.run(add_all, write=True)

    def commit(self, messages):
        """Nothing to do: every batch is already committed."""

    def abort(self, messages):
        """Nothing can be undone: committed batches stay (see the module's docstring)."""


def _bytes(v):
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)
