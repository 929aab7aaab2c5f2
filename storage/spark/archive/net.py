"""xs archive --url: the store seen over the network (a server, through
storage.spark.network), with the few transaction verbs a run uses."""

from storage.errors import RedisError
from storage.info import Entry
from storage.spark.archive.common import ArchiveError, _id, id_text


class NetStore:
    """The store of ``xs archive --url``: a server (``xs serve`` or
    Redis 7+) seen through the few transaction verbs a run uses (store_id,
    range, trim, and the group verbs the plan reads), over one connection
    (storage.spark.network).  A read "transaction" is a series of XRANGE
    pages (not one snapshot: planning and the digest read what each page
    finds).

    A write transaction WATCHes every stream it reads before reading it,
    takes the stream's fingerprint right after (XINFO STREAM: entries
    ever added less its length -- the entries ever removed --, its
    recorded first ID and its largest deleted ID), and queues its trims,
    then sends them in one MULTI/EXEC: if another client changed a stream
    it checked, EXEC answers null.  An append never changes a
    fingerprint, and any removal (XDEL, XTRIM, a stream made again)
    does; so when EXEC failed and the fingerprints, taken again under a
    new WATCH, are those of the full check, only appends came in between
    -- they cannot change the entries at or below a cut -- so the full
    check's trims are sent again as they are, after its group checks are
    made again (they are cheap; a group now needing an entry a trim
    removes means a full check): a producer writing all along no longer
    voids the trim.  Any other change runs the whole check again.  So a
    trim always removes exactly the entries its check saw."""

    TRIES = 20              # full checks
    FAST_TRIES = 500        # cheap retries while only appends come in

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.conn = endpoint.connect()

    def close(self):
        self.conn.close()

    def run(self, fn, write=False):
        full = fast = 0
        seen = None             # the last full check: _NetTxn, its result
        while full < self.TRIES and fast <= self.FAST_TRIES:
            if seen is not None:
                fast += 1
                tx, result = seen
                if not self._still(tx):
                    self.conn.call("UNWATCH")
                    seen = None             # removed, made again or a group moved back: check it all again
                    continue
            else:
                full += 1
                tx = _NetTxn(self, write)
                try:
                    result = fn(tx)
                except BaseException:
                    if tx.watched:
                        self.conn.call("UNWATCH")
                    raise
                if not tx.trims:
                    if tx.watched:
                        self.conn.call("UNWATCH")
                    return result
            got = self.conn.pipeline([("MULTI",)] + tx.trims + [("EXEC",)])
            if got[-1] is not None:
                return result
            seen = (tx, result)
        raise ArchiveError("%s: the streams kept changing while their archived entries were checked (%d full "
                           "checks, %d quick ones); nothing was trimmed, run it again"
                           % (self.endpoint.name, full, fast))

    def _still(self, tx):
        """A quick retry: WATCH again the streams the full check ``tx``
        read; True when their fingerprints are those it saw (only appends
        since) and no group it asked about now needs an entry its trims
        remove, so its trims may go as they are."""
        from storage import ids
        from storage.spark.archive.plan import group_floor
        now = _NetTxn(self, True)
        if now.watch(tx.prints) != tx.prints:
            return False
        for cmd in tx.trims:
            raw = cmd[1]
            if raw in tx.grouped:
                floor = group_floor(now, raw)[0]
                if floor is not None and (cmd[2] == "MAXLEN" or floor < ids.parse_id(cmd[3].encode(), 0)):
                    return False
        return True


def open_served(endpoint):
    """The NetStore of ``endpoint`` (a storage.spark.network.Endpoint),
    connected: what ``xs archive --url`` runs on."""
    return NetStore(endpoint)


class _NetTxn:
    """The verbs of a NetStore transaction (see NetStore)."""

    def __init__(self, store, write):
        self.conn = store.conn
        self.name = store.endpoint.name
        self.write = write
        self.watched = set()
        self.trims = []
        self.prints = {}            # stream -> its fingerprint when WATCHed (NetStore)
        self.grouped = set()        # streams whose groups were asked about

    def watch(self, names):
        """WATCH ``names`` and return their fingerprints (NetStore)."""
        for raw in names:
            self.conn.call("WATCH", raw)
            self.watched.add(raw)
            self.prints[raw] = self._fingerprint(raw)
        return self.prints

    def _fingerprint(self, raw):
        info = self.conn.infos([raw])[raw]
        if info is None:
            return None
        return (int(info["entries-added"]) - int(info["length"]), bytes(info["recorded-first-entry-id"]),
                bytes(info["max-deleted-entry-id"]))

    def store_id(self, create=False):
        """A server has no store identity over the protocol: the endpoint
        (its URL, no password) stands for it in the manifest."""
        return "url:" + self.name

    def range(self, raw, o):
        if self.write and raw not in self.watched:
            self.watch([raw])
        got = self.conn.call("XRANGE", raw, id_text(o.start), id_text(o.end), "COUNT", o.count, stream=raw)
        return [Entry(_id(i), f) for i, f in got]      # as the engine's verb gives them

    def groups_info(self, raw):
        """XINFO GROUPS: objects with the attributes the plan reads
        (name, pending, last_delivered_id); a missing stream raises
        RedisError, as the engine's verb does."""
        import redis
        self.grouped.add(raw)
        got = self.conn.pipeline([("XINFO", "GROUPS", raw)], stream=raw, errors=True)[0]
        if isinstance(got, redis.ResponseError):
            if "no such key" in str(got).lower():
                raise RedisError("ERR no such key")
            raise self.conn.fail(got, raw)
        out = []
        for g in got:
            d = {bytes(g[i]).decode(): g[i + 1] for i in range(0, len(g) - 1, 2)}
            out.append(_NetGroup(bytes(d["name"]), int(d["pending"]), _id(d["last-delivered-id"])))
        return out

    def pending_summary(self, raw, group):
        """XPENDING key group: ``first`` the oldest pending ID or None."""
        got = self.conn.call("XPENDING", raw, group, stream=raw)
        return _NetPending(_id(got[1]) if got and got[0] and got[1] is not None else None)

    def pending_range(self, raw, group, o):
        """XPENDING key group start end count: rows with an ``id``."""
        got = self.conn.call("XPENDING", raw, group, id_text(o.start), id_text(o.end), o.count, stream=raw)
        return [_NetPending(_id(r[0])) for r in got]

    def trim(self, raw, o):
        assert self.write and raw in self.watched, "a trim checks its stream first"
        if o.strategy == "maxlen":
            self.trims.append(("XTRIM", raw, "MAXLEN", o.threshold))
        else:
            self.trims.append(("XTRIM", raw, "MINID", id_text(o.threshold)))


class _NetGroup:
    __slots__ = ("name", "pending", "last_delivered_id")

    def __init__(self, name, pending, last_delivered_id):
        self.name, self.pending, self.last_delivered_id = name, pending, last_delivered_id


class _NetPending:
    """A pending summary's ``first``, or a pending row's ``id``."""
    __slots__ = ("first", "id")

    def __init__(self, i):
        self.first = self.id = i
