"""The ``xstream`` data source's writes: the batch write and the exactly-once streaming sink

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

Over the network (``url``: storage/spark/options.py).  Writes (one
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

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from storage import ids
from storage.errors import RedisError
from storage.options import AddOptions, RangeOptions, TrimOptions
from storage.spark.options import (
    STREAM_WRITE_OPTIONS,
    WRITE_OPTIONS,
    XStreamError,
    _check_known,
    _endpoints,
    _open,
    _positive,
    _required,
)

if False:  # typing only (not imported at run time)
    from typing import Any, Iterable


BATCH_ID_PROPERTY = "streaming.sql.batchId"       # set by Spark on every micro-batch's tasks
RUN_ID_PROPERTY = "spark.jobGroup.id"             # the query's runId: Spark's job group of a streaming query
IGNORED_WRITE_COLUMNS = {"ms", "seq", "ts", "source"}
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


# ======================================================= the streaming sink


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
