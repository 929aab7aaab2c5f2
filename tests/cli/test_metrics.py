"""xs metrics as a user meets it: exact lag, lag in seconds and oldest
pending age on a store the test sets up with explicit millisecond IDs,
redis_exporter's names and labels, --namespace, the consumer switch,
STREAM|GLOB, escaped label values, promtool's check, --outfile (atomic),
--listen (HTTP), and a store neither changed nor created."""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import ROOT, XS, run_xs

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool is needed (Debian's prometheus package)")

WEIRD = b'we"ird\\\n\xff'            # a quote, a backslash, a newline and a byte that is not UTF-8
WEIRD_LABEL = 'we\\"ird\\\\x5c\\n\\\\xff'   # as it appears between the quotes in the text


def now_ms():
    return int(time.time() * 1000)


def xs(db, *args, env=None, timeout=60):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(XS + ["--db", str(db)] + list(args), capture_output=True, timeout=timeout, cwd=ROOT,
                          env=e)


class Scene(str):
    """A store path with what the test set up: ``t`` (the clock when the
    entries were made), ``ids``, and the setup's start and end."""


def make_scene(path):
    """events: e1..e4 made 600, 300, 120 and 60 s ago; group g read e1 and
    e2 (lag 2; lag in seconds: e3's age, 120 s), e1 claimed IDLE 90000
    (oldest pending age 90 s), e2 given back with XNACK (1 NACKed); group
    h made at $ (nothing behind, nothing pending).  jobs: 2 entries that
    xs worker dead-lettered to jobs:dead (origin jobs, group w).  The
    weird name: one entry."""
    d = Scene(path)
    d.start = now_ms()
    t = d.t = d.start
    ids = d.ids = ["%d-0" % (t - a) for a in (600_000, 300_000, 120_000, 60_000)]
    lines = ["XADD events %s f v" % i for i in ids] + [
        "XGROUP CREATE events g 0",
        "XREADGROUP GROUP g alice COUNT 2 STREAMS events >",
        "XCLAIM events g alice 0 %s IDLE 90000" % ids[0],
        "XNACK events g FAIL IDS 1 %s" % ids[1],
        "XGROUP CREATE events h $",
        "XADD jobs %d-0 n 1" % (t - 5000), "XADD jobs %d-0 n 2" % (t - 4000),
        'XADD "we\\"ird\\\\\\n\\xff" 1-0 f v']
    p = run_xs(d, lines)
    assert p.returncode == 0, p.stdout + p.stderr
    p = xs(d, "worker", "jobs", "-g", "w", "-c", "w1", "--once", "--max-deliveries", "1",
           "--dead-letter", "jobs:dead", "-q", "--", "false")
    assert b"Traceback" not in p.stderr
    d.end = now_ms()
    return d


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    return make_scene(tmp_path_factory.mktemp("metrics") / "db")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset of (label, raw value)): float} and {name: type}."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = SAMPLE.match(line)
        assert m, line
        samples[(m.group(1), frozenset(LABEL.findall(m.group(2) or "")))] = float(m.group(3))
    return samples, types


def value(samples, name, **labels):
    key = (name, frozenset(labels.items()))
    assert key in samples, (key, [k for k in samples if k[0] == name])
    return samples[key]


def metrics(db, *args):
    before = now_ms()
    p = xs(db, "metrics", *args)
    after = now_ms()
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    return p.stdout.decode("utf-8"), before, after


# ------------------------------------------------------------------ values

