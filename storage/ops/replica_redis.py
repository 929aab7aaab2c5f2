"""The change log as Redis commands: what ``xs replicate --to redis://``
sends (issue 41, item 4).  No network here: the replicator
(xstream_cli/redis_replica.py) reads records, this module turns each into
the commands that take a Redis/Valkey/xs serve replica from the store as
it was before the commit to the store as it was after it.

Why from the physical log.  The log (storage.changelog) records every
write the engine makes, whatever made it (a command, import, a worker,
trim, archive, COPY, RESTORE...), so nothing that changes the store can
be missed; a store without a Redis replica pays nothing more.  The
commands are Redis's own deterministic forms, chosen from the
difference each commit made, not from the command that made it:

  entries added          XADD key <explicit ID> field value ...
  entries removed        XDEL key ID ... (one by one), or XTRIM key MINID =
                         <first ID kept> for a trim (approximate trims
                         arrive exact: the log holds what they removed)
  stream metadata        XSETID key last ENTRIESADDED n MAXDELETEDID id
  a stream created empty XADD key MAXLEN 0 0-1 x x, then XSETID
  groups                 XGROUP CREATE key g id ENTRIESREAD n / SETID ... /
                         DESTROY
  consumers              XGROUP CREATECONSUMER / DELCONSUMER
  pending entries        XCLAIM key g consumer 0 id TIME t RETRYCOUNT n
                         FORCE JUSTID (owned), XNACK key g FAIL IDS 1 id
                         RETRYCOUNT n FORCE (NACKed), XACK key g id (gone)
  TTL                    PEXPIREAT key ms / PERSIST key
  IDMP                   XCFGSET key IDMP-DURATION d IDMP-MAXSIZE m,
                         XIDMPRECORD key pid iid id
  keys                   DEL key, RENAME (through a temporary name)

What a replica cannot take from these: a consumer's seen-time and
active-time (set by the replica when it applies them, as on any Redis
replica), IDMP history evicted by the store (the replica evicts by its
own clock and limits), and a producer or IID name too long for the
store's keys (kept hashed: it is counted in ``Translator.skipped``).

The ``Model`` is what the translator must know of the replica: stream
names by number, their metadata, groups, consumers and the field sets
of stored entries.  It is loaded from the store at the full sync
(``load``) and follows the records after it.
"""
from typing import Dict, List, Optional

from storage import codec
from storage.codec import changes
from storage.ids import MAX_ID, fmt

LLONG_MAX = (1 << 63) - 1

# the first Redis version with each command the translation may need
SINCE = {"XNACK": "8.10", "XIDMPRECORD": "8.8", "XCFGSET": "8.6"}


class NeedsCommand(Exception):
    """The replica lacks a command this commit needs (``command``)."""

    def __init__(self, command, what):
        super().__init__(command)
        self.command, self.what = command, what


class Diverged(Exception):
    """A record does not fit the model (a full sync is the way back)."""


def _shown(name):
    """A stream name for a message."""
    return name.decode("utf-8", "backslashreplace")


def _name(k, rec):
    """The name of name key ``k`` (the record's for a hashed one)."""
    n = codec.name_from_key(k)
    return rec.name if n is None else n


def _pred(i):
    ms, seq = i
    return (ms, seq - 1) if seq else (ms - 1, MAX_ID[1])


def _succ(i):
    ms, seq = i
    return (ms, seq + 1) if seq < MAX_ID[1] else (ms + 1, 0)


