"""Consumer-group commands: grammar, parser, one storage call, reply."""
from storage import errors
from storage.ids import MAX_ID, parse_id, parse_range_id
from storage.options import ClaimOptions, NackOptions, PendingOptions
from xstream_cli.commands.parsing import ll
from xstream_cli.commands.streams import Blocked, parse_ids_block, parse_read, read_reply
from xstream_cli.reply import OK, Status

XGROUP_HELP = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
]


def _entries_read(arg):
    v = ll(arg)
    if v < 0 and v != -1:
        raise errors.entries_read_invalid()
    return v


def _group_start(arg):
    return b"$" if arg == b"$" else parse_id(arg, 0, strict=True)


def xgroup_create(tx, argv):
    """XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read]"""
    mk = False
    er = -1
    i, n = 5, len(argv)
    while i < n:
        u = argv[i].upper()
        if u == b"MKSTREAM":
            mk = True
            i += 1
        elif u == b"ENTRIESREAD" and i + 1 < n:
            er = _entries_read(argv[i + 1])
            i += 2
        else:
            raise errors.subcommand_syntax(argv[1], "XGROUP")
    if tx.meta(argv[2]) is None and not mk:
        raise errors.xgroup_mkstream_needed()
    tx.create_group(argv[2], argv[3], _group_start(argv[4]), mk, er)
    return OK


def xgroup_setid(tx, argv):
    """XGROUP SETID key group <id | $> [ENTRIESREAD entries-read]"""
    er = -1
    if len(argv) == 7:
        if argv[5].upper() != b"ENTRIESREAD":
            raise errors.subcommand_syntax(argv[1], "XGROUP")
        er = _entries_read(argv[6])
    elif len(argv) != 5:
        raise errors.subcommand_syntax(argv[1], "XGROUP")
    start = b"$" if argv[4] == b"$" else None
    tx._need_group(argv[2], argv[3])
    if start is None:
        start = parse_id(argv[4], 0)
    tx.set_group_id(argv[2], argv[3], start, er)
    return OK


def xgroup_destroy(tx, argv):
    """XGROUP DESTROY key group"""
    return tx.destroy_group(argv[2], argv[3])


def xgroup_createconsumer(tx, argv):
    """XGROUP CREATECONSUMER key group consumer"""
    return tx.create_consumer(argv[2], argv[3], argv[4])


def xgroup_delconsumer(tx, argv):
    """XGROUP DELCONSUMER key group consumer"""
    return tx.delete_consumer(argv[2], argv[3], argv[4])


def xgroup_help(tx, argv):
    """XGROUP HELP"""
    return [Status(x) for x in XGROUP_HELP]


# -------------------------------------------------------------- XREADGROUP

def xreadgroup(tx, argv):
    """XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT n] [MAXSIZE bytes]
    [BLOCK milliseconds] [CLAIM min-idle-time] [NOACK] STREAMS key [key ...] id [id ...]"""
    o = parse_read(argv, True)
    res = tx.read_group(o)
    if res or o.block is None or any(i != b">" for i in o.ids):
        return read_reply(res)

    def retry(t):
        return read_reply(t.read_group(o)) or None

    wake = None
    if o.claim is not None:
        def wake(t):
            return t.claim_wait_ms(o.keys, o.group, o.claim)
    return Blocked(o.keys, o.block, retry, wake, shared=o.group)


# -------------------------------------------------------------- XACK & co

def xack(tx, argv):
    """XACK key group id [id ...]"""
    m = tx.meta(argv[1])
    if m is None or tx.get_group(m, argv[2]) is None:
        return 0
    ids = [parse_id(a, 0, strict=True) for a in argv[3:]]
    return tx.ack(argv[1], argv[2], ids)


def xackdel(tx, argv):
    """XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]"""
    policy, raw = parse_ids_block(argv, 3)
    m = tx.meta(argv[1])
    if m is None or tx.get_group(m, argv[2]) is None:
        return [-1] * len(raw)
    ids = [parse_id(a, 0, strict=True) for a in raw]
    return tx.ack_delete(argv[1], argv[2], ids, policy)


NACK_MODES = {b"SILENT": "silent", b"FAIL": "fail", b"FATAL": "fatal"}


