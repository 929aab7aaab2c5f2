"""What xs web shows, read from the store: JSON-ready dicts, no HTTP.

Every number of the overview comes from storage.ops.overview.snapshot
(THE overview of xs ls, xs metrics, xs check and xs top) and every rate
from xs top's ``rows_of`` (the difference of two snapshots over the time
between them), formatted with xs top's and xs ls's own cells; nothing
here computes a number its own way.  Entries are formatted as xs tail
shows them on a terminal (xstream_cli.output.pretty: the ID, its time in
UTC, ``field=value`` tokens quoted and escaped the same way).

Names are bytes: each is sent twice, ``key`` (its hex, for asking back)
and ``name`` (xs ls's ``show``: printable, \\xHH for the rest).

Every read is one read transaction of a COUNT-limited verb (XRANGE,
XREVRANGE, XPENDING's extended form): a page, never a whole stream.
The one write is ``redrive``: xs redrive's batches of
storage.ops.worker.redrive.
"""
import time
from collections import deque

from storage.ids import MAX_ID, MIN_ID, decr, incr, parse_id
from storage.options import PendingOptions, RangeOptions

PAGE = 50                 # entries of a page by default
MAX_PAGE = 500            # ... and at most


class BadRequest(Exception):
    """A request the page should not have made (400)."""


class NotFound(Exception):
    """No such stream or group (404)."""


# ------------------------------------------------------------------ names and IDs

def key_of(name):
    return name.hex()


def name_of(key):
    """The bytes a ``key`` stands for (BadRequest if it is not hex)."""
    try:
        return bytes.fromhex(key or "")
    except ValueError:
        raise BadRequest("bad key %r" % key)


def _show(b):
    from xstream_cli.porcelain.ls import show
    return show(b)


def id_text(i):
    """``ms-seq`` of an ID (xstream_cli.porcelain.ls.id_text, the one formatting of it)."""
    from xstream_cli.porcelain.ls import id_text as text
    return text(i)


def parse_entry_id(text, what="ID"):
    """(ms, seq) of ``text`` (an ID, or a ms time: seq 0); BadRequest."""
    from storage.errors import RedisError
    try:
        return parse_id((text or "").strip().encode("ascii"), 0, strict=False)
    except (RedisError, UnicodeEncodeError):
        raise BadRequest("bad %s %r: an ID such as 1700000000000-0, or a ms time" % (what, text))


def count_of(text, default=PAGE):
    if text in (None, ""):
        return default
    try:
        n = int(text)
    except ValueError:
        raise BadRequest("bad count %r" % text)
    return max(1, min(MAX_PAGE, n))


def glob_literal(name):
    """A KEYS pattern matching exactly ``name`` (its glob characters escaped)."""
    out = bytearray()
    for c in name:
        if c in b"*?[]\\":
            out += b"\\"
        out.append(c)
    return bytes(out)


# ------------------------------------------------------------------ entries, as xs tail shows them

def entry_json(entry):
    """{"id", "time", "fields": [[name, value], ...]} with xs tail's
    (pretty) tokens; ``fields`` None for an entry deleted while pending."""
    from xstream_cli.output.pretty import id_time, token
    from xstream_cli.output.reply import entry_reply
    i, fields = entry_reply(entry)
    out = {"id": id_text(i), "time": id_time(i)}
    out["fields"] = None if fields is None else [[token(fields[k], True), token(fields[k + 1])]
                                                 for k in range(0, len(fields) - 1, 2)]
    return out


