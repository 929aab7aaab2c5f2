"""A running ``xs serve`` for tests: on a free loopback port (or the Unix
socket given with --unixsocket), started from this checkout, stopped by
``stop()``.  Its output (a debug log: a line per connection) goes to an
unnamed file read by ``log()``, never to a pipe: a pipe nobody reads
fills up after some hundreds of connections, and then the server's next
log line blocks its event loop, as it would any server's."""
import os
import signal
import socket
import subprocess
import tempfile
import time

from conftest import ROOT, XS


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Served:
    """``xs --db DB serve ARGS`` (TCP without a password unless ARGS ask
    for one: the tests' own choice); ``argv``: a whole command line
    instead (a documented example), whose port must be ``port``."""

    def __init__(self, db, *args, port=None, env=None, argv=None, loglevel="debug"):
        self.db = str(db)
        self.port = port or free_port()
        e = dict(os.environ)
        e.update(env or {})
        self.args = list(args)
        if argv is None:
            argv = XS + ["--db", self.db, "serve", "--loglevel", loglevel] + self.args
            if "--unixsocket" not in args:
                argv += ["--port", str(self.port)]
                if "--requirepass" not in args and "--requirepass-file" not in args:
                    argv.append("--allow-no-password")
        self.output = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdout=self.output, stderr=subprocess.STDOUT, cwd=ROOT, env=e)
        self.sock = args[args.index("--unixsocket") + 1] if "--unixsocket" in args else None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("xs serve exited: %s" % self.log())
            try:
                if self.sock:
                    c = socket.socket(socket.AF_UNIX)
                    c.connect(self.sock)
                else:
                    c = socket.create_connection(("127.0.0.1", self.port), timeout=1)
                c.close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop(signal.SIGKILL)
        raise AssertionError("xs serve did not start: %s" % self.log())

    @property
    def url(self):
        return "redis://127.0.0.1:%d" % self.port

    def client(self, protocol=2, **kw):
        import redis
        if self.sock:
            return redis.Redis(unix_socket_path=self.sock, protocol=protocol, **kw)
        return redis.Redis(port=self.port, protocol=protocol, **kw)

    def log(self):
        """What the server has written so far (its log)."""
        self.output.seek(0)
        return self.output.read().decode("utf-8", "replace")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def wire(*commands):
    """The RESP requests of ``commands`` (each a sequence of arguments:
    bytes, or anything else as its text), as a client sends them."""
    out = []
    for argv in commands:
        out.append(b"*%d\r\n" % len(argv))
        for a in argv:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def raw(port, data, expect_close=False, timeout=5):
    """Send raw bytes; the bytes received until the reply stops (or EOF)."""
    c = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    c.sendall(data)
    out = b""
    c.settimeout(0.5)
    try:
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            out += chunk
    except socket.timeout:
        assert not expect_close, "the server did not close the connection"
    c.close()
    return out
