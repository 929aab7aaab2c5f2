"""xs archive's plan and trim, against a transaction's public verbs (a
Store's Txn, or NetStore over the network; no pyspark): what each
stream has to archive below the cut, kept back for its consumer groups
(Hold), with the SHA-256 of its entries; and the trim that removes
exactly the entries of the last archived run."""
import hashlib

from storage import ids
from storage.errors import RedisError
from storage.info import GroupWork
from storage.options import PendingOptions, RangeOptions, TrimOptions
from storage.spark.archive.common import ArchiveError, id_text, parse_id_text


class StreamPlan:
    """What one stream has for this run."""
    __slots__ = ("name", "through", "leftover", "rows", "first", "last", "digest", "hold")

    def __init__(self, name, through, leftover, rows, first, last, digest=None, hold=None):
        self.name = name            # str
        self.through = through      # (ms, seq) archived through before this run, or None
        self.leftover = leftover    # entries at or below ``through`` still in the stream
        self.rows = rows            # entries to archive now (above ``through``, below the cut)
        self.first = first          # their first and last IDs, (ms, seq), or None
        self.last = last
        self.digest = digest        # SHA-256 of those entries (_digest_entry), or None
        self.hold = hold            # a Hold: entries below the cut kept for consumer groups, or None


class Hold:
    """Entries below the cut that a run keeps (or, with ``drop_unacked``,
    takes) because consumer groups have not acknowledged them: from
    ``floor`` (the oldest ID some group still needs) to the cut, ``held``
    entries, ``unacked`` of them needed by some group (not yet delivered
    to it, or pending in it); ``groups``: a GroupWork per group with
    work there, in name order.  ``kept``: they stay in the stream (the
    default); False: --drop-unacked archived and trimmed them."""
    __slots__ = ("floor", "held", "unacked", "groups", "kept")

    def __init__(self, floor, held, unacked, groups, kept=True):
        self.floor = floor
        self.held = held
        self.unacked = unacked
        self.groups = groups
        self.kept = kept


def _digest_entry(h, entry):
    """Add one entry (id, fields) to the SHA-256 ``h``: every byte with its
    length, so no two different entries or lists of them hash alike."""
    i = b"%d-%d" % entry.id
    fields = entry.fields
    h.update(b"%d:%s%d:" % (len(i), i, len(fields)))
    for f in fields:
        h.update(b"%d:" % len(f))
        h.update(f)


def scan(tx, raw, lo, hi, chunk=10000, digest=False):
    """(count, first, last) of the entries of stream ``raw`` with IDs in
    [lo, hi], read ``chunk`` at a time (public verbs only); with
    ``digest``, (count, first, last, SHA-256 of the entries in order)."""
    n, first, last = 0, None, None
    h = hashlib.sha256() if digest else None
    while lo <= hi:
        got = tx.range(raw, RangeOptions(lo, hi, chunk))
        if not got:
            break
        if first is None:
            first = got[0].id
        last = got[-1].id
        n += len(got)
        if h is not None:
            for e in got:
                _digest_entry(h, e)
        if len(got) < chunk or last >= ids.MAX_ID:
            break
        lo = ids.incr(last)
    if h is not None:
        return n, first, last, h.hexdigest()
    return n, first, last


def group_floor(tx, raw):
    """(floor, groups) of stream ``raw``: ``floor`` is the smallest ID
    some consumer group has not acknowledged -- its oldest pending ID, or
    the ID right after its last-delivered one (where its undelivered
    entries start) -- or None when no group can need an entry;
    ``groups``: [(group name, its last-delivered ID)].  Reads the
    transaction's public verbs only (XINFO GROUPS and XPENDING over the
    network: NetStore)."""
    try:
        infos = tx.groups_info(raw)
    except RedisError:              # no such stream (gone since it was selected)
        return None, []
    floor = None
    groups = []
    for g in infos:
        last = tuple(g.last_delivered_id)
        need = ids.incr(last) if last < ids.MAX_ID else None
        if g.pending:
            first = tx.pending_summary(raw, g.name).first
            if first is not None:
                first = tuple(first)
                need = first if need is None else min(need, first)
        if need is not None:
            floor = need if floor is None else min(floor, need)
        groups.append((g.name, last))
    return floor, groups


def _pending_below(tx, raw, group, end, chunk=10000):
    """The IDs pending in ``group`` of stream ``raw`` up to ``end``, a set
    (a PEL is the work in flight: small beside the stream)."""
    out: set = set()
    lo = ids.MIN_ID
    while True:
        rows = tx.pending_range(raw, group, PendingOptions(lo, end, chunk))
        out.update(tuple(r.id) for r in rows)
        if len(rows) < chunk:
            return out
        last = tuple(rows[-1].id)
        if last >= end:
            return out
        lo = ids.incr(last)


def hold_of(tx, raw, floor, groups, end, chunk=10000):
    """The Hold of stream ``raw`` for entries in [``floor``, ``end``]:
    one pass over their IDs, counting for each group those it has not
    been delivered (after its last-delivered ID) and those pending in
    it.  None when no entry is there."""
    if floor is None or floor > end:
        return None
    pending = [_pending_below(tx, raw, name, end) for name, _ in groups]
    undelivered = [0] * len(groups)
    held_by = [0] * len(groups)
    held = unacked = 0
    lo = floor
    while lo <= end:
        got = tx.range(raw, RangeOptions(lo, end, chunk))
        if not got:
            break
        for e in got:
            i = e.id
            held += 1
            need = False
            for j, (_, last) in enumerate(groups):
                if last < i:
                    undelivered[j] += 1
                    need = True
                elif i in pending[j]:
                    held_by[j] += 1
                    need = True
            unacked += need
        last = got[-1].id
        if len(got) < chunk or last >= end:
            break
        lo = ids.incr(last)
    if not held:
        return None
    work = sorted((GroupWork(group=name, undelivered=undelivered[j], pending=held_by[j])
                   for j, (name, _) in enumerate(groups) if undelivered[j] or held_by[j]),
                  key=lambda w: bytes(w.group))
    return Hold(floor, held, unacked, work)