def entries_page(store, name, at=None, after=None, before=None, first=False, count=PAGE):
    """A page of ``count`` entries of stream ``name``, oldest first:
    from ``at`` on (inclusive), after ``after``, the ``count`` before
    ``before``, the first ones (``first``), or by default the last ones.
    {"entries", "earlier": bool, "later": bool, "length"}; NotFound for a
    stream that does not exist."""
    def read(tx):
        if tx.last_generated_id(name) is None:
            raise NotFound("no such stream: %s" % _show(name))
        if before is not None or (at is None and after is None and not first):
            if before is not None and before == MIN_ID:
                ents = []
            else:
                end = MAX_ID if before is None else decr(before)
                ents = list(tx.range(name, RangeOptions(MIN_ID, end, count, True)) or ())
                ents.reverse()
        else:
            if after is not None:
                start = None if after == MAX_ID else incr(after)
            else:
                start = MIN_ID if first else at
            ents = [] if start is None else list(tx.range(name, RangeOptions(start, MAX_ID, count, False)) or ())
        if ents:
            lo, hi = ents[0].id, ents[-1].id
            earlier = lo != MIN_ID and bool(tx.range(name, RangeOptions(MIN_ID, decr(lo), 1, True)))
            later = hi != MAX_ID and bool(tx.range(name, RangeOptions(incr(hi), MAX_ID, 1, False)))
        else:
            earlier = later = None
            if before is not None:
                later = True
            elif at is not None or after is not None:
                earlier = True
        return ents, earlier, later, tx.length(name)
    ents, earlier, later, length = store.run(read)
    return {"entries": [entry_json(e) for e in ents], "earlier": bool(earlier), "later": bool(later),
            "length": length}


def entries_after(store, name, after, count=MAX_PAGE):
    """The entries of ``name`` after ``after`` ((ms, seq); None: its last
    ``count``): (entries JSON, the new position)."""
    def read(tx):
        last = tx.last_generated_id(name)
        if last is None:
            return [], after
        if after is None:
            ents = list(tx.range(name, RangeOptions(MIN_ID, MAX_ID, count, True)) or ())
            ents.reverse()
            return ents, last
        if after == MAX_ID:
            return [], after
        ents = list(tx.range(name, RangeOptions(incr(after), MAX_ID, count, False)) or ())
        return ents, (ents[-1].id if ents else after)
    ents, pos = store.run(read)
    return [entry_json(e) for e in ents], pos


# ------------------------------------------------------------------ the overview

