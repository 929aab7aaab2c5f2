"""DUMP and RESTORE against a real redis-server (issue 26, item 7): what
redis-server DUMPs, xs RESTOREs, and what xs DUMPs, redis-server
RESTOREs -- through ``xs serve`` and through the one-shot command line
-- and XINFO STREAM FULL then reads the same on both sides: every key
redis-server shows, times included (DUMP carries them), radix-tree-keys
included; xs may show more (active-time, nacked-count, idmp-*).

Scenarios, run on either side with the same explicit IDs: groups with
pending entries delivered more than once, deleted entries (the first
one and one in the middle), consumers with and without pending entries,
an empty stream with groups, a stream emptied by XDEL, a big stream
over several listpack nodes with fields that differ from the master
entry's and integer-like values, exact MINID trimming inside a node."""
import os
import subprocess

import pytest

from conftest import ROOT, XS, Resp3, new_store
from storage.codec import rdb as R

SCENARIOS = {
    "groups": [
        *["XADD {k} 1-%d f %d name n%d" % (i, i, i) for i in range(1, 8)],
        "XADD {k} 2-0 other x",
        "XDEL {k} 1-1 1-4",
        "XGROUP CREATE {k} g 0",
        "XGROUP CREATE {k} late $",
        "XREADGROUP GROUP g alice COUNT 2 STREAMS {k} >",
        "XREADGROUP GROUP g bob COUNT 1 STREAMS {k} >",
        "XCLAIM {k} g bob 0 1-2",
        "XCLAIM {k} g bob 0 1-2",
        "XGROUP CREATECONSUMER {k} g carol",
    ],
    "empty-with-groups": [
        "XGROUP CREATE {k} g $ MKSTREAM",
        "XGROUP CREATECONSUMER {k} g c",
        "XGROUP CREATE {k} h 0",
    ],
    "emptied": [
        "XADD {k} 5-1 a b",
        "XADD {k} 5-2 a c",
        "XGROUP CREATE {k} g 0",
        "XREADGROUP GROUP g c STREAMS {k} >",
        "XDEL {k} 5-1 5-2",
    ],
    "big": [
        *["XADD {k} %d-%d %s" % (1000 + i // 7, i, ("f %d g v%s n -%d" % (i, "x" * (i % 30), i * 99991))
                                 if i % 11 else "other 007 neg -0 big 123456789012345678901")
          for i in range(1, 330)],
        "XDEL {k} 1000-1 1010-70 1010-71 1030-215",
        "XGROUP CREATE {k} g 0",
        "XREADGROUP GROUP g a COUNT 150 STREAMS {k} >",
        "XREADGROUP GROUP g b COUNT 3 STREAMS {k} >",
        "XCLAIM {k} g b 0 1000-2 1000-3",
        "XACK {k} g 1000-4 1000-5",
    ],
    "trimmed": [
        *["XADD {k} 7-%d f %d" % (i, i) for i in range(1, 150)],
        "XTRIM {k} MINID 7-120",
        "XDEL {k} 7-149",
    ],
}


def commands(name, key):
    return [line.format(k=key) for line in SCENARIOS[name]]


def split(line):
    return line.split(" ")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from tests.harness.served import Served
    db = new_store(tmp_path_factory.mktemp("xs") / "store")
    s = Served(db)
    c = Resp3(s.port)
    c.db = db
    yield c
    c.sock.close()
    s.stop()


def raw(v):
    """A bulk reply (as conftest.Resp3 gives it) as bytes."""
    if isinstance(v, dict) and set(v) == {"b64"}:
        import base64
        return base64.b64decode(v["b64"])
    return v.encode("utf-8", "surrogateescape")


def dump(client, key):
    v = client.call("DUMP", key)
    assert v is not None and not (isinstance(v, dict) and "error" in v), v
    return raw(v)


def info(client, key):
    return client.call("XINFO", "STREAM", key, "FULL")


def matches(ref, got, path="$"):
    """Every key of redis-server's reply ``ref`` is in ``got`` with the same
    value (radix-tree-nodes aside: a radix tree's inner nodes are Redis's
    memory, not the stream); lists alike item by item."""
    if isinstance(ref, dict) and not set(ref) == {"b64"}:
        assert isinstance(got, dict), (path, got)
        for k, v in ref.items():
            if k == "radix-tree-nodes":
                continue
            assert k in got, (path, k)
            matches(v, got[k], path + "." + k)
    elif isinstance(ref, list):
        assert isinstance(got, list) and len(got) == len(ref), (path, ref, got)
        for i, (a, b) in enumerate(zip(ref, got)):
            matches(a, b, "%s[%d]" % (path, i))
    else:
        assert ref == got, (path, ref, got)


def events(payload, body=True):
    """A payload decoded (storage.codec.rdb): what it holds, whatever its
    string encodings (Redis compresses its listpacks with LZF).  Without
    ``body``, a node's size is left out: the entries deleted inside a node
    are gone from xs, which writes them as empty entries."""
    r = R.rdb_payload_reader(payload)
    out = list(R.rdb_stream_events(r, r.byte()))
    return out if body else [e[:5] + e[6:] if e[0] == "node" else e for e in out]


# ==================================================================== tests

