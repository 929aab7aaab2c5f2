"""Lines read from a pipe or a file as they come: THE stdin reader of
script mode (xstream_cli.execution.script) and of ``xs import``
(storage.ops.line_import).

A reader that waited for a full batch would hold a slow producer's
lines for as long as the producer pauses: a script's replies would not
be printed, an import's entries not committed.  So ``blocks`` takes
what is there: one read (which may wait), then, without waiting,
whatever more is already there, up to ``gather`` bytes; the complete
lines of that are one block, handed on at once.  A consumer that keeps
lines across blocks (an import's batch) is told before a read that
would wait (``before_wait``) and commits there; one that commits every
block (script mode) needs no telling.

Reading is linear in the input: chunks are collected until a newline
arrives (only new data is searched for one), then the complete lines
are joined and split once.  Lines end at \\n only (a \\r stays in its
line); the last line needs no newline.  A line longer than ``limit``
is reported (``too_long``) in its place among the blocks and dropped
as it is read: its bytes are counted, not kept.

Vocabulary: imports nothing of the engine, so that the command line and
the whole-store operations can share it.
"""
import select

BLOCK = 1 << 16          # bytes read at a time from a file object (read1)
TEXT_LINES = 1024        # lines of an iterable (a text file) per block


def blocks(read, fd=None, chunk=BLOCK, gather=0, limit=None, too_long=None, before_wait=None):
    """(lines, bytes) blocks of what ``read(n)`` returns (b"" at the
    end): ``lines`` a list of lines without their newline, ``bytes``
    the input they took, newlines included.

    ``fd``: the descriptor under ``read``, to ask whether a read would
    wait (None: never asked).  ``chunk``: bytes per read.  ``gather``:
    after a read, read on while more is already there, up to this many
    bytes in all (0: one read per block).  ``limit``: the longest line
    kept; a longer one is ``too_long(its bytes)`` instead, between the
    blocks of the lines before and after it.  ``before_wait()``: called
    before a read that would wait (only when ``fd`` is known)."""
    tail = []         # chunks of the line still incomplete
    tail_len = 0
    skipped = None    # bytes of an over-long line being dropped, or None
    eof = False
    while not eof:
        if before_wait is not None and fd is not None and _ready(fd) is False:
            before_wait()
        try:
            data = read(chunk)
        except InterruptedError:
            continue
        chunks = []
        size = 0
        if data:
            chunks.append(data)
            size = len(data)
        else:
            eof = True
        while not eof and size < gather and fd is not None and _ready(fd):
            data = read(chunk)
            if not data:
                eof = True
                break
            chunks.append(data)
            size += len(data)
        if skipped is not None:
            # dropping an over-long line: look for its end in the new data only
            for k, c in enumerate(chunks):
                nl = c.find(b"\n")
                if nl >= 0:
                    skipped += nl
                    chunks[k] = c[nl + 1:]
                    del chunks[:k]
                    break
                skipped += len(c)
            else:
                if not eof:
                    continue
                chunks = []
            too_long(skipped)
            skipped = None
            size = sum(map(len, chunks))
        if not eof and not any(b"\n" in c for c in chunks):
            tail += chunks              # still no line end: keep collecting
            tail_len += size
            if limit is not None and tail_len > limit:        # drop it as it comes
                skipped = tail_len
                tail = []
                tail_len = 0
            continue
        block = b"".join(tail + chunks) if tail else b"".join(chunks)
        chunks.clear()              # held no longer than the joined block
        tail = []
        data = b""
        lines = block.split(b"\n")
        blen = len(block)
        del block
        if eof:
            if lines[-1] == b"":
                lines.pop()
            tail = []
            tail_len = 0
        else:
            last = lines.pop()
            tail = [last] if last else []
            tail_len = len(last)
            blen -= tail_len
        if limit is not None and blen > limit:
            yield from _cut_long(lines, limit, too_long, blen)
        elif lines:
            yield lines, blen
        if not eof and limit is not None and tail_len > limit:
            skipped = tail_len
            tail = []
            tail_len = 0


def _cut_long(lines, limit, too_long, blen):
    """The blocks of ``lines`` (``blen`` bytes) around the lines longer
    than ``limit``, each of those reported (``too_long``) in its place
    and let go."""
    start = 0
    used = 0          # bytes of the lines before ``start``
    for i, line in enumerate(lines):
        if len(line) > limit:
            if start < i:
                size = sum(map(len, lines[start:i])) + i - start
                yield lines[start:i], size
                used += size
            lines[i] = b""
            too_long(len(line))
            used += len(line) + 1
            del line
            start = i + 1
    if start < len(lines):
        yield lines[start:], blen - used


def _ready(fd):
    """Whether a read of ``fd`` would return at once; None if select
    cannot tell."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return None


def source_blocks(src, before_wait=None):
    """``blocks`` of an import's source: a binary file, read as it comes
    (read1: what is there; ``before_wait`` before a read that would
    wait), or an iterable of lines (bytes, or text: encoded as UTF-8
    with surrogate escapes; a trailing \\n is cut, nothing else is
    looked into), TEXT_LINES lines a block."""
    read = getattr(src, "read1", None)
    if read is None:
        return _iter_blocks(src)
    try:
        fd = src.fileno()
    except (AttributeError, OSError, ValueError):
        fd = None
    return blocks(read, fd, BLOCK, before_wait=before_wait)


def _iter_blocks(src):
    buf = []
    size = 0
    for line in src:
        if type(line) is not bytes:
            line = line.encode("utf-8", "surrogateescape")
        size += len(line)
        buf.append(line[:-1] if line[-1:] == b"\n" else line)
        if len(buf) >= TEXT_LINES:
            yield buf, size
            buf = []
            size = 0
    if buf:
        yield buf, size