class Model:
    """The replica as the translator knows it (see the module docstring)."""

    def __init__(self):
        self.names = {}       # sid -> name
        self.sids = {}        # name -> sid
        self.metas = {}       # sid -> StreamMeta
        self.groups = {}      # gid -> (sid, group name)
        self.gkeys = {}       # groups key -> gid
        self.ckeys = {}       # consumers key -> cid
        self.cnames = {}      # (gid, cid) -> consumer name
        self.shapes = {}      # sid -> {tag: Shape}
        self.maxdel = {}      # sid -> the replica's max-deleted-entry-id (XDEL counts what the store may not)

    @classmethod
    def load(cls, t, dbs):
        """The model of the store as read transaction ``t`` sees it."""
        m = cls()
        for k, v in t.cursor(db=dbs[b"keys"]):
            meta = codec.StreamMeta.decode(v)
            name = _name(k, meta)
            m.names[meta.sid], m.sids[name], m.metas[meta.sid] = name, meta.sid, meta
            m.maxdel[meta.sid] = meta.max_deleted
        for k, v in t.cursor(db=dbs[b"groups"]):
            sid = codec.number_of(k)
            g = codec.GroupMeta.decode(v, sid)
            m.groups[g.gid], m.gkeys[bytes(k)] = (sid, g.name), g.gid
        for k, v in t.cursor(db=dbs[b"consumers"]):
            c = codec.ConsumerMeta.decode(v)
            gid = codec.number_of(k)
            m.ckeys[bytes(k)], m.cnames[(gid, c.cid)] = c.cid, c.name
        for k, v in t.cursor(db=dbs[b"shapes"]):
            s = codec.decode_shape(bytes(k), v)
            m.shapes.setdefault(codec.number_of(k), {})[s.tag] = s
        return m


class _Sid:
    """What one commit did to one stream."""

    __slots__ = ("added", "gone_added", "trimmed", "deleted", "trims", "pel", "idmp", "meta_put")

    def __init__(self):
        self.added = {}         # ID -> stored value, in the order added
        self.gone_added = set()  # IDs added, then deleted one by one, in this commit
        self.trimmed = set()    # IDs added, then trimmed, in this commit
        self.deleted = []       # IDs that were there before, deleted one by one
        self.trims = []         # [MINID bound (None: every entry), lowest ID added after it]
        self.pel = {}           # (gid, ID) -> pending record or None
        self.idmp = []          # (producer name key, iid key, ID) recorded
        self.meta_put = False


