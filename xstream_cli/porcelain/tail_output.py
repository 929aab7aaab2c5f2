"""What xs tail writes: an entry as a raw line (``STREAM ID
FIELD=VALUE ...``, piped) or as a JSON line (xs export's shape, --json),
and the stdout that says whether the reader has a line (written,
flushed, and on a pipe taken out of it) before xs tail acknowledges it.
The pretty line of a terminal is xstream_cli.output.pretty's EntryLines.

Who imports it: xs tail (xstream_cli.porcelain.tail), and xs ls for
``raw_token`` (through tail).
"""
import os
import select
import stat
import sys

from xstream_cli.output.render import escape_text as _escaped

_BARE = frozenset(range(0x21, 0x7f)) - frozenset(b"\"'\\")
_BARE_NAME = _BARE - frozenset(b"=")
_NOT_BARE = frozenset(" \"'\\")
_NOT_BARE_NAME = _NOT_BARE | {"="}


# ------------------------------------------------------------------ lines

def raw_token(b, name=False):
    """A stream name, field or value in the raw line format."""
    if b and all(c in (_BARE_NAME if name else _BARE) for c in b):
        return b
    if b.isascii():
        from xstream_cli.output.render import quote
        return quote(b)
    t = b.decode("utf-8", "surrogateescape")
    stop = _NOT_BARE_NAME if name else _NOT_BARE
    if all(ch.isprintable() and ch not in stop for ch in t):
        return b
    return ('"%s"' % _escaped(t)).encode("utf-8")


def raw_line(stream, entry):
    """``STREAM ID FIELD=VALUE ...`` (bytes, with the newline)."""
    i, fields = entry
    parts = [raw_token(stream, True), i]
    for k in range(0, len(fields), 2):
        parts.append(raw_token(fields[k], True) + b"=" + raw_token(fields[k + 1]))
    return b" ".join(parts) + b"\n"


def json_line(stream, entry):
    """The entry as xs export writes it (storage.ops.exchange.entry_record)."""
    from storage.ops.exchange import dumps, entry_record
    return (dumps(entry_record(stream, entry[0], entry[1])) + "\n").encode("utf-8")


# ------------------------------------------------------------------ stdout

class _Out:
    """stdout for xs tail.  ``put`` says whether the reader has a line:
    written and flushed, and when stdout is a pipe (and the kernel can
    tell, FIONREAD), taken out of the pipe.  A reader that is gone
    (EPIPE) makes ``put`` return False."""

    def __init__(self, confirm):
        self.fd = None
        self.pipe = False
        try:
            self.fd = sys.stdout.fileno()
            self.pipe = stat.S_ISFIFO(os.fstat(self.fd).st_mode)
        except (AttributeError, OSError, ValueError):
            pass
        self.confirm = confirm and self.pipe
        self._poll = None
        if self.confirm:
            self._poll = select.poll()
            self._poll.register(self.fd, 0)    # POLLERR: the last reader is gone

    def watch(self):
        """Descriptors whose hang-up ends a wait (a pipe or socket reader)."""
        if self.fd is None:
            return ()
        try:
            mode = os.fstat(self.fd).st_mode
        except OSError:
            return ()
        return (self.fd,) if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) else ()

    def write(self, data):
        """Write and flush; False when the reader is gone."""
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            return False
        except OSError as e:             # EIO, ENOSPC, ...: stdout is unusable
            raise _WriteError(e.strerror or str(e))
        return True

    def put(self, data):
        """Write one line and wait until the reader has it."""
        if not self.write(data):
            return False
        return self._taken() if self.confirm else True

    def _taken(self):
        import array
        import fcntl
        import termios
        delay = 0.2                             # ms, doubling to 50
        unread = array.array("i", [0])
        gone = False
        while True:
            try:
                fcntl.ioctl(self.fd, termios.FIONREAD, unread, True)   # bytes still in the pipe
            except OSError:                     # the kernel cannot say: written is all we know
                self.confirm = False
                return True
            if unread[0] <= 0:
                return True                     # taken (perhaps just before the reader left)
            if gone:
                return False                    # the reader left with the line unread
            gone = bool(self._poll.poll(delay))  # POLLERR: no reader any more; look once more
            delay = min(delay * 2, 50.0)


class _Closed(Exception):
    """stdout's reader is gone."""


class _WriteError(Exception):
    """stdout cannot be written (the message says why)."""
