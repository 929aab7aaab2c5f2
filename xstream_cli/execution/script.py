"""Script mode: commands read from stdin (a file or a pipe) and run in
batches, each batch one write transaction.

Script mode reads whatever is already buffered on stdin, runs all of
those commands in ONE write transaction, commits (one fsync), and only
then prints their replies: a reply is never printed before its write is
on disk, and a producer piping thousands of XADDs pays for one fsync per
batch, not per line.  A line that would block (XREAD ... BLOCK with
nothing to read) ends the batch: what came before is committed and
printed, the line waits, answers, and the next batch starts.

Stdin is read by storage.lines (the one reader of lines as they come,
shared with ``xs import``).  The lines of a batch run through the one
batch driver (xstream_cli.execution.batch) in ``_Script``; their
replies are rendered once the batch's runs are flushed.  A ``quit`` or
``exit`` line ends the script, as in redis-cli.

Who imports it: xstream_cli.execution.session (Session.run_script), when
a script runs: never on the one-shot path.
"""
import os
from functools import partial
from itertools import islice

from storage import errors
from storage.codec import AddBlock
from storage.errors import RedisError
from storage.lines import blocks
from xstream_cli.commands import lookup, plain_add
from xstream_cli.execution.batch import FATAL, Added, Batch
from xstream_cli.splitargs import SplitError, split_line

BATCH_BYTES = 8 << 20          # read at most this much before a commit
MAX_LINE_BYTES = 512 << 20     # a longer script line is refused (Redis's proto-max-bulk-len)


def run_script(session, fd, out):
    """Read commands from file descriptor ``fd`` until EOF (or a
    ``quit`` / ``exit`` line) and run them in ``session`` (a Session);
    write replies to the binary stream ``out``.  Returns the exit status.

    Reading (storage.lines.blocks) is linear in the input: what is
    already buffered, up to BATCH_BYTES, is one batch.  A line longer
    than MAX_LINE_BYTES is answered with one error and dropped as it
    is read (its bytes are counted, not kept); the script goes on with
    the next line."""
    limit = MAX_LINE_BYTES
    for lines, _ in blocks(partial(os.read, fd), fd, 1 << 20, BATCH_BYTES, limit,
                           lambda n: _too_long(session, n, limit, out)):
        run_lines(session, lines, out, None, b"\n".join(lines))
        if session.quit:
            break
    return 1 if session.failed else 0


def _too_long(session, n, limit, out):
    """Answer a script line of ``n`` bytes that was longer than ``limit``."""
    session.failed = True
    e = errors.line_too_long(n, limit)
    session.lines_done += 1
    _name_lines(session, [(-1, e.text)], True)
    out.write(session.render(e))
    out.flush()


def run_lines(session, lines, out, plain=0, text=None):
    """Run script lines in as few transactions as blocking allows.
    ``plain`` (see _plainness): 0 split as redis-cli does, 1 split on
    white space, 2 single-spaced words; None: not known yet, found from
    ``text`` (the lines joined by newlines) if needed -- a block of
    plain adds to one stream (_add_block) does not need it."""
    start = 0
    n = len(lines)
    # a repeated line cut by a block may be the last one: its
    # remaining repetitions still run (session._repeat starts at n)
    if session._store is None:
        session.open_for(_any_write(lines))
    while (start < n or session._repeat is not None) and not session.quit:
        write = not session.store.readonly      # a read-only store: reads answer, writes are refused
        b = session.store.run(lambda tx: _Script(session, tx, plain, text).run(lines, start, session._repeat),
                              write=write, savepoints=write)
        start, session._repeat, plain = b.next, b.repeat_left, b.plain
        session.failed |= b.failed
        session.quit = b.quit
        if b.replies:
            out.write(b"".join(b.replies))
            out.flush()
        if b.errors:
            _name_lines(session, b.errors, n > 1)
        if b.blocked is not None:
            r = session.block(*b.blocked)
            if isinstance(r, RedisError):
                session.failed = True
                _name_lines(session, [(start - 1, r.text)], n > 1)
            out.write(session.render(r, [b.blocked[0].name.upper().encode()]) if session.by_command
                      else session.render(r))
            out.flush()
    session.lines_done += n


