"""Keyspace commands: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME."""
from storage import errors
from xstream_cli.commands.parsing import ll
from xstream_cli.reply import OK, Status


def del_(tx, argv):
    """DEL key [key ...]"""
    return tx.delete_keys(argv[1:])


def exists(tx, argv):
    """EXISTS key [key ...]"""
    return tx.exists(argv[1:])


def type_(tx, argv):
    """TYPE key"""
    return Status(tx.key_type(argv[1]))


def keys(tx, argv):
    """KEYS pattern"""
    return tx.keys(argv[1])


def scan(tx, argv):
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


def rename(tx, argv):
    """RENAME key newkey"""
    tx.rename(argv[1], argv[2])
    return OK
