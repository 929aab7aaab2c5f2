"""Upgrading a store written by an older xs to the current format.

``Store`` calls ``migrate`` in the write transaction that opens the
store, under LMDB's write lock: the steps run once, whoever opens the
store first, and all together -- a crash or an error mid-way leaves the
store in its old format, to be upgraded on the next open.

A format change needs: a new ``codec.FORMAT_VERSION``, the old layout's
decoders kept in codec (``decode_v1`` and the like), a step here from
the previous version, and a fixture store written by the previous
version (tests/fixtures/) that must open, read back identically and
take writes (tests/engine/test_format.py).  Adding a field to a record needs
none of this: records decode with a default for a field they lack.
"""
from storage import codec
from storage.parts.kv import KV


def _v1_to_v2(kv):
    """Format 1 -> 2: records become maps; the consumer-by-id index moves
    from ``consumers`` (``gid + 0x02 + cid``) to ``cnames``."""
    keys, groups, consumers, cnames = (kv.db(n) for n in (b"keys", b"groups", b"consumers", b"cnames"))
    for k, v in kv.iter_prefix(keys, b""):
        kv.put(keys, k, codec.StreamMeta.decode_v1(v).encode())
    for k, v in kv.iter_prefix(groups, b""):
        kv.put(groups, k, codec.GroupMeta.decode_v1(v).encode())
    moved = []
    for k, v in kv.iter_prefix(consumers, b""):
        index = codec.v1_cname_index(k)
        if index is not None:
            moved.append((k, index, v))
        else:
            kv.put(consumers, k, codec.ConsumerMeta.decode_v1(v).encode())
    for k, (gid, cid), name in moved:
        kv.delete(consumers, k)
        kv.put(cnames, codec.cname_key(gid, cid), name)


def _v2_to_v3(kv):
    """Format 2 -> 3: the ``nodes`` database (storage.parts.nodes).  A format-2
    store did not record where Redis's listpack nodes would begin, nor
    what was deleted from them, so every stream is assumed to have been
    added in ID order with Redis's default node sizes and nothing deleted
    since: each stream record gets ``nodes-from`` = its first entry, and
    storage.parts.log builds those nodes from the entries when a verb first
    needs them (as after a bulk ingest).  For a stream that did see XDEL
    or trimming, the nodes then hold the same live entries but fewer
    deleted ones than Redis's would, so approximate trimming of that old
    part may free other whole nodes than Redis would; entries added after
    the upgrade are tracked exactly."""
    keys, entries = kv.db(b"keys"), kv.db(b"entries")
    for k, v in list(kv.iter_prefix(keys, b"")):
        m = codec.StreamMeta.decode(v)
        first = kv.first_key(entries, codec.sid_prefix(m.sid))
        if first is not None:
            m.nodes_from = codec.v3_id_from_entry_key(first)
            kv.put(keys, k, m.encode())


def _v3_to_v4(kv):
    """Format 3 -> 4: every entry moves from ``entries`` to ``log``, under
    its shorter key and in its compact form (storage.parts.log interns the
    stream's field sets as it appends, as for new entries), and
    ``entries`` is dropped.  The stream records (length, nodes) stay as
    they are: the entries are the same."""
    from storage.parts.log import EntryLog
    keys, entries = kv.db(b"keys"), kv.db(b"entries")
    log = EntryLog(kv)
    for _, v in kv.iter_prefix(keys, b""):
        m = codec.StreamMeta.decode(v)
        batch = []
        for k, rec in kv.iter_prefix(entries, codec.sid_prefix(m.sid)):
            batch.append((codec.v3_id_from_entry_key(k), codec.entry_fields(rec)))
            if len(batch) >= 10000:
                log.put_many(m, batch)
                batch = []
        log.put_many(m, batch)
    kv.lt.drop(entries, delete=True)


STEPS = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}       # from version -> the step to the next


def migrate(env, lt, dbs, version, notice=None):
    """Upgrade the store under transaction ``lt`` from ``version`` to
    ``codec.FORMAT_VERSION`` (``env``: to open the databases of older
    formats); ``notice(version, FORMAT_VERSION, entries)`` is called
    first, if given."""
    dbs = dict(dbs)
    if version <= 3:
        dbs[b"entries"] = env.open_db(b"entries", txn=lt)
    kv = KV(lt, dbs)
    if notice is not None:
        entries = sum(codec.StreamMeta.decode(v).length if version >= 2 else codec.StreamMeta.decode_v1(v).length
                      for _, v in kv.iter_prefix(kv.db(b"keys"), b""))
        notice(version, codec.FORMAT_VERSION, entries)
    while version < codec.FORMAT_VERSION:
        STEPS[version](kv)
        version += 1
    kv.put(kv.db(b"meta"), codec.META_FORMAT, codec.encode_count(version))
    from storage.changelog import bump_generation
    bump_generation(lt, kv.db(b"meta"))     # not logged: a replica takes a full copy again (issue 41)
