"""Running commands against a store: one command, or a script on stdin,
and waiting for blocked reads.

A command is parsed before any transaction starts (parsers never touch
the store), then run in one: in single-command mode its own transaction
(an error aborts it), in script mode the batch's, where every write
verb has a savepoint of its own (storage.txn): a failing command
changes nothing, the others of the batch still commit.

Script mode reads whatever is already buffered on stdin, runs all of
those commands in ONE write transaction, commits (one fsync), and only
then prints their replies: a reply is never printed before its write is
on disk, and a producer piping thousands of XADDs pays for one fsync per
batch, not per line.  A line that would block (XREAD ... BLOCK with
nothing to read) ends the batch: what came before is committed and
printed, the line waits, answers, and the next batch starts.

Blocking (XREAD / XREADGROUP ... BLOCK) is this module's business, not
the commands': a blocking command that returns a null reply is retried
here whenever one of its streams changes (storage.blocking), until it
serves something or its timeout passes.
"""
import os
from itertools import islice

from storage import errors
from storage.errors import RedisError
from xstream_cli.commands import lookup, plain_add
from xstream_cli.execution import run_command
from xstream_cli.execution.batch import FATAL, Added, Batch
from xstream_cli.execution.blocked import waits
from xstream_cli.execution.pages import is_paged_range, is_paged_read, range_pages, read_pages, span_pages
from xstream_cli.output.render import RENDERERS
from xstream_cli.splitargs import SplitError, split_line

BATCH_BYTES = 8 << 20          # read at most this much before a commit
MAX_LINE_BYTES = 512 << 20     # a longer script line is refused (Redis's proto-max-bulk-len)


