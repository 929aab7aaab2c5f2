"""Checks no one here wrote: redis-py's own stream tests against ``xs serve``.

The source distribution of the redis-py release installed here is
downloaded at test time (``pip download --no-binary :all: --no-deps
redis==<installed version>``, kept in a cache directory between runs:
$XS_REDIS_PY_CACHE, else under the temporary directory) and its X* tests
(``-k test_x`` over tests/test_commands.py and
tests/test_asyncio/test_commands.py) are run with ``--redis-url``
pointing at ``xs serve``, in RESP2 and RESP3, and again on the
in-process client (xstream_cli.client, through the plugin
inprocess_plugin.py).  Nothing of redis-py's tests is kept in this
repository.

Skipped with the reason said: no network (the download fails), no
pytest-asyncio (the asyncio file needs it).

Exclusions: none.  redis-py itself skips two tests per file (twice in
the asyncio file, which runs each test with two clients) because they
pin behaviour of Redis versions before 8.2.2 and xs serve reports
8.10.0.
"""
import glob
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile

import pytest

redis = pytest.importorskip("redis")

from tests.harness.served import Served  # noqa: E402

FILES = {"sync": "tests/test_commands.py", "asyncio": "tests/test_asyncio/test_commands.py"}
# at least this many must pass (redis-py 8.1.0 has 65 and 54 X* tests; the
# asyncio file runs each with two clients); a change of release may add some
MIN_PASSED = {"sync": 60, "asyncio": 100}


@pytest.fixture(scope="module")
def redis_py_source():
    version = redis.__version__
    cache = os.environ.get("XS_REDIS_PY_CACHE") or os.path.join(tempfile.gettempdir(), "xs-redis-py-sdist")
    os.makedirs(cache, exist_ok=True)
    root = os.path.join(cache, "redis-%s" % version)
    if not os.path.isdir(os.path.join(root, "tests")):
        sdists = glob.glob(os.path.join(cache, "redis-%s.tar.gz" % version))
        if not sdists:
            p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                                "--disable-pip-version-check", "-q", "redis==%s" % version, "-d", cache],
                               capture_output=True, text=True, timeout=900)
            sdists = glob.glob(os.path.join(cache, "redis-%s.tar.gz" % version))
            if p.returncode != 0 or not sdists:
                pytest.skip("cannot download redis-py %s's source distribution (offline?): %s"
                            % (version, (p.stderr.strip().splitlines() or ["no output"])[-1]))
        with tarfile.open(sdists[0]) as t:
            t.extractall(cache, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(cache)
    return root


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("which", ["sync", "asyncio"])
def test_redis_py_stream_tests_pass_against_xs_serve(redis_py_source, tmp_path, which, protocol):
    if which == "asyncio":
        pytest.importorskip("pytest_asyncio", reason="redis-py's asyncio tests need pytest-asyncio")
    s = Served(tmp_path / "store")
    try:
        _run_redis_py_tests(redis_py_source, which, protocol, "redis://127.0.0.1:%d" % s.port)
    finally:
        s.stop(signal.SIGKILL)


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("which", ["sync", "asyncio"])
def test_redis_py_stream_tests_pass_on_the_in_process_client(redis_py_source, tmp_path, which, protocol):
    """The same tests with xstream_cli.client's clients (issue 28): the
    plugin tests/compat/inprocess_plugin.py makes ``xs://PATH`` URLs
    in-process clients wherever redis-py's tests make a client."""
    if which == "asyncio":
        pytest.importorskip("pytest_asyncio", reason="redis-py's asyncio tests need pytest-asyncio")
    here = os.path.dirname(os.path.abspath(__file__))
    _run_redis_py_tests(redis_py_source, which, protocol, "xs://%s" % (tmp_path / "store"),
                        ["-p", "inprocess_plugin"],
                        {"PYTHONPATH": os.pathsep.join([os.path.dirname(os.path.dirname(here)), here])})


def _run_redis_py_tests(redis_py_source, which, protocol, url, extra=(), env=None):
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "ignore", "-q"] +
                       list(extra) + [FILES[which], "-k", "test_x", "--redis-url", url,
                                      "--protocol", str(protocol), "-rfEs"],
                       cwd=redis_py_source, capture_output=True, text=True, timeout=900,
                       env=dict(os.environ, **(env or {})))
    out = p.stdout + p.stderr
    summaries = [l for l in p.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", l)]
    summary = summaries[-1].strip("= ") if summaries else ""
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error|errors)", summary)}
    print("redis-py %s %s RESP%d: %s" % (redis.__version__, which, protocol, summary))
    assert counts.get("failed", 0) == 0 and counts.get("error", 0) + counts.get("errors", 0) == 0, out[-6000:]
    assert counts.get("passed", 0) >= MIN_PASSED[which], out[-6000:]
