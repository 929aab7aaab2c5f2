"""The engine side of ``xs worker``: taking entries from a consumer group,
acknowledging, releasing, retrying and dead-lettering them.  Functions of
a transaction (storage.txn.Txn), built only on its public verbs; no
click, no rich, no processes (xstream_cli/porcelain/worker.py runs the
command and calls these from one thread).

Where an entry comes from, in order (``take``):
  1. this consumer's own pending entries (left by a run that stopped
     before acknowledging): XREADGROUP ... STREAMS s <after>, a history
     read, paged by ID;
  2. entries other consumers left idle for ``claim_idle`` ms, and entries
     given back with XNACK (claimable at once), then new entries:
     XREADGROUP ... CLAIM claim_idle STREAMS s >.
Each delivery comes with its delivery count as XPENDING shows it after
the delivery (read in the same transaction).

A delivery is one ``Delivery``; ``fields`` is None for an entry that was
deleted from the stream while pending (nothing to hand over).
"""
from storage.options import AddOptions, ClaimOptions, GroupOptions, IdsOptions, NackOptions, PendingOptions, ReadOptions

STDERR_TAIL = 2048          # bytes of a command's stderr kept in a dead letter


class Delivery:
    """One entry delivered to this consumer."""
    __slots__ = ("id", "key", "fields", "deliveries")

    def __init__(self, key, fields, deliveries):
        self.key = key                                  # (ms, seq)
        self.id = b"%d-%d" % key                        # its text, as the child's environment and
                                                        # a dead letter's xs-id field carry it
        self.fields = fields                            # [f, v, ...] or None (deleted)
        self.deliveries = deliveries                    # delivery count, this delivery included

    def __repr__(self):
        return "Delivery(%r, %r, %r)" % (self.id, self.fields, self.deliveries)


def ensure_group(store, stream, group, start):
    """XGROUP CREATE stream group start MKSTREAM unless the group exists.
    ``start``: (ms, seq) or b"$".  Returns True if it was created."""
    def exists(tx):
        return tx.last_generated_id(stream) is not None and group in tx.group_names(stream)
    if store.run(exists, write=False):
        return False

    def create(tx):
        if exists(tx):          # another worker made it meanwhile
            return False
        tx.create_group(stream, group, GroupOptions(start, True))
        return True
    return store.run(create, write=True)


def _deliveries(tx, stream, group, keys):
    """Delivery count of each key as XPENDING shows it (0: not pending)."""
    out = []
    for k in keys:
        rows = tx.pending_range(stream, group, PendingOptions(k, k, 1))
        out.append(rows[0].deliveries if rows else 0)
    return out


def _with_counts(tx, stream, group, rows):
    """[(id, fields)] -> [Delivery]."""
    keys = [i for i, _ in rows]
    counts = _deliveries(tx, stream, group, keys)
    return [Delivery(i, f, n) for (i, f), n in zip(rows, counts)]


def take(tx, stream, group, consumer, after, count, claim_idle):
    """Deliver up to ``count`` entries to ``consumer`` (a write
    transaction).  ``after``: (ms, seq) to read this consumer's own
    pending entries after that ID, or b">" for idle / NACKed entries of
    the group (XREADGROUP CLAIM ``claim_idle``) and then new ones.
    Returns [Delivery], in the order the engine delivered them."""
    o = ReadOptions((stream,), (after,), count, None, 0, 0, group, consumer, False,
                    claim_idle if after == b">" else None)
    rows = []
    for _, ents in tx.read_group(o):
        rows += [(e[0], e[1]) for e in ents]
    return _with_counts(tx, stream, group, rows)


def retake(tx, stream, group, consumer, keys, min_idle):
    """XCLAIM stream group consumer min_idle keys...: take back entries
    whose retry delay has passed.  An entry another consumer took in the
    meantime (idle less than ``min_idle``), or acknowledged, is skipped;
    one deleted from the stream leaves the group's pending list (XCLAIM
    does that).  Returns [Delivery]."""
    got = tx.claim(stream, group, consumer, ClaimOptions(min_idle=min_idle, ids=tuple(keys)))
    return _with_counts(tx, stream, group, [(e[0], e[1]) for e in got])


def owned(tx, stream, group, consumer, keys):
    """The keys still pending and owned by ``consumer``."""
    out = []
    for k in keys:
        if tx.pending_range(stream, group, PendingOptions(k, k, 1, consumer)):
            out.append(k)
    return out


def keep_alive(tx, stream, group, consumer, keys):
    """Reset the idle time of entries this consumer is still processing
    (XCLAIM ... IDLE 0 JUSTID: the delivery count is left alone), so that
    other workers' CLAIM does not take an entry whose command is merely
    slow.  Entries another consumer took are left to it.  Returns the
    keys kept."""
    mine = owned(tx, stream, group, consumer, keys)
    if mine:
        tx.claim(stream, group, consumer, ClaimOptions(min_idle=0, ids=tuple(mine), idle=0, justid=True))
    return mine


def ack(tx, stream, group, keys):
    """XACK; returns how many were pending."""
    if not keys:
        return 0
    return tx.ack(stream, group, IdsOptions(tuple(keys), len(keys)))


