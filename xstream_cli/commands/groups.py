"""Consumer-group commands: XGROUP, XACK, XACKDEL, XNACK, XPENDING,
XCLAIM, XAUTOCLAIM (XREADGROUP: xstream_cli/commands/reading.py).  ``parse_<cmd>(argv)`` (the grammar is its
docstring) returns one engine verb's arguments without touching the
store; ``<cmd>(tx, *args)`` makes the call and returns the reply value.
"""
from storage import errors
from storage.ids import MAX_ID, fmt, parse_id, parse_range_id
from storage.options import AutoClaimOptions, ClaimOptions, GroupOptions, IdsOptions, NackOptions, PendingOptions
from xstream_cli.commands.parsing import deferring, ll
from xstream_cli.commands.streams import _ids, parse_ids_block
from xstream_cli.output.reply import NULL_ARRAY, OK, Status, entry_rows

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


# ================================================================= XGROUP

def _xgroup_options(argv, create):
    """xgroupCommand's option loop, from argv[5]: (mkstream, entries_read).
    Its errors come before any key lookup."""
    mk = False
    er = -1
    i, n = 5, len(argv)
    while i < n:
        u = argv[i].upper()
        if create and u == b"MKSTREAM":
            mk = True
            i += 1
        elif u == b"ENTRIESREAD" and i + 1 < n:
            er = ll(argv[i + 1])
            if er < 0 and er != -1:
                raise errors.entries_read_invalid()
            i += 2
        else:
            raise errors.subcommand_syntax(argv[1], "XGROUP")
    return mk, er


def parse_xgroup_create(argv):
    """XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read]"""
    mk, er = _xgroup_options(argv, True)
    start = None
    with deferring() as d:      # after the key check, as Redis does
        if len(argv) > 8:
            raise errors.subcommand_syntax(argv[1], "XGROUP")
        start = b"$" if argv[4] == b"$" else parse_id(argv[4], 0, strict=True)
    return argv[2], argv[3], GroupOptions(start, mk, er, d.error)


def xgroup_create(tx, key, group, opts):
    tx.create_group(key, group, opts)
    return OK


def parse_xgroup_setid(argv):
    """XGROUP SETID key group <id | $> [ENTRIESREAD entries-read]"""
    _, er = _xgroup_options(argv, False)
    start = None
    with deferring() as d:      # after the key and group checks
        if len(argv) not in (5, 7):
            raise errors.subcommand_syntax(argv[1], "XGROUP")
        start = b"$" if argv[4] == b"$" else parse_id(argv[4], 0)
    return argv[2], argv[3], GroupOptions(start, False, er, d.error)


def xgroup_setid(tx, key, group, opts):
    tx.set_group_id(key, group, opts)
    return OK


def parse_xgroup_destroy(argv):
    """XGROUP DESTROY key group"""
    return argv[2], argv[3]


def xgroup_destroy(tx, key, group):
    return tx.destroy_group(key, group)


def parse_xgroup_createconsumer(argv):
    """XGROUP CREATECONSUMER key group consumer"""
    return argv[2], argv[3], argv[4]


def xgroup_createconsumer(tx, key, group, consumer):
    return tx.create_consumer(key, group, consumer)


def parse_xgroup_delconsumer(argv):
    """XGROUP DELCONSUMER key group consumer"""
    return argv[2], argv[3], argv[4]


def xgroup_delconsumer(tx, key, group, consumer):
    return tx.delete_consumer(key, group, consumer)


def parse_xgroup_help(argv):
    """XGROUP HELP"""
    return ()


def xgroup_help(tx):
    return [Status(x) for x in XGROUP_HELP]


# ============================================================== XACK & co

def parse_xack(argv):
    """XACK key group id [id ...]"""
    ids, err = _ids(argv[3:])
    return argv[1], argv[2], IdsOptions(ids, len(argv) - 3, deferred=err)


def xack(tx, key, group, opts):
    return tx.ack(key, group, opts)


