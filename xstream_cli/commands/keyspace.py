"""Keyspace commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME.
``parse_<cmd>(argv)`` returns the engine verb's arguments; ``<cmd>(tx,
*args)`` makes the call and returns the reply value."""
from storage import errors
from xstream_cli.commands.parsing import ll
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


def parse_scan(argv):
    """SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]"""
    cursor = parse_cursor(argv[1])
    pattern = type_name = None
    count = 10
    i, n = 2, len(argv)
    while i < n:
        u = argv[i].upper()
        if i + 1 >= n:
            raise errors.syntax()
        if u == b"MATCH":
            pattern = argv[i + 1]
        elif u == b"COUNT":
            count = ll(argv[i + 1])
            if count < 1:
                raise errors.syntax()
        elif u == b"TYPE":
            type_name = argv[i + 1]
        else:
            raise errors.syntax()
        i += 2
    return cursor, pattern, count, type_name


def scan(tx, cursor, pattern, count, type_name):
    nxt, names = tx.scan(cursor, pattern, count, type_name)
    return [b"%d" % nxt, names]


def parse_cursor(arg):
    """A SCAN cursor as Redis reads it (strtoul): no leading space, an
    optional sign (a '-' wraps around), decimal digits, at most 2^64-1."""
    s = arg
    neg = False
    if s[:1] in (b"+", b"-"):
        neg = s[:1] == b"-"
        s = s[1:]
    if not s or not s.isdigit() or int(s) > (1 << 64) - 1:
        raise errors.invalid_cursor()
    v = int(s)
    return ((-v) & ((1 << 64) - 1)) if neg else v


def parse_rename(argv):
    """RENAME key newkey"""
    return argv[1], argv[2]


def rename(tx, src, dst):
    tx.rename(src, dst)
    return OK
