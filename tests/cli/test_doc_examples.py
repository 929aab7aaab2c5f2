"""The examples of the man pages and of the porcelain commands' --help
run as written: each line by a shell in a directory of its own, with
XS_DB set to a store there that holds a stream ``events`` (and the
dead-letter stream ``jobs:dead`` the redrive examples name).  A line
that follows forever (``tail -f``) is stopped once it printed; paths of
a real machine (/srv/archive) are mapped into that directory.  xs
archive's line needs Spark: tests/spark runs the recipes that archive."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ROOT, XS, shell_path

MAN = os.path.join(ROOT, "man", "xs.1")


def man_examples():
    """The command lines of xs.1's EXAMPLES section, unescaped."""
    text = open(MAN, encoding="utf-8").read().split(".SH EXAMPLES", 1)[1].split("\n.SH ", 1)[0]
    lines = re.findall(r"\.nf\n(.*?)\n\.fi", text, re.S)
    return [l.replace("\\-", "-").replace("\\en", "\\n").replace("\\e", "\\") for l in lines]


def help_examples():
    """(command, line) of every example in a porcelain --help text (a line
    that starts with xs, redis-cli or crontab:)."""
    from xstream_cli.porcelain import commands
    out = []
    for name, cmd in sorted(commands()[1].items()):
        text = subprocess.run(XS + [name, "--help"], capture_output=True, cwd=ROOT, timeout=60).stdout.decode()
        for line in text.splitlines():
            s = line.strip()
            m = re.match(r"crontab:\s+(?:\S+\s+){5}(xs .*)$", s)
            if m:
                out.append((name, m.group(1)))
            elif s.startswith(("xs ", "redis-cli ")) and not s.startswith("xs export (") and "redis-cli splits" not in s:
                out.append((name, s))
    return out


@pytest.fixture
def sandbox(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PATH=shell_path(tmp_path),
               PYTHONPATH=ROOT, XS_DB=str(work / "store"))
    lines = b"XADD events * user alice action login\nXADD jobs 1-1 file cat.png\n"
    assert subprocess.run(XS, input=lines, env=env, cwd=ROOT, capture_output=True, timeout=60).returncode == 0
    # one dead letter in jobs:dead, as xs worker writes it
    p = subprocess.run(XS + ["worker", "jobs", "-g", "g", "-c", "c", "--once", "-q", "--max-deliveries", "1",
                             "--dead-letter", "jobs:dead", "--", "false"], env=env, cwd=ROOT, capture_output=True,
                       timeout=60)
    assert p.returncode == 1, p.stderr
    return work, env


def run_line(line, work, env):
    """Run one example line with bash; a line ending in & (a server) is
    left running and stopped at the end of the test by the caller."""
    line = line.replace("/srv/archive", str(work / "archive"))
    if " -f " in " %s " % line and "tail" in line:            # follows forever: stop it once it printed
        import select
        p = subprocess.Popen(["bash", "-c", "exec " + line], cwd=str(work), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        try:
            time.sleep(1.0)                                    # a new group starts at $: add after it is there
            subprocess.run(XS + ["XADD", "events", "*", "followed", "1"], env=env, cwd=ROOT, timeout=60,
                           capture_output=True)
            ready, _, _ = select.select([p.stdout], [], [], 30)
            first = p.stdout.readline() if ready else b""
        finally:
            os.killpg(p.pid, signal.SIGINT)
            p.wait(timeout=30)
        assert b"followed" in first and p.returncode == -signal.SIGINT, (line, first, p.stderr.read())
        return
    p = subprocess.run(["bash", "-c", line], cwd=str(work), env=env, capture_output=True, timeout=120)
    assert p.returncode == 0, (line, p.stdout[-1000:], p.stderr[-2000:])


def test_the_man_page_examples_run_as_written(sandbox):
    work, env = sandbox
    lines = man_examples()
    assert "xs tail -f --group workers --consumer w1 events" in lines and len(lines) >= 6
    subprocess.run(["bash", "-c", "xs XADD events '*' user bob"], cwd=str(work), env=env, timeout=60)
    for line in lines:
        run_line(line, work, env)


def test_every_porcelain_help_example_runs_as_written(sandbox):
    work, env = sandbox
    examples = help_examples()
    names = {n for n, _ in examples}
    assert {"trim", "compact", "redrive", "serve", "archive"} <= names, examples
    servers = []
    try:
        for name, line in examples:
            if name == "archive":
                continue                  # needs Spark: the archive recipes run in tests/spark
            if line.endswith("&"):
                p = subprocess.Popen(["bash", "-c", "exec " + line[:-1]], cwd=str(work), env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                servers.append(p)
                sock = re.search(r"--db (\S+) serve", line)
                deadline = time.monotonic() + 20
                while sock and not os.path.exists(os.path.join(str(work), sock.group(1), "serve.sock")):
                    assert p.poll() is None and time.monotonic() < deadline, line
                    time.sleep(0.05)
                continue
            if line.startswith("redis-cli") and not shutil.which("redis-cli"):
                continue
            run_line(line, work, env)
    finally:
        for p in servers:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)


def test_the_json_lines_example_of_the_snapshot_format_imports_and_exports_back_as_written(tmp_path):
    """docs/snapshot-format.md's JSON-lines example (an entry, then the
    --meta lines; a line the doc wraps is one record) is a file xs
    import takes, and xs export --meta writes it back record for record."""
    import json
    text = open(os.path.join(ROOT, "docs", "snapshot-format.md"), encoding="utf-8").read()
    section = text.split("One JSON object per line", 1)[1].split("# Redis / Valkey bridge", 1)[0]
    records = []
    for line in section.split("\n"):
        if line.startswith("    {"):
            records.append(line[4:])
        elif line.startswith("     \"") and records:
            records[-1] += line[5:]
    assert len(records) == 7, records
    src = tmp_path / "doc.jsonl"
    src.write_text("\n".join(records) + "\n")
    db = tmp_path / "db"
    p = subprocess.run(XS + ["--db", str(db), "import", str(src)], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(XS + ["--db", str(db), "export", "--meta"], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [json.loads(l) for l in p.stdout.splitlines()] == [json.loads(r) for r in records]