def _name_lines(session, errs, many):
    """``xs: line 187: ERR ...`` on stderr for each (line index in the
    block being run, error text), when the script comes from a file or
    a pipe of more than one line (stdout stays redis-cli's)."""
    if not session.name_lines or not (many or session.lines_done):
        return
    import sys
    try:
        sys.stderr.write("".join("xs: line %d: %s\n" % (session.lines_done + i + 1, t) for i, t in errs))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class _Script:
    """One script-mode batch: lines run through one Batch (the one driver,
    xstream_cli.execution.batch) in the transaction ``tx`` until one
    blocks; their replies are rendered once the batch's runs are flushed."""

    def __init__(self, session, tx, plain, text=None):
        self.plain = plain           # None: found from text when needed
        self.text = text
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
                if self.fast_ids is not None:
                    try:
                        app(self.fast_ids(v))    # IDs only: a join refuses an error among them
                        continue
                    except TypeError:
                        pass
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
        elif start == 0 and self.fast_ids is not None and self.text is not None:
            block = _add_block(lines, self.text)
            if block is not None:            # every line a plain add to one stream: the usual bulk ingest
                self._added(block, 0)
                return self._stop(n)
        if self.plain is None:
            self.plain = _plainness(self.text)
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


def _plainness(buf):
    """How simply the lines in ``buf`` can be split: 2 if words are
    separated by single spaces only (no tabs, CRs, quotes, NULs, no space
    at either end of a line), 1 if splitting on white space is enough (no
    quotes, NULs, VT or FF, which redis-cli treats specially), else 0."""
    if _quoted(buf):
        return 0
    if (b"\t" in buf or b"\r" in buf or b"  " in buf or b"\n " in buf or b" \n" in buf
            or buf[:1] == b" " or buf[-1:] == b" "):
        return 1
    return 2


def _quoted(buf):
    """Whether ``buf`` holds a byte redis-cli's split treats specially
    (quotes, NUL, VT, FF): then it is split as redis-cli does."""
    return b'"' in buf or b"'" in buf or b"\x00" in buf or b"\x0b" in buf or b"\x0c" in buf


def _add_block(lines, text):
    """The script ``lines`` (``text``: them joined by newlines) as one
    AddBlock (storage.codec) when every one is a plain ``XADD key * field
    value ...`` to the same stream, single-spaced, each with as many
    words: what run's loop of plain lines would give, its pairs made in
    a few C-level passes over the whole text and no object made per
    line.  None otherwise (the loop then takes the lines one by one)."""
    if _quoted(text) or b"\t" in text or b"\r" in text:
        return None                   # not plain (see _plainness; spaces are checked below)
    first = lines[0]
    p = first.split(b" ", 3)
    if len(p) != 4 or p[2] != b"*" or not p[1] or not (p[0] in _XADD or p[0].upper() == b"XADD"):
        return None
    h = len(p[0]) + len(p[1]) + 4
    head = first[:h]                               # "XADD key * "
    c = p[3].count(b" ") + 1                       # words of fields in the first line
    if c & 1:
        return None
    # the fields of each line in text form (as the engine's bulk path
    # joins them), a NUL word between lines
    fields = text[h:].replace(b"\n" + head, b"\n\0\n")
    n = len(lines)
    if len(text) - h - len(fields) != (n - 1) * (h - 2):
        return None                   # a line that does not begin with the head
    fields = fields.replace(b" ", b"\n")
    if b"\n\n" in fields or fields[-1:] == b"\n" or fields[:1] == b"\n":
        return None                   # an empty word: spaces not single
    words = fields.split(b"\n")
    w = c + 1
    if len(words) != w * n - 1 or words[c::w].count(b"\0") != n - 1:
        return None                   # lines of other lengths
    return AddBlock(p[1], fields, words, c, n)


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