def test_lag_lag_seconds_and_oldest_pending_age_are_exact(scene):
    text, before, after = metrics(scene)
    s, types = parse(text)
    g = dict(db="db0", stream="events", group="g")
    assert value(s, "redis_stream_group_lag", **g) == 2
    e3 = int(scene.ids[2].split("-")[0])
    lag_s = value(s, "redis_stream_group_lag_seconds", **g)
    assert (before - e3) / 1000 <= lag_s <= (after - e3) / 1000          # e3's age, to the ms
    old = value(s, "redis_stream_group_oldest_pending_age_seconds", **g)
    assert 90 + (before - scene.end) / 1000 <= old <= 90 + (after - scene.start) / 1000
    assert value(s, "redis_stream_group_messages_pending", **g) == 2
    assert value(s, "redis_stream_group_messages_nacked", **g) == 1
    assert value(s, "redis_stream_group_entries_read", **g) == 2
    assert value(s, "redis_stream_group_consumers", **g) == 1
    h = dict(db="db0", stream="events", group="h")
    assert value(s, "redis_stream_group_lag", **h) == 0
    assert value(s, "redis_stream_group_lag_seconds", **h) == 0
    assert value(s, "redis_stream_group_oldest_pending_age_seconds", **h) == 0
    assert value(s, "redis_stream_group_messages_pending", **h) == 0
    # the consumer alice owns e1 (e2 went back to the group)
    assert value(s, "redis_stream_group_consumer_messages_pending", consumer="alice", **g) == 1
    assert value(s, "redis_stream_group_consumer_idle_seconds", consumer="alice", **g) >= 0
    # streams
    ev = dict(db="db0", stream="events")
    assert value(s, "redis_stream_length", **ev) == 4
    assert value(s, "redis_stream_entries_added_total", **ev) == 4
    assert value(s, "redis_stream_groups", **ev) == 2
    e4 = int(scene.ids[3].split("-")[0])
    assert (before - e4) / 1000 <= value(s, "redis_stream_last_entry_age_seconds", **ev) <= (after - e4) / 1000
    assert types["redis_stream_entries_added_total"] == "counter"
    assert types["redis_stream_group_lag"] == "gauge"


def test_dead_letters_are_labelled_with_their_origin(scene):
    s, _ = parse(metrics(scene)[0])
    assert value(s, "redis_stream_dead_letters", db="db0", stream="jobs:dead", origin_stream="jobs",
                 origin_group="w") == 2
    assert not [k for k in s if k[0] == "redis_stream_dead_letters" and dict(k[1])["stream"] != "jobs:dead"]


def test_store_metrics(scene):
    s, _ = parse(metrics(scene)[0])
    info = json.loads(xs(scene, "info", "--json").stdout)
    assert value(s, "redis_store_file_size_bytes", db="db0") == info["file_size"]
    assert value(s, "redis_store_used_bytes", db="db0") == info["used_size"]
    assert value(s, "redis_store_map_size_bytes", db="db0") == info["map_size"]
    assert value(s, "redis_store_map_used_ratio", db="db0") == pytest.approx(info["used_size"] / info["map_size"])
    assert 0 < value(s, "redis_store_full_ratio", db="db0") < 1
    assert value(s, "redis_store_readers", db="db0") == 0
    assert value(s, "redis_store_stale_readers", db="db0") == 0
    assert value(s, "redis_store_streams", db="db0") == 4


def test_expiry(tmp_path):
    db = tmp_path / "db"
    assert run_xs(db, ["XADD s 1-0 a b", "EXPIRE s 3600"]).returncode == 0
    s, _ = parse(metrics(db)[0])
    assert 3590 < value(s, "redis_stream_expires_in_seconds", db="db0", stream="s") <= 3600


def test_namespace_and_the_consumer_switch(scene):
    s, _ = parse(metrics(scene, "--namespace", "xs")[0])
    assert value(s, "xs_stream_length", db="db0", stream="events") == 4
    assert not [k for k in s if k[0].startswith("redis_")]
    s, _ = parse(metrics(scene, "--exclude-consumer-metrics")[0])
    assert not [k for k in s if "_consumer_" in k[0]]
    assert value(s, "redis_stream_group_consumers", db="db0", stream="events", group="g") == 1
    p = xs(scene, "metrics", "--namespace", "9bad")
    assert p.returncode == 2 and p.stderr.startswith(b"xs: --namespace") and b"Traceback" not in p.stderr


def test_streams_and_globs_select(scene):
    s, _ = parse(metrics(scene, "jobs*")[0])
    assert {dict(k[1]).get("stream") for k in s if k[0] == "redis_stream_length"} == {"jobs", "jobs:dead"}
    p = xs(scene, "metrics", "events", "nope")
    assert p.returncode == 1 and p.stdout == b"" and p.stderr == b"xs: no such stream: nope\n"


def test_label_values_are_escaped_and_reversible(scene):
    text = metrics(scene)[0]
    assert 'redis_stream_length{db="db0",stream="%s"} 1' % WEIRD_LABEL in text.splitlines()
    # the documented way back: the text format's escapes, then every \xHH to its byte
    raw = WEIRD_LABEL.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
    back = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw.encode())
    assert back == WEIRD


@needs_promtool
def test_promtool_accepts_the_output(scene):
    for args in ((), ("--exclude-consumer-metrics",), ("--namespace", "xs")):
        text = xs(scene, "metrics", *args).stdout
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr


# ------------------------------------------------------------------ read-only

def test_nothing_is_written_and_no_store_is_made(scene, tmp_path):
    def state():
        info = json.loads(xs(scene, "info", "--json").stdout)
        return info["last_txn"], info["entries"]
    before = state()
    mtime = os.stat(os.path.join(scene, "data.mdb")).st_mtime_ns
    metrics(scene)
    assert state() == before
    assert os.stat(os.path.join(scene, "data.mdb")).st_mtime_ns == mtime
    missing = tmp_path / "nostore"
    p = xs(missing, "metrics")
    assert p.returncode == 1 and p.stdout == b"" and p.stderr.startswith(b"xs: ") and b"Traceback" not in p.stderr
    assert b"no such store" in p.stderr
    assert not missing.exists()


# ------------------------------------------------------------------ --outfile

def test_outfile_is_written_atomically(scene, tmp_path):
    out = tmp_path / "prom" / "xs.prom"
    out.parent.mkdir()
    out.write_text("old\n")
    os.chmod(out, 0o644)
    p = xs(scene, "metrics", "--outfile", str(out))
    assert p.returncode == 0 and p.stdout == b"" and p.stderr == b""
    s, _ = parse(out.read_text())
    assert value(s, "redis_stream_group_lag", db="db0", stream="events", group="g") == 2
    assert os.listdir(out.parent) == ["xs.prom"]               # no temporary file left
    assert os.stat(out).st_mode & 0o777 == 0o644               # the mode of the file it replaced
    p = xs(scene, "metrics", "--outfile", str(tmp_path / "no" / "dir" / "x.prom"))
    assert p.returncode == 1 and p.stderr.startswith(b"xs: cannot write ") and b"Traceback" not in p.stderr
    p = xs(scene, "metrics", "--outfile", str(out), "--listen", "0")
    assert p.returncode == 2 and b"do not go together" in p.stderr


# ------------------------------------------------------------------ --listen

