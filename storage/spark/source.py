"""The Spark data source ``xstream``: batch reads and writes of a store from PySpark (Python Data Source API)

Register it once per session, then use the format by name::

    from storage.spark import register
    register(spark)
    df = (spark.read.format("xstream").option("path", "/data/store")
          .option("stream", "events:*").option("partitions", 4).load())
    (df.select("fields")          # with its stream and id columns, a row goes back to its own stream and ID
       .write.format("xstream").option("path", "/data/store").option("stream", "copy").mode("append").save())

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

Options: ``path`` (the store, on the executors' host) or ``url`` (stores
served over the network: "Over the network" below), ``stream`` (a name
or a Redis glob: ``*``, ``?``, ``[...]``, ``\\``), ``start`` / ``end``
(XRANGE bounds: ``-``, ``+``, ``ms``, ``ms-seq``, ``(`` for exclusive),
``partitions`` (per stream, default 1), ``fields_list``, ``binary``,
``chunk`` (entries per range call, default 1000), ``driver_read``
(read on the driver: see "Where executors cannot open the store").

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

Writing (mode "append" only).  Input columns: ``fields`` map<string,
string or binary> or ``fields_list`` array<struct<name,value>> (wins when
both are there); optional ``id`` string (an XADD ID: ``ms-seq``, ``ms-*``,
``*`` or null for an automatic ID); optional ``stream`` string routing
each row (null: the ``stream`` option); ``ms``, ``seq``, ``ts`` and
``source`` (what a read gives) are ignored, any other column is an error.  Each Spark task
opens the store (creating it if needed) and adds its rows in write
transactions of ``batch_size`` rows (default 1000), each committed
durably before the next begins.  No job-level atomicity: a batch that
fails (an explicit ID not above the stream's top, a bad row) is rolled
back whole, but batches committed before it, and other tasks' batches,
stay; a retried task adds its rows again (new automatic IDs; explicit
IDs then fail).  The driver's commit and abort do nothing.

Streaming read: ``spark.readStream.format("xstream")`` with ``path``,
``stream`` (name or glob), ``partitions`` (per stream and micro-batch),
``chunk``, ``fields_list``, ``binary`` as above, and
``start`` (where a NEW query begins: ``-``, the default, from each
stream's first entry; ``$`` only entries added from now on; an ID: the
entries after it), ``maxEntriesPerTrigger`` (at most that many entries
per micro-batch over all streams, the oldest IDs first; Spark's
admission control, so Trigger.AvailableNow honours it too),
``group`` / ``consumer`` and ``driver_read`` (path only), ``url`` and its
options (see "Over the network").  Rows are those of the
batch read (same schema).  The offset is JSON: {stream name: ID of the
last entry delivered}; a micro-batch is, per stream, the ID range
(previous offset, new offset], so a query restarted from its checkpoint
replays exactly the batch it had planned and then goes on after it: no
entry lost, none repeated (with an exactly-once sink).  Streams are
found by the glob at every trigger; one that appears later is read from
its first entry.  Trigger.AvailableNow reads up to the streams' last IDs
when the query starts.

Consumer groups (``group``, optional ``consumer``): reads stay the
deterministic ID ranges above (replayable; no XREADGROUP, so no pending
entries).  The group is created where missing, at ``start``; a new
query starts from the group's last-delivered ID.  When Spark commits a
micro-batch to the source (``commit(end)``, on the driver, which Spark
does when it plans the next micro-batch) the group's last-delivered ID
moves to ``end`` with ``XGROUP SETID ... ENTRIESREAD n``, n = entries
ever added minus the entries still in the stream after ``end``, in one
write transaction, so ``XINFO GROUPS`` shows an exact lag (0 once Spark
has committed everything); ``consumer`` is created in the group so
XINFO CONSUMERS names the job.  Chosen over XREADGROUP + XACK of every
entry: that would write a PEL row per entry and delete it again, for
nothing a replayable reader needs.  The group never moves back, and
the entries of the last micro-batch stay in the lag until Spark plans
the next one (Spark's commit point; an AvailableNow run leaves its last
batch to the next run).  Other consumers of the same group would skip
what Spark has committed: give Spark a group of its own.

Over the network (``url`` instead of ``path``; storage/spark/network.py
is the wire).  ``url`` is one endpoint or several separated by commas
(``redis://edge-1:6380,redis://edge-2:6380``; ``rediss://`` is TLS as
redis-py takes it), each ``xs serve`` or any Redis 7+ server: the same
code reads both, with the protocol only.  Options ``password`` and
``user`` (or in the URL; the options win) and ``connect_timeout``
(seconds, default 10).  Batch reads, streaming reads (with ``group`` /
``consumer`` too), batch writes and the streaming sink; ``driver_read``
takes ``path`` only.  Rows gain a last column ``source``: the endpoint as
given, its password removed (only in this mode: the path mode's schema
does not change; a write ignores the column).  Planning, on the driver,
per endpoint: the streams from ``SCAN 0 MATCH glob TYPE stream`` (a
name: ``TYPE``; a key of another type is an error), their length and
first and last entries from ``XINFO STREAM`` (``XRANGE`` / ``XREVRANGE
... COUNT 1`` when ``start`` / ``end`` narrow the read), then the same
planner as the path mode (``plan_stream``): partitions over all
endpoints together.  Each partition connects from its executor and pages
its ID range with ``XRANGE key lo hi COUNT chunk``, then from ``(``
the page's last ID, and builds its Arrow batches with the path mode's
code (``_assemble``: ``binary`` and ``fields_list`` behave the same),
then checks with ``TYPE`` that the stream is still there.  A partition
is therefore NOT one snapshot: each page is read when it is asked for.
Entries added after planning are still not read (ranges end at the
planned last ID); an entry trimmed or deleted before its page is read is
simply not read; nothing is read twice or out of order, since every
page starts after the previous page's last ID; a stream deleted (DEL)
after planning fails the read ("... stream 'x': deleted since the read
was planned"), never an empty read.  An endpoint that is down, a wrong
password, a key that is not a stream: the read fails with one line
naming the endpoint (and the stream): ``xstream: redis://edge-2:6380:
cannot connect (...)``, never skipped.  Streaming: offsets are
{endpoint: {stream: last ID}} (the endpoint as in ``source``), planned
as in the path mode (``next_ends``, ``cap_ends``, ``batch_ranges``);
every micro-batch, a replayed one too, is read over the network by the
executors, so no executor needs to be on a store's host.  With
``group``, the driver creates and moves the group on each endpoint as
the path mode does (``Conn.move_group``: ``XGROUP CREATE`` / ``SETID
... ENTRIESREAD n`` in a ``MULTI`` after counting n under ``WATCH``,
never back; ``XGROUP CREATECONSUMER``).  Writes (one
endpoint): each task sends blocks of ``batch_size`` rows as one
pipelined ``MULTI``, ``XADD`` ..., ``EXEC``, checked first so that a
failed block adds nothing, on Redis too (whose EXEC would run the
block's other commands; xs serve's adds none): a key that is not a
stream fails at the task's first block to it (``TYPE``); a block with
explicit IDs ``WATCH``es their streams and reads their top IDs (``XINFO
STREAM``), so an ID not above its stream's top fails the block before
it is sent, and a stream changed meanwhile makes EXEC answer null and
the block is sent again.  Blocks of automatic IDs watch nothing (tasks
adding to one stream never hold each other up).  An explicit ID after
an automatic one in the same stream and block is left to the server
(its clock makes the automatic ID): if Redis refuses it, that block's
other rows stay.

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

Streaming write: ``df.writeStream.format("xstream")`` with ``path``,
``stream`` (or a ``stream`` column), the write's input columns, and
``producer`` (a name for this query's output; default: its
``checkpointLocation``) and ``progress_stream`` (default
``spark-sink:`` + 16 hex of sha256(producer)).  Append output mode only.
Exactly once, across retries and restarts, however a replayed batch is
split: each task writes its rows together with a marker entry at ID
``B-*`` (B = micro-batch id) in the progress stream, in ONE write
transaction.  The marker names the rows, not just the task: ``partition
P rows N added K run R digests D`` (R: Spark's runId, new on each start
of the query; D: the task's N row digests, 16 bytes of BLAKE2b over a
row's stream, given ID and fields, sorted; plus ``added_digests`` when
K < N).  In its transaction a task reads batch B's markers
(``sink_plan``): its own marker of the same run there (a retried
task): it adds nothing (and fails, adding nothing, if that marker's
digests differ: an input that is not replayable).  Otherwise, per
digest, it drops as many of its rows as the batch's markers added
beyond those the markers of its own run cover (a run's tasks split the
batch without overlap), adds the rest, and writes its marker.  So a
batch Spark replays after a restart with another split (another
``partitions``, repartition or coalesce) still adds each of its rows
once: a task holding rows earlier tasks added drops exactly those, and
equal rows are counted, not told apart.  The batch's rows are never
added beyond its input, even with a zombie task of an older run.  A
marker costs 16 bytes per row of its task (32 for a task that dropped
some); the same transaction drops markers of batches before B (the
progress stream holds one batch), and refuses a batch id below the
stream's last one (another query with the same producer, or a reset
checkpoint).  A marker of an older xs (``partition P rows N``, no
digests) in the replayed batch: the task of that partition with that
row count adds nothing, as before; any other task of that batch fails
with an error saying so (nothing added).  Why not IDMP: its history is
bounded (IDMP-MAXSIZE ids per producer, at most 10000, and
IDMP-DURATION, at most a day), so a large batch or a restart a day
later would add rows again; why not explicit IDs: a replay could not
reproduce them.  A task's rows are held (encoded) in memory until its
transaction: bound micro-batches with ``maxEntriesPerTrigger``.
Assumes a batch's input is the same on a replay (true for replayable
sources like this one).  With ``url`` (one endpoint) the same protocol
runs over the network (network.Conn.add_once): the progress stream is
WATCHed while the batch's markers and the stream's last entry are read,
then the rows kept, the trim of older markers and the marker go in ONE
``MULTI``/``EXEC``, which is atomic on xs serve and on Redis alike (an
XADD Redis would refuse inside it is checked before, as in a batch
write); another task or attempt writing meanwhile changes the watched
stream and makes the other's EXEC answer null, and that one reads the
markers again.  No shared file system is needed.
"""
import hashlib

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    SimpleDataSourceStreamReader,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from storage import codec, glob, ids
from storage.errors import RedisError
from storage.options import AddOptions, GroupOptions, RangeOptions, StreamInfoOptions, TrimOptions

