"""Every recipe of ``xs help recipes`` / docs/recipes.md runs as written
(xstream_cli.recipes): each block by bash with ``set -e`` in an empty
directory, with XS_DB set to a store there that already holds a stream
``events``; commands left running (``&``) are stopped at the end.  The
recipes that need Spark run in tests/spark/test_recipes_spark.py."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, XS, shell_path
from xstream_cli.recipes import RECIPES

NEEDS_SPARK = [r for r in RECIPES if "spark" in r[3]]


def run_recipe(tmp_path, recipe):
    title, _, commands, needs = recipe
    if "redis-py" in needs:
        pytest.importorskip("redis")
        if not shutil.which("redis-cli"):
            pytest.skip("redis-cli is not installed")
    work = tmp_path / "work"
    work.mkdir()
    path = shell_path(tmp_path)      # python3 is the one that has xs (and redis-py)
    env = dict(os.environ, PATH=path, PYTHONPATH=ROOT, XS_DB=str(work / "store"),
               PYSPARK_PYTHON=sys.executable)
    seed = subprocess.run(XS + ["XADD", "events", "*", "user", "alice", "action", "login"], env=env, cwd=ROOT,
                          capture_output=True, timeout=60)
    assert seed.returncode == 0, seed.stderr
    script = ("set -e\ntrap 'rc=$?; j=$(jobs -p); [ -z \"$j\" ] || kill $j 2>/dev/null; wait; exit $rc' EXIT\n"
              + "\n".join(commands) + "\n")
    p = subprocess.run(["bash", "-c", script], cwd=str(work), env=env, capture_output=True, timeout=600)
    assert p.returncode == 0, (title, p.stdout[-2000:], p.stderr[-3000:])
    return p


@pytest.mark.parametrize("recipe", [r for r in RECIPES if "spark" not in r[3]], ids=lambda r: r[0])
def test_the_recipe_runs_as_written(tmp_path, recipe):
    run_recipe(tmp_path, recipe)


def test_xs_help_recipes_prints_every_recipe_and_its_commands():
    p = subprocess.run(XS + ["help", "recipes"], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0
    text = p.stdout.decode()
    for title, _, commands, _ in RECIPES:
        assert title in text
        for c in commands:
            assert "    " + c + "\n" in text
