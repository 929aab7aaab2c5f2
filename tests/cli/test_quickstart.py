"""The README's quick start, run as written by bash in a copy of the
sources: a fresh virtual environment (so it works where the system
Python refuses `pip install`, PEP 668), the package installed into it,
two commands on the default store; then `man xs` finds the page the
package installed.  Slow (a real pip install): about a minute."""
import os
import re
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def quick_start_line():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    (line,) = [l.strip() for l in section.splitlines() if l.startswith("    ")]
    return line


def test_the_readme_quick_start_runs_as_written_and_man_xs_works(tmp_path):
    line = quick_start_line()
    assert line.startswith("python3 -m venv .venv && .venv/bin/pip install . && .venv/bin/xs XADD")
    src = tmp_path / "src"
    src.mkdir()
    for rel in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, rel), src / rel)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for rel in ("xstream_cli", "storage", "man", "bin"):
        shutil.copytree(os.path.join(ROOT, rel), src / rel, ignore=ignore)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "XS_DB", "XDG_DATA_HOME", "PYTHONHOME", "MANPATH")}
    env.update(HOME=str(home), PIP_DISABLE_PIP_VERSION_CHECK="1")
    p = subprocess.run(["bash", "-c", line], cwd=str(src), env=env, capture_output=True, timeout=900)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0 and ("No matching distribution found" in err or "ensurepip is not available" in err):
        pytest.skip("this machine cannot make a venv or fetch packages: %s" % err.strip().splitlines()[-1])
    assert p.returncode == 0, err[-3000:]
    out = p.stdout.decode()
    assert re.search(r"^\d+-0$", out, re.M) and "alice" in out and "login" in out, out
    assert (home / ".local" / "share" / "xstream" / "data.mdb").exists()      # the default store
    man = shutil.which("man")
    if man is None:
        pytest.skip("no man on this machine")
    env["PATH"] = "%s:/usr/bin:/bin" % (src / ".venv" / "bin")
    p = subprocess.run([man, "-w", "xs"], capture_output=True, env=env, timeout=60)
    assert p.returncode == 0 and p.stdout.decode().strip() == str(src / ".venv" / "share" / "man" / "man1" / "xs.1")
