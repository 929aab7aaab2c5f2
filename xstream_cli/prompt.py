"""The interactive prompt (``xs`` on a terminal).

With prompt_toolkit (imported here only, never on the one-shot or script
path): persistent history in ``$XDG_STATE_HOME/xs/history`` (default
``~/.local/state/xs/history``; the directory 0700, the file 0600), Tab
completion of command names, subcommands, keywords from the command's
grammar and stream, group and consumer names read from the store (a read
transaction at most every few seconds), the grammar of the command being
typed in the bottom toolbar (what is still to type, after the words
already typed, as redis-cli's hints), and suggestions from history.

When prompt_toolkit cannot start (TERM=dumb, not installed, no usable
terminal) the prompt falls back to a plain input() loop with readline.

Both: ``help`` / ``help XADD`` (xstream_cli.help), ``quit`` / ``exit``,
``clear``, the porcelain commands (``tail -f s``, ``ls``, ``info``, ``trim
...``: run as ``xs --db STORE ...`` would run them), a "did you mean" or
usage line after an error as on the command line, and a pasted block
run line by line.  Ctrl-D exits, Ctrl-C cancels the line being typed and
keeps the prompt; Ctrl-C during a blocked read, a long output or a
porcelain command returns to the prompt.

Here: the history, one line typed (run, or help, quit, clear, a
porcelain command), and the two loops.  Tab completion is
xstream_cli.prompt_complete; the toolbar's grammar hint,
xstream_cli.prompt_hint.
"""
import os
import sys

from xstream_cli import context
from xstream_cli.prompt_complete import Names, complete_words
from xstream_cli.prompt_hint import hint

# ------------------------------------------------------------------ history

def history_path():
    """$XDG_STATE_HOME/xs/history (an absolute XDG_STATE_HOME only, as the
    XDG spec says), else ~/.local/state/xs/history."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "xs", "history")


def prepare_history(path):
    """Create the history directory (0700) and file (0600); True when the
    file can be used.  Existing ones are tightened to those modes (the
    history holds every value typed)."""
    d = os.path.dirname(path)
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        os.chmod(d, 0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.fchmod(fd, 0o600)
        finally:
            os.close(fd)
        return True
    except OSError:
        return False


# ------------------------------------------------------------------ one line

def _help(words):
    from xstream_cli import help as h
    if not words:
        return h.overview(h.terminal_width())
    name = " ".join(words)
    if name.lower() == "recipes":           # as xs help recipes
        from xstream_cli import recipes
        return recipes.text()
    text = h.command_help(name)
    if text is None:
        guess = h.suggest(words[0])
        return "no such command: %s%s" % (name, "; did you mean %s?" % guess if guess else "")
    return text


def handle(s, line, out):
    """Run what was typed (or pasted: each line of a pasted block is a
    command of its own).  Returns False when the prompt should end."""
    for one in line.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not _handle_line(s, one, out):
            return False
    return True


def _handle_line(s, line, out):
    from storage.errors import RedisError
    from storage.store import StoreError
    from storage.txn import StoreFailure
    from xstream_cli.splitargs import SplitError, split_line
    try:
        argv = split_line(os.fsencode(line))
    except SplitError:
        out.write(b"Invalid argument(s)\n")
        out.flush()
        return True
    if not argv:
        return True
    first = argv[0].lower()
    if first in (b"quit", b"exit"):
        return False
    if first == b"help":
        text = _help([os.fsdecode(a) for a in argv[1:]])
        out.write(text.rstrip("\n").encode("utf-8", "replace") + b"\n")
        out.flush()
        return True
    if first == b"clear" and len(argv) == 1:
        out.write(b"\x1b[H\x1b[2J\x1b[3J")
        out.flush()
        return True
    if _porcelain(first) or _porcelain_twin(argv):
        _run_porcelain(s, argv)
        return True
    try:
        r = s.execute(argv)
        s.output(r, out, argv)
        if isinstance(r, RedisError):
            _hint(r, argv)
    except KeyboardInterrupt:            # a blocked read or a long output: back to the prompt
        try:
            out.write(b"\n")
            out.flush()
        except OSError:
            pass
    except (StoreFailure, StoreError) as e:
        out.write(("xs: %s\n" % e).encode("utf-8", "replace"))
        out.flush()
    return True


def _hint(e, argv):
    """After an error, what the command line says on a terminal too: the
    closest command name, or the command's usage line."""
    from xstream_cli.runner import _hint as hint
    try:
        text = hint(e.text, argv)
    except Exception:                    # a hint never fails the prompt
        return
    if text:
        sys.stderr.write(("\x1b[2m%s\x1b[0m\n" % text) if _colour() else text + "\n")
        sys.stderr.flush()


