"""xs serve: the store behind the Redis protocol (RESP2 and RESP3), so
that any Redis client can use it, with xs's durability (a reply is sent
only after its write is on disk) and alongside CLI processes on the
same store.

    xs serve [--bind 127.0.0.1] [--port 6379 | --unixsocket PATH [--unixsocketperm 700]]
             [--requirepass PASS | --requirepass-file FILE] [--protected-mode yes|no]
             [--maxclients N] [--loglevel debug|info|warning|error]

The server lives in xstream_cli.server.
"""
import os
import sys

import click

from xstream_cli import context

SOCKET_NAME = "serve.sock"     # the default: a Unix socket in the store's own (private) directory
DEFAULT_PORT = 6379


def register(cli):
    @cli.command("serve")
    @click.option("--bind", metavar="ADDR[ ADDR...]",
                  help="TCP addresses to listen on (space separated; 127.0.0.1 when only --port is given).")
    @click.option("--port", type=click.IntRange(0, 65535),
                  help="TCP port (0: any free port, logged).  Without --port, --bind and --tls-port: the Unix "
                       "socket serve.sock in the store's directory, which only you can reach.")
    @click.option("--allow-no-password", is_flag=True,
                  help="Serve plain TCP without a password, although every user of this machine can then "
                       "read, write and delete the store.")
    @click.option("--tls-port", default=0, type=click.IntRange(0, 65535), metavar="PORT",
                  help="Serve TLS on this port (beside --port if it is given; --port 0: no plain TCP).")
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
    @click.option("--metrics", metavar="[HOST:]PORT",
                  help="Also serve xs metrics' Prometheus text of the whole store at http://HOST:PORT/metrics "
                       "(a bare PORT: 127.0.0.1; no authentication: keep it on loopback or a trusted network).")
    @click.option("--loglevel", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
                  show_default=True, help="Log level (logs go to stderr).")
    @click.pass_obj
    def serve(obj, bind, port, allow_no_password, tls_port, tls_cert_file, tls_key_file, tls_ca_cert_file,
              tls_auth_clients, unixsocket, unixsocketperm, requirepass, requirepass_file, protected_mode, maxclients,
              metrics, loglevel):
        """Serve the store to Redis clients (RESP2/RESP3).

        \b
        Every stream command of xs, plus PING, HELLO, AUTH, CLIENT, INFO,
        SELECT 0, CONFIG GET/SET, COMMAND, MULTI/EXEC/WATCH, FLUSHDB,
        DBSIZE.  Replies are sent after their commit is on disk;
        concurrent clients' writes share commits.  SIGTERM drains and
        exits 0.
        \b
        By default the store is served on the Unix socket serve.sock in
        its directory (private, as the store's files are); TCP needs a
        password (--requirepass-file), TLS client certificates, or
        --allow-no-password.
        \b
          xs --db events.xs serve &
          redis-cli -s events.xs/serve.sock XADD events '*' user alice
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
        tcp = port is not None or bind is not None or bool(tls_port)
        if unixsocket and tcp:
            raise click.UsageError("--unixsocket serves instead of TCP: it does not go with --port, --bind or "
                                   "--tls-port")
        if not tcp and not unixsocket:
            unixsocket = os.path.join(context.db_path(obj), SOCKET_NAME)     # private: in the 0700 store
            if len(os.fsencode(unixsocket)) > 107:
                context.fail("the store's path is too long for a Unix socket in it (%s); give --unixsocket PATH, "
                             "or --port with --requirepass-file" % unixsocket)
        if port is None:
            port = 0 if tls_port else DEFAULT_PORT         # --bind alone: Redis's port; --tls-port alone: TLS only
        plain = tcp and not (tls_port and port == 0)
        tls_open = tls_port and tls_auth_clients != "yes"
        if (plain or tls_open) and not requirepass and not allow_no_password:
            raise click.UsageError(
                "TCP without a password lets every user of this machine read, write and delete this store, "
                "whose files only you can read; give --requirepass-file FILE, or leave out --port and --bind to "
                "serve on the private Unix socket %s, or --allow-no-password if that is what you want"
                % os.path.join(context.db_path(obj), SOCKET_NAME))
        bind = bind or "127.0.0.1"
        from xstream_cli.porcelain.metrics import parse_listen
        cfg = Config(bind=bind, port=port, unixsocket=unixsocket, unixsocketperm=perm, requirepass=requirepass,
                     protected_mode=protected_mode == "yes", maxclients=maxclients, durable=obj.durable,
                     db=context.db_path(obj), tls_port=tls_port, tls_cert_file=tls_cert_file,
                     tls_key_file=tls_key_file, tls_ca_cert_file=tls_ca_cert_file, tls_auth_clients=tls_auth_clients,
                     native=os.environ.get("XS_SERVE_PURE", "") in ("", "0"),
                     maxclients_requested=click.get_current_context().get_parameter_source("maxclients")
                     != click.core.ParameterSource.DEFAULT,
                     metrics=None if metrics is None else parse_listen(metrics, "--metrics"))
        problem = cfg.tls_problem()
        if problem:
            raise click.UsageError(problem)
        log = setup_logging(loglevel)
        store = context.open_store(obj)
        if allow_no_password and not requirepass and (plain or tls_open):
            log.warning("serving TCP without a password (--allow-no-password): every user of this machine can read, "
                        "write and delete this store")
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
