"""xs metrics: the store's streams, groups, consumers, dead letters and
files as Prometheus / OpenMetrics text, read from THE overview
(storage.ops.overview.snapshot), in one read transaction, never writing.

    xs metrics [STREAM|GLOB]... [--namespace NS] [--exclude-consumer-metrics]
               [--outfile FILE | --listen [HOST:]PORT]

Names are redis_exporter's where it has the metric (redis_stream_length,
redis_stream_group_lag, ...; labels db, stream, group, consumer), so its
dashboards work; what no exporter has takes the same namespace with
Prometheus units (seconds, bytes, ratios).  ``--namespace`` changes the
``redis`` prefix, as the exporter's flag does.

Label values: a stream, group or consumer name is any bytes, and
Prometheus wants UTF-8.  A name is written as it is, except that each
byte that is not part of valid UTF-8, and each backslash, becomes
``\\xHH`` (a backslash is ``\\x5c``): so a label value holding a
backslash always starts such an escape, and the name is recovered by
turning every ``\\xHH`` back into its byte.  Then the text format's own
escapes apply (``\\\\``, ``\\"``, ``\\n``).

``--outfile FILE`` writes the text atomically (a temporary file in
FILE's directory, fsynced, renamed over FILE: storage.files.AtomicFile),
for node_exporter's textfile collector; ``--listen`` serves ``/metrics``
over HTTP, opening the store for each scrape (so it never holds the
store lock between scrapes, and xs compact is not kept waiting).  A bare
``PORT`` (or ``:PORT``) listens on 127.0.0.1; any other address must be
written out.
"""
import os
import sys

import click

from xstream_cli import context

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_NO_METRICS_HELP = ("Leave out the per-consumer series (..._consumer_messages_pending, ..._consumer_idle_seconds), "
                    "as redis_exporter's --streams-exclude-consumer-metrics does.")


# ------------------------------------------------------------------ text

def label_value(b):
    """A name (bytes) as a label value: UTF-8 as it is, backslash and each
    byte that is not UTF-8 as \\xHH; then the text format's escapes."""
    if b.isascii() and b.isalnum():          # the common case, at once
        return b.decode("ascii")
    out = []
    for ch in b.decode("utf-8", "surrogateescape"):
        if "\udc80" <= ch <= "\udcff":
            out.append("\\x%02x" % (ord(ch) - 0xdc00))
        elif ch == "\\":
            out.append("\\x5c")
        else:
            out.append(ch)
    return escape("".join(out))


def escape(text):
    """The text format's escapes of a label value (and of a HELP text)."""
    return text.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _num(v):
    if isinstance(v, float):
        return repr(v)
    return str(v)


class Family:
    """One metric family: its samples as (labels, value); ``labels`` is
    a tuple of (name, escaped value) pairs, or the text between the
    braces already made (a str)."""
    __slots__ = ("name", "kind", "help", "samples")

    def __init__(self, name, kind, text):
        self.name, self.kind, self.help, self.samples = name, kind, text, []

    def add(self, labels, value):
        self.samples.append((labels, value))


def _labels(pairs):
    return ",".join('%s="%s"' % kv for kv in pairs)


