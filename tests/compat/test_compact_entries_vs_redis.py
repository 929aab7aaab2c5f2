"""Format 4's compact entries, attacked through the product: streams that
mix shaped entries, records past the 8 field sets a stream interns,
binary (newline) entries, control bytes and '%' in names and values, and
sequence numbers at and above 0xffffffff, through script mode, xs serve,
save/restore, export/import, tail, renames, deletes and trims.  What a
user reads back must be what they added (and what redis-server answers).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
XS = [sys.executable, "-m", "xstream_cli"]


def xs(db, *args, input=None, env=None):
    """One xs run; CompletedProcess (bytes)."""
    return subprocess.run(XS + ["--db", str(db)] + list(args), input=input, capture_output=True,
                          timeout=60, cwd=ROOT, env=dict(os.environ, **(env or {})))


def script(db, lines, *opts):
    data = b"".join((l if isinstance(l, bytes) else l.encode()) + b"\n" for l in lines)
    return xs(db, *opts, input=data)


def q(b):
    """A redis-cli quoted argument for bytes ``b``."""
    return '"' + "".join("\\x%02x" % c if c < 0x20 or c >= 0x7f or c in b'"\\' else chr(c) for c in b) + '"'


def xadd(stream, i, *fields):
    return "XADD %s %s %s" % (stream, i, " ".join(q(f) for f in fields))


CTL = bytes(range(0x00, 0x20))


def mixed(stream="m"):
    """XADD lines of one stream that uses every stored form: 10 field sets
    (8 interned, the rest records), binary entries, every control byte
    and '%' in names and values, empty names and values, duplicate names,
    19 and 20 fields, and sequence numbers around 0xffffffff."""
    out = []
    sets = [[b"a", b"b"], [b"a"], [b"b", b"a"], [b"%b", b"%s"], [b"", b"x"], [b"d", b"d", b"d"],
            [b"n%d" % k for k in range(19)], [b"w%d" % k for k in range(20)], [b"e"], [b"f", b"g"]]
    seq = 0
    for rnd in range(3):
        for j, names in enumerate(sets):
            seq += 1
            vals = [b"v%d-%d-%d" % (rnd, j, k) for k in range(len(names))]
            if rnd == 1 and j % 3 == 0:
                vals[-1] = b"%" + vals[-1] + b"%b"
            if rnd == 2 and j % 2 == 0:
                vals[0] = b""
            out.append(xadd(stream, "5-%d" % seq, *[x for p in zip(names, vals) for x in p]))
    # the unsafe bytes, one entry each, as a value of an interned set and as a name
    for c in range(0x20):
        seq += 1
        out.append(xadd(stream, "5-%d" % seq, b"a", bytes([c]), b"b", b"p%cq" % c))
        seq += 1
        out.append(xadd(stream, "5-%d" % seq, bytes([c]), b"1"))
    seq += 1
    out.append(xadd(stream, "5-%d" % seq, b"a", b"line1\nline2", b"b", b"\n"))
    seq += 1
    out.append(xadd(stream, "5-%d" % seq, b"a", CTL, b"b", b"%%%"))
    wide = (0xfffffffe, 0xffffffff, 0x100000000, 0x1ffffffff, 2 ** 64 - 2)
    out += [xadd(stream, "5-%d" % s, b"a", b"wide%d" % s, b"b", b"2") for s in wide]
    out += [xadd(stream, "6-%d" % s, b"e", b"wide") for s in wide]
    out.append(xadd(stream, "7-0", b"a", b"after", b"b", b"\x00lead"))
    out.append(xadd(stream, "7-1", b"a", b"\x00", b"b", b""))
    return out


READS = [
    "XRANGE m - +",
    "XREVRANGE m + -",
    "XRANGE m - + COUNT 7",
    "XREVRANGE m + - COUNT 9",
    "XRANGE m (5-3 (5-40",
    "XREVRANGE m (6-4294967295 (5-4294967295",
    "XRANGE m 5-4294967295 6-4294967296",
    "XRANGE m (5-4294967294 + COUNT 3",
    "XREVRANGE m (7-0 - COUNT 4",
    "XRANGE m 6 6",
    "XLEN m",
]


# ------------------------------------------------------------------ tests


def test_mixed_stream_reads_are_byte_identical_to_redis_server(tmp_path, redis):
    """XRANGE/XREVRANGE (COUNT, exclusive bounds, wide sequence numbers)
    of a stream mixing every stored form: xs --raw and --no-raw print
    what redis-cli prints for the same script."""
    lines = mixed() + READS
    redis.flushall()
    cli = shutil.which("redis-cli")
    if not cli:
        pytest.skip("redis-cli is not installed")
    data = "".join(l + "\n" for l in lines).encode()
    want = subprocess.run([cli, "-p", str(redis.port), "--raw"], input=data, capture_output=True,
                          timeout=60).stdout
    got = script(tmp_path / "db", lines, "--raw")
    assert got.returncode == 0, got.stderr
    assert got.stdout == want
    # --no-raw (quoted, escaped, nested numbering), read again from disk
    want = subprocess.run([cli, "-p", str(redis.port), "--no-raw"], input="".join(
        l + "\n" for l in READS).encode(), capture_output=True, timeout=60).stdout
    assert script(tmp_path / "db", READS, "--no-raw").stdout == want


def _redis_cli(redis, lines):
    cli = shutil.which("redis-cli")
    if not cli:
        pytest.skip("redis-cli is not installed")
    redis.flushall()
    data = "".join(l + "\n" for l in lines).encode()
    return subprocess.run([cli, "-p", str(redis.port), "--raw"], input=data, capture_output=True,
                          timeout=60).stdout


def _other(stream, ms, names_count=8):
    """XADD lines filling ``stream``'s 8 field sets with other names."""
    return [xadd(stream, "%d-%d" % (ms, k), b"o%d" % k, b"x", b"a", b"%d" % k) for k in range(names_count)]


