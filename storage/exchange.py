"""Exchange with other tools: JSON lines (``xs export`` / ``xs import``)
and a live Redis or Valkey (``--to`` / ``--from redis://...``).  No
click, no rich.

JSON lines (documented in docs/snapshot-format.md, "JSON lines"): one
JSON object per line.  An entry is

    {"stream": "s", "id": "1-1", "fields": ["a", "1", "a", "2"]}

(fields in order, duplicates kept).  A byte string that is valid UTF-8
is a JSON string; any other is ``{"b64": "<base64>"}``.  With
``meta=True`` each stream's entries are followed by lines of other
types carrying everything a snapshot carries:

    {"type": "stream", "stream", "last-id", "max-deleted-id", "entries-added",
     "idmp-configured", "idmp-duration", "idmp-maxsize", "iids-added", "iids-duplicates"}
    {"type": "iid", "stream", "producer", "iid", "id"}
    {"type": "group", "stream", "group", "last-delivered-id", "entries-read"}
    {"type": "consumer", "stream", "group", "consumer", "seen-time", "active-time"}
    {"type": "pending", "stream", "group", "consumer", "id", "delivery-time", "delivery-count"}
    {"type": "nacked", "stream", "group", "id", "delivery-count"}

Every line names its stream (and group, consumer), so lines can be
filtered with jq; the only order import needs is entries before the
"stream" line of their stream, and a group before its consumers and
their pending entries -- the order export writes.

Import runs one write transaction per batch (10,000 lines by default):
bulk speed, and a failed line stops the import with everything before
its batch committed (the error says how far it got).  For an
all-or-nothing copy use a snapshot.
"""
import base64
import json
import time

import msgpack

from storage import codec, snapshot
from storage.errors import RedisError
from storage.ids import MIN_ID, U64, fmt

BATCH = 10000


class ExchangeError(Exception):
    """Export or import failed (the message is for a person)."""


# ============================================================ value coding

