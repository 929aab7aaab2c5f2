"""The entry log: a stream's entries in the ``log`` database, under
``sid + ms + seq``, so a range is one cursor walk.

The stored value of an entry is its record or, for an entry whose field
names are one of the stream's interned field sets (the ``shapes``
database, at most codec.MAX_SHAPES per stream, made on first use and
dropped with the stream), only its values (storage.codec, format 4).
This module (with storage.parts.shapes, which encodes them) is the only one
that reads or writes the ``log`` database: it takes fields and gives
back fields, records (``encode_entry``) or ``codec.Entries``.

Invariant: ``m.length`` (the stream record) is the number of entries
stored under the stream's number.  Every method that adds or removes
entries updates it; nothing else changes entries.  The first entry's ID
is not stored anywhere: it is the first key under the prefix, one
cursor step away.  What an addition means for ``last_id`` and
``entries_added``, and a deletion for ``max_deleted``, is the verbs'
business (XADD, XDEL and trimming differ).

Second invariant: the ``nodes`` database holds the stream's listpack
nodes as Redis would have them (storage.parts.nodes): every live entry lies in
exactly one node, between its master ID and its last ID, and a node's
``live`` is the number of entries stored in that span.  The methods
that add or remove entries keep it: ``append*`` fill the last node or
open a new one (so a snapshot restore or an import, which appends,
rebuilds nodes as if the entries had been added in order with nothing
deleted), ``delete`` flags an entry deleted in its node and frees the
node with its last live entry (XDEL), and trimming
(``trim_nodes``) works node by node as Redis's ``streamTrim`` does.  The last node of each stream is cached
for the transaction (one put per XADD; storage.txn drops the cache when
a verb is rolled back).
"""
import gc
from itertools import islice

from storage import codec
from storage.ids import MAX_ID, MIN_ID
from storage.parts import nodes as _nodes
from storage.parts.shapes import Shapes

_ABSENT = object()


class no_cycle_collection:
    """``with no_cycle_collection():`` the bulk paths make an object or
    two per entry and keep them to the end: the cyclic collector would
    walk them again and again, for nothing (bytes, and lists and tuples
    of bytes, hold no cycle).  It is paused while they run (10-25% of a
    100,000-entry batch).  (A class, not contextlib's decorator: the
    one-shot path does not import contextlib.)"""

    __slots__ = ("collecting",)

    def __enter__(self):
        self.collecting = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.collecting:
            gc.enable()


# node_count: more entries than this waiting for their nodes are estimated
EXACT_COUNT_LIMIT = 20000


