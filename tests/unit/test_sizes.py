"""Files and classes small enough to hold one idea: no module of storage/
or xstream_cli/ over 600 lines, no class over 420 (issue 39: "no file
over about 600 lines anywhere in storage/ and xstream_cli/, and no class
over about 400").  A module that outgrows this is split by idea, as
storage/spark/ (options, columns, reading, streaming, writing) was."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
MAX_FILE_LINES = 600
MAX_CLASS_LINES = 420


def _modules():
    for top in ("storage", "xstream_cli"):
        yield from sorted((ROOT / top).rglob("*.py"))


def test_no_module_is_longer_than_600_lines():
    long = []
    for p in _modules():
        n = len(p.read_text().splitlines())
        if n > MAX_FILE_LINES:
            long.append("%s: %d lines" % (p.relative_to(ROOT), n))
    assert not long, long


def test_no_class_is_longer_than_about_400_lines():
    long = []
    for p in _modules():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append("%s: class %s is %d lines" % (p.relative_to(ROOT), node.name,
                                                          node.end_lineno - node.lineno + 1))
    assert not long, long
