"""Running commands against a store: one command, or a script on stdin.

Script mode reads whatever is already buffered on stdin, runs all of
those commands in ONE write transaction, commits (one fsync), and only
then prints their replies: a reply is never printed before its write is
on disk, and a producer piping thousands of XADDs pays for one fsync per
batch, not per line.  A line that would block (XREAD ... BLOCK with
nothing to read) ends the batch: what came before is committed and
printed, the line waits, answers, and the next batch starts.

Each command is all or nothing: parsers check every argument before the
first write, so a failing command leaves no trace even inside a batch.
If a command fails unexpectedly (a bug), the batch is rolled back and
run again one command per transaction, so only that command fails.
"""
import os
import sys
import time
from itertools import islice

from storage import errors
from storage.errors import RedisError
from storage.store import Store
from xstream_cli.commands import lookup
from xstream_cli.commands.streams import Blocked
from xstream_cli.render import RENDERERS
from xstream_cli.splitargs import SplitError, split_line

BATCH_BYTES = 8 << 20
FAIR_GRACE_S = 0.003           # how long a woken group reader defers to older waiters          # read at most this much before a commit
INVALID = object()             # a line redis-cli would call "Invalid argument(s)"


class _Unexpected(Exception):
    """A command raised something that is not a Redis error (a bug)."""


def default_db():
    env = os.environ.get("XS_DB")
    if env:
        return env
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "xstream")


