"""The command table: Redis command name -> how to run it.

``lookup(argv)`` resolves a command (and, for XGROUP / XINFO, its
subcommand), checks the arity as Redis does, and returns the Command.
The table is also what the README's "Redis command -> storage method"
list and the completions are generated from.
"""
from storage import errors
from xstream_cli.commands import groups as g
from xstream_cli.commands import keyspace as k
from xstream_cli.commands import streams as s


class Command:
    """One Redis command (or subcommand) xs implements."""
    __slots__ = ("name", "arity", "handler", "write", "verb")

    def __init__(self, name, arity, handler, write, verb):
        self.name = name          # Redis's full name: "xadd", "xgroup|create"
        self.arity = arity        # Redis arity: n exact, -n at least n
        self.handler = handler    # fn(tx, argv) -> reply value
        self.write = write        # needs a write transaction
        self.verb = verb          # storage method(s) it calls (for the docs)


def _c(name, arity, handler, write, verb):
    return Command(name, arity, handler, write, verb)


COMMANDS = {
    b"XADD": _c("xadd", -5, s.xadd, True, "Txn.add"),
    b"XRANGE": _c("xrange", -4, s.xrange, False, "Txn.range"),
    b"XREVRANGE": _c("xrevrange", -4, s.xrevrange, False, "Txn.range(rev=True)"),
    b"XLEN": _c("xlen", 2, s.xlen, False, "Txn.length"),
    b"XDEL": _c("xdel", -3, s.xdel, True, "Txn.delete_entries"),
    b"XDELEX": _c("xdelex", -5, s.xdelex, True, "Txn.delete_entries_ex"),
    b"XTRIM": _c("xtrim", -4, s.xtrim, True, "Txn.trim"),
    b"XSETID": _c("xsetid", -3, s.xsetid, True, "Txn.set_id"),
    b"XCFGSET": _c("xcfgset", -2, s.xcfgset, True, "Txn.configure_idmp"),
    b"XREAD": _c("xread", -4, s.xread, False, "Txn.read_streams"),
    b"XREADGROUP": _c("xreadgroup", -7, g.xreadgroup, True, "Txn.read_group"),
    b"XACK": _c("xack", -4, g.xack, True, "Txn.ack"),
    b"XACKDEL": _c("xackdel", -6, g.xackdel, True, "Txn.ack_delete"),
    b"XNACK": _c("xnack", -7, g.xnack, True, "Txn.nack"),
    b"XPENDING": _c("xpending", -3, g.xpending, False, "Txn.pending_summary / Txn.pending_range"),
    b"XCLAIM": _c("xclaim", -6, g.xclaim, True, "Txn.claim"),
    b"XAUTOCLAIM": _c("xautoclaim", -6, g.xautoclaim, True, "Txn.autoclaim"),
    b"DEL": _c("del", -2, k.del_, True, "Txn.delete_keys"),
    b"EXISTS": _c("exists", -2, k.exists, False, "Txn.exists"),
    b"TYPE": _c("type", 2, k.type_, False, "Txn.key_type"),
    b"KEYS": _c("keys", 2, k.keys, False, "Txn.keys"),
    b"SCAN": _c("scan", -2, k.scan, False, "Txn.scan"),
    b"RENAME": _c("rename", 3, k.rename, True, "Txn.rename"),
}

SUBCOMMANDS = {
    b"XGROUP": {
        b"CREATE": _c("xgroup|create", -5, g.xgroup_create, True, "Txn.create_group"),
        b"SETID": _c("xgroup|setid", -5, g.xgroup_setid, True, "Txn.set_group_id"),
        b"DESTROY": _c("xgroup|destroy", 4, g.xgroup_destroy, True, "Txn.destroy_group"),
        b"CREATECONSUMER": _c("xgroup|createconsumer", 5, g.xgroup_createconsumer, True,
                              "Txn.create_consumer"),
        b"DELCONSUMER": _c("xgroup|delconsumer", 5, g.xgroup_delconsumer, True, "Txn.delete_consumer"),
        b"HELP": _c("xgroup|help", 2, g.xgroup_help, False, "-"),
    },
    b"XINFO": {
        b"STREAM": _c("xinfo|stream", -3, s.xinfo_stream, False, "Txn.stream_info"),
        b"GROUPS": _c("xinfo|groups", 3, s.xinfo_groups, False, "Txn.groups_info"),
        b"CONSUMERS": _c("xinfo|consumers", 4, s.xinfo_consumers, False, "Txn.consumers_info"),
        b"HELP": _c("xinfo|help", 2, s.xinfo_help, False, "-"),
    },
}

CONTAINER_ARITY = {b"XGROUP": -2, b"XINFO": -2}
NAMES = set(COMMANDS) | set(SUBCOMMANDS)


def _arity_ok(arity, n):
    return n == arity if arity >= 0 else n >= -arity


def lookup(argv):
    """The Command for ``argv`` (bytes, argv[0] the name); raises the
    Redis error for an unknown command, subcommand or a wrong arity."""
    name = argv[0].upper()
    cmd = COMMANDS.get(name)
    if cmd is None:
        subs = SUBCOMMANDS.get(name)
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


def is_command(name):
    """True if ``name`` (bytes or str) is a Redis command xs implements."""
    if isinstance(name, str):
        name = name.encode("utf-8", "surrogateescape")
    return name.upper() in NAMES
