"""xs ls and xs info: JSON fields and values, plain output when piped (no
ANSI escapes), a table on a terminal, errors."""
import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest

from conftest import ROOT, XS, new_store, run_xs


def xs(db, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, timeout=60, cwd=ROOT, env=e)


def script(db, lines):
    p = run_xs(db, lines)
    assert p.returncode == 0, p.stdout + p.stderr
    return [json.loads(l) for l in p.stdout.decode().splitlines()]


def now_ms():
    return int(time.time() * 1000)


class _Db(str):
    """A store path with the test's clock reading (``t``)."""


@pytest.fixture
def db(tmp_path):
    """events: 5 entries, the last 2 minutes ago; groups g (read 2, 2
    pending, lag 3) and h (read all, acked 1: 4 pending, lag 0);
    quiet: 1 entry, no group; empty: no entry left."""
    d = _Db(tmp_path / "db")
    t = d.t = now_ms()
    script(d, ["XADD events %d-%d f v" % (t - 3600_000, i) for i in (1, 2, 3)] +
           ["XADD events %d-0 f v" % (t - 600_000), "XADD events %d-0 f v" % (t - 120_000),
            "XGROUP CREATE events g 0", "XGROUP CREATE events h 0",
            "XREADGROUP GROUP g alice COUNT 2 STREAMS events >",
            "XREADGROUP GROUP h bob STREAMS events >", "XACK events h %d-1" % (t - 3600_000),
            "XADD quiet 7-1 a b",
            "XADD empty 5-5 a b", "XDEL empty 5-5"])
    return d


def test_ls_json_fields_and_values(db):
    p = xs(db, "ls", "--json")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(b"\n") == 1              # one JSON document on one line
    rows = {r["stream"]: r for r in json.loads(p.stdout)}
    assert sorted(rows) == ["empty", "events", "quiet"]
    t = db.t
    ev = rows["events"]
    age = ev.pop("last_entry_age_ms")
    assert 120_000 <= age < 180_000
    assert ev == {"stream": "events", "length": 5, "first_id": "%d-1" % (t - 3600_000),
                  "last_id": "%d-0" % (t - 120_000), "last_generated_id": "%d-0" % (t - 120_000),
                  "groups": 2, "pending": 6, "max_lag": 3, "ttl_ms": None}
    assert rows["quiet"]["groups"] == 0 and rows["quiet"]["max_lag"] is None and rows["quiet"]["pending"] == 0
    assert rows["quiet"]["last_entry_age_ms"] > 10 ** 12           # 7 ms after the epoch
    assert rows["empty"] == {"stream": "empty", "length": 0, "first_id": None, "last_id": None,
                             "last_generated_id": "5-5", "groups": 0, "pending": 0, "max_lag": None,
                             "last_entry_age_ms": None, "ttl_ms": None}


def test_ls_global_json_flag_and_globs(db):
    p = xs(db, "--json", "ls", "e*", "quiet")
    assert [r["stream"] for r in json.loads(p.stdout)] == ["empty", "events", "quiet"]
    p = xs(db, "ls", "--json", "ev[a-z]nts")
    assert [r["stream"] for r in json.loads(p.stdout)] == ["events"]
    p = xs(db, "ls", "--json", "nothing*")
    assert p.returncode == 0 and json.loads(p.stdout) == []


def test_ls_unknown_stream_named_explicitly(db):
    p = xs(db, "ls", "events", "nope")
    assert p.returncode == 1 and p.stdout == b"" and p.stderr == b"xs: no such stream: nope\n"


def test_ls_piped_is_plain_aligned_columns_without_escapes(db):
    script(db, ["XADD \"odd\\x1b[31m name\" 9-9 a b"])
    p = xs(db, "ls", env={"FORCE_COLOR": "", "TERM": "xterm-256color"})
    assert p.returncode == 0
    assert b"\x1b" not in p.stdout
    lines = p.stdout.decode().splitlines()
    assert lines[0].split() == ["STREAM", "LENGTH", "FIRST", "LAST", "GROUPS", "PENDING", "LAG", "LAST", "ENTRY"]
    assert lines[1].startswith("empty ")
    assert lines[3].startswith('"odd\\x1b[31m name"')        # quoted and escaped as xs tail writes names
    ev = lines[2].split()
    assert ev[:7] == ["events", "5", "%d-1" % (db.t - 3600_000), "%d-0" % (db.t - 120_000), "2", "6", "3"]
    assert " ".join(ev[7:]) == "2m ago"
    width = lines[0].index("LENGTH") + len("LENGTH")
    assert all(l[width - 1] in "0123456789" for l in lines[1:])      # numbers right-aligned under LENGTH


def test_ls_on_a_terminal_draws_a_table_and_escapes_names(db):
    script(db, ["XADD \"odd\\x1b[31m name\" 9-9 a b"])
    out = _on_tty(XS + ["--db", str(db), "ls"])
    assert b"STREAM" in out and b"LAST ENTRY" in out and b"2m ago" in out
    assert b"odd\\x1b[31m name" in out and b"odd\x1b[31m" not in out


