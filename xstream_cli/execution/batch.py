"""The one driver for a transaction of many commands.

Script mode (xstream_cli.execution.session) and ``xs serve``'s group
commit (xstream_cli.server.engine) hand their commands, in order, to one
``Batch`` over a transaction that has savepoints (storage.txn): each
write verb is atomic on its own, so a command that fails changes nothing
and the others of the batch still commit.

Each command names where its reply goes: a slot ``out[i]`` of the
caller's list, filled in before ``flush`` returns.  Two kinds of run are
gathered and run together; a run is flushed before any other command
runs, so every command sees the writes before it:

- plain ``XADD key * field value ...`` (a producer's bulk): added with
  one engine call (``Txn.add_auto_many(..., each=True)``: a refused item
  gets its error, the others are added);
- XACK, and XREADGROUP without BLOCK (a pool of workers' loop): run
  under one savepoint (``Txn.shared``), so the stream, group and consumer
  records they share are read and written back once;
- ``XADD key <id> field value ...`` with an explicit ID (``ms-seq`` or
  ``ms-*``) and no option (a MULTI ... EXEC of a writer that chose its
  IDs, a replica, an import): run the same way, under one savepoint.

Either way, when a command of the run fails, the run is undone and run
again: the commands before the failing one under one savepoint again,
the failing one alone (its error its reply), the rest as a run of its
own (for plain adds, one by one inside the engine verb): the replies and
the store are exactly those of running them one by one from the start,
as Redis's EXEC runs its commands, an error in the middle included.

A command that must wait (XREAD / XREADGROUP ... BLOCK with nothing to
serve) is not answered here: ``run`` returns its (cmd, args, Wait) and
the caller waits (xstream_cli.execution.blocked).

Who imports it: xstream_cli.execution.session and xstream_cli.server.engine.
"""
from functools import partial
from itertools import repeat
from operator import itemgetter

from storage import errors
from storage.codec import AddBlock
from storage.errors import RedisError
from storage.txn import Aborted, Retry, StoreFailure
from xstream_cli.commands import COMMANDS
from xstream_cli.commands.reading import run_key, xreadgroup_run
from xstream_cli.execution import run_command
from xstream_cli.execution.blocked import waits

FATAL = (Retry, StoreFailure, Aborted, KeyboardInterrupt)   # end the batch, never a reply

_ADDS, _SHARED, _ID_ADDS = "adds", "shared", "id adds"
_XREADGROUP = COMMANDS[b"XREADGROUP"]
_XACK = COMMANDS[b"XACK"]
_XADD = COMMANDS[b"XADD"]


def _id_add(args):
    """Whether parsed XADD arguments are an explicit ID's add with no
    option (no NOMKSTREAM, trim or IDMP): the adds that run in runs."""
    o = args[2]
    return type(o.id) is tuple and o.trim is None and not o.nomkstream and o.idmp_pid is None


class _Replies(list):
    """The replies of a run of XREADGROUPs delivered at once."""
    __slots__ = ()


class Added(list):
    """The replies of a run of plain XADDs given with ``add_many``: IDs
    (bytes), or RedisErrors where the one-by-one fallback failed."""
    __slots__ = ()


_first = itemgetter(0)


def _id_texts(items, ids):
    """The new IDs of the adds ``items`` in their ``ms-seq`` text (a
    RedisError left in its place).  The usual run, one stream's entries
    in one millisecond (so consecutive sequence numbers, IDs of one
    stream being increasing), is formatted in one C-level pass.
    ``items`` may be an AddBlock (storage.codec: one stream's)."""
    n = len(ids)
    if n > 1:
        first, last = ids[0], ids[-1]
        if (type(first) is tuple and type(last) is tuple and first[0] == last[0]
                and last[1] - first[1] == n - 1
                and (type(items) is AddBlock or list(map(_first, items)).count(items[0][0]) == n)):
            out = ((b"%d-%%d\n" % first[0]) * n % tuple(range(first[1], last[1] + 1))).split(b"\n")
            out.pop()
            return out
    return [b"%d-%d" % i if type(i) is tuple else i for i in ids]


