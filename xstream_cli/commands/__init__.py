"""The command table: Redis command name -> how to run it.

A command is its grammar (the docstring of its parser), a parser that
checks the arguments without touching the store and returns the
arguments of one engine verb, and a run function that makes that one
call (storage.txn.Txn) and returns the reply value.

``lookup(argv)`` resolves a command (and, for XGROUP / XINFO, its
subcommand), checks the arity as Redis does, and returns the Command.
The table is also what the man pages, the completions and the README's
command table are generated from (tools/gen_docs.py).
"""
from storage import errors

# The modules of the parsers and run functions, imported when a command of
# theirs is first used: a one-shot ``xs XLEN`` loads streams.py alone.
S, R, G, K = "streams", "reading", "groups", "keyspace"


def _module(where):
    """The module of the commands ``where`` (S, R, G or K) names."""
    if where == S:
        from xstream_cli.commands import streams as m
    elif where == R:
        from xstream_cli.commands import reading as m
    elif where == G:
        from xstream_cli.commands import groups as m
    else:
        from xstream_cli.commands import keyspace as m
    return m


class Command:
    """One Redis command (or subcommand) xs implements.

    ``parse``, ``run`` and ``prepare`` are functions of one module of
    this package, named in the table and looked up on first use."""
    __slots__ = ("name", "arity", "parse", "run", "write", "verb", "blocking", "prepare", "_where")

    def __init__(self, name, arity, where, parse, run, write, verb, blocking=False, prepare=None):
        self.name = name          # Redis's full name: "xadd", "xgroup|create"
        self.arity = arity        # Redis arity: n exact, -n at least n
        self.write = write        # needs a write transaction
        self.verb = verb          # the Txn method(s) it calls (for the docs)
        self.blocking = blocking  # may wait (BLOCK): its one argument is ReadOptions
        # in module ``where``: parse: fn(argv) -> the verb's arguments (a
        # tuple); run: fn(tx, *arguments) -> reply value; prepare (or
        # None): fn(tx, *arguments) -> arguments, before waiting
        self._where = (where, parse, run, prepare)

    def __getattr__(self, attr):
        """``parse``, ``run`` and ``prepare`` on first use."""
        if attr not in ("parse", "run", "prepare"):
            raise AttributeError(attr)
        self.load()
        return getattr(self, attr)

    def load(self):
        """Set ``parse``, ``run`` and ``prepare`` (importing their module)."""
        where, parse, run, prepare = self._where
        m = _module(where)
        self.parse = getattr(m, parse)
        self.run = getattr(m, run)
        self.prepare = None if prepare is None else getattr(m, prepare)

    @property
    def grammar(self):
        """The command's grammar: the first paragraph of its parser's
        docstring, on one line."""
        doc = (self.parse.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())


_c = Command


