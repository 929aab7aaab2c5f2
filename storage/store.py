"""The store: one LMDB environment, opened once per process.

``Store.run(fn, write)`` runs ``fn(txn)`` in one LMDB transaction
(storage.txn.Txn) and commits it if ``fn`` returns: every command (or,
in script mode, every batch of commands) is all or nothing.  The map
grows by itself: a write that finds the map full is aborted, the map
doubled, and the work run again from the start, so callers never see
"map full".  A process whose map was outgrown by another process adopts
the new size and retries.

Opening a store checks its format version (storage.codec): a newer one
is refused; an older one is migrated (storage.migrate) in the same
write transaction that opens it, under LMDB's write lock, so it happens
once, whoever opens the store first.

LMDB settings, chosen here and only here:
  sync=True, metasync=True  durable on commit (the default).  With
                            ``durable=False`` (``--no-sync`` / XS_NO_SYNC)
                            commits skip fsync: a crash of the *machine*
                            may lose the last commits, never corrupt the
                            store; a crash of xs alone loses nothing.
  writemap=False            a stray pointer cannot scribble on the file,
                            and nested transactions (savepoints) work.
  lock=True                 many processes share one store.
  max_dbs                   the fixed set in ``codec.DATABASES``.
  map_size                  1 GiB of address space to start (the file
                            grows only as data is written), doubled on
                            demand.
"""
import os

import lmdb

from storage import codec
from storage.blocking import notify
from storage.txn import Retry, StoreFailure, Txn

INITIAL_MAP = 1 << 30


class StoreError(Exception):
    """The store cannot be opened or used (not a Redis error reply)."""


