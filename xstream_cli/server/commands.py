"""The connection and server commands of ``xs serve`` (PING, HELLO, AUTH,
CLIENT, INFO, CONFIG, COMMAND, MULTI / EXEC, WATCH ...): ``LOCAL`` maps a
name to (fn(server, client, argv), arity, Redis's name).  Every stream
and keyspace command is the CLI's command table (xstream_cli.commands),
run by the engine thread; nothing here implements a stream command.

Who imports it: the Server's parts (xstream_cli.server.reading, routing) and
the in-process client (xstream_cli.client).
"""
import asyncio
import hmac
import os
import time

from storage import errors
from storage.errors import NOPASS, WRONGPASS, RedisError
from xstream_cli.commands import COMMANDS, SUBCOMMANDS
from xstream_cli.commands.parsing import string2ll
from xstream_cli.output.reply import NULL_ARRAY, OK, Map, Status
from xstream_cli.server.config import REDIS_VERSION
from xstream_cli.server.engine import log
from xstream_cli.server.jobs import Item, item_for
from xstream_cli.server.resp import Raw, Verbatim, encode, encode_replies
from xstream_cli.server.stored_page import xs_page


def _err(text):
    return RedisError(text)


# commands handled by the connection (the rest go to the command table)
LOCAL = {}


def _local(*names, arity):
    def deco(fn):
        for n in names:
            LOCAL[n] = (fn, arity, n.decode().lower())
        return fn
    return deco


LOCAL[b"XS.PAGE"] = (xs_page, 6, "xs.page")      # xs serve's own command


NOAUTH_OK = {b"AUTH", b"HELLO", b"QUIT", b"RESET"}
PROTO_CHANGERS = {b"HELLO", b"RESET"}
NOT_QUEUED = {b"EXEC", b"DISCARD", b"MULTI", b"WATCH", b"QUIT", b"RESET"}


# =================================================================== commands

@_local(b"PING", arity=-1)
def _ping(srv, c, argv):
    if len(argv) > 2:
        return errors.wrong_arity("ping")
    return Status("PONG") if len(argv) == 1 else argv[1]


@_local(b"ECHO", arity=2)
def _echo(srv, c, argv):
    return argv[1]


