"""The xs engine: Redis Streams semantics over one LMDB environment.

    from storage import Store
    store = Store("/path/to/store")
    with store.write() as tx:
        tx.add(b"events", [b"user", b"alice"], AddOptions())

No click, no rich: usable as a library.  See storage/txn.py for the verbs.
"""


def __getattr__(name):
    if name == "Store":
        from storage.store import Store
        return Store
    raise AttributeError(name)
