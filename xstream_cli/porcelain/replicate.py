"""xs replicate: continuous replication of the store to a directory
(issue 41; storage.ops.replicate does the work, docs/replication.md
describes the directory).

    xs replicate --to DIR [--retention DURATION] [--base-interval DURATION]
                 [--backlog-size SIZE] [-q]
    xs replicate --to redis://HOST:PORT[/DB] [--replace] [--position-key KEY]
                 [--tls-ca-cert-file F] [--tls-cert-file F] [--tls-key-file F]
                 [--backlog-size SIZE] [-q]
    xs replicate --status [--to DIR] [--json]
    xs replicate --forget --to DIR|URL

``--to redis://`` (or ``rediss://``) feeds a live replica on redis-server,
Valkey or xs serve (xstream_cli/redis_replica.py).

One line on stderr per generation (a new base), none with -q; SIGTERM
and Ctrl-C end it cleanly (status 0), a SIGKILL at any moment is
resumed by the next start with no gap and no duplicate.
"""
import re
import signal
import sys

import click

from xstream_cli import context

_SIZE = re.compile(r"(\d+)\s*(b|kb|k|mb|m|gb|g|kib|mib|gib)?\Z")
_UNITS = {None: 1, "b": 1, "k": 1000, "kb": 1000, "m": 10 ** 6, "mb": 10 ** 6, "g": 10 ** 9, "gb": 10 ** 9,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}


def parse_size(option, text):
    """``64mb``, ``1gb``, ``500kb``, ``4096`` (bytes) -> bytes; else exit 2."""
    m = _SIZE.match((text or "").strip().lower())
    if m is None or int(m.group(1)) <= 0:
        context.fail("%s: bad size %r: a number of bytes, or with a unit (kb, mb, gb, kib, mib, gib), "
                     "e.g. 64mb" % (option, text), context.EXIT_USAGE)
    return int(m.group(1)) * _UNITS[m.group(2)]


def _when(ms):
    if not ms:
        return "-"
    import datetime
    return datetime.datetime.fromtimestamp(ms / 1000.0).astimezone().isoformat(timespec="milliseconds")


class _Stop(Exception):
    """SIGTERM: end cleanly."""