class Overview:
    """Snapshots of the whole store, with xs top's rates and a short
    history of each group's lag and rates for the charts.  ``take(tick)``
    reads one snapshot: ``tick`` snapshots are the regular ones (every
    ``interval`` seconds: their rates and the charts' samples); the others
    are taken when a commit woke the watcher, and compare with the last
    tick at least half an interval old."""

    def __init__(self, store, interval=1.0, history_s=600.0):
        self.store = store
        self.interval = interval
        self.history_s = history_s
        self.ticks: deque = deque(maxlen=2)
        self.history: dict = {}          # "streamkey/groupkey" -> deque of [t, lag, in, delivered, acked]
        self.names: list = []            # the stream names of the last snapshot

    def take(self, tick):
        from storage.ops.overview import snapshot
        from xstream_cli.porcelain.top import rows_of
        snap = snapshot(self.store, (), consumers=False, store_facts=False)
        base = None
        if self.ticks:
            base = self.ticks[-1]
            if not tick and (snap.now - base.now) < self.interval * 500 and len(self.ticks) > 1:
                base = self.ticks[0]
        if tick:
            self.ticks.append(snap)
        self.names = [s.name for s in snap.streams]
        rows = rows_of(snap, base)
        doc = self._doc(snap, rows, tick)
        if tick:
            self._sample(snap.now, doc["groups"])
        return doc

    def _doc(self, snap, rows, tick):
        from xstream_cli.porcelain.ls import human_age, human_ms
        from xstream_cli.porcelain.top import _rate, cells
        rate_in = {}
        groups = []
        for r in rows:
            rate_in.setdefault(r["stream"], r["in"])
            if r["group"] is None:
                continue
            c = cells(r)
            groups.append({"key": key_of(r["stream"]) + "/" + key_of(r["group"]), "stream": _show(r["stream"]),
                           "stream_key": key_of(r["stream"]), "group": _show(r["group"]),
                           "group_key": key_of(r["group"]),
                           "length": r["length"], "in": r["in"], "delivered": r["delivered"], "acked": r["acked"],
                           "lag": r["lag"], "lag_ms": r["lag_ms"], "pending": r["pending"],
                           "oldest_ms": r["oldest_ms"], "consumers": r["consumers"], "dead": r["dead"],
                           "text": dict(zip(("stream", "group", "length", "in", "delivered", "acked", "lag",
                                             "lag_age", "pending", "oldest", "consumers", "dead"),
                                            [_show(x) if isinstance(x, bytes) else x for x in c]))})
        streams = []
        for s in snap.streams:
            streams.append({
                "key": key_of(s.name), "name": _show(s.name), "length": s.length, "in": rate_in.get(s.name),
                "first_id": id_text(s.first_id), "last_id": id_text(s.last_id),
                "last_entry_age_ms": s.last_entry_age_ms, "groups": len(s.groups), "pending": s.pending,
                "max_lag": s.max_lag, "dead": s.dead_letter_count, "ttl_ms": s.ttl_ms,
                "dead_letters": [{"origin_key": key_of(d.origin_stream), "origin_stream": _show(d.origin_stream),
                                  "origin_group": _show(d.origin_group), "count": d.count} for d in s.dead_letters],
                "text": {"in": _rate(rate_in.get(s.name)), "last_entry_age": human_age(s.last_entry_age_ms),
                         "max_lag": "-" if not s.groups else ("?" if s.max_lag is None else str(s.max_lag)),
                         "ttl": None if s.ttl_ms is None else human_ms(s.ttl_ms)}})
        return {"now": snap.now, "tick": tick, "interval": self.interval, "streams": streams, "groups": groups}

    def _sample(self, now, groups):
        keep = now - self.history_s * 1000
        seen = set()
        for g in groups:
            h = self.history.get(g["key"])
            if h is None:
                h = self.history[g["key"]] = deque()
            h.append([now, g["lag"], g["in"], g["delivered"], g["acked"]])
            seen.add(g["key"])
        for k in list(self.history):
            h = self.history[k]
            while h and h[0][0] < keep:
                h.popleft()
            if k not in seen and not h:
                del self.history[k]

    def history_doc(self):
        return {"window_ms": int(self.history_s * 1000), "groups": {k: list(h) for k, h in self.history.items()}}


# ------------------------------------------------------------------ one stream in detail

def stream_detail(store, name):
    """The stream's overview with its groups' consumers (the overview's
    ConsumerView: pending, idle), or NotFound."""
    from storage.ops.overview import snapshot
    from xstream_cli.porcelain.ls import human_ms
    snap = snapshot(store, [glob_literal(name)], consumers=True, store_facts=False)
    views = [s for s in snap.streams if s.name == name]
    if not views:
        raise NotFound("no such stream: %s" % _show(name))
    s = views[0]
    return {"key": key_of(s.name), "name": _show(s.name), "length": s.length, "now": snap.now,
            "first_id": id_text(s.first_id), "last_id": id_text(s.last_id),
            "groups": [{"group": _show(g.name), "group_key": key_of(g.name), "pending": g.pending,
                        "lag": g.lag, "lag_ms": g.lag_ms, "nacked": g.nacked,
                        "last_delivered_id": id_text(g.last_delivered_id),
                        "consumers": [{"name": _show(c.name), "pending": c.pending, "idle_ms": c.idle_ms,
                                       "idle": human_ms(c.idle_ms),
                                       "inactive": human_ms(c.inactive_ms)} for c in g.consumers]}
                       for g in s.groups],
            "dead_letters": [{"origin_key": key_of(d.origin_stream), "origin_stream": _show(d.origin_stream),
                              "origin_group": _show(d.origin_group), "count": d.count} for d in s.dead_letters]}


