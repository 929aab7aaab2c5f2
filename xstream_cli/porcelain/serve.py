"""xs serve: the store behind the Redis protocol (RESP2 and RESP3), so
that any Redis client can use it, with xs's durability (a reply is sent
only after its write is on disk) and alongside CLI processes on the
same store.

    xs serve [--bind 127.0.0.1] [--port 6379 | --unixsocket PATH [--unixsocketperm 700]]
             [--requirepass PASS | --requirepass-file FILE] [--protected-mode yes|no]
             [--maxclients N] [--loglevel debug|info|warning|error]

The server lives in xstream_cli.server.
"""
import sys

import click

from xstream_cli import context


def register(cli):
    @cli.command("serve")
    @click.option("--bind", default="127.0.0.1", show_default=True, metavar="ADDR[ ADDR...]",
                  help="Addresses to listen on (space separated). Loopback only by default.")
    @click.option("--port", default=6379, show_default=True, type=click.IntRange(0, 65535),
                  help="TCP port (0: any free port, logged).")
    @click.option("--tls-port", default=0, type=click.IntRange(0, 65535), metavar="PORT",
                  help="Also serve TLS on this port (with --port 0: TLS only).")
    @click.option("--tls-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="The server's certificate (PEM), for --tls-port.")
    @click.option("--tls-key-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="The server certificate's private key (PEM), for --tls-port.")
    @click.option("--tls-ca-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="CA certificates (PEM) that sign the clients' certificates.")
    @click.option("--tls-auth-clients", type=click.Choice(["yes", "no", "optional"]), default="yes",
                  show_default=True, help="Whether TLS clients must present a certificate signed by that CA.")
    @click.option("--unixsocket", metavar="PATH", help="Listen on a Unix socket instead of TCP.")
    @click.option("--unixsocketperm", default="700", show_default=True, metavar="OCTAL",
                  help="Permissions of the Unix socket.")
    @click.option("--requirepass", metavar="PASS", help="Clients must AUTH (or HELLO ... AUTH) with this password.")
    @click.option("--requirepass-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="Read the password from FILE (first line), keeping it out of the process list.")
    @click.option("--protected-mode", type=click.Choice(["yes", "no"]), default="yes", show_default=True,
                  help="Without a password, refuse clients that are not on loopback.")
    @click.option("--maxclients", default=10000, show_default=True, type=click.IntRange(1, 1 << 20))
    @click.option("--loglevel", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
                  show_default=True, help="Log level (logs go to stderr).")
    @click.pass_obj
    def serve(obj, bind, port, tls_port, tls_cert_file, tls_key_file, tls_ca_cert_file, tls_auth_clients,
              unixsocket, unixsocketperm, requirepass, requirepass_file, protected_mode, maxclients, loglevel):
        """Serve the store to Redis clients (RESP2/RESP3).

        \b
        Every stream command of xs, plus PING, HELLO, AUTH, CLIENT, INFO,
        SELECT 0, CONFIG GET/SET, COMMAND, MULTI/EXEC/WATCH, FLUSHDB,
        DBSIZE.  Replies are sent after their commit is on disk;
        concurrent clients' writes share commits.  SIGTERM drains and
        exits 0.
        \b
          xs serve --port 6380 &
          redis-cli -p 6380 XADD events '*' user alice
        """
        from xstream_cli.server import serve as run
        from xstream_cli.server import setup_logging
        from xstream_cli.server.config import Config
        try:
            perm = int(unixsocketperm, 8)
        except ValueError:
            raise click.UsageError("--unixsocketperm must be octal, like 700")
        if requirepass and requirepass_file:
            raise click.UsageError("give --requirepass or --requirepass-file, not both")
        if requirepass_file:
            try:
                with open(requirepass_file, "rb") as f:
                    requirepass = f.readline().rstrip(b"\r\n").decode("utf-8", "surrogateescape")
            except OSError as e:
                context.fail("cannot read %s: %s" % (requirepass_file, e.strerror))
            if not requirepass:
                context.fail("%s holds no password" % requirepass_file)
        cfg = Config(bind=bind, port=port, unixsocket=unixsocket, unixsocketperm=perm, requirepass=requirepass,
                     protected_mode=protected_mode == "yes", maxclients=maxclients, durable=obj.durable,
                     db=context.db_path(obj), tls_port=tls_port, tls_cert_file=tls_cert_file,
                     tls_key_file=tls_key_file, tls_ca_cert_file=tls_ca_cert_file, tls_auth_clients=tls_auth_clients)
        if tls_port and unixsocket:
            raise click.UsageError("--tls-port serves TCP; it does not go with --unixsocket")
        problem = cfg.tls_problem()
        if problem:
            raise click.UsageError(problem)
        log = setup_logging(loglevel)
        store = context.open_store(obj)
        if protected_mode == "yes" and not requirepass and not unixsocket and \
                any(not h.startswith("127.") and h not in ("localhost", "::1") for h in bind.split()):
            log.warning("bound to %s without a password: protected mode refuses clients not on loopback", bind)
        try:
            code = run(store, cfg)
        except OSError as e:
            context.fail("cannot serve: %s" % (e.strerror or e))
        finally:
            store.close()
        sys.exit(code)
