"""The verbs: what ``storage.txn.Txn`` delegates to, one module per
family (``streams``: XADD, XRANGE, XTRIM ...; ``groups``: XGROUP, XACK,
XPENDING ...; ``delivery``: XREADGROUP, XCLAIM, XAUTOCLAIM;
``keyspace``: DEL, SCAN, RENAME ...; ``settings``: CONFIG and the
store's identity; ``dump`` / ``load``: a stream's records out and back
in; ``serialized``: DUMP / RESTORE in Redis's serialization) and their
helpers (``trim``: Redis's streamTrim; ``budget``: MAXSIZE; ``lag``: a
group's entries-read and lag).

Each verb is a function of a ``storage.parts.Parts`` bound to one
transaction: it reads and changes the store through the parts only.
Verbs import the codec, the vocabulary (errors, ids, options, info,
glob) and the parts, never ``storage.store``, ``storage.txn``,
``storage.files``, ``storage.blocking``, ``storage.ops`` or
``storage.spark`` (tests/unit/test_architecture.py).  Who imports them:
``storage.txn`` (lazily: a one-shot ``xs XLEN`` loads the stream verbs
only).
"""
