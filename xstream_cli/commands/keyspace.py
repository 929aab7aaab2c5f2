"""Keyspace commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME.
``parse_<cmd>(argv)`` returns the engine verb's arguments; ``<cmd>(tx,
*args)`` makes the call and returns the reply value."""
from storage import errors
from xstream_cli.commands.parsing import ll, string2ll
from xstream_cli.reply import OK, Status


def parse_del(argv):
    """DEL key [key ...]"""
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
