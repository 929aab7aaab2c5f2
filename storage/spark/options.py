"""The ``xstream`` data source's options: each use's set, their parsers, and where the store is

Every option is checked on the driver, before anything runs; an unknown
one is an error naming the known ones of that use (``READ_OPTIONS``,
``STREAM_READ_OPTIONS``, ``WRITE_OPTIONS``, ``STREAM_WRITE_OPTIONS``).
A read's options, checked, are a ``_ReadPlan``; a write's are checked
by its writer (storage/spark/writing.py).  Where the store is: ``path``
(``_open``: the store, on the executors' host) or ``url``
(``_endpoints``: stores served over the network), never both.

Batch read options: ``path`` (the store, on the executors' host) or
``url`` (stores served over the network: "Over the network" below),
``stream`` (a name or a Redis glob: ``*``, ``?``, ``[...]``, ``\\``),
``start`` / ``end`` (XRANGE bounds: ``-``, ``+``, ``ms``, ``ms-seq``,
``(`` for exclusive), ``partitions`` (per stream, default 1),
``fields_list``, ``binary`` (the columns: storage/spark/columns.py),
``chunk`` (entries per range call, default 1000), ``driver_read``
(read on the driver: see "Where executors cannot open the store" in
storage/spark/reading.py).  The streaming read's options:
storage/spark/streaming.py; the writes': storage/spark/writing.py.

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
does not change; a write ignores the column).  What each use does over
the network is told with it: reading.py, streaming.py, writing.py.
"""
from storage import glob, ids
from storage.errors import RedisError

_GLOB_CHARS = "*?[\\"

NET_OPTIONS = {"url", "user", "password", "connect_timeout"}        # the url mode's (instead of path)
READ_OPTIONS = {"path", "stream", "start", "end", "partitions", "fields_list", "binary", "chunk",
                "driver_read"} | NET_OPTIONS
STREAM_READ_OPTIONS = {"path", "stream", "start", "partitions", "fields_list", "binary", "chunk", "driver_read",
                       "maxentriespertrigger", "group", "consumer"} | NET_OPTIONS
WRITE_OPTIONS = {"path", "stream", "batch_size"} | NET_OPTIONS
STREAM_WRITE_OPTIONS = {"path", "stream", "producer", "progress_stream", "checkpointlocation"} | NET_OPTIONS


class XStreamError(ValueError):
    """A bad option, a bad row or an entry the read cannot represent."""

    def __init__(self, text):
        ValueError.__init__(self, "xstream: " + text)


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


def _open(path, write):
    from storage.store import Store, StoreError
    try:
        return Store(path) if write else Store(path, readonly=True)
    except StoreError as e:
        raise XStreamError(str(e))