class Session:
    """A store plus an output mode."""

    def __init__(self, db, mode="raw", durable=True, opener=None):
        self.db = db
        self.mode = mode
        self.durable = durable
        self._store = None
        # opener(write) -> Store: how a store missing when the session
        # began is opened by its first command (a write makes it, a read
        # raises StoreError); None: made at first use
        self._opener = opener
        if mode == "pretty":
            from xstream_cli.output.pretty import render_pretty
            self.render = render_pretty
        else:
            self.render = RENDERERS[mode]
        self.by_command = mode == "jsonl"     # its renderer takes the command too
        self.failed = False
        self.name_lines = False      # script mode from a file or pipe: errors named by line on stderr
        self.lines_done = 0          # script lines before the block being run
        self.quit = False            # a script's "quit" / "exit" line was met
        self._repeat = None          # (line index, argv, times left) of a repeated line cut by a block

    def message(self, text):
        """A redis-cli message that is not a reply ("Invalid argument(s)"):
        plain text, or in --json an error document like any other."""
        if self.mode in ("json", "jsonl"):
            import json
            return (json.dumps({"error": text}) + "\n").encode()
        return text.encode() + b"\n"

    def output(self, reply, out=None, argv=None):
        """Write one reply to ``out`` (default stdout) and flush.  Pretty
        output streams (entries are formatted and flushed in chunks, see
        pretty.py); the other modes write ``render``'s bytes.  A reader
        that went away ends the process quietly; Ctrl-C propagates.
        ``argv``: the command (--jsonl names an XRANGE's stream by it)."""
        from xstream_cli import context
        if out is None:
            import sys
            out = sys.stdout.buffer
        try:
            if self.mode == "pretty":
                from xstream_cli.output.pretty import write_pretty
                write_pretty(reply, out)
            else:
                out.write(self.render(reply, argv) if self.by_command else self.render(reply))
                out.flush()
        except BrokenPipeError:
            context.quiet_exit()

    @property
    def store(self):
        if self._store is None:
            self.open_for(True)
        return self._store

    @property
    def opened(self):
        return self._store is not None

    def open_for(self, write):
        """Open the store, if not yet open, for a command that does
        (``write``) or does not write: only a write creates it."""
        if self._store is None:
            if self._opener is not None:
                self._store = self._opener(write)
            else:
                from xstream_cli.context import store_at
                self._store = store_at(self.db, self.durable)

    @store.setter
    def store(self, store):
        self._store = store

    # ------------------------------------------------------------ one command

    def execute(self, argv, cmd=None, args=None):
        """Run one command (argv: list of bytes; ``cmd``: its Command and
        ``args`` its parsed arguments, when the caller has them already)
        in its own transaction; returns the reply value (a RedisError for
        an error reply)."""
        try:
            if cmd is None:
                cmd = lookup(argv)
            if args is None:
                args = cmd.parse(argv)
            self.open_for(cmd.write)
            if cmd.write and self.store.readonly:
                raise errors.read_only(self.store.why_read_only or "it is open read-only")
        except RedisError as e:
            return e
        try:
            args, r = self.store.run(lambda tx: run_command(tx, cmd, args), write=cmd.write)
        except RedisError as e:
            return e
        except FATAL:
            raise
        except Exception as e:     # a bug: the transaction was aborted
            return errors.internal(e)
        if r is None:
            w = waits(cmd, args)
            if w is not None:
                return self.block(cmd, args, w)
        return r

    def stream_range(self, cmd, args, out):
        """XRANGE / XREVRANGE / XREAD (``cmd`` and its parsed ``args``),
        read in pages of PAGE entries inside ONE read transaction (one
        consistent view, as a single read) and written page by page, in
        every output mode: memory stays that of a page, the first entry
        shows at once however long the reply, a reader that went away
        (``| head -1``) stops the read at the next page, and the bytes
        are exactly those of the whole reply rendered at once.  Returns
        False (nothing done) for any other command, a reply bounded to a
        page (COUNT), and an XREAD that has nothing yet and will block:
        the usual path answers it."""
        name = cmd.name
        if self.mode not in ("raw", "json", "jsonl", "pretty"):
            return False          # --no-raw numbers a reply's items across it: written whole
        if name in ("xrange", "xrevrange"):
            key, opts = args
            if not is_paged_range(opts):
                return False
            with self.store.read() as tx:
                pages = range_pages(tx, key, opts.start, opts.end, opts.count, opts.rev)
                self._write_paged(out, [(key, pages)], False)
            return True
        if name == "xreadgroup":
            return self._stream_group_read(args[0], out)
        if name != "xread":
            return False
        opts = args[0]
        if not is_paged_read(opts):
            return False
        with self.store.read() as tx:
            try:
                streams = read_pages(tx, opts)
            except RedisError:
                return False                  # the usual path answers the error
            if not streams and opts.block is not None:
                return False                  # it blocks: the usual path waits
            self._write_paged(out, streams, True)
        return True

    def _stream_group_read(self, opts, out):
        """XREADGROUP of new entries (every ID ``>``; no CLAIM, MAXCOUNT
        or MAXSIZE; no COUNT or one above a page), streamed: the write
        transaction delivers them without holding them (Txn.deliver_spans)
        and opens, before it commits, a read snapshot that holds them as
        the delivery saw them (it changes no entry, and no other writer
        runs before its commit); after the commit the reply is written
        from that snapshot a page at a time.  A reply still follows its
        commit; and an error, or a read that has nothing yet and will
        block, goes the usual way (False; nothing committed)."""
        if not is_paged_read(opts, group=True) or self.store.readonly:
            return False
        snapshot = []

        def deliver(tx):
            spans = tx.deliver_spans(opts)
            if not spans and opts.block is not None:
                raise _Nothing()         # it blocks: roll back, the usual path waits
            if spans:
                snapshot.append(self.store.read())
                snapshot.append(snapshot[0].__enter__())
            return spans
        try:
            spans = self.store.run(deliver, write=True)
        except (RedisError, _Nothing):
            for ctx in snapshot[:1]:
                ctx.__exit__(None, None, None)
            return False
        except BaseException:
            for ctx in snapshot[:1]:
                ctx.__exit__(None, None, None)
            raise
        if not spans:
            self._write_paged(out, [], True)
            return True
        ctx, tx = snapshot
        try:
            self._write_paged(out, span_pages(tx, spans), True)
        finally:
            ctx.__exit__(None, None, None)
        return True

    def _write_paged(self, out, streams, read):
        """Write a reply made of pages as ``output`` writes it whole:
        ``streams`` is [(key, pages)]; ``read``: the XREAD map of streams
        (an empty one is the nil reply), else one XRANGE list of entries."""
        import json as _json

        from xstream_cli import context
        from xstream_cli.output.render import entry_line, to_jsonable
        from xstream_cli.output.reply import Map
        mode = self.mode
        try:
            if read and not streams:
                self.output(None, out, argv=[b"XREAD"])     # XREAD's nil reply
                return
            if mode == "pretty":
                from xstream_cli.output.pretty import write_pretty_paged
                write_pretty_paged(streams if read else None, None if read else streams[0][1], out)
                return
            if mode == "jsonl":
                for key, pages in streams:
                    for page in pages:
                        out.write(b"".join(entry_line(key, e) for e in page))
            elif mode == "json":
                out.write(b"{" if read else b"[")
                for n, (key, pages) in enumerate(streams):
                    if read:
                        head = self.render(Map([(key, [])], flat=False))     # {"key": []}
                        out.write((b", " if n else b"") + head[1:-4] + b"[")
                    sep = b""
                    for page in pages:
                        if len(page):
                            out.write(sep + b", ".join(_json.dumps(to_jsonable(e), ensure_ascii=False)
                                                       .encode("utf-8", "backslashreplace") for e in page))
                            sep = b", "
                    if read:
                        out.write(b"]")
                out.write(b"}\n" if read else b"]\n")
            else:
                written = False
                for key, pages in streams:
                    if read:
                        out.write(self.render(key))
                    for page in pages:
                        if len(page):
                            out.write(self.render(page))
                            written = True
                if not read and not written:
                    out.write(self.render([]))
            out.flush()
        except BrokenPipeError:
            context.quiet_exit()

    def block(self, cmd, args, w):
        """Wait for a blocked read to be served or to time out
        (xstream_cli.execution.blocked: storage.blocking's one wait loop)."""
        from xstream_cli.execution import blocked
        return blocked.serve(self.store, cmd, args, w)

    # ------------------------------------------------------------ script mode

    def run_script(self, fd, out):
        """Read commands from file descriptor ``fd`` until EOF (or a
        ``quit`` / ``exit`` line); write replies to the binary stream
        ``out``.  Returns the exit status.

        Reading is linear in the input: chunks are collected until a
        newline arrives (only new data is searched for one), then the
        complete lines are joined, scanned and split once.  A line longer
        than MAX_LINE_BYTES is answered with one error and dropped as it
        is read (its bytes are counted, not kept); the script goes on
        with the next line."""
        import select
        read = os.read
        limit = MAX_LINE_BYTES
        tail = []         # chunks of the line still incomplete
        tail_len = 0
        skipped = None    # bytes of an over-long line being dropped, or None
        eof = False
        while not eof and not self.quit:
            try:
                data = read(fd, 1 << 20)
            except InterruptedError:
                continue
            chunks = []
            size = 0
            if data:
                chunks.append(data)
                size = len(data)
            else:
                eof = True
            while not eof and size < BATCH_BYTES:
                r, _, _ = select.select([fd], [], [], 0)
                if not r:
                    break
                data = read(fd, 1 << 20)
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
                self._too_long(skipped, limit, out)
                skipped = None
                if self.quit:
                    break
                size = sum(map(len, chunks))
            if not eof and not any(b"\n" in c for c in chunks):
                tail += chunks              # still no line end: keep collecting
                tail_len += size
                if tail_len > limit:        # drop it as it comes
                    skipped = tail_len
                    tail = []
                    tail_len = 0
                continue
            block = b"".join(tail + chunks) if tail else b"".join(chunks)
            tail = chunks = data = None
            plain = _plainness(block)
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
            if blen > limit:
                self._run_long(lines, out, plain, limit)
            elif lines:
                self.run_lines(lines, out, plain)
            if not eof and tail_len > limit:
                skipped = tail_len
                tail = []
                tail_len = 0
        return 1 if self.failed else 0

    def _run_long(self, lines, out, plain, limit):
        """run_lines, but a line longer than ``limit`` is answered with an
        error instead of being run."""
        start = 0
        for i, line in enumerate(lines):
            if len(line) > limit:
                if start < i:
                    self.run_lines(lines[start:i], out, plain)
                if self.quit:
                    return
                lines[i] = b""
                self._too_long(len(line), limit, out)
                del line
                start = i + 1
        if start < len(lines) and not self.quit:
            self.run_lines(lines[start:], out, plain)

    def _too_long(self, n, limit, out):
        """Answer a script line of ``n`` bytes that was longer than ``limit``."""
        self.failed = True
        e = errors.line_too_long(n, limit)
        self.lines_done += 1
        self._name_lines([(-1, e.text)], True)
        out.write(self.render(e))
        out.flush()

    def run_lines(self, lines, out, plain=0):
        """Run script lines in as few transactions as blocking allows.
        ``plain`` (see _plainness): 0 split as redis-cli does, 1 split on
        white space, 2 single-spaced words."""
        start = 0
        n = len(lines)
        # a repeated line cut by a block may be the last one: its
        # remaining repetitions still run (self._repeat starts at n)
        if self._store is None:
            self.open_for(_any_write(lines))
        while (start < n or self._repeat is not None) and not self.quit:
            write = not self.store.readonly      # a read-only store: reads answer, writes are refused
            b = self.store.run(lambda tx: _Script(self, tx, plain).run(lines, start, self._repeat),
                               write=write, savepoints=write)
            start, self._repeat = b.next, b.repeat_left
            self.failed |= b.failed
            self.quit = b.quit
            if b.replies:
                out.write(b"".join(b.replies))
                out.flush()
            if b.errors:
                self._name_lines(b.errors, n > 1)
            if b.blocked is not None:
                r = self.block(*b.blocked)
                if isinstance(r, RedisError):
                    self.failed = True
                    self._name_lines([(start - 1, r.text)], n > 1)
                out.write(self.render(r, [b.blocked[0].name.upper().encode()]) if self.by_command
                          else self.render(r))
                out.flush()
        self.lines_done += n

    def _name_lines(self, errs, many):
        """``xs: line 187: ERR ...`` on stderr for each (line index in the
        block being run, error text), when the script comes from a file or
        a pipe of more than one line (stdout stays redis-cli's)."""
        if not self.name_lines or not (many or self.lines_done):
            return
        import sys
        try:
            sys.stderr.write("".join("xs: line %d: %s\n" % (self.lines_done + i + 1, t) for i, t in errs))
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