def parse_xackdel(argv):
    """XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]"""
    return argv[1], argv[2], parse_ids_block(argv, 3)


def xackdel(tx, key, group, opts):
    return tx.ack_delete(key, group, opts)


NACK_MODES = {b"SILENT": "silent", b"FAIL": "fail", b"FATAL": "fatal"}


def parse_xnack(argv):
    """XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count] [FORCE]"""
    mode = None
    raw = retry = None
    force = False
    ids = ()
    with deferring() as d:      # Redis checks key and group first
        mode = NACK_MODES.get(argv[3].upper())
        if mode is None:
            raise errors.nack_mode()
        i, n = 4, len(argv)
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
    return argv[1], argv[2], NackOptions(mode or "fail", ids, retry, force, d.error)


def xnack(tx, key, group, opts):
    return tx.nack(key, group, opts)


# =============================================================== XPENDING

def parse_xpending(argv):
    """XPENDING key group [[IDLE min-idle-time] start end count [consumer]]"""
    n = len(argv)
    if n != 3 and (n < 6 or n > 9):
        raise errors.syntax()
    if n == 3:
        return argv[1], argv[2], None
    at = 3
    min_idle = 0
    if argv[3].upper() == b"IDLE":
        min_idle = ll(argv[4])
        if n < 8:
            raise errors.syntax()
        at = 5
    count = max(ll(argv[at + 2]), 0)
    start = parse_range_id(argv[at], 0, True)
    end = parse_range_id(argv[at + 1], MAX_ID[1], False)
    consumer = argv[at + 3] if at + 3 < n else None
    return argv[1], argv[2], PendingOptions(start, end, count, consumer, min_idle)


def xpending(tx, key, group, opts):
    if opts is None:
        s = tx.pending_summary(key, group)
        if not s.count:
            return [0, None, None, NULL_ARRAY]          # Redis: the consumers, a null array
        return [s.count, fmt(s.first), fmt(s.last), [[name, b"%d" % k] for name, k in s.consumers]]
    return [[fmt(r.id), r.consumer, r.idle, r.deliveries] for r in tx.pending_range(key, group, opts)]


# ================================================================= XCLAIM

def parse_xclaim(argv):
    """XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms]
    [TIME unix-time-milliseconds] [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]"""
    min_idle = 0
    ids = []
    idle = time = retry = lastid = None
    force = justid = False
    with deferring() as d:      # Redis checks key and group first
        min_idle = max(ll(argv[4], errors.invalid_min_idle), 0)
        j, n = 5, len(argv)
        while j < n:
            try:
                ids.append(parse_id(argv[j], 0, strict=True))
            except errors.RedisError:
                break
            j += 1
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
    retry = retry if retry is None or retry >= 0 else None
    return argv[1], argv[2], argv[3], ClaimOptions(min_idle, tuple(ids), idle, time, retry, force, justid,
                                                   lastid, d.error)


def xclaim(tx, key, group, consumer, opts):
    return entry_rows(tx.claim(key, group, consumer, opts))


def parse_xautoclaim(argv):
    """XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]"""
    min_idle = max(ll(argv[4], errors.invalid_min_idle_autoclaim), 0)
    start = parse_range_id(argv[5], 0, True)
    count = 100
    justid = False
    j, n = 6, len(argv)
    while j < n:
        u = argv[j].upper()
        if u == b"COUNT" and j + 1 < n:
            count = ll(argv[j + 1], errors.count_positive)
            if count < 1 or count > ((1 << 63) - 1) // 16:     # LONG_MAX / sizeof(streamID)
                raise errors.count_positive()
            j += 1
        elif u == b"JUSTID":
            justid = True
        else:
            raise errors.syntax()
        j += 1
    return argv[1], argv[2], argv[3], AutoClaimOptions(min_idle, start, count, justid)


def xautoclaim(tx, key, group, consumer, opts):
    nxt, claimed, deleted = tx.autoclaim(key, group, consumer, opts)
    return [fmt(nxt), entry_rows(claimed), entry_rows(deleted)]
