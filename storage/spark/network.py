"""The url mode's wire: endpoints, connections and the commands the ``xstream`` data source sends to a server

The server is ``xs serve`` or any Redis 7+ server.
``option("url", "redis://edge-1:6380,redis://edge-2:6380")`` names one
or more endpoints (comma-separated; ``rediss://`` for TLS, as redis-py
takes it; ``unix://`` too).  Each is an ``Endpoint``: the URL to connect
to (its user and password taken out of it), how to authenticate (the
options ``user`` and ``password`` win over the URL's), the connect
timeout (option ``connect_timeout``, seconds, default 10), and its
``name``: the URL as given with the password removed, which is what the
rows' ``source`` column and the streaming offsets hold (never a
password).

``Conn`` is one connection (redis-py's ``Connection``, RESP2; redis-py
is imported here, lazily, when a connection is made, so nothing else
needs it): commands one at a time or pipelined, replies raw (no
redis-py response callbacks: an entry's fields stay a list, duplicates
and order kept), every failure one line naming the endpoint (and the
stream, where there is one): ``xstream: redis://edge-2:6380: cannot
connect (...)``, ``... authentication failed (...)``, ``... stream
'events:a': ...``.  What the data source asks of a server, all Redis
7.0 commands but one: XS.PAGE, xs serve's page in stored form
(storage.spark.stored), used where COMMAND INFO XS.PAGE says the server
has it, XRANGE elsewhere; SCAN ... MATCH ... TYPE stream, TYPE, XINFO STREAM,
XRANGE / XREVRANGE ... COUNT (with ``(`` for an exclusive start),
WATCH / UNWATCH, MULTI, XADD, EXEC, and for a streaming read's
consumer group XINFO GROUPS, XGROUP CREATE / SETID ... ENTRIESREAD and
XGROUP CREATECONSUMER.  redis-py parses the replies (with hiredis's C
parser where it is installed).

Who imports it: the data source (storage.spark.options and the modules
beside it) and xs archive --url (storage.spark.archive.net).
"""
import time
import urllib.parse

from storage import ids

if False:  # typing only (not imported at run time)
    from typing import Any

ERRORS_AUTH = ("WRONGPASS", "NOAUTH", "NOPERM", "invalid password", "invalid username-password")


class NetworkError(ValueError):
    """A server that cannot be reached or refused a command: one line, naming the endpoint (and stream)."""

    def __init__(self, text):
        ValueError.__init__(self, "xstream: " + text)


# ============================================================ endpoints


class Endpoint:
    """One endpoint of the ``url`` option (picklable: it travels to the executors)."""

    def __init__(self, url, user=None, password=None, timeout=10.0):
        self.name = no_password(url)
        try:
            u = urllib.parse.urlsplit(url)
            u.port
        except ValueError as e:
            raise NetworkError("url %r: %s" % (self.name, e))
        if u.scheme not in ("redis", "rediss", "unix"):
            raise NetworkError("url %r: an endpoint is redis://host:port, rediss://host:port (TLS) or "
                               "unix:///path" % (self.name,))
        if u.scheme != "unix" and not u.hostname:
            raise NetworkError("url %r has no host" % (self.name,))
        query = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
        given = dict(query)
        # the options win over the URL's user info, which wins over its query
        self.user = user if user is not None else (
            urllib.parse.unquote(u.username) if u.username else given.get("username"))
        self.password = password if password is not None else (
            urllib.parse.unquote(u.password) if u.password is not None else given.get("password"))
        q = urllib.parse.urlencode([(k, v) for k, v in query if k not in ("password", "username")])
        self.url = "%s://%s%s%s" % (u.scheme, u.netloc.rpartition("@")[2], u.path, "?" + q if q else "")
        self.timeout = timeout

    def __repr__(self):
        return "Endpoint(%r)" % self.name

    def connect(self):
        """A ``Conn`` to this endpoint, connected and authenticated."""
        return Conn(self)