class _Script:
    """One script-mode batch: lines run through one Batch (the one driver,
    xstream_cli.execution.batch) in the transaction ``tx`` until one
    blocks; their replies are rendered once the batch's runs are flushed."""

    def __init__(self, session, tx, plain):
        self.plain = plain
        self.render = session.render
        self.argvs = {} if session.by_command else None   # --jsonl: reply index -> its command
        self.message = session.message
        store = session.store
        read_only = (store.why_read_only or "it is open read-only") if store.readonly else None
        self.batch = Batch(tx, read_only)
        self.fast_ids = None if read_only else _FAST_IDS.get(session.mode)
        self.vals = []               # reply values, in order (_Text: a message, not a reply)
        self.at = {}                 # reply index -> index of its line (a run of XADDs: its first line's)
        self.lines = None            # the block's lines (to number the XADDs of a run)
        self.errors = []             # (line index, error text), once stopped
        self.replies = []            # the rendered replies, once stopped
        self.failed = False
        self.next = 0                # the next line to run
        self.blocked = None          # (cmd, args, Wait) of the line that must wait
        self.repeat_left = None      # (line index, argv, times) still to run after it
        self.quit = False

    def _stop(self, i, blocked=None, repeat_left=None):
        self.batch.flush()
        self._render()
        self.next, self.blocked, self.repeat_left = i, blocked, repeat_left
        return self

    def _render(self):
        render, app, argvs = self.render, self.replies.append, self.argvs
        failed = False
        for k, v in enumerate(self.vals):
            t = type(v)
            if t is _Text or t is _Error:
                app(v)
                if v.error:
                    self.errors.append((self.at.get(k, 0), v.decode().strip()))
            elif t is Added:
                if self.fast_ids is not None and all(type(x) is bytes for x in v):
                    app(self.fast_ids(v))
                    continue
                bad = []
                for j, x in enumerate(v):
                    if isinstance(x, RedisError):
                        failed = True
                        bad.append((j, x.text))
                    app(render(x))
                if bad:
                    self._run_errors(self.at.get(k, 0), bad)
            else:
                if isinstance(v, RedisError):
                    failed = True
                    self.errors.append((self.at.get(k, 0), v.text))
                app(render(v, argvs.get(k)) if argvs is not None else render(v))
        self.vals = []
        self.at = {}
        if argvs:
            argvs.clear()
        self.failed |= failed

    def _added(self, run, first=None):
        """Hand a run of plain XADDs to the driver (one reply slot);
        ``first``: the index of its first line."""
        if run:
            self.at[len(self.vals)] = self.run_start if first is None else first
            self.vals.append(None)
            self.batch.add_many(self.vals, len(self.vals) - 1, run)
        return []

    def _run_errors(self, first, bad):
        """Errors of the XADDs ``bad`` [(position in the run, text)] of a
        run that began at line ``first``: the n-th XADD of a run is its
        n-th line that is not blank."""
        want = dict(bad)
        j = 0
        for i in range(first, len(self.lines)):
            if not self.lines[i].strip():
                continue
            if j in want:
                self.errors.append((i, want.pop(j)))
                if not want:
                    return
            j += 1

    def run(self, lines, start, repeat=None):
        """Run lines from ``start`` (first the rest of a repeated line cut
        by a block, ``repeat``) until the end or a line that blocks.
        Returns self: replies, next, blocked, repeat_left, failed, quit."""
        vals = self.vals
        self.lines = lines
        run = []                     # a run of plain "XADD key * f v ..." lines
        self.run_start = start
        i = start
        n = len(lines)
        if repeat is not None and repeat[0] == start:
            stopped = self._repeated(repeat[1], repeat[2], start)
            if stopped is not None:
                return stopped
        if self.plain == 2 and self.fast_ids is not None:
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
            run = self._added(run, start)
        while i < n:
            line = lines[i]
            i += 1
            if self.plain:
                argv = line.split()
            else:
                try:
                    argv = split_line(line)
                except SplitError:
                    run = self._added(run)
                    self.at[len(vals)] = i - 1
                    vals.append(_Error(self.message("Invalid argument(s)")))
                    self.failed = True
                    continue
            if not argv:
                continue
            if argv[0].lower() in _QUIT:             # redis-cli ends the script here
                self._added(run)
                self.quit = True
                return self._stop(n)
            if len(argv) > 1:
                times = _repeat_count(argv[0])
                if times is not None:                # "3 XADD s * f v": a repeat count
                    run = self._added(run)
                    if times <= 0:
                        self.at[len(vals)] = i - 1
                        vals.append(_Error(self.message("Invalid redis-cli repeat command option value.")))
                        continue
                    stopped = self._repeated(argv[1:], times, i)
                    if stopped is not None:
                        return stopped
                    continue
            add = plain_add(argv) if self.fast_ids is not None else None
            if add is not None:
                if not run:
                    self.run_start = i - 1
                run.append(add)
                continue
            run = self._added(run)
            blocked = self._one(argv, i - 1)
            if blocked is not None:
                return self._stop(i, blocked)
        self._added(run)
        return self._stop(i)

    def _repeated(self, argv, times, nxt):
        """Run ``argv`` ``times`` times; if one must wait, stop there (the
        rest is run after it, from line ``nxt``).  None if all ran."""
        while times:
            times -= 1
            blocked = self._one(list(argv), nxt - 1)
            if blocked is not None:
                return self._stop(nxt, blocked, (nxt, argv, times) if times else None)
        return None

    def _one(self, argv, at=0):
        """Run one command (of line index ``at``); returns (cmd, args,
        Wait) if it must block."""
        vals = self.vals
        k = len(vals)
        self.at[k] = at
        vals.append(None)
        if self.argvs is not None:
            self.argvs[k] = argv
        try:
            cmd = lookup(argv)
            args = cmd.parse(argv)
        except RedisError as e:
            vals[k] = e
            return None
        except FATAL:
            raise
        except Exception as e:      # a bug in a parser
            vals[k] = errors.internal(e)
            return None
        blocked = self.batch.run(vals, k, cmd, args)
        if blocked is not None:
            vals.pop()
        return blocked


