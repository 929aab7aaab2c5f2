"""A real Prometheus (Debian's ``prometheus`` package) scrapes
``xs metrics --listen`` and ``xs serve --metrics`` every second, and its query API returns the lag,
lag in seconds and oldest-pending age the test set up (exact to the
entry, within 1 s); node_exporter's textfile collector (Debian's
``prometheus-node-exporter``) reads the file ``xs metrics --outfile``
writes.  Skipped, with the reason, without those programs."""
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.cli.test_metrics import ROOT, XS, make_scene, parse, start_listener, stop, value, xs


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def wait_for(fn, timeout=60, what="it"):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            v = fn()
            if v is not None:
                return v
        except OSError as e:     # not listening yet
            last = e
        time.sleep(0.3)
    raise AssertionError("timed out waiting for %s (%s)" % (what, last))


def start_serve(db, port):
    """xs serve --metrics 127.0.0.1:PORT (on its private Unix socket)
    started; (process, base URL), from its log line."""
    proc = subprocess.Popen(XS + ["--db", str(db), "serve", "--metrics", "127.0.0.1:%d" % port],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    seen = []
    for line in iter(proc.stderr.readline, b""):
        seen.append(line.decode())
        m = re.search(r"serving metrics at (http://\S+)/metrics", seen[-1])
        if m:
            return proc, m.group(1)
        if len(seen) > 20:
            break
    proc.kill()
    raise AssertionError("".join(seen))


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is needed (Debian's prometheus package)")
@pytest.mark.parametrize("how", ["xs metrics --listen", "xs serve --metrics"])
def test_prometheus_scrapes_xs(tmp_path, how):
    scene = make_scene(tmp_path / "db")
    if how == "xs serve --metrics":
        proc, base = start_serve(scene, free_port())
    else:
        proc, base = start_listener(scene, "--listen", "127.0.0.1:%d" % free_port())
    target = base[len("http://"):]
    port = free_port()
    conf = tmp_path / "prometheus.yml"
    conf.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: xs\n    static_configs:\n      - targets: ['%s']\n" % target)
    prom = subprocess.Popen(["prometheus", "--config.file", str(conf), "--storage.tsdb.path", str(tmp_path / "tsdb"),
                             "--web.listen-address", "127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "prometheus.log", "wb"), cwd=tmp_path)
    try:
        api = "http://127.0.0.1:%d/api/v1/query?query=" % port

        def query(q):
            doc = json.loads(get(api + urllib.parse.quote(q)))
            assert doc["status"] == "success", doc
            res = doc["data"]["result"]
            return (float(res[0]["value"][1]), float(res[0]["value"][0])) if res else None

        def samples(q):
            """(scrape time in ms, value) of the series' samples of the last 10 s."""
            doc = json.loads(get(api + urllib.parse.quote(q + "[10s]")))
            assert doc["status"] == "success", doc
            out = [(float(ts) * 1000, float(v)) for ts, v in doc["data"]["result"][0]["values"]]
            assert out
            return out

        lag, _ = wait_for(lambda: query('redis_stream_group_lag{stream="events",group="g"}'), what="a scrape")
        assert lag == 2
        # the raw samples, each at its scrape's time T: the lag in seconds is
        # T less e3's ID, and the oldest pending age T less e1's claimed
        # delivery time (90 s before the claim, made between start and end)
        e3 = int(scene.ids[2].split("-")[0])
        for t, v in samples('redis_stream_group_lag_seconds{stream="events",group="g"}'):
            assert 0 <= v - (t - e3) / 1000 <= 1, (t, v)
        for t, v in samples('redis_stream_group_oldest_pending_age_seconds{stream="events",group="g"}'):
            assert 90 + (t - scene.end) / 1000 <= v <= 90 + (t - scene.start) / 1000 + 1, (t, v)
        # the series carry redis_exporter's labels
        doc = json.loads(get(api + urllib.parse.quote('redis_stream_group_messages_pending{group="g"}')))
        metric = doc["data"]["result"][0]["metric"]
        assert metric["db"] == "db0" and metric["stream"] == "events" and metric["job"] == "xs"
        nacked, _ = query('redis_stream_group_messages_nacked{stream="events",group="g"}')
        assert nacked == 1
    finally:
        prom.terminate()
        try:
            prom.wait(20)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait(10)
        stop(proc)


@pytest.mark.skipif(shutil.which("prometheus-node-exporter") is None and shutil.which("node_exporter") is None,
                    reason="node_exporter is needed (Debian's prometheus-node-exporter package)")
def test_node_exporter_textfile_collector_reads_the_outfile(tmp_path):
    scene = make_scene(tmp_path / "db")
    textdir = tmp_path / "textfile"
    textdir.mkdir()
    p = xs(scene, "metrics", "--outfile", str(textdir / "xs.prom"))
    assert p.returncode == 0, p.stderr
    port = free_port()
    exe = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    ne = subprocess.Popen([exe, "--collector.disable-defaults", "--collector.textfile",
                           "--collector.textfile.directory", str(textdir), "--web.listen-address",
                           "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                          stderr=open(tmp_path / "node_exporter.log", "wb"))
    try:
        text = wait_for(lambda: get("http://127.0.0.1:%d/metrics" % port), what="node_exporter")
        s, _ = parse("\n".join(l for l in text.splitlines() if l.startswith("redis_")))
        assert value(s, "redis_stream_group_lag", db="db0", stream="events", group="g") == 2
        assert value(s, "redis_stream_dead_letters", db="db0", stream="jobs:dead", origin_stream="jobs",
                     origin_group="w") == 2
        # the collector read the file without an error
        assert 'node_textfile_scrape_error 0' in text
    finally:
        ne.terminate()
        ne.wait(20)