def release(tx, stream, group, keys, mode):
    """XNACK stream group <mode> IDS keys: give entries back to the group
    (unowned, claimable at once by any worker's CLAIM).  ``mode``
    "silent": the delivery did not count (a worker stopping before its
    command finished); "fail": it did (the command failed)."""
    if not keys:
        return 0
    return tx.nack(stream, group, NackOptions(mode, tuple(keys)))


def dead_letter_fields(stream, group, consumer, d, status, stderr_tail):
    """The fields of a dead letter: seven origin pairs first, always in
    this order, then the entry's own fields as they were."""
    origin = [b"xs-stream", stream, b"xs-id", d.id, b"xs-group", group, b"xs-consumer", consumer,
              b"xs-deliveries", b"%d" % d.deliveries, b"xs-exit", status,
              b"xs-stderr", stderr_tail[-STDERR_TAIL:]]
    return origin + list(d.fields or ())


def dead_letter(tx, stream, group, consumer, dl_stream, items):
    """Copy each (Delivery, status, stderr tail) to ``dl_stream`` and
    acknowledge it in ``stream``: call in ONE write transaction, so an
    entry is never both dead-lettered and pending, nor lost in between.
    Returns the dead letters' IDs (b"ms-seq")."""
    ids = []
    for d, status, err in items:
        ms, seq = tx.add(dl_stream, dead_letter_fields(stream, group, consumer, d, status, err),
                         AddOptions())
        ids.append(b"%d-%d" % (ms, seq))
    ack(tx, stream, group, [d.key for d, _, _ in items])
    return ids


ORIGIN_NAMES = (b"xs-stream", b"xs-id", b"xs-group", b"xs-consumer", b"xs-deliveries", b"xs-exit", b"xs-stderr")


def dead_letter_origin(fields):
    """(origin stream, original ID, the entry's own fields) of a dead
    letter's ``fields``, or None when they are not a dead letter's (the
    seven origin pairs first, in their order)."""
    n = len(ORIGIN_NAMES)
    if fields is None or len(fields) < 2 * n or tuple(fields[0:2 * n:2]) != ORIGIN_NAMES:
        return None
    return fields[1], fields[3], list(fields[2 * n:])


class Redriven:
    """One dead letter put back: ``dead`` (its ID in the dead-letter
    stream), ``stream`` and ``original`` (where it came from: the stream
    and the original ID's text, as the letter's fields hold them),
    ``new`` (its ID there now; None in a dry run).  IDs are (ms, seq)."""
    __slots__ = ("dead", "stream", "original", "new")

    def __init__(self, dead, stream, original, new):
        self.dead, self.stream, self.original, self.new = dead, stream, original, new


class Stuck:
    """A dead letter that cannot be put back (its origin stream refuses
    the entry: an exhausted ID): ``dead`` (its ID (ms, seq), left in the
    dead-letter stream), ``stream``, and ``error`` (Redis's text)."""
    __slots__ = ("dead", "stream", "error")

    def __init__(self, dead, stream, error):
        self.dead, self.stream, self.error = dead, stream, error


def redrive(tx, dl_stream, after=(0, 0), only=None, count=1000, dry=False, stuck=None):
    """Put the dead letters of ``dl_stream`` with IDs above ``after``
    back on their origin streams: each is added there again (its own
    fields, a new ID, so its groups deliver it as a new entry) and
    deleted from ``dl_stream`` in this one write transaction, so a dead
    letter is redriven once, whatever stops the run.  ``only``: origin
    streams to take (others stay); at most ``count`` looked at.  A
    letter its origin refuses stays where it is and is added to the list
    ``stuck`` (a Stuck), the others go on: the transaction must then have
    savepoints (Store.run(..., savepoints=True)), so the refused add
    changes nothing; without ``stuck`` the refusal raises.  Returns (the
    Redriven, the ID of the last dead letter looked at or None, the IDs
    of entries that are not dead letters, left as they are)."""
    from storage.errors import RedisError
    from storage.options import KEEPREF, RangeOptions
    ents = tx.range(dl_stream, RangeOptions(after, (2 ** 64 - 1, 2 ** 64 - 1), count, False)) or ()
    done, foreign, last = [], [], None
    for e in ents:
        last = e.id
        origin = dead_letter_origin(e.fields)
        if origin is None:
            foreign.append(e.id)
            continue
        stream, original, fields = origin
        if only is not None and stream not in only:
            continue
        if not fields:                   # an entry deleted while pending has nothing to put back
            foreign.append(e.id)
            continue
        new = None
        if not dry:
            try:
                ms, seq = tx.add(stream, fields, AddOptions())
            except RedisError as err:
                if stuck is None:
                    raise
                stuck.append(Stuck(e.id, stream, err.text))
                continue
            new = (ms, seq)
            tx.delete_entries(dl_stream, IdsOptions((e.id,), 1, KEEPREF))
        done.append(Redriven(e.id, stream, original, new))
    return done, last, foreign


def claim_wait_ms(tx, stream, group, claim_idle):
    """Ms until the group's oldest pending entry becomes claimable
    (None: nothing pending)."""
    return tx.claim_wait_ms((stream,), group, claim_idle)