@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_what_redis_dumps_xs_restores(redis, served, name):
    key = "r2x-" + name
    redis.call("DEL", key)
    for line in commands(name, key):
        redis.call(*split(line))
    payload = dump(redis, key)
    served.call("DEL", key)
    assert served.call("RESTORE", key, "0", payload) == "OK"
    matches(info(redis, key), info(served, key))
    # and back: what xs dumps of it is what redis-server dumped (LZF and deleted entries' bytes aside)
    assert events(dump(served, key), body=False) == events(payload, body=False)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_what_xs_dumps_redis_restores(redis, served, name):
    key = "x2r-" + name
    served.call("DEL", key)
    for line in commands(name, key):
        r = served.call(*split(line))
        assert not (isinstance(r, dict) and "error" in r), (line, r)
    payload = dump(served, key)
    assert payload[-10:-8] == b"\x0a\x00"                 # RDB version 10: what 7.0 takes
    redis.call("DEL", key)
    assert redis.call("RESTORE", key, "0", payload) == "OK"
    matches(info(redis, key), info(served, key))
    # redis-server's own DUMP of it restores in xs to the same stream again
    served.call("DEL", key + "-back")
    assert served.call("RESTORE", key + "-back", "0", dump(redis, key)) == "OK"
    matches(info(redis, key), info(served, key + "-back"))


def test_the_same_commands_dump_the_same_listpacks(redis, served):
    """Without deletions, xs's node model is Redis's: the payloads hold the
    same listpacks, byte for byte once LZF is undone."""
    key = "same"
    lines = ["XADD {k} %d-%d a %d b %s" % (9 + i // 13, i, i * 7, "y" * (i % 50)) for i in range(1, 260)]
    lines += ["XADD {k} 99-1 other 1", "XGROUP CREATE {k} g 9-5", "XGROUP CREATE {k} h $"]
    for c in (redis, served):
        c.call("DEL", key)
        for line in lines:
            c.call(*split(line.format(k=key)))
    assert events(dump(served, key)) == events(dump(redis, key))


def test_restore_errors_match_redis(redis, served):
    redis.call("DEL", "e1", "e2")
    served.call("DEL", "e1", "e2")
    for c in (redis, served):
        c.call("XADD", "e1", "1-1", "a", "b")
        c.call("SET" if c is redis else "XADD", *(["str", "hello"] if c is redis else ["tmp", "1-1", "a", "b"]))
    good = dump(redis, "e1")
    cases = [
        ["e1", "0", good], ["e2", "x", good], ["e1", "x", good], ["e2", "-5", good], ["e2", "0", good[:-1]],
        ["e2", "0", good, "IDLETIME", "-1"], ["e2", "0", good, "FREQ", "300"], ["e2", "0", good, "FREQ"],
        ["e2", "0", good, "IDLETIME", "1", "FREQ", "1"], ["e2", "0", good, "BOGUS"],
        ["e2", "0", R.rdb_dump_payload(good[:-10][:-3])],
    ]
    for args in cases:
        want = redis.call("RESTORE", *args)
        got = served.call("RESTORE", *args)
        assert want == got, (args, want, got)
    # a payload of a type xs does not hold: refused, nothing made
    got = served.call("RESTORE", "e3", "0", dump(redis, "str"))
    assert got["error"].startswith("ERR Bad data format") and "xs stores only streams" in got["error"]
    assert served.call("EXISTS", "e3") == 0
    assert redis.call("DUMP", "nosuch") is None and served.call("DUMP", "nosuch") is None


def xs_cli(db, *args, stdin=None):
    return subprocess.run(XS + ["--db", str(db)] + list(args), input=stdin, capture_output=True, cwd=ROOT,
                          timeout=60, env=dict(os.environ, XS_NO_SYNC="1"))


def test_the_command_line_dumps_and_restores_binary(redis, served, tmp_path):
    """xs --raw DUMP writes the payload and a newline (as redis-cli --raw);
    xs -x RESTORE takes it from stdin, any bytes."""
    key = "cli"
    redis.call("DEL", key)
    for line in commands("groups", key):
        redis.call(*split(line))
    payload = dump(redis, key)
    db = new_store(tmp_path / "cli-store")
    p = xs_cli(db, "-x", "RESTORE", key, "0", stdin=payload)
    assert p.returncode == 0 and p.stdout == b"OK\n", p.stderr
    p = xs_cli(db, "--raw", "DUMP", key)
    assert p.returncode == 0 and p.stdout.endswith(b"\n")
    out = p.stdout[:-1]
    assert events(out, body=False) == events(payload, body=False)
    redis.call("DEL", key + "-cli")
    assert redis.call("RESTORE", key + "-cli", "0", out) == "OK"
    matches(info(redis, key), info(redis, key + "-cli"))
    # a damaged payload on the command line: one line on stderr, exit 1, nothing made
    p = xs_cli(db, "-x", "RESTORE", "other", "0", stdin=payload[:-1])
    assert p.returncode == 1 and p.stderr.count(b"\n") == 1 and b"checksum" in p.stderr
    assert xs_cli(db, "EXISTS", "other").stdout == b"0\n"
    # the porcelain's name is not taken: xs restore FILE is still the snapshot restore
    p = xs_cli(db, "restore", str(tmp_path / "missing.snap"))
    assert p.returncode == 1 and b"missing.snap" in p.stderr
