"""The HTTP side of xs web: aiohttp (the ``web`` extra), imported only
by ``xs web``.

Private by default.  Every request -- the page, its two static files,
the JSON API, the event stream -- must carry the token xs web printed:
as ``?token=`` (the first visit: answered with an HttpOnly,
SameSite=Strict cookie holding it, and a redirect that takes it out of
the address bar) or as that cookie; anything else is 403.  Tokens are
compared with hmac.compare_digest.  With ``--requirepass-file`` every
request also needs HTTP Basic authentication with that password (any
user name).  The one write, POST /api/redrive, also needs the page's
CSRF value in the ``X-XS-CSRF`` header (a value made for each page
load: a nonce and its HMAC under a secret of this process), and an
``Origin``, when the browser sends one, of this server: a form on
another site can neither read the value nor set the header.  Every
answer says ``Cache-Control: no-store`` and carries a Content Security
Policy allowing only this server's script and style, and no framing.

Live.  One watcher thread waits in storage.blocking's one wait loop
(``wait_until``: inotify on the streams' notification files, the way
``xs tail -f`` waits) and reads a new overview (xstream_cli.web.model)
when a commit wakes it -- at most every MIN_GAP_S, so a burst of
commits is one snapshot -- and every ``interval`` seconds anyway (ages
and lag in seconds grow without commits; the charts take a sample, and
a stream made since is watched from then on).  Each new overview is
sent to every open event stream (server-sent events); a page tailing a
stream also gets that stream's new entries.  The store is shared by the
watcher and the request threads through one lock (xs serve's
``StoreLock``): a compaction's request to step aside (storage.ops.compact) is honoured by
the watcher, between two snapshots, with no other transaction open.
"""
import asyncio
import base64
import hashlib
import hmac
import ipaddress
import json
import secrets
import signal
import socket
import threading
import time

from aiohttp import web

from storage.blocking import Cancelled, Canceller, wait_until
from storage.errors import RedisError
from storage.store import StoreError
from storage.txn import StoreFailure
from xstream_cli.web import model

MIN_GAP_S = 0.1           # at most this often a snapshot taken because a commit woke the watcher
PING_S = 15.0             # an event stream idle this long gets a comment (a gone client is noticed)
STATIC = {"app.js": "application/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


class Config:
    """What the command line chose."""

    def __init__(self, path, host, port, interval=1.0, history_s=600.0, password=None, ssl_context=None):
        self.path = path
        self.host, self.port = host, port
        self.interval = interval
        self.history_s = history_s
        self.password = password          # bytes, or None
        self.ssl_context = ssl_context
        self.token = secrets.token_urlsafe(32)
        self.secret = secrets.token_bytes(32)     # the CSRF values' HMAC key
        self.cookie = "xs_web"            # + the port, once known (cookies do not tell ports apart)


def is_loopback(host):
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def same(given, want):
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), want.encode("utf-8"))


# ------------------------------------------------------------------ the live overview, pushed

class Hub:
    """The last overview (as JSON text), and an event set at each new one."""

    def __init__(self):
        self.text = None
        self.seq = 0
        self.event = asyncio.Event()
        self.closing = False

    def publish(self, doc):
        self.text = json.dumps(doc)
        self.seq += 1
        self._ring()

    def close(self):
        self.closing = True
        self._ring()

    def _ring(self):
        ev, self.event = self.event, asyncio.Event()
        ev.set()


