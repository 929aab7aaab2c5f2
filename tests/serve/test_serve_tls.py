"""xs serve over TLS, with Redis's option names: redis-py (``ssl=True``)
and ``redis-cli --tls`` talk to it with a client certificate signed by
the CA the server trusts; a plain-text client, or a TLS client without a
certificate, on the TLS port gets nothing; ``--port 0`` serves TLS only.
The certificates are made at test time with the openssl command."""
import os
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
from test_serve import free_port

from conftest import ROOT, XS

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


def _openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """A CA, a server certificate for 127.0.0.1 / localhost and a client
    certificate, both signed by the CA (EC P-256: quick to make)."""
    d = tmp_path_factory.mktemp("tls")
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=xs test CA",
             cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for who in ("server", "client"):
        _openssl("req", *key, "-keyout", who + ".key", "-out", who + ".csr", "-subj", "/CN=xs test " + who, cwd=d)
        ext = ["-extfile", "server.ext"] if who == "server" else []
        _openssl("x509", "-req", "-in", who + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", who + ".crt", "-days", "2", *ext, cwd=d)
    return d


class TlsServed:
    def __init__(self, db, certs, *extra, port=None):
        self.port = free_port() if port is None else port
        self.tls_port = free_port()
        argv = XS + ["--db", str(db), "serve", "--port", str(self.port), "--tls-port", str(self.tls_port),
                     "--tls-cert-file", str(certs / "server.crt"), "--tls-key-file", str(certs / "server.key"),
                     "--tls-ca-cert-file", str(certs / "ca.crt"), "--allow-no-password"] + list(extra)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.tls_port), timeout=1).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("xs serve did not start: %s" % self.stop()[1])
                time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err.decode()


def _client(srv, certs, **kw):
    return redis.Redis(port=srv.tls_port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                       ssl_certfile=str(certs / "client.crt"), ssl_keyfile=str(certs / "client.key"), **kw)


def test_redis_py_and_redis_cli_talk_tls_with_a_client_certificate(tmp_path, certs):
    srv = TlsServed(tmp_path / "store", certs)
    try:
        r = _client(srv, certs)
        assert r.xadd("events", {"user": "alice"}, id="1-1") == b"1-1"
        assert _client(srv, certs, protocol=3).xrange("events") == [(b"1-1", {b"user": b"alice"})]
        if shutil.which("redis-cli"):
            p = subprocess.run(["redis-cli", "--tls", "--cacert", str(certs / "ca.crt"), "--cert",
                                str(certs / "client.crt"), "--key", str(certs / "client.key"), "-p",
                                str(srv.tls_port), "XLEN", "events"], capture_output=True, timeout=30)
            assert p.stdout == b"1\n", p.stderr
        plain = redis.Redis(port=srv.port)            # the plain port serves the same store
        assert plain.xlen("events") == 1
    finally:
        code, err = srv.stop()
    assert code == 0, err


def test_the_spark_url_mode_s_wire_reads_and_writes_over_rediss_with_a_client_certificate(tmp_path, certs):
    """storage.spark.network (what the data source's executors and xs
    archive --url use): a rediss:// endpoint with redis-py's TLS query
    options."""
    from storage.spark.network import NetworkError, parse_endpoints
    srv = TlsServed(tmp_path / "store", certs)
    try:
        tls = "ssl_ca_certs=%s&ssl_certfile=%s&ssl_keyfile=%s" % (certs / "ca.crt", certs / "client.crt",
                                                                 certs / "client.key")
        (ep,) = parse_endpoints("rediss://127.0.0.1:%d/?%s" % (srv.tls_port, tls))
        with ep.connect() as conn:
            assert conn.add_block([(b"ev:tls", "1-1", [b"n", b"1"], ((1, 1), True)),
                                   (b"ev:tls", None, [b"n", b"2"], None)], set()) == 2
            assert conn.stream_names(b"ev:*") == [b"ev:tls"]
            pages = list(conn.pages(b"ev:tls", (0, 0), ((1 << 64) - 1, (1 << 64) - 1), 1))
            assert [[bytes(f) for f in e[1]] for page in pages for e in page] == [[b"n", b"1"], [b"n", b"2"]]
        (no_cert,) = parse_endpoints("rediss://127.0.0.1:%d/?ssl_ca_certs=%s" % (srv.tls_port, certs / "ca.crt"))
        with pytest.raises(NetworkError, match="127.0.0.1:%d" % srv.tls_port):
            no_cert.connect().call("PING")      # the server wants a client certificate
    finally:
        code, err = srv.stop()
    assert code == 0, err


