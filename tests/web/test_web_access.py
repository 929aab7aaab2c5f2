"""Who may see xs web's page: only who holds the token it printed.  Every
route answers 403 without it (the page, its static files, the API, the
event stream), and with a wrong one; another local user (setpriv to
nobody) gets 403 too; a --listen address that is not loopback is
refused without a password or TLS.  And xs web ends cleanly on SIGTERM
(0) and Ctrl-C (130), refuses a missing store as every read does, and
writes nothing to the store while it shows it."""
import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import urllib.parse

import pytest

from conftest import ROOT, XS, run_xs
from tests.web._web import Web, hexkey, needs_aiohttp

pytestmark = needs_aiohttp

ROUTES = ["/", "/static/app.js", "/static/app.css", "/api/overview", "/api/history",
          "/api/stream?key=%s" % hexkey("events"), "/api/entries?key=%s" % hexkey("events"),
          "/api/pending?key=%s&group=%s" % (hexkey("events"), hexkey("g")), "/api/dead?key=%s" % hexkey("events"),
          "/api/events", "/nothing-here"]


def xs(db, *args, **kw):
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, cwd=ROOT, timeout=60, **kw)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    d = tmp_path_factory.mktemp("access") / "db"
    p = run_xs(d, ["XADD events 1-1 f v", "XADD events 1-2 f w", "XGROUP CREATE events g 0",
                   "XREADGROUP GROUP g c COUNT 1 STREAMS events >"])
    assert p.returncode == 0, p.stderr
    return d


@pytest.fixture(scope="module")
def web(db):
    w = Web(db)
    yield w
    code, err = w.stop()
    assert code == 0 and "Traceback" not in err, err


def request(web, path, headers=None, method="GET", body=None, read=True):
    """(status, headers, body) over one connection; an event stream is not read."""
    u = urllib.parse.urlsplit(web.base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        if r.getheader("Content-Type", "").startswith("text/event-stream"):
            return r.status, r.headers, r.readline()       # the first line only: the stream goes on
        return r.status, r.headers, r.read()
    finally:
        c.close()


def test_it_listens_on_loopback_and_prints_a_url_holding_a_random_token(web, db):
    assert web.base.startswith("http://127.0.0.1:")
    assert len(web.token) >= 40
    other = Web(db)
    try:
        assert other.token != web.token
    finally:
        assert other.stop()[0] == 0


def test_without_the_token_every_route_answers_403(web):
    for path in ROUTES:
        status, _, body = request(web, path)
        assert status == 403, (path, body)
        assert web.token.encode() not in body
        sep = "&" if "?" in path else "?"
        status, _, _ = request(web, path + sep + "token=" + web.token[:-1] + "x")
        assert status == 403, path
        status, _, _ = request(web, path + sep + "token=")
        assert status == 403, path
        status, _, _ = request(web, path, headers={"Cookie": "xs_web_%s=%s" % (web.base.rsplit(":", 1)[1],
                                                                              web.token[::-1])})
        assert status == 403, path
    status, _, _ = request(web, "/api/redrive", method="POST", body=b"{}", headers={"Content-Type": "application/json"})
    assert status == 403


def test_the_token_once_gives_an_httponly_strict_cookie_that_opens_every_route(web):
    status, headers, _ = request(web, "/?token=" + web.token)
    assert status == 302 and headers["Location"] == "/"           # the token leaves the address bar
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    pair = cookie.split(";", 1)[0]
    assert pair.split("=", 1)[1] == web.token
    for path in ROUTES[:-1]:
        status, headers, body = request(web, path, headers={"Cookie": pair})
        assert status == 200, (path, body)
        assert headers["Cache-Control"] == "no-store"
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    status, headers, first = request(web, "/api/events", headers={"Cookie": pair})
    assert status == 200 and first == b"event: history\n"
    assert json.loads(request(web, "/api/overview?token=" + web.token)[2])["groups"][0]["lag"] == 1
    assert request(web, "/nothing-here", headers={"Cookie": pair})[0] == 404


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("curl"),
                    reason="needs root, setpriv and curl (to ask as another user)")
