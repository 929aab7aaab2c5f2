"""DUMP and RESTORE, and the streams of RDB files: a stream in Redis's
own serialization (storage.codec.rdb), out through the records of
storage.verbs.dump and the node table, in through the loader of
storage.verbs.load -- so whatever those two keep, these keep.

Out (DUMP, ``xs save --format rdb``): RDB type 19
(RDB_TYPE_STREAM_LISTPACKS_2) with RDB version 10, what Redis 7.0 reads
(it refuses any version newer than its own).  One listpack per node of
the node table (storage.parts.nodes: where Redis would have split the
stream), with the master entry's field names and the live entries;
entries deleted inside a node, whose data is gone, are written as empty
entries flagged deleted at the node's last ID, so the node keeps its
counts and last ID (what XADD's node rule and MINID trimming read).
The type has no place for what Redis 7.0 does not know: a consumer's
active-time (Redis 7.2+ takes the seen-time for it), the IDMP settings
and history (Redis 8.6+), and NACKed entries (Redis 8.10+) -- DUMP
refuses a stream with NACKed entries rather than drop them.

In (RESTORE, ``xs restore`` of an RDB file): types 15, 19 and 21 (Redis
5 to 8.0), RDB versions up to 12.  The payload is read whole and
checked (storage.codec.rdb) before anything changes -- one node at a
time, nothing of it kept -- then read again as its entries and groups
go through the loader, and the node table is then made the payload's
listpacks, deleted entries counted, as Redis keeps them.
"""
from storage import errors
from storage.codec import decode_entry
from storage.codec import rdb as R
from storage.ids import MAX_ID, MIN_ID
from storage.options import raise_deferred
from storage.parts import nodes as _nodes
from storage.verbs.dump import stream_records
from storage.verbs.keyspace import drop_keys
from storage.verbs.load import Loader, LoadError

I64 = (1 << 63) - 1


# ====================================================================== out

def dump(p, name, active_time=False):
    """DUMP: the stream's payload (bytes), or None if there is no such
    key: RDB type 19 in an RDB version 10 payload (what Redis 7.0 and
    later restore); with ``active_time``, type 21 in a version 11 one
    (Redis 7.2 and later, which keep each consumer's active-time)."""
    v = stream_value(p, name, active_time)
    if v is None:
        return None
    return R.rdb_dump_payload(v[0], R.RDB_VERSION_7_2 if active_time else R.RDB_VERSION)


def stream_value(p, name, active_time=False):
    """(value, notes) of stream ``name``: ``value`` the RDB type byte and
    object as DUMP and RDB files hold them (``active_time``: type 21, see
    ``dump``); ``notes`` what it does not carry ({"idmp": 1} for IDMP
    history).  None if there is no such stream.  Refuses (RedisError) a
    stream with NACKed entries."""
    m = p.streams.get(name)
    if m is None:
        return None
    entries = []
    groups = []
    meta: dict | None = None
    group: tuple[bytes, object, object, list, list] | None = None
    consumer: tuple[bytes, object, list, object] | None = None
    idmp = 0
    for rec in stream_records(p, name, batched=True):
        kind = rec[0]
        if kind == "entries":
            entries += [(i, decode_entry(v)[1]) for i, v in rec[1]]
        elif kind == "stream":
            meta = rec[1]
        elif kind == "iid":
            idmp = 1
        elif kind == "group":
            group = (rec[1], rec[2], rec[3], [], [])
            groups.append(group)
        elif kind == "consumer":
            assert group is not None            # a consumer's record follows its group's
            consumer = (rec[1], rec[2], [], rec[3])
            group[4].append(consumer)
        elif kind == "pending":
            assert group is not None and consumer is not None     # ... and its pending entries follow it
            group[3].append((rec[1], rec[2], rec[3]))
            consumer[2].append(rec[1])
        elif kind == "nacked":
            assert group is not None
            raise errors.dump_nacked(group[0])
    assert meta is not None                     # stream_records gives an existing stream's record
    first = entries[0][0] if entries else MIN_ID
    value = R.rdb_stream_value(_node_entries(p, m, entries),
                               (m.length, meta["last-id"], first, meta["max-deleted-id"], meta["entries-added"]),
                               groups, active_time)
    return value, {"idmp": idmp}


def _node_entries(p, m, entries):
    """[(master, names, entries, deleted, last)] per node of the node
    table; if the table does not account for the entries (a store that
    contradicts itself), the nodes they would have if added in order."""
    out = []
    k = 0
    n = len(entries)
    for node in p.log.node_list(m):
        start = k
        while k < n and entries[k][0] <= node.last:
            k += 1
        if k - start != node.live or (k > start and entries[start][0] < node.master):
            break
        out.append((node.master, node.names, entries[start:k], node.deleted, node.last))
    else:
        if k == n:
            return out
    out = []
    k = 0
    for node in _nodes.build(entries, *p.log.node_limits()):
        start = k
        k += node.live
        out.append((node.master, node.names, entries[start:k], 0, node.last))
    return out


# ======================================================================= in

