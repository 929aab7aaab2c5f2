"""``xs completion zsh`` and ``xs completion fish`` in the real shells
(issue 12), against a real store (XS_DB), for the cases the bash test in
test_help.py pins: commands and options after ``xs``, group names after
``XREADGROUP GROUP``, consumer names, stream names where a key goes,
files after ``import``, fixed words after ``completion``.

zsh: an interactive ``zsh -f`` on a pseudo-terminal, the script
installed as the user is told to (``_xs`` in fpath, or sourced after
compinit), the line typed and TAB pressed.  The candidates are read by
wrapping compadd (what the completion system offers, after zsh's own
matching against the typed prefix); the screen is not parsed.  Files
come back as zsh adds them: names relative to the typed directory.

fish: ``complete -C LINE`` (what fish offers for LINE, after its own
filtering), and an interactive fish on a pseudo-terminal where the
cursor position or the inserted text matters.

Each test is skipped when its shell is not installed."""
import fcntl
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time

import pytest

from conftest import ROOT, run_xs

ZSH = shutil.which("zsh")
FISH = shutil.which("fish")
need_zsh = pytest.mark.skipif(ZSH is None, reason="zsh is not installed (apt-get install zsh)")
need_fish = pytest.mark.skipif(FISH is None, reason="fish is not installed (apt-get install fish)")

END = "--END--"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """An ``xs`` on PATH, a store with two streams, groups and consumers
    (one stream and its group and consumer named with spaces), a second
    store for ``--db``, and a working directory with files."""
    tmp = tmp_path_factory.mktemp("shells")
    bindir = tmp / "bin"
    bindir.mkdir()
    (bindir / "xs").write_text("#!/bin/sh\nexec %s -m xstream_cli \"$@\"\n" % shlex.quote(sys.executable))
    os.chmod(bindir / "xs", 0o755)
    db = tmp / "store"
    p = run_xs(db, ["XADD events * a 1", "XADD orders * a 1", "XGROUP CREATE events g1 0",
                    "XGROUP CREATE events g2 0", "XGROUP CREATE orders og 0",
                    "XREADGROUP GROUP g1 alice STREAMS events >", "XGROUP CREATECONSUMER events g1 bob",
                    'XADD "my stream" * a 1', 'XADD "my stream" * a 2', 'XGROUP CREATE "my stream" "sp g" 0',
                    'XREADGROUP GROUP "sp g" "c 1" STREAMS "my stream" >'], mode="raw")
    assert p.returncode == 0, p
    other = tmp / "other-store"
    assert run_xs(other, ["XADD elsewhere * a 1"], mode="raw").returncode == 0
    work = tmp / "work"
    (work / "sub").mkdir(parents=True)
    for f in ("data1.jsonl", "data2.jsonl", "other.txt"):
        (work / f).write_text("")
    home = tmp / "home"
    home.mkdir()
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")), XS_DB=str(db),
               PYTHONPATH=ROOT, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_DATA_HOME=str(home / ".local/share"), XDG_CACHE_HOME=str(home / ".cache"))
    for k in ("ZDOTDIR", "ENV", "BASH_ENV", "fish_function_path", "fish_complete_path"):
        env.pop(k, None)

    class W:
        pass
    w = W()
    w.tmp, w.db, w.other, w.work, w.home, w.env = tmp, db, other, work, home, env
    w.script = {s: subprocess.run([sys.executable, "-m", "xstream_cli", "completion", s], env=env,
                                  capture_output=True, check=True, timeout=60).stdout
                for s in ("zsh", "fish")}
    return w