def _on_tty(argv):
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL, cwd=ROOT,
                         env=dict(os.environ, COLUMNS="60"))
    os.close(slave)
    out = b""
    while True:
        r, _, _ = select.select([master], [], [], 30)
        if not r:
            break
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait(timeout=30)
    os.close(master)
    assert p.returncode == 0, out
    return out


def test_ls_idle_consumers(db):
    time.sleep(0.3)
    script(db, ["XGROUP CREATECONSUMER events g carol"])
    p = xs(db, "ls", "--idle-consumers", "250ms", "--json")
    rows = json.loads(p.stdout)
    names = [(r["stream"], r["group"], r["consumer"]) for r in rows]
    assert ("events", "g", "alice") in names and ("events", "h", "bob") in names
    alice = rows[names.index(("events", "g", "alice"))]
    assert alice["pending"] == 2 and alice["idle_ms"] >= 250 and alice["inactive_ms"] >= 250
    assert sorted(alice) == ["consumer", "group", "idle_ms", "inactive_ms", "pending", "stream"]
    p = xs(db, "ls", "--idle-consumers", "1h")
    assert p.returncode == 0 and p.stdout == b""
    p = xs(db, "ls", "--idle-consumers", "250ms")
    lines = p.stdout.decode().splitlines()
    assert lines[0].split() == ["STREAM", "GROUP", "CONSUMER", "IDLE", "PENDING"]
    assert any(l.split()[:3] == ["events", "g", "alice"] and l.split()[-1] == "2" for l in lines)


def test_ls_bad_duration_is_a_usage_error(db):
    p = xs(db, "ls", "--idle-consumers", "forever")
    assert p.returncode == 2 and p.stderr.startswith(b"xs: --idle-consumers: bad duration")
    assert p.stderr.count(b"\n") == 1


def test_info_json(db):
    from storage.codec import FORMAT_VERSION
    p = xs(db, "info", "--json")
    assert p.returncode == 0, p.stderr
    o = json.loads(p.stdout)
    assert o["path"] == os.path.abspath(str(db))
    assert o["format"] == FORMAT_VERSION == o["code_format"]
    assert o["streams"] == 3 and o["entries"] == 6
    assert o["file_size"] == os.path.getsize(os.path.join(str(db), "data.mdb"))
    assert o["disk_usage"] > 0 and 0 < o["used_size"] <= o["file_size"] <= o["map_size"]
    assert o["map_size"] >= 1 << 30 and o["page_size"] >= 4096 and o["max_readers"] == 510
    assert o["readers"] == o["reading"] == o["stale_readers"] == 0
    assert o["last_txn"] > 0


def test_info_counts_other_processes_reading(db):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom storage.store import Store\ns = Store(%r)\n"
        "with s.read() as tx:\n    tx.length(b'events')\n    print('ready', flush=True)\n    sys.stdin.read()\n")
        % str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout.readline() == b"ready\n"
        o = json.loads(xs(db, "--json", "info").stdout)
        assert o["readers"] == 1 and o["reading"] == 1
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    o = json.loads(xs(db, "info", "--json").stdout)
    assert o["reading"] == 0


def test_info_plain_and_terminal(db):
    p = xs(db, "info")
    assert b"\x1b" not in p.stdout
    lines = dict(l.split(None, 1) for l in p.stdout.decode().splitlines() if not l.startswith(("data.mdb", "map",
                                                                                               "last")))
    assert lines["path"] == os.path.abspath(str(db)) and lines["streams"] == "3" and lines["entries"] == "6"
    out = _on_tty(XS + ["--db", str(db), "info"])
    assert b"streams" in out and b"map size" in out


@pytest.mark.parametrize("cmd", [["ls"], ["info"], ["ls", "--json"]])
def test_a_missing_store_is_an_error_and_not_created(tmp_path, cmd):
    db = tmp_path / "none"
    p = xs(db, *cmd)
    assert p.returncode == 1 and p.stdout == b""
    assert p.stderr.startswith(b"xs: ") and b"no such store" in p.stderr and b"Traceback" not in p.stderr
    assert not db.exists()


def test_ls_on_an_empty_store(tmp_path):
    db = new_store(tmp_path / "db")
    p = xs(db, "ls")
    assert p.returncode == 0 and p.stdout == b""
    assert json.loads(xs(db, "ls", "--json").stdout) == []


def test_info_counts_the_pages_an_emptied_store_frees_as_free_not_in_use(tmp_path):
    """After 20,000 entries are deleted, xs info's "in use" is what a
    compacted copy would take (live pages), and the rest is "free", as
    xs compact --dry-run says; it used to call every page "in use"."""
    db = tmp_path / "big.xs"
    payload = "x" * 500
    lines = ["XADD big * n %d p %s" % (i, payload) for i in range(20000)]
    p = subprocess.run(XS + ["--db", str(db)], input="\n".join(lines).encode(), capture_output=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert xs(db, "DEL", "big").returncode == 0
    o = json.loads(xs(db, "info", "--json").stdout)
    assert o["used_size"] < 1 << 20 < o["free_size"]                 # ~12 MB of pages, all free now
    assert o["used_size"] + o["free_size"] <= o["file_size"]
    dry = xs(db, "compact", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    text = xs(db, "info").stdout.decode()
    assert " in use, " in text and " free: xs compact gives it back)" in text