class _Text(bytes):
    """A message of redis-cli's that is not a reply (already rendered)."""
    __slots__ = ()
    error = False


class _Error(_Text):
    """Such a message that reports a bad line ("Invalid argument(s)")."""
    __slots__ = ()
    error = True


class _Nothing(Exception):
    """A streamed XREADGROUP found nothing and will block."""


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


def _ids_raw(ids):
    return b"\n".join(ids) + b"\n"


def _ids_quoted(ids):
    return b'"' + b'"\n"'.join(ids) + b'"\n'


_XADD = frozenset((b"XADD", b"xadd"))
_QUIT = frozenset((b"quit", b"exit"))
_LONG_MAX = (1 << 63) - 1


def _repeat_count(word):
    """redis-cli's repeat count (``strtol`` over the whole first word):
    the count, 0 for a word that is a number but not a valid count
    (zero, negative, out of range, or no digits at all), or None when the
    word is not a number (then it is the command)."""
    if not word:
        return 0                 # strtol converts nothing and stops at the end
    t = word.lstrip(b" \t\n\v\f\r")
    neg = t[:1] == b"-"
    if t[:1] in (b"+", b"-"):
        t = t[1:]
    if not t or not t.isdigit():
        return None
    d = t.lstrip(b"0")
    if neg or len(d) > 19 or int(d or b"0") > _LONG_MAX:
        return 0
    return int(d or b"0")
