"""Documentation that works when followed as written (issue 38, item 8),
and three terminal frictions (item 9): the guide's copy line copies a
whole stream; the recipes run one after another in one shell; an import
that collides with IDs already there names --skip-existing; ``help
recipes`` at the prompt; the per-shell completion lines; ``from_url`` in
docs/python.md; the man page's EXIT STATUS, ENVIRONMENT and FILES, and
how to read it without ``man xs``; the hint after a Redis command of
another type (SET) or after a global option put after the command; and
``...`` at the end of a summary the overview cuts."""
import os
import re
import shutil
import subprocess
import sys

import pytest
from test_help import on_pty
from test_prompt_pty import PROMPT, prompt, term_env  # noqa: F401  (term_env: a fixture)
from test_readme_examples import DOCS, GUIDE, marked_block, sh  # noqa: F401  (sh: a fixture)

from conftest import ROOT, XS, shell_path
from xstream_cli.recipes import RECIPES

MAN = os.path.join(ROOT, "man", "xs.1")


def man_section(name):
    text = open(MAN, encoding="utf-8").read()
    return text.split(".SH %s\n" % name, 1)[1].split("\n.SH ", 1)[0].replace("\\-", "-")


# ------------------------------------------------------------ docs/guide.md

def test_the_guides_copy_line_copies_the_whole_stream(sh):  # noqa: F811  (the fixture)
    """Not the last 10 entries, as xs tail --json s | xs --db other import did."""
    [line] = marked_block(GUIDE, "copy example")
    assert "tail" not in line
    sh("seq 25 | sed 's/.*/XADD s * n &/' | xs > /dev/null && xs XADD s '*' city München")
    out, err, code = sh(line)
    assert code == 0, err
    a, _, _ = sh("xs --json XRANGE s - +")
    b, _, _ = sh("xs --db other --json XRANGE s - +")
    assert a == b and a.count('"n"') == 25 and "München" in a


# ------------------------------------------------------------------ recipes

def test_the_recipes_run_one_after_another_in_one_shell(tmp_path):
    """As a reader tries them: every block (but those that need Spark) in
    turn, in one bash with set -e, in one directory, on one store."""
    needs = {n for r in RECIPES for n in r[3]}
    assert needs <= {"spark", "redis-py"}, needs
    if any("redis-py" in r[3] for r in RECIPES):
        pytest.importorskip("redis")
        if not shutil.which("redis-cli"):
            pytest.skip("redis-cli is not installed")
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PATH=shell_path(tmp_path), PYTHONPATH=ROOT, XS_DB=str(work / "store"),
               PYSPARK_PYTHON=sys.executable)
    seed = subprocess.run(XS + ["XADD", "events", "*", "user", "alice", "action", "login"], env=env, cwd=ROOT,
                          capture_output=True, timeout=60)
    assert seed.returncode == 0, seed.stderr
    blocks = [r for r in RECIPES if "spark" not in r[3]]
    assert len(blocks) >= 6
    script = ["set -e", "trap 'rc=$?; j=$(jobs -p); [ -z \"$j\" ] || kill $j 2>/dev/null; wait; exit $rc' EXIT"]
    for title, _, commands, _ in blocks:
        script += ["echo '### %s' >&2" % title.replace("'", "")] + commands
    script.append("echo '### all done' >&2")
    p = subprocess.run(["bash", "-c", "\n".join(script) + "\n"], cwd=str(work), env=env, capture_output=True,
                       timeout=900)
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode == 0 and "### all done" in err, (p.stdout[-2000:], err[-3000:])