class Session:
    """A store plus an output mode."""

    def __init__(self, db=None, mode="raw", durable=True):
        self.db = db or default_db()
        self.mode = mode
        self.durable = durable
        self._store = None
        if mode == "pretty":
            from xstream_cli.pretty import render_pretty
            self.render = render_pretty
        else:
            self.render = RENDERERS[mode]
        self.failed = False

    @property
    def store(self):
        if self._store is None:
            self._store = Store(self.db, durable=self.durable)
        return self._store

    # ------------------------------------------------------------ one command

    def execute(self, argv):
        """Run one command (argv: list of bytes); returns the reply value."""
        try:
            cmd = lookup(argv)
        except RedisError as e:
            return e

        def run(tx):
            try:
                return cmd.handler(tx, argv)
            except RedisError as e:
                return e
        r = self.store.transact(run, write=cmd.write)
        if isinstance(r, Blocked):
            r = self.block(r)
        return r

    def block(self, b):
        """Wait for a blocked read to be served or to time out.

        Arm the watches first, then retry, then sleep: a write committed
        after the command's own check but before the wait still wakes us
        (storage.blocking.Waiter).  Each retry is a read-only dry run first.
        CLAIM also wakes when the oldest pending entry becomes claimable."""
        from storage.blocking import Queue
        store = self.store
        deadline = None if b.timeout_ms == 0 else time.monotonic() + b.timeout_ms / 1000.0
        retry = _retrying(b.retry)

        def nothing_to_serve():
            # a dry run in a read transaction: most wake-ups find nothing,
            # and a write transaction would commit (for a group read, with
            # an fsync).  A read that would deliver tries to write, which a
            # read transaction refuses: that too means "go for real".
            try:
                return store.transact(retry, write=False) is None
            except Exception:
                return False

        def attempt(woken):
            if nothing_to_serve():
                return None
            if woken and queue is not None and not queue.first():
                # consumers of a group all wake for one entry: Redis serves
                # the one blocked longest, so give older waiters a moment
                # to take it before competing
                end = time.monotonic() + FAIR_GRACE_S
                while time.monotonic() < end and not queue.first():
                    time.sleep(0.0002)
                    if nothing_to_serve():
                        return None
            return store.transact(retry, write=True)
        queue = Queue(store, b.keys[0], b.shared) if b.shared else None
        try:
            return self._block_loop(b, store, deadline, attempt, queue)
        finally:
            if queue is not None:
                queue.leave()

    def _block_loop(self, b, store, deadline, attempt, queue):
        from storage.blocking import Waiter
        stale = 0   # consecutive "claimable now" answers that served nothing
        woken = False
        with Waiter(store, b.keys) as w:
            while True:
                r = attempt(woken)
                if r is not None:
                    return r
                wake_in = None
                if b.claim_wake is not None:
                    ms = store.transact(b.claim_wake, write=False)
                    if ms is not None:
                        # a PEL entry that claims nothing (deleted from the
                        # stream) must not make us spin: back off to 1 s
                        stale = stale + 1 if ms <= 0 else 0
                        wake_in = max(ms, 1) / 1000.0 if not stale else min(0.001 * 2 ** stale, 1.0)
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    wake_in = left if wake_in is None else min(wake_in, left)
                w.wait(wake_in)
                woken = True

    # ------------------------------------------------------------ script mode

    def run_script(self, fd, out):
        """Read commands from file descriptor ``fd`` until EOF; write
        replies to the binary stream ``out``.  Returns the exit status."""
        import select
        buf = b""
        eof = False
        while not eof:
            try:
                data = os.read(fd, 1 << 20)
            except InterruptedError:
                continue
            if not data:
                eof = True
            buf += data
            while not eof and len(buf) < BATCH_BYTES:
                r, _, _ = select.select([fd], [], [], 0)
                if not r:
                    break
                data = os.read(fd, 1 << 20)
                if not data:
                    eof = True
                    break
                buf += data
            plain = _plainness(buf)
            lines = buf.split(b"\n")
            buf = b"" if eof else lines.pop()
            if lines:
                self.run_lines(lines, out, plain)
        return 1 if self.failed else 0

    def run_lines(self, lines, out, plain=0):
        """Run script lines in as few transactions as blocking allows.
        ``plain`` (see _plainness): 0 split as redis-cli does, 1 split on
        white space, 2 single-spaced words."""
        start = 0
        n = len(lines)
        while start < n:
            try:
                replies, start, blocked = self.store.transact(
                    lambda tx: self._batch(tx, lines, start, plain), write=True)
            except _Unexpected:
                replies, start, blocked = self._one_by_one(lines, start)
            if replies:
                out.write(b"".join(replies))
                out.flush()
            if blocked is not None:
                r = self.block(blocked)
                out.write(self.render(r))
                out.flush()

    def _batch(self, tx, lines, start, plain=0):
        """Run lines[start:] in ``tx`` until one blocks.  Returns
        (rendered replies, next line index, Blocked or None).

        Runs of plain ``XADD key * field value ...`` lines (no options,
        the shape of bulk ingest) go to the storage in one call."""
        replies = []
        app = replies.append
        render = self.render
        now = tx.now()
        fast_ids = _FAST_IDS.get(self.mode)

        def fast(ids):
            try:
                return fast_ids(ids)
            except TypeError:  # an error (exhausted ID space) among the IDs
                self.failed = True
                return b"".join(render(x) for x in ids)
        if fast_ids is None:
            fast = None
        run = []
        i = start
        n = len(lines)
        failed = False
        if plain == 2 and fast is not None:
            # bulk ingest of single-spaced lines: "XADD key * f v f v" needs
            # no full split; its fields in text form are the rest of the
            # line with spaces turned into newlines
            for line in islice(lines, start, None):
                i += 1
                p = line.split(b" ", 3)
                if len(p) == 4 and p[2] == b"*" and (p[0] in _XADD or p[0].upper() == b"XADD") \
                        and p[3].count(b" ") & 1:
                    run.append((p[1], p[3].replace(b" ", b"\n")))
                    continue
                if not line:
                    continue
                i -= 1
                break
            if run:
                app(fast(tx.add_auto_many(run, now)))
                run = []
        while i < n:
            line = lines[i]
            i += 1
            if plain:
                argv = line.split()
            else:
                try:
                    argv = split_line(line)
                except SplitError:
                    if run:
                        app(fast(tx.add_auto_many(run, now)))
                        run = []
                    app(b"Invalid argument(s)\n")
                    failed = True
                    continue
            if not argv:
                continue
            na = len(argv)
            if fast is not None and na >= 5 and na & 1 and argv[2] == b"*" and argv[0].upper() == b"XADD":
                run.append((argv[1], argv[3:]))
                continue
            if run:
                app(fast(tx.add_auto_many(run, now)))
                run = []
            try:
                cmd = lookup(argv)
                r = cmd.handler(tx, argv)
            except RedisError as e:
                r = e
            except Exception as e:  # a bug: roll back, rerun one by one
                raise _Unexpected(e)
            if isinstance(r, Blocked):
                self.failed |= failed
                return replies, i, r
            if isinstance(r, RedisError):
                failed = True
            app(render(r))
        if run:
            app(fast(tx.add_auto_many(run, now)))
        self.failed |= failed
        return replies, i, None

    def _one_by_one(self, lines, start):
        """After an unexpected failure: each line in its own transaction."""
        replies = []
        i = start
        n = len(lines)
        while i < n:
            try:
                part, nxt, blocked = self.store.transact(
                    lambda tx: self._batch(tx, lines[i:i + 1], 0), write=True)
            except _Unexpected as e:
                part, nxt, blocked = [self.render(errors.internal(e.args[0]))], 1, None
                self.failed = True
            replies += part
            i += 1
            if blocked is not None:
                return replies, i, blocked
        return replies, i, None


def _plainness(buf):
    """How simply the lines in ``buf`` can be split: 2 if words are
    separated by single spaces only (no tabs, CRs, quotes, NULs, no space
    at either end of a line), 1 if splitting on white space is enough (no
    quotes, NULs, VT or FF, which redis-cli treats specially), else 0."""
    if b'"' in buf or b"'" in buf or b"\x00" in buf or b"\x0b" in buf or b"\x0c" in buf:
        return 0
    if (b"\t" in buf or b"\r" in buf or b"  " in buf or b"\n " in buf or b" \n" in buf
            or buf[:1] == b" " or buf[-1:] == b" "):
        return 1
    return 2


def _retrying(fn):
    def run(tx):
        try:
            return fn(tx)
        except RedisError as e:
            return e
    return run


def _ids_raw(ids):
    return b"\n".join(ids) + b"\n"


def _ids_quoted(ids):
    return b'"' + b'"\n"'.join(ids) + b'"\n'


_XADD = frozenset((b"XADD", b"xadd"))
_FAST_IDS = {"raw": _ids_raw, "noraw": _ids_quoted, "json": _ids_quoted}


def write_out(data):
    """Write to stdout, quietly ending on a closed pipe."""
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        _quiet_exit()


def _quiet_exit():
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    os._exit(0)