class Store:
    """An xs store on disk: ``Store(path)``; then ``run`` or the
    ``read()`` / ``write()`` context managers giving a ``Txn``."""

    def __init__(self, path, durable=True, readonly=False, create=True):
        self.path = path
        self.readonly = readonly
        self.durable = durable
        self.env = self._open_env(create)
        self.dbs = {}
        while True:
            try:
                self._open_dbs()
                return
            except lmdb.MapFullError:
                self._grow()
            except lmdb.NotFoundError:
                self.env.close()
                raise StoreError("cannot open store %s: not an xs store" % path)
            except StoreError:
                self.env.close()
                raise
            except lmdb.Error as e:
                self.env.close()
                raise StoreError("cannot open store %s: %s" % (path, _lmdb_reason(e)))

    def _open_env(self, create):
        path = self.path
        try:
            if create and not self.readonly:
                os.makedirs(path, exist_ok=True)
            elif not os.path.isdir(path):
                raise StoreError("cannot open store %s: no such store" % path)
            return lmdb.open(path, map_size=INITIAL_MAP, max_dbs=len(codec.DATABASES) + 2,
                             sync=self.durable, metasync=self.durable, writemap=False, lock=True,
                             readonly=self.readonly, create=create and not self.readonly, max_readers=510)
        except StoreError:
            raise
        except FileExistsError:
            raise StoreError("cannot open store %s: a file is in the way (a store is a directory)" % path)
        except NotADirectoryError:
            raise StoreError("cannot open store %s: a path component is not a directory" % path)
        except PermissionError:
            raise StoreError("cannot open store %s: permission denied" % path)
        except lmdb.Error as e:
            raise StoreError("cannot open store %s: %s" % (path, _lmdb_reason(e)))
        except OSError as e:
            raise StoreError("cannot open store %s: %s" % (path, e.strerror or e))

    def _open_dbs(self):
        """Open the named databases; create, check or migrate the format."""
        if self.readonly:
            # handles opened in a read transaction die with it: open them
            # outside any transaction
            meta = self.env.open_db(b"meta", create=False)
            with self.env.begin() as t:
                self._check_format(t.get(codec.META_FORMAT, db=meta), writable=False)
            for name in codec.DATABASES:
                self.dbs[name] = self.env.open_db(name, create=False)
            return
        with self.env.begin(write=True) as t:
            for name in codec.DATABASES:
                self.dbs[name] = self.env.open_db(name, txn=t)
            meta = self.dbs[b"meta"]
            raw = t.get(codec.META_FORMAT, db=meta)
            if raw is None:
                if t.stat(self.dbs[b"keys"])["entries"]:
                    raise StoreError("cannot open store %s: it has streams but no format version" % self.path)
                t.put(codec.META_FORMAT, codec.encode_count(codec.FORMAT_VERSION), db=meta)
            elif self._check_format(raw, writable=True) < codec.FORMAT_VERSION:
                from storage.migrate import migrate
                migrate(t, self.dbs, int(raw))

    def _check_format(self, raw, writable):
        """The store's format version, if this code can use it."""
        try:
            version = int(raw) if raw is not None else codec.FORMAT_VERSION
        except ValueError:
            raise StoreError("cannot open store %s: bad format version %r" % (self.path, raw))
        if version > codec.FORMAT_VERSION:
            raise StoreError("store %s has format %d; this xs reads format %d or older (upgrade xs)"
                             % (self.path, version, codec.FORMAT_VERSION))
        if version < codec.OLDEST_FORMAT:
            raise StoreError("store %s has format %d, older than any this xs can upgrade" % (self.path, version))
        if version < codec.FORMAT_VERSION and not writable:
            raise StoreError("store %s has format %d; open it once with write access to upgrade it to "
                             "format %d" % (self.path, version, codec.FORMAT_VERSION))
        return version

    # ---------------------------------------------------------- transactions

    def run(self, fn, write=False, savepoints=False):
        """Run ``fn(txn)`` in one transaction and return its result;
        commit if ``write`` and ``fn`` returned, abort otherwise.  With
        ``savepoints`` every write verb is atomic on its own (script
        mode).  Run again from scratch if the map must grow."""
        while True:
            try:
                lt = self.env.begin(write=write)
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
                continue
            tx = Txn(self, lt, write, savepoints)
            try:
                result = fn(tx)
                tx.check_committable()
                if write:
                    lt.commit()
                else:
                    lt.abort()
            except Retry as e:
                lt.abort()
                self._grow() if e.grow else self.env.set_mapsize(0)
                continue
            except lmdb.MapFullError:
                lt.abort()
                self._grow()
                continue
            except lmdb.MapResizedError:
                lt.abort()
                self.env.set_mapsize(0)
                continue
            except lmdb.Error as e:
                lt.abort()
                raise StoreFailure("the store failed: %s" % _lmdb_reason(e))
            except BaseException:
                lt.abort()
                raise
            if tx.changed:
                notify(self, tx.changed)
            return result

    def read(self):
        """``with store.read() as tx:`` a read transaction."""
        return _TxnContext(self, False)

    def write(self):
        """``with store.write() as tx:`` a write transaction, committed at
        the end of the block unless it raises; each verb in it is atomic
        on its own (a verb that raises changes nothing)."""
        return _TxnContext(self, True)

    def _grow(self):
        size = self.env.info()["map_size"]
        self.env.set_mapsize(size * 2)

    def close(self):
        self.env.close()


class _TxnContext:
    """``with store.write() as tx:`` for library users (no automatic
    retry on map growth: use ``run`` for that)."""

    def __init__(self, store, write):
        self.store, self.write = store, write

    def __enter__(self):
        self.lt = self.store.env.begin(write=self.write)
        self.tx = Txn(self.store, self.lt, self.write, savepoints=self.write)
        return self.tx

    def __exit__(self, et, ev, tb):
        if et is None and self.write:
            self.tx.check_committable()
            self.lt.commit()
            if self.tx.changed:
                notify(self.store, self.tx.changed)
        else:
            self.lt.abort()
        return False


def _lmdb_reason(e):
    text = str(e)
    return text.split(": ", 1)[-1] if ": " in text else text