if False:  # typing only (not imported at run time)
    from typing import Any, Iterable

NAME = "xstream"
LONG_MAX = (1 << 63) - 1
_MAX_TS_MS = 253402300799999                # 9999-12-31T23:59:59.999Z
_GLOB_CHARS = "*?[\\"

NET_OPTIONS = {"url", "user", "password", "connect_timeout"}        # the url mode's (instead of path)
READ_OPTIONS = {"path", "stream", "start", "end", "partitions", "fields_list", "binary", "chunk",
                "driver_read"} | NET_OPTIONS
STREAM_READ_OPTIONS = {"path", "stream", "start", "partitions", "fields_list", "binary", "chunk", "driver_read",
                       "maxentriespertrigger", "group", "consumer"} | NET_OPTIONS
WRITE_OPTIONS = {"path", "stream", "batch_size"} | NET_OPTIONS
STREAM_WRITE_OPTIONS = {"path", "stream", "producer", "progress_stream", "checkpointlocation"} | NET_OPTIONS
BATCH_ID_PROPERTY = "streaming.sql.batchId"       # set by Spark on every micro-batch's tasks
RUN_ID_PROPERTY = "spark.jobGroup.id"             # the query's runId: Spark's job group of a streaming query
IGNORED_WRITE_COLUMNS = {"ms", "seq", "ts", "source"}


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


def _schema(binary, fields_list, source=False):
    value = "binary" if binary else "string"
    cols = ["stream string", "id string", "ms long", "seq long", "ts timestamp",
            "fields map<string,%s>" % value]
    if fields_list:
        cols.append("fields_list array<struct<name:%s,value:%s>>" % (value, value))
    if source:
        cols.append("source string")
    return ", ".join(cols)


def _stream_start(options):
    """The streaming ``start`` option: None for "from the first entry",
    "$" for "only entries added from now on", or an ID (exclusive)."""
    text = options.get("start", "-").strip()
    if text in ("-", "0", "0-0"):
        return None
    if text == "$":
        return "$"
    try:
        return ids.parse_id(text.encode("utf-8"))
    except RedisError:
        raise XStreamError("option start=%r of a streaming read must be -, $ or an entry ID (ms or ms-seq) "
                           "to read after" % (text,))


class _ReadPlan:
    """The read options, checked (on the driver, before anything runs)."""

    def __init__(self, options, streaming=False):
        _check_known(options, STREAM_READ_OPTIONS if streaming else READ_OPTIONS,
                     "streaming read" if streaming else "read")
        self.endpoints = _endpoints(options)
        self.url = self.endpoints is not None
        self.path = None if self.url else _required(options, "path")
        self.stream = _required(options, "stream").encode("utf-8")
        if streaming:
            self.start = _stream_start(options)
            self.end = None
            self.max_entries = _positive(options, "maxentriespertrigger", None)
            self.group = options.get("group") or None
            self.consumer = options.get("consumer") or None
            if self.consumer and not self.group:
                raise XStreamError("option 'consumer' needs option 'group'")
        else:
            self.start = _bound(options, "start")
            self.end = _bound(options, "end")
        self.partitions = _positive(options, "partitions", 1)
        self.chunk = _positive(options, "chunk", 1000)
        self.fields_list = _bool(options, "fields_list")
        self.binary = _bool(options, "binary")
        self.driver_read = _bool(options, "driver_read")
        if self.url and self.driver_read:
            raise XStreamError("option driver_read is for option path: with url, executors read over the network")

    def schema(self):
        return _schema(self.binary, self.fields_list, self.url)

    def is_glob(self):
        return any(c.encode() in self.stream for c in _GLOB_CHARS)

    def names(self, tx):
        """The streams the ``stream`` option names (a glob: those that exist now)."""
        if self.is_glob():
            return [n for n in tx.stream_names() if glob.match(self.stream, n)]
        return [self.stream] if tx.key_type(self.stream) == "stream" else []

    def net_names(self, conn):
        """The same, on a server (url mode): SCAN ... MATCH ... TYPE stream
        for a glob; a name that holds another type is an error."""
        if self.is_glob():
            return conn.stream_names(self.stream)
        t = conn.key_type(self.stream)
        if t not in ("stream", "none"):
            raise XStreamError("%s: key %r is not a stream (it is a %s)" % (conn.ep.name, self.stream.decode(), t))
        return [self.stream] if t == "stream" else []