class EntryLog:
    """Entries of every stream, in one transaction."""

    __slots__ = ("_kv", "_db", "_ndb", "_shapes", "_tails")

    def __init__(self, kv, tails=None):
        self._kv = kv
        self._db = kv.db(b"log")
        self._ndb = kv.db(b"nodes")
        # sid -> (last Node, its packed names) or None (no node); shared by
        # the verbs of one transaction (storage.txn clears it when a verb
        # is rolled back), so successive XADDs read the last node once
        self._tails = tails if tails is not None else {}
        self._shapes = Shapes(kv, self._tails)

    def shapes(self, m):
        """tag -> Shape of stream ``m`` (to decode its stored values)."""
        return self._shapes.by_tag(m.sid)

    # --------------------------------------------------------------- nodes

    def node_limits(self):
        """(stream-node-max-bytes, stream-node-max-entries) of this store
        (storage.verbs.settings), read once per transaction: kept in the tails
        cache under the key None."""
        lim = self._tails.get(None)
        if lim is None:
            lim = self._tails[None] = codec.decode_node_limits(
                self._kv.get(self._kv.db(b"meta"), codec.META_NODE_LIMITS), (_nodes.MAX_BYTES, _nodes.MAX_ENTRIES))
        return lim

    def forget_node_limits(self):
        self._tails.pop(None, None)

    def _decode_node(self, k, v):
        master, live, deleted, body, last, names, blob = codec.decode_node(k, v)
        return _nodes.Node(master, live, deleted, body, last, names), blob

    def _tail(self, sid):
        """(last node, packed names) of stream ``sid``, or None."""
        t = self._tails.get(sid, _ABSENT)
        if t is not _ABSENT:
            return t
        p = codec.sid_prefix(sid)
        c = self._kv.cursor(self._ndb)
        end = codec.prefix_end(p)
        ok = c.prev() if (end and c.set_range(end)) else c.last()
        t = None
        if ok:
            k, v = c.item()
            if k.startswith(p):
                t = self._decode_node(k, v)
        self._tails[sid] = t
        return t

    def _put_node(self, sid, node, blob):
        self._kv.put(self._ndb, codec.node_key(sid, node.master),
                     codec.encode_node(node.live, node.deleted, node.body, node.last, blob))

    def _node_of(self, sid, i):
        """(node, packed names) of the node holding ID ``i``, or None."""
        c = self._kv.cursor(self._ndb)
        k = codec.node_key(sid, i)
        if not c.set_range(k) or c.key() != k:
            if not c.prev():
                return None
        k, v = c.item()
        if not k.startswith(codec.sid_prefix(sid)):
            return None
        return self._decode_node(k, v)

    def nodes(self, m):
        """The nodes of ``m`` from the first on (storage.parts.nodes.Node); each
        is read when the previous one was handled, so a trimming step may
        remove the node it was given."""
        self.sync_nodes(m)
        p = codec.sid_prefix(m.sid)
        start = p
        while True:
            c = self._kv.cursor(self._ndb)
            if not c.set_range(start):
                return
            k, v = c.item()
            if not k.startswith(p):
                return
            yield self._decode_node(k, v)[0]
            start = k + b"\x00"

    def node_count(self, m):
        """How many nodes ``m`` has (XINFO STREAM's radix-tree-keys); in a
        read transaction too (entries not yet in the node table are
        counted as ``sync_nodes`` would add them, without writing; when
        more than ``EXACT_COUNT_LIMIT`` wait for that -- a read of a big
        store just upgraded from format 2 -- they are estimated at full nodes instead of
        read, so a read-only XINFO stays fast; the next write makes the
        count exact)."""
        n = 0
        covered = 0
        for _, v in self._kv.iter_prefix(self._ndb, codec.sid_prefix(m.sid)):
            n += 1
            covered += codec.node_live(v)
        if m.nodes_from is not None and m.length - covered > EXACT_COUNT_LIMIT:
            per_node = self.node_limits()[1] or _nodes.MAX_ENTRIES
            return n + -(-(m.length - covered) // per_node)
        if m.nodes_from is not None:
            t = self._tail(m.sid)
            tail = _nodes.Node(t[0].master, t[0].live, t[0].deleted, t[0].body, t[0].last, t[0].names) \
                if t is not None else None
            touched = _nodes.extend(tail, self._rows_from(m, m.nodes_from), *self.node_limits())
            n += len(touched) - (1 if touched and touched[0] is tail else 0)
        return n

    def sync_nodes(self, m):
        """Bring the node table of ``m`` up to date from ``m.nodes_from``
        (a store migrated from a format without nodes notes where they
        begin), by whichever verb next needs them (XADD, XDEL, trimming,
        a bulk append), each entry once."""
        start = m.nodes_from
        if start is None:
            return
        m.nodes_from = None
        self._append_nodes(m, _nodes.runs(self._rows_from(m, start)))

    def _rows_from(self, m, start):
        """(ID, fields) of the entries of ``m`` from ``start`` on (lazily)."""
        shapes, dec = self.shapes(m), codec.stored_fields
        for k, v in self._kv.iter_prefix(self._db, codec.sid_prefix(m.sid), start=codec.entry_key(m.sid, start)):
            yield codec.id_from_entry_key(k), dec(v, shapes)

    def _append_nodes(self, m, runs):
        """Node bookkeeping for entries appended to ``m``, in order, as
        runs (storage.parts.nodes.runs): one put per node touched."""
        sid = m.sid
        t = self._tail(sid)
        tail, blob = t if t is not None else (None, None)
        touched = _nodes.extend_runs(tail, runs, *self.node_limits())
        if not touched:
            return
        for node in touched:
            if node is not tail:
                blob = codec.encode_node_names(node.names)
            self._put_node(sid, node, blob)
        self._tails[sid] = (touched[-1], blob)

    # ---------------------------------------------------------------- ends

    def first_id(self, m):
        """ID of the first entry of stream ``m``, or 0-0 if empty."""
        k = self._kv.first_key(self._db, codec.sid_prefix(m.sid))
        return codec.id_from_entry_key(k) if k is not None else MIN_ID

    def last_id(self, m):
        """ID of the last entry (not ``m.last_id``, which may be deleted),
        or None if empty."""
        k = self._kv.last_key(self._db, codec.sid_prefix(m.sid))
        return codec.id_from_entry_key(k) if k is not None else None

    def nth_id(self, m, n):
        """ID of the ``n``-th entry (0-based), or None."""
        k = self._kv.nth_key(self._db, codec.sid_prefix(m.sid), n)
        return codec.id_from_entry_key(k) if k is not None else None

    # --------------------------------------------------------------- reads

    def range(self, m, start, end, count=0, rev=False):
        """The entries with ``start <= ID <= end``, at most ``count`` (0:
        all), in reverse order with ``rev``, as ``codec.Entries``."""
        if start > end or m.length == 0:
            return codec.Entries()
        n = m.length if not count or count > m.length else count
        p = codec.sid_prefix(m.sid)
        with no_cycle_collection():
            if start == MIN_ID and end == MAX_ID:
                # the whole stream: exactly m.length entries under the prefix
                pairs = self._kv.pairs_from(self._db, p, p, n, rev)
            else:
                pairs = self._kv.pairs_between(self._db, codec.entry_key(m.sid, start),
                                               codec.entry_key(m.sid, end), n, rev)
        return codec.Entries(pairs, self.shapes(m))

    def entries(self, m, start, end, count=0, rev=False):
        """Like ``range``, decoded: an Entry each."""
        return self.range(m, start, end, count, rev).decoded()

    def rows(self, m, start, count=0):
        """Entries from ``start`` on as ``((ms, seq), fields)``."""
        out: list[tuple[tuple[int, int], list]] = []
        if m.length == 0:
            return out
        for row in self._rows_from(m, start):
            out.append(row)
            if count and len(out) >= count:
                break
        return out

    def ids(self, m, below=None, start=None, count=0):
        """IDs ascending, lazily and without their fields: from the first
        (or ``start``) on, only under ``below``, at most ``count`` (0: all)."""
        hi = codec.entry_key(m.sid, below) if below is not None else None
        lo = codec.entry_key(m.sid, start) if start is not None else None
        for n, k in enumerate(self._kv.iter_prefix(self._db, codec.sid_prefix(m.sid), start=lo, values=False), 1):
            if hi is not None and k >= hi:
                return
            yield codec.id_from_entry_key(k)
            if n == count:
                return

    def records(self, m, chunk=1000):
        """(ID, record) of every entry, ascending (snapshots, exports):
        records are made ``chunk`` entries at a time."""
        shapes = self.shapes(m)
        it = self._kv.iter_prefix(self._db, codec.sid_prefix(m.sid))
        while True:
            pairs = list(islice(it, chunk))
            if not pairs:
                return
            keys = [k for k, _ in pairs]
            yield from zip(map(codec.id_from_entry_key, keys),
                           codec.records(keys, [v for _, v in pairs], shapes))

    def fields(self, m, i):
        """Fields of entry ``i``, or None if it is not there."""
        v = self._kv.get(self._db, codec.entry_key(m.sid, i))
        return None if v is None else codec.stored_fields(v, self.shapes(m))

    def exists(self, m, i):
        return self._kv.get(self._db, codec.entry_key(m.sid, i)) is not None

    def fields_getter(self, m):
        """For hot loops: fn(ID) -> the fields of that entry of ``m``, or
        None."""
        get, key, sid, shapes, dec = self._kv.getter(self._db), codec.entry_key, m.sid, self.shapes(m), \
            codec.stored_fields

        def fields(i):
            v = get(key(sid, i))
            return None if v is None else dec(v, shapes)
        return fields

    def exists_getter(self, m):
        """For hot loops: fn(ID) -> whether that entry of ``m`` exists."""
        get, key, sid = self._kv.getter(self._db), codec.entry_key, m.sid
        return lambda i: get(key(sid, i)) is not None

    # -------------------------------------------------------------- writes

    def append(self, m, i, fields):
        """Store entry ``i`` (above every ID of the stream)."""
        if m.nodes_from is not None:
            self.sync_nodes(m)
        self._kv.put_last(self._db, codec.entry_key(m.sid, i), self._shapes.encode(m.sid, i, fields))
        m.length += 1
        self._append_nodes(m, _nodes.runs(((i, fields),)))

    def append_many(self, m, items, block=None):
        """Store many ``(ID, fields)`` entries of stream ``m``, ascending
        and above every ID of the stream (bulk ingest, restores, imports;
        ``fields`` may be joined by newlines, none holding one; or, with
        ``block``, a codec.AddBlock, ``items`` are its entries' IDs), and
        their nodes in the same transaction.  (Leaving the nodes for the
        next write made a one-shot XADD after a 9M-entry ingest take three
        minutes, holding the write lock; now each batch pays for its own.)  Returns how many."""
        if not items:
            return 0
        if m.nodes_from is not None:
            self.sync_nodes(m)          # entries of a migrated store first
        with no_cycle_collection():
            n, runs = self._put(m, items, block)
            m.length += n
            self._append_nodes(m, runs)
            del runs                    # before the collector is back: nothing left for it to walk
        return n

    def put_many(self, m, items):
        """Store ``(ID, fields)`` entries and nothing else: the format
        upgrade (storage.migrate), which moves entries a stream's record
        and nodes already count."""
        return self._put(m, items)[0]

    def _put(self, m, items, block=None):
        """Store ``(ID, fields or joined)`` items (or append_many's block): how many, their node runs."""
        pairs, runs = self._shapes.encode_many(m.sid, items, block)
        return self._kv.putmulti_last(self._db, pairs), runs

    def delete(self, m, i):
        """Remove entry ``i`` (XDEL: flagged deleted in its node, the node
        freed with its last live entry); True if it was there."""
        sid = m.sid
        k = codec.entry_key(sid, i)
        if m.nodes_from is not None:
            if self._kv.get(self._db, k) is None:
                return False
            self.sync_nodes(m)
        if not self._kv.delete(self._db, k):
            return False
        m.length -= 1
        t = self._tails.pop(sid, None)
        found = t if t is not None and t[0].master <= i else self._node_of(sid, i)
        if found is not None:
            node, blob = found
            node.mark_deleted()
            if node.live <= 0:
                self._kv.delete(self._ndb, codec.node_key(sid, node.master))
            else:
                self._put_node(sid, node, blob)
        return True

    # ------------------------------------------------- trimming, node by node

    def trim_nodes(self, m, maxlen=None, minid=None, approx=False, limit=0):
        """Redis's ``streamTrim`` (KEEPREF): from the first node, a node
        goes whole if it can (MAXLEN: at least ``maxlen`` entries are left
        without it; MINID: its last ID, deleted entries included, is below
        ``minid``), while the live entries of whole nodes removed stay
        within ``limit`` (0: no limit).  At the first node that cannot go
        whole, ``approx`` stops; otherwise the entries beyond the threshold
        are flagged deleted in that node, which stays.  Returns how many
        entries went."""
        deleted = 0
        for node in self.nodes(m):
            if maxlen is not None and m.length <= maxlen:
                break
            entries = node.live
            if limit and deleted + entries > limit:
                break
            if maxlen is not None:
                whole = m.length - entries >= maxlen
            else:
                whole = node.last < minid
            if whole:
                deleted += self._remove_node(m, node)
                continue
            if not approx:
                if maxlen is not None:
                    deleted += self._mark_first(m, node, m.length - maxlen)
                else:
                    deleted += self._mark_below(m, node, minid)
            break
        return deleted

    def delete_first(self, m, n):
        """Remove the first ``n`` entries (``n <= m.length``): exact
        trimming to ``m.length - n``."""
        return self.trim_nodes(m, maxlen=m.length - n) if n > 0 else 0

    def delete_below(self, m, bound):
        """Remove every entry with an ID below ``bound`` (exact MINID
        trimming); returns the count."""
        return self.trim_nodes(m, minid=bound)

    # streamTrim's steps: ``trim_nodes`` walks ``nodes(m)`` from the first,
    # so the entries of the node at hand are the first ones.

    def _remove_node(self, m, node):
        """Free ``node`` with its live entries; returns how many went."""
        sid = m.sid
        self._tails.pop(sid, None)
        p = codec.sid_prefix(sid)
        done = self._kv.delete_below(self._db, p, codec.entry_key(sid, node.last) + b"\x00")
        m.length -= done
        self._kv.delete(self._ndb, codec.node_key(sid, node.master))
        return done

    def _mark_first(self, m, node, n):
        """Flag the first ``n`` live entries (all in ``node``) deleted."""
        sid = m.sid
        self._tails.pop(sid, None)
        done = self._kv.delete_first(self._db, codec.sid_prefix(sid), n)
        m.length -= done
        node.mark_deleted(done)
        self._put_node(sid, node, codec.encode_node_names(node.names))
        return done

    def _mark_below(self, m, node, bound):
        """Flag the live entries below ID ``bound`` (all in ``node``)
        deleted; the node stays, even with no live entry left (as in
        Redis, whose exact MINID trimming does not free it)."""
        sid = m.sid
        self._tails.pop(sid, None)
        done = self._kv.delete_below(self._db, codec.sid_prefix(sid), codec.entry_key(sid, bound))
        if done:
            m.length -= done
            node.mark_deleted(done)
            self._put_node(sid, node, codec.encode_node_names(node.names))
        return done

    # ---- nodes as Redis's serialization has them (storage.verbs.serialized)

    def node_list(self, m):
        """The nodes of ``m`` without writing (DUMP reads): the table's and
        those ``sync_nodes`` would add for a migrated store's entries."""
        out = [self._decode_node(k, v)[0] for k, v in self._kv.iter_prefix(self._ndb, codec.sid_prefix(m.sid))]
        if m.nodes_from is not None:
            t = out.pop() if out else None
            tail = t and _nodes.Node(t.master, t.live, t.deleted, t.body, t.last, t.names)
            touched = _nodes.extend(tail, self._rows_from(m, m.nodes_from), *self.node_limits())
            out += ([tail] if tail is not None and touched[:1] != [tail] else []) + touched
        return out

    def replace_nodes(self, m, nodes):
        """Make ``nodes`` (ascending, covering every entry of ``m``, their
        live counts adding up to its length: the caller's checks) the node
        table of ``m`` (RESTORE keeps its payload's listpacks)."""
        self.sync_nodes(m)
        self._kv.delete_prefix(self._ndb, codec.sid_prefix(m.sid))
        blob = None
        for node in nodes:
            blob = codec.encode_node_names(node.names)
            self._put_node(m.sid, node, blob)
        self._tails[m.sid] = (nodes[-1], blob) if nodes else None

    def drop(self, m):
        """Remove every entry of ``m`` and its nodes (DEL)."""
        p = codec.sid_prefix(m.sid)
        self._kv.delete_prefix(self._db, p)
        self._kv.delete_prefix(self._ndb, p)
        self._shapes.drop(m.sid)
        self._tails.pop(m.sid, None)
        m.nodes_from = None
        m.length = 0