def register(cli):
    @cli.command("replicate")
    @click.option("--to", "to", metavar="DIR|URL",
                  help="The replica directory (made 0700 if missing; one replicator at a time), or a live "
                       "replica: redis://HOST:PORT[/DB], rediss:// (TLS) or unix:///PATH on Redis 7.0+, Valkey or "
                       "xs serve (password: in the URL or REDISCLI_AUTH).")
    @click.option("--retention", metavar="DURATION",
                  help="Keep the generations needed to restore any moment of the last DURATION "
                       "(7d, 12h, 30m ...); older ones are removed. Default: keep every generation.")
    @click.option("--base-interval", "base_interval", metavar="DURATION", default="1h", show_default=True,
                  help="Take a new base (a full copy) this often.")
    @click.option("--backlog-size", "backlog", metavar="SIZE",
                  help="How much change log the store keeps for a replica that fell behind (default 256mb); "
                       "past it the replica takes a full copy again.")
    @click.option("--status", is_flag=True, help="Show the store's change log and the replicas' lag, then exit.")
    @click.option("--forget", is_flag=True,
                  help="Unregister DIR's replica from the store (with no replica left, the store stops logging).")
    @click.option("--replace", is_flag=True,
                  help="With --to URL: replace what the server holds even if it is not this store's replica.")
    @click.option("--position-key", "position_key", metavar="KEY", default="__xs_replica__", show_default=True,
                  help="With --to URL: the stream key on the replica that holds its position.")
    @click.option("--tls-ca-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="With rediss://: the CA certificates (PEM) that verify the server.")
    @click.option("--tls-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="With rediss://: this client's certificate (PEM), if the server asks for one.")
    @click.option("--tls-key-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="With rediss://: the client certificate's private key (PEM).")
    @click.option("--json", "json_", is_flag=True, help="With --status: one JSON object.")
    @click.option("-q", "--quiet", is_flag=True, help="Print nothing unless something fails.")
    @click.pass_obj
    def replicate(obj, to, retention, base_interval, backlog, status, forget, replace, position_key,
                  tls_ca_cert_file, tls_cert_file, tls_key_file, json_, quiet):
        """Replicate the store to DIR continuously, for point-in-time restore.

        \b
        DIR gets a base (a full, compacted copy of the store), then
        segment files of the store's change log, each synced within a
        second of its commits; a new base every --base-interval starts a
        new generation, and --retention removes the generations no
        longer needed.  Restore with: xs restore --from DIR [--at TIME].
        \b
        With --to redis://HOST:PORT, a live replica instead: a full
        sync by DUMP/RESTORE, then each round of commits as one
        MULTI/EXEC of Redis commands (XADD with its ID, XCLAIM ... FORCE
        JUSTID, XSETID ...), with the replica's position in the same
        transaction, so a restart goes on exactly where it stopped.
        \b
        While a replica is registered, every write transaction of the
        store also records what it changed, in the same transaction;
        a store without replicas pays one lookup per write.  Runs until
        SIGTERM or Ctrl-C (a clean exit); killed, the next start goes on
        where it stopped.  One line on stderr per generation (-q: none).
        """
        from storage.ops.replicate import ReplicaError, Replicator
        from storage.ops.replicate import forget as forget_
        from storage.ops.replicate import status as status_
        from xstream_cli.porcelain.durations import parse_duration
        g = obj or context.Globals()
        if status and forget:
            raise click.UsageError("--status and --forget: give one")
        if not status and not to:
            raise click.UsageError("give --to DIR (or --status)")
        if (status or forget) and (retention or backlog or base_interval != "1h"):
            raise click.UsageError("--retention, --base-interval and --backlog-size go with replicating")
        if json_ and not status:
            raise click.UsageError("--json goes with --status")
        url = bool(to) and to.startswith(("redis://", "rediss://", "unix://"))
        if not url and (replace or position_key != "__xs_replica__" or tls_ca_cert_file or tls_cert_file
                        or tls_key_file):
            raise click.UsageError("--replace, --position-key and the --tls options go with --to redis://...")
        if url and (retention or base_interval != "1h"):
            raise click.UsageError("--retention and --base-interval go with --to DIR")
        if url and status:
            to = None                   # the registered replicas' lag is what --status shows of a URL
        retention_ms = parse_duration("--retention", retention) if retention else None
        interval_ms = parse_duration("--base-interval", base_interval)
        if interval_ms <= 0:
            context.fail("--base-interval must be more than 0", context.EXIT_USAGE)
        bound = parse_size("--backlog-size", backlog) if backlog else None
        store = context.open_store(g, write=not status, create=not (status or forget))
        try:
            if status:
                return _status(status_(store, to), json_)
            if forget and url:
                from storage import changelog
                from xstream_cli.redis_replica import safe_url
                had = changelog.disable(store, "redis:" + safe_url(to))
                if not quiet:
                    click.echo("xs: %s %s" % ("forgot the replica" if had else "no replica registered for",
                                              safe_url(to)), err=True)
                return
            if forget:
                had = forget_(store, to)
                if not quiet:
                    click.echo("xs: %s %s" % ("forgot the replica" if had else "no replica registered for", to),
                               err=True)
                return
            say = (lambda line: None) if quiet else (lambda line: _say(to, line))

            def stop(signum, frame):
                raise _Stop()
            signal.signal(signal.SIGTERM, stop)
            if url:
                return _to_redis(store, to, replace, position_key, bound, quiet,
                                 (tls_ca_cert_file, tls_cert_file, tls_key_file))
            rep = Replicator(store, to, retention_ms, interval_ms, bound, say=say)
            try:
                rep.run()
            except (KeyboardInterrupt, _Stop):
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                rep.close()
                if not quiet:
                    _say(to, "stopped at commit %d" % rep.pos)
        except ReplicaError as e:
            context.fail("replicate: %s" % e)
        except OSError as e:
            context.fail("replicate: %s: %s" % (to, e.strerror or e))
        finally:
            store.close()


def _to_redis(store, url, replace, position_key, bound, quiet, tls):
    """``xs replicate --to redis://...`` until SIGTERM or Ctrl-C."""
    import os

    from xstream_cli.redis_replica import RedisReplica, ReplicaError, safe_url
    ca, cert, key = tls
    ssl = {}
    if url.startswith("rediss://"):
        ssl = {k: v for k, v in (("ssl_ca_certs", ca), ("ssl_certfile", cert), ("ssl_keyfile", key)) if v}
    elif ca or cert or key:
        raise click.UsageError("the --tls options go with rediss://")
    shown = safe_url(url)
    say = (lambda line: None) if quiet else (lambda line: _say(shown, line))
    rep = RedisReplica(store, url, position_key.encode(), replace, say=say, ssl=ssl, bound=bound,
                       password=os.environ.get("REDISCLI_AUTH") or None)
    try:
        rep.run()
    except (KeyboardInterrupt, _Stop):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if not quiet:
            _say(shown, "stopped at commit %d" % rep.pos)
    except ReplicaError as e:
        from storage import changelog
        kept = rep.rid in changelog.replicas(store)
        context.fail("replicate: %s%s" % (e, "\nxs: the store keeps its change log for this replica until it runs "
                                          "again, or until: xs replicate --forget --to %s" % shown if kept else ""))
    finally:
        rep.close()


def _say(to, line):
    try:
        sys.stderr.write("xs: replicate %s: %s\n" % (to, line))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _status(doc, as_json):
    from xstream_cli.porcelain.ls import emit_json
    if as_json:
        return emit_json(doc)
    out = []
    if not doc["logging"]:
        out.append("change log: off (no replica registered)")
    else:
        out.append("change log: on, last commit %d, %s bytes kept" % (doc["seq"], format(doc["log_bytes"], ",")))
    d = doc.get("dir")
    if d is not None:
        lag = ("%s commits, %s s" % (d.get("lag_commits"), _secs(d.get("lag_seconds")))
               if d.get("lag_commits") is not None else "unknown (another change log)")
        out.append("replica %s: %d generation%s, last commit %s at %s, last segment written %s, lag %s"
                   % (d["path"], d["generations"], "" if d["generations"] == 1 else "s", d["last_commit"],
                      _when(d["last_commit_time"]), _when(d["last_segment_time"]), lag))
    for r in doc["replicas"]:
        out.append("registered replica %s: at commit %d (acknowledged %s), lag %d commits, %s s"
                   % (r["id"], r["position"], _when(r["acked_at"]), r["lag_commits"], _secs(r["lag_seconds"])))
    context.write_out(("\n".join(out) + "\n").encode())


def _secs(v):
    return "?" if v is None else "%.3f" % v