def _endpoints(options):
    """The url mode's endpoints (None: the path mode)."""
    url = options.get("url")
    if options.get("path") and url:
        raise XStreamError("give option path (a store on the executors' host) or option url (stores served "
                           "over the network), not both")
    if not url:
        extra = sorted(k for k in options if k.lower() in NET_OPTIONS - {"url"})
        if extra:
            raise XStreamError("option(s) %s need option url" % ", ".join(extra))
        return None
    timeout = options.get("connect_timeout", "10")
    try:
        t = float(timeout)
    except ValueError:
        t = 0.0
    if not t > 0:
        raise XStreamError("option connect_timeout must be a positive number of seconds, not %r" % (timeout,))
    from storage.spark.network import parse_endpoints
    return parse_endpoints(url, options.get("user"), options.get("password"), t)


# ========================================================= data source


class XStreamDataSource(DataSource):
    """``format("xstream")``: see the module's docstring for options and columns."""

    @classmethod
    def name(cls):
        return NAME

    def schema(self):
        return _schema(_bool(self.options, "binary"), _bool(self.options, "fields_list"),
                       bool(self.options.get("url")))

    def reader(self, schema):
        return XStreamReader(_ReadPlan(self.options))

    def writer(self, schema, overwrite):
        if overwrite:
            raise XStreamError("only mode('append') is supported: an xs stream is an append-only log")
        return XStreamWriter(self.options, schema)

    def streamReader(self, schema):
        plan = _ReadPlan(self.options, streaming=True)
        if plan.url:
            return XStreamNetStreamReader(plan)
        if plan.driver_read:
            # Spark then asks simpleStreamReader() (its documented fallback)
            raise PySparkNotImplementedError(errorClass="NOT_IMPLEMENTED",
                                             messageParameters={"feature": "streamReader"})
        return XStreamStreamReader(plan)

    def simpleStreamReader(self, schema):
        return XStreamDriverStreamReader(_ReadPlan(self.options, streaming=True))

    def streamWriter(self, schema, overwrite):
        if overwrite:
            raise XStreamError("only the append output mode is supported: an xs stream is an append-only log")
        return XStreamStreamWriter(self.options, schema)


# ============================================================== reading


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


def _open(path, write):
    from storage.store import Store, StoreError
    try:
        return Store(path) if write else Store(path, readonly=True)
    except StoreError as e:
        raise XStreamError(str(e))


class XStreamRowsPartition(InputPartition):
    """Rows already read on the driver (``driver_read=true``)."""

    def __init__(self, rows):
        InputPartition.__init__(self, None)
        self.rows = rows


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
        return plan_stream(p, _id(first[0][0]), _id(last[0][0]), tx.length(name))

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
    """One partition of the url mode: its ID range paged with XRANGE ...
    COUNT ``p.chunk`` over one connection, as Arrow record batches of
    ``_BATCH_ROWS`` entries (``chunk`` when larger), built as the path
    mode builds them, plus the ``source`` column.  Not one snapshot:
    each page is read when it is asked for."""
    ep = p.endpoints[partition.endpoint]
    name = partition.stream
    stream = _text(name, "stream name", name, None)
    schema = _arrow_schema(p.binary, p.fields_list, True)
    target = max(p.chunk, _BATCH_ROWS)
    with ep.connect() as conn:
        buf = []
        for page in conn.pages(name, partition.lo, partition.hi, p.chunk):
            buf.extend(page)
            while len(buf) >= target:
                yield _page_batch(schema, stream, buf[:target], p.binary, p.fields_list, name, ep.name)
                buf = buf[target:]
        if buf:
            yield _page_batch(schema, stream, buf, p.binary, p.fields_list, name, ep.name)


def _page_batch(schema, stream, entries, binary, with_list, name, source):
    """XRANGE replies' entries ([ID, [field, value, ...]] each) -> one
    record batch of ``schema``: the same columns, by the same
    ``_assemble``, as the path mode's stored entries give."""
    import itertools

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(entries)
    id_text = pa.array([e[0] for e in entries], pa.binary()).cast(pa.string())
    halves = pc.split_pattern(id_text, pattern="-", max_splits=1).flatten()
    if len(halves) != 2 * n:
        raise XStreamError("%s stream %r: the server sent an entry ID that is not ms-seq" % (source, stream))
    ms_u = halves.take(pa.array(np.arange(0, 2 * n, 2))).cast(pa.uint64())
    seq_u = halves.take(pa.array(np.arange(1, 2 * n, 2))).cast(pa.uint64())
    pairs = np.fromiter((len(e[1]) for e in entries), dtype=np.int64, count=n) // 2
    foffs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(pairs, out=foffs[1:])
    m = int(foffs[-1])
    flat = pa.array(list(itertools.chain.from_iterable(e[1] for e in entries)), pa.binary())
    keys_bin = flat.take(pa.array(np.arange(0, 2 * m, 2)))
    vals_bin = flat.take(pa.array(np.arange(1, 2 * m, 2)))
    return _assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, pairs, binary, with_list,
                     lambda: [codec.encode_entry(bytes(i), [bytes(f) for f in fs]) for i, fs in entries], name,
                     False, source)


def _arrow_schema(binary, with_list, source=False):
    """The Arrow schema Spark expects for ``_schema(binary, with_list, source)``
    (pyspark's own conversion: it compares batches with it exactly)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        LongType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )
    v = BinaryType() if binary else StringType()
    cols = [StructField("stream", StringType()), StructField("id", StringType()), StructField("ms", LongType()),
            StructField("seq", LongType()), StructField("ts", TimestampType()),
            StructField("fields", MapType(StringType(), v))]
    if with_list:
        cols.append(StructField("fields_list", ArrayType(StructType([StructField("name", v),
                                                                     StructField("value", v)]))))
    if source:
        cols.append(StructField("source", StringType()))
    return to_arrow_schema(StructType(cols), timezone="UTC")


def _batch(schema, stream, pairs, shapes, binary, with_list, name):
    """Stored entries ((entry key, stored value) pairs, ``shapes``: tag
    -> codec.Shape of the stream) -> one record batch of ``schema``,
    straight from the stored form, column by column: the IDs from the
    keys (one frombuffer for 20-byte keys), a run of shaped entries'
    values by one scan for separator bytes, their names repeated from
    the shape; runs of records as ``_record_fields`` splits them.  No
    Python object per entry or field beyond the pairs themselves."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(pairs)
    ekeys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    ms_u, seq_u = _key_ids(ekeys)
    id_text = pc.binary_join_element_wise(ms_u.cast(pa.string()), seq_u.cast(pa.string()), "-")
    names, vals, counts = [], [], []
    unique = True          # no entry can name a field twice (then the map needs no last-wins pass)
    for t, _, vs in codec.runs(ekeys, values):
        if t == 0:
            _, nb, vb, foffs = _record_fields(vs)
            counts.append(np.diff(foffs))
            unique = False
        else:
            s = shapes[t]
            nb, vb = _shaped_fields(s, vs)
            counts.append(np.full(len(vs), len(s.names), dtype=np.int64))
            unique = unique and len(set(s.names)) == len(s.names)
        names.append(nb)
        vals.append(vb)
    pairs_n = np.concatenate(counts) if len(counts) > 1 else counts[0]
    foffs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(pairs_n, out=foffs[1:])
    keys_bin = pa.concat_arrays(names) if len(names) > 1 else names[0]
    vals_bin = pa.concat_arrays(vals) if len(vals) > 1 else vals[0]
    return _assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, pairs_n, binary, with_list,
                     lambda: codec.records(ekeys, values, shapes), name, unique)