def no_password(url):
    """``url`` as given, with the password taken out (of the user info and
    of the query): for messages and logs (xs replicate --to redis:// too)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = min([rest.find(c) for c in "/?#" if c in rest] or [len(rest)])
    netloc, tail = rest[:cut], rest[cut:]
    user, at, host = netloc.rpartition("@")
    if at:
        user = user.partition(":")[0]
        netloc = user + "@" + host if user else host
    path, q, query = tail.partition("?")
    if q:
        query = "&".join(p for p in query.split("&") if p and not p.startswith("password="))
    return scheme + "://" + netloc + path + ("?" + query if query else "")


def parse_endpoints(text, user=None, password=None, timeout=10.0):
    """The ``url`` option: one endpoint or several separated by commas."""
    urls = [u.strip() for u in text.split(",")]
    if not all(urls):
        raise NetworkError("option url=%r has an empty endpoint" % (no_password(text),))
    eps = [Endpoint(u, user, password, timeout) for u in urls]
    names = [e.name for e in eps]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise NetworkError("option url names %s more than once" % ", ".join(dup))
    return eps


# ========================================================== connections


def one_line(e):
    """An error's message on one line (its type's name if it has none)."""
    text = " ".join(str(e).split())
    return text or type(e).__name__


class Conn:
    """One connection to an endpoint (RESP2, raw replies)."""

    def __init__(self, ep):
        try:
            import redis
            from redis.connection import parse_url
        except ImportError:
            raise NetworkError("option url needs redis-py: pip install 'xstreamlog[spark]' (or redis)") from None
        self.ep = ep
        self.stored = None          # pages in stored form (XS.PAGE): None until a read asks (Conn.pages)
        kw = parse_url(ep.url)
        cls = kw.pop("connection_class", redis.Connection)
        kw.update(username=ep.user, password=ep.password, socket_connect_timeout=ep.timeout,
                  socket_timeout=max(60.0, ep.timeout), protocol=2)
        self.conn = cls(**kw)
        try:
            self.conn.connect()
        except redis.AuthenticationError as e:
            raise NetworkError("%s: authentication failed (%s)" % (ep.name, one_line(e)))
        except redis.ResponseError as e:
            if any(t in str(e) for t in ERRORS_AUTH):
                raise NetworkError("%s: authentication failed (%s)" % (ep.name, one_line(e)))
            raise NetworkError("%s: refused the connection (%s)" % (ep.name, one_line(e)))
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            raise NetworkError("%s: cannot connect (%s)" % (ep.name, one_line(e)))

    def close(self):
        self.conn.disconnect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def fail(self, e, stream=None):
        """``e`` (a redis-py error) as the one-line NetworkError naming the endpoint and ``stream``."""
        import redis
        where = self.ep.name + (" stream %r" % _name(stream) if stream is not None else "")
        if isinstance(e, (redis.ConnectionError, redis.TimeoutError, OSError)):
            return NetworkError("%s: connection lost (%s)" % (where, one_line(e)))
        if any(t in str(e) for t in ERRORS_AUTH):
            return NetworkError("%s: authentication failed (%s)" % (where, one_line(e)))
        return NetworkError("%s: %s" % (where, one_line(e)))

    def pipeline(self, commands, stream=None, errors=False):
        """Send ``commands`` together; their replies in order.  A reply
        that is an error raises (naming ``stream``), unless ``errors``:
        then it is returned as redis-py's ResponseError."""
        import redis
        c = self.conn
        try:
            c.send_packed_command(c.pack_commands(commands))
            out = []
            for _ in commands:
                try:
                    out.append(c.read_response())
                except redis.ResponseError as e:
                    out.append(e)
        except (redis.RedisError, OSError) as e:
            raise self.fail(e, stream)
        if not errors:
            for r in out:
                if isinstance(r, redis.ResponseError):
                    raise self.fail(r, stream)
        return out

    def call(self, *args, stream=None):
        return self.pipeline([args], stream)[0]

    # ------------------------------------------------------------- reads

    def stream_names(self, pattern):
        """The streams whose names match the glob ``pattern`` (SCAN ... TYPE stream), sorted."""
        out: set[bytes] = set()
        cursor = b"0"
        while True:
            cursor, keys = self.call("SCAN", cursor, "MATCH", pattern, "COUNT", 1000, "TYPE", "stream")
            out.update(bytes(k) for k in keys)
            if cursor in (b"0", 0, "0"):
                return sorted(out)

    def key_type(self, name):
        t = self.call("TYPE", name, stream=name)
        return t.decode() if isinstance(t, bytes) else str(t)

    def infos(self, names):
        """XINFO STREAM of each of ``names`` (pipelined): {name: {field: value}}
        (None for a key that is gone)."""
        import redis
        replies = self.pipeline([("XINFO", "STREAM", n) for n in names], errors=True)
        out: dict[bytes, dict[str, Any] | None] = {}
        for n, r in zip(names, replies):
            if isinstance(r, redis.ResponseError):
                if "no such key" in str(r).lower():
                    out[n] = None
                    continue
                raise self.fail(r, n)
            out[n] = {bytes(r[i]).decode(): r[i + 1] for i in range(0, len(r) - 1, 2)}
        return out

    def first_last(self, names, lo, hi):
        """Per stream of ``names``: (first, last) IDs inside [lo, hi] (None: no entry there)."""
        cmds = []
        for n in names:
            cmds.append(("XRANGE", n, fmt(lo), fmt(hi), "COUNT", 1))
            cmds.append(("XREVRANGE", n, fmt(hi), fmt(lo), "COUNT", 1))
        replies = self.pipeline(cmds)
        out = {}
        for i, n in enumerate(names):
            a, b = replies[2 * i], replies[2 * i + 1]
            out[n] = (parse_id(a[0][0]), parse_id(b[0][0])) if a and b else None
        return out

    def pages(self, name, lo, hi, chunk, stored=False):
        """The entries of stream ``name`` in [lo, hi], ``chunk`` a page
        (XRANGE ... COUNT chunk, then ``(`` the page's last ID): lists of
        (ID text, [field, value, ...]).  With ``stored``, pages in xs's
        stored form (XS.PAGE, storage.spark.stored: Page objects, at most
        stored.MAX_COUNT entries each) when the server sends them,
        XRANGE's otherwise (``self.stored`` says which).  Ends with a
        TYPE: a stream deleted since the read was planned is an error,
        never an empty read.

        One page ahead: the request for the next page is sent as soon as
        a page arrives, before it is handed on, so that the server makes
        it while the caller converts this one (and a network's round trip
        is not waited for between pages).  Closed early, it reads the
        page asked for and drops it (or drops the connection)."""
        from storage.spark import stored as sp
        end = fmt(hi)
        if stored and self.stored is None:
            self.stored = self._has(sp.COMMAND)
        stored = stored and self.stored
        count = min(chunk, sp.MAX_COUNT) if stored else chunk
        ahead = []                       # the first XS.PAGE reply, read first: a refused format means XRANGE
        if stored:
            self._ask(sp.ask(name, lo, hi, count), name)
            reply = self._answer(name, sp.unsupported)
            if reply is _DECLINED:       # an xs serve of another store format (or a proxy): XRANGE
                stored = self.stored = False
                count = chunk
            else:
                ahead.append(reply)
        if not stored:
            self._ask(("XRANGE", name, fmt(lo), end, "COUNT", chunk), name)
        pending = True
        start = lo
        where = "%s stream %r" % (self.ep.name, _name(name))
        try:
            while True:
                pending = False
                if stored:
                    try:
                        page = sp.page(ahead.pop() if ahead else self._answer(name), start, hi, count)
                    except sp.BadPage as e:
                        raise NetworkError("%s: the server sent a page that is not xs's stored form (%s)"
                                           % (where, e)) from None
                    last = page.last
                else:
                    page = self._answer(name)
                    try:
                        last = sp.xrange_last(page, start, hi)
                    except sp.BadPage as e:
                        raise NetworkError("%s: the server sent %s" % (where, e)) from None
                start = ids.incr(last) if last is not None and last < hi else start
                more = len(page) >= count and last < hi
                if more:
                    if stored:
                        self._ask(sp.ask(name, start, hi, count), name)
                    else:
                        self._ask(("XRANGE", name, b"(" + bytes(page[-1][0]), end, "COUNT", chunk), name)
                    pending = True
                if page:
                    yield page
                if not more:
                    break
        finally:
            if pending:
                try:
                    self.conn.read_response()
                except Exception:
                    self.conn.disconnect()
        t = self.key_type(name)
        if t != "stream":
            raise NetworkError("%s stream %r: %s since the read was planned" % (
                self.ep.name, _name(name), "deleted" if t == "none" else "no longer a stream (a %s)" % t))

    def _has(self, command):
        """Whether the server has ``command``: COMMAND INFO's entry for it
        (redis-server answers a nil, with no error to count in its
        errorstats; a server that refuses COMMAND is taken not to)."""
        import redis
        reply = self.pipeline([("COMMAND", "INFO", command)], errors=True)[0]
        return not isinstance(reply, redis.ResponseError) and type(reply) is list and bool(reply) \
            and type(reply[0]) is list and bool(reply[0])

    def _ask(self, args, stream):
        """Send one command, its reply read later (``_answer``)."""
        import redis
        c = self.conn
        try:
            c.send_packed_command(c.pack_command(*args))
        except (redis.RedisError, OSError) as e:
            raise self.fail(e, stream)

    def _answer(self, stream, declined=None):
        """The reply of the command sent by ``_ask`` (an error raises, naming
        ``stream``; _DECLINED for an error reply ``declined(error)`` accepts)."""
        import redis
        try:
            return self.conn.read_response()
        except redis.ResponseError as e:
            if declined is not None and declined(e):
                return _DECLINED
            raise self.fail(e, stream)
        except (redis.RedisError, OSError) as e:
            raise self.fail(e, stream)

    # ------------------------------------------------------------ groups

    def move_group(self, name, group, i, consumer=None, create_only=False, tries=5):
        """Move consumer group ``group`` of stream ``name`` to ``i`` with
        ENTRIESREAD n (n = entries ever added minus those still after
        ``i``: XINFO GROUPS then shows an exact lag), creating it there
        where it is missing, never moving it back; and create
        ``consumer`` in it.  With ``create_only``, an existing group
        stays where it is.  The group's last-delivered ID afterwards
        (None: the stream is gone).  The stream is WATCHed while n is
        counted, so n and the move are one consistent step; a stream
        that keeps changing is moved without the WATCH on the last try
        (n then counts entries added meanwhile as unread: the lag is
        too large by those, never too small)."""
        import redis
        for attempt in range(tries):
            watch = attempt < tries - 1
            first = [("WATCH", name)] if watch else []
            replies = self.pipeline(first + [("XINFO", "STREAM", name), ("XINFO", "GROUPS", name)], stream=name,
                                    errors=True)
            if isinstance(replies[-2], redis.ResponseError):
                if watch:
                    self.call("UNWATCH")
                if "no such key" in str(replies[-2]).lower():
                    return None
                raise self.fail(replies[-2], name)
            info = _pairs(replies[-2])
            found = [g for g in map(_pairs, replies[-1]) if bytes(g["name"]).decode() == group]
            now = parse_id(found[0]["last-delivered-id"]) if found else None
            if now is not None and (create_only or now >= i):
                if watch:
                    self.call("UNWATCH")
                if consumer:
                    self.call("XGROUP", "CREATECONSUMER", name, group, consumer, stream=name)
                return now
            n = max(0, int(info["entries-added"]) - self._count_after(name, i))
            verb = "SETID" if found else "CREATE"
            cmds: list[tuple] = [("XGROUP", verb, name, group, fmt(i), "ENTRIESREAD", n)]
            if consumer:
                cmds.append(("XGROUP", "CREATECONSUMER", name, group, consumer))
            if watch:
                cmds = [("MULTI",)] + cmds + [("EXEC",)]
            replies = self.pipeline(cmds, stream=name, errors=True)
            result = replies[-1] if watch else replies
            if result is None:
                continue                            # the stream changed while n was counted: again
            for r in [result] + list(result if isinstance(result, list) else []):
                if isinstance(r, redis.ResponseError):
                    raise self.fail(r, name)
            return i
        raise AssertionError("unreachable")

    def _count_after(self, name, i):
        """How many entries of ``name`` are above ``i`` (XRANGE pages)."""
        n, start = 0, "(" + fmt(i)
        while i < (U64, U64):
            page = self.call("XRANGE", name, start, "+", "COUNT", 10000, stream=name)
            n += len(page)
            if len(page) < 10000:
                break
            start = b"(" + bytes(page[-1][0])
        return n

    # ------------------------------------------------------------ writes

    def add_block(self, rows, checked, tries=20):
        """Add ``rows`` ((stream, ID text or None, [field, value, ...],
        explicit ID or None) each) in ONE pipelined ``MULTI``/``EXEC``,
        all or nothing, on Redis too (whose EXEC runs the other commands
        of a block in which one fails; xs serve's adds none): what could
        fail is checked first.  A key that is not a stream: ``TYPE`` of
        each stream the first time this task writes to it (``checked``,
        a set kept by the caller).  An explicit ID not above its
        stream's top: the streams given explicit IDs are WATCHed and
        their top IDs read (``XINFO STREAM``), the IDs checked, and a
        watched stream changed by someone else meanwhile makes EXEC
        answer null: the block is sent again (up to ``tries`` times).
        Blocks of automatic IDs only watch nothing, so tasks writing to
        one stream at once never hold each other up.  The number of
        rows added."""
        return self._block(rows, checked, tries)[0]

    def add_once(self, rows, progress, batch, plan, tries=20):
        """The streaming sink over the network: with the stream
        ``progress`` WATCHed, read micro-batch ``batch``'s markers (its
        entries ``batch-*``) and ask ``plan`` (writing.sink_plan: a list of
        {field: value}) what this task adds: None, nothing (its marker is
        there: a retried task); else (which of ``rows`` to add, booleans in
        order; the fields of its marker).  Then those rows (as
        ``add_block``), the trim of older batches' markers and the marker
        ``batch-*`` go in ONE ``MULTI``/``EXEC``; another attempt or task
        that wrote meanwhile changed the watched stream: all again, so two
        tasks never decide on the same markers.  Returns (rows added,
        skipped, rows dropped as already added)."""
        return self._block(rows, set(), tries, (progress, batch, plan))

    def _block(self, rows, checked, tries, progress=None):
        import redis
        everything = rows
        names = sorted({r[0] for r in rows})
        explicit = sorted({r[0] for r in rows if r[1] is not None})
        unchecked = [n for n in names if n not in checked and n not in explicit]
        if unchecked:
            for n, t in zip(unchecked, self.pipeline([("TYPE", n) for n in unchecked])):
                t = t.decode() if isinstance(t, bytes) else str(t)
                if t not in ("stream", "none"):
                    raise NetworkError("%s stream %r: the key is not a stream (it is a %s); nothing of this block "
                                       "of %d rows was added, earlier blocks stay" % (self.ep.name, _name(n), t,
                                                                                      len(rows)))
            checked.update(unchecked)
        watch = list(explicit) + ([progress[0]] if progress else [])
        for attempt in range(tries):
            trim, rows, tail = False, everything, []
            if watch:
                cmds = [("WATCH",) + tuple(watch)] + [("XINFO", "STREAM", n) for n in explicit]
                if progress:
                    p, b, _ = progress
                    cmds += [("XREVRANGE", p, "+", "-", "COUNT", 1), ("XRANGE", p, "%d-0" % b, "%d-%d" % (b, U64))]
                replies = self.pipeline(cmds, errors=True)
                tops = {}
                for n, r in zip(explicit, replies[1:]):
                    if isinstance(r, redis.ResponseError):
                        if "no such key" not in str(r).lower():
                            self.call("UNWATCH")
                            raise self.fail(r, n)
                        tops[n] = (0, 0)
                    else:
                        tops[n] = parse_id(_pairs(r)["last-generated-id"])
                if progress:
                    todo, trim = self._progress(progress, replies[-2], replies[-1])
                    if todo is None:
                        self.call("UNWATCH")
                        return 0, True, 0
                    keep, marker = todo
                    rows = [r for r, k in zip(everything, keep) if k]
                    tail = [("XADD", progress[0], "%d-*" % progress[1]) + tuple(marker)]
                bad = _check_ids(rows, tops)
                if bad:
                    self.call("UNWATCH")
                    name, given, text = bad
                    raise NetworkError("%s stream %r: adding id %s: %s; nothing of this block of %d rows was added, "
                                       "earlier blocks stay" % (self.ep.name, _name(name), given, text, len(rows)))
            head = [("XTRIM", progress[0], "MINID", "%d-0" % progress[1])] if trim else []
            cmds = ([("MULTI",)] + head + [("XADD", n, i or "*") + tuple(f) for n, i, f, _ in rows] + tail
                    + [("EXEC",)])
            replies = self.pipeline(cmds, errors=True)
            result = replies[-1]
            for (n, i, _, _), r in zip(rows, replies[1 + len(head):-1]):
                if isinstance(r, redis.ResponseError):          # refused while queued: EXEC aborts the block
                    raise NetworkError("%s stream %r: adding id %s: %s; nothing of this block of %d rows was "
                                       "added, earlier blocks stay" % (self.ep.name, _name(n), i or "*",
                                                                       one_line(r), len(rows)))
            if result is None:
                time.sleep(0.005 * attempt)                      # a watched stream changed: again
                continue
            if isinstance(result, redis.ResponseError):
                raise self.fail(result)
            for (n, i, _, _), r in zip(rows + [(progress and progress[0], None, None, None)] * len(tail),
                                       result[len(head):]):
                if isinstance(r, redis.ResponseError):
                    raise NetworkError("%s stream %r: adding id %s: %s (on Redis, the other rows of this block "
                                       "of %d were added; on xs serve, none)" % (self.ep.name, _name(n), i or "*",
                                                                                 one_line(r), len(rows)))
            return len(rows), False, len(everything) - len(rows)
        raise NetworkError("%s: the streams %s kept changing while a block of %d rows was added (tried %d times); "
                           "nothing of it was added" % (self.ep.name, ", ".join(map(repr, map(_name, watch))),
                                                        len(rows), tries))

    def _progress(self, progress, last, marks):
        """From the progress stream's last entry and micro-batch ``batch``'s
        markers: (what ``plan`` makes of the markers, the older batches'
        markers are to be trimmed).  A progress stream already past
        ``batch`` belongs to another query (or a checkpoint that was
        reset)."""
        import redis
        p, batch, plan = progress
        for r in (last, marks):
            if isinstance(r, redis.ResponseError):
                self.call("UNWATCH")
                raise self.fail(r, p)
        top = parse_id(last[0][0])[0] if last else None
        if top is not None and top > batch:
            self.call("UNWATCH")
            raise NetworkError(
                "%s stream %r: the progress stream already records micro-batch %d, after this one (%d): its "
                "producer belongs to another query or its checkpoint was reset; give a new 'producer' option "
                "(or delete that stream)" % (self.ep.name, _name(p), top, batch))
        try:
            todo = plan([{bytes(f[k]): bytes(f[k + 1]) for k in range(0, len(f) - 1, 2)} for _, f in marks])
        except BaseException:
            self.call("UNWATCH")
            raise
        return todo, top is not None and top < batch


