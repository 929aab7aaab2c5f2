"""Generated docs: man/ and completions/ are committed and must match
what tools/gen_docs.py produces from the click command tree; and the
hidden ``xs _complete`` command they call is silent on any error."""
import os
import re
import subprocess
import sys

import click
import pytest

from conftest import ROOT, XS, run_xs

sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_docs  # noqa: E402

from xstream_cli.commands import COMMANDS, SUBCOMMANDS  # noqa: E402

MAN_PAGES = ["man/xs.1", "man/xs-streams.7", "man/xs-groups.7", "man/xs-keyspace.7"]
COMPLETIONS = ["completions/xs.bash", "completions/_xs", "completions/xs.fish"]
REDIS_NAMES = sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS))


def committed(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8", newline="") as f:
        return f.read()


def test_regenerating_gives_no_diff(tmp_path):
    gen_docs.write(gen_docs.generate(), str(tmp_path))
    generated = sorted(os.path.relpath(os.path.join(d, f), tmp_path)
                       for d, _, files in os.walk(tmp_path) for f in files)
    assert generated == sorted(MAN_PAGES + COMPLETIONS + ["docs/reference.md", "docs/recipes.md"])
    stale = [rel for rel in generated
             if (tmp_path / rel).read_text(encoding="utf-8") != committed(rel)]
    assert not stale, "stale generated files %s: run python3 tools/gen_docs.py" % stale


def test_generation_is_deterministic():
    assert gen_docs.generate() == gen_docs.generate()


def test_check_mode_passes_on_the_repository():
    assert gen_docs.main(["--check"]) == 0


@pytest.mark.parametrize("name", REDIS_NAMES)
def test_every_redis_command_is_in_the_man_pages_and_completions(name):
    family_pages = "".join(committed(p) for p in MAN_PAGES[1:])
    assert ".SS %s" % name in family_pages or ".SS %s " % name in family_pages
    assert name in committed("man/xs.1")
    for rel in COMPLETIONS:
        assert re.search(r"(?<![A-Za-z_])%s(?![A-Za-z_])" % name, committed(rel)), \
            "%s missing from %s" % (name, rel)


@pytest.mark.parametrize("container", sorted(SUBCOMMANDS))
def test_every_subcommand_is_documented_and_completed(container):
    pages = "".join(committed(p) for p in MAN_PAGES[1:])
    for sub in SUBCOMMANDS[container]:
        full = "%s %s" % (container.decode(), sub.decode())
        assert ".SS %s" % full in pages
        for rel in COMPLETIONS:
            assert sub.decode() in committed(rel)


def test_every_grammar_is_in_the_man_pages():
    pages = "".join(committed(p) for p in MAN_PAGES[1:])
    for _, entries in gen_docs.redis_commands():
        for _, cmd in entries:
            assert gen_docs.esc(gen_docs.grammar(cmd)) in pages


def test_global_options_are_in_the_man_page_and_completions():
    page = committed("man/xs.1")
    for names, _, _ in gen_docs.global_options():
        for n in names:
            assert gen_docs.esc(n) in page
            for rel in COMPLETIONS:
                assert n in committed(rel)


def test_completion_scripts_call_the_hidden_complete_command():
    for rel in COMPLETIONS:
        text = committed(rel)
        assert "_complete" in text and " keys " in text and " groups " in text


def test_bash_completion_parses():
    bash = "/bin/bash"
    if not os.path.exists(bash):
        pytest.skip("no bash")
    p = subprocess.run([bash, "-n", os.path.join(ROOT, "completions/xs.bash")], capture_output=True)
    assert p.returncode == 0, p.stderr


# ------------------------------------------------------------- xs _complete

def complete(db, *args, env=None):
    e = dict(os.environ)
    e.pop("XS_DB", None)
    e.update(env or {})
    return subprocess.run(XS + ["--db", str(db), "_complete"] + list(args),
                          capture_output=True, timeout=30, cwd=ROOT, env=e)


@pytest.mark.parametrize("args", [["keys"], ["keys", "ev"], ["groups", "events"], [], ["bogus"]])
def test_complete_on_a_missing_store_prints_nothing_and_exits_0(tmp_path, args):
    p = complete(tmp_path / "no-such-store", *args)
    assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")
    assert not (tmp_path / "no-such-store").exists(), "completion must never create a store"


def test_complete_on_a_bad_path_prints_nothing_and_exits_0(tmp_path):
    f = tmp_path / "a-file"
    f.write_bytes(b"not a store")
    for db in (f, f / "below-a-file", tmp_path):       # a file, under a file, not a store
        p = complete(db, "keys")
        assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")


def test_complete_lists_streams_and_groups(tmp_path):
    db = tmp_path / "store"
    p = run_xs(db, ["XADD events * a 1", "XADD orders * a 1", "XADD ev2 * a 1",
                    "XGROUP CREATE events g1 0", "XGROUP CREATE events g2 $"], mode="raw")
    assert p.returncode == 0, p.stderr
    assert complete(db, "keys").stdout == b"ev2\nevents\norders\n"
    assert complete(db, "keys", "ev").stdout == b"ev2\nevents\n"
    assert complete(db, "groups", "events").stdout == b"g1\ng2\n"
    assert complete(db, "groups", "orders").stdout == b""
    assert complete(db, "groups", "nope").stdout == b""
    p = complete(db, "groups")          # no stream: the groups of every stream
    assert (p.returncode, p.stdout) == (0, b"g1\ng2\n")


def test_complete_lists_consumers(tmp_path):
    db = tmp_path / "store"
    p = run_xs(db, ["XADD events * a 1", "XADD orders * a 1", "XGROUP CREATE events g 0",
                    "XGROUP CREATE orders g 0", "XGROUP CREATECONSUMER events g bob",
                    "XREADGROUP GROUP g alice STREAMS events >", "XGROUP CREATECONSUMER orders g carol"],
               mode="raw")
    assert p.returncode == 0, p.stderr
    assert complete(db, "consumers", "events", "g").stdout == b"alice\nbob\n"
    assert complete(db, "consumers", "", "g").stdout == b"alice\nbob\ncarol\n"
    for args in (["consumers", "events", "nogroup"], ["consumers", "nostream", "g"], ["consumers", "events"]):
        p = complete(db, *args)
        assert (p.returncode, p.stdout, p.stderr) == (0, b"", b"")


def test_complete_uses_xs_db(tmp_path):
    db = tmp_path / "store"
    run_xs(db, ["XADD s1 * a 1"], mode="raw")
    e = dict(os.environ, XS_DB=str(db))
    p = subprocess.run(XS + ["_complete", "keys"], capture_output=True, timeout=30, cwd=ROOT, env=e)
    assert (p.returncode, p.stdout) == (0, b"s1\n")


def test_complete_does_not_write_the_store(tmp_path):
    db = tmp_path / "store"
    run_xs(db, ["XADD s1 * a 1"], mode="raw")
    before = {f: os.stat(db / f).st_mtime_ns for f in os.listdir(db) if f != "lock.mdb"}
    complete(db, "keys")
    complete(db, "groups", "s1")
    after = {f: os.stat(db / f).st_mtime_ns for f in os.listdir(db) if f != "lock.mdb"}
    assert before == after


def test_complete_is_hidden_from_help(tmp_path):
    p = subprocess.run(XS + ["--help"], capture_output=True, timeout=30, cwd=ROOT)
    assert p.returncode == 0 and b"_complete" not in p.stdout


# ------------------------------------------------- xs completion, man pages

def test_xs_completion_prints_the_committed_scripts():
    for shell, rel in (("bash", "completions/xs.bash"), ("zsh", "completions/_xs"),
                       ("fish", "completions/xs.fish")):
        p = subprocess.run(XS + ["completion", shell], capture_output=True, timeout=60, cwd=ROOT)
        assert p.returncode == 0 and p.stdout.decode() == committed(rel), \
            "%s differs from xs completion %s: run python3 tools/gen_docs.py" % (rel, shell)


def _generated_man_pages():
    fam = gen_docs.redis_commands()
    pages = {"man/xs.1": gen_docs.man_xs1(fam)}
    for page, title, blurb, names in gen_docs.FAMILIES:
        pages["man/xs-%s.7" % page] = gen_docs.man_family(page, title, blurb, names, fam)
    return pages


def test_man_pages_describe_every_command_with_examples_and_no_internal_notes():
    from xstream_cli import help
    pages = _generated_man_pages()
    text = "".join(pages.values())
    for internal in ("storage:", "Txn.", "arguments (with the name)"):
        assert internal not in text
    families = "".join(v for k, v in pages.items() if k.endswith(".7"))
    for name in REDIS_NAMES + ["%s %s" % (c.decode(), s.decode()) for c in SUBCOMMANDS for s in SUBCOMMANDS[c]]:
        if name.encode() in SUBCOMMANDS:
            continue
        summary, since, complexity, examples = help.DOCS[name]
        section = families.split(".SS %s\n" % gen_docs.esc(name), 1)[1].split(".SS ", 1)[0]
        assert gen_docs.esc(summary) in section, name
        assert "Since Redis %s" % since in section and gen_docs.esc(complexity) in section, name
        for e in examples:
            assert gen_docs.esc("xs " + e) in section, (name, e)


def test_xs_1_has_every_global_and_porcelain_option_and_examples():
    from xstream_cli.app import cli
    page = _generated_man_pages()["man/xs.1"]
    for opt in ("\\fB\\-r\\fR \\fIN\\fR", "\\fB\\-i\\fR \\fISEC\\fR", ".SH EXAMPLES", ".SH HELP"):
        assert opt in page, opt
    for name, cmd in cli.commands.items():
        if cmd.hidden:
            continue
        assert ".SS %s\n" % gen_docs.esc(name) in page
        section = page.split(".SS %s\n" % gen_docs.esc(name), 1)[1].split(".SS ", 1)[0]
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden:
                for o in p.opts:
                    assert "\\fB%s\\fR" % gen_docs.esc(o) in section, (name, o)
    # unknown command and wrong arity: one exit status, documented
    status = page.split(".SH EXIT STATUS", 1)[1].split(".SH", 1)[0]
    assert "unknown" in status and "wrong number of arguments" in status


def test_the_wheel_installs_the_man_pages_where_man_finds_them(tmp_path):
    """Build the wheel from a copy of the sources (no build files in the
    repository), and check that man-db finds xs(1) from PATH alone once
    the wheel's data files sit beside bin/, as in a venv."""
    import shutil
    import zipfile
    src = tmp_path / "src"
    src.mkdir()
    for rel in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(ROOT, rel), src / rel)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for rel in ("xstream_cli", "storage", "man", "bin"):
        if os.path.exists(os.path.join(ROOT, rel)):
            shutil.copytree(os.path.join(ROOT, rel), src / rel, ignore=ignore)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w",
                        str(tmp_path / "dist")], capture_output=True, timeout=600)
    if p.returncode != 0 and (b"No matching distribution found for setuptools" in p.stderr
                              or b"Could not find a version that satisfies the requirement setuptools"
                              in p.stderr):
        pytest.skip("pip cannot fetch setuptools for an isolated build here")
    assert p.returncode == 0, p.stderr[-2000:]
    (whl,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        data = [n for n in names if ".data/data/share/man/" in n]
        assert sorted(n.split(".data/data/", 1)[1] for n in data) == sorted(
            "share/man/man%s/%s" % (rel[-1], os.path.basename(rel)) for rel in MAN_PAGES)
        prefix = tmp_path / "prefix"
        for n in data:
            out = prefix / n.split(".data/data/", 1)[1]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(z.read(n))
        assert z.read([n for n in data if n.endswith("man1/xs.1")][0]).decode() == committed("man/xs.1")
    man = shutil.which("man")
    if man is None:
        pytest.skip("no man on this machine")
    (prefix / "bin").mkdir()
    env = dict(os.environ, PATH="%s:/usr/bin:/bin" % (prefix / "bin"))
    env.pop("MANPATH", None)
    for page, want in (("xs", "man1/xs.1"), ("xs-groups", "man7/xs-groups.7")):
        p = subprocess.run([man, "-w", page], capture_output=True, env=env, timeout=60)
        assert p.returncode == 0 and p.stdout.decode().strip() == str(prefix / "share" / "man" / want), p
