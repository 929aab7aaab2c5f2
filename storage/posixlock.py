"""POSIX record locks (fcntl F_SETLK / F_GETLK) on a byte of a file:
who holds one, which flock(2) and ``fcntl.lockf`` cannot tell.

``struct flock`` is the kernel's layout (Linux: type, whence, start,
len, pid), not the store's, so it is packed here and not in the codec.
POSIX locks belong to the process, and closing any descriptor of the
file drops all of them.
"""
import fcntl
import os
import struct
import sys

_FLOCK = "hhqqi4x"        # struct flock on Linux (64-bit off_t)


def hold_shared(fd, byte):
    """Hold a shared lock on ``byte`` of the file open as ``fd`` (opened
    for reading); never waits (nothing here takes it exclusively)."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, byte)
    except OSError:
        pass


def holder(fd, byte):
    """The pid of a process holding a lock on ``byte`` that an exclusive
    lock would conflict with, or None (also where this cannot be asked:
    not Linux).  ``fd`` may be open read-only."""
    if not sys.platform.startswith("linux"):
        return None
    probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, byte, 1, 0)
    try:
        kind, _, _, _, pid = struct.unpack(_FLOCK, fcntl.fcntl(fd, fcntl.F_GETLK, probe))
    except OSError:
        return None
    return None if kind == fcntl.F_UNLCK else pid