def _colour():
    return not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb" and sys.stderr.isatty()


def _porcelain(name):
    """Whether ``name`` (bytes, lower case) is a porcelain command
    (tail, ls, info, trim, ...): the prompt runs them as the command line
    does."""
    from xstream_cli.commands import is_command
    try:
        text = name.decode("ascii")
    except UnicodeDecodeError:
        return False
    if is_command(text):
        return False
    from xstream_cli.porcelain import commands
    return text in commands()[1]


def _porcelain_twin(argv):
    """``restore FILE``: the porcelain command of a name Redis has too
    (xstream_cli.commands.porcelain_use; issue 26)."""
    from xstream_cli.commands import porcelain_use
    return porcelain_use([os.fsdecode(a) for a in argv])


def _run_porcelain(s, argv):
    """A porcelain command at the prompt: run as ``xs --db STORE CMD ...``
    in a child process (it opens the store its own way, which one process
    must not do twice), on this terminal; Ctrl-C ends it (and only it)."""
    import subprocess
    cmd = [sys.executable, "-m", "xstream_cli", "--db", s.db] + (["--no-sync"] if not s.durable else [])
    try:
        subprocess.run(cmd + [os.fsdecode(a) for a in argv])
    except KeyboardInterrupt:            # the child had it too: back to the prompt
        sys.stdout.write("\n")
        sys.stdout.flush()


# ------------------------------------------------------------------ prompts

def _prompt_text(s):
    return "xs %s> " % os.path.basename(os.path.abspath(s.db))


def run(g):
    """The prompt on the store ``g`` names, until Ctrl-D / quit / exit."""
    from xstream_cli.execution.session import open_session
    s = open_session(g, context.resolve_mode(g.mode))
    if os.environ.get("TERM", "") != "dumb" and sys.stdout.isatty():
        try:
            ps = _toolkit_session(s)
        except Exception:                    # no prompt_toolkit, a terminal it cannot drive
            ps = None
        if ps is not None:
            return _toolkit_loop(s, ps)
    return _plain_loop(s)


def _toolkit_session(s):
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.completion import Completer, Completion
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    names = Names(s)

    class XsCompleter(Completer):
        def get_completions(self, document, complete_event):
            text = document.text_before_cursor
            words = text.split()
            current = ""
            if words and not text[-1:].isspace():
                current = words.pop()
            try:
                cands = complete_words(words, current, names)
            except Exception:
                return
            for c in cands:
                yield Completion(c, start_position=-len(current))

    path = history_path()
    if prepare_history(path):
        history = FileHistory(path)
    else:
        sys.stderr.write("xs: history not kept (cannot write %s)\n" % path)
        history = InMemoryHistory()

    def toolbar():
        from prompt_toolkit.application.current import get_app
        try:
            app = get_app()
            return hint(app.current_buffer.document.text_before_cursor, app.output.get_size().columns - 1)
        except Exception:
            return ""
    return PromptSession(history=history, completer=XsCompleter(), complete_while_typing=False,
                         auto_suggest=AutoSuggestFromHistory(), bottom_toolbar=toolbar,
                         enable_history_search=False)


def _toolkit_loop(s, ps):
    out = sys.stdout.buffer
    text = _prompt_text(s)
    while True:
        try:
            line = ps.prompt(text)
        except KeyboardInterrupt:            # Ctrl-C: the line is dropped, the prompt stays
            continue
        except EOFError:                     # Ctrl-D
            return
        except Exception as e:               # the terminal cannot be driven after all
            sys.stderr.write("xs: line editing unavailable (%s); using a plain prompt\n" % e)
            return _plain_loop(s)
        if not handle(s, line, out):
            return


def _plain_loop(s):
    """input() with readline: TERM=dumb, or prompt_toolkit unavailable."""
    try:
        import readline  # noqa: F401  (line editing and history)
    except ImportError:
        pass
    out = sys.stdout.buffer
    text = _prompt_text(s)
    while True:
        try:
            line = input(text)
        except KeyboardInterrupt:
            sys.stdout.write("\n")
            continue
        except EOFError:
            sys.stdout.write("\n")
            return
        if not handle(s, line, out):
            return
