"""RDB files: ``xs save --format rdb`` and ``xs restore`` of a file that
redis-server wrote with SAVE or BGSAVE (no click, no rich).  Issue 26,
item 8.

Reading.  An RDB file is recognised by its "REDIS" signature
(``is_rdb``).  It is read once, a chunk at a time, in ONE write
transaction: the streams of database 0 are loaded as they come, through
``Txn.load_rdb_stream`` (the RESTORE path: the loader of
storage.verbs.load, the file's listpack nodes kept), and everything
else is read over and counted -- values of the other types (strings,
LZF-compressed or integer-encoded, lists, hashes, sets, sorted sets, in
every encoding of Redis 2.x to 8.0), keys of other databases, keys
already expired (Redis does not load them either), function libraries.
Aux fields, SELECTDB, RESIZEDB, IDLE, FREQ and the expiry opcodes are
understood; module data cannot be read without its module and is
refused.  The CRC-64 at the end is checked when the file has one
(0: saved with rdbchecksum no).  Any fault -- in the file, the checksum,
a stream that exists already without ``replace`` -- aborts the
transaction: the store is as it was.  A stream's TTL is kept.

Writing.  Every stream (or the named ones) from ONE read transaction,
as RDB version 10 with RDB type 19 values -- what redis-server 7.0 and
later load at start-up -- with its TTL, to a temporary file renamed
into place (mode 0600), as ``xs save`` does.  The values are those of
DUMP (storage.verbs.serialized): what Redis 7.0 has no place for (IDMP
history, consumers' active-time) is not carried; the summary counts the
streams whose IDMP history stayed behind, and a stream with NACKed
entries is refused.
"""
import time

from storage import codec
from storage.errors import RedisError
from storage.ops.snapshot import SnapshotError, Stats, _size, write_to_path
from storage.txn import StoreFailure

CHUNK = 1 << 20


def is_rdb(path):
    """Whether the file at ``path`` begins with Redis's RDB signature."""
    try:
        with open(path, "rb") as f:
            return f.read(5) == codec.RDB_MAGIC
    except OSError:
        return False


class Skipped:
    """What a restore read over: keys by type, keys of other databases,
    expired keys, function libraries."""

    __slots__ = ("types", "other_db", "expired", "functions")

    def __init__(self):
        self.types = {}
        self.other_db = self.expired = self.functions = 0

    def text(self):
        """"; skipped 3 strings, 1 hash, ..." for the summary line ("" if nothing)."""
        parts = ["%d %s%s" % (n, t, "" if n == 1 else ("es" if t == "hash" else "s"))
                 for t, n in sorted(self.types.items())]
        if self.other_db:
            parts.append("%d key%s of other databases" % (self.other_db, "" if self.other_db == 1 else "s"))
        if self.expired:
            parts.append("%d expired key%s" % (self.expired, "" if self.expired == 1 else "s"))
        if self.functions:
            parts.append("%d function librar%s" % (self.functions, "y" if self.functions == 1 else "ies"))
        return "; skipped " + ", ".join(parts) if parts else ""


def _bad(e, r):
    """One offset: the error's own (where the file ends, for a short one)
    or where the reader stopped."""
    at = e.offset if getattr(e, "offset", None) is not None else r.offset()
    return SnapshotError("not a valid RDB file: %s (at byte %d)" % (e, at))


def _read(path, tx, replace, progress, size):
    """Read the RDB file at ``path``; with ``tx``, load its streams there.
    Returns (Stats, Skipped)."""
    st, sk = Stats(), Skipped()
    now = int(time.time() * 1000)
    cb = None if progress is None else (lambda off: progress("restore" if tx else "verify", off, size))
    try:
        f = open(path, "rb")
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    seen = set()
    with f:
        r = codec.RdbReader(f=f, checksum=True, progress=cb)
        try:
            version = codec.rdb_read_header(r)
            while True:
                item = codec.rdb_next(r, version)
                kind = item[0]
                if kind == "eof":
                    stored, computed = item[1], item[2]
                    if stored and stored != computed:
                        raise SnapshotError("checksum mismatch: the RDB file is corrupt")
                    if not r.at_end():
                        raise codec.RdbError("unexpected data after the end of the file")
                    break
                if kind == "function":
                    sk.functions += 1
                    continue
                if kind != "key":
                    continue
                _, db, t, key, expire = item
                if db != 0:
                    sk.other_db += 1
                elif expire is not None and expire < now:
                    sk.expired += 1
                elif t in codec.RDB_STREAM_TYPES:
                    if key in seen:
                        raise codec.RdbError("the key %s appears twice" % _show(key))
                    seen.add(key)
                    if tx is None:
                        st.entries += _count_entries(r, t)
                    else:
                        if not replace and tx.exists([key]):
                            raise SnapshotError("stream %s already exists in the target store "
                                                "(use --replace to overwrite it)" % _show(key))
                        st.entries += tx.load_rdb_stream(key, t, r, replace, expire).entries
                    st.streams += 1
                    continue
                else:
                    name = codec.rdb_type_name(t)
                    sk.types[name] = sk.types.get(name, 0) + 1
                codec.rdb_skip_value(r, t)
        except codec.RdbError as e:
            raise _bad(e, r)
        except MemoryError:
            raise SnapshotError("not enough memory to read the RDB file (at byte %d)" % r.offset())
    st.bytes = size or 0
    return st, sk


