"""The engine returns data and the command line renders it: no verb and
no transaction method writes an ID as Redis's ``ms-seq`` text or reads
one back (storage/verbs, storage/txn.py, and the whole-store operations
that use their results), so a reply's shape is decided in one place,
xstream_cli (commands/, output/)."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENGINE = sorted((ROOT / "storage" / "verbs").glob("*.py")) + [ROOT / "storage" / "txn.py"]
USERS = [ROOT / "storage" / "ops" / "overview.py", ROOT / "storage" / "ops" / "worker.py"]
# where an ID's text is written on purpose, and why
EXEMPT = {"load.py": "the loader's error texts (LoadError, xs import and COPY) name the entry by its ID"}


def _offences(path, reading_too):
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes) and b"%d-%d" in node.value:
            bad.append("%s:%d formats an ID" % (path.name, node.lineno))
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == "fmt":
                bad.append("%s:%d formats an ID (fmt)" % (path.name, node.lineno))
            if (reading_too and name == "split" and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value == b"-"):
                bad.append("%s:%d parses an ID's text" % (path.name, node.lineno))
    return bad


def test_no_verb_and_no_transaction_method_formats_an_id():
    bad = [b for p in ENGINE if p.name not in EXEMPT for b in _offences(p, True)]
    assert not bad, bad


def test_whole_store_operations_read_the_verbs_ids_without_parsing_text():
    bad = [b for p in USERS for b in _offences(p, True) if "parses" in b]
    assert not bad, bad


def test_the_check_would_notice_a_formatted_id(tmp_path):
    p = tmp_path / "verb.py"
    p.write_text('def f(i):\n    return b"%d-%d" % i, fmt(i), b"1-2".split(b"-")\n')
    assert len(_offences(p, True)) == 3
