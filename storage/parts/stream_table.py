"""Stream records (the keyspace) and the store's counters.

``StreamTable`` owns the ``keys`` database and the counters in ``meta``.
A verb reads each stream's record once (``get``) and changes the
decoded object in place; ``flush`` writes back exactly the records whose
encoding changed (compared with what was read), so no verb can forget
to save one, and a verb that adds a thousand entries writes its record
once.

It also keeps the per-stream change counters that blocked readers watch
(storage.blocking): ``flush`` bumps the counter of every stream whose
record changed or that a verb ``touch``ed (a change to its groups), in
the same transaction as the change.

Invariant: a stream's record says how many entries it holds (``length``)
and which number (``sid``) its data hangs off; the record goes away
only together with that data (keyspace.delete_keys, Parts.flush).

A stream whose expiry time (``expire_at``) has passed is absent: ``get``
answers None and the walkers leave it out; ``get`` keeps its record in
``expired`` so that the writer that saw it removes its data with it
(Parts.flush; storage.parts.expiry).
"""
from storage import codec

_ABSENT = object()


class StreamTable:
    """Stream records of one verb."""

    __slots__ = ("_kv", "_db", "_meta", "_cache", "_raw", "_touched", "_idmp", "_now", "expired")

    def __init__(self, kv, now=0):
        self._kv = kv
        self._now = now           # the verb's clock (ms): what has expired
        self.expired = {}         # name -> record of a stream found expired
        self._db = kv.db(b"keys")
        self._meta = kv.db(b"meta")
        self._cache = {}          # name -> StreamMeta, or None if absent
        self._raw = {}            # name -> stored bytes when read (None: absent)
        self._touched = set()     # names changed otherwise than in their record
        self._idmp = None         # (IDMP-DURATION, IDMP-MAXSIZE) of new streams, once read

    # --------------------------------------------------------------- records

    def get(self, name):
        """The record of stream ``name``, or None."""
        m = self._cache.get(name, _ABSENT)
        if m is not _ABSENT:
            return m
        raw = self._kv.get(self._db, codec.name_key(name))
        m = codec.StreamMeta.decode(raw) if raw is not None else None
        if m is not None and self._gone(m):
            self.expired[name] = m
            m = None
        self._cache[name] = m
        self._raw[name] = raw
        return m

    def create(self, name):
        """A new, empty stream ``name`` (its number drawn from a counter)."""
        self.get(name)            # remember what was stored under the name
        m = codec.StreamMeta(self.counter(codec.COUNTER_SID), name if len(name) > codec.SHORT_NAME else None)
        m.idmp_duration, m.idmp_maxsize = self.idmp_defaults()
        self._cache[name] = m
        return m

    def idmp_defaults(self):
        """(IDMP-DURATION, IDMP-MAXSIZE) a stream made now takes: the
        store's stream-idmp-duration and stream-idmp-maxsize
        (storage.verbs.settings)."""
        if self._idmp is None:
            self._idmp = codec.decode_pair(self._kv.get(self._meta, codec.META_IDMP_DEFAULTS), codec.IDMP_DEFAULTS)
        return self._idmp

    def forget_idmp_defaults(self):
        self._idmp = None

    def get_or_create(self, name):
        m = self.get(name)
        return m if m is not None else self.create(name)

    def touch(self, name):
        """Stream ``name`` changed outside its record (its groups): wake
        its blocked readers after commit."""
        self._touched.add(name)

    def forget(self, name):
        """Remove the record of ``name`` (its data is the caller's)."""
        self.get(name)
        self._cache[name] = None

    def adopt(self, name, m):
        """Make ``m`` (the record of another name) the record of ``name``
        (RENAME): its data follows, since it hangs off ``m.sid``."""
        self.get(name)
        m.name = name if len(name) > codec.SHORT_NAME else None
        self._cache[name] = m

    def names(self, start=b""):
        """(name key, name) of every stream from name key ``start`` on, in
        key order, as stored, without the expired ones (the verbs that
        walk names create and delete no streams)."""
        dead = self._dead()
        for k, v in self._kv.iter_prefix(self._db, b"", start=start or None):
            name = codec.name_from_key(k)
            if name is None or name in dead:
                m = codec.StreamMeta.decode(v)
                if self._gone(m):
                    continue
                name = m.name if name is None else name
            yield k, name

    def records(self):
        """(name, record) of every stream, in key order, as stored,
        without the expired ones."""
        for k, v in self._kv.iter_prefix(self._db, b""):
            m = codec.StreamMeta.decode(v)
            if not self._gone(m):
                name = codec.name_from_key(k)
                yield (name if name is not None else m.name), m

    def _gone(self, m):
        return m.expire_at is not None and m.expire_at <= self._now

    def _dead(self):
        """The names the expiry index says have expired (usually none, so
        the walk need not decode records to know)."""
        if self._kv.first_key(self._meta, codec.EXPIRY_PREFIX) is None:
            return ()
        from storage.parts.expiry import Expiry
        return Expiry(self._kv).expired_names(self._now)

    # -------------------------------------------------------------- counters

    def counter(self, which):
        """Next value of a persistent counter (sids, gids, cids, NACK
        order), from 1."""
        n = codec.decode_count(self._kv.get(self._meta, which)) + 1
        self._kv.put(self._meta, which, codec.encode_count(n))
        return n

    def change_counters(self, names):
        """The change counters of ``names`` (None: never changed)."""
        get, db = self._kv.get, self._meta
        return [get(db, codec.change_counter_key(n)) for n in names]

    def stored(self, names):
        """The records of ``names`` as stored (None: no such stream)."""
        get, db = self._kv.get, self._db
        return [get(db, codec.name_key(n)) for n in names]

    # ----------------------------------------------------------------- flush

    def flush(self):
        """Write back changed records and bump the change counters of
        changed streams.  Returns the set of their names."""
        kv, db = self._kv, self._db
        changed = set(self._touched)
        for name, m in self._cache.items():
            raw = self._raw[name]
            if m is None:
                if raw is not None:
                    kv.delete(db, codec.name_key(name))
                    changed.add(name)
                    self._raw[name] = None
                continue
            enc = m.encode()
            if enc != raw and (raw is None or codec.StreamMeta.decode(raw).encode() != enc):
                kv.put(db, codec.name_key(name), enc)
                changed.add(name)
                self._raw[name] = enc
        for name in changed:
            k = codec.change_counter_key(name)
            kv.put(self._meta, k, codec.encode_count(codec.decode_count(kv.get(self._meta, k)) + 1))
        self._touched.clear()
        return changed