def _key_ids(ekeys):
    """Entry keys -> (ms, seq) as two uint64 Arrow arrays."""
    import numpy as np
    import pyarrow as pa
    n = len(ekeys)
    joined = b"".join(ekeys)
    if len(joined) == codec.SHORT_KEY * n:            # every key short (a wide one is longer)
        a = np.frombuffer(joined, dtype=np.dtype(codec.SHORT_KEY_DTYPE))
        return pa.array(a["ms"].astype(np.uint64)), pa.array(a["seq"].astype(np.uint64))
    both = np.array([codec.id_from_entry_key(k) for k in ekeys], dtype=np.uint64).reshape(n, 2)
    return pa.array(both[:, 0]), pa.array(both[:, 1])


def _shaped_fields(shape, values):
    """A run of entries stored in field set ``shape`` -> (names, values)
    as binary Arrow arrays, ``len(shape.names)`` pairs per entry.  The
    tag and separator bytes occur only before each value: their
    positions give the values, the bytes between them their contents."""
    import numpy as np
    import pyarrow as pa
    k, n = len(shape.names), len(values)
    joined = b"".join(values)
    raw = np.frombuffer(joined, dtype=np.uint8)
    cut = np.frombuffer(joined.translate(codec.TO_NEWLINE), dtype=np.uint8) == 10
    at = np.flatnonzero(cut)
    if len(at) != n * k or (raw[at[::k]] != shape.tag).any():
        raise XStreamError("a stored entry of field set %d does not hold %d values: the store is damaged"
                           % (shape.tag, k))
    data = raw[~cut]
    if len(data) > 0x7FFFFFFF:                        # Arrow binary offsets are 32-bit
        raise XStreamError("%d entries of %d bytes in one batch: more than an Arrow batch holds" % (n, len(data)))
    offs = np.empty(n * k + 1, dtype=np.int32)
    offs[:-1] = at - np.arange(n * k)
    offs[-1] = len(data)
    vals = pa.BinaryArray.from_buffers(pa.binary(), n * k, [None, pa.py_buffer(offs), pa.py_buffer(data)])
    names = pa.array(shape.names, pa.binary()).take(pa.array(np.tile(np.arange(k, dtype=np.int32), n)))
    return names, vals


def _record_fields(values):
    """Records (codec.encode_entry) -> (ID texts, field names, field
    values: binary Arrow arrays; the first pair of each entry, plus one
    past the last, as an int64 array)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(values)
    raw = pa.array(values, pa.binary())
    starts = np.frombuffer(raw.buffers()[1], dtype=np.int32, count=n)
    if (np.frombuffer(raw.buffers()[2], dtype=np.uint8)[starts] == 0).any():
        # some entry is in msgpack form (a field with a newline): split in Python
        flat, offsets = [], [0]
        for v in values:
            i, f = codec.decode_entry(v)
            flat.append(bytes(i))
            flat.extend(bytes(x) for x in f)
            offsets.append(len(flat))
        parts = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat, pa.binary()))
    else:
        # text form: "ms-seq\nfield\nvalue..." -> [id, field, value, ...]
        parts = pc.split_pattern(raw, pattern=b"\n")
    offs = parts.offsets.to_numpy().astype(np.int64)
    flat = parts.values
    foffs = (offs - np.arange(n + 1)) // 2                   # per entry: its field pairs
    m = int(foffs[-1])
    # the k-th pair of entry i: its name at offs[i] + 1 + 2k, its value next
    kpos = np.repeat(offs[:-1] + 1 - 2 * foffs[:-1], np.diff(foffs)) + 2 * np.arange(m)
    return flat.take(pa.array(offs[:-1])), flat.take(pa.array(kpos)), flat.take(pa.array(kpos + 1)), foffs


def _assemble(schema, stream, id_text, ms_u, seq_u, keys_bin, vals_bin, foffs, pairs, binary, with_list,
              records, name, unique, source=None):
    """The record batch from its parts: IDs (text, and ms / seq as
    uint64), every field's name and value (binary, in order), the first
    pair of each entry (``foffs``, n + 1) and its pair count; ``records``
    gives the entries' records for an error message; ``unique``: no
    entry names a field twice; ``source``: the url mode's ``source``
    column (its one value)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    n = len(id_text)
    null = pa.scalar(None, pa.uint64())

    def at_most(a, top):
        return pc.if_else(pc.greater(a, pa.scalar(top, pa.uint64())), null, a).cast(pa.int64())
    ts = pc.multiply(at_most(ms_u, _MAX_TS_MS), 1000).cast(pa.timestamp("us", tz="UTC"))
    try:
        keys = keys_bin.cast(pa.string())
        vals = vals_bin if binary else vals_bin.cast(pa.string())
    except pa.ArrowInvalid:
        _raise_not_utf8(records(), binary, name)
        raise
    if unique:
        mkeys, mvals, moffs = keys, vals, foffs
    else:
        mkeys, mvals, moffs = _last_wins(keys, vals, foffs, pairs)
    cols = [_repeated(stream, n), id_text, at_most(ms_u, LONG_MAX), at_most(seq_u, LONG_MAX), ts,
            pa.MapArray.from_arrays(pa.array(moffs.astype(np.int32)), mkeys, mvals, type=schema.field("fields").type)]
    if with_list:
        ltype = schema.field("fields_list").type
        fl = pa.StructArray.from_arrays([keys_bin if binary else keys, vals], fields=list(ltype.value_type))
        cols.append(pa.ListArray.from_arrays(pa.array(foffs.astype(np.int32)), fl, type=ltype))
    if source is not None:
        cols.append(_repeated(source, n))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _repeated(text, n):
    """A string column of ``n`` times ``text``."""
    import numpy as np
    import pyarrow as pa
    one = text.encode("utf-8")
    return pa.StringArray.from_buffers(n, pa.py_buffer((np.arange(n + 1) * len(one)).astype(np.int32)),
                                       pa.py_buffer(one * n))