class Batch:
    """Commands run in the transaction ``tx``, in order.

    ``read_only``: why write commands are refused (their reply is the
    READONLY error), or None.  ``log``: a logger for bugs (an exception
    that is not a RedisError becomes an internal-error reply either way;
    the server also logs it)."""

    def __init__(self, tx, read_only=None, log=None):
        self.tx = tx
        self.read_only = read_only
        self.log = log
        self._kind = None            # _ADDS, _SHARED or _ID_ADDS: what _run holds
        self._run = []               # (out, i, payload) of the pending run
        self._tried = 0              # calls of a shared run begun so far (_call) ...
        self._done = 0               # ... and those that succeeded

    # ------------------------------------------------------------ commands

    def add(self, out, i, key, fields):
        """A plain ``XADD key * fields...``: ``out[i]`` gets its ID."""
        if self.read_only is not None:
            out[i] = errors.read_only(self.read_only)
            return
        self._join(_ADDS, (out, i, (key, fields)))

    def add_all(self, out, items):
        """Plain XADDs, ``items`` of (key, fields): ``out[i]`` gets the ID
        of ``items[i]`` (``add`` of each, in one step)."""
        if self.read_only is not None:
            out[:] = [errors.read_only(self.read_only)] * len(items)
            return
        if self._kind is not _ADDS:
            self.flush()
            self._kind = _ADDS
        self._run.extend(zip(repeat(out), range(len(items)), items))

    def add_many(self, out, i, items):
        """Plain XADDs, ``items`` of (key, fields): ``out[i]`` gets their
        replies as one ``Added``.  ``fields`` may be a list or the text
        form (the values joined by newlines)."""
        if self.read_only is not None:
            out[i] = Added([errors.read_only(self.read_only)] * len(items))
            return
        self._join(_ADDS, (out, i, items))

    def run(self, out, i, cmd, args, wait=True, share=True):
        """The command ``cmd`` with its parsed ``args``: ``out[i]`` gets
        its reply (a RedisError for an error reply).  With ``wait``, a
        blocking read with nothing to serve is not answered: its
        (cmd, args, Wait) is returned.  ``share=False`` keeps it out of
        shared runs (MULTI ... EXEC)."""
        if self.read_only is None:
            if share and (cmd is _XACK or (cmd is _XREADGROUP and args[0].block is None)):
                self._join(_SHARED, (out, i, partial(self._call, cmd, args)))
                return None
            if cmd is _XADD and _id_add(args):
                self._join(_ID_ADDS, (out, i, partial(self._call, cmd, args)))
                return None
        self.flush()
        try:
            if cmd.write and self.read_only is not None:
                raise errors.read_only(self.read_only)
            args, r = run_command(self.tx, cmd, args)
            if r is None and wait:
                w = waits(cmd, args)
                if w is not None:
                    return cmd, args, w
        except RedisError as e:
            r = e
        except FATAL:
            raise
        except Exception as e:       # a bug: its savepoint was rolled back
            r = self._bug(e)
        out[i] = r
        return None

    def call(self, out, i, fn):
        """``fn(tx)`` (a server command such as FLUSHDB): ``out[i]`` gets
        its value."""
        self.flush()
        out[i] = self.alone(partial(fn, self.tx))

    # ------------------------------------------------------------ runs

    def flush(self):
        """Run the pending run; every slot given so far is filled."""
        run = self._run
        if not run:
            return
        self._run = []
        if self._kind is _ADDS:
            self._flush_adds(run)
        else:
            self._flush_shared(run)

    def _join(self, kind, entry):
        if self._kind is not kind:
            self.flush()
            self._kind = kind
        self._run.append(entry)

    def _flush_adds(self, run):
        if len(run) == 1 and type(run[0][2]) is AddBlock:    # script mode's bulk: one block of lines
            out, i, block = run[0]
            out[i] = Added(_id_texts(block, self.tx.add_auto_many(block, each=True)))
            return
        items = []
        for _, _, p in run:
            if type(p) is tuple:
                items.append(p)
            else:
                items += p
        ids = _id_texts(items, self.tx.add_auto_many(items, each=True))   # a refused item: its error
        k = 0
        for out, i, p in run:
            if type(p) is tuple:
                out[i] = ids[k]
                k += 1
            else:
                out[i] = Added(ids[k:k + len(p)])
                k += len(p)

    def _flush_shared(self, run):
        fns = [fn for _, _, fn in run]
        results = self._reads_at_once(fns)
        if results is not None:
            for (out, i, _), r in zip(run, results):
                out[i] = r
            return
        results = []
        k, n = 0, len(fns)
        while k < n:
            rest = fns[k:] if k else fns
            got = self._shared(rest)
            if got is not None:
                results += got
                break
            bad = self._done             # the first that failed
            if bad < 0:                  # no run possible, or a bug: one by one
                results += [self.alone(fn) for fn in rest]
                break
            if bad:                      # those before it succeed again, as one run
                got = self._shared(rest[:bad])
                results += got if got is not None else [self.alone(fn) for fn in rest[:bad]]
            results.append(self.alone(rest[bad]))
            k += bad + 1
        for (out, i, _), r in zip(run, results):
            out[i] = r

    def _reads_at_once(self, fns):
        """A shared run's results when neighbouring XREADGROUPs of one
        stream and group (reading new entries: ``run_key``) are
        delivered as one run each (Txn.read_group_run: their entries read
        at once); None when there are none such, or when anything failed
        (rolled back: the run is then run as usual)."""
        calls, sizes = [], []
        last = None
        for fn in fns:
            cmd, args = fn.args
            key = run_key(args[0]) if cmd is _XREADGROUP else None
            if key is not None and key == last:
                sizes[-1] += 1
                calls[-1].append(args[0])
                continue
            last = key
            sizes.append(1)
            calls.append([args[0]] if key is not None else fn)
        if len(calls) == len(fns):
            return None
        calls = [partial(self._call_run, c) if type(c) is list else c for c in calls]
        try:
            got = self.tx.shared(calls)      # None: a call failed (rolled back), or no savepoints
        except FATAL:
            raise
        except Exception:                    # a bug: rolled back; the usual path finds the command
            if self.log is not None:
                self.log.exception("a run of reads failed")
            return None
        if got is None:
            return None
        out = []
        for n, r in zip(sizes, got):
            if n == 1 and type(r) is not _Replies:
                out.append(r)
            else:
                out += r
        return out

    def _call_run(self, reads):
        self._tried += 1
        r = _Replies(xreadgroup_run(self.tx, reads))
        self._done += 1
        return r

    def _shared(self, fns):
        """``fns`` under one savepoint (Txn.shared): their results; None
        when one failed (nothing kept; ``_done``: how many succeeded
        before it), or -- ``_done`` -1 -- when the transaction cannot
        share or a bug broke the run."""
        if len(fns) == 1:
            self._done = -1
            return None
        self._done = self._tried = 0
        try:
            got = self.tx.shared(fns)
        except FATAL:
            raise
        except Exception:        # a bug: rolled back; one by one finds the command
            if self.log is not None:
                self.log.exception("shared run failed")
            got = None
            self._tried = 0
        if got is None and not self._tried:
            self._done = -1
        return got

    def _call(self, cmd, args):
        self._tried += 1
        r = run_command(self.tx, cmd, args)[1]
        self._done += 1
        return r

    def alone(self, fn):
        """``fn()`` on its own: its value, or its error as the reply."""
        try:
            return fn()
        except RedisError as e:
            return e
        except FATAL:
            raise
        except Exception as e:       # a bug: its savepoint was rolled back
            return self._bug(e)

    def _bug(self, e):
        if self.log is not None:
            self.log.exception("command failed")
        return errors.internal(e)
