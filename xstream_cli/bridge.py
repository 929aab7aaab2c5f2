"""The Redis bridge: ``xs export --to redis://...`` and ``xs import --from
redis://...``.  A network client, so it lives in the command-line layer;
it reads the store through storage.verbs.dump records and writes it through
the engine's load path (storage.ops.exchange.Importer).  Needs the
``bridge`` extra (redis-py).
"""
import time

from storage import codec
from storage.ids import fmt
from storage.ops.exchange import ExchangeError, Importer, enc, id_parse
from storage.options import RangeOptions
from storage.verbs.load import Stats


def _client(url):
    try:
        import redis
    except ImportError:
        raise ExchangeError("the Redis bridge needs the 'redis' package: pip install 'xstream[bridge]'")
    try:
        r = redis.Redis.from_url(url, decode_responses=False, socket_timeout=60, protocol=2)
        r.response_callbacks.clear()     # raw RESP2 replies for every command
        r.execute_command("PING")
        return r
    except (ValueError, redis.RedisError) as e:
        raise ExchangeError("cannot connect to %s: %s" % (url, e))


def _redis_error():
    import redis
    return redis.RedisError


def _show(n):
    return n.decode("utf-8", "backslashreplace")


# ================================================================ to Redis

def to_redis(store, url, names=None, replace=False, progress=None, pipeline=1000):
    """Copy streams (default: all) to a live Redis/Valkey: entries with
    their IDs, XSETID metadata, groups with ENTRIESREAD, consumers, and
    owned pending entries (XCLAIM ... FORCE JUSTID RETRYCOUNT TIME).
    Returns (Stats, notes): notes counts what Redis could not take."""
    r = _client(url)
    st = Stats()
    t0 = time.monotonic()
    notes = {"nacked": 0, "pending-deleted": 0, "idmp": 0}
    r.xs_idmp = _knows(r, "XIDMPRECORD") and _knows(r, "XCFGSET")     # Redis 8.8+ takes IDMP history
    try:
        with store.read() as tx:
            if names is None:
                names = tx.stream_names()
            for n in names:
                if not tx.exists([n]):
                    raise ExchangeError("no such stream: %s" % _show(n))
            if not replace:
                for n in names:
                    if r.execute_command("EXISTS", n):
                        raise ExchangeError("key %s already exists on %s (use --replace)" % (_show(n), url))
            for name in names:
                _stream_to_redis(tx, r, name, pipeline, st, notes, progress)
                st.streams += 1
    except _redis_error() as e:
        raise ExchangeError("Redis error: %s" % e)
    st.seconds = time.monotonic() - t0
    return st, notes


def _stream_to_redis(tx, r, name, size, st, notes, progress):
    p = r.pipeline(transaction=False)
    p.delete(name)
    queued = 1
    group = consumer = meta = None
    setid_done = False

    def flush():
        for res in p.execute(raise_on_error=False):
            if isinstance(res, Exception):
                raise ExchangeError("Redis refused a command: %s" % res)
    for rec in tx.dump(name):
        kind = rec[0]
        if kind == "entry":
            idt, fields = codec.decode_entry(rec[2])
            p.execute_command("XADD", name, idt, *fields)
            st.entries += 1
            st.bytes += sum(len(f) for f in fields)
            queued += 1
        elif kind == "stream":
            meta = rec[1]
        elif kind == "iid":
            if not _iid_to_redis(tx, r, p, name, meta, rec, setid_done):
                notes["idmp"] += 1
                continue
            setid_done = True
            queued += 1
        else:
            if not setid_done:
                setid_done = True
                _setid(p, name, meta)
            if kind == "group":
                group = rec[1]
                p.execute_command("XGROUP", "CREATE", name, group, fmt(rec[2]), "ENTRIESREAD", rec[3])
            elif kind == "consumer":
                consumer = rec[1]
                p.execute_command("XGROUP", "CREATECONSUMER", name, group, consumer)
            elif kind == "pending":
                _, i, tm, cnt = rec
                if not len(tx.range(name, RangeOptions(start=i, end=i))):
                    notes["pending-deleted"] += 1
                    continue
                p.execute_command("XCLAIM", name, group, consumer, 0, fmt(i), "TIME", tm,
                                  "RETRYCOUNT", cnt, "FORCE", "JUSTID")
            elif kind == "nacked":
                notes["nacked"] += 1
                continue
            queued += 1
        if queued >= size:
            flush()
            queued = 0
            if progress is not None:
                progress("export", st.entries, None)
    if not setid_done:
        _setid(p, name, meta)
    if meta is not None and "expire-at" in meta:        # the TTL goes with the stream
        p.execute_command("PEXPIREAT", name, meta["expire-at"])
    flush()


def _knows(r, command):
    """Whether the server has ``command`` (COMMAND INFO answers nil if not)."""
    try:
        info = r.execute_command("COMMAND", "INFO", command)
    except _redis_error():
        return False
    return bool(info) and info[0] is not None


def _iid_to_redis(tx, r, p, name, meta, rec, setid_done):
    """Queue one IDMP history record (producer, IID -> entry) for a server
    that has XIDMPRECORD: the stream's IDMP settings first (XCFGSET, which
    clears history, so once, before the first record).  False when it
    cannot be carried: an older server, a name stored hashed (over the
    key-size limit), or an entry since deleted (XIDMPRECORD refuses it)."""
    _, pk, ik, i = rec
    pid, iid = codec.name_from_key(pk), codec.name_from_key(ik)
    if not r.xs_idmp or pid is None or iid is None or not len(tx.range(name, RangeOptions(start=i, end=i))):
        return False
    if not setid_done:
        _setid(p, name, meta)
        p.execute_command("XCFGSET", name, "IDMP-DURATION", meta["idmp-duration"],
                          "IDMP-MAXSIZE", meta["idmp-maxsize"])
    p.execute_command("XIDMPRECORD", name, pid, iid, fmt(i))
    return True