def _count_entries(r, t):
    n = 0
    for ev in codec.rdb_stream_events(r, t):
        if ev[0] == "node":
            n += ev[3]
    return n


def _show(name):
    return name.decode("utf-8", "backslashreplace")


def verify_rdb(path, progress=None):
    """``xs restore --check`` of an RDB file: read it whole (every value,
    the checksum), change nothing.  Returns (Stats, Skipped)."""
    t0 = time.monotonic()
    try:
        st, sk = _read(path, None, False, progress, _size(path))
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    st.seconds = time.monotonic() - t0
    return st, sk


def restore_rdb(store, path, replace=False, progress=None):
    """Load the streams of the RDB file at ``path`` into ``store`` in one
    write transaction (see the module docstring).  Returns (Stats,
    Skipped)."""
    t0 = time.monotonic()
    size = _size(path)
    try:
        st, sk = store.run(lambda tx: _read(path, tx, replace, progress, size), write=True)
    except (StoreFailure, RedisError) as e:
        raise SnapshotError("cannot apply the RDB file: %s" % e)
    except OSError as e:
        raise SnapshotError("cannot read %s: %s" % (path, e.strerror or e))
    st.seconds = time.monotonic() - t0
    if progress is not None:
        progress("restore", size, size)
    return st, sk


# ==================================================================== save

def save_rdb(store, f, streams=None, progress=None):
    """Write the streams of ``store`` (or the named ``streams``) to the
    binary file ``f`` as an RDB file (version 10), from one read
    transaction.  Returns (Stats, notes): notes counts the streams whose
    IDMP history is not carried ({"idmp": n})."""
    t0 = time.monotonic()
    st = Stats()
    notes = {"idmp": 0}
    written = [0]
    crc = [0]

    def out(data):
        crc[0] = codec.rdb_crc64(data, crc[0])
        f.write(data)
        written[0] += len(data)

    with store.read() as tx:
        if streams is None:
            names = tx.stream_names()
        else:
            names = list(dict.fromkeys(streams))
            for name in names:
                if not tx.exists([name]):
                    raise SnapshotError("no such stream: %s" % _show(name))
        expires = {}
        for name in names:
            at = _expire_time(tx, name)
            if at is not None:
                expires[name] = at
        total = sum(tx.length(n) for n in names)
        out(codec.rdb_file_header([(b"redis-bits", b"64"), (b"ctime", b"%d" % int(time.time())),
                                   (b"used-mem", b"0"), (b"aof-base", b"0"),
                                   (b"xs-writer", b"xs save --format rdb")]))
        if names:
            out(codec.rdb_file_db(0, len(names), len(expires)))
        buf = []
        size = 0
        for name in names:
            try:
                value, n = tx.rdb_value(name)
            except RedisError as e:
                raise SnapshotError("stream %s: %s" % (_show(name), e))
            notes["idmp"] += n["idmp"]
            if name in expires:
                buf.append(codec.rdb_file_expire(expires[name]))
            piece = codec.rdb_file_key(name, value)
            buf.append(piece)
            size += len(piece)
            st.streams += 1
            st.entries += tx.length(name)
            if size >= CHUNK:
                out(b"".join(buf))
                buf, size = [], 0
                if progress is not None:
                    progress("save", st.entries, total)
        buf.append(codec.rdb_file_end())
        out(b"".join(buf))
        f.write(codec.rdb_file_crc(crc[0]))
        written[0] += 8
    if hasattr(f, "flush"):
        f.flush()
    st.bytes = written[0]
    st.seconds = time.monotonic() - t0
    if progress is not None:
        progress("save", st.entries, total)
    return st, notes


def _expire_time(tx, name):
    """The stream's TTL (Unix ms) or None."""
    at = tx.expire_time(name)
    return at if at >= 0 else None


def save_rdb_to_path(store, path, streams=None, progress=None):
    """``save_rdb`` into ``path`` through a temporary file in the same
    directory (mode 0600), fsynced and renamed into place."""
    return write_to_path(path, lambda f: save_rdb(store, f, streams, progress))
