"""The shell examples of the documentation for pipes, tail, import and
backups, the README's first commands and recipes, and the Python example,
run as written (the worker and crontab examples have their own tests in
test_worker.py and test_trim_porcelain.py, the quick start in
test_quickstart.py).  Each example must appear in the documentation --
README.md, docs/*.md, CHANGELOG.md, CONTRIBUTING.md -- word for word, so
the documentation cannot drift from what is run."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


# every markdown file of the documentation, by path relative to ROOT
DOC_FILES = ["README.md", "CHANGELOG.md", "CONTRIBUTING.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
DOCS = {rel: _read(rel) for rel in DOC_FILES}
README = DOCS["README.md"]
GUIDE = "docs/guide.md"


@pytest.fixture
def sh(tmp_path):
    """Run a bash line with `xs` on PATH (this checkout) and XS_DB set to
    a fresh store; returns (stdout, stderr, exit status)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    xs = bindir / "xs"
    xs.write_text('#!/bin/sh\nexec "%s" -m xstream_cli "$@"\n' % sys.executable)
    xs.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")), XS_DB=str(tmp_path / "store"),
               PYTHONPATH=ROOT, LC_ALL="C.UTF-8")

    def run(line, stdin=b""):
        p = subprocess.run(["bash", "-o", "pipefail", "-c", line], input=stdin, capture_output=True, env=env,
                           cwd=str(tmp_path), timeout=120)
        return p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace"), p.returncode
    run.cwd = str(tmp_path)
    return run


def in_docs(line, where=None):
    """``line``, once checked to be shown by the documentation (by the file
    ``where`` if given)."""
    files = [where] if where else DOC_FILES
    assert any(line in DOCS[rel] for rel in files), "the documentation (%s) no longer shows: %s" % (
        ", ".join(files), line)
    return line


def marked_block(rel, marker):
    """The indented lines between the two ``<!-- marker -->`` lines of a
    documentation file, without their indentation."""
    parts = DOCS[rel].split("<!-- %s -->" % marker)
    assert len(parts) == 3, "%s must mark its example by <!-- %s --> twice" % (rel, marker)
    return [l[4:] for l in parts[1].splitlines() if l.startswith("    ")]


def test_the_using_it_lines_run(sh):
    """docs/guide.md, Scripts and pipes."""
    out, err, code = sh(in_docs("xs XADD events '*' user alice action login", GUIDE))
    assert code == 0 and out.strip().endswith("-0"), err
    out, err, code = sh(in_docs("printf 'XADD s * a 1\\nXLEN s\\n' | xs", GUIDE))
    assert code == 0 and out.splitlines()[-1] == "1", err
    line = in_docs("xs --json XREAD COUNT 10 STREAMS events 0 | jq .", GUIDE)
    if shutil.which("jq") is None:
        line = line.replace(" | jq .", "")
    out, err, code = sh(line)
    assert code == 0, err
    assert "alice" in out and json.loads(out)["events"][0][1] == ["user", "alice", "action", "login"]


def test_the_import_lines_run(sh):
    out, err, code = sh(in_docs("""printf '%s\\n' '{"user":"u1","n":3}' | xs import --stream events""", GUIDE))
    assert code == 0, err
    out, err, code = sh("producer() { printf 'user=u2 action=click\\nuser=u3 note=\"two words\"\\n'; }; "
                        + in_docs("producer | xs import --stream events --format kv -", GUIDE))
    assert code == 0, err
    out, _, _ = sh("xs --json XRANGE events - +")
    assert [e[1] for e in json.loads(out)] == [["user", "u1", "n", "3"], ["user", "u2", "action", "click"],
                                               ["user", "u3", "note", "two words"]]


def test_the_expire_example_runs(sh):
    """docs/guide.md, Retention: a job's progress stream with a TTL."""
    out = [sh(line) for line in marked_block(GUIDE, "expire example")]
    assert [code for _, _, code in out] == [0, 0, 0], out
    assert out[1][0] == "1\n" and out[2][0] in ("3600\n", "3599\n")
    ls, _, _ = sh("xs ls --json")
    assert 3_500_000 < json.loads(ls)[0]["ttl_ms"] <= 3_600_000


def test_export_into_import_copies_and_tail_greps_utf8(sh):
    """(The copy line also with more than xs tail's 10 entries:
    test_docs_followed.py.)"""
    sh("xs XADD s '*' city München a 1 && xs XADD s '*' city Paris")
    out, err, code = sh(in_docs("xs export s | xs --db other import", GUIDE))
    assert code == 0, err
    a, _, _ = sh("xs --json XRANGE s - +")
    b, _, _ = sh("xs --db other --json XRANGE s - +")
    assert a == b and "München" in a
    out, err, code = sh(in_docs("xs tail s | grep München", GUIDE))
    assert code == 0 and out.count("\n") == 1 and "city=München" in out, (out, err)


