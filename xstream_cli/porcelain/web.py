"""xs web: a live web page of the store, served by xs itself.

    xs web [--listen [HOST:]PORT] [-i SEC] [--history MIN]
           [--requirepass-file FILE] [--tls-cert-file FILE --tls-key-file FILE [--tls-ca-cert-file FILE]]

Streams (length, rate, last entry age), per stream a browser of its
entries (pages, a jump to an ID or a time; fields as xs tail shows
them), groups and consumers with their lag in entries and seconds,
pending entries with idle time and delivery count, dead letters with a
re-drive button (it asks first, then does what xs redrive does), a
small lag and rate chart per group over the last minutes, and a live
tail of one stream.  Updates arrive over server-sent events within a
moment of each commit (the store's own wake-ups, as xs tail -f waits),
and every -i SEC anyway.

Private by default: it listens on 127.0.0.1 (any free port unless
--listen says which), and prints on stdout a URL holding a random token,
as Jupyter does; without the token every request is answered 403.  A
--listen address that is not loopback is refused unless a password
(--requirepass-file: HTTP Basic authentication, besides the token) or
TLS (--tls-cert-file and --tls-key-file) is given, named as xs serve's.
Nothing is written to the store except by the re-drive button.

The HTTP side is xstream_cli.web.server (aiohttp, the ``web`` extra),
imported only here, when the command runs.  SIGTERM ends it with 0,
Ctrl-C with 130, without a traceback.  A missing store is an error
(exit 1), as for every read.
"""
import sys

import click

from xstream_cli import context


def _refuse_exposed(listen, host, password_file, tls):
    """A --listen address others can reach needs a password or TLS."""
    from xstream_cli.web.server import is_loopback
    if is_loopback(host) or password_file or tls:
        return
    context.fail("--listen %s is not a loopback address: anyone who can reach it could read this store (and "
                 "re-drive its dead letters) with the URL's token alone; give --requirepass-file FILE or "
                 "--tls-cert-file FILE --tls-key-file FILE, or listen on 127.0.0.1" % listen, context.EXIT_USAGE)


def run_web(g, listen, interval, history, password_file, tls_cert_file, tls_key_file, tls_ca_cert_file):
    try:
        from xstream_cli.web import server
    except ImportError as e:
        context.fail("xs web needs aiohttp (%s): pip install 'xstreamlog[web]'" % e)
    from xstream_cli.porcelain.metrics import parse_listen
    host, port = parse_listen(listen) if listen is not None else ("127.0.0.1", 0)
    if host == "localhost":
        host = "127.0.0.1"
    if bool(tls_cert_file) != bool(tls_key_file):
        context.fail("--tls-cert-file and --tls-key-file go together", context.EXIT_USAGE)
    if tls_ca_cert_file and not tls_cert_file:
        context.fail("--tls-ca-cert-file goes with --tls-cert-file and --tls-key-file", context.EXIT_USAGE)
    _refuse_exposed(listen, host, password_file, bool(tls_cert_file))
    password = None
    if password_file:
        try:
            with open(password_file, "rb") as f:
                password = f.readline().rstrip(b"\r\n")
        except OSError as e:
            context.fail("cannot read %s: %s" % (password_file, e.strerror))
        if not password:
            context.fail("%s holds no password" % password_file)
    ctx = None
    if tls_cert_file:
        import ssl
        try:
            ctx = server.ssl_context(tls_cert_file, tls_key_file, tls_ca_cert_file)
        except (OSError, ssl.SSLError) as e:
            context.fail("TLS: cannot use %s / %s: %s" % (tls_cert_file, tls_key_file, e))
    # opened as xs tail -f opens it: writable when it may be (the wake-ups
    # need the store's notification files), never created
    store = context.open_store(g, create=False)
    cfg = server.Config(context.db_path(g), host, port, interval, history * 60.0, password, ctx)

    def say(url):
        try:
            sys.stderr.write("xs web: serving %s (Ctrl-C to stop); open:\n" % cfg.path)
            sys.stderr.flush()
            sys.stdout.write(url + "\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    try:
        return server.run(cfg, store, say, context.fail)
    except KeyboardInterrupt:
        return context.EXIT_INTERRUPTED
    finally:
        store.close()


def register(cli):
    @cli.command("web")
    @click.option("--listen", metavar="[HOST:]PORT",
                  help="Where to listen (default 127.0.0.1, any free port; a bare PORT is 127.0.0.1).  An "
                       "address that is not loopback needs --requirepass-file or TLS.")
    @click.option("-i", "--interval", type=float, default=1.0, show_default=True, metavar="SEC",
                  help="Seconds between two overviews without commits (ages, lag seconds, chart samples).")
    @click.option("--history", type=float, default=10.0, show_default=True, metavar="MIN",
                  help="Minutes of lag and rate the charts keep.")
    @click.option("--requirepass-file", "--password-file", "password_file", type=click.Path(dir_okay=False),
                  metavar="FILE",
                  help="Also ask for this password (first line of FILE; HTTP Basic, any user name).")
    @click.option("--tls-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="Serve HTTPS with this certificate (PEM).")
    @click.option("--tls-key-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="The certificate's private key (PEM).")
    @click.option("--tls-ca-cert-file", type=click.Path(dir_okay=False), metavar="FILE",
                  help="Require client certificates signed by this CA (PEM).")
    @click.pass_obj
    def web(obj, listen, interval, history, password_file, tls_cert_file, tls_key_file, tls_ca_cert_file):
        """Serve a live web page of the store (streams, groups, entries, dead letters).

        \b
        Streams with their length, rate and last entry age; per stream
        its entries (pages, jump to an ID or a time), groups, consumers,
        lag in entries and seconds, pending entries, dead letters with a
        re-drive button (it asks first; then what xs redrive does), a
        lag and rate chart per group, and a live tail.  Updates within
        a moment of each commit (server-sent events).
        \b
        Listens on 127.0.0.1 and prints a URL with a random token on
        stdout; without it every request is 403.  A non-loopback
        --listen needs --requirepass-file or --tls-cert-file and
        --tls-key-file.  Writes nothing but what the re-drive button
        does.  SIGTERM exits 0, Ctrl-C 130.  Needs the web extra:
        pip install 'xstreamlog[web]'.
        \b
        xs web &
        xs web -i 5 --history 30 &
        """
        if not interval > 0:
            raise click.BadParameter("must be above 0", param_hint="'-i' / '--interval'")
        if not history > 0:
            raise click.BadParameter("must be above 0", param_hint="'--history'")
        g = obj or context.Globals()
        try:
            code = run_web(g, listen, interval, history, password_file, tls_cert_file, tls_key_file,
                           tls_ca_cert_file)
        except KeyboardInterrupt:
            code = context.EXIT_INTERRUPTED
        sys.exit(code)
