"""A transaction on the store: the engine's public surface.

``Txn`` is what ``Store.run`` (and ``store.read()`` / ``store.write()``)
hands out.  Every public method is one verb -- one Redis command, or
one porcelain operation -- and every verb is all or nothing, by
mechanism:

* with savepoints (script-mode batches, ``store.write()``), a write verb
  runs in a nested LMDB transaction of its own and commits into the
  outer one only if it returns; if it raises (a Redis error or a bug),
  the nested transaction is aborted and the store is as it was before
  the verb, while earlier verbs of the batch stand;
* without (single-command mode), the verb runs in the transaction
  itself, and a verb that raises poisons the transaction: ``Store.run``
  aborts it, and it accepts no further verb.

A verb's records (streams, groups, consumers) are decoded into the
verb's parts (storage.parts) and written back when it succeeds, so no
cache outlives a verb, and the streams each verb changed are collected
for waking blocked readers after the commit.

Without write access (a read transaction), a write verb runs as a dry
run: if it would write anything, LMDB refuses and ``WouldWrite`` is
raised (blocked readers use this to re-check cheaply).
"""
import time

import lmdb

from storage.errors import RedisError
from storage.parts import Parts


class _VerbModule:
    """A module of verbs imported on first use: a one-shot ``xs XLEN``
    loads the stream verbs, not the group, delivery and keyspace ones."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        module = __import__("storage.verbs." + self._name, fromlist=["_"])
        globals()[self._name] = module       # later calls go straight to it
        return getattr(module, attr)


delivery, groups, keyspace, settings, streams = (_VerbModule(n) for n in
                                                  ("delivery", "groups", "keyspace", "settings", "streams"))

if False:  # typing only (not imported at run time)
    from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple

    from storage.codec import Entries
    from storage.codec.rdb import RdbReader
    from storage.info import (
        AutoClaimed,
        ConsumerInfo,
        GroupHealth,
        GroupInfo,
        PendingRow,
        PendingSummary,
        StreamInfo,
        TrimPreview,
    )
    from storage.options import (
        AddOptions,
        AutoClaimOptions,
        ClaimOptions,
        GroupOptions,
        IdmpConfigOptions,
        IdsOptions,
        NackOptions,
        PendingOptions,
        RangeOptions,
        ReadOptions,
        RestoreOptions,
        SetIdOptions,
        StreamInfoOptions,
        TrimOptions,
    )
    from storage.verbs.load import Stats
    StreamID = Tuple[int, int]
    ReadResult = List[Tuple[bytes, list]]     # [(key, entries)]: Entries (XREAD) or Entry rows (XREADGROUP)

    class _StoreLike(Protocol):
        """What a Txn uses of its storage.store.Store (which imports this module)."""
        env: Any
        dbs: Dict[bytes, Any]


class WouldWrite(Exception):
    """A write verb in a read transaction had something to write."""


class Retry(Exception):
    """The store's map must grow (or was grown by another process): the
    transaction is aborted and run again from the start (Store.run)."""

    def __init__(self, grow):
        Exception.__init__(self, "map full" if grow else "map resized")
        self.grow = grow


class StoreFailure(Exception):
    """The store itself failed (an I/O error, a full disk): not a Redis
    error reply, not a bug in a command."""


class Aborted(Exception):
    """A verb failed in this transaction without a savepoint: it must not
    be committed."""


class Txn:
    """One LMDB transaction and the verbs that run in it."""

    def __init__(self, store: "_StoreLike", lt: "lmdb.Transaction", writable: bool, savepoints: bool = False) -> None:
        self._store = store
        self._lt = lt
        self.writable = writable
        self._savepoints = savepoints
        self._failed: Optional[BaseException] = None   # the error that poisoned this transaction
        self.changed: set[bytes] = set()   # streams changed by committed verbs
        self._tails: dict = {}       # last listpack node per stream (storage.parts.log), kept
                                     # across verbs; cleared when a verb is rolled back
        self._shared: Optional[Parts] = None   # the Parts of a ``shared`` run in progress
        self.dirty = 0               # changes made by the verbs kept, as Redis's server.dirty counts them
                                     # (consumers made by their first use included): xs serve's INFO
        self._clock: Optional[int] = None   # the transaction's one clock reading (tick)

    @staticmethod
    def now() -> int:
        """Wall-clock milliseconds (the clock of auto IDs and idle times)."""
        return int(time.time() * 1000)

    # =========================================================== plumbing

    def tick(self) -> None:
        """Read the clock anew for the verbs that follow (xs serve: each
        job of a group commit).  A transaction reads it once, at its first
        verb, and every verb sees that reading (auto IDs, idle times,
        expiry), as Redis keeps one clock per MULTI/EXEC: a stream cannot
        expire between two verbs of one EXEC, script batch or snapshot."""
        self._clock = None

    def _parts(self, lt):
        if self._clock is None:
            self._clock = self.now()
        return Parts(lt, self._store.dbs, self._clock, self._tails)

    def _read(self, fn, *args):
        if self._failed is not None:
            raise Aborted("the transaction failed earlier: %s" % (self._failed,))
        if self._shared is not None:
            return fn(self._shared, *args)
        try:
            return fn(self._parts(self._lt), *args)
        except lmdb.Error as e:
            raise _store_error(e)

    def _write(self, fn, *args):
        if self._failed is not None:
            raise Aborted("the transaction failed earlier: %s" % (self._failed,))
        if self._shared is not None:
            return fn(self._shared, *args)
        if not self.writable:
            try:
                return fn(self._parts(self._lt), *args)
            except lmdb.ReadonlyError:
                self._tails.clear()
                raise WouldWrite()
            except lmdb.Error as e:
                raise _store_error(e)
        if self._savepoints:
            return self._savepoint(fn, *args)
        try:
            p = self._parts(self._lt)
            result = fn(p, *args)
            changed = p.flush()
        except lmdb.Error as e:
            self._failed = e
            raise _store_error(e)
        except BaseException as e:
            self._failed = e
            raise
        self.changed |= changed
        _count(self, p)
        return result

    def _savepoint(self, fn, *args):
        """``fn(parts, *args)`` in a child transaction: kept if it
        returns, rolled back (with the node cache) if it raises."""
        child = _child(self._store.env, self._lt)
        try:
            p = self._parts(child)
            result = fn(p, *args)
            changed = p.flush()
            child.commit()
        except lmdb.Error as e:
            child.abort()
            self._tails.clear()
            if isinstance(e, (lmdb.MapFullError, lmdb.MapResizedError)):
                self._failed = e
            raise _store_error(e)
        except BaseException:
            child.abort()
            self._tails.clear()
            raise
        self.changed |= changed
        _count(self, p)
        return result

    def shared(self, calls: "Sequence[Callable[[], object]]") -> "Optional[list]":
        """Run ``calls`` (functions of no argument, each calling one verb
        of this transaction: XREADGROUPs and XACKs from several clients)
        under ONE savepoint and one set of parts: the records they share
        (the stream's, the group's, the consumers') are read, decoded and
        written back once.  Their results, in order, when every verb
        succeeds: what a savepoint each would have kept.  When one raises
        a RedisError, the run is rolled back and None returned (the caller
        runs them one by one, so that only the failing one fails).  None
        at once in a transaction without savepoints."""
        if not (self.writable and self._savepoints) or self._shared is not None or self._failed is not None:
            return None

        def run(p):
            self._shared = p
            try:
                return [call() for call in calls]
            finally:
                self._shared = None
        try:
            return self._savepoint(run)
        except RedisError:
            return None

    def check_committable(self) -> None:
        """Raise Aborted if a verb failed without a savepoint."""
        if self._failed is not None:
            raise Aborted("the transaction failed: %s" % (self._failed,))

    # ============================================================ streams

    def add(self, name: bytes, fields: "Sequence[bytes]", opts: "AddOptions") -> "Optional[StreamID]":
        """XADD: the new ID (or a duplicate's earlier ID; None with
        NOMKSTREAM on a missing stream)."""
        return self._write(streams.add, name, fields, opts)

    def add_auto_many(self, items: "Sequence[Tuple[bytes, object]]", each: bool = False) -> "list":
        """Many ``XADD name * field value ...`` at once (bulk ingest; the
        fields a list, or their text form joined by newlines): their new
        IDs, in order -- the one verb for runs of adds, with its
        policy for a refused item (an exhausted ID) as an argument:

        * ``each=False``: all or nothing; the RedisError raised names the
          refused item by its index (``error.item``);
        * ``each=True``: every item all or nothing on its own, as if added
          one at a time (this transaction must have savepoints: script
          mode, xs serve): a refused item's place holds its RedisError
          and the others are added."""
        try:
            return self._write(streams.add_auto_many, items)
        except RedisError:
            if not each:
                raise
        return _add_each(self, items)   # rolled back (its savepoint): one by one finds the refused ones

    def range(self, name: bytes, opts: "RangeOptions") -> "Optional[Entries]":
        """XRANGE / XREVRANGE."""
        return self._read(streams.range_, name, opts)

    def length(self, name: bytes) -> int:
        """XLEN."""
        return self._read(streams.length, name)

    def delete_entries(self, name: bytes, opts: "IdsOptions") -> int:
        """XDEL."""
        return self._write(streams.delete_entries, name, opts)

    def delete_entries_ex(self, name: bytes, opts: "IdsOptions") -> "List[int]":
        """XDELEX: 1 deleted, -1 missing, 2 kept (ACKED) per ID."""
        return self._write(streams.delete_entries_ex, name, opts)

    def trim(self, name: bytes, opts: "TrimOptions") -> int:
        """XTRIM: entries removed."""
        return self._write(streams.trim, name, opts)

    def set_id(self, name: bytes, opts: "SetIdOptions") -> None:
        """XSETID."""
        return self._write(streams.set_id, name, opts)

    def record_idmp(self, name: bytes, pid: bytes, iid: bytes, opts: "IdsOptions") -> None:
        """XIDMPRECORD: (pid, iid) -> an existing entry in the IDMP history."""
        return self._write(streams.record_idmp, name, pid, iid, opts)

    def settings(self) -> "Dict[str, int]":
        """The store's settings, {name: int} (storage.verbs.settings; CONFIG GET)."""
        return self._read(settings.get)

    def configure(self, values: "Dict[str, int]") -> None:
        """Change store settings, {name: int} checked by the caller (CONFIG SET)."""
        return self._write(settings.set_, values)

    def store_id(self, create: bool = False) -> "Optional[str]":
        """The store's identity (storage.verbs.settings.identity): made now if
        missing and ``create`` (a write), else None when missing."""
        if create:
            return self._write(settings.identity, True)
        return self._read(settings.identity, False)

    def configure_idmp(self, name: bytes, opts: "IdmpConfigOptions") -> None:
        """XCFGSET."""
        return self._write(streams.configure_idmp, name, opts)

    def resolve_read_ids(self, keys: "Sequence[bytes]", ids: "Sequence[object]") -> "Tuple[object, ...]":
        """XREAD's ``$`` as each stream's last ID now (before blocking)."""
        return self._read(streams.resolve_read_ids, keys, ids)

    def read_streams(self, opts: "ReadOptions") -> "ReadResult":
        """XREAD (without waiting): [(key, entries)]."""
        return self._read(streams.read_streams, opts)

    def stream_info(self, name: bytes, opts: "StreamInfoOptions") -> "StreamInfo":
        """XINFO STREAM [FULL]."""
        return self._read(streams.stream_info, name, opts)

    # ============================================================= groups

    def create_group(self, name: bytes, group: bytes, opts: "GroupOptions") -> None:
        """XGROUP CREATE."""
        return self._write(groups.create_group, name, group, opts)

    def set_group_id(self, name: bytes, group: bytes, opts: "GroupOptions") -> None:
        """XGROUP SETID."""
        return self._write(groups.set_group_id, name, group, opts)

    def destroy_group(self, name: bytes, group: bytes) -> int:
        """XGROUP DESTROY: 1 if it existed."""
        return self._write(groups.destroy_group, name, group)

    def create_consumer(self, name: bytes, group: bytes, consumer: bytes) -> int:
        """XGROUP CREATECONSUMER: 1 if created."""
        return self._write(groups.create_consumer, name, group, consumer)

    def delete_consumer(self, name: bytes, group: bytes, consumer: bytes) -> int:
        """XGROUP DELCONSUMER: its pending entries (now dropped)."""
        return self._write(groups.delete_consumer, name, group, consumer)

    def read_group(self, opts: "ReadOptions") -> "ReadResult":
        """XREADGROUP (without waiting): [(key, [Entry or ClaimedEntry])]."""
        return self._write(delivery.read_group, opts)

    def read_group_run(self, reads: "Sequence[ReadOptions]") -> "list":
        """XREADGROUPs of new entries one after another (delivery.read_group_run): each one's result."""
        return self._write(delivery.read_group_run, reads)

    def deliver_spans(self, opts: "ReadOptions") -> "list":
        """``read_group`` of new entries only, not holding them: [(key, delivery.Span)] (its ``spans``)."""
        return self._write(delivery.read_group, opts, True)

    def claim_wait_ms(self, keys: "Sequence[bytes]", group: bytes, min_idle: int) -> "Optional[int]":
        """Blocked XREADGROUP CLAIM: ms until an entry becomes claimable."""
        return self._read(delivery.claim_wait_ms, keys, group, min_idle)

    def ack(self, name: bytes, group: bytes, opts: "IdsOptions") -> int:
        """XACK."""
        return self._write(groups.ack, name, group, opts)

    def ack_delete(self, name: bytes, group: bytes, opts: "IdsOptions") -> "List[int]":
        """XACKDEL."""
        return self._write(groups.ack_delete, name, group, opts)

    def nack(self, name: bytes, group: bytes, opts: "NackOptions") -> int:
        """XNACK."""
        return self._write(groups.nack, name, group, opts)

    def pending_summary(self, name: bytes, group: bytes) -> "PendingSummary":
        """XPENDING key group."""
        return self._read(groups.pending_summary, name, group)

    def pending_range(self, name: bytes, group: bytes, opts: "PendingOptions") -> "List[PendingRow]":
        """XPENDING key group [IDLE ms] start end count [consumer]."""
        return self._read(groups.pending_range, name, group, opts)

    def claim(self, name: bytes, group: bytes, consumer: bytes, opts: "ClaimOptions") -> "list":
        """XCLAIM: [Entry], or [StreamID] with JUSTID."""
        return self._write(delivery.claim, name, group, consumer, opts)

    def autoclaim(self, name: bytes, group: bytes, consumer: bytes, opts: "AutoClaimOptions") -> "AutoClaimed":
        """XAUTOCLAIM: AutoClaimed(next cursor, claimed, deleted IDs)."""
        return self._write(delivery.autoclaim, name, group, consumer, opts)

    def groups_info(self, name: bytes) -> "List[GroupInfo]":
        """XINFO GROUPS."""
        return self._read(groups.groups_info, name)

    def consumers_info(self, name: bytes, group: bytes) -> "List[ConsumerInfo]":
        """XINFO CONSUMERS."""
        return self._read(groups.consumers_info, name, group)

    def group_health(self, name: bytes, consumers: bool = False) -> "List[GroupHealth]":
        """[GroupHealth] of stream ``name``'s groups, no PEL walked (storage.verbs.health;
        ``consumers``: their records too)."""
        from storage.verbs.health import group_health
        return self._read(group_health, name, consumers)

    # =========================================================== keyspace

    def delete_keys(self, names: "Sequence[bytes]") -> int:
        """DEL."""
        return self._write(keyspace.delete_keys, names)

    def exists(self, names: "Sequence[bytes]") -> int:
        """EXISTS."""
        return self._read(keyspace.exists, names)

    def key_type(self, name: bytes) -> str:
        """TYPE."""
        return self._read(keyspace.key_type, name)

    def keys(self, pattern: bytes) -> "List[bytes]":
        """KEYS."""
        return self._read(keyspace.keys, pattern)

    def scan(self, cursor: int, pattern: "Optional[bytes]" = None, count: int = 10,
             type_: "Optional[bytes]" = None) -> "Tuple[int, List[bytes]]":
        """SCAN: (next cursor, names)."""
        return self._read(keyspace.scan, cursor, pattern, count, type_)

    def rename(self, src: bytes, dst: bytes) -> None:
        """RENAME."""
        return self._write(keyspace.rename, src, dst)

    def expire(self, name: bytes, when: int, relative: bool, flag: int, command: str) -> int:
        """EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT: ``when`` in ms, from now
        (``relative``) or from the epoch; ``flag``: keyspace.NX, XX, GT,
        LT or 0; ``command``: the name its error shows."""
        return self._write(keyspace.expire, name, when, relative, flag, command)

    def expire_time(self, name: bytes) -> int:
        """The key's expiry time, Unix ms; -1 without one, -2 if missing."""
        return self._read(keyspace.expire_time, name)

    def reap_expired(self, limit: int) -> int:
        """Remove up to ``limit`` streams whose TTL has passed: how many (a
        read transaction only counts them)."""
        return self._write(keyspace.reap_expired, limit)

    def expires(self) -> int:
        """How many streams have a TTL (INFO keyspace)."""
        return self._read(_expires)

    def persist(self, name: bytes) -> int:
        """PERSIST: 1 if a TTL was removed."""
        return self._write(keyspace.persist, name)

    def copy(self, src: bytes, dst: bytes, replace: bool = False) -> int:
        """COPY: 1 if ``dst`` was made a copy of ``src``, else 0."""
        from storage.verbs.copy import copy
        return self._write(copy, src, dst, replace)

    # ============================================== porcelain and loading

    def last_generated_id(self, name: bytes) -> "Optional[StreamID]":
        """A stream's last ID (None if it does not exist)."""
        return self._read(_last_generated_id, name)

    def group_names(self, name: bytes) -> "List[bytes]":
        """The names of a stream's groups ([] if it does not exist)."""
        return self._read(_group_names, name)

    def stream_names(self) -> "List[bytes]":
        """Every stream's name, in key order."""
        return self._read(_stream_names)

    def trim_preview(self, name: bytes, minid: "Optional[StreamID]" = None, maxlen: "Optional[int]" = None,
                     approx: bool = False) -> "TrimPreview":
        """What a KEEPREF trim of ``name`` to ``minid`` (entries below it
        go) and/or ``maxlen`` would remove (``approx``: whole nodes, as
        repeated ``~`` trims), and, group by group, the work among it no
        group has done (storage.info.TrimPreview)."""
        from storage.verbs.preview import trim_preview
        return self._read(trim_preview, name, minid, maxlen, approx)

    def counts(self) -> "Tuple[Optional[int], int, int]":
        """(the store's format version or None, streams, entries)."""
        from storage.verbs.preview import counts
        return self._read(counts)

    def change_counters(self, names: "Sequence[bytes]", watch: bool = False) -> "List[Optional[bytes]]":
        """The change counters of streams (blocking's poll fallback); ``watch``: what WATCH compares instead,
        their records as stored (changed by entries, trims, deletion, expiry; not groups: signalModifiedKey)."""
        return self._read(lambda p: (p.streams.stored if watch else p.streams.change_counters)(names))

    def dump(self, name: bytes, batched: bool = False) -> "Iterator[tuple]":
        """Everything stream ``name`` holds, as storage.verbs.dump records (consume within the transaction);
        ``batched``: entries come as ("entries", [(id, record), ...]) of up to 1000 (storage.codec.encode_entry)."""
        from storage.verbs.dump import stream_records
        return self._read(stream_records, name, batched)

    def load(self, records: "Iterable[tuple]", replace: bool = False) -> "Stats":
        """Put saved state back (storage.verbs.load): all or nothing."""
        from storage.verbs.load import load
        return self._write(load, records, replace)

    # ============== Redis's serialization: DUMP, RESTORE, RDB files (issue 26)

    def dump_value(self, name: bytes, active_time: bool = False) -> "Optional[bytes]":
        """DUMP: the stream's payload (storage.verbs.serialized.dump: type
        19, or 21 with ``active_time``), or None if missing."""
        from storage.verbs.serialized import dump
        return self._read(dump, name, active_time)

    def restore_value(self, name: bytes, payload: bytes, opts: "RestoreOptions") -> None:
        """RESTORE: a stream from a Redis DUMP payload (types 15, 19, 21)."""
        from storage.verbs.serialized import restore
        return self._write(restore, name, payload, opts)

    def rdb_value(self, name: bytes) -> "Optional[Tuple[bytes, Dict[str, int]]]":
        """The stream as an RDB file holds it (its type byte and value) and
        what that does not carry ({"idmp": 0 or 1}); None if missing."""
        from storage.verbs.serialized import stream_value
        return self._read(stream_value, name)

    def load_rdb_stream(self, name: bytes, rdbtype: int, reader: "RdbReader", replace: bool = False,
                        expire_at: "Optional[int]" = None) -> "Stats":
        """One stream of an RDB file, its value read from ``reader``
        (storage.codec.rdb.RdbReader) as it is loaded, with its TTL (Unix
        ms); storage.codec.rdb.RdbError if the value is malformed or the
        store cannot take it."""
        from storage.verbs.serialized import load_rdb_stream
        return self._write(load_rdb_stream, name, rdbtype, reader, replace, expire_at)


def _child(env, lt):
    """A nested write transaction of ``lt`` (a savepoint); a logged
    transaction's (storage.changelog.Logged) logs into it."""
    if type(lt) is lmdb.Transaction:
        return env.begin(write=True, parent=lt)
    return lt.child()


def _count(tx, p):
    """Add a kept verb's changes to its transaction's count."""
    tx.dirty += p.dirty + p.consumers_made()


def _add_each(tx, items):
    """Txn.add_auto_many(each=True) after the run was refused: each item
    added on its own (its savepoint), a refused one's place holding its
    RedisError."""
    from storage.options import AddOptions
    auto = AddOptions()
    out: list = []
    for name, fields in items:
        if type(fields) is bytes:
            fields = fields.split(b"\n")
        try:
            out.append(tx.add(name, fields, auto))
        except RedisError as e:
            out.append(e)
    return out


def _last_generated_id(p, name):
    m = p.streams.get(name)
    return None if m is None else m.last_id


def _group_names(p, name):
    m = p.streams.get(name)
    return [] if m is None else [g.name for g in p.groups.list(m)]


def _stream_names(p):
    return [name for _, name in p.streams.names()]


def _expires(p):
    return p.expiry.count()


def _store_error(e):
    """An LMDB error as the engine reports it."""
    if isinstance(e, lmdb.MapFullError):
        return Retry(grow=True)
    if isinstance(e, lmdb.MapResizedError):
        return Retry(grow=False)
    text = str(e)
    return StoreFailure(text.split(": ", 1)[-1] if ": " in text else text)