def restore(p, name, payload, o):
    """RESTORE key ttl serialized-value [options], in Redis's order of
    checks: the key is free (or REPLACE), the TTL, the payload's version
    and checksum, the payload itself; then the TTL is applied."""
    if not o.replace and p.streams.get(name) is not None:
        raise errors.busykey()
    raise_deferred(o)                  # a TTL that is not an integer
    ttl = o.ttl
    if ttl < 0:
        raise errors.invalid_ttl()
    if not R.rdb_payload_valid(payload):
        raise errors.dump_payload_wrong()
    r = R.rdb_payload_reader(payload)
    try:
        t = r.byte()
        if t not in R.RDB_STREAM_TYPES:
            if not R.rdb_is_object_type(t) or t in (R.RDB_TYPE_MODULE_PRE_GA, R.RDB_TYPE_MODULE_2):
                raise errors.bad_data_format()
            R.rdb_skip_value(r, t)
            raise errors.restore_not_stream(R.rdb_type_name(t))
        # the whole value checked first, one node at a time (nothing kept);
        # read again below as it is loaded
        R.rdb_skip_value(r, t)
    except R.RdbError:
        raise errors.bad_data_format()
    except MemoryError:                # as Redis, whose rdbLoad takes a failed allocation for bad data
        raise errors.bad_data_format()
    r = R.rdb_payload_reader(payload)
    r.byte()
    events = R.rdb_stream_events(r, t)
    if ttl and not o.absttl:
        ttl += p.now                   # past 2^63-1 it wraps negative in Redis: expired at once
    p.dirty += 1
    if ttl and (ttl <= p.now or ttl > I64):
        # already expired: the key is not made (and REPLACE deletes it)
        if o.replace:
            drop_keys(p, [name])
        return
    try:
        load_stream(p, name, events, True, "RESTORE", ttl or None)
    except (LoadError, R.RdbError, MemoryError):
        raise errors.bad_data_format()


def load_stream(p, name, events, replace, where, expire_at=None):
    """Load a stream from storage.codec.rdb's events (``rdb_stream_events``)
    through the loader, then make its node table the events' nodes.
    ``expire_at``: its TTL (Unix ms).  Returns the loader's Stats;
    LoadError for what the store cannot take."""
    nodes: list[_nodes.Node] = []
    loader = Loader(p, replace)
    stats = loader.load(_records(name, events, nodes, where, expire_at))
    m = p.streams.get(name)
    if sum(nd.live for nd in nodes) != m.length:
        raise LoadError("%s: the stream's nodes do not hold its entries" % where)
    if nodes and nodes[-1].last > m.last_id:
        raise LoadError("%s: a node's last entry is after the stream's last ID" % where)
    p.log.replace_nodes(m, nodes)
    return stats


def _records(name, events, nodes, where, expire_at):
    """storage.verbs.load's records of a stream from the codec's events
    (``nodes`` collects the nodes, storage.parts.nodes.Node)."""
    yield "begin", where, name
    live = 0
    first = None
    group = None
    pel = {}
    meta = None
    for ev in events:
        kind = ev[0]
        if kind == "node":
            _, master, entries, nlive, deleted, body, last, names = ev
            for i, fields in entries:
                if first is None:
                    first = i
                yield "entry", where, name, i, fields
            live += nlive
            nodes.append(_nodes.Node(master, nlive, deleted, body, last, names))
        elif kind == "meta":
            _, length, last_id, _first, maxdel, added = ev
            if length != live:
                raise LoadError("%s: the stream says %d entries but holds %d" % (where, length, live))
            if added is None:                       # type 15 (Redis 5 and 6)
                added, maxdel = length, MIN_ID
            meta = {"length": length, "last-id": last_id, "max-deleted-id": maxdel, "entries-added": added,
                    "first": first}
            out = {"last-id": last_id, "max-deleted-id": maxdel, "entries-added": added}
            if expire_at is not None:
                out["expire-at"] = expire_at
            yield "stream", where, name, out
        elif kind == "group":
            _, group, glast, read, items = ev
            if read is None:                        # type 15: estimated, as Redis loads it
                read = _estimate_read(meta, glast)
            pel = {i: (t, cnt) for i, t, cnt in items}
            yield "group", where, name, group, glast, read
        elif kind == "consumer":
            _, cname, seen, active, ids = ev
            yield "consumer", where, name, group, cname, seen, seen if active is None else active
            for i in ids:
                t, cnt = pel[i]
                yield "pending", where, name, group, cname, i, t, cnt


def _estimate_read(meta, i):
    """streamEstimateDistanceFromFirstEverEntry of Redis 7, for a group of
    a type-15 value (entries-added = length, no deleted entry known)."""
    added, length, last = meta["entries-added"], meta["length"], meta["last-id"]
    first = meta["first"] if meta["first"] is not None else MAX_ID
    if not added:
        return 0
    if not length and i <= last:
        return added
    if i == last:
        return added
    if i > last:
        return -1
    if i < first:
        return added - length
    if i == first:
        return added - length + 1
    return -1


def load_rdb_stream(p, name, rdbtype, reader, replace, expire_at=None):
    """One stream of an RDB file, its value read from ``reader`` as it is
    loaded (storage.codec.rdb.RdbError for a malformed value; for what
    the store cannot take, RdbError too, naming the stream)."""
    where = "stream %s" % name.decode("utf-8", "backslashreplace")
    try:
        return load_stream(p, name, R.rdb_stream_events(reader, rdbtype), replace, where, expire_at)
    except LoadError as e:
        raise R.RdbError(str(e))
