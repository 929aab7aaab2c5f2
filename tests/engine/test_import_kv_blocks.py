"""``xs import --format kv`` takes a block of simple lines (words
separated by single spaces, each holding one "=") in C-level passes
(storage.ops.line_formats._kv_block); these tests hold it to the lines taken
one by one."""
import io
import random

import pytest

from storage.ops import exchange, line_import
from storage.options import RangeOptions
from storage.store import Store

WORDS = [b"a=b", b"a=", b"user=u1", b"n=12", b"x=-5", b"action=click", b"t=1700000000000"]
TWO = [b"a==b", b"a=b=c", b"k=v=", b"p=q==r"]            # more than one "=": taken line by line
ODD = [b"e", b"=x", b"", b"a=b  c=d", b"a=b\tc=d", b" a=b", b"a=b ", b"a=b =c", b"=", b"a b=c"]


def _lines(rng, odd):
    out = []
    for _ in range(rng.randrange(1, 3000)):
        if odd and rng.random() < 0.01:
            out.append(rng.choice(ODD))
        else:
            k = rng.choice([255, 256]) if odd and rng.random() < 0.002 else rng.choice([1, 2, 3, 3, 3, 5])
            out.append(b" ".join(rng.choice(TWO if odd and rng.random() < 0.001 else WORDS) for _ in range(k)))
    return out


def _import(tmp_path, name, data, monkeypatch, blocks):
    store = Store(str(tmp_path / name), durable=False)
    with monkeypatch.context() as m:
        if not blocks:
            m.setattr(line_import, "_kv_block", lambda block, joined: None)
        try:
            st = exchange.import_lines(store, io.BytesIO(data), fmt="kv", stream=b"s", split=bytes.split)
            got = (st.entries, st.lines)
        except exchange.ExchangeError as e:
            got = str(e)
    with store.read() as tx:
        fields = [f for _, f in tx.range(b"s", RangeOptions())] if tx.key_type(b"s") == "stream" else []
    store.close()
    return got, fields


@pytest.mark.parametrize("seed", range(6))
def test_kv_blocks_import_as_their_lines_one_by_one(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    lines = _lines(rng, odd=seed % 2 == 0)                 # odd seeds: all of it through blocks
    data = b"".join(l + b"\n" for l in lines)
    taken = []
    block = line_import._kv_block
    monkeypatch.setattr(line_import, "_kv_block", lambda *a: taken.append(block(*a)) or taken[-1])
    fast = _import(tmp_path, "fast", data, monkeypatch, True)
    slow = _import(tmp_path, "slow", data, monkeypatch, False)
    assert fast == slow
    if seed % 2:
        assert any(t is not None for t in taken)          # blocks were taken whole


def test_a_block_with_a_word_of_two_equals_and_one_of_none_is_taken_line_by_line():
    # "==" in one word and none in another: one "=" per word on average
    assert line_import._kv_block([b"a==b c=d e"], b"a==b c=d e") is None
    assert line_import._kv_block([b"a=b c=d"], b"a=b c=d") == [b"a\nb\nc\nd"]