def _last_wins(keys, vals, offs, pairs):
    """The ``fields`` map's entries: a name given twice in an entry keeps
    its first place and its last value (like a Python dict)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    m, n = len(keys), len(pairs)
    if m == 0:
        return keys, vals, offs
    enc = pc.dictionary_encode(keys)
    codes = enc.indices.to_numpy().astype(np.int64)
    if len(enc.dictionary) <= 62 and pairs.min() > 0:
        # one bit per name: an entry's bits add up to their OR unless a name repeats
        bits = np.left_shift(np.int64(1), codes)
        starts = offs[:-1]
        if (np.add.reduceat(bits, starts) == np.bitwise_or.reduceat(bits, starts)).all():
            return keys, vals, offs
    entry = np.repeat(np.arange(n, dtype=np.int64), pairs)
    pair = entry * (int(codes.max()) + 1) + codes
    uniq, first = np.unique(pair, return_index=True)
    if len(uniq) == m:
        return keys, vals, offs
    _, rlast = np.unique(pair[::-1], return_index=True)
    order = np.argsort(first)
    kpos, vpos = first[order], (m - 1 - rlast)[order]
    new_offs = np.concatenate(([0], np.cumsum(np.bincount(entry[kpos], minlength=n))))
    return keys.take(pa.array(kpos)), vals.take(pa.array(vpos)), new_offs


def _raise_not_utf8(values, binary, name):
    """The error of the first entry with a field name (or, without
    ``binary``, a value) that is not UTF-8."""
    for v in values:
        id_text, fields = codec.decode_entry(v)
        for f in fields[0::2]:
            _text(f, "field name", name, id_text)
        if not binary:
            for f in fields[1::2]:
                _text(f, "field value", name, id_text)


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


# ============================================================ streaming


def _fmt(i):
    return "%d-%d" % i


def _offset_id(text):
    try:
        return ids.parse_id(str(text).encode("utf-8"))
    except RedisError:
        raise XStreamError("offset %r is not a stream ID (was the checkpoint written by another source?)" % (text,))


def _sorted(d):
    """An offset: stream name -> last ID read, in name order (Spark compares
    offsets as JSON text)."""
    return {k: d[k] for k in sorted(d)}


def next_ends(start, tops, target):
    """The streaming planner's math, both modes: per key (a stream; in
    the url mode an (endpoint, stream) pair), (s, e): the offset ``s``
    the next micro-batch starts after and the ID ``e`` it may end at:
    the stream's top (``tops``: the keys found now and their last IDs),
    never below ``s``, capped by the Trigger.AvailableNow ``target``.
    A key of ``start`` not found now keeps its offset; a key found now
    but not in ``start`` starts at 0-0."""
    end = {}
    for k in set(start) | set(tops):
        s = _offset_id(start[k]) if k in start else ids.MIN_ID
        top = tops.get(k)
        e = top if top is not None and top > s else s
        if target is not None:
            t = target.get(k)
            e = s if t is None else max(s, min(e, _offset_id(t)))
        end[k] = (s, e)
    return end


def cap_ends(end, found, max_rows):
    """``end`` (from ``next_ends``) cut to the first ``max_rows`` entries
    over all keys, oldest ID first: ``found`` holds (ID, key) of up to
    ``max_rows`` entries of each key after its ``s``."""
    found.sort()
    capped = {k: (s, s) for k, (s, e) in end.items()}
    for i, k in found[:max_rows]:
        capped[k] = (capped[k][0], i)
    return capped


def batch_ranges(p, start, end, first):
    """A micro-batch's partitions, both modes: per key of ``end`` in order,
    the range (start, end] from its first entry (``first(key, s, e)``:
    its ID or None) split into ``p.partitions``; (key, lo, hi) each."""
    for k in sorted(end):
        s = _offset_id(start[k]) if k in start else ids.MIN_ID
        e = _offset_id(end[k])
        if e <= s:
            continue
        f = first(k, s, e)
        if f is not None:
            for lo, hi in split_range(f, e, p.partitions, p.partitions):
                yield k, lo, hi


class _Streaming:
    """What both stream readers share: offsets, admission control,
    Trigger.AvailableNow, group commits.  An offset is a dict
    {stream name: ID of the last entry delivered ("ms-seq")}."""

    target = None            # Trigger.AvailableNow: the last IDs when the query began

    def __init__(self, plan):
        self.plan = plan

    def _store(self, write=False):
        return _open(self.plan.path, write)

    # ------------------------------------------------------------ offsets

    def initialOffset(self):
        p = self.plan
        if p.group:
            store = self._store(write=True)
            try:
                return _sorted(store.run(self._group_initial, write=True))
            finally:
                store.close()
        store = self._store()
        try:
            with store.read() as tx:
                return _sorted({n.decode(): _fmt(self._start_id(tx, n)) for n in p.names(tx)})
        finally:
            store.close()

    def _start_id(self, tx, name):
        s = self.plan.start
        if s is None:
            return ids.MIN_ID
        if s == "$":
            return tx.last_generated_id(name) or ids.MIN_ID
        return s

    def _group_initial(self, tx):
        """Start where the group is; create it (at ``start``) where it is missing."""
        p = self.plan
        group = p.group.encode("utf-8")
        out = {}
        for n in p.names(tx):
            info = [g for g in tx.groups_info(n) if g.name == group]
            if info:
                out[n.decode()] = _fmt(info[0].last_delivered_id)
            else:
                i = self._start_id(tx, n)
                tx.create_group(n, group, GroupOptions(start=i, entries_read=self._entries_read(tx, n, i)))
                out[n.decode()] = _fmt(i)
        return out

    def _latest(self, start, max_rows):
        """The end offset of the next micro-batch from ``start``: every
        stream's last ID (capped by the AvailableNow target), or, with
        ``max_rows``, the first ``max_rows`` entries after ``start`` over
        all streams in ID order."""
        p = self.plan
        store = self._store()
        try:
            with store.read() as tx:
                tops = {n.decode(): tx.last_generated_id(n) for n in p.names(tx)}
                end = next_ends(start, tops, self.target)
                if max_rows is not None:
                    found: list[tuple[tuple[int, int], str]] = []
                    for k, (s, e) in end.items():
                        if e > s:
                            got = tx.range(k.encode("utf-8"), RangeOptions(ids.incr(s), e, max_rows)) or []
                            found.extend((_id(i), k) for i, _ in got)
                    end = cap_ends(end, found, max_rows)
        finally:
            store.close()
        return _sorted({k: _fmt(e) for k, (s, e) in end.items()})

    def _limit(self):
        return ReadMaxRows(self.plan.max_entries) if self.plan.max_entries else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        self.target = self._latest({}, None)

    def _parts(self, start, end):
        """Per stream, the ID range (start, end] split into ``partitions``."""
        store = self._store()
        try:
            with store.read() as tx:
                def first(k, s, e):
                    got = tx.range(k.encode("utf-8"), RangeOptions(ids.incr(s), e, 1))
                    return _id(got[0][0]) if got else None
                return [XStreamPartition(k.encode("utf-8"), lo, hi)
                        for k, lo, hi in batch_ranges(self.plan, start, end, first)]
        finally:
            store.close()

    # ------------------------------------------------------------- groups

    def commit(self, end):
        """Spark finished everything up to ``end``: advance the group."""
        if not self.plan.group:
            return
        store = self._store(write=True)
        try:
            store.run(lambda tx: self._group_commit(tx, end), write=True)
        finally:
            store.close()

    def _group_commit(self, tx, end):
        p = self.plan
        group = p.group.encode("utf-8")
        for k in sorted(end):
            name, i = k.encode("utf-8"), _offset_id(end[k])
            if tx.key_type(name) != "stream":
                continue
            info = [g for g in tx.groups_info(name) if g.name == group]
            if not info:
                tx.create_group(name, group, GroupOptions(start=i, entries_read=self._entries_read(tx, name, i)))
            elif info[0].last_delivered_id < i:          # never moves a group back
                tx.set_group_id(name, group, GroupOptions(start=i, entries_read=self._entries_read(tx, name, i)))
            if p.consumer:
                tx.create_consumer(name, group, p.consumer.encode("utf-8"))

    @staticmethod
    def _entries_read(tx, name, i):
        """ENTRIESREAD for a group whose last-delivered ID is ``i``: the
        entries ever added minus those still in the stream after ``i``."""
        added = tx.stream_info(name, StreamInfoOptions()).entries_added
        after, lo = 0, ids.incr(i) if i < ids.MAX_ID else None
        while lo is not None:
            got = tx.range(name, RangeOptions(lo, ids.MAX_ID, 10000)) or []
            after += len(got)
            if len(got) < 10000:
                break
            last = _id(got[-1][0])
            lo = ids.incr(last) if last < ids.MAX_ID else None
        return max(0, added - after)


class XStreamStreamReader(_Streaming, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("xstream")``: plans ID ranges on the driver,
    reads them in executors (like the batch read)."""

    def latestOffset(self, start, limit):
        return self._latest(start, limit.max_rows if isinstance(limit, ReadMaxRows) else None)

    def getDefaultReadLimit(self):
        return self._limit()

    def partitions(self, start, end):
        return self._parts(start, end)

    def read(self, partition):
        return _read_range(self.plan, partition)

    def prepareForTriggerAvailableNow(self):
        _Streaming.prepareForTriggerAvailableNow(self)

    def commit(self, end):
        _Streaming.commit(self, end)