def xnack(tx, argv):
    """XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count] [FORCE]"""
    m = tx.meta(argv[1])
    if m is None or tx.get_group(m, argv[2]) is None:
        raise errors.nogroup_key(argv[1], argv[2])
    mode = NACK_MODES.get(argv[3].upper())
    if mode is None:
        raise errors.nack_mode()
    i, n = 4, len(argv)
    raw = None
    retry = None
    force = False
    while i < n:
        u = argv[i].upper()
        if u == b"IDS" and i + 1 < n:
            num = ll(argv[i + 1], errors.nack_numids)
            if num <= 0 or num > 2147483647:
                raise errors.nack_numids()
            if num > n - i - 2:
                raise errors.nack_numids_mismatch()
            raw = argv[i + 2:i + 2 + num]
            i += 2 + num
        elif u == b"FORCE":
            force = True
            i += 1
        elif u == b"RETRYCOUNT" and i + 1 < n:
            retry = ll(argv[i + 1])
            if retry < 0:
                raise errors.nack_retrycount()
            i += 2
        else:
            raise errors.nack_option(argv[i])
    if raw is None:
        raise errors.nack_ids_expected()
    ids = tuple(parse_id(a, 0, strict=True) for a in raw)
    return tx.nack(argv[1], argv[2], NackOptions(mode, ids, retry, force))


# ---------------------------------------------------------------- XPENDING

def xpending(tx, argv):
    """XPENDING key group [[IDLE min-idle-time] start end count [consumer]]"""
    n = len(argv)
    if n != 3 and (n < 6 or n > 9):
        raise errors.syntax()
    if n == 3:
        count, first, last, owners = tx.pending_summary(argv[1], argv[2])
        return [count, first, last,
                None if owners is None else [[name, b"%d" % k] for name, k in owners]]
    at = 3
    min_idle = 0
    if argv[3].upper() == b"IDLE":
        min_idle = ll(argv[4])
        if n < 8:
            raise errors.syntax()
        at = 5
    count = ll(argv[at + 2])
    if count < 0:
        count = 0
    start = parse_range_id(argv[at], 0, True)
    end = parse_range_id(argv[at + 1], MAX_ID[1], False)
    consumer = argv[at + 3] if at + 3 < n else None
    rows = tx.pending_range(argv[1], argv[2], PendingOptions(start, end, count, consumer, min_idle))
    return [list(r) for r in rows]


# ------------------------------------------------------------------ XCLAIM

def xclaim(tx, argv):
    """XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms]
    [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]"""
    tx._need_pending_group(argv[1], argv[2])
    min_idle = ll(argv[4], errors.invalid_min_idle)
    if min_idle < 0:
        min_idle = 0
    ids = []
    j, n = 5, len(argv)
    while j < n:
        try:
            ids.append(parse_id(argv[j], 0, strict=True))
        except errors.RedisError:
            break
        j += 1
    idle = time = retry = lastid = None
    force = justid = False
    while j < n:
        u = argv[j].upper()
        more = j + 1 < n
        if u == b"FORCE":
            force = True
        elif u == b"JUSTID":
            justid = True
        elif u == b"IDLE" and more:
            j += 1
            idle = ll(argv[j], errors.invalid_idle)
            time = None
        elif u == b"TIME" and more:
            j += 1
            time = ll(argv[j], errors.invalid_time)
            idle = None
        elif u == b"RETRYCOUNT" and more:
            j += 1
            retry = ll(argv[j], errors.invalid_retrycount)
        elif u == b"LASTID" and more:
            j += 1
            lastid = parse_id(argv[j], 0, strict=True)
        else:
            raise errors.xclaim_option(argv[j])
        j += 1
    o = ClaimOptions(idle, time, retry if retry is None or retry >= 0 else None, force, justid, lastid)
    return tx.claim(argv[1], argv[2], argv[3], min_idle, ids, o)


def xautoclaim(tx, argv):
    """XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]"""
    min_idle = ll(argv[4], errors.invalid_min_idle_autoclaim)
    if min_idle < 0:
        min_idle = 0
    start = parse_range_id(argv[5], 0, True)
    count = 100
    justid = False
    j, n = 6, len(argv)
    while j < n:
        u = argv[j].upper()
        if u == b"COUNT" and j + 1 < n:
            count = ll(argv[j + 1], errors.count_positive)
            if count < 1 or count > (1 << 63) // 16:
                raise errors.count_positive()
            j += 1
        elif u == b"JUSTID":
            justid = True
        else:
            raise errors.syntax()
        j += 1
    nxt, claimed, deleted = tx.autoclaim(argv[1], argv[2], argv[3], min_idle, start, count, justid)
    return [nxt, claimed, deleted]