KEYSPACE = [
    # RENAME onto a stream with field sets of its own; then add both kinds
    "RENAME m n",
    xadd("n", "9-1", b"a", b"after-rename", b"b", b"1"),
    xadd("n", "9-2", b"o3", b"x", b"a", b"3"),
    "XRANGE n 7 +",
    "XREVRANGE n + - COUNT 5",
    # DEL and re-create in the same batch, the first entry with other names
    "DEL n",
    xadd("n", "1-1", b"b", b"new", b"a", b"first"),
    xadd("n", "1-2", b"a", b"1", b"b", b"2"),
    "XRANGE n - +",
    "DEL n",
    # trimming and deleting across stored forms, then reads
    "RENAME k m",
    "XTRIM m MAXLEN 60",
    "XDEL m 5-4294967295 5-40 6-4294967296",
    "XADD m MAXLEN 50 7-5 a trimmed b by-add",
    "XRANGE m - + COUNT 12",
    "XREVRANGE m + (6-0",
    "XSETID m 99-0",
    xadd("m", "99-1", b"%b", b"%s%s", b"", b"x"),
    "XREVRANGE m + - COUNT 3",
    "XREAD COUNT 4 STREAMS m 5-70",
    "XGROUP CREATE m g 0",
    "XREADGROUP GROUP g c1 COUNT 30 STREAMS m >",
    "XREADGROUP GROUP g c1 COUNT 6 STREAMS m 0",
    "XREADGROUP GROUP g c1 COUNT 6 STREAMS m 5-80",
    "XCLAIM m g c2 0 5-60 5-61 5-62 6-4294967295",
    "XAUTOCLAIM m g c3 0 5-70 COUNT 5",
    "XLEN m",
]


