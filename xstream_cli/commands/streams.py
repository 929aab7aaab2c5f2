"""Stream commands: grammar, parser, one storage call, reply value.

Each handler takes the transaction and the full argv (argv[0] is the
command name, as typed) and returns a reply value (xstream_cli/reply.py).
Parsers check every argument before the storage verb runs.
"""
from storage import errors
from storage.ids import MAX_ID, MIN_ID, fmt, parse_add_id, parse_id, parse_range_id
from storage.options import ACKED, DELREF, KEEPREF, AddOptions, ReadOptions, TrimOptions
from xstream_cli.commands.parsing import ll
from xstream_cli.reply import OK, Map, Status

POLICIES = {b"KEEPREF": KEEPREF, b"DELREF": DELREF, b"ACKED": ACKED}
DEFAULT_APPROX_LIMIT = 100 * 100   # 100 x stream-node-max-entries


class Blocked:
    """Returned by XREAD / XREADGROUP with BLOCK when nothing can be served
    now: the session waits for ``keys`` to change (or ``timeout_ms``) and
    calls ``retry(tx)``, which returns a reply or None to keep waiting."""

    def __init__(self, keys, timeout_ms, retry, claim_wake=None, shared=False):
        self.keys = keys
        self.timeout_ms = timeout_ms
        self.retry = retry
        self.claim_wake = claim_wake   # fn(tx) -> ms when a PEL entry becomes claimable
        self.shared = shared           # XREADGROUP: the group (its consumers compete)


# ------------------------------------------------------------ trim options

def parse_add_or_trim(argv, xadd):
    """streamParseAddOrTrimArgsOrReply: options from argv[2].  For XADD,
    returns (AddOptions, index of the first field); for XTRIM,
    (TrimOptions, len(argv))."""
    n = len(argv)
    i = 2
    strategy = None
    threshold = None
    approx = False
    limit = None
    policy = None
    nomk = False
    pid = iid = None
    idmp_auto = False
    req_id = None
    seq_given = True
    id_given = False
    while i < n:
        more = n - 1 - i
        opt = argv[i]
        if xadd and opt == b"*":
            break
        u = opt.upper()
        if (u == b"MAXLEN" or u == b"MINID") and more:
            if strategy is not None:
                raise errors.maxlen_and_minid()
            # "~" or "=" counts as the operator only with a value after it
            nxt = argv[i + 1]
            approx = more >= 2 and nxt == b"~"
            if more >= 2 and (approx or nxt == b"="):
                i += 1
            if u == b"MAXLEN":
                threshold = ll(argv[i + 1])
                if threshold < 0:
                    raise errors.maxlen_negative()
                strategy = "maxlen"
            else:
                threshold = parse_id(argv[i + 1], 0, strict=True)
                strategy = "minid"
            i += 1
        elif u == b"LIMIT" and more:
            limit = ll(argv[i + 1])
            if limit < 0:
                raise errors.limit_negative()
            i += 1
        elif u in POLICIES and policy is None:
            policy = POLICIES[u]
        elif xadd and u == b"NOMKSTREAM":
            nomk = True
        elif xadd and u == b"IDMPAUTO" and more >= 1:
            if pid is not None:
                raise errors.idmp_twice()
            pid = argv[i + 1]
            if not pid:
                raise errors.idmp_empty_pid("IDMPAUTO")
            idmp_auto = True
            i += 1
        elif xadd and u == b"IDMP" and more >= 2:
            if pid is not None:
                raise errors.idmp_twice()
            pid, iid = argv[i + 1], argv[i + 2]
            if not pid:
                raise errors.idmp_empty_pid("IDMP")
            if not iid:
                raise errors.idmp_empty_iid()
            i += 2
        elif xadd:
            req_id, seq_given = parse_add_id(opt)
            id_given = True
            break
        else:
            raise errors.syntax()
        i += 1
    if limit and strategy is None:
        raise errors.limit_without_strategy()
    if not xadd and strategy is None:
        raise errors.xtrim_without_strategy()
    if limit is not None and not approx:
        raise errors.limit_without_approx()
    if limit is None:
        limit = DEFAULT_APPROX_LIMIT if approx else 0
    policy = policy or KEEPREF
    trim = TrimOptions(strategy, threshold, approx, limit, policy) if strategy else None
    if not xadd:
        return trim, n
    field_pos = i + 1
    nf = n - field_pos
    if nf < 2 or nf % 2:
        raise errors.wrong_arity("xadd")
    if pid is not None and id_given:
        raise errors.idmp_explicit_id()
    return AddOptions(req_id, seq_given, nomk, trim, policy, pid, None if idmp_auto else iid), field_pos


def xadd(tx, argv):
    """XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid]
    [MAXLEN | MINID [= | ~] threshold [LIMIT count]] <* | id> field value [field value ...]"""
    opts, fp = parse_add_or_trim(argv, True)
    new = tx.add(argv[1], argv[fp:], opts)
    return None if new is None else fmt(new)


