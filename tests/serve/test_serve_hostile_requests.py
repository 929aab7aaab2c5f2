"""xs serve against hostile requests (issue 37): a few bytes that would
make the server allocate or work a lot, and connections that hold
descriptors without ever becoming clients.  Each test measures the PING
latency another client sees meanwhile: the bounds are far above what a
loaded machine shows (milliseconds) and far below the stalls these
requests caused (seconds, or no reply at all)."""
import resource
import shutil
import signal
import socket
import ssl
import threading
import time

import pytest
from test_serve_tls import certs  # noqa: F401  (the fixture)

from tests.harness.served import Served, free_port

STALL_S = 2.0          # the longest a PING may wait here (ms when all is well); the stalls were 4 s to minutes


class Pinger:
    """A client that PINGs in a loop (a thread) and keeps each reply's
    latency; a PING not answered in 20 s ends it (``stalled``)."""

    def __init__(self, port, password=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        if password is not None:
            self.sock.sendall(b"AUTH %s\r\n" % password)
            assert self.sock.recv(100) == b"+OK\r\n"
        self.lat = []
        self.stalled = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            self.sock.sendall(b"PING\r\n")
            got = b""
            try:
                while not got.endswith(b"\r\n"):
                    chunk = self.sock.recv(100)
                    assert chunk, "the server closed the PING client"
                    got += chunk
            except socket.timeout:
                self.stalled = True
                self.lat.append(time.monotonic() - t)
                return
            assert got == b"+PONG\r\n", got
            self.lat.append(time.monotonic() - t)
            time.sleep(0.005)

    def finish(self):
        self.stop.set()
        self.thread.join(30)
        self.sock.close()
        assert not self.stalled, "a PING waited over 20 s"
        assert len(self.lat) >= 10, self.lat
        return max(self.lat)


def _reply_then_close(sock, timeout=20):
    """Everything the server sends until it closes (None: it did not close
    within ``timeout``)."""
    sock.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return got
            got += chunk
    except ConnectionResetError:
        return got
    except socket.timeout:
        return None


# ------------------------------------------------- item 4: huge headers

HEADERS = [
    (b"*2147483647\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*1048577\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*1\r\n$4\r\nPING\r\n*2147483647\r\n", b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"),
    (b"*1\r\n*2147483647\r\n", b"-ERR Protocol error: expected '$', got '*'\r\n"),
    (b"*1\r\n~2147483647\r\n", b"-ERR Protocol error: expected '$', got '~'\r\n"),
    (b"*1\r\n$2147483647\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
    (b"*2\r\n$4\r\nECHO\r\n$536870913\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
]


@pytest.mark.parametrize("pure", [False, True], ids=["native", "pure"])
def test_a_huge_multibulk_or_bulk_header_is_refused_at_once_and_stalls_nobody(tmp_path, pure):
    """13 bytes (``*2147483647``) made hiredis make a list of 2**31 slots,
    and dropping it froze the loop for seconds.  The counts and lengths
    are checked first, as redis-server checks them: the error, the
    connection closed, other clients unaffected."""
    s = Served(tmp_path / "store", env={"XS_SERVE_PURE": "1"} if pure else None)
    try:
        pinger = Pinger(s.port)
        time.sleep(0.2)
        conns = []
        for header, _ in HEADERS * 2:
            c = socket.create_connection(("127.0.0.1", s.port), timeout=20)
            c.sendall(header)
            conns.append(c)
        got = [_reply_then_close(c) for c in conns]
        time.sleep(0.3)
        worst = pinger.finish()
        for c in conns:
            c.close()
        assert got == [want for _, want in HEADERS * 2]
        assert worst < STALL_S, "a PING waited %.2f s" % worst
        assert s.client().ping()
    finally:
        s.stop(signal.SIGKILL)


# ---------------------------------------- item 7: floods before AUTH

def test_an_unauthenticated_inline_flood_is_cut_off_and_other_clients_go_on(tmp_path):
    """A client that never AUTHs and streams 2 MB of inline PINGs is
    closed, as redis-server closes an unauthenticated client whose query
    buffer passes 1 MB or whose replies pile up; an authenticated client
    goes on at its usual pace meanwhile."""
    s = Served(tmp_path / "store", "--requirepass", "pw")
    try:
        pinger = Pinger(s.port, b"pw")
        blob = b"PING\n" * ((2 << 20) // 5)
        stop = time.monotonic() + 3
        outcomes = []

        def flood():
            while time.monotonic() < stop:
                f = socket.create_connection(("127.0.0.1", s.port), timeout=20)
                got = []
                reader = threading.Thread(target=lambda: got.append(_reply_then_close(f, 30)), daemon=True)
                reader.start()
                try:
                    while time.monotonic() < stop:
                        f.sendall(blob)
                    f.shutdown(socket.SHUT_WR)
                except OSError:
                    pass                              # closed by the server
                reader.join(40)
                outcomes.append(got[0] if got else None)
                f.close()
        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
        flooder.join(60)
        worst = pinger.finish()
        assert outcomes and None not in outcomes, "a flooding connection was not closed"
        assert all(set(o.split(b"\r\n")) <= {b"-NOAUTH Authentication required.", b""} for o in outcomes)
        assert worst < STALL_S, "a PING waited %.2f s" % worst
        assert "reached max query buffer length" in s.log()
    finally:
        s.stop(signal.SIGKILL)


def test_before_auth_a_long_pipeline_is_answered_up_to_a_bound_then_closed(tmp_path):
    """Redis closes a client that never authenticated once its replies
    pile up; xs answers 512 NOAUTH errors to one pipeline, then closes.  A
    short pipeline, or one that AUTHs early, is answered in full."""
    s = Served(tmp_path / "store", "--requirepass", "pw")
    try:
        c = socket.create_connection(("127.0.0.1", s.port), timeout=20)
        c.sendall(b"PING\r\n" * 600)
        got = _reply_then_close(c)
        assert got == b"-NOAUTH Authentication required.\r\n" * 512
        c.close()
        c = socket.create_connection(("127.0.0.1", s.port), timeout=20)
        c.sendall(b"PING\r\n" * 3 + b"AUTH pw\r\n" + b"PING\r\n" * 2000 + b"QUIT\r\n")
        got = _reply_then_close(c)
        assert got == b"-NOAUTH Authentication required.\r\n" * 3 + b"+OK\r\n" + b"+PONG\r\n" * 2000 + b"+OK\r\n"
        c.close()
        assert "over 512 commands refused before AUTH" in s.log()
    finally:
        s.stop(signal.SIGKILL)


# ------------------------------------- item 6: TLS handshakes count

def _tls_ping(port, cert_dir, timeout=20):
    """A TLS client with a certificate: its reply to PING."""
    ctx = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
    ctx.load_cert_chain(str(cert_dir / "client.crt"), str(cert_dir / "client.key"))
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as t:
        t.sendall(b"PING\r\n")
        got = b""
        while not got.endswith(b"\r\n"):
            chunk = t.recv(100)
            if not chunk:
                break
            got += chunk
        return got


def _open_half(port, n, out):
    """Open ``n`` TCP connections that never send a byte (in rounds the
    listen backlog holds, each connected before the next: no SYN is
    retried later); stops early if the server no longer accepts."""
    import select
    while len(out) < n:
        batch = []
        for _ in range(min(25, n - len(out))):
            h = socket.socket()
            h.setblocking(False)
            h.connect_ex(("127.0.0.1", port))
            batch.append(h)
        out += batch
        deadline = time.monotonic() + 2
        while batch and time.monotonic() < deadline:
            _, done, _ = select.select([], batch, [], max(0.0, deadline - time.monotonic()))
            batch = [h for h in batch if h not in done]
        if batch:
            return


def _fds(pid):
    import os
    return len(os.listdir("/proc/%d/fd" % pid))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_half_open_tls_connections_count_as_clients_and_time_out(tmp_path, certs):  # noqa: F811
    """Connections that never send a ClientHello held a descriptor each
    for 10 s without counting against maxclients: 300 of them under a 256
    descriptor limit left none, and clients got "Too many open files".
    They count from accept now, at most so many handshakes are under way
    (the oldest gives way), and each has 5 s: a real TLS client is served,
    a plain one's blocking read works, and the half-open ones are closed."""
    tls_port = free_port()
    s = Served(tmp_path / "store", "--tls-port", str(tls_port), "--tls-cert-file", str(certs / "server.crt"),
               "--tls-key-file", str(certs / "server.key"), "--tls-ca-cert-file", str(certs / "ca.crt"))
    half_open = []
    try:
        if _fds(s.proc.pid) > 150:
            pytest.skip("the server holds too many descriptors already")
        # what `ulimit -n 256` at start would give: maxclients (256 - 64) // 5
        resource.prlimit(s.proc.pid, resource.RLIMIT_NOFILE, (256, resource.prlimit(s.proc.pid,
                                                                                     resource.RLIMIT_NOFILE)[1]))
        plain = s.client(socket_timeout=20)
        assert plain.config_set("maxclients", (256 - 64) // 5)
        assert _tls_ping(tls_port, certs) == b"+PONG\r\n"
        _open_half(tls_port, 300, half_open)
        time.sleep(0.5)
        t0 = time.monotonic()
        assert _tls_ping(tls_port, certs) in (b"+PONG\r\n", b"-ERR max number of clients reached\r\n")
        assert plain.xread({"quiet": "$"}, block=10) in (None, [], {})   # a blocking read needs descriptors
        assert plain.ping()
        # the half-open ones are closed: given way or timed out (5 s)
        for h in half_open:
            h.setblocking(True)
            left = 20 - (time.monotonic() - t0)
            assert left > 0, "half-open TLS connections were kept over 20 s"
            assert _reply_then_close(h, left) is not None, "a half-open TLS connection was kept"
        assert _tls_ping(tls_port, certs) == b"+PONG\r\n"
        log = s.log()
        assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]
    finally:
        for h in half_open:
            h.close()
        s.stop(signal.SIGKILL)