def test_keyspace_and_trim_verbs_on_mixed_streams_answer_as_redis_server(tmp_path, redis):
    """RENAME over a stream with its own field sets, DEL and re-create in
    one batch, XTRIM / XDEL / XADD MAXLEN / XSETID, XREAD, XREADGROUP
    (new and history), XCLAIM, XAUTOCLAIM on a mixed stream: the same
    redis-cli --raw bytes as redis-server."""
    lines = mixed("m") + _other("n", 3) + mixed("k") + KEYSPACE
    want = _redis_cli(redis, lines)
    got = script(tmp_path / "db", lines, "--raw")
    assert got.stdout == want
    # and in separate runs (each verb its own transaction, field sets read from disk)
    db2 = tmp_path / "db2"
    setup = mixed("m") + _other("n", 3) + mixed("k")
    out = script(db2, setup, "--raw").stdout
    for line in KEYSPACE:
        out += script(db2, [line], "--raw").stdout
    assert out == want


SERVED = [
    # a transaction whose first XADD makes a new field set, aborted at EXEC
    "MULTI",
    xadd("t", "1-1", b"s1", b"a", b"s2", b"b"),
    "NOSUCHCOMMAND",
    "EXEC",
    # one discarded
    "MULTI",
    xadd("t", "1-2", b"s3", b"a"),
    "DISCARD",
    # one that runs with an error after the new field set
    "MULTI",
    xadd("t", "1-3", b"s4", b"a", b"s5", b"b"),
    xadd("t", "1-1", b"s6", b"a"),
    xadd("t", "1-4", b"s4", b"c", b"s5", b"\n"),
    "EXEC",
    xadd("t", "1-5", b"s1", b"x", b"s2", b"y"),
    xadd("t", "1-6", b"s3", b"x"),
    xadd("t", "1-7", b"s4", b"d", b"s5", b"e"),
    "XRANGE t - +",
    "XREVRANGE t + - COUNT 2",
    # FLUSHDB, then the same names again and other ones
    "FLUSHDB",
    "XRANGE m - + COUNT 2",
] + _other("m", 9, 9) + [
    xadd("m", "9-9", b"a", b"1", b"b", b"2"),
    xadd("t", "1-1", b"s4", b"d", b"s5", b"e"),
    "XRANGE m - +",
    "XRANGE t - +",
]


def test_serve_transactions_and_flushdb_forget_field_sets_as_redis_would(tmp_path, redis):
    """Through xs serve (redis-cli as the client): a MULTI aborted at EXEC
    after an XADD with a new field set, a DISCARD, an EXEC with a failing
    XADD between two that use a new set, FLUSHDB of a mixed store; then
    adds and reads of those field sets answer as redis-server does."""
    from tests.harness.served import Served
    lines = mixed("m") + mixed("k") + SERVED
    want = _redis_cli(redis, lines)
    s = Served(tmp_path / "store")
    try:
        cli = shutil.which("redis-cli")
        data = "".join(l + "\n" for l in lines).encode()
        got = subprocess.run([cli, "-p", str(s.port), "--raw"], input=data, capture_output=True,
                             timeout=60).stdout
    finally:
        s.stop()
    assert got == want
    after = script(tmp_path / "store", ["XRANGE m - +", "XRANGE t - +", "XLEN k"], "--raw").stdout
    assert after == _redis_cli(redis, lines + ["XRANGE m - +", "XRANGE t - +", "XLEN k"])[len(want):]


def _parse_xadd(line):
    """(stream, id, fields) of an ``xadd`` line (its quoting is q's)."""
    parts = line.split(" ", 3)
    fields = []
    for tok in parts[3].split(" "):
        body, out, k = tok[1:-1], bytearray(), 0
        while k < len(body):
            if body[k] == "\\":
                out.append(int(body[k + 2:k + 4], 16))
                k += 4
            else:
                out.append(ord(body[k]))
                k += 1
        fields.append(bytes(out))
    return parts[1], parts[2], fields


def _json_bytes(x):
    if isinstance(x, dict):
        import base64
        return base64.b64decode(x["b64"])
    return x.encode("utf-8", "surrogateescape")