def test_a_plain_text_client_or_one_without_a_certificate_gets_nothing_on_the_tls_port(tmp_path, certs):
    srv = TlsServed(tmp_path / "store", certs)
    try:
        c = socket.create_connection(("127.0.0.1", srv.tls_port), timeout=10)
        c.sendall(b"PING\r\nXADD s * a 1\r\n")
        got = b""
        try:
            while True:
                chunk = c.recv(4096)
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, socket.timeout):
            pass
        assert b"PONG" not in got and not got.startswith(b"+") and not got.startswith(b"$")
        c.close()
        anonymous = redis.Redis(port=srv.tls_port, ssl=True, ssl_ca_certs=str(certs / "ca.crt"),
                                socket_timeout=10)
        with pytest.raises((redis.ConnectionError, ssl.SSLError, OSError)):
            anonymous.ping()
        assert _client(srv, certs).xlen("s") == 0       # neither wrote anything
    finally:
        code, err = srv.stop()
    assert code == 0, err


def test_port_0_with_a_tls_port_serves_tls_only(tmp_path, certs):
    srv = TlsServed(tmp_path / "store", certs, port=0)
    try:
        assert _client(srv, certs).ping()
        assert _client(srv, certs).config_get("port") == {"port": "0"}
    finally:
        code, err = srv.stop()
    assert code == 0
    assert "ready to accept TLS connections" in err and "ready to accept connections on" not in err, err


def test_tls_options_that_cannot_work_are_usage_errors(tmp_path, certs):
    base = XS + ["--db", str(tmp_path / "store"), "serve", "--tls-port", str(free_port())]
    p = subprocess.run(base, capture_output=True, timeout=30, cwd=ROOT)
    assert p.returncode == 2 and b"--tls-port needs --tls-cert-file and --tls-key-file" in p.stderr
    p = subprocess.run(base + ["--tls-cert-file", str(certs / "server.crt"), "--tls-key-file",
                               str(certs / "server.key")], capture_output=True, timeout=30, cwd=ROOT)
    assert p.returncode == 2 and b"--tls-auth-clients yes needs --tls-ca-cert-file" in p.stderr
    p = subprocess.run(base + ["--tls-cert-file", str(certs / "ca.key"), "--tls-key-file", str(certs / "server.key"),
                               "--tls-auth-clients", "no", "--allow-no-password"], capture_output=True, timeout=30,
                       cwd=ROOT)
    last = p.stderr.decode().splitlines()[-1]
    assert p.returncode == 1 and last.startswith("xs: cannot serve: TLS: ") and "Traceback" not in p.stderr.decode()


def test_the_docs_tls_lines_run_as_written(tmp_path, certs):
    """docs/serve.md's two TLS lines, run in a directory holding the files
    they name (the port changed to a free one)."""
    doc = open(os.path.join(ROOT, "docs", "serve.md"), encoding="utf-8").read()
    serve_line = ("xs serve --port 0 --tls-port 6380 --tls-cert-file server.crt --tls-key-file server.key "
                  "--tls-ca-cert-file ca.crt")
    cli_line = "redis-cli --tls --cacert ca.crt --cert client.crt --key client.key -p 6380 XLEN events"
    assert serve_line in doc and cli_line in doc
    port = str(free_port())
    argv = shlex.split(serve_line.replace("6380", port))
    proc = subprocess.Popen(XS + ["--db", str(tmp_path / "store")] + argv[1:], cwd=certs, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", int(port)), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
                time.sleep(0.05)
        if shutil.which("redis-cli"):
            p = subprocess.run(shlex.split(cli_line.replace("6380", port)), cwd=certs, capture_output=True,
                               timeout=30)
            assert p.stdout == b"0\n", p.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_xs_replicate_feeds_a_replica_over_tls_with_a_client_certificate(tmp_path, certs):
    """``xs replicate --to rediss://`` with the option names xs serve uses
    (--tls-ca-cert-file, --tls-cert-file, --tls-key-file), to an xs serve
    on its TLS port: the full sync, then a commit after it."""
    srv = TlsServed(tmp_path / "replica", certs)
    db = tmp_path / "db"

    def xs(*args):
        return subprocess.run(XS + ["--db", str(db)] + list(args), cwd=ROOT, capture_output=True, timeout=60)
    assert xs("XADD", "events", "1-1", "user", "alice").returncode == 0
    p = subprocess.Popen(XS + ["--db", str(db), "replicate", "--to", "rediss://127.0.0.1:%d" % srv.tls_port,
                               "--tls-ca-cert-file", str(certs / "ca.crt"), "--tls-cert-file",
                               str(certs / "client.crt"), "--tls-key-file", str(certs / "client.key")],
                         cwd=ROOT, stderr=subprocess.PIPE)
    try:
        r = _client(srv, certs)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and r.xlen("events") < 1:
            time.sleep(0.05)
        assert xs("XADD", "events", "2-2", "user", "bob").returncode == 0
        while time.monotonic() < deadline and r.xlen("events") < 2:
            time.sleep(0.05)
        assert r.xrange("events") == [(b"1-1", {b"user": b"alice"}), (b"2-2", {b"user": b"bob"})]
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=30)
        code, log = srv.stop()
    assert p.returncode == 0 and b"full sync to rediss://127.0.0.1" in err, err
    assert code == 0, log