def xtrim(tx, argv):
    """XTRIM key MAXLEN | MINID [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]"""
    trim, _ = parse_add_or_trim(argv, False)
    return tx.trim(argv[1], trim)


# ----------------------------------------------------------- XRANGE family

def _range(tx, argv, rev):
    start_arg, end_arg = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start = parse_range_id(start_arg, 0, True)
    end = parse_range_id(end_arg, MAX_ID[1], False)
    count = -1
    j = 4
    n = len(argv)
    while j < n:
        if argv[j].upper() == b"COUNT" and j + 1 < n:
            count = ll(argv[j + 1])
            if count < 0:
                count = 0
            j += 2
        else:
            raise errors.syntax()
    if count == 0:
        if tx.meta(argv[1]) is None:
            return []
        return None
    return tx.range(argv[1], start, end, max(count, 0), rev)


def xrange(tx, argv):
    """XRANGE key start end [COUNT count]"""
    return _range(tx, argv, False)


def xrevrange(tx, argv):
    """XREVRANGE key end start [COUNT count]"""
    return _range(tx, argv, True)


def xlen(tx, argv):
    """XLEN key"""
    return tx.length(argv[1])


# -------------------------------------------------------------- deletion

def xdel(tx, argv):
    """XDEL key id [id ...]"""
    if tx.meta(argv[1]) is None:
        return 0
    ids = [parse_id(a, 0, strict=True) for a in argv[2:]]
    return tx.delete_entries(argv[1], ids)


def parse_ids_block(argv, start):
    """[KEEPREF | DELREF | ACKED] IDS numids id [id ...], options in any
    order (XDELEX, XACKDEL).  Returns (policy, raw id arguments)."""
    n = len(argv)
    i = start
    policy = None
    ids = None
    while i < n:
        u = argv[i].upper()
        if u in POLICIES and policy is None:
            policy = POLICIES[u]
            i += 1
        elif u == b"IDS" and i + 1 < n:
            num = ll(argv[i + 1], errors.numids_positive)
            if num <= 0:
                raise errors.numids_positive()
            if num > n - i - 2:
                raise errors.numids_mismatch()
            ids = argv[i + 2:i + 2 + num]
            i += 2 + num
        else:
            raise errors.syntax()
    if ids is None:
        raise errors.ids_required()
    return policy or KEEPREF, ids


def xdelex(tx, argv):
    """XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]"""
    policy, raw_ids = parse_ids_block(argv, 2)
    if tx.meta(argv[1]) is None:
        return [-1] * len(raw_ids)
    ids = [parse_id(a, 0, strict=True) for a in raw_ids]
    return tx.delete_entries_ex(argv[1], ids, policy)


# ----------------------------------------------------------------- XSETID

def xsetid(tx, argv):
    """XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]"""
    new = parse_id(argv[2], 0, strict=True)
    added = -1
    maxdel = MIN_ID
    i, n = 3, len(argv)
    while i < n:
        u = argv[i].upper()
        if u == b"ENTRIESADDED" and i + 1 < n:
            added = ll(argv[i + 1])
            if added < 0:
                raise errors.entries_added_negative()
        elif u == b"MAXDELETEDID" and i + 1 < n:
            maxdel = parse_id(argv[i + 1], 0, strict=True)
            if new < maxdel:
                raise errors.xsetid_smaller_than_maxdel_arg()
        else:
            raise errors.syntax()
        i += 2
    tx.set_id(argv[1], new, added, maxdel)
    return OK


# ------------------------------------------------------------- XCFGSET

def xcfgset(tx, argv):
    """XCFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE count]"""
    if tx.meta(argv[1]) is None:
        raise errors.no_such_key()
    duration = maxsize = None
    i, n = 2, len(argv)
    while i < n:
        u = argv[i].upper()
        if u == b"IDMP-DURATION" and i + 1 < n:
            if duration is not None:
                raise errors.xcfgset_twice("IDMP-DURATION")
            duration = ll(argv[i + 1])
            if not 1 <= duration <= 86400:
                raise errors.idmp_duration_range()
        elif u == b"IDMP-MAXSIZE" and i + 1 < n:
            if maxsize is not None:
                raise errors.xcfgset_twice("IDMP-MAXSIZE")
            maxsize = ll(argv[i + 1])
            if not 1 <= maxsize <= 10000:
                raise errors.idmp_maxsize_range()
        else:
            raise errors.syntax()
        i += 2
    if duration is None and maxsize is None:
        raise errors.xcfgset_no_option()
    tx.configure_idmp(argv[1], duration, maxsize)
    return OK


# ------------------------------------------------------------------ XREAD

def parse_timeout(arg):
    v = ll(arg, errors.timeout_not_integer)
    if v < 0:
        raise errors.timeout_negative()
    return v