def _check_ids(rows, tops):
    """The first row whose explicit ID XADD would refuse, given the
    streams' top IDs: (stream, ID text, Redis's error); None if none.
    After an automatic ID in a stream its top is the server's clock,
    unknown here: later explicit IDs of that stream are left to the
    server."""
    tops = dict(tops)
    for name, given, _, parsed in rows:
        top = tops.get(name)
        if top is None:
            continue
        if parsed is None:
            tops[name] = None
            continue
        i, seq_given = parsed
        if seq_given:
            if i == (0, 0):
                return name, given, "ERR The ID specified in XADD must be greater than 0-0"
            if i <= top:
                return name, given, "ERR The ID specified in XADD is equal or smaller than the target stream top item"
            tops[name] = i
        else:
            ms = i[0]
            if ms < top[0] or (ms == top[0] and top[1] == (1 << 64) - 1):
                return name, given, "ERR The ID specified in XADD is equal or smaller than the target stream top item"
            tops[name] = (ms, top[1] + 1 if ms == top[0] else 0)
    return None


U64 = (1 << 64) - 1


def _pairs(reply):
    """A RESP2 flat [name, value, ...] reply as a dict keyed by text."""
    return {bytes(reply[k]).decode(): reply[k + 1] for k in range(0, len(reply) - 1, 2)}


def fmt(i):
    return "%d-%d" % i


_DECLINED = object()    # Conn._answer: an error reply its caller expected (XS.PAGE unknown to the server)


def parse_id(text):
    ms, _, seq = bytes(text).partition(b"-")
    return int(ms), int(seq or 0)


def _name(n):
    return n.decode("utf-8", "backslashreplace") if isinstance(n, (bytes, bytearray)) else n