def test_another_local_user_without_the_token_gets_403(web):
    for path in ("/", "/api/overview", "/api/events", "/static/app.js"):
        p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "curl", "-s",
                            "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", web.base + path],
                           capture_output=True, timeout=60)
        assert p.stdout == b"403", (path, p.stdout, p.stderr)


def test_browsing_writes_nothing_to_the_store(web, db):
    def last_txn():
        return json.loads(xs(db, "info", "--json").stdout)["last_txn"]
    before = last_txn()
    for path in ROUTES[1:-2]:
        assert web.get(path)[0] == 200, path
    assert web.get("/api/entries?key=%s&at=1-2" % hexkey("events"))[0] == 200
    assert last_txn() == before


def test_a_non_loopback_listen_needs_a_password_or_tls(db, tmp_path):
    for addr in ("0.0.0.0:0", "[::]:0", "192.0.2.1:8080", "example.com:80"):
        p = xs(db, "web", "--listen", addr)
        err = p.stderr.decode()
        assert p.returncode == 2 and p.stdout == b"", (addr, err)
        assert "not a loopback address" in err and "--requirepass-file" in err and "--tls-cert-file" in err, err
        assert "Traceback" not in err
    pw = tmp_path / "pw"
    pw.write_text("s3cret\n")
    w = Web(db, "--listen", "0.0.0.0:0", "--requirepass-file", str(pw))
    try:
        host_port = w.base.rsplit(":", 1)[1]
        w.base = "http://127.0.0.1:" + host_port
        assert w.get("/api/overview")[0] == 401                      # the token alone is not enough
        import base64
        auth = {"Authorization": "Basic " + base64.b64encode(b"any:s3cret").decode()}
        wrong = {"Authorization": "Basic " + base64.b64encode(b"any:guess").decode()}
        assert w.get("/api/overview", headers=wrong)[0] == 401
        assert w.get("/api/overview", headers=auth, token=False)[0] == 403   # nor the password alone
        assert w.get("/api/overview", headers=auth)[0] == 200
    finally:
        assert w.stop()[0] == 0


@pytest.mark.skipif(not shutil.which("openssl"), reason="openssl makes the test's certificate")
def test_tls_serves_https(db, tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    w = Web(db, "--listen", "0.0.0.0:0", "--tls-cert-file", str(cert), "--tls-key-file", str(key))
    try:
        assert w.url.startswith("https://")
        u = urllib.parse.urlsplit(w.base)
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        c = http.client.HTTPSConnection("127.0.0.1", u.port, timeout=30, context=ctx)
        c.request("GET", "/api/overview")
        assert c.getresponse().status == 403
        c.close()
        c = http.client.HTTPSConnection("127.0.0.1", u.port, timeout=30, context=ctx)
        c.request("GET", "/?token=" + w.token)
        r = c.getresponse()
        assert r.status == 302 and "Secure" in r.getheader("Set-Cookie")
        c.close()
    finally:
        assert w.stop()[0] == 0


def test_a_missing_store_is_an_error_and_is_not_made(tmp_path):
    db = tmp_path / "none"
    p = xs(db, "web")
    assert p.returncode == 1 and p.stderr.startswith(b"xs: ") and b"Traceback" not in p.stderr, p.stderr
    assert not db.exists()


# Ctrl-C: 130 for the shell, as every xs command: xs ends as killed by SIGINT
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 0), (signal.SIGINT, -signal.SIGINT)])
def test_sigterm_and_ctrl_c_end_it_cleanly(db, sig, code):
    w = Web(db)
    # an open event stream must not hold the exit up
    u = urllib.parse.urlsplit(w.base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", "/api/events?token=" + w.token)
    r = c.getresponse()
    assert r.readline() == b"event: history\n"
    got, err = w.stop(sig)
    c.close()
    assert got == code, err
    assert "Traceback" not in err and "Error" not in err, err