def _setid(p, name, meta):
    """Stream metadata: an empty stream is created with XADD MAXLEN 0,
    then XSETID sets last ID, entries-added and max-deleted-entry-id."""
    if meta["length"] == 0:
        p.execute_command("XADD", name, "MAXLEN", "0", "0-1", "x", "x")
    p.execute_command("XSETID", name, fmt(meta["last-id"]), "ENTRIESADDED", meta["entries-added"],
                      "MAXDELETEDID", fmt(meta["max-deleted-id"]))


# ============================================================== from Redis

def from_redis(store, url, names=None, replace=False, progress=None, count=10000):
    """Copy streams (default: every stream key) from a live Redis/Valkey
    into ``store``: entries (XRANGE, paged), metadata (XINFO STREAM),
    groups, consumers and the PEL with delivery times and counts (XINFO
    STREAM FULL).  Streams that exist in the store are refused unless
    ``replace``.  One write transaction per batch of entries."""
    r = _client(url)
    t0 = time.monotonic()
    try:
        if names is None:
            names = set()
            cursor = b"0"
            while True:
                cursor, keys = r.execute_command("SCAN", cursor, "COUNT", 1000, "TYPE", "stream")
                names.update(keys)
                if cursor in (b"0", 0):
                    break
            names = sorted(names)
        else:
            for n in names:
                if r.execute_command("TYPE", n) not in (b"stream", "stream"):
                    raise ExchangeError("no such stream on %s: %s" % (url, _show(n)))
        with store.read() as tx:
            for n in names:
                if tx.exists([n]) and not replace:
                    raise ExchangeError("stream %s already exists in the store (use --replace)" % _show(n))
        if replace:
            store.run(lambda tx: tx.delete_keys(list(names)), write=True)
        imp = Importer(store, count)
        nbytes = 0
        for name in names:
            s = enc(name)
            start = b"-"
            while True:
                page = r.execute_command("XRANGE", name, start, b"+", "COUNT", count)
                for idt, fields in page:
                    nbytes += sum(len(f) for f in fields)
                    imp.feed({"stream": s, "id": idt.decode(), "fields": [enc(f) for f in fields]})
                if len(page) < count:
                    break
                if id_parse(page[-1][0].decode()) == ((1 << 64) - 1, (1 << 64) - 1):
                    break
                start = b"(" + page[-1][0]
                if progress is not None:
                    progress("import", imp.stats.entries + len(imp.pending), None)
            for rec in _redis_meta(r, name, s):
                imp.feed(rec)
        st = imp.close()
    except _redis_error() as e:
        raise ExchangeError("Redis error: %s" % e)
    st.bytes = nbytes
    st.streams = len(names)
    st.seconds = time.monotonic() - t0
    return st


def _pairs(reply):
    """A RESP2 flat [k, v, k, v] reply as a dict with str keys."""
    if isinstance(reply, dict):
        return {(k.decode() if isinstance(k, bytes) else k): v for k, v in reply.items()}
    return {reply[j].decode(): reply[j + 1] for j in range(0, len(reply), 2)}


def _b2i(v):
    return int(v) if v is not None else -1


def _redis_meta(r, name, s):
    info = _pairs(r.execute_command("XINFO", "STREAM", name))
    line = {"type": "stream", "stream": s, "last-id": info["last-generated-id"].decode(),
            "max-deleted-id": info.get("max-deleted-entry-id", b"0-0").decode(),
            "entries-added": int(info.get("entries-added", info["length"]))}
    at = int(r.execute_command("PTTL", name))           # the TTL comes with the stream (PTTL: any Redis)
    if at >= 0:
        line["expire-at"] = int(time.time() * 1000) + max(at, 1)
    yield line
    groups = [_pairs(g) for g in r.execute_command("XINFO", "GROUPS", name)]
    if not groups:
        return
    maxpel = max(int(g["pending"]) for g in groups)
    full = _pairs(r.execute_command("XINFO", "STREAM", name, "FULL", "COUNT", max(maxpel, 1)))
    for g in (_pairs(x) for x in full["groups"]):
        gname = enc(g["name"])
        er = g.get("entries-read")
        yield {"type": "group", "stream": s, "group": gname,
               "last-delivered-id": g["last-delivered-id"].decode(),
               "entries-read": -1 if er is None else int(er)}
        nacked = []
        for i, cname, tm, cnt in g["pending"]:
            if not cname:
                nacked.append({"type": "nacked", "stream": s, "group": gname, "id": i.decode(),
                               "delivery-count": int(cnt)})
        for c in (_pairs(x) for x in g["consumers"]):
            cname = enc(c["name"])
            yield {"type": "consumer", "stream": s, "group": gname, "consumer": cname,
                   "seen-time": int(c["seen-time"]), "active-time": _b2i(c.get("active-time"))}
            for i, tm, cnt in c["pending"]:
                yield {"type": "pending", "stream": s, "group": gname, "consumer": cname,
                       "id": i.decode(), "delivery-time": int(tm), "delivery-count": int(cnt)}
        for rec in nacked:
            yield rec