_FAST_IDS = {"raw": _ids_raw, "noraw": _ids_quoted, "json": _ids_quoted, "jsonl": _ids_quoted}


def open_session(g, mode, write=True, create=None):
    """A Session (storage + output mode) on the store ``g`` names, opened
    now so that a bad store fails before any input is read (exit 1).

    ``write``: the command may write (else the store is opened read-only
    if it can be: see context.try_open).  ``create``: make a missing
    store (True), fail on one (False), or, for a script or the prompt
    (None), leave it to the first command: a write makes it, a read
    fails with "no such store"."""
    from storage.store import NoSuchStore, StoreError
    from xstream_cli import context
    s = Session(context.db_path(g), mode, g.durable)
    try:
        s.store = context.try_open(g, write, create is not None and create)
    except NoSuchStore as e:
        if create is not None:
            context.fail(str(e))
        s._opener = lambda w: context.try_open(g, True, w)
    except StoreError as e:
        context.fail(str(e))
    return s


def _any_write(lines):
    """Whether any of the script ``lines`` names a command that writes
    (by its first word: a missing store is made only for a script that
    writes)."""
    from xstream_cli.commands import COMMANDS, SUBCOMMANDS
    for line in lines:
        words = line.split(None, 3)
        if words and words[0].isdigit():      # "3 XADD s * f v": a repeated line
            words = words[1:]
        if not words:
            continue
        name = words[0].strip(b"\"'").upper()
        cmd = COMMANDS.get(name)
        if cmd is None and name in SUBCOMMANDS and len(words) > 1:
            cmd = SUBCOMMANDS[name].get(words[1].strip(b"\"'").upper())
        if cmd is not None and cmd.write:
            return True
    return False
