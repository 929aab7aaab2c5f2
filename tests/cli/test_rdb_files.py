"""RDB files on the command line (issue 26, item 8): ``xs restore
dump.rdb`` loads the streams of a file redis-server wrote with SAVE and
counts what it skips; ``xs save --format rdb FILE`` writes one that
redis-server loads at start-up; damaged files are refused with one line
on stderr and exit status 1, the store unchanged.  The tests that talk
to redis-server are skipped without one.  Also the shell line that
DUMPs and RESTOREs through a pipe, as the documentation shows it."""
import json
import os
import shutil
import socket
import subprocess
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT, XS, Resp3, new_store
from tests.compat.test_dump_restore_vs_redis import SCENARIOS, matches

SERVER = shutil.which("redis-server")
needs_redis = pytest.mark.skipif(not SERVER, reason="redis-server is not installed")


class Server:
    """A private redis-server whose data file is ``dir``/dump.rdb (loaded
    at start-up if it is there)."""

    def __init__(self, d):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.dir = str(d)
        self.proc = subprocess.Popen([SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--dir", self.dir, "--dbfilename", "dump.rdb"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.c = None
        for _ in range(200):
            try:
                self.c = Resp3(self.port)
                break
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        if self.c is None:
            self.stop()
            raise AssertionError("redis-server did not start (or refused %s/dump.rdb)" % self.dir)

    def call(self, *args):
        return self.c.call(*args)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def xs(db, *args, stdin=None):
    return subprocess.run(XS + ["--db", str(db)] + [str(a) for a in args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=60, env=dict(os.environ, XS_NO_SYNC="1"))


def xs_json(db, *args):
    p = xs(db, "--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def infos(db, keys):
    """XINFO STREAM key FULL of each key, from one xs process (script mode)."""
    script = "".join("XINFO STREAM %s FULL\n" % k for k in keys).encode()
    p = xs(db, "--json", stdin=script)
    assert p.returncode == 0, p.stderr
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


def fill(server):
    """Every type, in its small and large encodings, LZF-compressed and
    integer-encoded strings, keys with TTLs, another database, streams."""
    c = server.call
    c("CONFIG", "SET", "rdbcompression", "yes")
    c("SET", "short", "hello")
    c("SET", "long", "x" * 5000)                     # LZF
    c("SET", "text", " ".join("word%d" % (i % 7) for i in range(300)))
    c("SET", "int", "12345")
    c("SET", "neg", "-7")
    c("RPUSH", "list", "a", "b", "c")
    c("RPUSH", "biglist", *["item-%d" % i for i in range(3000)])
    c("HSET", "hash", "f", "v", "n", "1")
    c("HSET", "bighash", *[x for i in range(300) for x in ("field%d" % i, "v" * 80)])
    c("SADD", "intset", "1", "2", "3")
    c("SADD", "smallset", "a", "b")
    c("SADD", "bigset", *["m%d" % i for i in range(1000)])
    c("ZADD", "zset", "1.5", "a", "2", "b")
    c("ZADD", "bigzset", *[x for i in range(300) for x in (str(i / 3), "member%d" % i)])
    c("SET", "ttl-string", "v", "PX", "100000000")
    for name in SCENARIOS:
        for line in SCENARIOS[name]:
            c(*line.format(k="s-" + name).split(" "))
    c("PEXPIRE", "s-groups", "100000000")
    c("XADD", "s-soon-gone", "1-1", "a", "b")
    c("PEXPIRE", "s-soon-gone", "600")
    c("SET", "str-soon-gone", "v", "PX", "600")
    c("SELECT", "1")
    c("XADD", "elsewhere", "1-1", "a", "b")
    c("SELECT", "0")
    c("FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function() return 1 end)")
    c("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")          # FREQ opcodes before the keys


STREAMS = sorted("s-" + n for n in SCENARIOS)


@pytest.fixture(scope="module")
def redis_rdb(tmp_path_factory):
    """(server, path): a redis-server filled by ``fill`` and its SAVEd file."""
    d = tmp_path_factory.mktemp("redis")
    server = Server(d)
    fill(server)
    assert server.call("SAVE") == "OK"
    # the keys with 600 ms to live were saved (they are there after the SAVE) and are gone by the restore
    assert server.call("EXISTS", "s-soon-gone", "str-soon-gone") == 2, "a slow machine: the keys expired already"
    time.sleep(0.7)
    yield server, os.path.join(str(d), "dump.rdb")
    server.stop()


@needs_redis
def test_restore_loads_the_streams_of_a_redis_rdb_file(redis_rdb, tmp_path):
    server, path = redis_rdb
    db = tmp_path / "store"
    p = xs(db, "restore", path)
    assert p.returncode == 0, p.stderr
    line = p.stderr.decode()
    assert line.startswith("xs: restored %d streams, " % len(STREAMS)) and line.count("\n") == 1, line
    assert ("skipped 2 hashes, 2 lists, 3 sets, 6 strings, 2 zsets, 1 key of other databases, 2 expired keys, "
            "1 function library" in line), line
    assert sorted(xs_json(db, "KEYS", "*")) == STREAMS
    for key, got in zip(STREAMS, infos(db, STREAMS)):
        matches(server.call("XINFO", "STREAM", key, "FULL"), got)
    assert 99000000 < xs_json(db, "PTTL", "s-groups") <= 100000000
    assert xs_json(db, "PTTL", "s-big") == -1
    # --check reads it whole and changes nothing; a second restore finds the streams there
    p = xs(db, "restore", "--check", path)
    assert p.returncode == 0 and p.stderr.startswith(b"xs: verified %d streams" % len(STREAMS)), p.stderr
    p = xs(db, "restore", path)
    assert p.returncode == 1 and b"already exists" in p.stderr and p.stderr.count(b"\n") == 1
    p = xs(db, "restore", "--replace", "-", stdin=open(path, "rb").read())
    assert p.returncode == 0, p.stderr


@needs_redis
def test_save_format_rdb_is_loaded_by_redis_server(redis_rdb, tmp_path):
    server, path = redis_rdb
    db = tmp_path / "store"
    assert xs(db, "restore", path).returncode == 0
    xs(db, "XADD", "s-idmp", "IDMP", "p", "i1", "*", "f", "x")
    out = tmp_path / "out"
    out.mkdir()
    p = xs(db, "save", "--format", "rdb", out / "dump.rdb")
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith(b"xs: saved %d streams" % (len(STREAMS) + 1))
    assert b"IDMP history not carried" in p.stderr and p.stderr.count(b"\n") == 1
    assert os.listdir(out) == ["dump.rdb"] and (os.stat(out / "dump.rdb").st_mode & 0o777) == 0o600
    loaded = Server(out)
    try:
        assert sorted(loaded.call("KEYS", "*")) == sorted(STREAMS + ["s-idmp"])
        for key, got in zip(STREAMS, infos(db, STREAMS)):
            matches(loaded.call("XINFO", "STREAM", key, "FULL"), got)
        assert 99000000 < loaded.call("PTTL", "s-groups") <= 100000000
        # and what that server saves, xs restores the same
        assert loaded.call("SAVE") == "OK"
        again = tmp_path / "again"
        assert xs(again, "restore", out / "dump.rdb").returncode == 0
        assert infos(again, STREAMS) == infos(db, STREAMS)
    finally:
        loaded.stop()


def test_the_default_format_is_still_the_snapshot(tmp_path):
    db = new_store(tmp_path / "store")
    xs(db, "XADD", "s", "1-1", "a", "b")
    p = xs(db, "save", tmp_path / "x.snap")
    assert p.returncode == 0 and (tmp_path / "x.snap").read_bytes()[:1] == b"\x89"
    other = tmp_path / "other"
    assert xs(other, "restore", tmp_path / "x.snap").returncode == 0
    assert xs_json(other, "XLEN", "s") == 1


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An RDB file of xs save --format rdb: the "groups" scenario as stream s."""
    tmp = tmp_path_factory.mktemp("written")
    db = new_store(tmp / "src")
    script = "".join(line.format(k="s") + "\n" for line in SCENARIOS["groups"]).encode()
    assert xs(db, stdin=script).returncode == 0
    assert xs(db, "save", "--format", "rdb", tmp / "good.rdb").returncode == 0
    return (tmp / "good.rdb").read_bytes()


def test_wrong_versions_and_module_data_are_refused_clearly(tmp_path, written):
    good = written
    db = new_store(tmp_path / "store")
    cases = {b"REDIS0013" + good[9:]: b"RDB format version 13 is not supported",
             b"REDIS00x0" + good[9:]: b"bad version field",
             good[:9] + b"\xf7\x01\x02\x03": b"module",                # MODULE_AUX
             good[:9] + b"\x07\x01k\x05": b"module",                   # a value of a module type
             good[:-8] + b"\x01" * 8: b"checksum mismatch"}
    for data, why in cases.items():
        path = tmp_path / "bad.rdb"
        path.write_bytes(data)
        p = xs(db, "restore", path)
        assert p.returncode == 1 and why in p.stderr and p.stderr.count(b"\n") == 1, (why, p.stderr)
        assert b"Traceback" not in p.stderr
    assert xs_json(db, "KEYS", "*") == []


def _store_state(db):
    """Every stream's records, read in this process (storage.verbs.dump)."""
    from storage.store import Store
    s = Store(str(db))
    try:
        return s.run(lambda tx: [(n, list(tx.dump(n))) for n in tx.stream_names()])
    finally:
        s.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damaged_rdb_files_fail_with_one_line_and_change_nothing(tmp_path_factory, written, data):
    from storage.store import Store
    tmp = tmp_path_factory.mktemp("bad")
    good = bytearray(written)
    s = Store(str(tmp / "store"), durable=False)
    s.run(lambda tx: tx.load([("entry", "test", b"keep", (1, 1), [b"a", b"b"])]), write=True)
    s.close()
    before = _store_state(tmp / "store")
    if data.draw(st.booleans()):
        bad = good[:data.draw(st.integers(0, len(good) - 1))]
    else:
        bad = bytearray(good)
        i = data.draw(st.integers(0, len(good) - 1))
        bad[i] ^= data.draw(st.integers(1, 255))
    (tmp / "bad.rdb").write_bytes(bytes(bad))
    p = xs(tmp / "store", "restore", tmp / "bad.rdb")
    assert b"Traceback" not in p.stderr
    if p.returncode == 0:                           # a flip the format cannot see (an aux value)
        assert len(_store_state(tmp / "store")) == 2
        return
    assert p.returncode == 1 and p.stderr.count(b"\n") == 1, p.stderr
    assert _store_state(tmp / "store") == before


def test_the_documented_pipe_from_dump_to_restore(tmp_path):
    """CHANGELOG.md and xs help RESTORE: --raw adds a newline, which
    head -c -1 takes off; -x reads the payload from stdin."""
    from conftest import shell_path
    from tests.cli.test_readme_examples import in_docs
    from xstream_cli import help as xhelp
    line = in_docs("xs --raw DUMP s | head -c -1 | xs -x RESTORE t 0", "CHANGELOG.md")
    shown = "xs --raw DUMP events | head -c -1 | xs -x RESTORE events-copy 0"
    assert shown in " ".join(xhelp.command_help("RESTORE").split())
    db = new_store(tmp_path / "store")
    env = dict(os.environ, PATH=shell_path(tmp_path), XS_DB=str(db), XS_NO_SYNC="1")
    for cmd in ("xs XADD s 1-1 a b", "xs XADD events 1-1 c d", line, shown, "xs XRANGE t - +", "xs XLEN events-copy"):
        p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, env=env, cwd=str(tmp_path),
                           timeout=60)
        assert p.returncode == 0, (cmd, p.stderr)
    assert p.stdout == b"1\n"
    assert xs(db, "--raw", "XRANGE", "t", "-", "+").stdout == b"1-1\na\nb\n"