def enc(b):
    """bytes -> JSON value: a string if UTF-8, else {"b64": ...}."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(b).decode("ascii")}


def dec(v, what="value"):
    """JSON value -> bytes (inverse of ``enc``)."""
    if isinstance(v, str):
        return v.encode("utf-8", "surrogateescape")
    if isinstance(v, dict) and len(v) == 1 and isinstance(v.get("b64"), str):
        try:
            return base64.b64decode(v["b64"], validate=True)
        except ValueError:
            pass
    raise ExchangeError("bad %s: %s" % (what, json.dumps(v)[:80]))


def _key_enc(k):
    """A name key (0x00 + name, or 0x01 + sha256 of a long name)."""
    if k[:1] == b"\x00":
        return enc(k[1:])
    return {"sha256": k[1:].hex()}


def _key_dec(v, what):
    if isinstance(v, dict) and "sha256" in v:
        try:
            h = bytes.fromhex(v["sha256"])
        except (TypeError, ValueError):
            h = b""
        if len(h) != 32:
            raise ExchangeError("bad %s: %s" % (what, json.dumps(v)[:80]))
        return b"\x01" + h
    return codec.name_key(dec(v, what))


def _id_text(i):
    return "%d-%d" % tuple(i)


def _id_parse(s, what="id"):
    try:
        a, b = s.split("-")
        i = (int(a), int(b))
        if 0 <= i[0] <= U64 and 0 <= i[1] <= U64 and a.isdigit() and b.isdigit():
            return i
    except (AttributeError, ValueError):
        pass
    raise ExchangeError("bad %s: %r" % (what, s))


def _int(d, key, lo=-(1 << 63), hi=(1 << 64) - 1):
    v = d.get(key)
    if type(v) is not int or not lo <= v <= hi:
        raise ExchangeError("bad or missing %r" % key)
    return v


# ================================================================== export

def _all_names(tx):
    for k, v in tx.lt.cursor(db=tx.db_keys):
        name = codec.name_from_key(k)
        yield name if name is not None else codec.StreamMeta.decode(v).name


def export_records(tx, names=None, meta=False):
    """Records (dicts, JSON-ready) of the named streams (default: all), in
    one read transaction ``tx``.  Missing names raise ExchangeError."""
    if names is None:
        names = _all_names(tx)
    else:
        for n in names:
            if tx.meta(n) is None:
                raise ExchangeError("no such stream: %s" % n.decode("utf-8", "backslashreplace"))
    for name in names:
        m = tx.meta(name)
        s = enc(name)
        group = consumer = producer = stream_line = None
        decode = codec.decode_entry
        for t, v in snapshot.stream_records(tx, name, m):
            if t == snapshot.ENTRY:
                idt, fields = decode(v[1])
                yield {"stream": s, "id": idt.decode(), "fields": [enc(f) for f in fields]}
            elif not meta:
                if t != snapshot.STREAM:
                    break                      # entries are all we want
            elif t == snapshot.STREAM:
                stream_line = {"type": "stream", "stream": s,
                               "last-id": _id_text(v["last-id"]),
                               "max-deleted-id": _id_text(v["max-deleted-id"]),
                               "entries-added": v["entries-added"],
                               "idmp-configured": v["idmp-configured"],
                               "idmp-duration": v["idmp-duration"], "idmp-maxsize": v["idmp-maxsize"],
                               "iids-added": v["iids-added"], "iids-duplicates": v["iids-duplicates"]}
            elif t == snapshot.PRODUCER:
                producer = _key_enc(v)
            elif t == snapshot.IID:
                yield_stream = stream_line
                if yield_stream is not None:
                    yield yield_stream
                    stream_line = None
                yield {"type": "iid", "stream": s, "producer": producer, "iid": _key_enc(v[1]),
                       "id": _id_text(v[0])}
            else:
                if stream_line is not None:
                    yield stream_line
                    stream_line = None
                if t == snapshot.GROUP:
                    group = enc(v["name"])
                    yield {"type": "group", "stream": s, "group": group,
                           "last-delivered-id": _id_text(v["last-id"]), "entries-read": v["entries-read"]}
                elif t == snapshot.CONSUMER:
                    consumer = enc(v["name"])
                    yield {"type": "consumer", "stream": s, "group": group, "consumer": consumer,
                           "seen-time": v["seen-time"], "active-time": v["active-time"]}
                elif t == snapshot.PENDING:
                    yield {"type": "pending", "stream": s, "group": group, "consumer": consumer,
                           "id": _id_text(v[0]), "delivery-time": v[1], "delivery-count": v[2]}
                elif t == snapshot.NACKED:
                    yield {"type": "nacked", "stream": s, "group": group, "id": _id_text(v[0]),
                           "delivery-count": v[1]}
        if meta and stream_line is not None:
            yield stream_line


def dumps(rec):
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"))


def export_jsonl(store, out, names=None, meta=False, progress=None):
    """Write JSON lines to the text file ``out``; returns Stats.  One
    read transaction: a consistent view."""
    st = snapshot.Stats()
    t0 = time.monotonic()
    with store.read() as tx:
        last = None
        buf = []
        for rec in export_records(tx, names, meta):
            if rec.get("stream") != last:
                last = rec.get("stream")
                st.streams += 1
            if "type" not in rec:
                st.entries += 1
            line = dumps(rec) + "\n"
            st.bytes += len(line)
            buf.append(line)
            if len(buf) >= 1000:
                out.write("".join(buf))
                buf = []
                if progress is not None:
                    progress("export", st.entries, None)
        out.write("".join(buf))
    out.flush()
    st.seconds = time.monotonic() - t0
    return st


# ================================================================== import

class Importer:
    """Applies records (JSON-shaped dicts) to a store, one write
    transaction per ``batch`` records."""

    def __init__(self, store, batch=BATCH):
        self.store = store
        self.batch = batch
        self.pending = []
        self.stats = snapshot.Stats()
        self.lineno = 0          # records applied and committed
        self.streams = set()

    def feed(self, rec):
        if not isinstance(rec, dict):
            raise ExchangeError("line %d: not a JSON object" % (self.lineno + len(self.pending) + 1))
        self.pending.append(rec)
        if len(self.pending) >= self.batch:
            self.commit()

    def commit(self):
        recs = self.pending
        if not recs:
            return
        base = self.lineno

        def run(tx):
            n_entries = 0
            names = set()
            for j, rec in enumerate(recs):
                try:
                    n_entries += self._apply(tx, rec, names)
                except (ExchangeError, RedisError) as e:
                    raise ExchangeError("line %d: %s" % (base + j + 1, e))
                except (KeyError, TypeError, ValueError, AttributeError) as e:
                    raise ExchangeError("line %d: malformed record (%s)" % (base + j + 1, e))
            return n_entries, names
        n, names = self.store.transact(run, write=True)
        self.stats.entries += n
        self.streams |= names
        self.stats.streams = len(self.streams)
        self.lineno += len(recs)
        self.pending = []

    def close(self):
        self.commit()
        return self.stats

    # ------------------------------------------------------------ one record

    def _apply(self, tx, rec, names):
        t = rec.get("type", "entry")
        name = dec(rec.get("stream"), "stream name")
        names.add(name)
        if t == "entry":
            i = _id_parse(rec.get("id"))
            fields = rec.get("fields")
            if not isinstance(fields, list) or not fields or len(fields) % 2:
                raise ExchangeError("fields must be a non-empty list of field, value, ...")
            fields = [dec(f, "field") for f in fields]
            self.append(tx, name, i, fields)
            return 1
        m = tx.meta(name)
        if t == "stream":
            if m is None:
                m = tx.create_meta(name)
            last = _id_parse(rec.get("last-id"), "last-id")
            maxdel = _id_parse(rec.get("max-deleted-id"), "max-deleted-id")
            added = _int(rec, "entries-added", 0)
            top = tx.last_entry_id(m) if m.length else None
            if (top is not None and last < top) or maxdel > last or added < m.length:
                raise ExchangeError("stream metadata contradicts its entries")
            m.last_id, m.max_deleted, m.entries_added = last, maxdel, added
            m.idmp_cfg = bool(rec.get("idmp-configured", False))
            m.idmp_duration = _int(rec, "idmp-duration", 1) if "idmp-duration" in rec else m.idmp_duration
            m.idmp_maxsize = _int(rec, "idmp-maxsize", 1) if "idmp-maxsize" in rec else m.idmp_maxsize
            m.idmp_stats[2] = rec.get("iids-added", m.idmp_stats[2])
            m.idmp_stats[3] = rec.get("iids-duplicates", m.idmp_stats[3])
            tx.mark(name)
            return 0
        if m is None:
            raise ExchangeError("%s record for a stream with no entries or stream record yet" % t)
        if t == "iid":
            pk = _key_dec(rec.get("producer"), "producer")
            ik = _key_dec(rec.get("iid"), "iid")
            i = _id_parse(rec.get("id"))
            p = codec.sid_prefix(m.sid) + bytes([len(pk) >> 8, len(pk) & 255]) + pk
            lt, db = tx.lt, tx.db_idmp
            if lt.get(p + b"i" + ik, db=db) is not None:
                raise ExchangeError("IID recorded twice")
            lt.put(p + b"i" + ik, codec.ID.pack(*i), db=db)
            lt.put(p + b"o" + codec.ID.pack(*i), ik, db=db)
            n = lt.get(p + b"n", db=db)
            n = int(n) if n is not None else 0
            if n == 0:
                m.idmp_stats[0] += 1
            m.idmp_stats[1] += 1
            lt.put(p + b"n", b"%d" % (n + 1), db=db)
            tx.mark(name)
            return 0
        gname = dec(rec.get("group"), "group name")
        g = tx.get_group(m, gname)
        if t == "group":
            if g is not None:
                raise ExchangeError("BUSYGROUP Consumer Group name already exists")
            tx.restore_group(m, gname, _id_parse(rec.get("last-delivered-id"), "last-delivered-id"),
                             _int(rec, "entries-read", -1))
            tx.mark(name)
            return 0
        if g is None:
            raise ExchangeError("%s record for a group not imported yet" % t)
        tx.mark(name)
        if t == "consumer":
            cname = dec(rec.get("consumer"), "consumer name")
            tx.restore_consumer(g, cname, _int(rec, "seen-time"), _int(rec, "active-time", -1))
            return 0
        i = _id_parse(rec.get("id"))
        if i == MIN_ID:
            raise ExchangeError("bad pending ID 0-0")
        count = _int(rec, "delivery-count", 0, (1 << 63) - 1)
        if t == "pending":
            cname = dec(rec.get("consumer"), "consumer name")
            c = tx.get_consumer(g, cname)
            if c is None:
                now = tx.now()
                c = tx.restore_consumer(g, cname, now, -1)
            tx.restore_pending(g, i, c, _int(rec, "delivery-time", 0), count)
        elif t == "nacked":
            tx.restore_pending(g, i, None, 0, count)
        else:
            raise ExchangeError("unknown record type %r" % t)
        return 0

    @staticmethod
    def append(tx, name, i, fields):
        """Add an entry with its own ID (as ``XADD name <id> ...``)."""
        m = tx.meta(name)
        if m is None:
            m = tx.create_meta(name)
        if i <= m.last_id:
            raise ExchangeError("ID %s is equal or smaller than the stream's last ID %s"
                                % (_id_text(i), _id_text(m.last_id)))
        if i == MIN_ID:
            raise ExchangeError("ID 0-0 is not allowed")
        tx.lt.put(codec.entry_key(m.sid, i), codec.encode_entry(fmt(i), fields), db=tx.db_entries)
        m.length += 1
        m.last_id = i
        m.entries_added += 1
        tx.mark(name)


def import_jsonl(store, lines, batch=BATCH, progress=None):
    """Import JSON lines from an iterable of text lines; returns Stats.
    Blank lines are skipped."""
    t0 = time.monotonic()
    imp = Importer(store, batch)
    nbytes = 0
    for n, line in enumerate(lines, 1):
        nbytes += len(line)
        if not line.strip():
            imp.lineno += 0
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            imp.commit()
            raise ExchangeError("line %d: not JSON (%s)" % (n, e))
        imp.feed(rec)
        if progress is not None and n % 10000 == 0:
            progress("import", nbytes, None)
    st = imp.close()
    st.bytes = nbytes
    st.seconds = time.monotonic() - t0
    return st


# ============================================================ Redis bridge

def _redis_client(url):
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


def _redis_errors():
    import redis
    return redis.RedisError


def to_redis(store, url, names=None, replace=False, progress=None, pipeline=1000):
    """Copy streams (default: all) to a live Redis/Valkey: entries with
    their IDs, XSETID metadata, groups with ENTRIESREAD, consumers, and
    owned pending entries (XCLAIM ... FORCE JUSTID RETRYCOUNT TIME).
    Returns (Stats, notes): notes lists what Redis could not take."""
    r = _redis_client(url)
    RE = _redis_errors()
    st = snapshot.Stats()
    t0 = time.monotonic()
    notes = {"nacked": 0, "pending-deleted": 0, "idmp": 0}
    try:
        with store.read() as tx:
            if names is None:
                names = list(_all_names(tx))
            for n in names:
                if tx.meta(n) is None:
                    raise ExchangeError("no such stream: %s" % n.decode("utf-8", "backslashreplace"))
            if not replace:
                for n in names:
                    if r.execute_command("EXISTS", n):
                        raise ExchangeError("key %s already exists on %s (use --replace)"
                                            % (n.decode("utf-8", "backslashreplace"), url))
            for name in names:
                _stream_to_redis(tx, r, name, pipeline, st, notes, progress)
                st.streams += 1
    except RE as e:
        raise ExchangeError("Redis error: %s" % e)
    st.seconds = time.monotonic() - t0
    return st, notes


def _stream_to_redis(tx, r, name, size, st, notes, progress):
    m = tx.meta(name)
    p = r.pipeline(transaction=False)
    p.delete(name)
    queued = 1
    group = consumer = None
    existing = True

    def flush():
        for res in p.execute(raise_on_error=False):
            if isinstance(res, Exception):
                msg = str(res)
                if "deleted" in msg:   # never raised by XCLAIM, kept for safety
                    continue
                raise ExchangeError("Redis refused a command: %s" % msg)
    for t, v in snapshot.stream_records(tx, name, m):
        if t == snapshot.ENTRY:
            idt, fields = codec.decode_entry(v[1])
            p.execute_command("XADD", name, idt, *fields)
            st.entries += 1
            st.bytes += sum(len(f) for f in fields)
            queued += 1
        elif t == snapshot.STREAM:
            meta = v
        elif t == snapshot.PRODUCER or t == snapshot.IID:
            notes["idmp"] += t == snapshot.IID
            continue
        else:
            if existing:
                existing = False
                _setid(p, name, m, meta)
            if t == snapshot.GROUP:
                group = v["name"]
                p.execute_command("XGROUP", "CREATE", name, group, fmt(tuple(v["last-id"])),
                                  "ENTRIESREAD", v["entries-read"])
            elif t == snapshot.CONSUMER:
                consumer = v["name"]
                p.execute_command("XGROUP", "CREATECONSUMER", name, group, consumer)
            elif t == snapshot.PENDING:
                i, tm, cnt = v
                if not tx.entry_exists(m, i):
                    notes["pending-deleted"] += 1
                    continue
                p.execute_command("XCLAIM", name, group, consumer, 0, fmt(i), "TIME", tm,
                                  "RETRYCOUNT", cnt, "FORCE", "JUSTID")
            elif t == snapshot.NACKED:
                notes["nacked"] += 1
                continue
            queued += 1
        if queued >= size:
            flush()
            queued = 0
            if progress is not None:
                progress("export", st.entries, None)
    if existing:
        _setid(p, name, m, meta)
    flush()


def _setid(p, name, m, meta):
    """Stream metadata: an empty stream is created with XADD MAXLEN 0,
    then XSETID sets last ID, entries-added and max-deleted-entry-id."""
    if m.length == 0:
        p.execute_command("XADD", name, "MAXLEN", "0", "0-1", "x", "x")
    p.execute_command("XSETID", name, fmt(m.last_id), "ENTRIESADDED", m.entries_added,
                      "MAXDELETEDID", fmt(m.max_deleted))


def from_redis(store, url, names=None, replace=False, progress=None, count=10000):
    """Copy streams (default: every stream key) from a live Redis/Valkey
    into ``store``: entries (XRANGE, paged), metadata (XINFO STREAM),
    groups, consumers and the PEL with delivery times and counts (XINFO
    STREAM FULL).  Streams that exist in the store are refused unless
    ``replace``.  One write transaction per batch of entries."""
    r = _redis_client(url)
    RE = _redis_errors()
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
                    raise ExchangeError("no such stream on %s: %s" % (url, n.decode("utf-8", "backslashreplace")))
        with store.read() as tx:
            for n in names:
                if tx.meta(n) is not None and not replace:
                    raise ExchangeError("stream %s already exists in the store (use --replace)"
                                        % n.decode("utf-8", "backslashreplace"))
        if replace:
            store.transact(lambda tx: tx.delete_keys(list(names)), write=True)
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
                last = _id_parse(page[-1][0].decode())
                if last == (U64, U64):
                    break
                start = b"(" + page[-1][0]
                if progress is not None:
                    progress("import", imp.lineno + len(imp.pending), None)
            for rec in _redis_meta(r, name, s):
                imp.feed(rec)
        st = imp.close()
    except RE as e:
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
    yield {"type": "stream", "stream": s, "last-id": info["last-generated-id"].decode(),
           "max-deleted-id": info.get("max-deleted-entry-id", b"0-0").decode(),
           "entries-added": int(info.get("entries-added", info["length"]))}
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
        times = {}
        nacked = []
        for i, cname, tm, cnt in g["pending"]:
            if cname:
                times[i] = (int(tm), int(cnt))
            else:
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
