"""The test tiers keep to their ground: a module of tests/engine tests the
engine as the library is used (Store, Txn and the parts), so it never
imports the command line (xstream_cli), not even through a helper of
tests/ it imports, and never starts the ``xs`` program (conftest's XS,
run_xs, xs_json, shell_path and the ``run`` / ``xs_cmd`` fixtures,
tests/harness's Served, or an argv naming xstream_cli or bin/xs).
Imports inside functions count.  A test that needs any of these belongs
in tests/cli (or serve, compat, system)."""
import ast
import functools
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# names whose use starts xs: conftest's helpers, and tests/harness's server
STARTS_XS = {"XS", "run_xs", "xs_json", "shell_path", "Served"}
# conftest's fixtures that start xs
XS_FIXTURES = {"run", "xs_cmd"}


def _is_cli(module):
    return module == "xstream_cli" or module.startswith("xstream_cli.")


def _imports(tree):
    """(line, module, names) of every import in ``tree``, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module, [a.name for a in node.names]


def _test_module_path(module):
    """The file of a module of tests/ (``tests.x.y`` or ``conftest``), or None."""
    if module == "conftest":
        module = "tests.conftest"
    if not module.startswith("tests."):
        return None
    base = os.path.join(ROOT, *module.split("."))
    for p in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(p):
            return p
    return None


@functools.lru_cache(maxsize=None)
def _imports_the_cli(path, seen=()):
    """The chain of tests/ modules by which ``path`` imports xstream_cli,
    or None if it does not."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    for line, module, names in _imports(tree):
        candidates = [module] + ["%s.%s" % (module, n) for n in names]
        if any(_is_cli(m) for m in candidates):
            return ["%s:%d imports %s" % (os.path.relpath(path, ROOT), line, module)]
        for m in candidates:
            helper = _test_module_path(m)
            if helper and helper != path and helper not in seen:
                chain = _imports_the_cli(helper, seen + (path,))
                if chain:
                    return ["%s:%d imports %s" % (os.path.relpath(path, ROOT), line, m)] + chain
    return None


def engine_tier_faults(path, src):
    """What in the engine-tier module ``path`` (source ``src``) reaches
    the command line or starts xs."""
    tree = ast.parse(src)
    out = []
    for line, module, names in _imports(tree):
        if _is_cli(module):
            out.append("%s:%d imports %s" % (path, line, module))
        for n in names:
            if n in STARTS_XS:
                out.append("%s:%d imports %s, which starts xs" % (path, line, n))
    for m in {m for _, module, names in _imports(tree) for m in [module] + ["%s.%s" % (module, n) for n in names]}:
        helper = _test_module_path(m)
        if helper:
            chain = _imports_the_cli(helper)
            if chain:
                out.append("%s imports %s, which imports the command line: %s" % (path, m, "; ".join(chain)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and ("xstream_cli" in node.value or node.value.endswith("bin/xs")):
            out.append("%s:%d names the xs program (%r)" % (path, node.lineno, node.value[:40]))
        elif isinstance(node, ast.Attribute) and node.attr in STARTS_XS:
            out.append("%s:%d uses %s, which starts xs" % (path, node.lineno, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            used = {a.arg for a in node.args.args + node.args.kwonlyargs} & XS_FIXTURES
            if used and (node.name.startswith("test") or any(
                    "fixture" in ast.dump(d) for d in node.decorator_list)):
                out.append("%s:%d %s takes the fixture %s, which starts xs" % (
                    path, node.lineno, node.name, ", ".join(sorted(used))))
    return sorted(set(out))


def _engine_modules():
    for p in sorted(glob.glob(os.path.join(ROOT, "tests", "engine", "**", "*.py"), recursive=True)):
        yield os.path.relpath(p, ROOT), open(p, encoding="utf-8").read()


def test_the_engine_tier_neither_imports_the_command_line_nor_starts_xs():
    faults = [f for path, src in _engine_modules() for f in engine_tier_faults(path, src)]
    assert not faults, "tests/engine must test the engine as the library is used:\n" + "\n".join(faults)


BAD = {
    "import from xstream_cli": "from xstream_cli.commands import lookup\n",
    "import xstream_cli": "import xstream_cli.server.resp\n",
    "import inside a function": "def f():\n    from xstream_cli import client\n",
    "a helper that imports it": "from tests.harness.commands import cmd\n",
    "run_xs": "from tests.conftest import run_xs\n",
    "XS": "from conftest import XS\n",
    "Served": "from tests.harness.served import Served\n",
    "conftest.XS": "import tests.conftest\nargv = tests.conftest.XS\n",
    "an argv": "import subprocess, sys\nsubprocess.run([sys.executable, '-m', 'xstream_cli', 'XLEN', 's'])\n",
    "the run fixture": "def test_a(run):\n    run(['XLEN s'])\n",
    "the xs_cmd fixture": "def test_b(tmp_path, xs_cmd):\n    pass\n",
}


@pytest.mark.parametrize("src", list(BAD.values()), ids=list(BAD))
def test_the_check_sees_each_way_of_reaching_the_command_line(src):
    assert engine_tier_faults("tests/engine/example.py", src)


def test_the_check_lets_the_library_and_other_processes_be():
    src = ("import subprocess, sys\nfrom storage.store import Store\nfrom tests.conftest import ROOT\n"
           "from tests.harness.stores import full_dump\n"
           "def test_c(store, tmp_path):\n    subprocess.run(['sleep', '0'])\n"
           "    subprocess.run([sys.executable, '-c', 'import storage'], cwd=ROOT)\n")
    assert engine_tier_faults("tests/engine/example.py", src) == []
