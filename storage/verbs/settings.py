"""The store's settings: what Redis keeps in its configuration and xs
keeps in the store, so that every process on it agrees
(``CONFIG GET`` / ``CONFIG SET`` of the CLI and of ``xs serve``).

  stream-node-max-bytes    listpack node size in bytes (Redis: 4096;
                           0: no limit but Redis's 1 GiB cap)
  stream-node-max-entries  entries per node, deleted ones counted
                           (Redis: 100; 0: no limit)
  stream-idmp-duration     IDMP-DURATION of streams made from now on
                           (Redis 8.6: 100 seconds, 1 to 86400)
  stream-idmp-maxsize      IDMP-MAXSIZE of streams made from now on
                           (Redis 8.6: 100 IIDs a producer, 1 to 10000)

The node sizes decide where XADD opens a new node (storage.parts.nodes), hence what
approximate trimming (``~``) removes.  As in Redis, a change applies to
entries added from then on: nodes already made keep their bounds (the
entries of a store upgraded from format 2, whose nodes are not made yet,
get them first, under the old sizes).  A stream takes the IDMP settings
in force when it is made; XCFGSET changes one stream's.
"""
from storage import codec
from storage.parts import nodes

LONG_MAX = (1 << 63) - 1
IDMP_DEFAULTS = codec.IDMP_DEFAULTS
# name -> (default, is a memory size, (lowest, highest) or None: 0 to LLONG_MAX)
PARAMS = {
    "stream-node-max-bytes": (nodes.MAX_BYTES, True, None),
    "stream-node-max-entries": (nodes.MAX_ENTRIES, False, None),
    "stream-idmp-duration": (IDMP_DEFAULTS[0], False, (1, 86400)),
    "stream-idmp-maxsize": (IDMP_DEFAULTS[1], False, (1, 10000)),
}


def get(p):
    """{name: value} of every setting."""
    max_bytes, max_entries = p.log.node_limits()
    duration, maxsize = p.streams.idmp_defaults()
    return {"stream-node-max-bytes": max_bytes, "stream-node-max-entries": max_entries,
            "stream-idmp-duration": duration, "stream-idmp-maxsize": maxsize}


def set_(p, values):
    """Set settings ({name: value}, checked by the caller); nodes deferred
    by a format upgrade are made first, under the sizes in force until now."""
    now = get(p)
    new = dict(now, **values)
    if new == now:
        return
    idmp = (new["stream-idmp-duration"], new["stream-idmp-maxsize"])
    if idmp != (now["stream-idmp-duration"], now["stream-idmp-maxsize"]):
        p.kv.put(p.kv.db(b"meta"), codec.META_IDMP_DEFAULTS, codec.encode_pair(*idmp))
        p.streams.forget_idmp_defaults()
    if (new["stream-node-max-bytes"], new["stream-node-max-entries"]) == \
            (now["stream-node-max-bytes"], now["stream-node-max-entries"]):
        return
    for name, m in list(p.streams.records()):
        if m.nodes_from is not None:
            m = p.streams.get(name)
            p.log.sync_nodes(m)
    p.kv.put(p.kv.db(b"meta"), codec.META_NODE_LIMITS,
             codec.encode_node_limits(new["stream-node-max-bytes"], new["stream-node-max-entries"]))
    p.log.forget_node_limits()


def identity(p, create=False):
    """The store's identity: 32 hex digits, made at random (in the
    transaction, with ``create``) the first time something needs to tell
    this store from another one, such as an archive directory's manifest
    (storage.spark.archive).  A copy of the store's files (a backup) keeps it;
    a store restored from a snapshot into a new directory gets its own.
    None if it was never made and ``create`` is false."""
    meta = p.kv.db(b"meta")
    raw = p.kv.get(meta, codec.META_STORE_ID)
    if raw is None and create:
        import uuid
        raw = uuid.uuid4().hex.encode("ascii")
        p.kv.put(meta, codec.META_STORE_ID, raw)
    return raw.decode("ascii") if raw is not None else None
