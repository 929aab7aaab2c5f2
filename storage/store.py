"""The store: one LMDB environment, opened once per process.

``Store.transact(fn, write)`` runs ``fn(txn)`` in one LMDB transaction and
commits it: every command (or, in script mode, every batch of commands)
is all or nothing.  The map grows by itself: a write that finds the map
full is aborted, the map doubled, and the work run again from the start,
so callers never see "map full".  A process whose map was outgrown by
another process adopts the new size and retries.

LMDB settings, chosen here and only here:
  sync=True, metasync=True  durable on commit (the default).  With
                            ``durable=False`` (``--no-sync`` / XS_NO_SYNC=1)
                            commits skip fsync: a crash of the *machine*
                            may lose the last commits, never corrupt the
                            store; a crash of xs alone loses nothing.
  writemap=False            a stray pointer cannot scribble on the file.
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
from storage.txn import Txn

INITIAL_MAP = 1 << 30


class StoreError(Exception):
    """The store cannot be opened or used (not a Redis error reply)."""


class Store:
    """An xs store on disk: ``Store(path)``; then ``transact`` or
    ``read()`` / ``write()`` context managers giving a ``Txn``."""

    def __init__(self, path, durable=True, readonly=False, create=True):
        self.path = path
        self.readonly = readonly
        try:
            if create and not readonly:
                os.makedirs(path, exist_ok=True)
            elif not os.path.isdir(path):
                raise StoreError("cannot open store %s: no such store" % path)
            self.env = lmdb.open(path, map_size=INITIAL_MAP, max_dbs=len(codec.DATABASES) + 2,
                                 sync=durable, metasync=durable, writemap=False, lock=True,
                                 readonly=readonly, create=create and not readonly,
                                 max_readers=510)
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
        self.dbs = {}
        try:
            if readonly:
                # handles opened in a read transaction die with it: open them
                # outside any transaction
                for name in codec.DATABASES:
                    self.dbs[name] = self.env.open_db(name, create=False)
            else:
                with self.env.begin(write=True) as t:
                    for name in codec.DATABASES:
                        self.dbs[name] = self.env.open_db(name, txn=t)
                    meta = self.dbs[b"meta"]
                    version = t.get(b"format", db=meta)
                    if version is None:
                        t.put(b"format", b"%d" % codec.FORMAT_VERSION, db=meta)
                    elif int(version) > codec.FORMAT_VERSION:
                        raise StoreError("store %s has format %s; this xs reads format %d or older"
                                         % (path, version.decode(), codec.FORMAT_VERSION))
        except lmdb.MapFullError:
            self._grow()
            self.__init__(path, durable, readonly, create)
        except lmdb.NotFoundError:
            raise StoreError("cannot open store %s: not an xs store" % path)
        except lmdb.Error as e:
            raise StoreError("cannot open store %s: %s" % (path, _lmdb_reason(e)))

    # ---------------------------------------------------------- transactions

    def transact(self, fn, write=True):
        """Run ``fn(txn)`` in one transaction; commit if ``write``.
        Retried from scratch if the map must grow."""
        while True:
            try:
                lt = self.env.begin(write=write)
            except lmdb.MapResizedError:
                self.env.set_mapsize(0)
                continue
            tx = Txn(self, lt, write)
            try:
                result = fn(tx)
                if write:
                    changed = tx.flush()
                    lt.commit()
                    if changed:
                        notify(self, changed)
                else:
                    lt.abort()
                return result
            except lmdb.MapFullError:
                lt.abort()
                self._grow()
            except lmdb.MapResizedError:
                lt.abort()
                self.env.set_mapsize(0)
            except BaseException:
                lt.abort()
                raise

    def read(self):
        return _TxnContext(self, False)

    def write(self):
        return _TxnContext(self, True)

    def _grow(self):
        size = self.env.info()["map_size"]
        self.env.set_mapsize(size * 2)

    def close(self):
        self.env.close()


class _TxnContext:
    """``with store.write() as tx:`` for library users (no automatic
    retry on map growth: use ``transact`` for that)."""

    def __init__(self, store, write):
        self.store, self.write = store, write

    def __enter__(self):
        self.lt = self.store.env.begin(write=self.write)
        self.tx = Txn(self.store, self.lt, self.write)
        return self.tx

    def __exit__(self, et, ev, tb):
        if et is None and self.write:
            changed = self.tx.flush()
            self.lt.commit()
            if changed:
                notify(self.store, changed)
        else:
            self.lt.abort()
        return False


def _lmdb_reason(e):
    text = str(e)
    return text.split(": ", 1)[-1] if ": " in text else text