# (suffix, type, help); the order of the text
_FAMILIES = [
    ("stream_length", "gauge", "Entries in the stream (XLEN)."),
    ("stream_entries_added_total", "counter", "Entries ever added to the stream (XINFO STREAM entries-added)."),
    ("stream_groups", "gauge", "Consumer groups of the stream."),
    ("stream_last_entry_age_seconds", "gauge",
     "Seconds since the stream's last entry was added (from its ID's milliseconds)."),
    ("stream_expires_in_seconds", "gauge", "Seconds until the stream expires (EXPIRE); absent without a TTL."),
    ("stream_group_consumers", "gauge", "Consumers of the group."),
    ("stream_group_messages_pending", "gauge", "Entries delivered to the group and not acknowledged (its PEL)."),
    ("stream_group_lag", "gauge",
     "Entries not yet delivered to the group (XINFO GROUPS lag); absent when Redis's counters cannot tell."),
    ("stream_group_entries_read", "gauge", "Entries the group has read (XINFO GROUPS entries-read)."),
    ("stream_group_lag_seconds", "gauge",
     "Age in seconds of the oldest entry not yet delivered to the group; 0 when none."),
    ("stream_group_oldest_pending_age_seconds", "gauge",
     "Seconds since the oldest delivery of an entry pending with a consumer; 0 when none."),
    ("stream_group_messages_nacked", "gauge", "Pending entries given back with XNACK (no owner)."),
    ("stream_group_consumer_messages_pending", "gauge", "Entries pending with the consumer."),
    ("stream_group_consumer_idle_seconds", "gauge", "Seconds since the consumer's last read or claim attempt."),
    ("stream_dead_letters", "gauge",
     "Dead letters xs worker wrote to this stream, by origin stream and group."),
    ("store_file_size_bytes", "gauge", "Size of the store's data.mdb."),
    ("store_used_bytes", "gauge", "Bytes of the store's live pages (what xs compact would keep)."),
    ("store_map_size_bytes", "gauge", "The LMDB map size (it doubles by itself when full)."),
    ("store_map_used_ratio", "gauge", "Bytes in use divided by the map size."),
    ("store_full_ratio", "gauge",
     "Bytes in use divided by the room the store can have (data.mdb plus the file system's free space)."),
    ("store_readers", "gauge", "Other live processes holding an LMDB reader slot."),
    ("store_stale_readers", "gauge", "Reader slots left by processes that died."),
    ("store_streams", "gauge", "Streams in the store."),
    ("store_entries", "gauge", "Entries in the store."),
    ("store_changelog_bytes", "gauge", "Bytes of change log the store keeps for its replicas (xs replicate)."),
    ("store_replica_lag_commits", "gauge", "Commits the replica has not acknowledged yet."),
    ("store_replica_lag_seconds", "gauge",
     "Age in seconds of the oldest commit the replica has not acknowledged; 0 when none."),
    ("store_replica_last_ack_timestamp_seconds", "gauge",
     "When the replica last acknowledged what its segments hold (Unix time)."),
]


def families(snap, namespace="redis", consumers=True):
    """{suffix: Family} of a storage.ops.overview.Snapshot."""
    fam = {sfx: Family("%s_%s" % (namespace, sfx), kind, text) for sfx, kind, text in _FAMILIES}
    db = ("db", "db0")
    length, added, ngroups = fam["stream_length"], fam["stream_entries_added_total"], fam["stream_groups"]
    gcons, gpend, glag = fam["stream_group_consumers"], fam["stream_group_messages_pending"], fam["stream_group_lag"]
    gread, glags = fam["stream_group_entries_read"], fam["stream_group_lag_seconds"]
    gold, gnack = fam["stream_group_oldest_pending_age_seconds"], fam["stream_group_messages_nacked"]
    cpend, cidle = fam["stream_group_consumer_messages_pending"], fam["stream_group_consumer_idle_seconds"]
    for s in snap.streams:
        sl = 'db="db0",stream="%s"' % label_value(s.name)
        length.add(sl, s.length)
        added.add(sl, s.entries_added)
        ngroups.add(sl, len(s.groups))
        if s.last_entry_age_ms is not None:
            fam["stream_last_entry_age_seconds"].add(sl, max(0, s.last_entry_age_ms) / 1000.0)
        if s.ttl_ms is not None:
            fam["stream_expires_in_seconds"].add(sl, s.ttl_ms / 1000.0)
        for g in s.groups:
            gl = '%s,group="%s"' % (sl, label_value(g.name))
            gcons.add(gl, g.consumer_count)
            gpend.add(gl, g.pending)
            if g.lag is not None:
                glag.add(gl, g.lag)
            if g.entries_read is not None:
                gread.add(gl, g.entries_read)
            glags.add(gl, g.lag_ms / 1000.0)
            gold.add(gl, (g.oldest_pending_ms or 0) / 1000.0)
            gnack.add(gl, g.nacked)
            if consumers:
                for c in g.consumers:
                    cl = '%s,consumer="%s"' % (gl, label_value(c.name))
                    cpend.add(cl, c.pending)
                    cidle.add(cl, c.idle_ms / 1000.0)
        for d in s.dead_letters:
            fam["stream_dead_letters"].add('%s,origin_stream="%s",origin_group="%s"'
                                           % (sl, label_value(d.origin_stream), label_value(d.origin_group)),
                                           d.count)
    o = snap.store
    if o is not None:
        for sfx, v in (("store_file_size_bytes", o.file_size), ("store_used_bytes", o.used_size),
                       ("store_map_size_bytes", o.map_size), ("store_map_used_ratio", o.map_used_ratio),
                       ("store_full_ratio", o.full_ratio), ("store_readers", o.readers),
                       ("store_stale_readers", o.stale_readers), ("store_streams", o.streams),
                       ("store_entries", o.entries)):
            if v is not None:
                fam[sfx].add((db,), v)
    r = getattr(snap, "replication", None)
    if r is not None:                # xs replicate (issue 41)
        fam["store_changelog_bytes"].add((db,), r["log_bytes"])
        for rep in r["replicas"]:
            rl = (db, ("replica", rep["id"]))
            fam["store_replica_lag_commits"].add(rl, rep["lag_commits"])
            if rep["lag_seconds"] is not None:
                fam["store_replica_lag_seconds"].add(rl, rep["lag_seconds"])
            fam["store_replica_last_ack_timestamp_seconds"].add(rl, rep["acked_at"] / 1000.0)
    return fam