def plan_streams(tx, names, cut, manifest, drop_unacked=False):
    """A StreamPlan per name (bytes, UTF-8) from one read transaction.
    Entries some consumer group has not acknowledged stay, as xs trim
    keeps them: a stream's cut is lowered to the oldest ID any of its
    groups still needs (StreamPlan.hold says what stays), unless
    ``drop_unacked`` (the hold then says what the run takes)."""
    out = []
    for raw in names:
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ArchiveError("stream name %r is not UTF-8: it cannot be a Parquet partition" % (raw,))
        rec = manifest["streams"].get(name)
        through = parse_id_text(rec["through"]) if rec else None
        leftover = scan(tx, raw, ids.MIN_ID, through)[0] if through is not None else 0
        lo = ids.incr(through) if through is not None and through < ids.MAX_ID else None
        if through is None:
            lo = ids.MIN_ID
        floor, groups = group_floor(tx, raw)
        hold = None
        stream_cut = cut
        if floor is not None and floor < cut:
            start = floor if lo is None else max(floor, lo)
            hold = hold_of(tx, raw, start, groups, ids.decr(cut))
            if hold is not None:
                hold.kept = not drop_unacked
            if not drop_unacked:
                stream_cut = floor
        rows, first, last, digest = 0, None, None, None
        if lo is not None and stream_cut > ids.MIN_ID and lo < stream_cut:
            rows, first, last, digest = scan(tx, raw, lo, ids.decr(stream_cut), digest=True)
        out.append(StreamPlan(name, through, leftover, rows, first, last, digest, hold))
    return out


def _check_trimmable(tx, raw, through, seg):
    """The entries at or below ``through`` in stream ``raw`` must be
    exactly those of the last archived run ``seg`` ({"first", "last",
    "rows", "digest"}): the same count and the same SHA-256 over their IDs
    and fields.  Anything else (a stream made again, entries of another
    store of the same name, entries deleted since) is refused: nothing is
    trimmed that the archive cannot be shown to hold."""
    n, first, _, digest = scan(tx, raw, ids.MIN_ID, through, digest=True)
    if not n:
        return 0
    name = raw.decode("utf-8", "replace")
    if seg is None or first < parse_id_text(seg["first"]):
        raise ArchiveError(
            "stream %s holds %d entries at or below its archived-through ID %s (from %s) that are not "
            "those of its last archived run: was it deleted and made again?  Nothing was trimmed; archive it "
            "to another directory" % (name, n, id_text(through), id_text(first)))
    if seg.get("digest") is None:
        raise ArchiveError(
            "stream %s still holds %d entries at or below its archived-through ID %s, and the manifest (written "
            "by an older xs) cannot show they are the archived ones.  Nothing was trimmed; check them against the "
            "archive and remove them with XTRIM %s MINID %s" % (
                name, n, id_text(through), name, id_text(ids.incr(through)) if through < ids.MAX_ID else "+"))
    if n != seg["rows"] or digest != seg["digest"]:
        raise ArchiveError(
            "stream %s holds %d entries at or below its archived-through ID %s that are not exactly the %d its "
            "last archived run wrote (deleted since, or another store's stream of the same name?).  Nothing was "
            "trimmed; check them against the archive and remove them with XTRIM %s MINID %s" % (
                name, n, id_text(through), seg["rows"], name,
                id_text(ids.incr(through)) if through < ids.MAX_ID else "+"))
    return n


def trim_archived(store, manifest, names, drop_unacked=False):
    """One write transaction: remove from each stream of ``names`` (str)
    the entries at or below its archived-through ID.  A stream in which
    some consumer group has not acknowledged one of them (a group made
    or moved back since the run planned) is left whole, unless
    ``drop_unacked``: the entries are in the archive and the stream
    both, and a later run trims them once the group is done.  Returns
    ({name: removed}, {name: Hold of the archived entries left})."""
    todo = [(n, manifest["streams"][n]) for n in names if n in manifest["streams"]]

    def trim_all(tx):
        removed, held = {}, {}
        for name, rec in todo:
            raw = name.encode("utf-8")
            through = parse_id_text(rec["through"])
            n = _check_trimmable(tx, raw, through, rec.get("last_run"))
            if not n:
                continue
            if not drop_unacked:
                floor, groups = group_floor(tx, raw)
                if floor is not None and floor <= through:
                    hold = hold_of(tx, raw, floor, groups, through)
                    if hold is not None:
                        held[name] = hold
                        continue
            # the checked entries are exactly those the trim removes (the
            # same transaction; over the network, under WATCH: NetStore)
            if through >= ids.MAX_ID:
                tx.trim(raw, TrimOptions("maxlen", 0))
            else:
                tx.trim(raw, TrimOptions("minid", ids.incr(through)))
            removed[name] = n
        return removed, held
    return store.run(trim_all, write=True)