def pending_page(store, name, group, after=None, count=PAGE):
    """XPENDING name group (after ...) + COUNT count: [{"id", "consumer",
    "idle", "idle_ms", "deliveries"}], "more"; NotFound for no group."""
    from storage.errors import RedisError
    from xstream_cli.output.pretty import duration

    def read(tx):
        if tx.last_generated_id(name) is None or group not in tx.group_names(name):
            raise NotFound("no group %s on stream %s" % (_show(group), _show(name)))
        start = MIN_ID if after is None else (None if after == MAX_ID else incr(after))
        if start is None:
            return []
        return tx.pending_range(name, group, PendingOptions(start, MAX_ID, count + 1, None, 0))
    try:
        rows = store.run(read)
    except RedisError as e:
        raise NotFound(e.text)
    more = len(rows) > count
    return {"pending": [{"id": id_text(r.id), "consumer": _show(r.consumer) if r.consumer else None,
                         "idle_ms": r.idle, "idle": duration(r.idle) if r.idle is not None and r.idle >= 0 else "-",
                         "deliveries": r.deliveries} for r in rows[:count]],
            "more": more}


# ------------------------------------------------------------------ dead letters

def dead_letters_page(store, name, after=None, count=PAGE):
    """The entries of dead-letter stream ``name`` from the oldest (after
    ``after``): each with its origin (xs worker's seven pairs) and its
    own fields as xs tail shows them; entries that are not dead letters
    are marked so."""
    from storage.ops.worker import ORIGIN_NAMES, dead_letter_origin

    def read(tx):
        if tx.last_generated_id(name) is None:
            raise NotFound("no such stream: %s" % _show(name))
        start = MIN_ID if after is None else (None if after == MAX_ID else incr(after))
        if start is None:
            return []
        return list(tx.range(name, RangeOptions(start, MAX_ID, count + 1, False)) or ())
    ents = store.run(read)
    out = []
    n = len(ORIGIN_NAMES)
    for e in ents[:count]:
        origin = dead_letter_origin(e[1])
        row = entry_json(e._replace(fields=origin[2]) if origin else e)
        if origin is not None:
            o = dict(zip(e[1][0:2 * n:2], e[1][1:2 * n:2]))
            row["origin"] = {"stream": _show(o[b"xs-stream"]), "stream_key": key_of(o[b"xs-stream"]),
                             "id": _show(o[b"xs-id"]), "group": _show(o[b"xs-group"]),
                             "consumer": _show(o[b"xs-consumer"]), "deliveries": _show(o[b"xs-deliveries"]),
                             "exit": _show(o[b"xs-exit"]), "stderr": _show(o[b"xs-stderr"])}
        else:
            row["origin"] = None
        out.append(row)
    return {"dead_letters": out, "more": len(ents) > count}


def redrive(store, dl, only=None):
    """What ``xs redrive DL [--stream ORIGIN]...`` does, in its batches
    (storage.ops.worker.redrive, BATCH dead letters a transaction, each
    with savepoints so that a letter its origin refuses stays): returns
    xs redrive --json's object.  NotFound for a missing stream;
    StoreFailure / RedisError as they come."""
    from storage.ops.worker import redrive as redrive_batch
    from xstream_cli.porcelain.redrive import BATCH
    if store.run(lambda tx: tx.last_generated_id(dl)) is None:
        raise NotFound("no such stream: %s" % _show(dl))
    done, foreign, stuck = [], 0, []
    after = MIN_ID
    while True:
        got, last, other = store.run(lambda tx: redrive_batch(tx, dl, after, only, BATCH, False, stuck),
                                     write=True, savepoints=True)
        done += got
        foreign += len(other)
        if last is None:
            break
        after = incr(last) if last != MAX_ID else None
        if after is None:
            break
    return {"dry_run": False, "dead_letter_stream": _show(dl), "redriven": len(done), "not_dead_letters": foreign,
            "stuck": [{"dead": id_text(x.dead), "stream": _show(x.stream), "error": x.error} for x in stuck],
            "entries": [{"dead": id_text(r.dead), "stream": _show(r.stream),
                         "original": r.original.decode("ascii", "replace"),
                         "new": id_text(r.new)} for r in done]}


def now_ms():
    return int(time.time() * 1000)
