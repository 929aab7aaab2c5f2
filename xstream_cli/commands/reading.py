"""Reading commands: XREAD and XREADGROUP, which share one parser (Redis's
xreadCommand) and one reply.  ``parse_<cmd>(argv)`` (the grammar is its
docstring) returns one engine verb's arguments without touching the
store; ``<cmd>(tx, *args)`` makes the call and returns the reply value.
Both may block (BLOCK): the waiting is xstream_cli.execution.blocked's.
"""
from storage import errors
from storage.ids import MAX_ID, parse_id
from storage.options import ReadOptions
from xstream_cli.commands.parsing import ll
from xstream_cli.output.reply import Map, entry_rows

# ================================================================== XREAD

def parse_timeout(arg):
    v = ll(arg, errors.timeout_not_integer)
    if v < 0:
        raise errors.timeout_negative()
    return v


def parse_read(argv, xreadgroup):
    """XREAD / XREADGROUP options (xreadCommand's parser).  For
    XREADGROUP, an ID's error is kept in its place in ``ids``: Redis
    checks each stream's key and group before its ID."""
    n = len(argv)
    count = maxcount = maxsize = 0
    block = group = consumer = claim = None
    noack = False
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
            count = max(ll(argv[i]), 0)
        elif u == b"MAXCOUNT" and more:
            i += 1
            maxcount = ll(argv[i])          # not a number: Redis's integer error; then the range
            if maxcount <= 0:
                raise errors.maxcount_invalid()
        elif u == b"MAXSIZE" and more:
            i += 1
            maxsize = ll(argv[i])
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
        try:
            ids.append(_read_id(a, xreadgroup))
        except errors.RedisError as e:
            if not xreadgroup:
                raise
            ids.append(e)
    return ReadOptions(keys, tuple(ids), count, block, maxcount, maxsize, group, consumer, noack, claim)


def _read_id(a, xreadgroup):
    if a == b"$":
        if xreadgroup:
            raise errors.dollar_in_xreadgroup()
        return b"$"
    if a == b">":
        if not xreadgroup:
            raise errors.gt_in_xread()
        return b">"
    if a == b"+":
        if xreadgroup:
            raise errors.plus_in_xreadgroup()
        return b"+"
    i = parse_id(a, 0, strict=True)
    if xreadgroup and i == MAX_ID:
        return b">"        # Redis parses ">" as this very ID: they are one
    return i


def read_reply(res):
    """[(key, entries), ...] -> the XREAD reply (null when empty)."""
    if not res:
        return None
    return Map([(key, entry_rows(ents)) for key, ents in res], flat=False)


def parse_xread(argv):
    """XREAD [COUNT count] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK milliseconds]
    STREAMS key [key ...] id [id ...]"""
    return (parse_read(argv, False),)


def prepare_xread(tx, opts):
    """Before blocking: ``$`` is each stream's last ID at command start."""
    if opts.block is None or b"$" not in opts.ids:
        return (opts,)
    return (opts.replace(ids=tx.resolve_read_ids(opts.keys, opts.ids)),)


def xread(tx, opts):
    return read_reply(tx.read_streams(opts))


# ============================================================= XREADGROUP

def parse_xreadgroup(argv):
    """XREADGROUP GROUP group consumer [COUNT count] [MAXCOUNT n] [MAXSIZE bytes]
    [BLOCK milliseconds] [CLAIM min-idle-time] [NOACK] STREAMS key [key ...] id [id ...]"""
    return (parse_read(argv, True),)


def xreadgroup(tx, opts):
    return read_reply(tx.read_group(opts))


def run_key(opts):
    """What XREADGROUPs must share to be delivered as one run
    (Txn.read_group_run), or None: a read of new entries of one stream
    with COUNT, no BLOCK, CLAIM, MAXCOUNT or MAXSIZE."""
    if len(opts.keys) != 1 or opts.ids[0] != b">" or not opts.count or opts.block is not None \
            or opts.claim is not None or opts.maxcount or opts.maxsize:
        return None
    return opts.keys[0], opts.group, opts.noack


def xreadgroup_run(tx, reads):
    """The replies of XREADGROUPs ``reads`` (parsed options, one
    ``run_key``) run one after another, delivered as one run: what
    ``read_reply`` makes, made from the entries' rows at once (a worker
    pool's reads of one entry each: no Entry, no per-entry dispatch)."""
    return [None if not r else Map([(key, [[b"%d-%d" % i, f] for i, f in rows]) for key, rows in r], flat=False)
            for r in tx.read_group_run(reads)]
