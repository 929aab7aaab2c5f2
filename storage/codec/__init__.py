"""Every key and value layout of the store (and of the snapshot file),
and nothing else.  No other module packs or unpacks a layout: they call
the paired helpers here (``entry_key(sid, id)`` / ``id_from_entry_key``).

The environment holds these named databases (the main database is never
used for data):

  keys      name key -> stream record        one per stream (the keyspace)
  log       sid + ms + seq -> entry          stream entries, in ID order
                                             (format 4: see "entries" below)
  shapes    sid + T -> field names           field sets a stream interns
  groups    sid + name key -> group record   consumer groups of a stream
  consumers gid + name key -> consumer rec.  consumers of a group
  cnames    gid + cid -> consumer name       owner lookups (PEL -> name)
  pel       gid + ms + seq -> pending rec.   the group PEL, by entry ID
  cpel      gid + cid + ms + seq -> ""       per-consumer PEL index
  ptime     gid + time + ms + seq -> ""      PEL by last delivery time
  idmp      sid + pid key + ...              idempotent-producer history
  nodes     sid + ms + seq -> node record    the stream's listpack nodes as
                                             Redis would have them, by master
                                             ID (storage.parts.nodes)
  meta      name -> value                    format version, counters,
                                             per-stream change counters,
                                             the expiry index (``e`` + time
                                             + name key -> name)

``sid``, ``gid`` and ``cid`` are 64-bit numbers handed out once from
counters in ``meta``: a stream's entries and groups hang off its number,
not its name, so RENAME moves one record, and a stream deleted and
created again never sees old data.  Integers in keys are big-endian so
that byte order is numeric order: entries iterate in ID order and the
time index in delivery-time order.

Names (streams, groups, consumers, producers) can be of any length.
LMDB keys cannot (511 bytes), so a "name key" is ``0x00 + name`` for
names up to ``SHORT_NAME`` bytes and ``0x01 + sha256(name)`` beyond; the
full name is then kept in the record.

Format versions (``meta["format"]``; storage.migrate upgrades a store):
  1  records are positional msgpack arrays; the consumer-by-id index
     lives in ``consumers`` under ``gid + 0x02 + cid``.
  2  records are msgpack maps that decode with a default for any field
     they lack (a field can be added without a migration); the
     consumer-by-id index has its own database, ``cnames``.
  3  the ``nodes`` database: where Redis's listpack nodes would begin and
     what they hold (approximate trimming removes whole nodes).
  4  entries move from ``entries`` (24-byte keys, every entry a record)
     to ``log`` (20-byte keys; an entry whose field names the stream
     interns in ``shapes`` keeps only its values): about 60 bytes for an
     event of four short fields instead of 108.

The layouts live in five modules, all re-exported here (``codec.X``):
``keys`` (versions, databases, integers, IDs, name keys, meta),
``entries`` (entries, shapes, nodes), ``state`` (stream, group and
consumer records, the PEL, idempotency) and ``snapshot`` (the snapshot
file's frames).  ``rdb`` holds Redis's own serialization (DUMP / RESTORE
payloads, RDB files).  Each is imported on the first use of one of its
names (``__getattr__`` below; the name is then an attribute of this
module like any other): a one-shot ``xs XLEN`` never loads ``entries``,
nor anything but ``keys`` and ``state``.

Who imports it: every layer of storage that reads or writes the store
(parts, verbs, migrate, ops, spark) and the renderers (``Entries``).
It imports nothing of xs but itself.
"""
if False:  # typing only (not imported at run time): the names __getattr__ gives
    from storage.codec.entries import *  # noqa: F403
    from storage.codec.keys import *  # noqa: F403
    from storage.codec.state import *  # noqa: F403

import sys

_SUBMODULES = ("keys", "entries", "state", "changes", "snapshot", "rdb")


def _exporter(name):
    """The module of ``state``, ``keys`` and ``entries`` that exports
    ``name`` (as ``from <module> import *`` would): state's names first,
    then keys', then entries' (the order in which the three star imports
    this module used to make overrode one another); or None.  Imports
    them in that order until one has it."""
    for sub in ("state", "keys", "entries"):
        m = _submodule(sub)
        if name in m.__dict__:
            return m
    return None


def __getattr__(name):
    """A name of the layouts, importing the module that holds it on first
    use: the snapshot file's (``snap_``, ``SNAP_``), Redis's serialization
    (``rdb_``, ``RDB_``, ``Rdb``), else state's, keys' and entries'."""
    if name.startswith(("snap_", "SNAP_")):
        return getattr(_submodule("snapshot"), name)
    if name.startswith(("rdb_", "RDB_", "Rdb")):        # DUMP / RESTORE, RDB files (issue 26)
        return getattr(_submodule("rdb"), name)
    if name in _SUBMODULES:
        return _submodule(name)
    if not name.startswith("_"):
        m = _exporter(name)
        if m is not None:
            value = globals()[name] = m.__dict__[name]
            return value
    raise AttributeError("module 'storage.codec' has no attribute %r" % name)


def _submodule(name):
    """The submodule ``name``, imported.  By its full name, as ``from
    storage.codec import keys`` would ask this module's __getattr__ for
    ``keys`` first."""
    if name == "keys":
        import storage.codec.keys
    elif name == "entries":
        import storage.codec.entries
    elif name == "state":
        import storage.codec.state
    elif name == "changes":
        import storage.codec.changes
    elif name == "snapshot":
        import storage.codec.snapshot
    else:
        import storage.codec.rdb  # noqa: F401
    return sys.modules["storage.codec." + name]
