"""Stream verbs: XADD, XRANGE, XLEN, XDEL, XDELEX, XTRIM, XSETID, XREAD,
XINFO STREAM, XCFGSET, as methods of the transaction (``StreamOps``).

Entries live in the ``entries`` database under ``sid + ms + seq`` (see
codec), so a range is one cursor walk.  The stream record (StreamMeta)
keeps what Redis keeps in ``struct stream``: length, last generated ID,
max deleted ID, entries added.  The first entry's ID is not stored: it
is the first key under the stream's prefix, one cursor step away.

Every verb checks everything that can fail before its first write.
"""
from itertools import islice

from storage import codec, errors
from storage.ids import MAX_ID, MIN_ID, U64, fmt, incr
from storage.options import ACKED, DELREF, KEEPREF

_ENTRY = codec.ENTRY
_ID_FROM = codec.ID.unpack_from
_encode = codec.encode_entry
_decode = codec.decode_entry
_packb = codec.packb
_U64 = codec.U64

# Redis stores entries in listpack nodes of at most 100 entries
# (stream-node-max-entries); approximate trimming removes whole nodes.
# We have no nodes, so "~" trims in chunks of this many entries.
NODE_ENTRIES = 100


class StreamOps:
    """Mixin of ``storage.txn.Txn``: the stream verbs."""

    # ================================================================ helpers

    def first_id(self, m):
        """ID of the first live entry of stream ``m``, or 0-0 if empty."""
        c = self.entries_cursor()
        p = _U64.pack(m.sid)
        if c.set_range(p):
            k = c.key()
            if k[:8] == p:
                return _ID_FROM(k, 8)
        return MIN_ID

    def last_entry_id(self, m):
        """ID of the last live entry (not last_id, which may be deleted)."""
        c = self.entries_cursor()
        ok = c.prev() if c.set_range(_U64.pack(m.sid + 1)) else c.last()
        if ok:
            k = c.key()
            if k[:8] == _U64.pack(m.sid):
                return _ID_FROM(k, 8)
        return None

    def _entries(self, m, start, end, count=0, rev=False):
        """Entries of ``m`` with start <= ID <= end, as [b"ms-seq", fields],
        at most ``count`` (0: all), reversed if ``rev``."""
        return list(map(_decode, self._entry_values(m, start, end, count, rev)))

    def _entry_values(self, m, start, end, count=0, rev=False):
        """Stored values of the entries in [start, end] (see _entries)."""
        if start > end or m.length == 0:
            return []
        c = self.entries_cursor()
        sid = m.sid
        n = m.length if not count or count > m.length else count
        if start == MIN_ID and end == MAX_ID:
            # the whole stream: exactly m.length values under the prefix
            if not rev:
                if not c.set_range(_U64.pack(sid)):
                    return []
                return list(islice(c.iternext(keys=False), n))
            ok = c.prev() if c.set_range(_U64.pack(sid + 1)) else c.last()
            if not ok:
                return []
            return list(islice(c.iterprev(keys=False), n))
        out = []
        lo = _ENTRY.pack(sid, start[0], start[1])
        hi = _ENTRY.pack(sid, end[0], end[1])
        append = out.append
        if not rev:
            if not c.set_range(lo):
                return out
            for k, v in c.iternext():
                if k > hi:
                    break
                append(v)
                if len(out) >= n:
                    break
        else:
            if c.set_range(hi):
                if c.key() != hi and not c.prev():
                    return out
            elif not c.last():
                return out
            for k, v in c.iterprev():
                if k < lo:
                    break
                append(v)
                if len(out) >= n:
                    break
        return out

    def entry_rows(self, m, start, count=0):
        """Entries of ``m`` from ``start`` on as ((ms, seq), fields)."""
        out = []
        if m.length == 0:
            return out
        c = self.entries_cursor()
        p = _U64.pack(m.sid)
        if not c.set_range(_ENTRY.pack(m.sid, start[0], start[1])):
            return out
        for k, v in c.iternext():
            if k[:8] != p:
                break
            out.append((_ID_FROM(k, 8), _decode(v)[1]))
            if count and len(out) >= count:
                break
        return out

    def entry_fields(self, m, i):
        """Fields of entry ``i`` of stream ``m``, or None if it is not there."""
        v = self.lt.get(_ENTRY.pack(m.sid, i[0], i[1]), db=self.db_entries)
        return None if v is None else _decode(v)[1]

    def entry_exists(self, m, i):
        return self.lt.get(_ENTRY.pack(m.sid, i[0], i[1]), db=self.db_entries) is not None

    def _delete_entry(self, m, i):
        """Remove one entry; True if it was there.  Keeps length."""
        if self.lt.delete(_ENTRY.pack(m.sid, i[0], i[1]), db=self.db_entries):
            m.length -= 1
            return True
        return False

    # =================================================================== XADD

    def add(self, name, fields, opts):
        """XADD: append ``fields`` (a flat field/value list) to ``name``.

        Returns the new ID, the ID recorded earlier for a duplicate IDMP
        request, or None when NOMKSTREAM and the stream does not exist.
        Trimming, if asked for, happens after the append."""
        if opts.id is not None and opts.seq_given and opts.id == MIN_ID:
            raise errors.xadd_zero_id()
        m = self.meta(name)
        if m is None and opts.nomkstream:
            return None
        if opts.idmp_pid is not None:
            iid = opts.idmp_iid if opts.idmp_iid is not None else idmp_auto_iid(fields)
            if m is not None:
                dup = self._idmp_find(m, opts.idmp_pid, iid)
                if dup is not None:
                    m.idmp_stats[3] += 1
                    m.idmp_cfg = True
                    self.mark(name)
                    return dup
        last = m.last_id if m is not None else MIN_ID
        if last == MAX_ID:
            raise errors.xadd_exhausted()
        new = self._next_id(last, opts.id, opts.seq_given)
        if m is None:
            m = self.create_meta(name)
        self.lt.put(_ENTRY.pack(m.sid, new[0], new[1]), _encode(fmt(new), fields), db=self.db_entries)
        m.length += 1
        m.last_id = new
        m.entries_added += 1
        if opts.idmp_pid is not None:
            self._idmp_record(m, opts.idmp_pid, iid, new)
        if opts.trim is not None:
            self._trim(m, opts.trim)
        self.mark(name)
        return new

    def add_auto_many(self, items, now):
        """Many ``XADD name * field value ...`` (no options) at once: bulk
        ingest runs this for every run of such lines, so it is kept
        tight.  ``items`` are (name, fields) pairs, where fields is the
        field/value list or, already in text form, those fields joined by
        newlines (none of them containing one).  ``now``: the clock in ms.
        Returns the new IDs as text, in order; an item that cannot be
        added (exhausted ID space) gets its RedisError instead."""
        out = []
        puts = []
        put = puts.append
        app = out.append
        pack = _ENTRY.pack
        last_name = m = None
        ms = seq = added = 0
        for name, f in items:
            if name != last_name:
                if m is not None:
                    m.last_id = (ms, seq)
                    m.length += added
                    m.entries_added += added
                m = self._metas.get(name, 0)
                if m == 0:
                    m = self.meta(name)
                if m is None:
                    m = self.create_meta(name)
                self._dirty.add(name)
                self.touched.add(name)
                last_name = name
                ms, seq = m.last_id
                added = 0
            if now > ms:
                ms, seq = now, 0
            elif seq != U64:
                seq += 1
            elif ms != U64:
                ms, seq = ms + 1, 0
            else:
                app(errors.xadd_exhausted())
                continue
            t = b"%d-%d" % (ms, seq)
            if type(f) is bytes:
                v = t + b"\n" + f
            else:
                v = _encode(t, f)
            put((pack(m.sid, ms, seq), v))
            app(t)
            added += 1
        if m is not None:
            m.last_id = (ms, seq)
            m.length += added
            m.entries_added += added
        self.entries_cursor().putmulti(puts)
        return out

    def _next_id(self, last, req, seq_given):
        """The ID XADD gives the next entry (``streamAppendItem``)."""
        if req is None:
            now = self.now()
            if now > last[0]:
                return (now, 0)
            return incr(last)
        if seq_given:
            new = req
        elif req[0] == last[0]:
            if last[1] == U64:
                raise errors.xadd_id_too_small()
            new = (last[0], last[1] + 1)
        else:
            new = req
        if new <= last:
            raise errors.xadd_id_too_small()
        return new

    # =========================================================== XRANGE, XLEN

    def range(self, name, start, end, count=0, rev=False):
        """XRANGE / XREVRANGE: entries between two inclusive bounds."""
        m = self.meta(name)
        if m is None:
            return codec.Entries([])
        return codec.Entries(self._entry_values(m, start, end, count, rev))

    def length(self, name):
        """XLEN."""
        m = self.meta(name)
        return 0 if m is None else m.length

    # ================================================================== XDEL

    def delete_entries(self, name, ids):
        """XDEL: delete entries by ID; returns how many were there."""
        m = self.meta(name)
        if m is None:
            return 0
        n = 0
        for i in ids:
            if self._delete_entry(m, i):
                n += 1
                if i > m.max_deleted:
                    m.max_deleted = i
        if n:
            self.mark(name)
        return n

    def delete_entries_ex(self, name, ids, policy):
        """XDELEX: per ID 1 (deleted), -1 (no such entry) or 2 (kept,
        still referenced by a group: ACKED only)."""
        m = self.meta(name)
        if m is None:
            return [-1] * len(ids)
        out = []
        groups = self.group_list(m) if policy != KEEPREF else None
        changed = False
        for i in ids:
            if policy == ACKED and self.entry_referenced(m, groups, i):
                out.append(2)
                continue
            if policy == DELREF:
                if self.drop_references(groups, i):
                    changed = True
            if self._delete_entry(m, i):
                if i > m.max_deleted:
                    m.max_deleted = i
                changed = True
                out.append(1)
            else:
                out.append(-1)
        if changed:
            self.mark(name)
        return out

    # ================================================================= XTRIM

    def trim(self, name, opts):
        """XTRIM: returns the number of entries deleted."""
        m = self.meta(name)
        if m is None:
            return 0
        n = self._trim(m, opts)
        if n:
            self.mark(name)
        return n

    def _trim(self, m, t):
        """Trim stream ``m`` as ``t`` (TrimOptions) says; returns the count.

        KEEPREF with "~" removes whole chunks of NODE_ENTRIES entries from
        the head while the chunk can go entirely, never more than
        ``t.limit`` entries.  DELREF and ACKED look at entries one by one
        (Redis ignores "~" for them), ACKED skipping entries a group still
        references, DELREF removing the references of what it deletes."""
        if m.length == 0:
            return 0
        c = self.entries_cursor()
        p = _U64.pack(m.sid)
        maxlen = t.threshold if t.strategy == "maxlen" else None
        minid = t.threshold if maxlen is None else None
        deleted = 0
        if t.policy == KEEPREF and t.approx:
            while m.length:
                if maxlen is not None and m.length <= maxlen:
                    break
                chunk = min(NODE_ENTRIES, m.length)
                if t.limit and deleted + chunk > t.limit:
                    break
                if maxlen is not None:
                    if m.length - chunk < maxlen:
                        break
                else:
                    # the chunk's last ID must be below MINID
                    if not c.set_range(p):
                        break
                    for _ in range(chunk - 1):
                        c.next()
                    if _ID_FROM(c.key(), 8) >= minid:
                        break
                c.set_range(p)
                for _ in range(chunk):
                    c.delete()
                m.length -= chunk
                deleted += chunk
            return deleted
        if t.policy == KEEPREF:
            if maxlen is not None:
                n = m.length - maxlen
                if n <= 0:
                    return 0
                c.set_range(p)
                for _ in range(n):
                    c.delete()
                m.length -= n
                return n
            if not c.set_range(p):
                return 0
            hi = _ENTRY.pack(m.sid, minid[0], minid[1])
            while True:
                k = c.key()
                if not k or k[:8] != p or k >= hi:
                    break
                c.delete()
                deleted += 1
            m.length -= deleted
            return deleted
        # DELREF / ACKED: entry by entry, looking at no more than the
        # entries MAXLEN would remove (or those below MINID).
        groups = self.group_list(m)
        scan = (m.length - maxlen) if maxlen is not None else None
        if scan is not None and scan <= 0:
            return 0
        hi = _ENTRY.pack(m.sid, minid[0], minid[1]) if minid is not None else None
        victims = []
        seen = 0
        if c.set_range(p):
            for k in c.iternext(values=False):
                if k[:8] != p or (hi is not None and k >= hi):
                    break
                if (scan is not None and seen >= scan) or (t.limit and t.approx and len(victims) >= t.limit):
                    break
                seen += 1
                i = _ID_FROM(k, 8)
                if t.policy == ACKED and self.entry_referenced(m, groups, i):
                    continue
                victims.append(i)
        for i in victims:
            if t.policy == DELREF:
                self.drop_references(groups, i)
            self._delete_entry(m, i)
        return len(victims)

    # ================================================================ XSETID

    def set_id(self, name, new_id, entries_added=-1, max_deleted=MIN_ID):
        """XSETID."""
        m = self.meta(name)
        if m is None:
            raise errors.no_such_key()
        if new_id < m.max_deleted:
            raise errors.xsetid_smaller_than_maxdel()
        if m.length > 0:
            top = self.last_entry_id(m)
            if top is not None and new_id < top:
                raise errors.xsetid_smaller_than_top()
            if entries_added != -1 and m.length > entries_added:
                raise errors.xsetid_entries_added_small()
        m.last_id = new_id
        if entries_added != -1:
            m.entries_added = entries_added
        if max_deleted != MIN_ID:
            m.max_deleted = max_deleted
        self.mark(name)

    # ================================================================= XREAD

    def resolve_read_ids(self, keys, ids):
        """XREAD's IDs at command start: ``$`` becomes the stream's last
        ID (0-0 if absent); ``+`` stays (it means "the last entry")."""
        out = []
        for k, i in zip(keys, ids):
            if i == b"$":
                m = self.meta(k)
                out.append(m.last_id if m is not None else MIN_ID)
            else:
                out.append(i)
        return out

    def read_streams(self, keys, ids, count=0, maxcount=0, maxsize=0):
        """XREAD without blocking: ``[(key, entries), ...]`` for the streams
        that have entries after their ID (``+``: the last entry)."""
        out = []
        total = 0
        size = 0
        for k, after in zip(keys, ids):
            if maxcount and total >= maxcount:
                break
            if maxsize and size >= maxsize:
                break
            m = self.meta(k)
            if m is None or m.length == 0:
                continue
            if after == b"+":
                last = self.last_entry_id(m)
                if last is None:
                    continue
                ents = self._entries(m, last, last, 1)
            else:
                if after == MAX_ID:
                    continue
                n = count
                if maxcount:
                    left = maxcount - total
                    n = left if not n or left < n else n
                ents = self._entries(m, incr(after), MAX_ID, n)
            if maxsize:
                ents, size = cap_size(ents, size, maxsize)
            if ents:
                total += len(ents)
                out.append((k, ents))
        return out

    # ============================================================ XINFO STREAM

    def stream_info(self, name, full=False, count=10):
        """XINFO STREAM [FULL [COUNT n]]: ordered (field, value) pairs.
        IDs are formatted; entries are (id, fields)."""
        m = self.meta(name)
        if m is None:
            raise errors.no_such_key()
        keys = max(0, -(-m.length // NODE_ENTRIES))
        info = [
            ("length", m.length),
            ("radix-tree-keys", keys),
            ("radix-tree-nodes", keys + 1),
            ("last-generated-id", fmt(m.last_id)),
            ("max-deleted-entry-id", fmt(m.max_deleted)),
            ("entries-added", m.entries_added),
            ("recorded-first-entry-id", fmt(self.first_id(m))),
        ]
        if m.idmp_cfg:
            pids, iids, added, dups = m.idmp_stats
            info += [("idmp-duration", m.idmp_duration), ("idmp-maxsize", m.idmp_maxsize),
                     ("pids-tracked", pids), ("iids-tracked", iids),
                     ("iids-added", added), ("iids-duplicates", dups)]
        if not full:
            first = self._entries(m, MIN_ID, MAX_ID, 1)
            last = self._entries(m, MIN_ID, MAX_ID, 1, rev=True)
            info += [("groups", len(self.group_list(m))),
                     ("first-entry", first[0] if first else None),
                     ("last-entry", last[0] if last else None)]
        else:
            info += [("entries", self._entries(m, MIN_ID, MAX_ID, count)),
                     ("groups", self.groups_full_info(m, count))]
        return info

    # ======================================================= IDMP and XCFGSET

    def configure_idmp(self, name, duration=None, maxsize=None):
        """XCFGSET: a changed setting clears every producer's history."""
        m = self.meta(name)
        if m is None:
            raise errors.no_such_key()
        changed = False
        if duration is not None and duration != m.idmp_duration:
            m.idmp_duration = duration
            changed = True
        if maxsize is not None and maxsize != m.idmp_maxsize:
            m.idmp_maxsize = maxsize
            changed = True
        if changed:
            self._idmp_clear(m)
        m.idmp_cfg = True
        self.mark(name)

    def _idmp_find(self, m, pid, iid):
        """The ID recorded for (pid, iid), expired history dropped first."""
        self._idmp_expire(m, pid)
        p = codec.idmp_pid_prefix(m.sid, pid)
        v = self.lt.get(codec.idmp_iid_key(p, codec.idmp_iid_part(p, iid)), db=self.db_idmp)
        return None if v is None else codec.ID.unpack(v)

    def _idmp_record(self, m, pid, iid, new):
        """Remember (pid, iid) -> new; evict the producer's oldest IID
        beyond IDMP-MAXSIZE."""
        p = codec.idmp_pid_prefix(m.sid, pid)
        lt, db = self.lt, self.db_idmp
        self._idmp_expire(m, pid)
        n = lt.get(codec.idmp_count_key(p), db=db)
        n = int(n) if n is not None else 0
        if n == 0:
            m.idmp_stats[0] += 1
        ik = codec.idmp_iid_part(p, iid)
        lt.put(codec.idmp_iid_key(p, ik), codec.ID.pack(*new), db=db)
        lt.put(codec.idmp_order_key(p, new), ik, db=db)
        n += 1
        m.idmp_stats[1] += 1
        m.idmp_stats[2] += 1
        m.idmp_cfg = True
        if n > m.idmp_maxsize:
            c = lt.cursor(db=db)
            if c.set_range(p + b"o"):
                lt.delete(codec.idmp_iid_key(p, c.value()), db=db)
                c.delete()
                n -= 1
                m.idmp_stats[1] -= 1
        lt.put(codec.idmp_count_key(p), b"%d" % n, db=db)

    def _idmp_expire(self, m, pid):
        """Drop IIDs whose entry ID is older than IDMP-DURATION (Redis
        measures from the entry ID's milliseconds)."""
        if not self.writable:
            return
        p = codec.idmp_pid_prefix(m.sid, pid)
        lt, db = self.lt, self.db_idmp
        cutoff = self.now() - m.idmp_duration * 1000
        c = lt.cursor(db=db)
        dropped = 0
        po = p + b"o"
        if c.set_range(po):
            while True:
                k = c.key()
                if not k.startswith(po) or codec.ID.unpack(k[len(po):])[0] > cutoff:
                    break
                lt.delete(codec.idmp_iid_key(p, c.value()), db=db)
                c.delete()
                dropped += 1
                if not c.key():
                    break
        if dropped:
            ck = codec.idmp_count_key(p)
            n = int(lt.get(ck, db=db)) - dropped
            m.idmp_stats[1] -= dropped
            if n <= 0:
                lt.delete(ck, db=db)
                m.idmp_stats[0] -= 1
            else:
                lt.put(ck, b"%d" % n, db=db)

    def _idmp_clear(self, m):
        """Forget every producer's history (pids/iids tracked drop to 0)."""
        c = self.lt.cursor(db=self.db_idmp)
        p = _U64.pack(m.sid)
        if c.set_range(p):
            delete_prefix(c, p)
        m.idmp_stats[0] = 0
        m.idmp_stats[1] = 0

    def drop_stream_data(self, m):
        """Delete every entry, group and IDMP record of stream ``m`` (DEL)."""
        for db in (self.db_entries, self.db_idmp):
            c = self.lt.cursor(db=db)
            p = _U64.pack(m.sid)
            if c.set_range(p):
                delete_prefix(c, p)
        self.drop_all_groups(m)


def delete_prefix(c, p):
    """Delete from the cursor's position while keys start with ``p``."""
    n = len(p)
    while True:
        k = c.key()
        if not k or k[:n] != p:
            return
        c.delete()


def entry_size(i, fields):
    """Approximate RESP size of one entry in a reply (MAXSIZE accounting)."""
    idlen = len(i) if type(i) is bytes else 21
    return idlen + (sum(len(x) for x in fields) + 8 * len(fields) if fields else 0) + 16


def cap_size(ents, size, maxsize):
    """Keep entries while the reply stays under ``maxsize`` bytes (soft:
    the first entry of a reply always goes)."""
    kept = []
    for e in ents:
        n = entry_size(e[0], e[1])
        if size and size + n > maxsize:
            break
        kept.append(e)
        size += n
        if size >= maxsize:
            break
    return kept, size


def idmp_auto_iid(fields):
    """IDMPAUTO's IID: a hash of the field/value pairs that does not
    depend on their order (Redis: XXH3-128 per pair, summed and xored)."""
    import hashlib
    lo = hi = xlo = xhi = 0
    mask = (1 << 64) - 1
    for j in range(0, len(fields), 2):
        f, v = fields[j], fields[j + 1]
        h = hashlib.blake2b(f + len(f).to_bytes(8, "little") + v, digest_size=16).digest()
        a = int.from_bytes(h[:8], "little")
        b = int.from_bytes(h[8:], "little")
        lo = (lo + a) & mask
        hi = (hi + b) & mask
        xlo ^= a
        xhi ^= b

    def rotl(x):
        return ((x << 1) | (x >> 63)) & mask
    return (lo ^ rotl(xhi)).to_bytes(8, "little") + (hi ^ rotl(xlo)).to_bytes(8, "little")