class XStreamDriverStreamReader(_Streaming, SimpleDataSourceStreamReader, SupportsTriggerAvailableNow):
    """``driver_read=true``: reads each micro-batch on the driver (Spark's
    simple stream reader); Spark hands the rows to the executors."""

    def read(self, start):
        end = self._latest(start, self.plan.max_entries)
        return iter(self.readBetweenOffsets(start, end)), end

    def readBetweenOffsets(self, start, end):
        return [row for part in self._parts(start, end) for row in _read_range(self.plan, part)]

    def prepareForTriggerAvailableNow(self):
        _Streaming.prepareForTriggerAvailableNow(self)

    def commit(self, end):
        _Streaming.commit(self, end)


class XStreamNetStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``readStream.format("xstream").option("url", ...)``: the streaming
    read over the network.  An offset is {endpoint name: {stream name:
    ID of the last entry delivered}}; the planning is the path mode's
    (``next_ends``, ``cap_ends``, ``batch_ranges``) on the flattened
    offset {(endpoint, stream): ID}, each endpoint asked with SCAN and
    XINFO STREAM; partitions are read by ``_read_net_range`` in the
    executors, a replayed micro-batch too."""

    target = None            # Trigger.AvailableNow: the last IDs when the query began, flattened

    def __init__(self, plan):
        self.plan = plan
        self.index = {ep.name: k for k, ep in enumerate(plan.endpoints)}

    def initialOffset(self):
        """Each stream's start; with ``group``, where the group is (created,
        at the start, where it is missing), as in the path mode."""
        p = self.plan
        out = {}
        for ep in p.endpoints:
            with ep.connect() as conn:
                names = p.net_names(conn)
                if p.start is None:
                    starts = {n: ids.MIN_ID for n in names}
                elif p.start == "$":
                    infos = conn.infos(names)
                    starts = {n: _id(infos[n]["last-generated-id"]) for n in names if infos[n] is not None}
                else:
                    starts = {n: p.start for n in names}
                if p.group:
                    starts = {n: conn.move_group(n, p.group, i, p.consumer, create_only=True)
                              for n, i in starts.items()}
                out[ep.name] = {n.decode(): _fmt(i) for n, i in starts.items() if i is not None}
        return _nest(_flatten(out))

    def _tops(self, conn):
        names = self.plan.net_names(conn)
        infos = conn.infos(names)
        return {(conn.ep.name, n.decode()): _id(infos[n]["last-generated-id"]) for n in names
                if infos[n] is not None}

    def _latest(self, start, max_rows):
        p = self.plan
        flat = _flatten(start)
        tops, conns = {}, {}
        try:
            for ep in p.endpoints:
                conns[ep.name] = ep.connect()
                tops.update(self._tops(conns[ep.name]))
            end = next_ends(flat, tops, self.target)
            if max_rows is not None:
                found: list[tuple[tuple[int, int], tuple[str, str]]] = []
                for k, (s, e) in sorted(end.items()):
                    if e > s and k[0] in conns:
                        got = conns[k[0]].call("XRANGE", k[1], "(" + _fmt(s), _fmt(e), "COUNT", max_rows,
                                               stream=k[1])
                        found.extend((_id(i), k) for i, _ in got)
                end = cap_ends(end, found, max_rows)
        finally:
            for c in conns.values():
                c.close()
        return _nest({k: _fmt(e) for k, (s, e) in end.items()})

    def latestOffset(self, start, limit):
        return self._latest(start, limit.max_rows if isinstance(limit, ReadMaxRows) else None)

    def getDefaultReadLimit(self):
        return ReadMaxRows(self.plan.max_entries) if self.plan.max_entries else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self):
        self.target = _flatten(self._latest({}, None))

    def partitions(self, start, end):
        p = self.plan
        conns = {}
        try:
            def first(k, s, e):
                if k[0] not in self.index:
                    raise XStreamError("the checkpoint's offset names endpoint %s, which option url no longer "
                                       "lists" % k[0])
                if k[0] not in conns:
                    conns[k[0]] = p.endpoints[self.index[k[0]]].connect()
                got = conns[k[0]].call("XRANGE", k[1], "(" + _fmt(s), _fmt(e), "COUNT", 1, stream=k[1])
                return _id(got[0][0]) if got else None
            return [XStreamNetPartition(self.index[k[0]], k[1].encode("utf-8"), lo, hi)
                    for k, lo, hi in batch_ranges(p, _flatten(start), _flatten(end), first)]
        finally:
            for c in conns.values():
                c.close()

    def read(self, partition):
        return _read_net_range(self.plan, partition)

    def commit(self, end):
        """Spark finished everything up to ``end``: with ``group``, move the
        group on each endpoint (``Conn.move_group``: XGROUP SETID ...
        ENTRIESREAD, never back), as the path mode does."""
        p = self.plan
        if not p.group:
            return
        flat = _flatten(end)
        for ep in p.endpoints:
            mine = sorted((n, i) for (e, n), i in flat.items() if e == ep.name)
            if mine:
                with ep.connect() as conn:
                    for n, i in mine:
                        conn.move_group(n.encode("utf-8"), p.group, _offset_id(i), p.consumer)


def _flatten(offset):
    """{endpoint: {stream: ID}} -> {(endpoint, stream): ID}."""
    if not isinstance(offset, dict) or not all(isinstance(v, dict) for v in offset.values()):
        raise XStreamError("offset %r is not {endpoint: {stream: ID}} (was the checkpoint written by the path "
                           "mode?)" % (offset,))
    return {(ep, n): i for ep, streams in offset.items() for n, i in streams.items()}


def _nest(flat):
    """{(endpoint, stream): ID} -> {endpoint: {stream: ID}}, in order."""
    out: dict[str, dict[str, Any]] = {}
    for (ep, n) in sorted(flat):
        out.setdefault(ep, {})[n] = flat[(ep, n)]
    return out


# ============================================================== writing


_AUTO_ADD = AddOptions()     # a row's "*" (or null) ID: shared, as nothing changes it


def _add_rows(tx, rows, why):
    """Add ``(name, fields, opts, given)`` rows in order: each run of rows
    with an automatic ID (no options) through ``Txn.add_auto_many``, the
    bulk path of script mode and xs serve, which gives the IDs and nodes
    of one XADD at a time at about five times the pace, all or nothing;
    the others with ``Txn.add``.  A refused row raises XStreamError
    naming it and ``why`` (the transaction is then rolled back)."""
    run = []
    for row in rows:
        opts = row[2]
        if opts.id is None and opts.trim is None and opts.idmp_pid is None and not opts.nomkstream:
            run.append(row)
            continue
        if run:
            _add_run(tx, run, why)
            run = []
        try:
            tx.add(row[0], row[1], opts)
        except RedisError as e:
            raise _refused(row, e, why)
    if run:
        _add_run(tx, run, why)


def _add_run(tx, run, why):
    try:
        tx.add_auto_many([(row[0], row[1]) for row in run])
    except RedisError as e:
        raise _refused(run[e.item or 0], e, why)


def _refused(row, e, why):
    name, _, _, given = row
    return XStreamError("adding to stream %r (id %s): %s; %s" % (name.decode(), given or "*", e, why))


class XStreamCommit(WriterCommitMessage):
    """What one task wrote: its row count."""

    def __init__(self, rows):
        self.rows = rows


class XStreamWriter(DataSourceWriter):
    """Adds each task's rows in batched write transactions."""

    def __init__(self, options, schema):
        _check_known(options, WRITE_OPTIONS, "write")
        self.endpoints = _endpoints(options)
        if self.endpoints is not None and len(self.endpoints) != 1:
            raise XStreamError("a write goes to one endpoint; option url lists %d" % len(self.endpoints))
        self.path = None if self.endpoints else _required(options, "path")
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
        if self.endpoints:
            return self._net_write(iterator)
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

    def _net_write(self, iterator):
        """The url mode: blocks of ``batch_size`` rows, each one pipelined
        ``MULTI``, ``XADD`` ..., ``EXEC`` (``Conn.add_block``)."""
        n = 0
        checked: set[bytes] = set()     # streams found to be streams (Conn.add_block)
        with self.endpoints[0].connect() as conn:
            block = []
            for row in iterator:
                block.append(_net_row(self._item(row)))
                if len(block) >= self.batch_size:
                    n += conn.add_block(block, checked)
                    block = []
            if block:
                n += conn.add_block(block, checked)
        return XStreamCommit(n)

    def _item(self, row):
        name = row["stream"] if self.has_stream else None
        if name is None:
            name = self.stream
            if not name:
                raise XStreamError("a row has a null stream and there is no 'stream' option")
        given = row["id"] if self.has_id else None
        pairs: Iterable[tuple[Any, Any]]
        if self.use_list and row["fields_list"] is not None:
            pairs = [(p[0], p[1]) for p in row["fields_list"]]
        else:
            fmap = row["fields"] if self.has_fields else None
            pairs = fmap.items() if fmap else ()
        fields: list[bytes] = []
        add = fields.append
        for k, v in pairs:
            if k is None or v is None:
                raise XStreamError("row for stream %r (id %r): field %r has a null name or value" % (name, given, k))
            add(k.encode("utf-8") if type(k) is str else _bytes(k))
            add(v.encode("utf-8") if type(v) is str else _bytes(v))
        if not fields:
            raise XStreamError("row for stream %r (id %r) has no fields: an entry needs at least one" % (name, given))
        if given is None or given == "*":
            opts = _AUTO_ADD
        else:
            try:
                i, seq_given = ids.parse_add_id(given.encode("utf-8"))
            except RedisError:
                raise XStreamError("id %r is not an XADD ID (ms-seq, ms-*, * or null)" % (given,))
            opts = AddOptions(id=i, seq_given=seq_given)
        return name.encode("utf-8"), fields, opts, given

    def _commit(self, store, batch):
        why = "this batch of %d rows was rolled back, earlier batches stay" % len(batch)

        def add_all(tx):
            _add_rows(tx, batch, why)
            return len(batch)
        return store.run(add_all, write=True)

    def commit(self, messages):
        """Nothing to do: every batch is already committed."""

    def abort(self, messages):
        """Nothing can be undone: committed batches stay (see the module's docstring)."""


