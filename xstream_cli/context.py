"""The command line's context, in one place: the global options (``--db``,
output modes, ``--no-sync``) and their environment variables, where the
default store lives, opening a store, and turning failures into a
message on stderr and an exit status.  The fast path (__main__), the
click application, script mode and every porcelain command use this
module; none of them opens a store or picks an exit status otherwise.

Imports nothing heavy: it is on every command's start-up path.
"""
import os
import sys

EXIT_OK = 0
EXIT_ERROR = 1            # a Redis error, a store that cannot be used, bad input
EXIT_USAGE = 2            # the command line itself is wrong
EXIT_INTERRUPTED = 130    # Ctrl-C

# (mode, flag, help) -- the click options are generated from this table
MODES = [("json", "--json", "JSON lines, RESP3-shaped (one document per reply); bytes that are not UTF-8: "
                            "{\"b64\": ...} as a value, \\udcXX escapes (surrogateescape) in a map key."),
         ("jsonl", "--jsonl", "JSON lines of entries: XRANGE, XREVRANGE, XREAD, XREADGROUP give one line per "
                              "entry in the shape of xs export; other replies as --json."),
         ("raw", "--raw", "Exactly as redis-cli --raw (default when not a terminal)."),
         ("noraw", "--no-raw", "Exactly as redis-cli --no-raw."),
         ("pretty", "--pretty", "Readable tables and colours (default on a terminal).")]
MODE_OF_FLAG = {flag: mode for mode, flag, _ in MODES}

DB_HELP = "Store directory (env XS_DB; default $XDG_DATA_HOME/xstream or ~/.local/share/xstream)."
NO_SYNC_HELP = ("Do not fsync on commit (env XS_NO_SYNC=1): faster, but a machine crash may lose the "
                "last commits (never corrupts the store).")

_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"", "0", "false", "f", "no", "n", "off"}


class UsageError(Exception):
    """The command line or the environment is wrong (exit status 2)."""


class Globals:
    """The global options of one invocation."""
    __slots__ = ("db", "mode", "durable", "repeat", "interval", "stdin_arg")

    def __init__(self, db=None, mode=None, durable=True):
        self.db = db              # store path given (None: XS_DB or the default)
        self.mode = mode          # "json", "raw", "noraw", "pretty" or None (by terminal)
        self.durable = durable    # fsync on commit
        self.repeat = None        # -r N: run the command N times (negative: forever)
        self.interval = 0.0       # -i SEC: wait this long between repetitions
        self.stdin_arg = False    # -x: the command's last argument is stdin, as in redis-cli

    def __repr__(self):
        return "Globals(db=%r, mode=%r, durable=%r)" % (self.db, self.mode, self.durable)


def env_flag(name, environ=None):
    """A boolean environment variable: 1/true/yes/on or 0/false/no/off
    (any case); unset is False; anything else is a usage error."""
    v = (environ if environ is not None else os.environ).get(name)
    if v is None:
        return False
    v = v.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise UsageError("%s must be 1/true/yes/on or 0/false/no/off, not %r" % (name, v))


def from_environment(g):
    """Apply the environment to ``g``: XS_NO_SYNC (XS_DB is read when the
    store is opened), and refuse an empty store path: ``--db "$STORE"``
    with STORE unset must not quietly mean the default store."""
    if env_flag("XS_NO_SYNC"):
        g.durable = False
    check_db(g.db)
    return g


def check_db(db):
    """UsageError for an empty --db (``db``: the option's value, None
    when not given) or an empty XS_DB where it would be used."""
    if db is None:
        if os.environ.get("XS_DB") == "":
            raise UsageError("XS_DB is empty: set it to a store directory, or unset it for the default store")
    elif not db:
        raise UsageError("--db is empty: give a store directory (was the variable you passed unset?)")


def parse_globals(args):
    """Global options before the command, as the fast path sees them.
    Returns (Globals, rest), or None when click should handle the
    command line (help, version, a porcelain option, a usage error).
    Raises UsageError for a bad -r / -i (options only this fast path
    knows: they repeat one Redis command, as in redis-cli)."""
    g = Globals()
    i = 0
    n = len(args)
    while i < n:
        a = args[i]
        if a == "--db":
            if i + 1 >= n:
                return None
            g.db = args[i + 1]
            i += 2
        elif a.startswith("--db="):
            g.db = a[5:]
            i += 1
        elif a in MODE_OF_FLAG:
            g.mode = MODE_OF_FLAG[a]
            i += 1
        elif a == "--no-sync":
            g.durable = False
            i += 1
        elif a == "-x":
            g.stdin_arg = True
            i += 1
        elif a == "-r" or a == "-i":
            if i + 1 >= n:
                raise UsageError("option %s needs a value" % a)
            _repeat_option(g, a, args[i + 1])
            i += 2
        elif a.startswith("-"):
            return None
        else:
            break
    return g, args[i:]


def _repeat_option(g, flag, value):
    """-r N / -i SEC, as redis-cli takes them (-r -1: forever)."""
    if flag == "-r":
        try:
            g.repeat = int(value)
        except ValueError:
            g.repeat = 0
        if g.repeat == 0:
            raise UsageError("-r needs a whole number of repetitions (negative: forever), not %r" % value)
    else:
        try:
            g.interval = float(value)
        except ValueError:
            g.interval = -1.0
        if not 0 <= g.interval < 1e9:
            raise UsageError("-i needs a number of seconds (0.1 for a tenth), not %r" % value)