def test_tail_json_and_text_give_every_mixed_entry_as_added(tmp_path):
    """xs tail --json (and xs export, the same shape) gives each entry of
    a mixed stream exactly as it was added; piped xs tail prints one line
    per entry, plain fields bare."""
    lines = mixed("m")
    db = tmp_path / "db"
    assert script(db, lines).returncode == 0
    added = [_parse_xadd(l) for l in lines]
    p = xs(db, "tail", "--json", "-n", "1000", "m")
    assert p.returncode == 0, p.stderr
    got = [json.loads(l) for l in p.stdout.splitlines()]
    assert [(g["stream"], g["id"], [_json_bytes(f) for f in g["fields"]]) for g in got] == added
    assert xs(db, "export", "m").stdout == p.stdout
    p = xs(db, "tail", "-n", "1000", "m")
    assert p.returncode == 0, p.stderr
    out = p.stdout.split(b"\n")
    assert out.pop() == b"" and len(out) == len(added)
    for line, (s, i, f) in zip(out, added):
        assert line.startswith(("%s %s " % (s, i)).encode())
        if all(x and x.isalnum() for x in f):
            assert line == ("%s %s " % (s, i)).encode() + b" ".join(
                f[k] + b"=" + f[k + 1] for k in range(0, len(f), 2))


def test_save_restore_and_export_import_round_trip_mixed_streams_byte_for_byte(tmp_path):
    """A mixed stream saved and restored (over a stream of the same name
    with field sets of its own, --replace), and exported and imported,
    reads back byte for byte; new entries of either stream's old field
    sets are stored and read right after."""
    src, dst, dst2 = tmp_path / "src", tmp_path / "dst", tmp_path / "dst2"
    assert script(src, mixed("m") + _other("o", 1)).returncode == 0
    before = script(src, READS, "--raw").stdout
    assert script(dst, _other("m", 1, 8)).returncode == 0
    assert xs(src, "save", str(tmp_path / "x.snap")).returncode == 0
    p = xs(dst, "restore", "--replace", str(tmp_path / "x.snap"))
    assert p.returncode == 0, p.stderr
    assert script(dst, READS, "--raw").stdout == before
    assert xs(src, "export", "-o", str(tmp_path / "x.jsonl")).returncode == 0
    p = xs(dst2, "import", str(tmp_path / "x.jsonl"))
    assert p.returncode == 0, p.stderr
    assert script(dst2, READS, "--raw").stdout == before
    more = [xadd("m", "8-1", b"o3", b"x", b"a", b"3"), xadd("m", "8-2", b"a", b"1", b"b", b"2"),
            xadd("m", "8-3", b"f", b"1", b"g", b"2"), "XRANGE m 8 +"]
    want = b"8-1\n8-2\n8-3\n8-1\no3\nx\na\n3\n8-2\na\n1\nb\n2\n8-3\nf\n1\ng\n2\n"
    for db in (dst, dst2):
        assert script(db, more, "--raw").stdout == want


@pytest.fixture
def ro_mount(tmp_path):
    from tests.cli.test_read_only_store import IS_ROOT
    if not IS_ROOT or not shutil.which("mount"):
        pytest.skip("needs root to make a read-only bind mount")
    rw, ro = tmp_path / "rw", tmp_path / "ro"
    rw.mkdir()
    ro.mkdir()
    if subprocess.run(["mount", "--bind", str(rw), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("mount --bind is not allowed here")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], capture_output=True).returncode != 0:
            pytest.skip("a read-only remount is not allowed here")
        yield rw, ro
    finally:
        subprocess.run(["umount", str(ro)], capture_output=True)


