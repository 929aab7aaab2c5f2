"""xs worker's watchdog (xstream_cli/porcelain/worker/watchdog.py), a
program of its own: started on a socket, it starts each command it is
sent with the descriptors sent along, answers its pid and later its exit
status, and once the socket ends kills the process groups of the
commands still running.  Its request framing is a pure function."""
import os
import pickle
import signal
import socket
import subprocess
import sys
import time

from xstream_cli.porcelain.worker import watchdog
from xstream_cli.porcelain.worker.children import WATCHDOG


def start_watchdog():
    mine, its = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen([sys.executable, "-I", "-S", WATCHDOG], stdin=its, start_new_session=True)
    its.close()
    return proc, mine


def send(sock, argv):
    """Ask for ``argv``; returns (the answer pipe's read end, our ends of
    its stdin and stdout)."""
    msg = pickle.dumps((argv, dict(os.environ)))
    r_in, w_in = os.pipe()
    r_out, w_out = os.pipe()
    r_ans, w_ans = os.pipe()
    socket.send_fds(sock, [b"%d\n" % len(msg) + msg], [r_in, w_out, w_out, w_ans])
    for fd in (r_in, w_out, w_ans):
        os.close(fd)
    return r_ans, w_in, r_out


def lines(fd, n, timeout=10):
    buf, end = b"", time.monotonic() + timeout
    while buf.count(b"\n") < n and time.monotonic() < end:
        chunk = os.read(fd, 100)
        if not chunk:
            break
        buf += chunk
    return buf.split(b"\n")[:n]


def test_requests_are_split_off_whole_with_four_descriptors_each():
    buf = b"3\nabc5\nhello2\nx"
    done, rest, fds = watchdog.requests(buf, [1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert done == [(b"abc", [1, 2, 3, 4]), (b"hello", [5, 6, 7, 8])]
    assert (rest, fds) == (b"2\nx", [9])


def test_the_watchdog_starts_a_command_and_answers_its_pid_then_its_status():
    proc, sock = start_watchdog()
    try:
        ans, w_in, r_out = send(sock, ["sh", "-c", "read x; echo got $x; exit 3"])
        os.write(w_in, b"hi\n")
        os.close(w_in)
        pid, rc = lines(ans, 2)
        assert int(pid) > 0 and rc == b"3"
        assert os.read(r_out, 100) == b"got hi\n"
    finally:
        sock.close()
        assert proc.wait(10) == 0


def test_a_command_that_cannot_start_is_answered_with_why():
    proc, sock = start_watchdog()
    try:
        ans, _, _ = send(sock, ["/nonexistent/cmd"])
        assert lines(ans, 1)[0].startswith(b"!")
    finally:
        sock.close()
        proc.wait(10)


def test_when_the_worker_goes_the_commands_still_running_die_with_their_groups():
    proc, sock = start_watchdog()
    ans, _, _ = send(sock, ["sh", "-c", "sleep 60 & sleep 60"])
    pid = int(lines(ans, 1)[0])
    sock.close()                                   # what the kernel does when the worker is SIGKILLed
    assert proc.wait(10) == 0
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.killpg(pid, signal.SIGKILL)
        raise AssertionError("the command's group outlived the worker")
