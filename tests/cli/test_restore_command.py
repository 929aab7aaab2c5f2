"""RESTORE as typed: its arguments and its payload are checked in
Redis's order (restoreCommand's), each refusal with Redis's text, and a
refused RESTORE changes nothing.  This test left
tests/engine/test_rdb_codec.py, whose tier calls the engine only."""
import pytest

from storage.codec import rdb as R
from storage.errors import RedisError
from tests.engine.test_rdb_codec import LZF_A, build, everything
from tests.harness.commands import run_line as run


def fails(store, line, *binary):
    with pytest.raises(RedisError) as e:
        run(store, line, *binary)
    return e.value.text


def test_restore_checks_in_redis_order_and_changes_nothing_when_refused(store):
    build(store, b"s")
    good = run(store, "DUMP s")
    before = everything(store)
    assert fails(store, "RESTORE s x {}", good) == "BUSYKEY Target key name already exists."
    assert fails(store, "RESTORE t x {}", good) == "ERR value is not an integer or out of range"
    assert fails(store, "RESTORE t -1 {}", good) == "ERR Invalid TTL value, must be >= 0"
    assert fails(store, "RESTORE t 0 {}", good[:-1]) == "ERR DUMP payload version or checksum are wrong"
    assert fails(store, "RESTORE t 0 {}", b"") == "ERR DUMP payload version or checksum are wrong"
    newer = R.rdb_dump_payload(good[:-10], version=13)
    assert fails(store, "RESTORE t 0 {}", newer) == "ERR DUMP payload version or checksum are wrong"
    assert fails(store, "RESTORE t 0 {}", R.rdb_dump_payload(b"\x13\x05")) == "ERR Bad data format"
    assert fails(store, "RESTORE t 0 {}", R.rdb_dump_payload(b"\x08")) == "ERR Bad data format"
    assert fails(store, "RESTORE t 0 {}", R.rdb_dump_payload(b"\x07\x01")) == "ERR Bad data format"  # a module
    assert fails(store, "RESTORE t 0 {}", LZF_A).startswith("ERR Bad data format: the payload holds a string")
    assert fails(store, "RESTORE t 0 {} IDLETIME -1", good) == "ERR Invalid IDLETIME value, must be >= 0"
    assert fails(store, "RESTORE t 0 {} FREQ 256", good) == "ERR Invalid FREQ value, must be >= 0 and <= 255"
    assert fails(store, "RESTORE t 0 {} FREQ -1", good) == "ERR Invalid FREQ value, must be >= 0 and <= 255"
    assert fails(store, "RESTORE t 0 {} IDLETIME 1 FREQ 1", good) == "ERR syntax error"
    assert fails(store, "RESTORE t 0 {} FREQ 1 IDLETIME 1", good) == "ERR syntax error"
    assert fails(store, "RESTORE t 0 {} IDLETIME", good) == "ERR syntax error"
    assert fails(store, "RESTORE t 0 {} IDLETIME x", good) == "ERR value is not an integer or out of range"
    assert fails(store, "RESTORE s x {} IDLETIME -1", good) == "ERR Invalid IDLETIME value, must be >= 0"
    assert everything(store) == before