def test_a_read_only_store_of_mixed_streams_reads_and_refuses_a_new_field_set(ro_mount, tmp_path):
    rw, ro = ro_mount
    assert script(rw / "s", mixed("m")).returncode == 0
    want = script(rw / "s", READS, "--raw").stdout
    data = open(rw / "s" / "data.mdb", "rb").read()
    assert script(ro / "s", READS, "--raw").stdout == want
    p = xs(ro / "s", "tail", "--json", "-n", "3", "m")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 3, p.stderr
    p = xs(ro / "s", "save", str(tmp_path / "x.snap"))
    assert p.returncode == 0, p.stderr
    p = xs(ro / "s", "--json", "XINFO", "STREAM", "m", "FULL", "COUNT", "0")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["entries"] == json.loads(xs(ro / "s", "--json", "XRANGE", "m", "-", "+").stdout)
    assert len(json.loads(p.stdout)["entries"]) == 108
    for line in (xadd("m", "9-1", b"brand", b"new"), xadd("m", "9-2", b"a", b"1", b"b", b"2")):
        p = script(ro / "s", [line])
        assert p.returncode == 1 and b"READONLY" in p.stdout + p.stderr
    assert open(rw / "s" / "data.mdb", "rb").read() == data
    p = xs(tmp_path / "copy", "restore", str(tmp_path / "x.snap"))
    assert p.returncode == 0, p.stderr
    assert script(tmp_path / "copy", READS, "--raw").stdout == want


BULK_EDGES = [
    # bulk runs of XADD * across the 32-bit sequence boundary (IDs in the
    # future, so both servers give the same ones), with new field sets
    xadd("b", "9999999999999-4294967292", b"a", b"0"),
] + [xadd("b", "*", b"a", b"%d" % k, *([b"c", b"\x0e"] if k == 2 else [])) for k in range(4)] + [
    xadd("b", "*", b"n%d" % k, b"v", b"a", b"x\ny" if k == 5 else b"z") for k in range(10)
] + [
    "XRANGE b - +",
    "XREVRANGE b + (9999999999999-4294967295 COUNT 4",
    "XRANGE b 9999999999999-4294967295 9999999999999-4294967296",
    # a bulk run that exhausts the ID space after a new field set: added one by one
    xadd("x", "18446744073709551615-18446744073709551613", b"a", b"0"),
    xadd("x", "*", b"fresh", b"1", b"set", b"2"),
    xadd("x", "*", b"fresh", b"3", b"set", b"4"),
    xadd("x", "*", b"other", b"5"),
    xadd("x", "*", b"fresh", b"6", b"set", b"7"),
    "XRANGE x - +",
    # a run whose first stream's entries (a new field set) were stored
    # when the next stream's ID space ran out: all added one by one
    xadd("z", "9999999999999-0", b"a", b"0"),
    xadd("x2", "18446744073709551615-18446744073709551615", b"a", b"0"),
    xadd("z", "*", b"brand", b"1", b"new", b"2"),
    xadd("x2", "*", b"a", b"1"),
    xadd("z", "*", b"brand", b"3", b"new", b"4"),
    "XRANGE z - +",
    xadd("y", "1-1", b"a", b"1"),
    xadd("y", "2-1", b"fresh", b"1", b"set", b"2"),
    "XRANGE y - +",
    "XLEN y",
]


def test_bulk_xadd_runs_across_the_wide_sequence_boundary_and_id_exhaustion_answer_as_redis(tmp_path, redis):
    """Script mode adds runs of ``XADD s *`` in one bulk verb: across
    sequence 0xffffffff (wide keys) with new field sets, and a run that
    exhausts the ID space after making a new field set (then added one by
    one): the same replies and reads as redis-server, also read again
    from a new process."""
    want = _redis_cli(redis, BULK_EDGES)
    got = script(tmp_path / "db", BULK_EDGES, "--raw")
    assert got.stdout == want
    reads = ["XRANGE b - +", "XRANGE x - +", "XREVRANGE b + - COUNT 3", "XRANGE z - +", "XLEN x2"]
    assert script(tmp_path / "db", reads, "--raw").stdout == _redis_cli(redis, BULK_EDGES + reads)[len(want):]


def _plain_bulk():
    """Single-spaced plain ``XADD p * ...`` lines (script mode's fastest
    path: fields joined in text form, one scan for unsafe bytes per run)
    with raw tag and separator bytes and '%' in names and values."""
    raw = [b"%", b"%b", b"\x01", b"\x08", b"\x0e", b"\x1f", b"a\x02b", b"x%sy"]
    out = []
    for k in range(40):
        names = [b"a", b"b"] if k % 4 else [b"n%d" % (k % 11), raw[k % len(raw)]]
        vals = [raw[(k * 3) % len(raw)] if k % 5 == 0 else b"v%d" % k, b"w%d" % k]
        if k in (7, 21):
            names = [b"a", b"b", b"c"]
            vals.append(b"only%dsafe" % k)
        out.append(b"XADD p * " + b" ".join(x for pair in zip(names, vals) for x in pair))
    return out