class PtyShell:
    """An interactive shell on a pseudo-terminal (its controlling
    terminal).  ``complete(line)`` types LINE -- a '|' in it marks where
    the cursor goes (moved there with ctrl-B) -- presses TAB and returns
    the candidates the shell's hook wrote to ``out`` up to END; then
    clears the line."""

    def __init__(self, argv, env, cwd, setup, out, ready=b"@@READY"):
        self.out = out
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))

        def ctty():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        self.p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                  preexec_fn=ctty)
        os.close(slave)
        self.buf = b""
        self.send(setup)
        assert self.read_until(lambda: ready in self.buf), self.buf.decode(errors="replace")

    def send(self, data):
        os.write(self.master, data)

    def read_until(self, done, timeout=60):
        end = time.time() + timeout
        while time.time() < end:
            r, _, _ = select.select([self.master], [], [], 0.1)
            if r:
                try:
                    self.buf += os.read(self.master, 65536)
                except OSError:
                    break
            if done():
                return True
        return False

    def _out(self):
        try:
            with open(self.out) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def tab(self, line):
        open(self.out, "w").close()
        before, _, after = line.partition("|")
        # the line is cleared first (end of line, kill the line), so text a
        # busy shell left from the line before cannot end up in this one
        self.send(b"\x05\x15" + (before + after).encode() + b"\x02" * len(after) + b"\t")
        assert self.read_until(lambda: END in self._out()), (line, self.buf[-2000:])
        got = sorted(set(l for l in self._out().split(END)[0].split("\n") if l))
        # zsh once (in CI, not since) offered its own parameter names here, as
        # if the word were after a "$": keep what the terminal showed for that
        assert "ARGC" not in got or "ARGC" in line, ("parameter names offered", line, self.buf[-3000:])
        return got

    def complete(self, line):
        got = self.tab(line)
        self.send(b"\x05\x15")        # end of line, kill the line
        return got

    def run_completed(self, line):
        """Type LINE, press TAB, then run what the shell made of it:
        the output of the command (the part after what was typed)."""
        self.tab(line)
        self.buf = b""
        self.send(b"\x05; echo @@DO\"\"NE\r")
        assert self.read_until(lambda: b"@@DONE" in self.buf), self.buf
        return self.buf

    def close(self):
        self.p.kill()
        self.p.wait()
        os.close(self.master)


def _output_before_done(buf):
    """The terminal line printed just before the @@DONE marker line."""
    text = re.sub(r"\x1b\][^\x07]*\x07|\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]", "", buf.decode(errors="replace"))
    lines = [l.strip() for l in re.split(r"[\r\n]+", text)]
    assert "@@DONE" in lines, buf
    return lines[lines.index("@@DONE") - 1]


ZSH_HOOK = r"""
compadd() {
  # record what a completion function offers (matched against the typed
  # word, as zsh will) unless this call only asks for matches
  if (( ${@[(I)-[OAD]]} )); then builtin compadd "$@"; return; fi
  local -a __m
  builtin compadd -O __m "$@"
  (( $#__m )) && print -rl -- $__m >> $XS_T_OUT
  builtin compadd "$@"
}
_xs_t_main() { _main_complete; print -r -- '%s' >> $XS_T_OUT }
zle -C _xs_t_complete complete-word _xs_t_main
bindkey -e
bindkey '^I' _xs_t_complete
PS1='%%%% '
print @@REA""DY
""" % END


def zsh_shell(world, how):
    """An interactive zsh with xs's completion installed HOW: 'fpath'
    (``xs completion zsh > DIR/_xs``, fpath+=DIR, compinit) or 'source'
    (compinit, then ``source <(xs completion zsh)``)."""
    d = world.tmp / ("zsh-" + how)
    d.mkdir(exist_ok=True)
    out = d / "out"
    if how == "fpath":
        (d / "_xs").write_bytes(world.script["zsh"])
        setup = "fpath=(%s $fpath); autoload -Uz compinit && compinit -u -D\n" % shlex.quote(str(d))
    else:
        setup = "autoload -Uz compinit && compinit -u -D; source <(xs completion zsh)\n"
    (d / "rc").write_text(setup + ZSH_HOOK)
    env = dict(world.env, XS_T_OUT=str(out), TERM="dumb")
    return PtyShell([ZSH, "-f", "-i"], env, str(world.work), b"source %s\n" % str(d / "rc").encode(), str(out))


@pytest.fixture(scope="module")
def zsh(world):
    if ZSH is None:
        pytest.skip("zsh is not installed (apt-get install zsh)")
    sh = zsh_shell(world, "fpath")
    yield sh
    sh.close()