def parse_read(argv, xreadgroup):
    """XREAD / XREADGROUP options (xreadCommand's parser)."""
    n = len(argv)
    count = 0
    block = None
    maxcount = maxsize = 0
    group = consumer = None
    noack = False
    claim = None
    streams_at = 0
    i = 1
    while i < n:
        more = n - i - 1
        u = argv[i].upper()
        if u == b"BLOCK" and more:
            i += 1
            block = parse_timeout(argv[i])
        elif u == b"COUNT" and more:
            i += 1
            count = ll(argv[i])
            if count < 0:
                count = 0
        elif u == b"MAXCOUNT" and more:
            i += 1
            maxcount = ll(argv[i], errors.maxcount_invalid)
            if maxcount <= 0:
                raise errors.maxcount_invalid()
        elif u == b"MAXSIZE" and more:
            i += 1
            maxsize = ll(argv[i], errors.maxsize_invalid)
            if maxsize <= 0:
                raise errors.maxsize_invalid()
        elif u == b"STREAMS" and more:
            streams_at = i + 1
            if (n - streams_at) % 2:
                raise errors.xread_unbalanced(xreadgroup)
            break
        elif u == b"GROUP" and more >= 2:
            if not xreadgroup:
                raise errors.group_only_xreadgroup()
            group, consumer = argv[i + 1], argv[i + 2]
            i += 2
        elif u == b"NOACK":
            if not xreadgroup:
                raise errors.noack_only_xreadgroup()
            noack = True
        elif u == b"CLAIM" and more:
            if not xreadgroup:
                raise errors.claim_only_xreadgroup()
            i += 1
            claim = ll(argv[i], errors.min_idle_not_integer)
            if claim < 0:
                raise errors.min_idle_negative()
        else:
            raise errors.syntax()
        i += 1
    if streams_at == 0:
        raise errors.syntax()
    if xreadgroup and group is None:
        raise errors.missing_group_option()
    if maxcount and count and maxcount < count:
        raise errors.maxcount_below_count()
    half = (n - streams_at) // 2
    keys = tuple(argv[streams_at:streams_at + half])
    ids = []
    for a in argv[streams_at + half:]:
        if a == b"$":
            if xreadgroup:
                raise errors.dollar_in_xreadgroup()
            ids.append(b"$")
        elif a == b">":
            if not xreadgroup:
                raise errors.gt_in_xread()
            ids.append(b">")
        elif a == b"+":
            if xreadgroup:
                raise errors.plus_in_xreadgroup()
            ids.append(b"+")
        else:
            ids.append(parse_id(a, 0, strict=True))
    return ReadOptions(keys, tuple(ids), count, block, maxcount, maxsize, group, consumer, noack, claim)


def read_reply(res):
    """[(key, entries), ...] -> the XREAD reply (null when empty)."""
    if not res:
        return None
    return Map([(k, ents) for k, ents in res], flat=False)


def xread(tx, argv):
    """XREAD [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK milliseconds]
    STREAMS key [key ...] id [id ...]"""
    o = parse_read(argv, False)
    ids = tx.resolve_read_ids(o.keys, o.ids)
    res = tx.read_streams(o.keys, ids, o.count, o.maxcount, o.maxsize)
    if res or o.block is None:
        return read_reply(res)

    def retry(t):
        return read_reply(t.read_streams(o.keys, ids, o.count, o.maxcount, o.maxsize))
    return Blocked(o.keys, o.block, retry)


# ------------------------------------------------------------------ XINFO

XINFO_HELP = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
]


def _full_groups(groups):
    """XINFO STREAM FULL's groups: storage pair lists -> maps."""
    return [Map([(k, [Map(c) for c in v] if k == "consumers" else v) for k, v in g]) for g in groups]


def xinfo_stream(tx, argv):
    """XINFO STREAM key [FULL [COUNT count]]"""
    full = False
    count = 10
    n = len(argv)
    if n > 3:
        if argv[3].upper() != b"FULL":
            raise errors.subcommand_syntax(argv[1], "XINFO")
        full = True
        if n > 4:
            if n != 6 or argv[4].upper() != b"COUNT":
                raise errors.subcommand_syntax(argv[1], "XINFO")
            count = ll(argv[5])
            if count < 0:
                count = 10
    info = tx.stream_info(argv[2], full, count)
    return Map([(k, _full_groups(v) if full and k == "groups" else v) for k, v in info])


def xinfo_help(tx, argv):
    """XINFO HELP"""
    return [Status(x) for x in XINFO_HELP]


def xinfo_groups(tx, argv):
    """XINFO GROUPS key"""
    return [Map(g) for g in tx.groups_info(argv[2])]


def xinfo_consumers(tx, argv):
    """XINFO CONSUMERS key group"""
    return [Map(c) for c in tx.consumers_info(argv[2], argv[3])]
