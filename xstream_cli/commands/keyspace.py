"""Keyspace commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME, COPY, the
EXPIRE / TTL family, CONFIG.
``parse_<cmd>(argv)`` returns the engine verb's arguments; ``<cmd>(tx,
*args)`` makes the call and returns the reply value."""
from storage import errors
from xstream_cli.commands.parsing import ll, string2ll
from xstream_cli.output.reply import OK, Map, Status


def parse_del(argv):
    """DEL key [key ...]"""
    return (argv[1:],)


def parse_unlink(argv):
    """UNLINK key [key ...]

    DEL's twin (Redis frees the memory in the background; a store has
    nothing to free later)."""
    return (argv[1:],)


def del_(tx, keys):
    return tx.delete_keys(keys)


def parse_exists(argv):
    """EXISTS key [key ...]"""
    return (argv[1:],)


def exists(tx, keys):
    return tx.exists(keys)


def parse_type(argv):
    """TYPE key"""
    return (argv[1],)


def type_(tx, key):
    return Status(tx.key_type(key))


def parse_keys(argv):
    """KEYS pattern"""
    return (argv[1],)


def keys(tx, pattern):
    return tx.keys(pattern)


TYPE_NAMES = frozenset((b"string", b"list", b"set", b"zset", b"hash", b"stream"))


def parse_scan(argv):
    """SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]

    Options in Redis's loop: an option without its argument, or one
    Redis does not know, is a syntax error; NOVALUES belongs to HSCAN;
    TYPE must name a Redis type (only streams live here, so any other
    type matches nothing)."""
    cursor = parse_cursor(argv[1])
    pattern = type_name = None
    count = 10
    i, n = 2, len(argv)
    while i < n:
        u = argv[i].upper()
        more = n - i >= 2
        if u == b"COUNT" and more:
            count = ll(argv[i + 1])
            if count < 1:
                raise errors.syntax()
        elif u == b"MATCH" and more:
            pattern = argv[i + 1]
        elif u == b"TYPE" and more:
            type_name = argv[i + 1]
            if type_name.lower() not in TYPE_NAMES:
                raise errors.unknown_type_name(type_name)
        elif u == b"NOVALUES":
            raise errors.novalues_only_hscan()
        else:
            raise errors.syntax()
        i += 2
    return cursor, pattern, count, type_name


def scan(tx, cursor, pattern, count, type_name):
    nxt, names = tx.scan(cursor, pattern, count, type_name)
    return [b"%d" % nxt, names]


def parse_cursor(arg):
    """A SCAN cursor as Redis 7.4+ reads it (string2ull): a plain integer
    (negative ones refused); failing that, what C's strtoull takes in
    full -- leading white space, a sign (a '-' wraps around), decimal
    digits, at most 2^64-1.  The text ends at a NUL, as a C string."""
    nul = arg.find(b"\0")
    s = arg if nul < 0 else arg[:nul]
    v = string2ll(s)
    if v is not None:
        if v < 0:
            raise errors.invalid_cursor()
        return v
    t = s.lstrip(b" \t\n\v\f\r")
    neg = t[:1] == b"-"
    if t[:1] in (b"+", b"-"):
        t = t[1:]
    d = t.lstrip(b"0")
    if not t or not t.isdigit() or len(d) > 20 or int(d or b"0") > (1 << 64) - 1:
        raise errors.invalid_cursor()
    v = int(d or b"0")
    return ((-v) & ((1 << 64) - 1)) if neg else v


def parse_rename(argv):
    """RENAME key newkey"""
    return argv[1], argv[2]


def rename(tx, src, dst):
    tx.rename(src, dst)
    return OK


def parse_copy(argv):
    """COPY source destination [DB destination-db] [REPLACE]"""
    replace = False
    i = 3
    while i < len(argv):
        opt = argv[i].upper()
        if opt == b"REPLACE":
            replace = True
        elif opt == b"DB" and i + 1 < len(argv):
            db = string2ll(argv[i + 1])
            if db is None or not -(1 << 31) <= db < (1 << 31):
                raise errors.not_integer()
            if db != 0:
                raise errors.db_index_out_of_range()     # one database, as SELECT
            i += 1
        else:
            raise errors.syntax()
        i += 1
    return argv[1], argv[2], replace


def copy(tx, src, dst, replace):
    return tx.copy(src, dst, replace)


# ================================================================== expiry
# EXPIRE and its family (storage.verbs.keyspace.expire): a stream with a
# TTL is gone for every command and every process once its time passes.

_EXPIRE_FLAGS = {b"NX": 1, b"XX": 2, b"GT": 4, b"LT": 8}     # storage.verbs.keyspace's NX, XX, GT, LT