def start_listener(db, *args):
    """xs metrics --listen ... started; (process, base URL)."""
    proc = subprocess.Popen(XS + ["--db", str(db), "metrics"] + list(args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    line = proc.stderr.readline().decode()
    m = re.match(r"xs metrics: serving (http://\S+)/metrics$", line.strip())
    if not m:
        proc.kill()
        raise AssertionError(line + proc.stderr.read().decode())
    return proc, m.group(1)


def stop(proc):
    proc.terminate()
    proc.wait(10)
    err = proc.stderr.read()
    proc.stderr.close()
    proc.stdout.close()
    return err


def test_listen_serves_metrics_over_http_on_loopback(tmp_path):
    scene = make_scene(tmp_path / "db")
    proc, base = start_listener(scene, "--listen", "0")
    try:
        assert base.startswith("http://127.0.0.1:")           # a bare port: loopback only
        with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            s, _ = parse(r.read().decode())
        assert value(s, "redis_stream_group_lag", db="db0", stream="events", group="g") == 2
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + "/nothing", timeout=30)
        assert e.value.code == 404
        # each scrape is a new snapshot: a write shows at the next one
        assert xs(scene, "XADD", "events", "*", "f", "v").returncode == 0
        with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
            s, _ = parse(r.read().decode())
        assert value(s, "redis_stream_length", db="db0", stream="events") == 5
    finally:
        err = stop(proc)
    assert b"Traceback" not in err


def test_listen_refuses_a_bad_address(scene):
    p = xs(scene, "metrics", "--listen", "localhost:http")
    assert p.returncode == 2 and p.stderr.startswith(b"xs: --listen") and b"Traceback" not in p.stderr


# ------------------------------------------------------------------ docs/monitoring.md

DOC = os.path.join(ROOT, "docs", "monitoring.md")


def doc_blocks(kind):
    """The fenced blocks of docs/monitoring.md tagged ``kind`` (sh, yaml)."""
    text = open(DOC, encoding="utf-8").read()
    return re.findall(r"^```%s\n(.*?)^```$" % kind, text, re.S | re.M)


def doc_commands():
    """Every command line of the doc's sh blocks (a crontab line: its command)."""
    out = []
    for block in doc_blocks("sh"):
        for line in block.splitlines():
            m = re.match(r"(?:\S+\s+){5}(xs .*)$", line) if not line.startswith("xs ") else None
            out.append(m.group(1) if m else line)
    return out


def test_the_doc_shows_commands_and_configs():
    cmds = doc_commands()
    assert len(cmds) >= 10 and all(c.startswith("xs ") for c in cmds), cmds
    assert any("--outfile /var/lib/prometheus/node-exporter/xs.prom" in c for c in cmds)
    assert any("--listen" in c for c in cmds)
    assert len(doc_blocks("yaml")) == 2


def test_every_command_of_the_doc_runs(tmp_path):
    from conftest import shell_path
    scene = make_scene(tmp_path / "db")
    assert run_xs(scene, ["XGROUP CREATE events workers 0"]).returncode == 0
    textdir = tmp_path / "node-exporter"
    textdir.mkdir()
    env = dict(os.environ, PATH=shell_path(tmp_path), XS_DB=str(scene))

    def local(c):
        return c.replace("/srv/app/events.xs", str(scene)).replace("/var/lib/prometheus/node-exporter", str(textdir))
    for c in doc_commands():
        c = local(c)
        if "--listen" in c:
            import socket
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            argv = c.split()
            argv[argv.index("--listen") + 1] = str(port)
            proc, base = start_listener(argv[argv.index("--db") + 1], *argv[argv.index("metrics") + 1:])
            try:
                assert base == "http://127.0.0.1:%d" % port
                with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
                    assert b"redis_stream_group_lag{" in r.read()
            finally:
                assert b"Traceback" not in stop(proc)
            continue
        p = subprocess.run(["bash", "-c", c], capture_output=True, env=env, cwd=tmp_path, timeout=60)
        assert b"Traceback" not in p.stderr, c
        assert p.returncode in ((0, 1, 2) if " check" in c else (0,)), (c, p.stdout, p.stderr)
    assert os.listdir(textdir) == ["xs.prom"]
    if shutil.which("promtool"):
        for block in doc_blocks("yaml"):
            name = block.splitlines()[0].lstrip("# ").strip()
            (tmp_path / name).write_text(block)
        p = subprocess.run(["promtool", "check", "config", "prometheus.yml"], capture_output=True, cwd=tmp_path,
                           timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        assert b"SUCCESS: 3 rules found" in p.stdout + p.stderr


def test_a_long_stream_and_a_long_pel_are_exact_too(tmp_path):
    """Past the first rows the overview reads at once: 100 entries a
    second apart, a group that read 70 (its next entry: the 71st) with
    one of them claimed IDLE 500000 and 3 given back."""
    db = tmp_path / "db"
    start = now_ms()
    t = start - 1_000_000
    ids = ["%d-0" % (t + i * 1000) for i in range(100)]
    lines = ["XADD long %s f %d" % (i, n) for n, i in enumerate(ids)] + [
        "XGROUP CREATE long g 0", "XREADGROUP GROUP g c COUNT 70 STREAMS long >",
        "XCLAIM long g c 0 %s IDLE 500000" % ids[10], "XNACK long g FAIL IDS 3 %s %s %s" % tuple(ids[20:23])]
    assert run_xs(db, lines).returncode == 0
    end = now_ms()
    text, before, after = metrics(db)
    s, _ = parse(text)
    g = dict(db="db0", stream="long", group="g")
    assert value(s, "redis_stream_group_lag", **g) == 30
    assert value(s, "redis_stream_group_messages_pending", **g) == 70
    assert value(s, "redis_stream_group_messages_nacked", **g) == 3
    nxt = t + 70 * 1000
    assert (before - nxt) / 1000 <= value(s, "redis_stream_group_lag_seconds", **g) <= (after - nxt) / 1000
    old = value(s, "redis_stream_group_oldest_pending_age_seconds", **g)
    assert 500 + (before - end) / 1000 <= old <= 500 + (after - start) / 1000
    assert value(s, "redis_stream_group_consumer_messages_pending", consumer="c", **g) == 67


def test_xs_ls_and_xs_metrics_agree(scene):
    """One overview behind both: the same length, pending, largest lag."""
    rows = {r["stream"]: r for r in json.loads(xs(scene, "ls", "--json").stdout)}
    s, _ = parse(metrics(scene)[0])
    ev = rows["events"]
    assert ev["length"] == value(s, "redis_stream_length", db="db0", stream="events")
    assert ev["pending"] == sum(value(s, "redis_stream_group_messages_pending", db="db0", stream="events", group=g)
                                for g in ("g", "h"))
    assert ev["max_lag"] == max(value(s, "redis_stream_group_lag", db="db0", stream="events", group=g)
                                for g in ("g", "h"))