@pytest.fixture(scope="module")
def fish_c(world):
    """complete(line): what ``complete -C LINE`` offers in a fish with
    the script installed where the user is told to put it
    (~/.config/fish/completions/xs.fish, autoloaded)."""
    if FISH is None:
        pytest.skip("fish is not installed (apt-get install fish)")
    cdir = world.home / ".config" / "fish" / "completions"
    cdir.mkdir(parents=True, exist_ok=True)
    (cdir / "xs.fish").write_bytes(world.script["fish"])

    def complete(line):
        p = subprocess.run([FISH, "-c", "complete -C %s" % shlex.quote(line)], capture_output=True,
                           env=world.env, cwd=str(world.work), timeout=120)
        assert p.returncode == 0 and p.stderr == b"", (line, p.stderr)
        # one candidate a line, a tab before its description
        return sorted(l.split("\t")[0] for l in p.stdout.decode().split("\n") if l)
    return complete


FISH_HOOK = r"""
source $XS_T_SCRIPT
functions -c __xs_args __xs_args_real
function __xs_args
    set -l out (__xs_args_real)
    printf '%%s\n' $out '%s' >> $XS_T_OUT
    printf '%%s\n' $out
end
function fish_prompt; echo '> '; end
echo @@REA""DY
""" % END


@pytest.fixture(scope="module")
def fish_pty(world):
    if FISH is None:
        pytest.skip("fish is not installed (apt-get install fish)")
    d = world.tmp / "fish-pty"
    d.mkdir()
    (d / "xs.fish").write_bytes(world.script["fish"])
    (d / "rc.fish").write_text(FISH_HOOK)
    env = dict(world.env, XS_T_OUT=str(d / "out"), XS_T_SCRIPT=str(d / "xs.fish"), TERM="xterm")
    sh = PtyShell([FISH, "--no-config", "-i"], env, str(world.work),
                  b"function fish_greeting; end; source %s\r" % str(d / "rc.fish").encode(), str(d / "out"))
    yield sh
    sh.close()


REDIS_SOME = {"XADD", "XLEN", "XREADGROUP", "XGROUP", "XINFO"}
PORCELAIN_SOME = {"tail", "import", "completion", "ls"}
GLOBAL_OPTS = {"--db", "--help", "--json", "--raw"}


def _commands_and_options(complete):
    got = set(complete("xs "))
    assert REDIS_SOME | PORCELAIN_SOME <= got and not got & {"xlen", "--db"}
    assert GLOBAL_OPTS <= set(complete("xs --"))
    assert complete("xs xl") == ["xlen"]
    assert complete("xs -r 3 -i 0.1 XL") == ["XLEN"]
    assert complete("xs xgroup createc") == ["createconsumer"]


def _groups_after_xreadgroup_group(complete):
    assert complete("xs XREADGROUP GROUP ") == ["g1", "g2", "og", "sp g"]
    assert complete("xs XREADGROUP GROUP g1 ") == ["alice", "bob"]
    assert complete("xs xreadgroup group g1 a") == ["alice"]
    assert complete("xs XREADGROUP GROUP g1 alice STREAMS e") == ["events"]
    assert "STREAMS" in complete("xs XREADGROUP GROUP g1 alice ")


def _positional_names(complete, other):
    assert complete("xs XACK events ") == ["g1", "g2"]
    assert complete("xs XLEN o") == ["orders"]
    assert complete("xs xgroup delconsumer events g1 ") == ["alice", "bob"]
    assert complete("xs XINFO CONSUMERS orders ") == ["og"]
    assert complete("xs XREAD COUNT ") == []
    # names from the store given by --db, not XS_DB
    assert complete("xs --db %s XLEN " % shlex.quote(str(other))) == ["elsewhere"]


def _porcelain(complete):
    assert complete("xs completion ") == ["bash", "fish", "zsh"]
    assert complete("xs tail --group ") == ["g1", "g2", "og", "sp g"]
    assert complete("xs tail ev") == ["events"]
    assert "--follow" in complete("xs tail --f")
    assert complete("xs help XG") == ["XGROUP"]


# ================================================================ zsh

