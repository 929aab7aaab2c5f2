"""xs's own write lock (storage.files.WRITE_BYTE, storage.store.hold_write):
every xs writer holds it around its write transaction, so xs serve can try
it.  While another process writes for seconds, the server goes on
answering PING and reads (its engine thread waits for the lock holding
nothing the loop needs), a write sent meanwhile is answered after that
writer's commit, and SIGTERM still ends the server within its drain time."""
import socket
import subprocess
import sys
import time

from storage import files
from storage.store import hold_write, release_write
from xstream_cli.context import open_path

HOLD_S = 5

HOLDER = r"""
import sys, time
from xstream_cli.context import open_path
store = open_path(sys.argv[1])
w = store.write()
tx = w.__enter__()
print("held", flush=True)
time.sleep(float(sys.argv[2]))
w.__exit__(None, None, None)
print("released", flush=True)
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(db, port):
    srv = subprocess.Popen([sys.executable, "-m", "xstream_cli", "--db", str(db), "serve", "--port", str(port),
                            "--allow-no-password"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while True:
        try:
            return srv, socket.create_connection(("127.0.0.1", port))
        except OSError:
            assert srv.poll() is None, srv.stderr.read().decode()
            assert time.monotonic() < deadline, "xs serve did not start"
            time.sleep(0.05)


def _call(conn, *args, timeout=30):
    conn.settimeout(timeout)
    conn.sendall(("*%d\r\n" % len(args) + "".join("$%d\r\n%s\r\n" % (len(a), a) for a in args)).encode())
    from xstream_cli.server.resp import reply_end
    buf = b""
    while reply_end(buf) < 0:
        chunk = conn.recv(65536)
        assert chunk, "connection closed"
        buf += chunk
    return buf


def _hold(db, seconds):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_the_write_lock_is_held_around_a_write_and_can_be_tried(tmp_path):
    store = open_path(str(tmp_path / "db"))
    try:
        holder = _hold(tmp_path / "db", 30)
        try:
            t = time.monotonic()
            assert hold_write(store, wait=False) is False          # another process writes: at once
            assert time.monotonic() - t < 0.5
        finally:
            holder.kill()
            holder.wait()
        assert hold_write(store, wait=False) is True                # its death gave the lock back
        assert hold_write(store, wait=False) is True                # re-entrant in this thread
        release_write(store)
        release_write(store)
        assert files.take_write_lock(store.lock_fd, wait=False)
        files.drop_write_lock(store.lock_fd)
    finally:
        store.close()


def test_pings_and_reads_are_answered_while_another_process_holds_the_write_lock(tmp_path):
    db = tmp_path / "db"
    port = _free_port()
    srv, conn = _serve(db, port)
    try:
        assert _call(conn, "XADD", "s", "1-1", "f", "v").startswith(b"$3\r\n1-1")
        holder = _hold(db, HOLD_S)
        started = time.monotonic()
        writer = socket.create_connection(("127.0.0.1", port))
        writer.sendall(b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n2-1\r\n$1\r\nf\r\n$1\r\nv\r\n")   # waits for the lock
        time.sleep(0.2)
        for _ in range(5):
            t = time.monotonic()
            assert _call(conn, "PING") == b"+PONG\r\n"
            assert b"1-1" in _call(conn, "XRANGE", "s", "-", "+")
            assert _call(conn, "XLEN", "s") == b":1\r\n"      # the XADD waits: not committed
            assert time.monotonic() - t < 1.0
        assert holder.poll() is None and time.monotonic() - started < HOLD_S
        writer.settimeout(HOLD_S + 20)
        assert writer.recv(100).startswith(b"$3\r\n2-1")     # after the other writer's commit
        assert time.monotonic() - started >= HOLD_S - 0.5
        assert holder.wait(10) == 0
        writer.close()
        assert _call(conn, "XLEN", "s") == b":2\r\n"
    finally:
        conn.close()
        srv.terminate()
        assert srv.wait(30) == 0
        err = srv.stderr.read().decode()
        assert "Traceback" not in err, err


def test_sigterm_ends_the_server_while_its_write_waits_for_another_process(tmp_path):
    db = tmp_path / "db"
    port = _free_port()
    srv, conn = _serve(db, port)
    holder = _hold(db, 60)
    try:
        conn.sendall(b"*5\r\n$4\r\nXADD\r\n$1\r\ns\r\n$3\r\n2-1\r\n$1\r\nf\r\n$1\r\nv\r\n")   # waits for the lock
        time.sleep(0.3)
        t = time.monotonic()
        srv.send_signal(15)
        rc = srv.wait(30)
        # the drain time (server.connection.DRAIN_S, 10 s), not the other writer's 60 s
        assert time.monotonic() - t < 15
        assert rc == 0, srv.stderr.read().decode()
    finally:
        holder.kill()
        holder.wait()
        conn.close()
        if srv.poll() is None:
            srv.kill()
            srv.wait()
    # nothing was written by the server: its XADD never had the lock
    store = open_path(str(db))
    try:
        with store.read() as tx:
            assert tx.length(b"s") == 0
    finally:
        store.close()