def test_plain_bulk_lines_with_raw_unsafe_bytes_read_back_as_redis_server(tmp_path, redis):
    """A buffer of single-spaced ``XADD p *`` lines (joined-text bulk path)
    whose names and values hold raw tag/separator bytes and '%', after a
    stream whose last ID is in the future (so both sides number alike):
    XRANGE reads as redis-server's, all of it and in runs."""
    first = [xadd("p", "9999999999999-4294967290", b"a", b"0", b"b", b"1")]
    bulk = _plain_bulk()
    reads = ["XRANGE p - +", "XREVRANGE p + - COUNT 5", "XRANGE p (9999999999999-4294967295 + COUNT 6"]
    want = _redis_cli(redis, first + [l.decode("latin-1") for l in bulk] + reads)
    db = tmp_path / "db"
    assert script(db, first).returncode == 0
    got = script(db, bulk, "--raw")
    assert got.returncode == 0, got.stdout
    got = got.stdout + script(db, reads, "--raw").stdout
    assert got == want[len("9999999999999-4294967290\n"):]


def _readlines(f, n, timeout=20):
    import select
    out, buf, end = [], b"", time.monotonic() + timeout
    fd = f.stdout.fileno()
    while len(out) < n:
        left = end - time.monotonic()
        assert left > 0, "only %d of %d lines: %r" % (len(out), n, out[-3:])
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            assert chunk, "tail exited: %r" % f.stderr.read()
            buf += chunk
            *lines, buf = buf.split(b"\n")
            out += lines
    return out