def default_db():
    """The store used without --db: XS_DB, else under the user's data
    directory."""
    env = os.environ.get("XS_DB")
    if env:
        return os.path.expanduser(env)        # XS_DB='~/x': a shell does not expand a quoted ~
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "xstream")


def db_path(g):
    """The store path: --db (a leading ~ expanded, as for XS_DB), else the default."""
    return os.path.expanduser(g.db) if g.db is not None else default_db()


def store_exists(g):
    """Whether the store ``g`` names exists (its data.mdb, which a new
    store gets whole, made under another name and linked into place)."""
    return os.path.exists(os.path.join(db_path(g), "data.mdb"))


def wait_for_store(g, timeout_ms=0, poll_s=0.05):
    """A blocking read started before its store exists (a consumer
    started before the first producer) waits for the store, creating
    nothing: True once it exists, False when ``timeout_ms`` passed (0:
    no limit).  A store is made once in its life, so a poll costs
    nothing worth a watch; the store's own wait loop (storage.blocking)
    takes over once it is there."""
    import time
    deadline = None if not timeout_ms else time.monotonic() + timeout_ms / 1000
    while not store_exists(g):
        if deadline is None:
            time.sleep(poll_s)
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(poll_s, left))
    return True


def resolve_mode(mode, stream=None):
    """The output mode: as asked, else pretty on a terminal, raw otherwise."""
    if mode:
        return mode
    stream = stream or sys.stdout
    try:
        return "pretty" if stream.isatty() else "raw"
    except (AttributeError, ValueError):
        return "raw"


# ================================================================ failures

def fail(message, code=EXIT_ERROR):
    """Print ``xs: message`` on stderr and exit."""
    try:
        sys.stderr.write("xs: %s\n" % message)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    sys.exit(code)


def store_at(path, durable=True, readonly=False, create=True):
    """Open the store at ``path`` (raises storage.store.StoreError)."""
    from storage.store import Store
    return Store(path, durable=durable, readonly=readonly, create=create, upgrade_notice=_upgrade_notice(path))


def open_path(path, durable=True):
    """The store at ``path`` for a library user (xstream_cli.client): made
    if missing; opened read-only, each write saying why, when this user
    may read it but not write it.  Raises StoreError."""
    from storage.store import ReadOnlyStore
    try:
        return store_at(path, durable, False, True)
    except ReadOnlyStore as e:
        store = store_at(path, durable, readonly=True, create=False)
        store.why_read_only = e.reason
        return store


def _upgrade_notice(path):
    """What a person at a terminal is told before an older store is
    upgraded (it holds the store for a while when it is big); scripts
    and cron jobs, whose stderr is not a terminal, are told nothing."""
    def notice(old, new, entries):
        try:
            if sys.stderr.isatty():
                sys.stderr.write("xs: upgrading store %s from format %d to %d (%d entries), once...\n"
                                 % (path, old, new, entries))
                sys.stderr.flush()
        except (OSError, ValueError):
            pass
    return notice


def open_store(g, write=True, create=None):
    """The store ``g`` names, or exit 1 with a message saying why not
    (``try_open``'s rules)."""
    from storage.store import StoreError
    try:
        return try_open(g, write, create)
    except StoreError as e:
        fail(str(e))


def try_open(g, write=True, create=None):
    """The store ``g`` names; raises StoreError saying why it cannot be had.

    ``write``: the caller may write; without it the store is opened
    read-only when it can be, so the open does not queue behind a running
    writer (a store of an older format is opened for writing, which
    upgrades it).  ``create`` (default: ``write``): make the store if it
    is missing -- only writes create a store; a read of a missing one
    fails, naming the path, as ``xs ls`` does.  A new store is announced
    once on stderr when it is a terminal.  A store named by --db or XS_DB
    is created only in a directory that exists (a typo'd deep path is an
    error naming the missing directory); the default store's directories
    are made as needed.  A directory holding other files is never made a
    store.  A store this user may read but not write (its files' modes, a
    read-only file system) is opened read-only: reads work and every
    write fails with the reason."""
    from storage.store import NeedsWriteAccess, NoSuchStore, ReadOnlyStore, StoreError
    if create is None:
        create = write
    path = db_path(g)
    if not write:
        try:
            return store_at(path, g.durable, readonly=True, create=False)
        except NoSuchStore:
            if not create:
                raise
        except NeedsWriteAccess:
            pass                   # an older format: the open for writing upgrades it
    if create and (g.db or os.environ.get("XS_DB")) and not os.path.lexists(path):
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreError("cannot create the store %s: no such directory: %s" % (path, parent))
    try:
        store = store_at(path, g.durable, False, create)
    except ReadOnlyStore as e:
        store = store_at(path, g.durable, readonly=True, create=False)
        store.why_read_only = e.reason    # the user may read it: reads work, each write says why not
        return store
    if store.created:
        _say_created(path)
    return store


def _say_created(path):
    """Tell a person at a terminal that a write made a new store (a
    mistyped --db shows at once); scripts and cron jobs are told nothing."""
    try:
        if sys.stderr.isatty():
            sys.stderr.write("xs: created store %s\n" % path)
            sys.stderr.flush()
    except (OSError, ValueError):
        pass


def write_out(data):
    """Write to stdout, quietly ending on a closed pipe."""
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    except BrokenPipeError:
        quiet_exit()


def quiet_exit(code=EXIT_OK):
    """End now, without Python's complaint about a closed stdout."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    os._exit(code)
