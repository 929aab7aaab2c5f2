"""COPY: a stream made the same as another, through the records of
storage.verbs.dump and the loader of storage.verbs.load (so whatever a
stream holds and a snapshot keeps, a copy keeps)."""
from storage import errors
from storage.codec import decode_entry
from storage.verbs.dump import stream_records
from storage.verbs.load import load


def copy(p, src, dst, replace=False):
    """COPY: a stream ``dst`` made the same as ``src`` (entries, counters,
    IDMP history, groups, consumers, pending and NACKed entries with their
    times and counts), through the records of storage.verbs.dump and the
    loader of storage.verbs.load.  1 if copied; 0 if ``src`` does not exist,
    or ``dst`` does and ``replace`` is false."""
    if src == dst:
        raise errors.same_object()
    if p.streams.get(src) is None:
        return 0
    if p.streams.get(dst) is not None and not replace:
        return 0
    load(p, list(_as_loaded(stream_records(p, src, batched=True), dst)), replace=True)
    p.dirty += 1
    return 1


def _as_loaded(records, name):
    """storage.verbs.dump's records of a stream as storage.verbs.load's
    records of the stream ``name`` (read whole before loading: the source
    is read in the transaction that writes the copy)."""
    where = "COPY"
    meta = group = consumer = None
    yield "begin", where, name
    for rec in records:
        kind = rec[0]
        if kind == "stream":
            meta = rec[1]
        elif kind == "entries":
            for i, v in rec[1]:
                yield "entry", where, name, i, decode_entry(v)[1]
        elif kind == "entry":
            yield "entry", where, name, rec[1], decode_entry(rec[2])[1]
        else:
            if meta is not None:
                yield "stream", where, name, meta
                meta = None
            if kind == "iid":
                yield "iid", where, name, rec[1], rec[2], rec[3]
            elif kind == "group":
                group = rec[1]
                yield "group", where, name, group, rec[2], rec[3]
            elif kind == "consumer":
                consumer = rec[1]
                yield "consumer", where, name, group, consumer, rec[2], rec[3]
            elif kind == "pending":
                yield "pending", where, name, group, consumer, rec[1], rec[2], rec[3]
            elif kind == "nacked":
                yield "nacked", where, name, group, rec[1], rec[2]
    if meta is not None:
        yield "stream", where, name, meta