def render(fams):
    """The text exposition (Prometheus 0.0.4, which OpenMetrics parsers
    read too) of Families: HELP and TYPE for each family with samples."""
    lines = []
    for f in fams:
        if not f.samples:
            continue
        lines.append("# HELP %s %s" % (f.name, f.help.replace("\\", "\\\\").replace("\n", "\\n")))
        lines.append("# TYPE %s %s" % (f.name, f.kind))
        name = f.name
        for labels, value in f.samples:
            lab = labels if isinstance(labels, str) else _labels(labels)
            lines.append("%s{%s} %s" % (name, lab, _num(value)) if lab else "%s %s" % (name, _num(value)))
    return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""


def metrics_text(snap, namespace="redis", consumers=True):
    return render(families(snap, namespace, consumers).values())


# ------------------------------------------------------------------ reading the store

def check_namespace(ns):
    import re
    if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", ns or ""):
        context.fail("--namespace: %r is not a metric name prefix (letters, digits and _, not first a digit)"
                     % ns, context.EXIT_USAGE)


def read_snapshot(g, args, consumers=True, detail=True):
    """THE overview of the store ``g`` names (never created: a missing
    store is StoreError); exits 1 naming the literal streams missing."""
    from storage.ops.overview import snapshot
    store = context.try_open(g, write=False, create=False)
    try:
        return snapshot(store, args, consumers=consumers, detail=detail)
    finally:
        store.close()


def write_file(path, data):
    """``data`` to ``path``, atomically (storage.files.AtomicFile: the
    mode of the file it replaces, else 0666 less the umask); exit 1 with
    the reason when it cannot be written."""
    from storage.files import AtomicFile
    try:
        with AtomicFile(path, mode="inherit") as f:
            f.write(data)
    except OSError as e:
        context.fail("cannot write %s: %s" % (path, e.strerror or e))


def parse_listen(text, option="--listen"):
    """(host, port) of ``[HOST:]PORT``: a bare port (or ``:PORT``) is
    127.0.0.1; ``[::1]:PORT`` for IPv6."""
    t = (text or "").strip()
    host, _, port = t.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        host = "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        context.fail("%s: %r: want [HOST:]PORT (e.g. 9187, 127.0.0.1:9187, 0.0.0.0:9187)" % (option, text),
                     context.EXIT_USAGE)
    return host, int(port)


def _store_error_text(e):
    return str(e)


