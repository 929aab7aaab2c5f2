"""An XRANGE page as xs serve sends it: the stored entries of one field
set are encoded a run at a time (IDs formatted in one pass, their bulk
headers looked up by length: resp._entries_body, codec Entries.columns).
It must be, byte for byte, the RESP of the same entries decoded one by
one -- across field sets, records, values of 4 KB and more, empty
values, IDs of one millisecond and of many, and wide sequence numbers."""
import random

import pytest

from storage.ids import MAX_ID, MIN_ID
from storage.options import RangeOptions
from xstream_cli.server.resp import encode


@pytest.fixture
def store(tmp_path):
    from storage.store import Store
    s = Store(str(tmp_path / "s"), durable=False)
    yield s
    s.close()


def _page(store, key):
    opts = RangeOptions(start=MIN_ID, end=MAX_ID, count=None)
    return store.run(lambda tx: tx.range(key, opts), write=False)


def _value(rng):
    return rng.choice([b"", b"v", b"%d" % rng.randrange(10 ** 9), b"x" * rng.choice([63, 4095, 4096, 9000]),
                       b"a\x01b", b"two\nlines", b"%s %d"])


@pytest.mark.parametrize("seed", range(6))
def test_a_range_page_is_the_resp_of_its_entries_one_by_one(store, seed):
    rng = random.Random(seed)
    items = []
    for _ in range(rng.choice([1, 50, 700])):
        names = rng.choice([[b"user", b"action"], [b"f"], [b"user", b"action"], [b"%d", b"$x"]])
        items.append((b"s", [w for nm in names for w in (nm, _value(rng))]))
    store.run(lambda tx: tx.add_auto_many(items, each=True), write=True, savepoints=True)
    if seed % 2:                             # IDs of many milliseconds, and a wide sequence number
        from storage.options import AddOptions
        for k, i in enumerate([(10 ** 13, 0), (10 ** 13 + 5, 1), (10 ** 13 + 5, 2 ** 40)]):
            store.run(lambda tx: tx.add(b"s", [b"user", b"u%d" % k, b"action", b"a"], AddOptions(id=i)),
                      write=True)
    page = _page(store, b"s")
    one_by_one = [[b"%d-%d" % e.id, list(e.fields)] for e in page.decoded()]
    assert encode(page) == encode(one_by_one)
    assert encode(page, 3) == encode(one_by_one, 3)