# --------------------------------------------------- README: first commands

def test_the_readme_first_commands_print_what_it_shows(sh):
    """Each ``$ xs ...`` line run in turn on one store; its output must be
    the lines shown under it (IDs, which depend on the clock, aside)."""
    block = marked_block("README.md", "first commands")
    commands = [(l[2:], []) for l in block if l.startswith("$ ")]
    assert len(commands) >= 5 and all(c.startswith("xs ") for c, _ in commands)
    i = -1
    for l in block:
        if l.startswith("$ "):
            i += 1
        else:
            commands[i][1].append(l)
    def ids(text):
        return re.sub(r"\d+-\d+", "ID", text)
    for command, shown in commands:
        out, err, code = sh(command)
        assert code == 0, (command, err)
        assert ids(out).splitlines() == [ids(l) for l in shown], (command, out)


def test_the_readme_recipes_quote_the_docs():
    """Every command of the README's recipes is shown, word for word, on
    the documentation page it links to (where its test runs it); ``CMD``
    stands for the user's own command."""
    section = README.split("## Recipes by task", 1)[1].split("\n## ", 1)[0]
    spans = [c for c in re.findall(r"`([^`]+)`", section.replace("\n  ", " ")) if "xs " in c or "createClient" in c]
    assert len(spans) >= 8
    first_screen = "\n".join(README.splitlines()[:40])
    for recipe in ("Run a worker", "Trim nightly", "Back up and restore", "Point a Node app at xs"):
        assert recipe in section and recipe in first_screen, "%r must be on the README's first screen" % recipe
    pages = [rel for rel in DOC_FILES if rel.startswith("docs/")]
    for span in spans:
        quoted = span[:-len(" CMD")] if span.endswith(" CMD") else span
        assert any(quoted in DOCS[rel] for rel in pages), "no page of docs/ shows the recipe's %r" % span


# ------------------------------------------------------- docs/guide.md: backups

def test_the_backup_lines_run(sh):
    lines = marked_block(GUIDE, "backup example")
    assert [l.split()[:2] for l in lines] == [["xs", "save"], ["xs", "restore"], ["xs", "restore"], ["xs", "save"]]
    sh("xs XADD events '*' user alice action login")
    save, check, restore, pipe = [l.split("  #", 1)[0].rstrip() for l in lines]
    out, err, code = sh(save)
    assert code == 0 and os.path.getsize(os.path.join(sh.cwd, "events.snap")) > 0, err
    sh("xs XADD events '*' user bob action logout")
    out, err, code = sh(check)
    assert code == 0 and "verified" in err, err
    out, err, code = sh("xs restore events.snap")          # without --replace: refused, nothing changed
    assert code == 1 and "--replace" in err
    assert sh("xs XLEN events")[0] == "2\n"
    out, err, code = sh(restore)
    assert code == 0, err
    assert sh("xs XLEN events")[0] == "1\n"
    out, err, code = sh(pipe)
    assert code == 0, err
    assert sh("xs --db copy --json XRANGE events - +")[0] == sh("xs --json XRANGE events - +")[0]


# ------------------------------------------------------- docs/python.md

def test_the_python_example_runs(tmp_path):
    text = DOCS["docs/python.md"]
    block = re.search(r"\n\n((?:    .*\n|\n)+)", text).group(1)
    code = "\n".join(l[4:] for l in block.splitlines())
    assert "Store(\"/path/to/store\")" in code and "tx.range" in code
    code = code.replace("/path/to/store", str(tmp_path / "store"))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"\(\d+, 0\) \[b'user', b'alice'\]\n", p.stdout.decode()), p.stdout


# ------------------------------------------------------------ links and names

@pytest.mark.parametrize("rel", DOC_FILES)
def test_relative_links_reach_a_file_and_its_heading(rel):
    """A link between documentation files names a file that exists and,
    with ``#anchor``, a heading of it (GitHub's anchors)."""
    def anchors(text):
        return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.*)$", text, re.M)}
    for target in re.findall(r"\]\(([^)\s]+)\)", DOCS[rel]):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
        assert os.path.exists(os.path.join(ROOT, dest)), "%s links to %s, which does not exist" % (rel, target)
        if anchor and dest.endswith(".md"):
            assert anchor in anchors(_read(dest)), "%s links to %s: no such heading" % (rel, target)


def test_every_docs_page_is_linked_from_the_readme():
    for rel in DOC_FILES[1:]:
        assert "(%s)" % rel in README, "README.md does not link %s" % rel


def test_each_guarantee_names_a_test_that_exists():
    text = DOCS["docs/guarantees.md"].split("## Guarantees", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"tests/(?:\w+/)?test_\w+\.py", text))
    assert len(named) >= 12
    missing = sorted(t for t in named if not os.path.exists(os.path.join(ROOT, t)))
    assert not missing, "docs/guarantees.md names tests that do not exist: %s" % missing