def _net_row(item):
    """A row of XStreamWriter._item as network.Conn.add_block takes it:
    (stream, ID text or None, fields, (ID, seq given) or None)."""
    name, fields, opts, given = item
    if given is None or given == "*":
        return name, None, fields, None
    return name, given, fields, (opts.id, opts.seq_given)


def _bytes(v):
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


# ======================================================= streaming writes


class XStreamStreamCommit(WriterCommitMessage):
    """What one task of a micro-batch did: rows added; skipped (an
    earlier attempt of the same task in the same query run had added
    them); dropped (rows a replay with another split found already added
    by the batch's earlier tasks)."""

    def __init__(self, rows, skipped, dropped=0):
        self.rows, self.skipped, self.dropped = rows, skipped, dropped


DIGEST = 16             # bytes of a row's digest in a sink marker


def row_digest(item):
    """A row's identity in the sink's markers (an ``_item``): 16 bytes of
    BLAKE2b over its stream, its given ID (none for an automatic one)
    and its fields, each length-prefixed.  Rows equal in all three are
    interchangeable: the markers count them (a multiset)."""
    name, fields, _, given = item
    parts = [name, b"" if given is None or given == "*" else b"=" + given.encode("utf-8")]
    parts.extend(fields)
    return hashlib.blake2b(b"".join([b"%d:%s" % (len(x), x) for x in parts]), digest_size=DIGEST).digest()


def _unpack(blob):
    blob = bytes(blob)
    return [blob[i:i + DIGEST] for i in range(0, len(blob), DIGEST)]


