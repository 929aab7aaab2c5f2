"""CONFIG GET / SET of the store's node sizes (stream-node-max-entries,
stream-node-max-bytes), compared reply by reply with redis-server: the
sizes decide where XADD opens a node, so what XTRIM ~ removes and XINFO's
radix-tree-keys; Redis's own trimming tests run with 2 and 10.  The
settings live in the store: every later process sees them."""
import json
import random

import pytest

from conftest import run_xs, xs_json


def replies(db, lines):
    """xs's JSON replies to ``lines``, errors included."""
    p = run_xs(db, list(lines))
    assert b"Traceback" not in p.stderr, p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.strip()]


def both(redis, db, lines):
    """(xs replies, redis replies) of ``lines`` (str commands)."""
    redis.flushall()
    redis.call("CONFIG", "SET", "stream-node-max-entries", "100")
    redis.call("CONFIG", "SET", "stream-node-max-bytes", "4096")
    from xstream_cli.splitargs import split_line
    theirs = [redis.call(*[a.decode() for a in split_line(l.encode())]) for l in lines]
    ours = replies(db, lines)
    assert len(ours) == len(lines)
    return ours, theirs


def test_config_replies_and_errors_match_redis(redis, tmp_path):
    lines = [
        "CONFIG GET stream-node-max-entries",
        "CONFIG GET stream-node-MAX-entries",
        "CONFIG SET stream-node-max-entries 10",
        "CONFIG GET stream-node-max-entries",
        "CONFIG SET stream-node-max-entries -1",
        "CONFIG SET stream-node-max-entries abc",
        "CONFIG SET stream-node-max-bytes abc",
        "CONFIG SET stream-node-max-bytes -5",
        "CONFIG SET stream-node-max-bytes 4kb",
        "CONFIG GET stream-node-max-bytes",
        "CONFIG SET stream-node-max-bytes 1k stream-node-max-bytes 5",
        "CONFIG SET stream-node-max-bytes 99999999999999999999",
        "CONFIG SET no-such-setting 1",
        "CONFIG SET stream-node-max-entries 5 no-such-setting 1",
        "CONFIG SET stream-node-max-entries",
        "CONFIG SET stream-node-max-entries 5 x",
        "CONFIG GET",
        "CONFIG NOPE",
        "CONFIG SET STREAM-NODE-MAX-ENTRIES 7",
        "CONFIG GET stream-node-max-entries",
    ]
    ours, theirs = both(redis, tmp_path / "db", lines)
    for line, a, b in zip(lines, ours, theirs):
        assert a == b, line


@pytest.mark.parametrize("entries,max_bytes", [(2, 4096), (10, 4096), (100, 4096), (0, 200), (7, 0)])
def test_approximate_trimming_follows_the_configured_node_size(redis, tmp_path, entries, max_bytes):
    rng = random.Random(entries * 1000 + max_bytes)
    lines = ["CONFIG SET stream-node-max-entries %d stream-node-max-bytes %d" % (entries, max_bytes)]
    for i in range(1, 301):
        lines.append("XADD s %d-1 f %s" % (i, "v" * rng.randrange(1, 40)))
        if i % 37 == 0:
            lines.append("XDEL s %d-1" % rng.randrange(1, i))
    lines += ["XTRIM s MAXLEN 266", "XTRIM s MAXLEN = 255", "XTRIM s MAXLEN ~ 144", "XLEN s",
              "XTRIM s MINID ~ 200", "XLEN s", "XTRIM s MAXLEN ~ 100 LIMIT 30", "XLEN s",
              "XINFO STREAM s"]
    ours, theirs = both(redis, tmp_path / "db", lines)
    for line, a, b in zip(lines, ours, theirs):
        if line.startswith("XINFO"):
            keep = ("length", "radix-tree-keys", "first-entry", "last-entry", "max-deleted-entry-id")
            a, b = {k: a[k] for k in keep}, {k: b[k] for k in keep}
        assert a == b, line


@pytest.mark.parametrize("node,n,command", [
    (1, 102, "XTRIM s MAXLEN ~ 1"),           # LIMIT 100: Redis's "XTRIM with ~ is limited"
    (1, 102, "XTRIM s MINID ~ 102-1"),
    (1, 102, "XADD s MAXLEN ~ 1 200-1 f v"),
    (3, 400, "XTRIM s MAXLEN ~ 0"),           # LIMIT 300
    (0, 10100, "XTRIM s MAXLEN ~ 0"),         # no node limit: LIMIT 10,000
    (200, 20100, "XTRIM s MAXLEN ~ 0"),       # LIMIT 20,000
])
def test_the_default_limit_of_approximate_trimming_is_100_nodes(redis, tmp_path, node, n, command):
    """``~`` without LIMIT removes at most 100 x stream-node-max-entries
    entries (10,000 when that is 0), in XTRIM and XADD alike; xs always
    used 10,000 (issue 26, item 1)."""
    lines = ["CONFIG SET stream-node-max-entries %d" % node]
    lines += ["XADD s %d-1 f v" % i for i in range(1, n + 1)]
    lines += [command, "XLEN s"]
    ours, theirs = both(redis, tmp_path / "db", lines)
    assert ours[-2:] == theirs[-2:], (ours[-2:], theirs[-2:])


def test_the_node_size_is_the_stores_and_applies_to_entries_added_after(redis, tmp_path):
    """Set in one process, used by the next; entries added before the
    change (here by a bulk ingest) keep their nodes."""
    db = tmp_path / "db"
    bulk = ["XADD s * f %d" % i for i in range(250)]       # the bulk path
    p = run_xs(db, bulk, mode="raw")
    assert p.returncode == 0, p.stderr
    assert xs_json(db, "CONFIG SET stream-node-max-entries 10") == ["OK"]
    assert xs_json(db, "CONFIG GET stream-node-max-entries") == [{"stream-node-max-entries": "10"}]
    more = ["XADD s * g %d" % i for i in range(25)]
    xs_json(db, *more)
    redis.flushall()
    redis.call("CONFIG", "SET", "stream-node-max-entries", "100")
    redis.call("CONFIG", "SET", "stream-node-max-bytes", "4096")
    for line in bulk:
        redis.call(*line.split())
    redis.call("CONFIG", "SET", "stream-node-max-entries", "10")
    for line in more:
        redis.call(*line.split())
    try:
        theirs = redis.call("XINFO", "STREAM", "s")["radix-tree-keys"]
        ours = xs_json(db, "XINFO STREAM s")[0]["radix-tree-keys"]
        assert ours == theirs == 6        # 100, 100, 50 under the old size; then 10, 10, 5
        assert xs_json(db, "XTRIM s MAXLEN ~ 20", "XLEN s") == \
            [redis.call("XTRIM", "s", "MAXLEN", "~", "20"), redis.call("XLEN", "s")]
    finally:
        redis.call("CONFIG", "SET", "stream-node-max-entries", "100")
