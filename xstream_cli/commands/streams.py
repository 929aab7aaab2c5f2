"""Stream commands: XADD, XTRIM, XRANGE, XREVRANGE, XLEN, XDEL, XDELEX,
XSETID, XCFGSET, XINFO (XREAD: xstream_cli/commands/reading.py).

Each command is a pair: ``parse_<cmd>(argv)`` -- the grammar is its
docstring -- checks the arguments without touching the store and
returns the arguments of one engine verb (storage.txn.Txn); ``<cmd>(tx,
*args)`` makes that one call and returns the reply value
(xstream_cli/output/reply.py).  An error Redis raises only after its key lookup
is deferred into the options (storage.options).
"""
from storage import errors
from storage.ids import MAX_ID, fmt, parse_add_id, parse_id, parse_range_id
from storage.options import (
    ACKED,
    DELREF,
    KEEPREF,
    AddOptions,
    IdmpConfigOptions,
    IdsOptions,
    RangeOptions,
    SetIdOptions,
    StreamInfoOptions,
    TrimOptions,
)
from xstream_cli.commands.parsing import deferring, ll
from xstream_cli.output.reply import OK, Map, Status, entry_reply, entry_rows

POLICIES = {b"KEEPREF": KEEPREF, b"DELREF": DELREF, b"ACKED": ACKED}


# ================================================================ XADD, XTRIM

def parse_add_or_trim(argv, xadd):
    """streamParseAddOrTrimArgsOrReply: options from argv[2].  For XADD,
    returns (AddOptions, index of the first field); for XTRIM,
    (TrimOptions, len(argv))."""
    n = len(argv)
    i = 2
    strategy = threshold = limit = policy = None
    approx = nomk = idmp_auto = id_given = False
    pid = iid = req_id = None
    seq_given = True
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
    if limit is None and not approx:
        limit = 0
    # ~ without LIMIT: None, the store's default (storage.verbs.trim.approx_limit)
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


def parse_xadd(argv):
    """XADD key [NOMKSTREAM] [KEEPREF | DELREF | ACKED] [IDMPAUTO pid | IDMP pid iid]
    [<MAXLEN | MINID> [= | ~] threshold [LIMIT count]] <* | id> field value [field value ...]"""
    opts, fp = parse_add_or_trim(argv, True)
    return argv[1], argv[fp:], opts


def xadd(tx, key, fields, opts):
    new = tx.add(key, fields, opts)
    return None if new is None else fmt(new)


def parse_xtrim(argv):
    """XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count] [KEEPREF | DELREF | ACKED]"""
    return argv[1], parse_add_or_trim(argv, False)[0]


def xtrim(tx, key, opts):
    return tx.trim(key, opts)


# ============================================================ XRANGE family

def _parse_range(argv, rev):
    start_arg, end_arg = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start = parse_range_id(start_arg, 0, True)
    end = parse_range_id(end_arg, MAX_ID[1], False)
    count = None
    j, n = 4, len(argv)
    while j < n:
        if argv[j].upper() == b"COUNT" and j + 1 < n:
            count = max(ll(argv[j + 1]), 0)
            j += 2
        else:
            raise errors.syntax()
    return argv[1], RangeOptions(start, end, count, rev)


def parse_xrange(argv):
    """XRANGE key start end [COUNT count]"""
    return _parse_range(argv, False)


def parse_xrevrange(argv):
    """XREVRANGE key end start [COUNT count]"""
    return _parse_range(argv, True)


def xrange(tx, key, opts):
    return tx.range(key, opts)


def parse_xlen(argv):
    """XLEN key"""
    return (argv[1],)


def xlen(tx, key):
    return tx.length(key)


# =================================================================== XDEL

def _ids(args):
    """IDs (strict), or the error of the first bad one -- deferred: Redis
    parses them after its key lookup."""
    with deferring() as d:
        return tuple(parse_id(a, 0, strict=True) for a in args), None
    return (), d.error


def parse_xdel(argv):
    """XDEL key id [id ...]"""
    ids, err = _ids(argv[2:])
    return argv[1], IdsOptions(ids, len(argv) - 2, KEEPREF, err)


def xdel(tx, key, opts):
    return tx.delete_entries(key, opts)


def parse_ids_block(argv, start):
    """[KEEPREF | DELREF | ACKED] IDS numids id [id ...], options in any
    order (XDELEX, XACKDEL) -> IdsOptions (a bad ID deferred)."""
    n = len(argv)
    i = start
    policy = None
    raw = None
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
            raw = argv[i + 2:i + 2 + num]
            i += 2 + num
        else:
            raise errors.syntax()
    if raw is None:
        raise errors.ids_required()
    ids, err = _ids(raw)
    return IdsOptions(ids, len(raw), policy or KEEPREF, err)


def parse_xdelex(argv):
    """XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]"""
    return argv[1], parse_ids_block(argv, 2)


def xdelex(tx, key, opts):
    return tx.delete_entries_ex(key, opts)


# ================================================================= XSETID

def parse_xsetid(argv):
    """XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]"""
    new = parse_id(argv[2], 0, strict=True)
    added = -1
    maxdel = None
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
    return argv[1], SetIdOptions(new, added, maxdel)


