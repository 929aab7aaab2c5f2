"""Whole-store operations, on the engine's public surface: snapshots
(``snapshot``: xs save / restore), Redis's RDB files (``rdbfile``: xs save
--format rdb, xs restore of an RDB file), JSON lines (``exchange``: xs export /
import, with ``json_records``, ``line_formats`` and ``line_import``),
compaction (``compact``: xs compact), the store at a glance (``overview``:
xs info / ls / trim previews), the worker's engine side (``worker``: xs
worker) and replication (``replicate``, ``replica_dir``,
``replica_restore``: xs replicate, xs restore --from).  No click, no rich.

They open stores with ``storage.store.Store`` and work through ``Txn``;
the few places that reach below it are listed, each with its reason, in
tests/unit/test_architecture.py (compaction replaces data.mdb under the
store lock; the load path's record types).  Who imports them: the
porcelain (xstream_cli/porcelain/) and library users; nothing in the
engine core imports ``storage.ops``.
"""
