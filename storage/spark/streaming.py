"""The ``xstream`` data source's streaming read: offsets, micro-batches, admission control and consumer groups

Streaming read: ``spark.readStream.format("xstream")`` with ``path``,
``stream`` (name or glob), ``partitions`` (per stream and micro-batch),
``chunk``, ``fields_list``, ``binary`` as in the batch read
(storage/spark/options.py), and
``start`` (where a NEW query begins: ``-``, the default, from each
stream's first entry; ``$`` only entries added from now on; an ID: the
entries after it), ``maxEntriesPerTrigger`` (at most that many entries
per micro-batch over all streams, the oldest IDs first; Spark's
admission control, so Trigger.AvailableNow honours it too),
``group`` / ``consumer`` and ``driver_read`` (path only: "Where
executors cannot open the store" in storage/spark/reading.py), ``url``
and its options (see "Over the network" below).  Rows are those of the
batch read (same schema).  The offset is JSON: {stream name: ID of the
last entry delivered}; a micro-batch is, per stream, the ID range
(previous offset, new offset], so a query restarted from its checkpoint
replays exactly the batch it had planned and then goes on after it: no
entry lost, none repeated (with an exactly-once sink).  Streams are
found by the glob at every trigger; one that appears later is read from
its first entry.  Trigger.AvailableNow reads up to the streams' last IDs
when the query starts.  A micro-batch's partitions are read as the
batch read reads its own (storage/spark/reading.py).

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

Over the network (``url``: storage/spark/options.py).  Offsets are
{endpoint: {stream: last ID}} (the endpoint as in ``source``), planned
as in the path mode (``next_ends``, ``cap_ends``, ``batch_ranges``);
every micro-batch, a replayed one too, is read over the network by the
executors, so no executor needs to be on a store's host.  With
``group``, the driver creates and moves the group on each endpoint as
the path mode does (``Conn.move_group``: ``XGROUP CREATE`` / ``SETID
... ENTRIESREAD n`` in a ``MULTI`` after counting n under ``WATCH``,
never back; ``XGROUP CREATECONSUMER``).
"""
from pyspark.sql.datasource import DataSourceStreamReader, SimpleDataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from storage import ids
from storage.errors import RedisError
from storage.options import GroupOptions, RangeOptions, StreamInfoOptions
from storage.spark.options import XStreamError, _open
from storage.spark.reading import XStreamNetPartition, XStreamPartition, _id, _read_net_range, _read_range, split_range

if False:  # typing only (not imported at run time)
    from typing import Any


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
                            found.extend((i, k) for i, _ in got)
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
                    return got[0].id if got else None
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
            last = got[-1].id
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
