"""Keyspace verbs a log needs: DEL, EXISTS, TYPE, KEYS, SCAN, RENAME
(``KeyspaceOps``, a mixin of the transaction).  Every key is a stream.

Keys iterate in name order (the ``keys`` database).  A SCAN cursor is
1 + the first 8 bytes of the next name key, read as a big-endian number:
resuming seeks there, so a key present for the whole scan is never
missed; a page never ends inside a run of keys sharing those 8 bytes,
so the cursor always moves forward.
"""
from storage import codec, errors
from storage.glob import match


class KeyspaceOps:
    """Mixin of ``storage.txn.Txn``: keyspace verbs."""

    def delete_keys(self, names):
        """DEL: delete streams with their entries and groups."""
        n = 0
        for name in names:
            m = self.meta(name)
            if m is None:
                continue
            self.drop_stream_data(m)
            self.forget_meta(name)
            n += 1
        return n

    def exists(self, names):
        """EXISTS: how many of ``names`` exist (repeats count again)."""
        return sum(1 for name in names if self.meta(name) is not None)

    def key_type(self, name):
        """TYPE: "stream" or "none"."""
        return "stream" if self.meta(name) is not None else "none"

    def _names_from(self, start_key):
        """(name key, name) pairs from ``start_key`` on, in key order."""
        c = self.lt.cursor(db=self.db_keys)
        if not c.set_range(start_key):
            return
        for k, v in c.iternext():
            name = codec.name_from_key(k)
            if name is None:
                name = codec.StreamMeta.decode(v).name
            yield k, name

    def _pending_names(self):
        """Streams created or deleted in this transaction, not yet flushed."""
        return {n: m for n, m in self._metas.items() if n in self._dirty}

    def keys(self, pattern):
        """KEYS pattern."""
        self.flush()
        return [name for _, name in self._names_from(b"") if match(pattern, name)]

    def scan(self, cursor, pattern=None, count=10, type_=None):
        """SCAN: (next cursor, names).  ``type_`` filters by type name."""
        self.flush()
        # resume at the cursor's 8 bytes without their zero padding, so a
        # key shorter than 8 bytes is found again (duplicates are allowed)
        start = b"" if cursor == 0 else (cursor - 1).to_bytes(8, "big").rstrip(b"\x00")
        out = []
        seen = 0
        nxt = 0
        boundary = None
        for k, name in self._names_from(start):
            if seen >= count:
                if boundary is None:
                    boundary = k[:8].ljust(8, b"\x00")
                if k[:8].ljust(8, b"\x00") != boundary:
                    nxt = int.from_bytes(k[:8].ljust(8, b"\x00"), "big") + 1
                    break
            seen += 1
            if pattern is not None and not match(pattern, name):
                continue
            if type_ is not None and type_.lower() != b"stream":
                continue
            out.append(name)
        return nxt, out

    def rename(self, src, dst):
        """RENAME: the stream keeps its entries and groups (they hang off
        its number, not its name); an existing ``dst`` is deleted."""
        m = self.meta(src)
        if m is None:
            raise errors.no_such_key()
        if src == dst:
            return
        if self.meta(dst) is not None:
            self.delete_keys([dst])
        m.name = dst if len(dst) > codec.SHORT_NAME else None
        self.forget_meta(src)
        self._metas[dst] = m
        self.mark(dst)