class Translator:
    """Records -> commands.  ``caps``: the commands the replica has of
    those in SINCE (a set of names)."""

    def __init__(self, model, caps=frozenset(SINCE)):
        self.model = model
        self.caps = caps
        self.skipped = 0        # IDMP records that could not be sent (hashed names)
        self.touched = set()    # the streams (sids) the records changed and kept, since the caller cleared it

    def _need(self, command, what):
        if command not in self.caps:
            raise NeedsCommand(command, what)

    def record(self, ops):
        """The commands (tuples of bytes/int/str) for one record's ops."""
        m = self.model
        per: Dict[int, _Sid] = {}
        keys: Dict[bytes, Optional[bytes]] = {}       # name key -> stream record or None (last op wins)
        groups: Dict[bytes, Optional[bytes]] = {}     # groups key -> record or None
        consumers: Dict[bytes, Optional[bytes]] = {}  # consumers key -> record or None
        pels: Dict[tuple, Optional[bytes]] = {}       # (gid, ID) -> pending record or None

        def sid_of(k):
            return codec.number_of(k)

        def of(sid):
            s = per.get(sid)
            if s is None:
                s = per[sid] = _Sid()
            return s
        for op in ops:
            code, db = op[0], op[1]
            if code == changes.OP_MULTI:
                items = [(changes.OP_PUT, db, k, v) for k, v in op[2]]
            else:
                items = [op]
            for code, db, a, *rest in items:
                if db == b"log":
                    s = of(sid_of(a))
                    if code == changes.OP_PUT:
                        i = codec.id_from_entry_key(a)
                        s.added[i] = rest[0]
                        for t in s.trims:
                            if t[1] is None or i < t[1]:
                                t[1] = i
                    elif code == changes.OP_DEL:
                        i = codec.id_from_entry_key(a)
                        if s.added.pop(i, None) is not None:
                            s.gone_added.add(i)
                        else:
                            s.deleted.append(i)
                    elif code == changes.OP_BELOW:
                        self._below(s, sid_of(a), rest[0])
                    else:
                        raise Diverged("change-log op %r on entries" % (code,))
                elif db in (b"keys", b"groups", b"consumers"):
                    table = keys if db == b"keys" else groups if db == b"groups" else consumers
                    if code == changes.OP_BELOW:
                        if db != b"consumers":      # a group's consumers go with it: its DESTROY says it
                            raise Diverged("range delete in %r" % (db,))
                        continue
                    table[bytes(a)] = rest[0] if code == changes.OP_PUT else None
                elif db == b"cnames":
                    if code == changes.OP_PUT:
                        gid, cid = codec.cname_ids(a)
                        m.cnames[(gid, cid)] = bytes(rest[0])
                elif db == b"pel":
                    if code == changes.OP_BELOW:
                        continue        # a group dropped whole: its DESTROY says it
                    pels[(sid_of(a), codec.id_from_pel_key(a))] = rest[0] if code == changes.OP_PUT else None
                elif db == b"shapes" and code == changes.OP_PUT:
                    sh = codec.decode_shape(bytes(a), rest[0])
                    m.shapes.setdefault(sid_of(a), {})[sh.tag] = sh
                elif db == b"idmp" and code == changes.OP_PUT:
                    pk, kind, part = codec.idmp_split_key(bytes(a))
                    if kind == b"i":
                        of(sid_of(a)).idmp.append((pk, part, codec.decode_id(rest[0])))
        for (gid, i), v in pels.items():     # (a copied group's PEL may come before its record)
            g = m.groups.get(gid) or self._new_group(gid, groups)
            if g is not None:                # (None: a group made and dropped in this commit)
                of(g[0]).pel[(gid, i)] = v
        for k in groups:
            of(sid_of(k))
        for k in consumers:
            g = m.groups.get(sid_of(k)) or self._new_group(sid_of(k), groups)
            if g is not None:
                of(g[0])
        out: List[tuple] = []
        self._keys(keys, per, out)
        for sid, s in per.items():
            if sid in m.names:
                self._stream(sid, s, groups, consumers, out)
            elif sid in m.metas:
                raise Diverged("stream number %d is not on the replica" % sid)
        self.touched.update(per)
        return out

    # ------------------------------------------------------------ parsing

    @staticmethod
    def _below(s, sid, bound):
        """A range delete of a stream's first entries (a trim)."""
        if bound is None:
            s.trims.append([None, None])
            s.trimmed.update(s.added)
            s.added.clear()
            return
        i = codec.id_from_entry_key(bound)
        if bytes(bound) > codec.entry_key(sid, i):
            if i == MAX_ID:       # "just past" the greatest ID: every entry went
                return Translator._below(s, sid, None)
            i = _succ(i)          # the bound is "just past" an ID: entries up to it went
        for j in [j for j in s.added if j < i]:
            del s.added[j]
            s.trimmed.add(j)
        s.trims.append([i, None])

    def _new_group(self, gid, groups):
        for k, v in groups.items():
            if v is not None and codec.GroupMeta.decode(v).gid == gid:
                return codec.number_of(k), codec.GroupMeta.decode(v).name
        return None

    # ---------------------------------------------------------------- keys

    def _keys(self, keys, per, out):
        """DEL, RENAME and new streams; the model follows, and ``per``
        loses the streams that went."""
        m = self.model
        after = {}                      # sid -> (name, meta)
        dropped = []                    # names whose record went
        for k, v in keys.items():
            if v is None:
                name = codec.name_from_key(k)
                if name is None:
                    sid = next((s for s, n in m.names.items() if codec.name_key(n) == k), None)
                    name = m.names.get(sid) if sid is not None else None
                if name is not None:
                    dropped.append(name)
            else:
                meta = codec.StreamMeta.decode(v)
                after[meta.sid] = (_name(k, meta), meta)
        moved = {sid: (m.names[sid], nm) for sid, (nm, _) in after.items()
                 if sid in m.names and m.names[sid] != nm}
        for sid, (old, _) in moved.items():
            out.append(("RENAME", old, b"\x00xs-rename:%d" % sid))
            if m.sids.get(old) == sid:
                del m.sids[old]             # vacated: a stream renamed onto it is not in the way
        for name in dropped:
            sid = m.sids.get(name)
            if sid is not None and sid not in after:
                if sid not in moved:
                    out.append(("DEL", name))
                self._forget(sid)
        for sid, (old, new) in moved.items():
            holder = m.sids.get(new)        # a stream the rename replaced (not one renamed away: see above)
            if holder not in (None, sid):
                out.append(("DEL", new))
                self._forget(holder)
            out.append(("RENAME", b"\x00xs-rename:%d" % sid, new))
            m.names[sid], m.sids[new] = new, sid
        for sid, (name, meta) in after.items():
            if sid not in m.names:
                if name in m.sids:              # taken over (RESTORE/COPY ... REPLACE) without a DEL op
                    out.append(("DEL", name))
                    self._forget(m.sids[name])
                m.names[sid], m.sids[name] = name, sid
                m.metas[sid] = None             # created: no metadata on the replica yet
        for sid in after:
            per.setdefault(sid, _Sid()).meta_put = True
        for sid in list(per):
            if sid not in m.names:
                del per[sid]                    # the stream went in this commit: its DEL says it all
        self._after = after

    def _forget(self, sid):
        m = self.model
        name = m.names.pop(sid, None)
        if name is not None and m.sids.get(name) == sid:
            del m.sids[name]
        m.metas.pop(sid, None)
        m.maxdel.pop(sid, None)
        m.shapes.pop(sid, None)
        for gid in [g for g, (s, _) in m.groups.items() if s == sid]:
            self._forget_group(gid)
        for k in [k for k in m.gkeys if codec.number_of(k) == sid]:
            del m.gkeys[k]

    def _forget_group(self, gid):
        m = self.model
        m.groups.pop(gid, None)
        p = codec.gid_prefix(gid)
        for k in [k for k in m.ckeys if k.startswith(p)]:
            del m.ckeys[k]
        for k in [pair for pair in m.cnames if pair[0] == gid]:
            del m.cnames[k]

    # ------------------------------------------------------------- streams

    def _stream(self, sid, s, groups, consumers, out):
        m = self.model
        name = m.names[sid]
        old = m.metas.get(sid)
        new = self._after[sid][1] if sid in self._after else old
        created = old is None
        if created:
            self._named_gone(s)
        new_ids = set(s.added) | s.gone_added | s.trimmed
        if created:         # the key first: groups need it
            if new_ids:
                self._adds(name, sid, s, new_ids, old, out)
            else:
                out.append(("XADD", name, "MAXLEN", "0", "0-1", "x", "x"))
        setids = self._groups(sid, name, groups, consumers, out)
        late = all(b is None or low is None or low >= b for b, low in s.trims)
        self._idmp_settings(name, old, new, out)
        if not created:
            # pending entries and IDMP history of entries the replica has
            self._pel(name, s, lambda i: i not in new_ids, out)
            self._idmp(name, s, lambda i: i not in new_ids, out)
            # entries deleted (XDEL sets max-deleted-entry-id, as the store's did)
            self._xdel(name, sid, s.deleted, out)
            # trims: after the entries added, which they may remove too (no
            # max-deleted-entry-id), unless an entry added after a trim is
            # below its bound (XSETID lowered the last ID in between)
            if not late:
                self._trims(name, s, out)
            self._adds(name, sid, s, new_ids, old, out)
        self._idmp(name, s, lambda i: i in new_ids, out)
        self._pel(name, s, lambda i: i in new_ids, out)
        if late:
            self._trims(name, s, out)
        else:
            self._xdel(name, sid, sorted(s.trimmed), out)
        self._xdel(name, sid, sorted(s.gone_added), out)
        # a group's entries-read is kept within the stream's entries-added
        # when set, and not lowered with it: the groups are set while
        # entries-added is at least theirs, then the stream's exact
        # metadata (an entries-added past LLONG_MAX, which XSETID cannot
        # take, is left to the replica's count)
        if new is not None and (s.meta_put or setids):
            if new.max_deleted == (0, 0) and m.maxdel.get(sid, (0, 0)) > (0, 1):
                # the store deleted entries without counting them (a trim
                # with a reference policy) and the replica counted its
                # XDELs: XSETID cannot go back to 0-0 (and a later XSETID may
                # not go below the count), so the count is brought to 0-1
                top = max(new_ids) if new_ids else (old.last_id if old is not None else (0, 1))
                out.append(("XSETID", name, fmt(max(top, (0, 1))), "MAXDELETEDID", "0-1"))
                m.maxdel[sid] = (0, 1)
            if new.max_deleted != (0, 0):
                m.maxdel[sid] = new.max_deleted
            ea, tail = new.entries_added, ("MAXDELETEDID", fmt(new.max_deleted))
            high = max([ea] + [g.entries_read for g in setids])
            exact = ea < 1 << 63
            if exact:
                out.append(("XSETID", name, fmt(new.last_id), "ENTRIESADDED", high) + tail)
            for g in setids:
                out.append(("XGROUP", "SETID", name, g.name, fmt(g.last_id), "ENTRIESREAD", g.entries_read))
            if not exact or high != ea:
                out.append(("XSETID", name, fmt(new.last_id)) + (("ENTRIESADDED", ea) if exact else ()) + tail)
        if new is not None and (old is None or old.expire_at != new.expire_at):
            if new.expire_at is not None:
                out.append(("PEXPIREAT", name, new.expire_at))
            elif old is not None:
                out.append(("PERSIST", name))
        m.metas[sid] = new

    @staticmethod
    def _named_gone(s):
        """A stream made whole in one commit (a copy, a RESTORE, a sync
        by commands) may have pending entries and IDMP history of
        entries it no longer has: they are made too, then removed again
        (by a trim when they are all below its first entry, which leaves
        max-deleted-entry-id alone), so XCLAIM ... FORCE, XNACK ... FORCE
        and XIDMPRECORD find them as the store's verbs did."""
        named = {i for (_, i), v in s.pel.items() if v is not None} | {i for _, _, i in s.idmp}
        gone = named - set(s.added) - s.gone_added - s.trimmed
        if not gone:
            return
        if not s.added or max(gone) < min(s.added):
            s.trimmed |= gone
            s.trims.append([min(s.added) if s.added else None, None])
        else:
            s.gone_added |= gone

    def _groups(self, sid, name, groups, consumers, out):
        """Groups and consumers made, replaced or removed; returns the
        groups whose last ID and entries-read changed (SETID at the end)."""
        m = self.model
        setids = []
        for k, v in groups.items():
            if codec.number_of(k) != sid:
                continue
            g = codec.GroupMeta.decode(v, sid) if v is not None else None
            had = m.gkeys.get(k)
            if had is not None and (g is None or g.gid != had):
                out.append(("XGROUP", "DESTROY", name, m.groups[had][1]))
                self._forget_group(had)
                del m.gkeys[k]
                had = None
            if g is None:
                continue
            if had is None:
                out.append(("XGROUP", "CREATE", name, g.name, fmt(g.last_id), "ENTRIESREAD", g.entries_read))
                m.gkeys[k], m.groups[g.gid] = g.gid, (sid, g.name)
            setids.append(g)        # (set again at the end: what follows may move entries-read)
        for k, v in consumers.items():
            gid = codec.number_of(k)
            grp = m.groups.get(gid)
            if grp is None or grp[0] != sid:
                continue
            c = codec.ConsumerMeta.decode(v) if v is not None else None
            had = m.ckeys.get(k)
            if had is not None and (c is None or c.cid != had):
                out.append(("XGROUP", "DELCONSUMER", name, grp[1], m.cnames[(gid, had)]))
                del m.ckeys[k]
                had = None
            if c is not None and had is None:
                out.append(("XGROUP", "CREATECONSUMER", name, grp[1], c.name))
                m.ckeys[k] = c.cid
                m.cnames[(gid, c.cid)] = c.name
        return setids

    def _adds(self, name, sid, s, new_ids, old, out):
        """The entries added, in ID order (those removed again in this
        commit too, with stand-in fields: the PEL may hold them); the last
        ID lowered first if XSETID lowered it in the store."""
        ids = sorted(new_ids)
        if not ids:
            return
        if old is not None and ids[0] <= old.last_id:
            out.append(("XSETID", name, fmt(_pred(ids[0]))))
        shapes = self.model.shapes.get(sid, {})
        for i in ids:
            v = s.added.get(i)
            fields = codec.stored_fields(v, shapes) if v is not None else [b"x", b"x"]
            out.append(("XADD", name, fmt(i)) + tuple(fields))

    def _idmp_settings(self, name, old, new, out):
        """XCFGSET when the store's IDMP settings changed (it clears the
        history, as it did in the store: before any XIDMPRECORD)."""
        cfg = None if new is None else (new.idmp_duration, new.idmp_maxsize)
        if cfg is not None and ((old is None and (new.idmp_cfg or cfg != codec.IDMP_DEFAULTS)) or
                                (old is not None and cfg != (old.idmp_duration, old.idmp_maxsize))):
            self._need("XCFGSET", "stream %s has IDMP settings" % _shown(name))
            out.append(("XCFGSET", name, "IDMP-DURATION", new.idmp_duration, "IDMP-MAXSIZE", new.idmp_maxsize))

    def _idmp(self, name, s, which, out):
        """XIDMPRECORD for the history recorded of entries ``which``
        selects (the entry is on the replica then)."""
        for pk, part, i in s.idmp:
            if not which(i):
                continue
            pid, iid = codec.name_from_key(pk), codec.name_from_key(part)
            if pid is None or iid is None:
                self.skipped += 1       # a long name, kept hashed: not known here
                continue
            self._need("XIDMPRECORD", "stream %s has idempotent-producer history" % _shown(name))
            out.append(("XIDMPRECORD", name, pid, iid, fmt(i)))

    def _xdel(self, name, sid, ids, out):
        for j in range(0, len(ids), 1000):
            out.append(("XDEL", name) + tuple(fmt(i) for i in ids[j:j + 1000]))
        if ids:
            m = self.model
            m.maxdel[sid] = max(m.maxdel.get(sid, (0, 0)), max(ids))

    @staticmethod
    def _trims(name, s, out):
        for b, _ in s.trims:
            out.append(("XTRIM", name, "MAXLEN", "=", "0") if b is None else ("XTRIM", name, "MINID", "=", fmt(b)))

    def _pel(self, name, s, which, out):
        m = self.model
        nacks = []
        for (gid, i), v in s.pel.items():
            if not which(i):
                continue
            grp = m.groups.get(gid)
            if grp is None:
                continue
            if v is None:
                out.append(("XACK", name, grp[1], fmt(i)))
                continue
            cid, t, count = codec.decode_pending(v)
            if cid:
                owner = m.cnames[(gid, cid)]
                out.append(("XCLAIM", name, grp[1], owner, 0, fmt(i), "TIME", t,
                            "RETRYCOUNT", min(count, LLONG_MAX), "FORCE", "JUSTID"))
                # a count past LLONG_MAX (XNACK FATAL, then deliveries), which
                # RETRYCOUNT cannot take: an XCLAIM without JUSTID adds one
                for _ in range(min(count - LLONG_MAX, 1000)):
                    out.append(("XCLAIM", name, grp[1], owner, 0, fmt(i), "TIME", t))
            else:
                nacks.append((t, grp[1], i, count))
        for t, g, i, count in sorted(nacks):
            self._need("XNACK", "stream %s has NACKed pending entries" % _shown(name))
            out.append(("XNACK", name, g, "FAIL", "IDS", 1, fmt(i), "RETRYCOUNT", count, "FORCE"))
