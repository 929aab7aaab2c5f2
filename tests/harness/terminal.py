"""A pseudo-terminal for tests of what a person at a terminal sees."""
import os
import pty
import select
import subprocess
import time

from tests.conftest import ROOT


def stderr_on_pty(argv, stdin=None, timeout=60, columns=120, capture_stdout=False):
    """Run ``argv`` (from the repository root) with stderr on a
    pseudo-terminal, as a person at a terminal who pipes stdout away;
    returns (status, what the terminal showed, stdout text or None)."""
    master, slave = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(columns))
    env.pop("XS_NO_PROGRESS", None)
    p = subprocess.Popen(argv, cwd=ROOT, stdin=stdin if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    shown = []
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:          # EIO: the terminal's last user is gone
                    break
                if not data:
                    break
                shown.append(data)
            elif p.poll() is not None:
                break
        status = p.wait(timeout=max(1, end - time.monotonic()))
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    out = p.stdout.read().decode() if capture_stdout else None
    return status, b"".join(shown).decode("utf-8", "replace"), out