def xsetid(tx, key, opts):
    tx.set_id(key, opts)
    return OK


# ================================================================ XCFGSET

XCFGSET_OPTIONS = {b"IDMP-DURATION": (1, 86400, errors.idmp_duration_range),
                   b"IDMP-MAXSIZE": (1, 10000, errors.idmp_maxsize_range)}


def parse_xidmprecord(argv):
    """XIDMPRECORD key pid iid stream-id

    Record that producer pid's idempotent ID iid added the existing entry
    stream-id (Redis 8.8 replays IDMP history with it); OK, also when the
    pair already maps to that entry."""
    ids, err = _ids(argv[4:5])
    return argv[1], argv[2], argv[3], IdsOptions(ids, 1, KEEPREF, err)


def xidmprecord(tx, key, pid, iid, opts):
    tx.record_idmp(key, pid, iid, opts)
    return OK


def parse_xcfgset(argv):
    """XCFGSET key [IDMP-DURATION seconds] [IDMP-MAXSIZE count]"""
    given = {}
    with deferring() as d:     # Redis looks the key up first
        i, n = 2, len(argv)
        while i < n:
            u = argv[i].upper()
            if u not in XCFGSET_OPTIONS or i + 1 >= n:
                raise errors.syntax()
            if u in given:
                raise errors.xcfgset_twice(u.decode())
            lo, hi, out_of_range = XCFGSET_OPTIONS[u]
            given[u] = ll(argv[i + 1])
            if not lo <= given[u] <= hi:
                raise out_of_range()
            i += 2
        if not given:
            raise errors.xcfgset_no_option()
    return argv[1], IdmpConfigOptions(given.get(b"IDMP-DURATION"), given.get(b"IDMP-MAXSIZE"), d.error)


def xcfgset(tx, key, opts):
    tx.configure_idmp(key, opts)
    return OK


# ================================================================== XINFO

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


def parse_xinfo_stream(argv):
    """XINFO STREAM key [FULL [COUNT count]]"""
    full = False
    count = 10
    n = len(argv)
    with deferring() as d:      # Redis looks the key up first
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
    return argv[2], StreamInfoOptions(full, count, d.error)


def xinfo_stream(tx, key, opts):
    return stream_info_reply(tx.stream_info(key, opts))


def stream_info_reply(s):
    """StreamInfo -> XINFO STREAM's map, fields named and ordered as Redis."""
    pairs = [("length", s.length), ("radix-tree-keys", s.nodes), ("radix-tree-nodes", s.nodes + 1),
             ("last-generated-id", fmt(s.last_generated_id)), ("max-deleted-entry-id", fmt(s.max_deleted_entry_id)),
             ("entries-added", s.entries_added), ("recorded-first-entry-id", fmt(s.recorded_first_entry_id))]
    if s.idmp is not None:
        d = s.idmp
        pairs += [("idmp-duration", d.duration), ("idmp-maxsize", d.maxsize), ("pids-tracked", d.pids_tracked),
                  ("iids-tracked", d.iids_tracked), ("iids-added", d.iids_added),
                  ("iids-duplicates", d.iids_duplicates)]
    if not s.full:
        pairs += [("groups", s.groups), ("first-entry", None if s.first_entry is None else entry_reply(s.first_entry)),
                  ("last-entry", None if s.last_entry is None else entry_reply(s.last_entry))]
    else:
        pairs += [("entries", entry_rows(s.entries)), ("groups", [_group_detail(g) for g in s.groups])]
    return Map(pairs)


def _group_detail(g):
    return Map([
        ("name", g.name), ("last-delivered-id", fmt(g.last_delivered_id)), ("entries-read", g.entries_read),
        ("lag", g.lag), ("pel-count", g.pel_count), ("nacked-count", g.nacked_count),
        ("pending", [[fmt(i), owner, t, n] for i, owner, t, n in g.pending]),
        ("consumers", [Map([("name", c.name), ("seen-time", c.seen_time), ("active-time", c.active_time),
                            ("pel-count", c.pel_count),
                            ("pending", [[fmt(i), t, n] for i, t, n in c.pending])]) for c in g.consumers]),
    ])


def parse_xinfo_groups(argv):
    """XINFO GROUPS key"""
    return (argv[2],)


def xinfo_groups(tx, key):
    return [Map([("name", g.name), ("consumers", g.consumers), ("pending", g.pending),
                 ("last-delivered-id", fmt(g.last_delivered_id)), ("entries-read", g.entries_read),
                 ("lag", g.lag)]) for g in tx.groups_info(key)]


def parse_xinfo_consumers(argv):
    """XINFO CONSUMERS key group"""
    return argv[2], argv[3]


def xinfo_consumers(tx, key, group):
    return [Map([("name", c.name), ("pending", c.pending), ("idle", c.idle), ("inactive", c.inactive)])
            for c in tx.consumers_info(key, group)]


def parse_xinfo_help(argv):
    """XINFO HELP"""
    return ()


def xinfo_help(tx):
    return [Status(x) for x in XINFO_HELP]

