"""What the engine runs: ``Item`` (one command: a reply already known,
an engine command parsed by the CLI's own command table, or a function
of the transaction) and ``Job`` (one client's commands, run in order and
answered after the commit), and ``item_for`` (a command's arguments ->
its Item, with the parse of a worker's repeated read kept and shared;
``queue_adds``: a MULTI block's run of plain XADDs queued at once).

Who imports it: xstream_cli.server.engine, .reading, .routing and
.commands; the in-process client (xstream_cli.client) through the engine.
"""
from storage.errors import RedisError
from xstream_cli.commands import COMMANDS, SUBCOMMANDS, lookup, plain_add
from xstream_cli.server.paged import heavy


class Item:
    """One command of a job: a reply already known (a parse error), an
    engine command (``cmd``, ``args``) or a function of the transaction
    (``fn``, for FLUSHDB, DBSIZE, INFO keyspace ...)."""
    __slots__ = ("reply", "cmd", "args", "fn", "write", "array_null", "plain_add", "name", "rejected", "usec",
                 "heavy")

    def __init__(self, reply=None, cmd=None, args=None, fn=None, write=False, plain_add=None, name=None,
                 rejected=False):
        self.reply = reply
        self.cmd = cmd
        self.args = args
        self.fn = fn
        self.plain_add = plain_add   # (key, fields) of a plain "XADD key * f v ...": added in runs
        self.write = write if cmd is None else cmd.write
        self.array_null = cmd is not None and cmd.blocking   # XREAD / XREADGROUP: null arrays in RESP2
        self.name = name if cmd is None else cmd.name       # INFO commandstats (xstream_cli.server.stats)
        self.rejected = rejected     # refused before it ran (a wrong arity): a rejected call
        self.usec = 0                # the engine's time on it (its job's, shared among its items)
        # a read that may pass a page (xstream_cli.server.paged): run in the
        # engine's thread, never the loop's, and encoded a page at a time
        self.heavy = cmd is not None and args is not None and heavy(cmd, args)


def item_for(argv):
    """An engine Item for a command of the table (its parse error as
    the reply when it does not parse)."""
    add = plain_add(argv)
    if add is not None:
        return add_item(add)
    na = len(argv)
    name = argv[0].upper()
    key = None
    if name in _REPEATED and na <= 32:
        key = tuple(argv)
        hit = _parsed.get(key)
        if hit is not None:
            return _again(*hit)
    try:
        cmd = lookup(argv)
    except RedisError as e:
        return Item(reply=e, name=_known_name(argv), rejected=True)
    try:
        args = cmd.parse(argv)
    except RedisError as e:         # it ran, and failed (Redis's commands parse as they run)
        return Item(reply=e, name=cmd.name)
    it = Item(cmd=cmd, args=args)
    if key is not None and not any(isinstance(i, RedisError) for i in args[0].ids):
        if len(_parsed) >= PARSED_MAX:
            _parsed.clear()
        _parsed[key] = (cmd, args, it.heavy)
    return it


def _again(cmd, args, heavy, _new=Item.__new__, _cls=Item):
    """The Item of a read parsed before (``_parsed``): what ``Item(cmd=cmd,
    args=args)`` makes, its ``heavy`` found then, without its tests."""
    it = _new(_cls)
    it.reply = it.fn = it.plain_add = None
    it.cmd = cmd
    it.args = args
    it.write = cmd.write
    it.array_null = cmd.blocking
    it.name = cmd.name
    it.rejected = False
    it.usec = 0
    it.heavy = heavy
    return it


def add_item(add, _new=Item.__new__, _cls=Item):
    """The Item of a plain ``XADD key * field value ...`` (``add``: its
    (key, fields), from plain_add): what ``Item(cmd=XADD, args=(),
    plain_add=add)`` makes, without its tests -- the most frequent
    command of all, and of MULTI blocks of thousands."""
    it = _new(_cls)
    it.reply = it.fn = None
    it.cmd = _XADD
    it.args = ()
    it.plain_add = add
    it.write = _XADD.write
    it.array_null = it.rejected = it.heavy = False
    it.name = _XADD.name
    it.usec = 0
    return it


def queue_adds(queued, cmds, start):
    """Queue the run of plain ``XADD key * field value ...`` that begins
    at ``cmds[start]`` inside MULTI (``queued``: the client's queue):
    their Items, as the server's ``Routing._queue`` would queue each
    (such a command is never refused at queueing), in one loop.  How
    many there were."""
    k = start
    n = len(cmds)
    app = queued.append
    while k < n:
        argv = cmds[k]
        if type(argv) is not list:
            break                        # a ProtocolError: the general loop
        add = plain_add(argv)
        if add is None:
            break
        app(add_item(add))
        k += 1
    return k - start


# A worker sends the same read over and over (XREADGROUP GROUP g c COUNT 10
# BLOCK 5000 STREAMS s >): its parse, frozen options that depend on the
# arguments alone (storage.options), is kept and shared.  Not one whose
# options hold an ID's error (raised later, by the verb).
_REPEATED = {b"XREADGROUP", b"XREAD"}
_parsed = {}
PARSED_MAX = 1024


def _known_name(argv):
    """The commandstats name of a command ``lookup`` refused: a known
    command (or subcommand) with a wrong number of arguments; None for an
    unknown one."""
    name = argv[0].upper()
    if name in COMMANDS:
        return COMMANDS[name].name
    subs = SUBCOMMANDS.get(name)
    if subs is None:
        return None
    if len(argv) < 2:
        return name.decode().lower()
    sub = subs.get(argv[1].upper())
    return None if sub is None else sub.name


class Job:
    """Commands of one client run in order; ``done((replies, blocked))``
    is called after the commit (through ``Engine.deliver``, or in the
    engine thread when there is none): ``replies`` for
    the items that ran, ``blocked`` = (index, cmd, args, Wait) of the
    item that must wait (the items after it did not run), or None."""
    __slots__ = ("items", "done", "exec_", "watched", "write", "owner", "proto")

    def __init__(self, items, done, exec_=False, watched=None, owner=None, proto=2):
        self.items = items
        self.proto = proto           # the client's protocol: a heavy reply is encoded in the engine's thread
        self.done = done
        self.exec_ = exec_
        self.watched = watched       # {key: change counter} of WATCH, for EXEC
        self.owner = owner           # the client's id (Engine._gather), or None
        self.write = items[0].write if len(items) == 1 else any(i.write for i in items)


_XADD = COMMANDS[b"XADD"]