@_local(b"TIME", arity=1)
def _time(srv, c, argv):
    t = time.time_ns() // 1000
    return [b"%d" % (t // 1000000), b"%d" % (t % 1000000)]


@_local(b"SELECT", arity=2)
def _select(srv, c, argv):
    try:
        n = int(argv[1])
    except ValueError:
        return errors.not_integer()
    if n != 0:
        return errors.db_index_out_of_range()
    return OK


@_local(b"QUIT", arity=-1)
def _quit(srv, c, argv):
    c.closing = True            # the replies before, this OK, then the connection closes
    return OK


@_local(b"RESET", arity=1)
def _reset(srv, c, argv):
    c.multi = None
    c.multi_error = False
    c.watched = None
    c.proto = 2
    c.name = None
    c.authed = srv.config.requirepass is None
    return Status("RESET")


AUTH_FAILURES_PER_S = 100      # server-wide: wrong passwords are answered no faster than this
AUTH_CLIENT_DELAY_MAX_S = 2.0   # a client's own failures: 0.05 s, doubled each time, up to this
AUTH_LOG_EVERY_S = 1.0          # at most one "wrong password" log line per second


def _check_pass(srv, user, password):
    """The password against requirepass in constant time (the user name
    is not a secret: only ``default`` exists)."""
    if user is not None and user != b"default":
        return False
    want = srv.config.requirepass
    return want is not None and hmac.compare_digest(password, want.encode())


def _wrong_password(srv, c):
    """A failed AUTH or HELLO AUTH by ``c``: WRONGPASS, answered only after
    a delay (``c.auth_delay``, slept by the connection): the server's
    budget of AUTH_FAILURES_PER_S and the client's own doubling delay,
    whichever is longer; one log line per AUTH_LOG_EVERY_S at most."""
    now = time.monotonic()
    srv.auth_next = max(now, srv.auth_next) + 1.0 / AUTH_FAILURES_PER_S
    c.auth_failures += 1
    own = min(0.05 * 2 ** (c.auth_failures - 1), AUTH_CLIENT_DELAY_MAX_S)
    c.auth_delay = max(srv.auth_next - now, own)
    srv.auth_failed += 1
    if now >= srv.auth_log_at:
        log.warning("wrong password: %d failed AUTH since the last such line (last by client %d)",
                    srv.auth_failed, c.id)
        srv.auth_failed = 0
        srv.auth_log_at = now + AUTH_LOG_EVERY_S
    return _err(WRONGPASS)


@_local(b"AUTH", arity=-2)
def _auth(srv, c, argv):
    if len(argv) > 3:
        return errors.syntax()
    if srv.config.requirepass is None:
        return _err(NOPASS) if len(argv) == 2 else _err(WRONGPASS) if argv[1] != b"default" else OK
    user = argv[1] if len(argv) == 3 else None
    if not _check_pass(srv, user, argv[-1]):
        return _wrong_password(srv, c)
    c.authed = True
    c.auth_failures = 0
    return OK


@_local(b"HELLO", arity=-1)
def _hello(srv, c, argv):
    proto = c.proto
    i = 1
    if len(argv) > 1:
        try:
            proto = int(argv[1])
        except ValueError:
            return _err("ERR Protocol version is not an integer or out of range")
        if proto not in (2, 3):
            return _err("NOPROTO unsupported protocol version")
        i = 2
    name = None
    authed = c.authed
    while i < len(argv):
        opt = argv[i].upper()
        left = len(argv) - i - 1
        if opt == b"AUTH" and left >= 2:
            if srv.config.requirepass is None:
                if argv[i + 1] != b"default":
                    return _err(WRONGPASS)
            elif not _check_pass(srv, argv[i + 1], argv[i + 2]):
                return _wrong_password(srv, c)
            authed = True
            i += 3
        elif opt == b"SETNAME" and left >= 1:
            name = argv[i + 1]
            if not _valid_name(name):
                return _err("ERR Client names cannot contain spaces, newlines or special characters.")
            i += 2
        else:
            return _err("ERR Syntax error in HELLO option '%s'" % argv[i].decode("utf-8", "replace"))
    if not authed:
        return _err("NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                    "HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and "
                    "select the RESP protocol version at the same time")
    c.authed = True
    c.proto = proto
    if name is not None:
        c.name = name.decode("utf-8", "surrogateescape") or None
    return Map([("server", "redis"), ("version", REDIS_VERSION), ("proto", proto), ("id", c.id),
                ("mode", "standalone"), ("role", "master"), ("modules", [])])


def _valid_name(name):
    return all(33 <= ch <= 126 for ch in name)


@_local(b"CLIENT", arity=-2)
def _client(srv, c, argv):
    sub = argv[1].upper()
    n = len(argv)
    if sub == b"ID" and n == 2:
        return c.id
    if sub == b"GETNAME" and n == 2:
        return None if c.name is None else c.name.encode("utf-8", "surrogateescape")
    if sub == b"SETNAME" and n == 3:
        if not _valid_name(argv[2]):
            return _err("ERR Client names cannot contain spaces, newlines or special characters.")
        c.name = argv[2].decode("utf-8", "surrogateescape") or None
        return OK
    if sub == b"SETINFO" and n == 4:
        attr = argv[2].upper()
        if attr not in (b"LIB-NAME", b"LIB-VER"):
            return _err("ERR Unrecognized option '%s'" % argv[2].decode("utf-8", "replace"))
        if not _valid_name(argv[3]):
            return _err("ERR %s cannot contain spaces, newlines or special characters."
                        % argv[2].decode("utf-8", "replace").lower())
        v = argv[3].decode("utf-8", "surrogateescape")
        if attr == b"LIB-NAME":
            c.lib_name = v
        else:
            c.lib_ver = v
        return OK
    if sub == b"INFO" and n == 2:
        return Verbatim((c.info_line() + "\n").encode())
    if sub == b"LIST":
        clients = list(srv.clients.values())
        if n >= 4 and argv[2].upper() == b"ID":
            try:
                ids = {int(x) for x in argv[3:]}
            except ValueError:
                return _err("ERR Invalid client ID")
            clients = [x for x in clients if x.id in ids]
        elif n != 2:
            return errors.syntax()
        return Verbatim("".join(x.info_line() + "\n" for x in clients).encode())
    if sub == b"KILL" and n >= 3:
        if n == 3:
            targets = [x for x in srv.clients.values() if x.addr == argv[2].decode("latin-1")]
            if not targets:
                return _err("ERR No such client")
            for t in targets:
                srv.kill(t)
            return OK
        targets = list(srv.clients.values())
        skipme = True
        i = 2
        while i + 1 < n:
            k, v = argv[i].upper(), argv[i + 1]
            if k == b"ID":
                try:
                    cid = int(v)
                except ValueError:
                    return _err("ERR client-id should be greater than 0")
                targets = [x for x in targets if x.id == cid]
            elif k == b"ADDR":
                targets = [x for x in targets if x.addr == v.decode("latin-1")]
            elif k == b"LADDR":
                targets = [x for x in targets if x.laddr == v.decode("latin-1")]
            elif k == b"SKIPME":
                if v.lower() not in (b"yes", b"no"):
                    return errors.syntax()
                skipme = v.lower() == b"yes"
            elif k == b"USER":
                if v != b"default":
                    targets = []
            else:
                return errors.syntax()
            i += 2
        if i != n:
            return errors.syntax()
        if skipme:
            targets = [x for x in targets if x is not c]
        for t in targets:
            srv.kill(t)
        return len(targets)
    if sub == b"UNBLOCK" and n == 2:
        return errors.wrong_arity("client|unblock")
    if sub == b"UNBLOCK" and n > 4:
        return errors.subcommand_syntax(argv[1], "CLIENT")
    if sub == b"UNBLOCK":
        cid = string2ll(argv[2])
        if cid is None:
            return errors.not_integer()
        how = b"TIMEOUT" if n == 3 else argv[3].upper()
        if how not in (b"TIMEOUT", b"ERROR"):
            return _err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
        target = srv.clients.get(cid)
        call = None if target is None else target.call
        return 1 if call is not None and call.unblock(how.decode().lower()) else 0
    if sub in (b"NO-EVICT", b"NO-TOUCH") and n == 3:
        return OK
    if sub == b"HELP":
        return [Status(x) for x in ("CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                                    "ID", "INFO", "LIST [ID id ...]", "KILL <ip:port> | KILL <option> <value> ...",
                                    "GETNAME", "SETNAME <name>", "SETINFO <LIB-NAME|LIB-VER> <value>",
                                    "UNBLOCK <clientid> [TIMEOUT|ERROR]", "HELP")]
    return errors.unknown_subcommand(argv[1], "CLIENT")


# ------------------------------------------------------------------- INFO

def _info_text(srv, sections, keyspace):
    cfg = srv.config
    up = time.monotonic() - srv.started_mono
    eng = srv.engine
    s = {
        "server": [("redis_version", REDIS_VERSION), ("redis_mode", "standalone"), ("xs_version", _xs_version()),
                   ("os", os.uname().sysname + " " + os.uname().release), ("arch_bits", 64),
                   ("multiplexing_api", type(srv.loop).__module__.split(".")[0]),      # asyncio or uvloop
                   ("process_id", os.getpid()), ("run_id", srv.run_id),
                   ("tcp_port", cfg.port if not cfg.unixsocket else 0),
                   ("uptime_in_seconds", int(up)), ("uptime_in_days", int(up // 86400)),
                   ("executable", "xs serve"), ("config_file", "")],
        "clients": [("connected_clients", len(srv.clients)), ("maxclients", cfg.maxclients),
                    ("blocked_clients", eng.blocked), ("tracking_clients", 0),
                    ("total_blocking_keys", eng.blocking_keys())],
        "persistence": [("loading", 0), ("storage", "lmdb"), ("store", cfg.db),
                        ("aof_enabled", 1), ("appendfsync", "always" if cfg.durable else "no"),
                        ("commits", eng.commits),
                        ("rdb_changes_since_last_save", eng.dirty)],
        "stats": [("total_connections_received", srv.connections_received),
                  ("total_commands_processed", eng.commands_processed),
                  ("rejected_connections", srv.rejected),
                  ("total_error_replies", srv.stats.error_replies)],
        "replication": [("role", "master"), ("connected_slaves", 0)],
        "commandstats": srv.stats.commandstats(),
        "errorstats": srv.stats.errorstats(),
        "latencystats": srv.stats.latencystats(cfg.latency_percentiles),
        "cluster": [("cluster_enabled", 0)],
        "keyspace": [("db0", "keys=%d,expires=%d,avg_ttl=0" % keyspace)] if keyspace[0] else [],
    }
    # Redis's order; commandstats and latencystats only when asked for, or
    # with all / everything (Redis 7's default sections leave them out)
    order = ["server", "clients", "persistence", "stats", "replication", "commandstats", "errorstats",
             "latencystats", "cluster", "keyspace"]
    want = [x.lower() for x in sections] or ["default"]
    if any(x in ("all", "everything") for x in want):
        picked = order
    elif "default" in want:
        picked = [x for x in order if x not in ("commandstats", "latencystats") or x in want]
    else:
        picked = [x for x in order if x in want]
    out = []
    for name in picked:
        out.append("# %s" % name.capitalize())
        out += ["%s:%s" % kv for kv in s[name]]
        out.append("")
    return Verbatim("\r\n".join(out[:-1]).encode() + b"\r\n") if out else Verbatim(b"")


def _xs_version():
    from xstream_cli import __version__
    return __version__


@_local(b"INFO", arity=-1)
def _info(srv, c, argv):
    sections = [a.decode("utf-8", "replace") for a in argv[1:]]
    if getattr(srv.store, "pending", False):
        # the in-process client's store, not made yet (xstream_cli.client):
        # the server's own sections, and no keys
        return Item(reply=_info_text(srv, sections, (0, 0)))

    def fn(tx):
        return _info_text(srv, sections, (len(tx.stream_names()), tx.expires()))
    return Item(fn=fn)


@_local(b"DBSIZE", arity=1)
def _dbsize(srv, c, argv):
    return Item(fn=lambda tx: len(tx.stream_names()))


@_local(b"FLUSHDB", b"FLUSHALL", arity=-1)
def _flush(srv, c, argv):
    if len(argv) > 2 or (len(argv) == 2 and argv[1].upper() not in (b"ASYNC", b"SYNC")):
        return errors.syntax()

    def fn(tx):
        names = tx.stream_names()
        if names:
            tx.delete_keys(names)        # each key removed is a change (Txn.dirty), as Redis counts them
        return OK
    return Item(fn=fn, write=True)


# ------------------------------------------------------------------ CONFIG

@_local(b"CONFIG", arity=-2)
def _config(srv, c, argv):
    from storage.glob import match
    from storage.verbs.settings import PARAMS as STORE_PARAMS
    from xstream_cli.commands import keyspace
    sub = argv[1].upper()
    params = srv.config.params()
    if sub == b"GET" and len(argv) >= 3:
        pairs = []
        for pat in argv[2:]:
            for name in sorted(params):
                if match(pat.lower(), name.encode()) and name not in dict(pairs):
                    pairs.append((name, params[name][0]()))
        out = [(k.encode(), v.encode()) for k, v in pairs]
        # the store's settings (node sizes): kept in the store, shared with CLI
        # processes, read by the engine thread like every other access to the
        # store (under its lock: a map growth another read adopts must not
        # invalidate a transaction of the engine's)
        return Item(fn=lambda tx: Map(out + keyspace.config_get(tx, *keyspace.parse_config_get(argv)).pairs))
    if sub == b"SET" and len(argv) >= 4 and len(argv) % 2 == 0:
        names = [a.decode("utf-8", "replace").lower() for a in argv[2::2]]
        stored = [n for n in names if n in STORE_PARAMS]
        if stored and len(stored) == len(names):
            return item_for(argv)           # an engine command: committed in the store
        if stored:
            return _err("ERR CONFIG SET failed (possibly related to argument '%s') - a store setting is set "
                        "in a CONFIG SET of its own" % stored[0])
        todo = []
        for i in range(2, len(argv), 2):
            name = argv[i].decode("utf-8", "replace").lower()
            p = params.get(name)
            if p is None:
                return _err("ERR Unknown option or number of arguments for CONFIG SET - '%s'" % name)
            if p[1] is None:
                return _err("ERR CONFIG SET failed (possibly related to argument '%s') - can't set immutable "
                            "config" % name)
            todo.append((name, p[1], argv[i + 1].decode("utf-8", "surrogateescape")))
        try:
            for name, setter, v in todo:
                try:
                    setter(v)
                except ValueError as e:
                    return _err("ERR CONFIG SET failed (possibly related to argument '%s') - %s" % (name, e))
                log.info("CONFIG SET %s by client %d", name, c.id)
        finally:
            srv.stats.tracking = srv.config.latency_tracking       # the hot path reads it there
        return OK
    if sub == b"RESETSTAT" and len(argv) == 2:
        srv.engine.commands_processed = 0
        srv.connections_received = 0
        srv.stats.reset()
        return OK
    if sub == b"REWRITE" and len(argv) == 2:
        return _err("ERR The server is running without a config file")
    if sub in (b"GET", b"SET", b"RESETSTAT", b"REWRITE"):
        return errors.wrong_arity("config|" + sub.decode().lower())
    return errors.unknown_subcommand(argv[1], "CONFIG")


# ----------------------------------------------------------------- COMMAND

_CONN_INFO = {  # name -> (arity, flags, first key, last key, step)
    "ping": (-1, ["fast"], 0, 0, 0), "echo": (2, ["fast"], 0, 0, 0), "select": (2, ["loading", "fast"], 0, 0, 0),
    "hello": (-1, ["noscript", "loading", "fast", "no_auth"], 0, 0, 0), "auth": (-2, ["fast", "no_auth"], 0, 0, 0),
    "client": (-2, [], 0, 0, 0), "quit": (-1, ["fast", "no_auth"], 0, 0, 0), "reset": (1, ["fast", "no_auth"], 0, 0, 0),
    "info": (-1, ["loading"], 0, 0, 0), "command": (-1, ["loading"], 0, 0, 0), "config": (-2, [], 0, 0, 0),
    "flushdb": (-1, ["write"], 0, 0, 0), "flushall": (-1, ["write"], 0, 0, 0), "dbsize": (1, ["readonly", "fast"], 0, 0, 0),  # noqa: E501
    "multi": (1, ["fast", "loading"], 0, 0, 0), "exec": (1, ["loading", "skip_slowlog"], 0, 0, 0),
    "discard": (1, ["fast", "loading"], 0, 0, 0), "watch": (-2, ["fast", "loading"], 1, -1, 1),
    "unwatch": (1, ["fast", "loading"], 0, 0, 0), "time": (1, ["loading", "fast"], 0, 0, 0),
    "xs.page": (6, ["readonly"], 2, 2, 1),
}


def _cmd_info(name):
    """COMMAND INFO's array for a command name (str, lower case), or None."""
    tbl = COMMANDS.get(name.upper().encode())
    if tbl is not None:
        keys = (1, -1 if name in ("del", "exists", "unlink") else 1, 1)
        if name in ("xread", "xreadgroup"):
            keys = (0, 0, 0)
        if name in ("rename", "copy"):
            keys = (1, 2, 1)
        if name in ("keys", "scan"):
            keys = (0, 0, 0)
        flags = ["write" if tbl.write else "readonly"] + (["blocking"] if tbl.blocking else [])
        return [name, tbl.arity, [Status(f) for f in flags]] + list(keys) + [[], [], [], []]
    subs = SUBCOMMANDS.get(name.upper().encode())
    if subs is not None:
        sub = [[s.name, s.arity, [Status("write" if s.write else "readonly")], 2, 2, 1, [], [], [], []]
               for s in subs.values()]
        return [name, -2, [], 0, 0, 0, [], [], [], sub]
    c = _CONN_INFO.get(name)
    if c is not None:
        return [name, c[0], [Status(f) for f in c[1]], c[2], c[3], c[4], [], [], [], []]
    return None


def _all_names():
    return sorted({n.decode().lower() for n in COMMANDS} | {n.decode().lower() for n in SUBCOMMANDS}
                  | set(_CONN_INFO))


@_local(b"COMMAND", arity=-1)
def _command(srv, c, argv):
    if len(argv) == 1:
        return [_cmd_info(n) for n in _all_names()]
    sub = argv[1].upper()
    if sub == b"COUNT" and len(argv) == 2:
        return len(_all_names())
    if sub == b"INFO":
        names = [a.decode("utf-8", "replace").lower() for a in argv[2:]] or _all_names()
        return [_cmd_info(n) for n in names]
    if sub == b"DOCS":
        from xstream_cli.server.docs import command_docs
        names = [a.decode("utf-8", "replace").lower() for a in argv[2:]] or _all_names()
        pairs = []
        for n in names:
            if _cmd_info(n) is None:
                continue
            key = n.upper().encode()
            pairs.append((n, command_docs(n, COMMANDS.get(key), SUBCOMMANDS.get(key))))
        return Map(pairs)
    if sub == b"LIST" and len(argv) == 2:
        return [n.encode() for n in _all_names()]
    if sub == b"GETKEYS" and len(argv) >= 3:
        return _err("ERR COMMAND GETKEYS is not supported by xs serve")
    return errors.unknown_subcommand(argv[1], "COMMAND")


# ------------------------------------------------------------- MULTI / EXEC

@_local(b"MULTI", arity=1)
def _multi(srv, c, argv):
    if c.multi is not None:
        return _err("ERR MULTI calls can not be nested")
    c.multi = []
    c.multi_error = False
    return OK


@_local(b"DISCARD", arity=1)
def _discard(srv, c, argv):
    if c.multi is None:
        return _err("ERR DISCARD without MULTI")
    c.multi = None
    c.multi_error = False
    c.watched = None
    return OK


@_local(b"WATCH", arity=-2)
def _watch(srv, c, argv):
    if c.multi is not None:
        return _err("ERR WATCH inside MULTI is not allowed")
    keys = argv[1:]

    def fn(tx):
        marks = tx.change_counters(keys, watch=True)
        w = dict(c.watched or {})
        for k, v in zip(keys, marks):
            w.setdefault(k, v)
        c.watched = w
        return OK
    return Item(fn=fn)


@_local(b"UNWATCH", arity=1)
def _unwatch(srv, c, argv):
    c.watched = None
    return OK


@_local(b"EXEC", arity=1)
async def _exec(srv, c, argv):
    if c.multi is None:
        return _err("ERR EXEC without MULTI")
    queued, c.multi = c.multi, None
    failed, c.multi_error = c.multi_error, False
    watched, c.watched = c.watched, None
    if failed:
        return _err("EXECABORT Transaction discarded because of previous errors.")
    if set(map(type, queued)) == _ITEMS:
        items = queued                   # engine commands only, parsed when queued (Server._queue)
    else:
        items = _exec_items(srv, c, queued)
    replies, _ = await srv._run(items, exec_=True, watched=watched, proto=c.proto)
    if replies is None:
        return Raw(encode(NULL_ARRAY, c.proto))
    srv.stats.replies(items, replies)         # each an INFO commandstats call, as in Redis
    return Raw(b"*%d\r\n%s" % (len(items), encode_replies(items, replies, c.proto)))


_ITEMS = {Item}


def _exec_items(srv, c, queued):
    """EXEC's Items of the commands ``queued``: engine commands as they
    were queued, server commands run now, as Redis runs them."""
    items = []
    for a in queued:
        if type(a) is Item:              # an engine command, parsed when queued (Server._queue)
            items.append(a)
            continue
        r = LOCAL[a[0].upper()][0](srv, c, a)
        if asyncio.iscoroutine(r):
            r.close()
            r = _err("ERR command not allowed inside a transaction")
        it = r if isinstance(r, Item) else Item(reply=r)
        if it.cmd is None and it.name is None:
            it.name = a[0].decode("latin-1").lower()
        items.append(it)
    return items

