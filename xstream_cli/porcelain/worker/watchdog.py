"""xs worker's watchdog: the process that starts the worker's commands.

Started once per worker, in a session of its own, as a program of its
own (``python -I -S watchdog.py``, the socket on its stdin): it imports
the standard library only, never xs.  It reads requests from a socket of
which only the worker holds the other end: ``LENGTH\\n``, then
``pickle.dumps((argv, env))``, sent with four descriptors (the command's
stdin, stdout and stderr, and a pipe for the answers: ``PID\\n`` or
``!why\\n``, then ``RC\\n`` once it reaped the command).  A command is in
its set before the watchdog reads anything more; when the socket ends
(the worker exited, or was SIGKILLed: the kernel closes its end either
way) it kills the process groups of the commands still running, so no
command outlives its worker (xstream_cli.porcelain.worker.children's
_Lifeline).
"""
import os
import pickle
import select
import signal
import socket
import subprocess
import sys


def tell(fd, line):
    """Write ``line`` to the answer pipe ``fd``; a reader gone is fine."""
    try:
        os.write(fd, line)
    except OSError:
        pass


def reap(running):
    """Answer ``RC\\n`` for each command of ``running`` ({Popen: answer
    fd}) that exited, and forget it."""
    for p, fd in list(running.items()):
        if p.poll() is not None:
            del running[p]
            tell(fd, b"%d\n" % p.returncode)
            os.close(fd)


def start(running, argv, env, io, answer):
    """Start ``argv`` in a session of its own with the descriptors ``io``
    (stdin, stdout, stderr); answer its pid (or ``!why``) on ``answer``."""
    try:
        p = subprocess.Popen(argv, stdin=io[0], stdout=io[1], stderr=io[2], env=env, start_new_session=True)
    except Exception as e:
        why = getattr(e, "strerror", None) or str(e) or type(e).__name__
        tell(answer, b"!" + why.encode("utf-8", "replace").replace(b"\n", b" ") + b"\n")
        os.close(answer)
    else:
        running[p] = answer
        tell(answer, b"%d\n" % p.pid)
    finally:
        for fd in io:
            os.close(fd)


def requests(buf, fds):
    """Split the complete requests off ``buf`` (bytes) and ``fds`` (the
    descriptors received so far): ([(message, four fds)], rest of buf,
    rest of fds)."""
    out = []
    while b"\n" in buf:
        head, rest = buf.split(b"\n", 1)
        if not head.isdigit() or len(rest) < int(head):
            break
        n = int(head)
        out.append((rest[:n], fds[:4]))
        buf, fds = rest[n:], fds[4:]
    return out, buf, fds


def serve(sock):
    """Start what the worker asks for until ``sock`` ends, then kill the
    process groups of the commands still running."""
    wake, bell = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(bell, False)
    signal.set_wakeup_fd(bell)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    running = {}
    buf, fds = b"", []
    while True:
        try:
            ready = select.select([sock, wake], [], [])[0]
        except InterruptedError:
            continue
        if wake in ready:
            try:
                os.read(wake, 4096)
            except OSError:
                pass
            reap(running)
        if sock not in ready:
            continue
        data, got, _, _ = socket.recv_fds(sock, 65536, 16)
        fds += got
        if not data:
            break
        buf += data
        done, buf, fds = requests(buf, fds)
        for msg, four in done:
            try:
                argv, env = pickle.loads(msg)
            except Exception:
                for fd in four:
                    os.close(fd)
                continue
            start(running, argv, env, four[:3], four[3])
    reap(running)
    for p in running:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass


def main():
    serve(socket.socket(fileno=sys.stdin.fileno()))


if __name__ == "__main__":
    main()