def sink_plan(marks, run, partition, digests, where):
    """What task ``partition`` of query run ``run`` adds of its rows (their
    ``digests``, in order), given the markers of its micro-batch already
    in the progress stream (``marks``: {field: value} each).  None: skip,
    this task's marker is there (an earlier attempt in the same run);
    else (which rows to add, as booleans in order, and the fields of
    this task's marker).

    Per distinct digest d: A[d] rows were added by the batch's markers
    (all runs), L[d] are covered by this run's markers (its tasks split
    the batch: they never overlap), and this task holds n[d]; it drops
    min(n[d], A[d] - L[d]) and adds the rest, so its marker covers
    n[d] more and the batch's rows never exceed its input: each run that
    ends adds up to exactly the batch (A >= L holds always, and
    A = max(A, L + n) after each task).  A marker of an older xs (no
    ``digests``) is trusted only for the task of its partition with its
    row count; any other task of that batch fails."""
    mine = b"".join(sorted(digests))
    part = b"%d" % partition
    old = [f for f in marks if b"digests" not in f or b"run" not in f]
    if old:
        if any(f.get(b"partition") == part and f.get(b"rows") == b"%d" % len(digests) for f in old):
            return None
        raise XStreamError(
            "%s was partly written by an older xs whose progress markers do not tell which rows it added, and "
            "task %d (%d rows) does not match one of them: Spark replays it split differently; finish that batch "
            "with the older xs (same partitions as before), or delete the progress stream and check the output for "
            "the batch's rows" % (where, partition, len(digests)))
    added: dict[bytes, int] = {}          # digest -> rows of it added by the markers' tasks
    covered: dict[bytes, int] = {}        # ... and of it covered by this run's other tasks
    for f in marks:
        cover = _unpack(f[b"digests"])
        if f[b"run"] == run:
            if f.get(b"partition") == part:
                if f[b"digests"] != mine:
                    raise XStreamError(
                        "%s: task %d ran again in the same query run with other rows (%s rows, now %d): the "
                        "query's input is not replayable; nothing of this attempt was added"
                        % (where, partition, f.get(b"rows", b"?").decode(), len(digests)))
                return None
            for d in cover:
                covered[d] = covered.get(d, 0) + 1
        for d in (cover if b"added_digests" not in f else _unpack(f[b"added_digests"])):
            added[d] = added.get(d, 0) + 1
    drop = {d: added[d] - covered.get(d, 0) for d in set(digests) if added.get(d, 0) > covered.get(d, 0)}
    keep = []
    for d in digests:
        if drop.get(d):
            drop[d] -= 1
            keep.append(False)
        else:
            keep.append(True)
    n = sum(keep)
    marker = [b"partition", part, b"rows", b"%d" % len(digests), b"added", b"%d" % n, b"run", run,
              b"digests", mine]
    if n < len(digests):
        marker += [b"added_digests", b"".join(sorted(d for d, k in zip(digests, keep) if k))]
    return keep, marker


class XStreamStreamWriter(XStreamWriter, DataSourceStreamWriter):
    """``writeStream.format("xstream")``: each task adds its rows and a
    progress marker (batch, query run, partition, its rows' digests) in
    ONE write transaction; a retried task finds its marker and adds
    nothing, and a batch replayed after a restart, however split, adds
    only the rows its earlier tasks did not (``sink_plan``)."""

    def __init__(self, options, schema):
        opts = {k: v for k, v in options.items() if k.lower() not in ("producer", "progress_stream",
                                                                        "checkpointlocation")}
        _check_known(options, STREAM_WRITE_OPTIONS, "streaming write")
        XStreamWriter.__init__(self, opts, schema)
        producer = options.get("producer") or options.get("checkpointlocation")
        if not producer:
            raise XStreamError("option 'producer' (a name for this query's output) is required without a "
                               "checkpointLocation")
        self.producer = producer
        self.progress = options.get("progress_stream") or (
            "spark-sink:" + hashlib.sha256(producer.encode("utf-8")).hexdigest()[:16])

    def write(self, iterator):
        from pyspark import TaskContext
        ctx = TaskContext.get()
        batch = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        run = ctx.getLocalProperty(RUN_ID_PROPERTY) if ctx is not None else None
        if batch is None or not run:
            raise XStreamError("no micro-batch id or query run id: the streaming sink runs only inside a streaming "
                               "query")
        assert ctx is not None          # without a task context there is no batch id
        return self.write_batch(int(batch), ctx.partitionId(), iterator, run)

    def write_batch(self, batch, partition, iterator, run=""):
        """Add ``iterator``'s rows as task ``partition`` of micro-batch
        ``batch`` in query run ``run`` (Spark's runId: a restarted query
        has a new one), exactly once however often it is called and
        however a replay of the batch splits it."""
        items = [self._item(row) for row in iterator]
        if not items:
            return XStreamStreamCommit(0, False)
        digests = [row_digest(i) for i in items]
        run = run.encode("utf-8")
        where = "micro-batch %d of progress stream %r" % (batch, self.progress)

        def plan(marks):
            return sink_plan(marks, run, partition, digests, where)
        if self.endpoints:
            return self._net_write_batch(batch, items, plan)
        progress = self.progress.encode("utf-8")

        def add_once(tx):
            top = tx.last_generated_id(progress)
            if top is not None and top[0] > batch:
                raise XStreamError(
                    "progress stream %r already records micro-batch %d, after this one (%d): producer %r "
                    "belongs to another query or its checkpoint was reset; give a new 'producer' option "
                    "(or delete that stream)" % (self.progress, top[0], batch, self.producer))
            if top is not None and top[0] < batch:
                tx.trim(progress, TrimOptions(strategy="minid", threshold=(batch, 0)))
            done = tx.range(progress, RangeOptions((batch, 0), (batch, ids.U64))) or []
            todo = plan([{bytes(k): bytes(v) for k, v in zip(f[0::2], f[1::2])} for _, f in done])
            if todo is None:
                return XStreamStreamCommit(0, True)
            keep, marker = todo
            rows = [i for i, k in zip(items, keep) if k]
            _add_rows(tx, rows, "this task's %d rows were rolled back" % len(rows))
            tx.add(progress, marker, AddOptions(id=(batch, 0), seq_given=False))
            return XStreamStreamCommit(len(rows), False, len(items) - len(rows))

        store = _open(self.path, True)
        try:
            return store.run(add_once, write=True)
        finally:
            store.close()

    def _net_write_batch(self, batch, items, plan):
        """The url mode: the task's rows (those ``plan`` keeps) and its
        marker in ONE MULTI/EXEC (network.Conn.add_once), atomic on xs
        serve and on Redis alike."""
        with self.endpoints[0].connect() as conn:
            added, skipped, dropped = conn.add_once(list(map(_net_row, items)), self.progress.encode("utf-8"),
                                                    batch, plan)
        return XStreamStreamCommit(added, skipped, dropped)

    def commit(self, messages, batchId=None):
        """Nothing to do: every task committed its own transaction."""

    def abort(self, messages, batchId=None):
        """Nothing to undo: tasks that committed stay, and their markers make
        the batch's replay skip their rows."""