@need_zsh
def test_committed_zsh_script_parses_and_is_what_xs_prints(world):
    path = os.path.join(ROOT, "completions", "_xs")
    with open(path, "rb") as f:
        assert f.read() == world.script["zsh"]
    p = subprocess.run([ZSH, "-n", path], capture_output=True, timeout=60)
    assert (p.returncode, p.stderr) == (0, b"")


@need_zsh
def test_zsh_completes_commands_and_options(zsh):
    _commands_and_options(zsh.complete)


@need_zsh
def test_zsh_completes_groups_then_consumers_after_xreadgroup_group(zsh):
    _groups_after_xreadgroup_group(zsh.complete)
    # with the stream named after STREAMS further on: that stream's groups
    assert zsh.complete("xs XREADGROUP GROUP | c STREAMS orders >") == ["og"]
    assert zsh.complete("xs XREADGROUP GROUP g| c STREAMS events >") == ["g1", "g2"]
    assert zsh.complete("xs XREADGROUP GROUP | c STREAMS my\\ stream >") == ["sp g"]


@need_zsh
def test_zsh_completes_positional_streams_groups_consumers(zsh, world):
    _positional_names(zsh.complete, world.other)
    assert zsh.complete("xs XINFO CONSUMERS 'my stream' ") == ["sp g"]
    assert zsh.complete("xs XREADGROUP GROUP sp\\ g ") == ["c 1"]


@need_zsh
def test_zsh_completes_files_for_import_and_porcelain_words(zsh, world):
    assert zsh.complete("xs import ./") == ["data1.jsonl", "data2.jsonl", "other.txt", "sub"]
    assert zsh.complete("xs import ./d") == ["data1.jsonl", "data2.jsonl"]
    assert zsh.complete("xs --db ") == ["sub"]
    _porcelain(zsh.complete)


@need_zsh
def test_zsh_inserts_a_name_with_a_space_quoted_so_the_command_runs(zsh):
    # XLEN of "my stream" (2 entries) printed just before the marker
    assert _output_before_done(zsh.run_completed("xs XLEN my")) == "2"


@need_zsh
def test_zsh_completion_can_be_sourced_after_compinit(world):
    sh = zsh_shell(world, "source")
    try:
        assert sh.complete("xs XREADGROUP GROUP ") == ["g1", "g2", "og", "sp g"]
        assert sh.complete("xs XLEN o") == ["orders"]
    finally:
        sh.close()


# ================================================================ fish

@need_fish
def test_committed_fish_script_parses_and_is_what_xs_prints(world):
    path = os.path.join(ROOT, "completions", "xs.fish")
    with open(path, "rb") as f:
        assert f.read() == world.script["fish"]
    p = subprocess.run([FISH, "--no-execute", path], capture_output=True, timeout=60)
    assert (p.returncode, p.stderr) == (0, b"")


@need_fish
def test_fish_completes_commands_and_options(fish_c):
    _commands_and_options(fish_c)


@need_fish
def test_fish_completes_groups_then_consumers_after_xreadgroup_group(fish_c):
    _groups_after_xreadgroup_group(fish_c)


@need_fish
def test_fish_completes_positional_streams_groups_consumers(fish_c, world):
    _positional_names(fish_c, world.other)
    assert fish_c("xs XINFO CONSUMERS my\\ stream ") == ["sp g"]
    assert fish_c("xs XREADGROUP GROUP 'sp g' ") == ["c 1"]


@need_fish
def test_fish_completes_files_for_import_and_porcelain_words(fish_c, world):
    assert fish_c("xs import ./") == ["./data1.jsonl", "./data2.jsonl", "./other.txt", "./sub/"]
    assert fish_c("xs import ./d") == ["./data1.jsonl", "./data2.jsonl"]
    assert fish_c("xs --db ") == ["sub/"]
    assert fish_c("xs --db=%s" % str(world.other)[:-3]) == ["--db=%s/" % world.other]
    _porcelain(fish_c)


@need_fish
def test_fish_inserts_a_name_with_a_space_quoted_so_the_command_runs(fish_pty):
    assert fish_pty.complete("xs XLEN my") == ["my stream"]
    assert _output_before_done(fish_pty.run_completed("xs XLEN my")) == "2"