def http_server(host, port, snapshot, namespace, consumers):
    """An HTTP server (not yet serving) answering /metrics on (host,
    port) with the text of ``snapshot()`` (an overview Snapshot; a
    StoreError is answered 503, a literal stream missing 404): one
    request at a time.  Raises OSError when it cannot listen.  Used by
    ``xs metrics --listen`` and ``xs serve --metrics``."""
    import socket
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from storage.store import StoreError

    class Handler(BaseHTTPRequestHandler):
        server_version = "xs-metrics"

        def log_message(self, *a):
            pass

        def _reply(self, code, body, ctype="text/plain; charset=utf-8", head=False):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _serve(self, head):
            path = self.path.split("?", 1)[0]
            if path == "/":
                return self._reply(200, b"xs metrics: see /metrics\n", head=head)
            if path != "/metrics":
                return self._reply(404, b"not found: try /metrics\n", head=head)
            try:
                snap = snapshot()
            except StoreError as e:
                return self._reply(503, ("xs: %s\n" % e).encode("utf-8", "replace"), head=head)
            if snap.missing:
                from xstream_cli.porcelain.ls import show
                return self._reply(404, ("xs: no such stream: %s\n" % show(snap.missing[0])).encode(), head=head)
            self._reply(200, metrics_text(snap, namespace, consumers), CONTENT_TYPE, head=head)

        def do_GET(self):
            self._serve(False)

        def do_HEAD(self):
            self._serve(True)

    class Server(HTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True

    return Server((host, port), Handler)


def url_of(httpd, host):
    """The /metrics URL ``httpd`` (listening on ``host``) answers."""
    return "http://%s:%d/metrics" % ("[%s]" % host if ":" in host else host, httpd.server_address[1])


def serve(g, args, namespace, consumers, host, port):
    """Serve /metrics on (host, port) until interrupted: one request at
    a time, each a fresh snapshot (the store opened and closed again)."""
    try:
        httpd = http_server(host, port, lambda: read_snapshot(g, args, consumers), namespace, consumers)
    except OSError as e:
        context.fail("--listen %s:%d: %s" % (host, port, e.strerror or e))
    try:
        sys.stderr.write("xs metrics: serving %s\n" % url_of(httpd, host))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


def run_metrics(g, targets, namespace, consumers, outfile, listen):
    from storage.store import StoreError
    check_namespace(namespace)
    if outfile is not None and listen is not None:
        context.fail("--outfile and --listen do not go together", context.EXIT_USAGE)
    args = [os.fsencode(a) for a in targets]
    addr = parse_listen(listen) if listen is not None else None
    try:
        snap = read_snapshot(g, args, consumers)
    except StoreError as e:
        context.fail(str(e))
    if snap.missing:
        from xstream_cli.porcelain.ls import fail_missing
        fail_missing(snap.missing)
    if addr is not None:
        return serve(g, args, namespace, consumers, *addr)
    data = metrics_text(snap, namespace, consumers)
    if outfile is not None:
        return write_file(outfile, data)
    context.write_out(data)


# ------------------------------------------------------------------ command

def register(cli):
    @cli.command("metrics")
    @click.argument("targets", nargs=-1, metavar="[STREAM|GLOB]...")
    @click.option("--namespace", default="redis", show_default=True, metavar="NS",
                  help="Metric name prefix, as redis_exporter's --namespace.")
    @click.option("--exclude-consumer-metrics", "no_consumers", is_flag=True, help=_NO_METRICS_HELP)
    @click.option("--outfile", metavar="FILE",
                  help="Write to FILE atomically (for node_exporter's textfile collector) instead of stdout.")
    @click.option("--listen", metavar="[HOST:]PORT",
                  help="Serve /metrics over HTTP (a bare PORT: 127.0.0.1 only) until interrupted.")
    @click.pass_obj
    def metrics(obj, targets, namespace, no_consumers, outfile, listen):
        """Print Prometheus metrics: streams, groups, lag, pending, store.

        \b
        redis_exporter's names (redis_stream_length,
        redis_stream_group_lag, ..., labels db, stream, group,
        consumer), and under the same prefix: ..._group_lag_seconds
        (age of the oldest undelivered entry), ..._group_oldest_
        pending_age_seconds, ..._group_messages_nacked,
        ..._stream_last_entry_age_seconds, ..._stream_expires_in_
        seconds, ..._stream_dead_letters (labels origin_stream,
        origin_group) and ..._store_* (sizes, readers).  STREAM|GLOB
        limits the streams (a name must exist).  Reads one snapshot,
        never writes, never creates a store.  Label values: bytes that
        are not UTF-8, and backslash, as \\xHH.
        """
        run_metrics(obj or context.Globals(), targets, namespace, not no_consumers, outfile, listen)