def test_an_import_that_meets_ids_already_there_names_skip_existing(tmp_path):
    """One line, with the way out; which then works."""
    env = dict(os.environ, XS_DB=str(tmp_path / "store"))
    for args in (["XADD", "s", "1-1", "a", "1"], ["XADD", "s", "2-1", "a", "2"]):
        assert subprocess.run(XS + args, env=env, cwd=ROOT, capture_output=True, timeout=60).returncode == 0
    export = tmp_path / "s.jsonl"
    p = subprocess.run(XS + ["export", "-q", "-o", str(export)], env=env, cwd=ROOT, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    p = subprocess.run(XS + ["--db", str(tmp_path / "copy"), "import", "-q", str(export)], env=env, cwd=ROOT,
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    again = XS + ["--db", str(tmp_path / "copy"), "import", "-q", str(export)]
    p = subprocess.run(again, env=env, cwd=ROOT, capture_output=True, timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 1 and err.count("\n") == 1, err
    assert err.startswith("xs: line 1: ID 1-1 is equal or smaller than the stream's last ID 2-1 "
                          "(nothing was imported)"), err
    assert "run it again with --skip-existing" in err, err
    p = subprocess.run(again[:-1] + ["--skip-existing", str(export)], env=env, cwd=ROOT, capture_output=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr


def test_help_recipes_at_the_prompt_is_xs_help_recipes(tmp_path, term_env):  # noqa: F811
    from xstream_cli import prompt as P
    from xstream_cli import recipes
    assert P._help(["recipes"]) == recipes.text()
    t = prompt(tmp_path / "db", term_env)
    try:
        t.expect(PROMPT)
        t.send(b"help recipes\r")
        t.expect(rb"Back up and restore")
        t.expect(PROMPT)
        assert b"no such command" not in t.shown
        t.send(b"quit\r")
        assert t.wait() == 0
    finally:
        t.close()


# --------------------------------------------------------------- completion

def test_the_docs_give_each_shells_completion_line_as_xs_completion_help_does():
    """``source <(xs completion bash)  # or zsh / fish`` does not work in
    fish nor in a zsh without compinit: each shell gets its own line."""
    text = subprocess.run(XS + ["completion", "--help"], capture_output=True, cwd=ROOT, timeout=60).stdout.decode()
    lines = dict(re.findall(r"^\s+(bash|zsh|fish):\s+(.+?)(?:\s{2,}\(.*\))?$", text, re.M))
    assert set(lines) == {"bash", "zsh", "fish"}, text
    block = DOCS[GUIDE].split("## At a terminal", 1)[1].split("\n## ", 1)[0]
    for shell, line in lines.items():
        assert "    " + line in block, "docs/guide.md does not show %s's line: %s" % (shell, line)
    for rel, doc in DOCS.items():
        assert not re.search(r"completion bash\)\s*#\s*or zsh", doc), rel


# ------------------------------------------------------------ docs/python.md

def test_python_md_documents_from_url_as_it_is(tmp_path):
    redis = pytest.importorskip("redis")
    text = DOCS["docs/python.md"]
    assert "is a `redis.Redis`" not in text                  # Redis is a function: Redis.from_url fails
    code = "\n".join(marked_block("docs/python.md", "from_url example"))
    assert "from_url(" in code and "xs:///data/events.xs" in code
    code = code.replace("/data/events.xs", str(tmp_path / "events.xs"))
    code += "\nprint(type(r).__module__, type(r).__name__, r.xadd('s', {'a': 1}).count('-'), r.xlen('s'))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, cwd=str(tmp_path),
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode() == "redis.client Redis 1 1\n"
    assert "asyncio=True" in text and "xs://./events.xs" in text
    p = subprocess.run([sys.executable, "-c", "from xstream_cli.client import from_url; import redis; "
                        "print(isinstance(from_url('xs://./rel.xs'), redis.Redis))"],
                       capture_output=True, timeout=60, cwd=str(tmp_path), env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.stdout == b"True\n", p.stderr
    assert redis.Redis


# ---------------------------------------------------------------- man xs(1)

def test_the_man_pages_exit_status_says_what_worker_and_serve_do_on_a_signal():
    text = man_section("EXIT STATUS")
    assert "xs worker, on SIGINT, SIGTERM or SIGHUP" in text and "exits 0 (with --once, 1 if an entry failed)" \
        in text, text
    assert "xs serve, on SIGINT or SIGTERM" in text


def test_the_man_page_names_every_file_and_variable(tmp_path):
    from xstream_cli.porcelain.serve import SOCKET_NAME
    from xstream_cli.prompt import history_path
    files = man_section("FILES")
    env = dict(os.environ, XS_DB=str(tmp_path / "store"))
    assert subprocess.run(XS + ["XADD", "s", "*", "a", "1"], env=env, cwd=ROOT, capture_output=True,
                          timeout=60).returncode == 0
    for name in os.listdir(tmp_path / "store"):
        if os.path.isfile(tmp_path / "store" / name):
            assert "STORE/%s\\fR" % name in files, name
    assert "STORE/lock\\fR" in files and "STORE/%s\\fR" % SOCKET_NAME in files
    old = os.environ.pop("XDG_STATE_HOME", None)
    try:
        default = history_path().replace(os.path.expanduser("~"), "~")
    finally:
        if old is not None:
            os.environ["XDG_STATE_HOME"] = old
    assert default == "~/.local/state/xs/history" and default in files
    assert "$XDG_STATE_HOME/xs/history" in files
    assert "\\fBXDG_STATE_HOME\\fR" in man_section("ENVIRONMENT")


def test_the_readme_and_contributing_say_how_to_read_the_man_page_without_man_xs():
    for rel in ("README.md", "CONTRIBUTING.md"):
        flat = re.sub(r"\s+", " ", DOCS[rel])
        assert "`man -l man/xs.1`" in flat and "`man -l .venv/share/man/man1/xs.1`" in flat, rel
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert '"share/man/man1" = ["man/xs.1"]' in f.read()      # where pip install . puts it
    if shutil.which("man"):
        p = subprocess.run(["man", "-l", "man/xs.1"], cwd=ROOT, capture_output=True, timeout=60,
                           env=dict(os.environ, MANPAGER="cat", PAGER="cat", MANWIDTH="80"))
        assert p.returncode == 0 and b"EXIT STATUS" in p.stdout, p.stderr


# ------------------------------------------------------ terminal frictions

@pytest.mark.parametrize("argv,kind", [(["SET", "k", "v"], "strings"), (["hset", "h", "f", "v"], "hashes"),
                                       (["LPUSH", "l", "x"], "lists"), (["ZADD", "z", "1", "m"], "sorted sets")])
def test_a_redis_command_of_another_type_is_told_xs_holds_streams_only(tmp_path, argv, kind):
    status, out, shown = on_pty(argv, tmp_path / "db")
    assert (status, out) == (1, b"")
    first, hint = shown.decode().splitlines()
    assert first == "ERR unknown command '%s', with args beginning with: %s " % (
        argv[0], " ".join("'%s'" % a for a in argv[1:]))
    assert hint == "(xs holds streams only: %s is a command of Redis %s; xs help lists xs's commands)" % (
        argv[0].upper(), kind)
    assert not (tmp_path / "db").exists()


def test_set_gets_the_streams_only_line_instead_of_did_you_mean_xsetid(tmp_path):
    status, _, shown = on_pty(["SET", "k", "v"], tmp_path / "db")
    assert shown.startswith(b"ERR unknown command 'SET', with args beginning with: 'k' 'v' \n")
    assert b"XSETID" not in shown and b"did you mean" not in shown


@pytest.mark.parametrize("argv,hint", [
    (["XLEN", "s", "--db", "x.xs"], "(--db is a global option of xs: it goes before the command, as in "
                                    "xs --db x.xs XLEN s)"),
    (["XLEN", "s", "--db=x.xs"], "(--db=x.xs is a global option of xs: it goes before the command, as in "
                                 "xs --db=x.xs XLEN s)"),
    (["XRANGE", "s", "-", "+", "--json"], "(--json is a global option of xs: it goes before the command, as in "
                                          "xs --json XRANGE s - +)"),
])
def test_a_global_option_after_a_redis_command_says_where_it_goes(tmp_path, argv, hint):
    status, out, shown = on_pty(argv, tmp_path / "db")
    lines = shown.decode().splitlines()
    assert status == 1 and len(lines) == 3, lines
    assert lines[1].startswith("usage: %s key" % argv[0]) and lines[2] == hint


def test_no_global_option_hint_without_one(tmp_path):
    status, _, shown = on_pty(["XLEN", "s", "x.xs"], tmp_path / "db")
    assert shown == b"ERR wrong number of arguments for 'xlen' command\nusage: XLEN key\n"


@pytest.mark.parametrize("width", [80, 100, 140, 200])
def test_the_overview_ends_a_cut_summary_with_dots(width):
    """``help`` at the prompt: a summary is not cut at a "; " inside a
    parenthesis (UNLINK: "(Redis frees their memory later; a store ...)");
    one cut at the width ends with ..."""
    from xstream_cli import help
    text = help.overview(width)
    rows = [l for l in text.splitlines() if l.startswith("  ") and "  " in l.strip()]
    assert len(rows) > 30
    for row in rows:
        summary = row.strip().split("  ", 1)[1].strip()
        if summary.count("(") > summary.count(")") or summary.count("[") > summary.count("]"):
            assert summary.endswith("..."), row
    unlink = [r for r in rows if r.strip().startswith("UNLINK ")][0]
    assert unlink.rstrip().endswith(("...", "a store has nothing to free later)")), unlink