def _parse_expire(argv, unit_ms, relative, command):
    """key, time in ms, relative, flag, command name: the conditions are
    checked before the time, as Redis's expireGenericCommand does."""
    flag = 0
    for opt in argv[3:]:
        f = _EXPIRE_FLAGS.get(opt.upper())
        if f is None:
            raise errors.unsupported_option(opt)
        flag |= f
    if flag & 1 and flag & 14:
        raise errors.expire_nx_and_other()
    if flag & 4 and flag & 8:
        raise errors.expire_gt_and_lt()
    when = ll(argv[2])
    if unit_ms == 1000:
        if not -(_LLONG_MAX // 1000) <= when <= _LLONG_MAX // 1000:
            raise errors.invalid_expire_time(command)
        when *= 1000
    return argv[1], when, relative, flag, command


def parse_expire(argv):
    """EXPIRE key seconds [NX | XX | GT | LT]

    The stream is deleted after this many seconds (now, if the number is
    0 or negative).  NX: only if it has no TTL; XX: only if it has one;
    GT / LT: only if the new time is later / earlier (no TTL counts as
    forever).  1 if set, 0 if the key is missing or the condition fails."""
    return _parse_expire(argv, 1000, True, "expire")


def parse_pexpire(argv):
    """PEXPIRE key milliseconds [NX | XX | GT | LT]

    EXPIRE in milliseconds."""
    return _parse_expire(argv, 1, True, "pexpire")


def parse_expireat(argv):
    """EXPIREAT key unix-time-seconds [NX | XX | GT | LT]

    EXPIRE at a Unix time (a time past deletes the stream now)."""
    return _parse_expire(argv, 1000, False, "expireat")


def parse_pexpireat(argv):
    """PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]

    EXPIREAT in milliseconds."""
    return _parse_expire(argv, 1, False, "pexpireat")


def expire(tx, key, when, relative, flag, command):
    return tx.expire(key, when, relative, flag, command)


def parse_ttl(argv):
    """TTL key

    Seconds until the stream expires (rounded); -1 if it has no TTL, -2 if
    it does not exist."""
    return argv[1], False, False


def parse_pttl(argv):
    """PTTL key

    TTL in milliseconds."""
    return argv[1], True, False


def parse_expiretime(argv):
    """EXPIRETIME key

    The Unix time (seconds) the stream expires at; -1 if it has no TTL, -2
    if it does not exist."""
    return argv[1], False, True


def parse_pexpiretime(argv):
    """PEXPIRETIME key

    EXPIRETIME in milliseconds."""
    return argv[1], True, True


def ttl(tx, key, ms, absolute):
    """Redis's ttlGenericCommand: a time already past shows as 0; seconds
    are rounded to the nearest."""
    at = tx.expire_time(key)
    if at < 0:
        return at
    t = max(0, at if absolute else at - tx.now())
    return t if ms else (t + 500) // 1000


def parse_persist(argv):
    """PERSIST key

    Remove the stream's TTL: 1 if it had one, else 0."""
    return (argv[1],)


def persist(tx, key):
    return tx.persist(key)


# ================================================================== CONFIG
# The store's settings (storage.verbs.settings): CONFIG GET / SET of the two
# that shape streams, stored in the store so every process agrees.

_LLONG_MAX = (1 << 63) - 1
_OUT_OF_RANGE = "argument must be between 0 and 9223372036854775807 inclusive"
_MEMORY_UNITS = {b"": 1, b"b": 1, b"k": 1000, b"kb": 1024, b"m": 1000 ** 2, b"mb": 1024 ** 2,
                 b"g": 1000 ** 3, b"gb": 1024 ** 3}


def _params():
    from storage.verbs.settings import PARAMS
    return PARAMS


def parse_config_get(argv):
    """CONFIG GET parameter [parameter ...]

    The store's settings whose names match: stream-node-max-bytes,
    stream-node-max-entries, stream-idmp-duration and stream-idmp-maxsize
    (glob patterns, any case)."""
    from storage.glob import match
    found = []                      # (name as replied, setting)
    for pat in argv[2:]:
        if not any(c in pat for c in b"*?["):
            name = pat.lower().decode("utf-8", "surrogateescape")
            if name in _params() and pat not in (f[0] for f in found):
                found.append((pat, name))          # Redis replies with the name as asked
            continue
        for name in _params():
            n = name.encode()
            if n not in (f[0] for f in found) and match(pat, n, nocase=True):
                found.append((n, name))
    return (found,)


def config_get(tx, found):
    values = tx.settings()
    return Map([(n, b"%d" % values[name]) for n, name in found])


def _memory(v):
    """Redis's memtoull: digits and an optional unit (b, k, kb, m, mb, g, gb)."""
    if v[:1] == b"-":
        return None
    digits = len(v) - len(v.lstrip(b"0123456789"))
    mul = _MEMORY_UNITS.get(v[digits:].lower())
    if mul is None or digits >= 128:
        return None
    n = min(int(v[:digits] or b"0"), (1 << 64) - 1)       # strtoull saturates
    return n * mul & ((1 << 64) - 1)


def parse_config_set(argv):
    """CONFIG SET parameter value [parameter value ...]

    Change the store's settings, for every process using the store:
    stream-node-max-bytes (a size: 4096, 4kb; 0 for no limit) and
    stream-node-max-entries (0 for no limit) decide where a stream's
    next node begins, so what XTRIM ~ removes; nodes already made keep
    their bounds, as in Redis.  stream-idmp-duration (1 to 86400 seconds)
    and stream-idmp-maxsize (1 to 10000) are the IDMP settings of streams
    made from then on (XCFGSET changes one stream's)."""
    if len(argv) & 1:
        raise errors.syntax()
    params = _params()
    seen = []
    for i in range(2, len(argv), 2):
        name = argv[i].lower().decode("utf-8", "surrogateescape")
        if name not in params:
            raise errors.config_unknown_option(argv[i])
        if name in seen:
            raise errors.config_set_failed(argv[i], "duplicate parameter")
        seen.append(name)
    values = {}
    for name, v in zip(seen, argv[3::2]):
        if params[name][1]:
            n = _memory(v)
            if n is None:
                raise errors.config_set_failed(name.encode(), "argument must be a memory value")
        else:
            n = string2ll(v)
            if n is None:
                raise errors.config_set_failed(name.encode(), "argument couldn't be parsed into an integer")
        bounds = params[name][2]
        if bounds is not None and not bounds[0] <= n <= bounds[1]:
            raise errors.config_set_failed(name.encode(), "argument must be between %d and %d inclusive" % bounds)
        if not 0 <= n <= _LLONG_MAX:
            raise errors.config_set_failed(name.encode(), _OUT_OF_RANGE)
        values[name] = n
    return (values,)


def config_set(tx, values):
    tx.configure(values)
    return OK


# ====================================================== DUMP and RESTORE
# (issue 26, item 7) A stream in Redis's own serialization
# (storage.verbs.serialized, storage.codec.rdb).

def parse_dump(argv):
    """DUMP key

    The stream in Redis's serialization (RDB type 19, RDB version 10:
    Redis 7.0 and later RESTORE it); nil if the key does not exist.  The
    payload is binary: in a shell, --raw writes it with a newline after
    it, as redis-cli --raw does (xs --raw DUMP s | head -c -1 >
    s.dump, then xs -x RESTORE s2 0 < s.dump).  Not carried, as Redis
    7.0 has no place for them: consumers' active-time, IDMP settings and
    history; a stream with NACKed entries is refused."""
    return (argv[1],)


def dump(tx, key):
    return tx.dump_value(key)


def parse_restore(argv):
    """RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]

    Make a stream from a DUMP payload of Redis 5 to 8.0 (RDB types 15,
    19, 21; RDB versions up to 12), or of xs.  ttl: 0 for none, else
    milliseconds from now (Unix ms with ABSTTL; one already past makes
    no key).  REPLACE overwrites an existing key.  IDLETIME and FREQ are
    checked as Redis checks them and then unused: xs keeps no LRU / LFU
    data.  A payload of another type is refused (xs stores only
    streams)."""
    from storage.options import RestoreOptions
    from xstream_cli.commands.parsing import deferring
    replace = absttl = False
    idle = freq = None
    j, n = 4, len(argv)
    while j < n:                       # restoreCommand's loop, in its order
        opt = argv[j].upper()
        more = n - j - 1
        if opt == b"REPLACE":
            replace = True
        elif opt == b"ABSTTL":
            absttl = True
        elif opt == b"IDLETIME" and more >= 1 and freq is None:
            idle = ll(argv[j + 1])
            if idle < 0:
                raise errors.invalid_idletime()
            j += 1
        elif opt == b"FREQ" and more >= 1 and idle is None:
            freq = ll(argv[j + 1])
            if not 0 <= freq <= 255:
                raise errors.invalid_freq()
            j += 1
        else:
            raise errors.syntax()
        j += 1
    ttl = 0
    with deferring() as d:             # Redis reads the TTL after checking the key
        ttl = ll(argv[2])
    return argv[1], argv[3], RestoreOptions(ttl=ttl, replace=replace, absttl=absttl, idletime=idle, freq=freq,
                                            deferred=d.error)


def restore(tx, key, payload, opts):
    tx.restore_value(key, payload, opts)
    return OK
