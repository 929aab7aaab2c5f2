"""The porcelain package's registry (xstream_cli/porcelain/__init__.py):
every module there either registers commands or is a declared helper,
which ``register_all`` does not import on every start of the click
application (the completion scripts' text is loaded only when a script
is asked for)."""
import ast
import pathlib
import subprocess
import sys

from xstream_cli import porcelain

ROOT = pathlib.Path(__file__).resolve().parents[2]
PKG = ROOT / "xstream_cli" / "porcelain"


def _defines_register(path):
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body)


def test_every_porcelain_module_registers_commands_or_is_a_declared_helper():
    mods = {p.stem: p for p in PKG.glob("*.py") if p.stem != "__init__"}
    mods.update({p.name: p / "__init__.py" for p in PKG.iterdir() if (p / "__init__.py").is_file()})
    assert porcelain.HELPERS <= set(mods), porcelain.HELPERS - set(mods)
    wrong = sorted(name for name, p in mods.items() if _defines_register(p) == (name in porcelain.HELPERS))
    assert not wrong, wrong


def test_help_does_not_load_the_completion_scripts():
    code = ("import sys\nfrom xstream_cli.app import run_click\n"
            "try:\n    run_click(['--help'])\nexcept SystemExit:\n    pass\n"
            "print('xstream_cli.porcelain.complete_scripts' in sys.modules, file=sys.stderr)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=60)
    assert p.stderr.strip().splitlines()[-1] == "False", p.stderr