_COMMANDS = {
    b"XADD": _c("xadd", -5, S, "parse_xadd", "xadd", True, "add"),
    b"XRANGE": _c("xrange", -4, S, "parse_xrange", "xrange", False, "range"),
    b"XREVRANGE": _c("xrevrange", -4, S, "parse_xrevrange", "xrange", False, "range"),
    b"XLEN": _c("xlen", 2, S, "parse_xlen", "xlen", False, "length"),
    b"XDEL": _c("xdel", -3, S, "parse_xdel", "xdel", True, "delete_entries"),
    b"XDELEX": _c("xdelex", -5, S, "parse_xdelex", "xdelex", True, "delete_entries_ex"),
    b"XTRIM": _c("xtrim", -4, S, "parse_xtrim", "xtrim", True, "trim"),
    b"XSETID": _c("xsetid", -3, S, "parse_xsetid", "xsetid", True, "set_id"),
    b"XCFGSET": _c("xcfgset", -2, S, "parse_xcfgset", "xcfgset", True, "configure_idmp"),
    b"XIDMPRECORD": _c("xidmprecord", 5, S, "parse_xidmprecord", "xidmprecord", True, "record_idmp"),
    b"XREAD": _c("xread", -4, R, "parse_xread", "xread", False, "read_streams",
                 blocking=True, prepare="prepare_xread"),
    b"XREADGROUP": _c("xreadgroup", -7, R, "parse_xreadgroup", "xreadgroup", True, "read_group", blocking=True),
    b"XACK": _c("xack", -4, G, "parse_xack", "xack", True, "ack"),
    b"XACKDEL": _c("xackdel", -6, G, "parse_xackdel", "xackdel", True, "ack_delete"),
    b"XNACK": _c("xnack", -7, G, "parse_xnack", "xnack", True, "nack"),
    b"XPENDING": _c("xpending", -3, G, "parse_xpending", "xpending", False, "pending_summary / pending_range"),
    b"XCLAIM": _c("xclaim", -6, G, "parse_xclaim", "xclaim", True, "claim"),
    b"XAUTOCLAIM": _c("xautoclaim", -6, G, "parse_xautoclaim", "xautoclaim", True, "autoclaim"),
    b"DEL": _c("del", -2, K, "parse_del", "del_", True, "delete_keys"),
    b"UNLINK": _c("unlink", -2, K, "parse_unlink", "del_", True, "delete_keys"),
    b"EXISTS": _c("exists", -2, K, "parse_exists", "exists", False, "exists"),
    b"TYPE": _c("type", 2, K, "parse_type", "type_", False, "key_type"),
    b"KEYS": _c("keys", 2, K, "parse_keys", "keys", False, "keys"),
    b"SCAN": _c("scan", -2, K, "parse_scan", "scan", False, "scan"),
    b"RENAME": _c("rename", 3, K, "parse_rename", "rename", True, "rename"),
    b"COPY": _c("copy", -3, K, "parse_copy", "copy", True, "copy"),
    # key expiry
    b"EXPIRE": _c("expire", -3, K, "parse_expire", "expire", True, "expire"),
    b"PEXPIRE": _c("pexpire", -3, K, "parse_pexpire", "expire", True, "expire"),
    b"EXPIREAT": _c("expireat", -3, K, "parse_expireat", "expire", True, "expire"),
    b"PEXPIREAT": _c("pexpireat", -3, K, "parse_pexpireat", "expire", True, "expire"),
    b"TTL": _c("ttl", 2, K, "parse_ttl", "ttl", False, "expire_time"),
    b"PTTL": _c("pttl", 2, K, "parse_pttl", "ttl", False, "expire_time"),
    b"EXPIRETIME": _c("expiretime", 2, K, "parse_expiretime", "ttl", False, "expire_time"),
    b"PEXPIRETIME": _c("pexpiretime", 2, K, "parse_pexpiretime", "ttl", False, "expire_time"),
    b"PERSIST": _c("persist", 2, K, "parse_persist", "persist", True, "persist"),
    # DUMP / RESTORE: Redis's serialization (issue 26, item 7)
    b"DUMP": _c("dump", 2, K, "parse_dump", "dump", False, "dump_value"),
    b"RESTORE": _c("restore", -4, K, "parse_restore", "restore", True, "restore_value"),
}

_SUBCOMMANDS = {
    b"XGROUP": {
        b"CREATE": _c("xgroup|create", -5, G, "parse_xgroup_create", "xgroup_create", True, "create_group"),
        b"SETID": _c("xgroup|setid", -5, G, "parse_xgroup_setid", "xgroup_setid", True, "set_group_id"),
        b"DESTROY": _c("xgroup|destroy", 4, G, "parse_xgroup_destroy", "xgroup_destroy", True, "destroy_group"),
        b"CREATECONSUMER": _c("xgroup|createconsumer", 5, G, "parse_xgroup_createconsumer", "xgroup_createconsumer",
                              True, "create_consumer"),
        b"DELCONSUMER": _c("xgroup|delconsumer", 5, G, "parse_xgroup_delconsumer", "xgroup_delconsumer", True,
                           "delete_consumer"),
        b"HELP": _c("xgroup|help", 2, G, "parse_xgroup_help", "xgroup_help", False, "-"),
    },
    b"CONFIG": {
        b"GET": _c("config|get", -3, K, "parse_config_get", "config_get", False, "settings"),
        b"SET": _c("config|set", -4, K, "parse_config_set", "config_set", True, "configure"),
    },
    b"XINFO": {
        b"STREAM": _c("xinfo|stream", -3, S, "parse_xinfo_stream", "xinfo_stream", False, "stream_info"),
        b"GROUPS": _c("xinfo|groups", 3, S, "parse_xinfo_groups", "xinfo_groups", False, "groups_info"),
        b"CONSUMERS": _c("xinfo|consumers", 4, S, "parse_xinfo_consumers", "xinfo_consumers", False,
                         "consumers_info"),
        b"HELP": _c("xinfo|help", 2, S, "parse_xinfo_help", "xinfo_help", False, "-"),
    },
}

NAMES = set(_COMMANDS) | set(_SUBCOMMANDS)