class Watcher(threading.Thread):
    """The thread that waits for commits (storage.blocking.wait_until)
    and reads the overview after each, and at each tick."""

    def __init__(self, store, overview, publish):
        super().__init__(name="xs-web-watcher", daemon=True)
        self.store, self.overview, self.publish = store, overview, publish
        self.cancel = Canceller()
        self.stopping = threading.Event()

    def stop(self):
        self.stopping.set()
        self.cancel.cancel()

    def run(self):
        interval = self.overview.interval
        next_tick = [time.monotonic() + interval]
        last = [time.monotonic()]
        keys: list = []

        def attempt(woken):
            now = time.monotonic()
            tick = now >= next_tick[0]
            if not tick and now - last[0] < MIN_GAP_S:
                if self.stopping.wait(MIN_GAP_S - (now - last[0])):
                    raise Cancelled()
                now = time.monotonic()
            if tick:
                while next_tick[0] <= now:
                    next_tick[0] += interval
            try:
                doc = self.overview.take(tick)
            except (StoreFailure, StoreError) as e:
                doc = {"error": str(e)}
            last[0] = time.monotonic()
            self.publish(doc)
            if self.overview.names != keys:
                return "rearm"            # a stream made or gone: watch the new set
            return None

        def next_wake():
            return max(0.0, next_tick[0] - time.monotonic())
        while not self.stopping.is_set():
            keys = list(self.overview.names)
            try:
                wait_until(self.store, keys, attempt, next_wake=next_wake, cancel=self.cancel)
            except Cancelled:
                return
            except (StoreFailure, StoreError, OSError) as e:
                self.publish({"error": str(e)})
                if self.stopping.wait(interval):
                    return


# ------------------------------------------------------------------ the application

def _static(name):
    from importlib import resources
    return (resources.files("xstream_cli.web") / "static" / name).read_bytes()


