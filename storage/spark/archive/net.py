"""xs archive --url: the store seen over the network (a server, through
storage.spark.network), with the few transaction verbs a run uses."""

from storage.errors import RedisError
from storage.spark.archive.common import ArchiveError, _id, id_text


class NetStore:
    """The store of ``xs archive --url``: a server (``xs serve`` or
    Redis 7+) seen through the few transaction verbs a run uses (store_id,
    range, trim), over one connection (storage.spark.network).  A read
    "transaction" is a series of XRANGE pages (not one snapshot: planning
    and the digest read what each page finds).  A write transaction WATCHes
    every stream it reads before reading it and queues its trims, then
    sends them in one MULTI/EXEC: if another client changed a stream it
    checked, EXEC answers null and the whole function runs again, so a
    trim always removes exactly the entries its check saw."""

    TRIES = 20

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.conn = endpoint.connect()

    def close(self):
        self.conn.close()

    def run(self, fn, write=False):
        for _ in range(self.TRIES):
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
        raise ArchiveError("%s: the streams kept changing while their archived entries were checked (tried %d "
                           "times); nothing was trimmed, run it again" % (self.endpoint.name, self.TRIES))


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

    def store_id(self, create=False):
        """A server has no store identity over the protocol: the endpoint
        (its URL, no password) stands for it in the manifest."""
        return "url:" + self.name

    def range(self, raw, o):
        if self.write and raw not in self.watched:
            self.conn.call("WATCH", raw)
            self.watched.add(raw)
        return self.conn.call("XRANGE", raw, id_text(o.start), id_text(o.end), "COUNT", o.count, stream=raw)

    def groups_info(self, raw):
        """XINFO GROUPS: objects with the attributes the plan reads
        (name, pending, last_delivered_id); a missing stream raises
        RedisError, as the engine's verb does."""
        import redis
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