def test_tail_follow_sees_field_sets_made_by_other_processes_after_it_started(tmp_path):
    """xs tail -f --json (plain and through a group) started on a stream
    with a few field sets keeps printing exactly what other processes add
    after it started: new field sets up to the limit and past it, values
    needing records, wide sequence numbers."""
    db = tmp_path / "db"
    assert script(db, [xadd("m", "1-1", b"a", b"1"), xadd("m", "1-2", b"b", b"2"),
                       "XGROUP CREATE m g $"]).returncode == 0
    argv = XS + ["--db", str(db), "tail", "-f", "--json"]
    plain = subprocess.Popen(argv + ["-n", "0", "m"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    # through a group -n does not go with -f: the group's position says where reading starts
    grouped = subprocess.Popen(argv + ["--group", "g", "--consumer", "c", "m"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=ROOT)
    try:
        time.sleep(1.0)
        added = []
        for batch in range(4):
            lines = []
            for j in range(5):
                n = batch * 5 + j
                fields = [b"s%d" % (n % 12), b"v%d" % n, b"t", b"\x0e" if n % 7 == 0 else b"%d%%" % n]
                if n == 13:
                    fields[1] = b"two\nlines"
                i = "2-%d" % (0xfffffffd + n)
                lines.append(xadd("m", i, *fields))
                added.append(("m", i, fields))
            assert script(db, lines).returncode == 0
        for proc in (plain, grouped):
            got = [json.loads(l) for l in _readlines(proc, len(added))]
            assert [(g["stream"], g["id"], [_json_bytes(f) for f in g["fields"]]) for g in got] == added
    finally:
        for proc in (plain, grouped):
            proc.kill()
            proc.wait()


def _pipelined(port, lines):
    """Send ``lines`` as inline commands in one write; the RESP bytes of
    their replies (up to a final ECHO marker)."""
    end = b"$11\r\n__the_end__\r\n"
    c = socket.create_connection(("127.0.0.1", port), timeout=20)
    try:
        c.sendall(b"".join(l.encode("latin-1") + b"\r\n" for l in lines) + b"ECHO __the_end__\r\n")
        out = b""
        while not out.endswith(end):
            chunk = c.recv(65536)
            assert chunk, out[-200:]
            out += chunk
    finally:
        c.close()
    return out


def test_serve_pipelined_bulk_runs_and_mixed_reads_are_byte_identical_to_redis_server(tmp_path, redis):
    """One pipelined write of inline commands (xs serve adds runs of plain
    XADD * in one verb, across commands): the ID-exhaustion and
    wide-sequence runs with new field sets, the raw-byte plain lines and
    a mixed stream's reads give the RESP bytes redis-server gives."""
    from tests.harness.served import Served
    lines = BULK_EDGES + [xadd("p", "9999999999999-4294967290", b"a", b"0")] + [
        l.decode("latin-1") for l in _plain_bulk()] + mixed("m") + READS + [
        "XRANGE p - +", "XRANGE z - +"]
    redis.flushall()
    want = _pipelined(redis.port, lines)
    s = Served(tmp_path / "store")
    try:
        got = _pipelined(s.port, lines)
    finally:
        s.stop()
    assert got == want


_PIECES = [b"a", b"b", b"c", b"", b"%", b"%b", b"\x00", b"\n", b"\x01", b"\x08", b"\x0e", b"\x1f", b"x y",
           b"\xff", b"d"]


def _random_script(r):
    """A random script over streams s and t: XADD (explicit IDs around
    the 32-bit sequence boundary, field sets from a pool of up to 12 with
    every unsafe byte, some MAXLEN), XDEL, XTRIM, RENAME, DEL and
    XRANGE / XREVRANGE with COUNT and exclusive bounds."""
    def piece():
        return r.choice(_PIECES) if r.random() < 0.7 else bytes(r.randrange(256) for _ in range(r.randrange(4)))
    sets = [[piece() for _ in range(r.choice([1, 1, 2, 3, 19, 20]))] for _ in range(r.randrange(1, 13))]
    lines, last = [], {}
    for _ in range(r.randrange(5, 80)):
        s = r.choice(["s", "s", "t"])
        op = r.random()
        if op < 0.6:
            ms, seq = last.get(s, (0, 0))
            c = r.random()
            if c < 0.5:
                seq += 1
            elif c < 0.6:
                seq = r.choice([0xfffffffe, 0xffffffff, 0x100000000, 2 ** 64 - 1])
            elif c < 0.7:
                ms, seq = ms + 1, r.choice([0, 0xffffffff])
            else:
                ms, seq = ms + r.randrange(1, 3), r.randrange(3)
            if seq >= 2 ** 64:
                continue
            last[s] = (ms, seq)
            f = [x for n in r.choice(sets) for x in (n, piece())]
            extra = r.choice(["", "", "", " MAXLEN %d" % r.randrange(0, 20)])
            lines.append(xadd(s + extra, "%d-%d" % (ms, seq), *f))
        elif op < 0.7:
            lines.append("XDEL %s %d-%d" % (s, r.randrange(0, 4), r.randrange(0, 5)))
        elif op < 0.75:
            lines.append("XTRIM %s MAXLEN %d" % (s, r.randrange(0, 15)))
        elif op < 0.78:
            lines.append(r.choice(["RENAME s t", "RENAME t s", "DEL s", "DEL t"]))
        else:
            a = r.choice(["-", "+", "(1-0", "1-4294967295", "(0-4294967295", "2", "1-18446744073709551615"])
            b = r.choice(["+", "-", "(3-0", "2-4294967296", "1"])
            cnt = r.choice(["", " COUNT 1", " COUNT 3", " COUNT 100"])
            lines.append(r.choice(["XRANGE %s %s %s%s" % (s, a, b, cnt), "XREVRANGE %s %s %s%s" % (s, b, a, cnt)]))
    return lines + ["XRANGE s - +", "XRANGE t - +"]


@pytest.mark.parametrize("seed", range(8))
def test_random_mixed_scripts_answer_as_redis_server(tmp_path, redis, seed):
    """Random scripts of adds (every stored form), deletes, trims, renames
    and range reads: xs --raw prints what redis-cli --raw prints, and the
    streams read the same from a new process.  (150 seeds, and 60 run in
    chunks of separate processes with --no-raw, passed when written.)"""
    import random
    lines = _random_script(random.Random(seed))
    want = _redis_cli(redis, lines)
    got = script(tmp_path / "db", lines, "--raw")
    assert got.stdout == want and b"Traceback" not in got.stderr
    reads = script(tmp_path / "db", ["XRANGE s - +", "XRANGE t - +"], "--raw").stdout
    assert reads == _redis_cli(redis, lines + ["XRANGE s - +", "XRANGE t - +"])[len(want):]


def test_concurrent_writers_racing_for_field_sets_and_a_killed_one_leave_every_entry_readable(tmp_path):
    """Four processes add to one stream at once, each with field sets of
    its own (so they race for the 8 tags and for the room past them), one
    of them SIGKILLed mid-stream; afterwards every entry reads back with
    the fields its writer gave it, and XLEN agrees."""
    db = tmp_path / "db"
    assert script(db, [xadd("c", "1-1", b"seed", b"0")]).returncode == 0

    def lines(w, n):
        out = []
        for k in range(n):
            names = [b"w%d-%d" % (w, k % 4), b"k"]
            if k % 9 == 0:
                names.append(b"w%d\x0e" % w)
            out.append(xadd("c", "*", *[x for nm in names for x in (nm, b"%d:%d" % (w, k))]))
        return "".join(l + "\n" for l in out).encode()

    procs = []
    for w in range(4):
        p = subprocess.Popen(XS + ["--db", str(db), "--raw"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, cwd=ROOT)
        procs.append(p)
    data = [lines(w, 300) for w in range(4)]
    step = 1500
    for at in range(0, max(map(len, data)), step):
        for w, p in enumerate(procs):
            if w == 3 and at >= 3 * step:
                if p.poll() is None:
                    p.kill()
                continue
            p.stdin.write(data[w][at:at + step])
            p.stdin.flush()
        time.sleep(0.01)
    for p in procs:
        try:
            p.stdin.close()
        except BrokenPipeError:
            pass
        p.wait(30)
    for p in procs[:3]:
        assert p.returncode == 0, p.stderr.read()
    got = xs(db, "--json", "XRANGE", "c", "-", "+")
    assert got.returncode == 0, got.stderr
    entries = json.loads(got.stdout)
    assert json.loads(xs(db, "--json", "XLEN", "c").stdout) == len(entries)
    seen = {}
    for _, f in entries[1:]:
        w, k = map(int, f[1].split(":"))
        names = ["w%d-%d" % (w, k % 4), "k"] + (["w%d\x0e" % w] if k % 9 == 0 else [])
        assert f == [x for nm in names for x in (nm, "%d:%d" % (w, k))]
        seen.setdefault(w, []).append(k)
    for w in range(3):
        assert seen[w] == list(range(300))
    assert seen.get(3, []) == list(range(len(seen.get(3, []))))


def test_export_to_and_import_from_a_live_redis_carry_mixed_streams_exactly(tmp_path, redis):
    """xs export --to redis:// of a mixed stream gives redis-server the
    same entries (its XRANGE prints what xs's does), and xs import --from
    redis:// brings them back the same."""
    cli = shutil.which("redis-cli")
    if not cli:
        pytest.skip("redis-cli is not installed")
    redis.flushall()
    url = "redis://127.0.0.1:%d" % redis.port
    assert script(tmp_path / "a", mixed("m")).returncode == 0
    p = xs(tmp_path / "a", "export", "--to", url, "m")
    assert p.returncode == 0, p.stderr
    data = "".join(l + "\n" for l in READS).encode()
    want = subprocess.run([cli, "-p", str(redis.port), "--raw"], input=data, capture_output=True,
                          timeout=60).stdout
    assert script(tmp_path / "a", READS, "--raw").stdout == want
    p = xs(tmp_path / "b", "import", "--from", url, "m")
    assert p.returncode == 0, p.stderr
    assert script(tmp_path / "b", READS, "--raw").stdout == want
