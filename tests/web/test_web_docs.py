"""docs/monitoring.md's xs web section, as written: each command of its
``shell`` block runs (by bash, with XS_DB set and paths of a real
machine mapped into a directory of the test's), prints its URL and
serves the overview with it, then ends with 0 on SIGTERM; the
screenshots it shows are there; and benchmarks/bench_web.py runs at a
tiny size (as benchmarks/test_benchmarks_run.py runs the others)."""
import base64
import os
import re
import select
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import urllib.request

import pytest

from conftest import ROOT, run_xs, shell_path
from tests.web._web import browser_problem, needs_aiohttp

DOC = os.path.join(ROOT, "docs", "monitoring.md")


def section():
    text = open(DOC, encoding="utf-8").read()
    s = text[text.index("## xs web"):]
    return s[:s.index("\n## ", 1)]


def commands():
    return [line for block in re.findall(r"^```shell\n(.*?)^```$", section(), re.S | re.M)
            for line in block.splitlines()]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_section_shows_commands_and_screenshots_that_exist():
    cmds = commands()
    assert len(cmds) >= 3 and all(re.match(r"xs (--db \S+ )?web\b", c) for c in cmds), cmds
    images = re.findall(r"!\[[^\]]*\]\((img/[^)]+)\)", section())
    assert len(images) >= 2
    for img in images:
        with open(os.path.join(ROOT, "docs", img), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", img


@needs_aiohttp
def test_every_xs_web_command_of_the_doc_runs(tmp_path):
    db = tmp_path / "events.xs"
    assert run_xs(db, ["XADD events * f v", "XGROUP CREATE events workers 0"]).returncode == 0
    env = dict(os.environ, PATH=shell_path(tmp_path), XS_DB=str(db))
    for c in commands():
        c = c.replace("/srv/app/events.xs", str(db))
        password = None
        if "--tls-cert-file" in c:
            if not shutil.which("openssl"):
                continue
            subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                            "/CN=127.0.0.1", "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                           check=True, capture_output=True, timeout=60)
        if "--requirepass-file" in c:
            password = "doc-pass"
            (tmp_path / "web.pass").write_text(password + "\n")
        c = re.sub(r"--listen (\S+:)?\d+", lambda m: "--listen %s%d" % (m.group(1) or "", free_port()), c)
        p = subprocess.Popen(["bash", "-c", "exec " + c], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=str(tmp_path), env=env)
        try:
            ready, _, _ = select.select([p.stdout], [], [], 30)
            line = p.stdout.readline().decode().strip() if ready else ""
            m = re.match(r"(https?)://[^/:]+:(\d+)/\?token=(\S+)$", line)
            assert m, (c, line, p.stderr.read1().decode() if p.poll() is not None else "")
            scheme, port, token = m.groups()
            req = urllib.request.Request("%s://127.0.0.1:%s/api/overview?token=%s" % (scheme, port, token))
            if password:
                req.add_header("Authorization", "Basic " + base64.b64encode(b"me:" + password.encode()).decode())
            ctx = None
            if scheme == "https":
                ctx = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
                ctx.check_hostname = False
            with urllib.request.urlopen(req, timeout=30, context=ctx) as r:
                assert r.status == 200 and b'"events"' in r.read(), c
        finally:
            p.send_signal(signal.SIGTERM)
            p.wait(20)
            err = p.stderr.read().decode()
            p.stdout.close()
            p.stderr.close()
        assert p.returncode == 0 and "Traceback" not in err, (c, err)


@pytest.mark.skipif(browser_problem() is not None, reason=browser_problem() or "")
def test_the_benchmark_runs_at_a_tiny_size():
    p = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_web.py"), "--entries", "2000", "--runs", "1"],
                       capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "Traceback" not in p.stderr
    assert "first page of entries" in p.stdout, p.stdout