def make_app(cfg, store, overview, hub):
    """The aiohttp application (routes, guard)."""
    pages = {name: _static(name) for name in ("index.html",) + tuple(STATIC)}
    streams: set = set()

    def csrf_value():
        nonce = secrets.token_urlsafe(16)
        return nonce + "." + hmac.new(cfg.secret, nonce.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(value):
        nonce, _, mac = (value or "").partition(".")
        want = hmac.new(cfg.secret, nonce.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()
        return bool(nonce) and hmac.compare_digest(mac.encode("utf-8", "surrogateescape"), want.encode())

    def forbidden():
        return web.Response(status=403, text="403 forbidden: open the URL xs web printed (it holds the token)\n")

    @web.middleware
    async def guard(request, handler):
        if cfg.password is not None:
            ok = False
            auth = request.headers.get("Authorization", "")
            if auth[:6].lower() == "basic ":
                try:
                    _, _, pw = base64.b64decode(auth[6:].strip(), validate=True).partition(b":")
                    ok = hmac.compare_digest(pw, cfg.password)
                except (ValueError, TypeError):
                    ok = False
            if not ok:
                return web.Response(status=401, text="401: the password of --requirepass-file, please\n",
                                    headers={"WWW-Authenticate": 'Basic realm="xs web", charset="UTF-8"'})
        given = request.query.get("token")
        cookie = request.cookies.get(cfg.cookie)
        if given is not None and same(given, cfg.token):
            if request.method == "GET" and request.path == "/":
                query = {k: v for k, v in request.query.items() if k != "token"}
                resp = web.HTTPFound(request.rel_url.with_query(query))
                resp.set_cookie(cfg.cookie, cfg.token, httponly=True, samesite="Strict", path="/",
                                secure=cfg.ssl_context is not None)
                return resp
        elif cookie is None or not same(cookie, cfg.token):
            return forbidden()
        return await handler(request)

    async def on_prepare(request, response):
        response.headers["Cache-Control"] = "no-store"
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"

    loop_run = asyncio.get_running_loop().run_in_executor

    async def call(fn, *args):
        """Run a store read (or the re-drive) in a thread; errors as JSON."""
        try:
            return web.json_response(await loop_run(None, fn, *args))
        except model.BadRequest as e:
            return web.json_response({"error": str(e)}, status=400)
        except model.NotFound as e:
            return web.json_response({"error": str(e)}, status=404)
        except RedisError as e:
            return web.json_response({"error": e.text}, status=409)
        except (StoreFailure, StoreError) as e:
            return web.json_response({"error": str(e)}, status=503)

    async def index(request):
        import html as escape
        page = pages["index.html"].replace(b"{{CSRF}}", csrf_value().encode())
        page = page.replace(b"{{STORE}}", escape.escape(cfg.path).encode("utf-8", "surrogateescape"))
        return web.Response(body=page, content_type="text/html", charset="utf-8")

    async def static(request):
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        return web.Response(body=pages[name], headers={"Content-Type": STATIC[name]})

    async def api_overview(request):
        if hub.text is None:
            return web.json_response({"error": "no overview yet"}, status=503)
        return web.Response(text=hub.text, content_type="application/json")

    async def api_history(request):
        return web.json_response(overview.history_doc())

    def q(request, name):
        v = request.query.get(name)
        return None if v in (None, "") else v

    async def api_stream(request):
        return await call(lambda: model.stream_detail(store, model.name_of(request.query.get("key"))))

    async def api_entries(request):
        def read():
            name = model.name_of(request.query.get("key"))
            count = model.count_of(q(request, "count"))
            kw = {}
            if q(request, "time") is not None:
                try:
                    ms = int(float(request.query["time"]))
                except ValueError:
                    raise model.BadRequest("bad time %r (ms since 1970)" % request.query["time"])
                kw["at"] = (max(0, ms), 0)
            for arg in ("at", "after", "before"):
                if q(request, arg) is not None:
                    kw[arg] = model.parse_entry_id(request.query[arg])
            if q(request, "first"):
                kw["first"] = True
            return model.entries_page(store, name, count=count, **kw)
        return await call(read)

    async def api_pending(request):
        def read():
            after = q(request, "after")
            return model.pending_page(store, model.name_of(request.query.get("key")),
                                      model.name_of(request.query.get("group")),
                                      None if after is None else model.parse_entry_id(after),
                                      model.count_of(q(request, "count")))
        return await call(read)

    async def api_dead(request):
        def read():
            after = q(request, "after")
            return model.dead_letters_page(store, model.name_of(request.query.get("key")),
                                           None if after is None else model.parse_entry_id(after),
                                           model.count_of(q(request, "count")))
        return await call(read)

    async def api_redrive(request):
        if not csrf_ok(request.headers.get("X-XS-CSRF")):
            return web.json_response({"error": "missing or wrong CSRF value (reload the page)"}, status=403)
        origin = request.headers.get("Origin")
        if origin is not None and origin != "%s://%s" % (request.scheme, request.host):
            return web.json_response({"error": "cross-origin request refused"}, status=403)
        try:
            body = await request.json()
            dl = model.name_of(body.get("stream"))
            only = body.get("origins")
            only = None if not only else {model.name_of(k) for k in only}
        except (ValueError, AttributeError, TypeError, model.BadRequest):
            return web.json_response({"error": "want JSON {\"stream\": key, \"origins\": [key, ...]}"}, status=400)
        return await call(model.redrive, store, dl, only)

    async def api_events(request):
        """Server-sent events: ``overview`` at each new one (the latest
        only: a slow page skips), ``history`` first, and with ``tail=KEY``
        that stream's new entries (``tail``)."""
        tail = q(request, "tail")
        name = None if tail is None else model.name_of(tail)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"})
        await resp.prepare(request)
        task = asyncio.current_task()
        streams.add(task)

        async def send(event, data):
            await resp.write(("event: %s\ndata: %s\n\n" % (event, data)).encode("utf-8"))
        try:
            await send("history", json.dumps(overview.history_doc()))
            pos = None
            if name is not None:
                ents, pos = await loop_run(None, model.entries_after, store, name, None, 20)
                await send("tail", json.dumps({"reset": True, "entries": ents}))
            seen = -1
            while not hub.closing:
                if hub.seq == seen:
                    ev = hub.event
                    try:
                        await asyncio.wait_for(ev.wait(), PING_S)
                    except asyncio.TimeoutError:
                        await resp.write(b": ping\n\n")
                    continue
                seen = hub.seq
                await send("overview", hub.text)
                if name is not None:
                    try:
                        ents, new = await loop_run(None, model.entries_after, store, name, pos, model.MAX_PAGE)
                        if len(ents) >= model.MAX_PAGE:     # far behind: skip to the last entries
                            ents, new = await loop_run(None, model.entries_after, store, name, None, 100)
                            await send("tail", json.dumps({"reset": True, "skipped": True, "entries": ents}))
                        elif ents:
                            await send("tail", json.dumps({"entries": ents}))
                        pos = new
                    except (StoreFailure, StoreError):
                        pass
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            streams.discard(task)
        return resp

    async def on_shutdown(app):
        hub.close()

    app = web.Application(middlewares=[guard])
    app.on_response_prepare.append(on_prepare)
    app.on_shutdown.append(on_shutdown)
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/overview", api_overview)
    app.router.add_get("/api/history", api_history)
    app.router.add_get("/api/stream", api_stream)
    app.router.add_get("/api/entries", api_entries)
    app.router.add_get("/api/pending", api_pending)
    app.router.add_get("/api/dead", api_dead)
    app.router.add_get("/api/events", api_events)
    app.router.add_post("/api/redrive", api_redrive)
    return app


def _listening_socket(host, port):
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def url_of(cfg, port):
    host = cfg.host
    if host in ("0.0.0.0", "::"):
        host = socket.gethostname()
    elif ":" in host:
        host = "[%s]" % host
    return "%s://%s:%d/?token=%s" % ("https" if cfg.ssl_context is not None else "http", host, port, cfg.token)


async def _serve(cfg, store, overview, first, sock, say):
    """Serve until SIGINT or SIGTERM; returns the signal that ended it."""
    loop = asyncio.get_running_loop()
    hub = Hub()
    hub.publish(first)
    port = sock.getsockname()[1]
    cfg.cookie = "xs_web_%d" % port
    app = make_app(cfg, store, overview, hub)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.SockSite(runner, sock, ssl_context=cfg.ssl_context, shutdown_timeout=2.0)
    await site.start()
    stop: asyncio.Future = loop.create_future()

    def on_signal(signum):
        if not stop.done():
            stop.set_result(signum)
    for s in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(s, on_signal, s)
    def publish(doc):
        try:
            loop.call_soon_threadsafe(hub.publish, doc)
        except RuntimeError:          # the loop is closed: stopping
            pass
    watcher = Watcher(store, overview, publish)
    watcher.start()
    say(url_of(cfg, port))
    try:
        return await stop
    finally:
        watcher.stop()
        hub.close()
        await runner.cleanup()
        await loop.run_in_executor(None, watcher.join, 5.0)


def run(cfg, store, say, fail):
    """Serve ``store`` (opened by the caller) until SIGINT (returns 130)
    or SIGTERM (0).  ``say(url)`` once listening; ``fail(message)`` for
    a store that cannot be read or an address that cannot be had."""
    from xstream_cli.server.engine import StoreLock
    locked = StoreLock(store)
    overview = model.Overview(locked, cfg.interval, cfg.history_s)
    try:
        first = overview.take(True)
    except (StoreFailure, StoreError) as e:
        fail(str(e))
    try:
        sock = _listening_socket(cfg.host, cfg.port)
    except OSError as e:
        fail("--listen %s:%d: %s" % (cfg.host, cfg.port, e.strerror or e))
    signum = asyncio.run(_serve(cfg, locked, overview, first, sock, say))
    return 130 if signum == signal.SIGINT else 0


def ssl_context(cert, key, ca=None):
    """The TLS context of --tls-cert-file / --tls-key-file (and, with
    --tls-ca-cert-file, client certificates required); ssl.SSLError or
    OSError when the files will not do."""
    import ssl
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    if ca:
        ctx.load_verify_locations(ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx
