"""Help for people at a terminal (issue 12): ``xs help``, ``xs help XADD``,
``xs XADD --help``, usage lines and "did you mean" on a terminal only,
one exit status for unknown commands and wrong arities, ``-r`` / ``-i``,
``xs completion`` and its dynamic completion in a real bash."""
import os
import pty
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, XS, new_store, run_xs, shell_path
from xstream_cli import help as xhelp
from xstream_cli.commands import COMMANDS, SUBCOMMANDS, lookup

ALL = xhelp.redis_names()


def xs(args, db=None, input=None, env=None, cwd=ROOT):
    e = dict(os.environ)
    e.pop("XS_DB", None)
    e.update(env or {})
    pre = ["--db", str(db)] if db is not None else []
    return subprocess.run(XS + pre + list(args), input=input, capture_output=True, timeout=60,
                          env=e, cwd=cwd)


def on_pty(args, db):
    """Run xs with stderr (only) on a pseudo-terminal: (status, stdout,
    what the terminal showed)."""
    m, s = pty.openpty()
    e = dict(os.environ)
    e.pop("XS_DB", None)
    p = subprocess.Popen(XS + ["--db", str(db)] + list(args), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=s, env=e, cwd=ROOT)
    os.close(s)
    shown = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r, _, _ = select.select([m], [], [], 1)
        if not r:
            if p.poll() is not None:
                break
            continue
        try:
            d = os.read(m, 4096)
        except OSError:
            break
        if not d:
            break
        shown += d
    out = p.stdout.read()
    p.wait(timeout=30)
    os.close(m)
    return p.returncode, out, shown.replace(b"\r\n", b"\n")


# ================================================================ the tables

def test_every_command_has_a_family_and_help_data():
    placed = [n for fam in xhelp.FAMILIES for n in fam[4]]
    table = sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS))
    assert sorted(placed) == table, "each Redis command in exactly one family"
    for name in ALL:
        summary, since, complexity, examples = xhelp.DOCS[name]
        assert summary and complexity and since.count(".") == 2, name
        assert examples, name


@pytest.mark.parametrize("name", ALL)
def test_every_example_is_a_valid_command_line(name):
    # a command's examples may first add what they need (entries, a group):
    # tests/cli/test_help_examples.py runs them in order on an empty store
    examples = [[w.encode() for w in shlex.split(ex)] for ex in xhelp.DOCS[name][3]]
    # "-x CMD ...": the last argument is read from stdin, as redis-cli -x (RESTORE's payload: issue 26)
    examples = [argv[1:] + [b"<stdin>"] if argv[:1] == [b"-x"] else argv for argv in examples]
    assert any(b" ".join(argv[:len(name.split())]).upper() == name.encode() for argv in examples), name
    for argv in examples:
        cmd = lookup(argv)                 # no unknown command, no wrong arity
        cmd.parse(argv)                    # no syntax error


def test_the_help_module_imports_neither_click_nor_rich():
    code = ("import sys, xstream_cli.help as h; h.command_help('XADD'); h.usage_line('xadd'); "
            "h.suggest('XGROUP CRATE'); print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('click', 'rich')))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == b"[]", p


def test_api_for_the_prompt():
    assert xhelp.command_help("nosuch") is None
    assert xhelp.command_help("xadd") == xhelp.command_help("XADD")
    assert xhelp.command_help("xgroup create").startswith("XGROUP CREATE key group")
    assert "XGROUP CREATE" in xhelp.command_help("XGROUP")
    assert xhelp.usage_line("xlen") == "usage: XLEN key"
    assert xhelp.usage_line("nosuch") is None
    assert xhelp.suggest("XADDD") == "XADD"
    assert xhelp.suggest("xrnage") == "XRANGE"
    assert xhelp.suggest("XGROUP CRATE") == "XGROUP CREATE"
    assert xhelp.suggest("tial") == "tail"
    assert xhelp.suggest("qqqqqqq") is None
    assert xhelp.command_help("tail").startswith("Usage: xs tail")


# ================================================================ xs help

def test_xs_help_lists_every_command_by_family(tmp_path):
    p = xs(["help"], tmp_path / "db")
    assert p.returncode == 0, p.stderr
    text = p.stdout.decode()
    pos = [text.index(t) for t in ("Stream commands:", "Consumer group commands:",
                                   "Keyspace commands:", "Porcelain commands")]
    assert pos == sorted(pos)
    for name in ALL:
        if name not in ("XGROUP", "XINFO"):
            assert "\n  %s " % name in text, name
    for name in ("tail", "help", "completion", "ls"):
        assert "\n  %s " % name in text
    assert not (tmp_path / "db").exists(), "help never creates a store"


def test_xs_help_xadd_has_grammar_summary_since_complexity_examples(tmp_path):
    p = xs(["help", "xadd"], tmp_path / "db")
    assert p.returncode == 0
    text = p.stdout.decode()
    assert text.startswith(COMMANDS[b"XADD"].grammar + "\n")
    assert "since:      Redis 5.0.0" in text
    assert "complexity: O(1)" in text
    assert "Examples:\n  xs XADD events '*' user alice action login" in text
    p2 = xs(["help", "XGROUP", "create"], tmp_path / "db")
    assert p2.stdout.decode().startswith(SUBCOMMANDS[b"XGROUP"][b"CREATE"].grammar)
    assert b"since:      Redis 8.8.0" in xs(["help", "XNACK"]).stdout


def test_xs_help_of_an_unknown_name_suggests_and_exits_1(tmp_path):
    p = xs(["help", "XADDD"], tmp_path / "db")
    assert p.returncode == 1 and p.stdout == b""
    assert b"did you mean XADD?" in p.stderr and b"Traceback" not in p.stderr


@pytest.mark.parametrize("argv,name", [(["XADD", "--help"], "XADD"), (["xadd", "-h"], "XADD"),
                                       (["XLEN", "--help"], "XLEN"),
                                       (["XGROUP", "CREATE", "--help"], "XGROUP CREATE"),
                                       (["xinfo", "consumers", "-h"], "XINFO CONSUMERS"),
                                       (["XGROUP", "--help"], "XGROUP")])
def test_command_dash_dash_help_is_the_help_text(tmp_path, argv, name):
    p = xs(argv, tmp_path / "db")
    assert (p.returncode, p.stderr) == (0, b"")
    assert p.stdout.decode() == xhelp.command_help(name)
    assert not (tmp_path / "db").exists()


def test_dash_h_is_data_where_one_argument_is_valid(tmp_path):
    db = tmp_path / "db"
    assert run_xs(db, ["XADD -h * a 1", "XADD -h * a 2"], mode="raw").returncode == 0
    p = xs(["XLEN", "-h"], db)
    assert (p.returncode, p.stdout) == (0, b"2\n")
    # --help is help only as the only argument after the command
    p = xs(["XADD", "--help", "*", "a", "1"], db)
    assert p.returncode == 0 and re.fullmatch(rb"\d+-0\n", p.stdout), p
    assert run_xs(db, ["XLEN --help"], mode="raw").stdout == b"1\n"


def test_help_in_script_mode_is_redis_unknown_command(tmp_path):
    p = run_xs(tmp_path / "db", ["help XADD", "XADD s * a 1", "XLEN s"], mode="raw")
    assert p.returncode == 1
    assert p.stdout.startswith(b"ERR unknown command 'help', with args beginning with: 'XADD' \n")
    assert p.stdout.endswith(b"-0\n1\n")


# ======================================================= errors and exit status

def test_unknown_command_and_wrong_arity_share_exit_status_1_piped(tmp_path):
    db = tmp_path / "db"
    unknown = xs(["XADDD", "s"], db)
    arity = xs(["XADD", "s"], db)
    sub = xs(["XGROUP", "CRATE", "s"], db)
    assert unknown.returncode == arity.returncode == sub.returncode == 1
    # piped stderr: Redis's text, nothing else
    assert unknown.stderr == b"ERR unknown command 'XADDD', with args beginning with: 's' \n"
    assert arity.stderr == b"ERR wrong number of arguments for 'xadd' command\n"
    assert sub.stderr == b"ERR unknown subcommand 'CRATE'. Try XGROUP HELP.\n"
    assert unknown.stdout == arity.stdout == b""
    assert not db.exists(), "a command that cannot run does not create the store"
    p = xs(["--json", "xrnage"], db)
    assert p.returncode == 1 and p.stderr.startswith(b'{"error": "ERR unknown command')


def test_a_lowercase_typo_of_a_porcelain_command_is_an_unknown_command(tmp_path):
    p = xs(["tial", "-f", "s"], tmp_path / "db")
    assert p.returncode == 1
    assert p.stderr == b"ERR unknown command 'tial', with args beginning with: '-f' 's' \n"


def test_on_a_terminal_wrong_arity_adds_the_usage_line(tmp_path):
    status, out, shown = on_pty(["XADD", "s"], tmp_path / "db")
    assert (status, out) == (1, b"")
    assert shown == (b"ERR wrong number of arguments for 'xadd' command\n"
                     b"usage: " + COMMANDS[b"XADD"].grammar.encode() + b"\n")
    status, _, shown = on_pty(["--no-raw", "XGROUP", "CREATE", "s"], tmp_path / "db")
    assert status == 1
    assert shown == (b"(error) ERR wrong number of arguments for 'xgroup|create' command\n"
                     b"usage: XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read]\n")


def test_on_a_terminal_unknown_command_adds_did_you_mean(tmp_path):
    status, out, shown = on_pty(["XADDD", "s", "*"], tmp_path / "db")
    assert (status, out) == (1, b"")
    assert shown == (b"ERR unknown command 'XADDD', with args beginning with: 's' '*' \n"
                     b"(did you mean XADD?)\n")
    status, _, shown = on_pty(["xgroup", "crate", "s"], tmp_path / "db")
    assert shown.endswith(b"Try XGROUP HELP.\n(did you mean XGROUP CREATE?)\n")
    status, _, shown = on_pty(["zzzzzzzz"], tmp_path / "db")
    assert status == 1 and b"did you mean" not in shown


# ==================================================================== -r / -i

def test_repeat_and_interval(tmp_path):
    db = tmp_path / "db"
    t = time.monotonic()
    p = xs(["-r", "3", "-i", "0.3", "XADD", "s", "*", "a", "1"], db)
    took = time.monotonic() - t
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 3, p.stderr
    assert took >= 0.6, "two pauses of 0.3 s between three runs"
    assert xs(["-r", "2", "XLEN", "s"], db).stdout == b"3\n3\n"
    p = xs(["-r", "2", "XRANGE", "s", "bad", "+"], db)
    assert p.returncode == 1 and p.stderr.count(b"ERR") == 2


def test_repeat_forever_ends_on_ctrl_c_with_130(tmp_path):
    e = dict(os.environ)
    e.pop("XS_DB", None)
    p = subprocess.Popen(XS + ["--db", str(new_store(tmp_path / "db")), "-r", "-1", "-i", "0.02", "XLEN", "s"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=e, cwd=ROOT,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    out = b""
    while out.count(b"\n") < 3 and time.monotonic() < deadline:
        out += os.read(p.stdout.fileno(), 4096)
    p.send_signal(signal.SIGINT)
    rest, err = p.communicate(timeout=30)
    assert p.returncode == -signal.SIGINT and err == b""
    assert set((out + rest).split(b"\n")) == {b"0", b""}


@pytest.mark.parametrize("args", [["-r", "0", "XLEN", "s"], ["-r", "x", "XLEN", "s"], ["-r"],
                                  ["-i", "-1", "XLEN", "s"], ["-i", "nan", "XLEN", "s"],
                                  ["-r", "2", "tail", "s"], ["-r", "2"]])
def test_bad_repeat_options_are_usage_errors(tmp_path, args):
    p = xs(args, tmp_path / "db", input=b"")
    assert p.returncode == 2 and p.stderr.startswith(b"xs: ") and b"Traceback" not in p.stderr, p


def test_repeat_stays_on_the_fast_path(tmp_path):
    """-r is parsed without click or rich (the one-shot path's imports)."""
    e = dict(os.environ)
    e.pop("XS_DB", None)
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "xstream_cli", "--db", str(new_store(tmp_path / "db")),
                        "-r", "2", "-i", "0", "XLEN", "s"], capture_output=True, env=e, cwd=ROOT, timeout=60)
    assert p.stdout == b"0\n0\n"
    imported = {l.split(b"|")[-1].strip().split(b".")[0] for l in p.stderr.splitlines()}
    assert b"click" not in imported and b"rich" not in imported


# ================================================================ completion

def test_completion_prints_the_generated_scripts():
    from xstream_cli.app import cli
    from xstream_cli.porcelain import complete
    for shell in ("bash", "zsh", "fish"):
        p = xs(["completion", shell])
        assert p.returncode == 0 and p.stdout.decode() == complete.script(shell, cli)
    assert xs(["completion", "tcsh"]).returncode == 2


@pytest.fixture
def completing(tmp_path):
    """complete(words, cword=None): what bash's _xs offers, from
    ``source <(xs completion bash)``, against a real store (XS_DB)."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "xs").write_text("#!/bin/sh\nexec %s -m xstream_cli \"$@\"\n" % shlex.quote(sys.executable))
    os.chmod(bindir / "xs", 0o755)
    db = tmp_path / "store"
    p = run_xs(db, ["XADD events * a 1", "XADD orders * a 1", "XGROUP CREATE events g1 0",
                    "XGROUP CREATE events g2 0", "XGROUP CREATE orders og 0",
                    "XREADGROUP GROUP g1 alice STREAMS events >", "XGROUP CREATECONSUMER events g1 bob"],
               mode="raw")
    assert p.returncode == 0, p
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    for f in ("data1.jsonl", "data2.jsonl", "other.txt"):
        (work / f).write_text("")
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")), XS_DB=str(db),
               PYTHONPATH=ROOT)

    def complete(words, cword=None):
        cword = len(words) - 1 if cword is None else cword
        script = ('source <(xs completion bash) || exit 9; COMP_WORDS=("$@"); COMP_CWORD=%d; _xs; '
                  'printf "%%s\\n" "${COMPREPLY[@]}"' % cword)
        p = subprocess.run([bash, "-c", script, "_"] + words, capture_output=True, env=env,
                           cwd=str(work), timeout=60)
        assert p.returncode == 0, p.stderr
        return sorted(l for l in p.stdout.decode().split("\n") if l)
    return complete


def test_bash_completes_groups_after_xreadgroup_group(completing):
    assert completing(["xs", "XREADGROUP", "GROUP", ""]) == ["g1", "g2", "og"]
    # with the stream named after STREAMS further on: that stream's groups
    assert completing(["xs", "XREADGROUP", "GROUP", "", "c", "STREAMS", "orders", ">"], 3) == ["og"]
    assert completing(["xs", "XREADGROUP", "GROUP", "g", "c", "STREAMS", "events", ">"], 3) == ["g1", "g2"]
    # then the consumer
    assert completing(["xs", "XREADGROUP", "GROUP", "g1", ""]) == ["alice", "bob"]
    assert completing(["xs", "XREADGROUP", "GROUP", "g1", "alice", "STREAMS", "e"]) == ["events"]


def test_bash_completes_positional_streams_groups_consumers(completing):
    assert completing(["xs", "XACK", "events", ""]) == ["g1", "g2"]
    assert completing(["xs", "XLEN", "o"]) == ["orders"]
    assert completing(["xs", "xgroup", "delconsumer", "events", "g1", ""]) == ["alice", "bob"]
    assert completing(["xs", "-r", "3", "-i", "0.1", "XL"]) == ["XLEN"]
    assert completing(["xs", "XREAD", "COUNT", ""]) == []


def test_bash_completes_files_for_import_and_porcelain_options(completing):
    assert completing(["xs", "import", "./"]) == ["./data1.jsonl", "./data2.jsonl", "./other.txt", "./sub"]
    assert completing(["xs", "import", "./d"]) == ["./data1.jsonl", "./data2.jsonl"]
    assert completing(["xs", "tail", "--group", ""]) == ["g1", "g2", "og"]
    assert completing(["xs", "tail", "ev"]) == ["events"]
    assert "--follow" in completing(["xs", "tail", "--f"])
    assert completing(["xs", "completion", ""]) == ["bash", "fish", "zsh"]
    assert completing(["xs", "help", "XG"]) == ["XGROUP"]


def test_the_root_help_examples_run_as_written(tmp_path):
    """xs --help's examples of -r, -i and -x, run by a shell in a
    directory holding the files they name."""
    e = dict(os.environ, XS_DB=str(tmp_path / "db"))
    text = subprocess.run(XS + ["--help"], capture_output=True, cwd=ROOT, timeout=60, env=e).stdout.decode()
    examples = [line.strip() for line in text.splitlines() if line.strip().startswith("xs -")]
    assert "xs -x XADD events '*' payload < payload.json" in examples and any("-r" in x for x in examples)
    new_store(tmp_path / "db")                  # the user's store, which the examples read and write
    (tmp_path / "payload.json").write_bytes(b'{"big": "\xff binary and\\nlines"}\n')
    e.update(PATH=shell_path(tmp_path), PYTHONPATH=ROOT)
    for line in examples:
        p = subprocess.run(["/bin/sh", "-c", line], capture_output=True, cwd=str(tmp_path), env=e, timeout=60)
        assert p.returncode == 0, (line, p.stderr)
    raw = subprocess.run(XS + ["--raw", "XRANGE", "events", "-", "+"], capture_output=True, env=e, cwd=ROOT,
                         timeout=60).stdout
    assert raw.endswith(b"payload\n" + (tmp_path / "payload.json").read_bytes() + b"\n")