def __getattr__(name):
    """``COMMANDS`` (name -> Command) and ``SUBCOMMANDS`` (name -> its
    subcommands' Commands), every command's functions loaded: the table
    as the docs, the prompt, script mode and xs serve use it (xs serve
    imports them all at start, not at a command's first use).  The
    one-shot path asks ``lookup`` for one command instead."""
    if name in ("COMMANDS", "SUBCOMMANDS"):
        for cmd in _every():
            cmd.load()
        globals()["COMMANDS"], globals()["SUBCOMMANDS"] = _COMMANDS, _SUBCOMMANDS
        return globals()[name]
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def _every():
    yield from _COMMANDS.values()
    for subs in _SUBCOMMANDS.values():
        yield from subs.values()


def _arity_ok(arity, n):
    return n == arity if arity >= 0 else n >= -arity


def lookup(argv):
    """The Command for ``argv`` (bytes, argv[0] the name); raises the
    Redis error for an unknown command, subcommand or a wrong arity."""
    name = argv[0].upper()
    cmd = _COMMANDS.get(name)
    if cmd is None:
        subs = _SUBCOMMANDS.get(name)
        if subs is None:
            raise errors.unknown_command(argv[0], argv[1:])
        if len(argv) < 2:
            raise errors.wrong_arity(name.decode().lower())
        cmd = subs.get(argv[1].upper())
        if cmd is None:
            raise errors.unknown_subcommand(argv[1], name.decode())
    if not _arity_ok(cmd.arity, len(argv)):
        raise errors.wrong_arity(cmd.name)
    return cmd


def help_request(argv):
    """The command name whose help ``argv`` asks for (``XADD --help``,
    ``XGROUP CREATE --help``), or None.  ``-h`` counts only where one
    argument would be a wrong arity anyway: ``XLEN -h`` is a stream."""
    if argv[-1] not in (b"--help", b"-h"):
        return None
    name = argv[0].upper()
    cmd = _COMMANDS.get(name)
    if cmd is None:
        subs = _SUBCOMMANDS.get(name)
        if subs is None:
            return None
        if len(argv) == 2:                      # XGROUP --help
            return name.decode()
        cmd = subs.get(argv[1].upper())
        if cmd is None or len(argv) != 3:
            return None
        words = 2
    else:
        words = 1
    if len(argv) != words + 1:
        return None
    if argv[-1] == b"-h" and _arity_ok(cmd.arity, len(argv)):
        return None
    return " ".join(a.decode() for a in argv[:words]).upper()


def plain_add(argv):
    """(key, fields) when ``argv`` is a plain ``XADD key * field value
    ...`` (no option, an automatic ID, whole pairs): what the batch
    driver adds in runs (Batch.add); else None.  The one test of it, for
    script mode and xs serve alike."""
    na = len(argv)
    if na >= 5 and na & 1 and argv[2] == b"*" and argv[0].upper() == b"XADD":
        return argv[1], argv[3:]
    return None


def opens_for_writing(cmd, args):
    """Whether the command ``cmd`` with its parsed ``args`` needs the
    store open for writing: a write, or a read that blocks (it makes and
    watches the store's notification files).  Anything else (XLEN,
    XRANGE, XINFO, XREAD without BLOCK, ...) runs on a read-only open."""
    return cmd.write or (cmd.blocking and args[0].block is not None)


# ------------------------------------ a name both Redis's and a porcelain's
# RESTORE (issue 26) is Redis's command, and ``xs restore FILE`` the
# porcelain's snapshot restore.  On the command line, the lower-case name
# used the porcelain's way -- fewer arguments than Redis's command takes,
# or one of the porcelain's options -- is the porcelain; anything else is
# Redis's command (script mode and xs serve always mean Redis's).
TWINS = {"restore": (3, frozenset(("--replace", "--check", "-q", "--quiet", "-h", "--help", "--db", "--no-sync",
                                   "--from", "--at", "--at-id", "--list")))}       # --from ...: issue 41


def porcelain_use(args):
    """Whether ``args`` (str: the command's name, then its arguments) mean
    the porcelain command of a name that is a Redis command too."""
    twin = TWINS.get(args[0]) if args else None
    if twin is None:
        return False
    least, options = twin
    rest = [a for a in args[1:] if isinstance(a, str)]
    return len(args) - 1 < least or any(a in options or a.startswith("--db=") for a in rest)


def is_command(name):
    """True if ``name`` (bytes or str) is a Redis command xs implements."""
    if isinstance(name, str):
        name = name.encode("utf-8", "surrogateescape")
    return name.upper() in NAMES
