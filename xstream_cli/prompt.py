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
"""
import os
import sys
import time

from xstream_cli import context

NAMES_TTL = 3.0            # seconds between reads of stream / group names from the store
MAX_STREAMS = 2000         # stream names offered (and whose groups are read)
_LOCAL = ("HELP", "QUIT", "EXIT", "CLEAR")


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


# ---------------------------------------------------------------- completion

class Names:
    """Stream, group and consumer names from the store, read at most every
    NAMES_TTL seconds (one read transaction)."""

    def __init__(self, session, ttl=NAMES_TTL):
        self.session = session
        self.ttl = ttl
        self.at = -1e9
        self.streams = []
        self.groups = {}            # stream -> [group]
        self.consumers = {}         # (stream, group) -> (time, [consumer])

    def _refresh(self):
        now = time.monotonic()
        if now - self.at < self.ttl:
            return
        self.at = now
        if not self.session.opened:  # a store not made yet: nothing to offer, nothing created
            return

        def read(tx):
            names = tx.stream_names()[:MAX_STREAMS]
            return names, {n: tx.group_names(n) for n in names}
        try:
            self.streams, self.groups = self.session.store.run(read, write=False)
        except Exception:           # a completion never fails the prompt
            pass
        self.consumers = {}

    def stream_names(self):
        self._refresh()
        return self.streams

    def group_names(self, stream=None):
        self._refresh()
        if stream is not None:
            return self.groups.get(stream, [])
        seen = []
        for gs in self.groups.values():
            seen += [g for g in gs if g not in seen]
        return seen

    def consumer_names(self, stream, group):
        self._refresh()
        key = (stream, group)
        if not self.session.opened:
            return []
        if key not in self.consumers:
            try:
                info = self.session.store.run(lambda tx: tx.consumers_info(stream, group), write=False)
                self.consumers[key] = [c.name for c in info]
            except Exception:
                self.consumers[key] = []
        return self.consumers[key]


def _grammar_words(grammar):
    """(positional placeholders before the first option, {KEYWORD:
    placeholder after it}, [keywords]) from a grammar line."""
    toks = grammar.replace("[", " [ ").replace("]", " ] ").replace("<", " < ").replace(">", " > ") \
        .replace("|", " | ").split()
    positional = []
    depth = 0
    opened = False
    after = {}
    keywords = []
    prev_kw = None
    for t in toks:
        if t in ("[", "<"):
            depth += 1
            opened = True
            prev_kw = None
            continue
        if t in ("]", ">"):
            depth -= 1
            prev_kw = None
            continue
        if t in ("|", "...", "=", "~", "*", "$"):
            prev_kw = None
            continue
        is_kw = t.isupper() and t.replace("-", "").isalpha()
        if is_kw:
            if t not in keywords:
                keywords.append(t)
            prev_kw = t
        else:
            if prev_kw is not None and prev_kw not in after:
                after[prev_kw] = t
            prev_kw = None
        if not opened and depth == 0:
            positional.append(None if is_kw else t)
    return positional, after, keywords


def _porcelain_names():
    try:
        from xstream_cli.porcelain import commands
        return sorted(commands()[1])
    except Exception:                    # completion never fails the prompt
        return []


def complete_words(words, current, names):
    """Candidates for the word being typed: ``words`` are the complete
    words before it (strings), ``current`` its beginning.  Returns a list
    of strings."""
    from xstream_cli.commands import COMMANDS, SUBCOMMANDS
    cur_up = current.upper()

    def match(cands, case_of=current):
        lower = case_of[:1].islower()
        out = []
        for c in cands:
            if c.upper().startswith(cur_up):
                out.append(c.lower() if lower and c.isupper() else c)
        return out

    if not words:
        return match(sorted([n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS)] + list(_LOCAL))
                     + _porcelain_names())
    name = words[0].upper()
    if name == "HELP":
        if len(words) == 1:
            return match(sorted(n.decode() for n in list(COMMANDS) + list(SUBCOMMANDS)))
        subs = SUBCOMMANDS.get(words[1].upper().encode())
        return match(sorted(n.decode() for n in subs)) if subs and len(words) == 2 else []
    subs = SUBCOMMANDS.get(name.encode())
    if subs is not None:
        if len(words) == 1:
            return match(sorted(n.decode() for n in subs))
        cmd = subs.get(words[1].upper().encode())
        base = 2
    else:
        cmd = COMMANDS.get(name.encode())
        base = 1
    if cmd is None:
        return []
    grammar_toks = cmd.grammar.split()[base:]
    positional, after, keywords = _grammar_words(" ".join(grammar_toks))
    args = words[base:]
    upper = [a.upper() for a in args]
    placeholder = None
    if "STREAMS" in upper:
        placeholder = "key"                      # keys (then IDs) after STREAMS
    elif args and upper[-1] in after:
        placeholder = after[upper[-1]]
    elif len(args) < len(positional):
        placeholder = positional[len(args)]
    cands = []
    enc = _unword
    from xstream_cli.output.pretty import token as dec  # a name as typed: bare, or quoted with escapes
    key = enc(args[0]) if positional[:1] == ["key"] and args else None
    if placeholder in ("key", "newkey"):
        cands = [dec(n) for n in names.stream_names()]
    elif placeholder == "group":
        if key is None and "STREAMS" in upper:
            key = enc(args[upper.index("STREAMS") + 1]) if upper.index("STREAMS") + 1 < len(args) else None
        cands = [dec(n) for n in names.group_names(key)]
    elif placeholder == "consumer":
        if name == "XREADGROUP" and len(args) >= 2:
            group = enc(args[1])
            streams = names.stream_names()
            out = []
            for st in streams:
                if group in names.group_names(st):
                    out += [dec(c) for c in names.consumer_names(st, group) if dec(c) not in out]
            cands = out
        elif key is not None and len(args) >= 2:
            cands = [dec(c) for c in names.consumer_names(key, enc(args[1]))]
    result = [c for c in cands if c.startswith(current)]
    if placeholder is None or current:
        result += match([k for k in keywords if k not in upper])
    return result


def _unword(word):
    """A typed word back to bytes (quotes and escapes as split_line reads them)."""
    from xstream_cli.splitargs import SplitError, split_line
    b = os.fsencode(word)
    try:
        parts = split_line(b)
    except SplitError:
        return b
    return parts[0] if len(parts) == 1 else b


# ------------------------------------------------------ the grammar hint
#
# The bottom toolbar shows what is still to type, as redis-cli's hints
# do: the grammar is parsed into a small tree (words, sequences, <a | b>,
# [optional], [repeated ...], and runs of optional parts, which Redis
# takes in any order), the words typed are matched against it (every
# reading at once, keywords preferred over placeholders), and what is
# left of the best reading is shown, fitted to the terminal's width by
# folding optional parts ("[+4 more]") before anything required.

_SYMBOLS = frozenset("*$=~")
_MAX_READINGS = 64


def _grammar_tree(grammar):
    """A grammar line (without the command name) -> a tuple of nodes:
    ("w", word), ("seq", nodes), ("alt", nodes), ("opt", node),
    ("rep", node) for ``[x ...]``, ("run", opt nodes) for consecutive
    optional parts."""
    toks = grammar.replace("[", " [ ").replace("]", " ] ").replace("<", " < ").replace(">", " > ") \
        .replace("|", " | ").split()
    pos = [0]

    def seq(end):
        options, items = [], []
        while pos[0] < len(toks):
            t = toks[pos[0]]
            pos[0] += 1
            if t == end:
                break
            if t == "|":
                options.append(items)
                items = []
            elif t == "[":
                inner = seq("]")
                if inner[0] == "seq" and inner[1] and inner[1][-1] == ("w", "..."):
                    body = inner[1][:-1]
                    items.append(("rep", body[0] if len(body) == 1 else ("seq", body)))
                else:
                    items.append(("opt", inner))
            elif t == "<":
                items.append(seq(">"))
            else:
                items.append(("w", t))
        options.append(items)
        nodes = [_runs(o) for o in options]
        if len(nodes) == 1:
            return ("seq", nodes[0]) if len(nodes[0]) != 1 else nodes[0][0]
        return ("alt", tuple(("seq", n) if len(n) != 1 else n[0] for n in nodes))
    top = seq(None)
    return top[1] if top[0] == "seq" else (top,)


def _runs(items):
    """Consecutive optional parts as one unordered run."""
    out, run = [], []
    for it in items + [None]:
        if it is not None and it[0] == "opt":
            run.append(it)
            continue
        if len(run) > 1:
            out.append(("run", tuple(run)))
        else:
            out += run
        run = []
        if it is not None:
            out.append(it)
    return tuple(out)


def _heads(cont, depth=0):
    """The continuations equal to ``cont`` whose first node is a word
    (or that are empty)."""
    if depth > 40:
        return
    if not cont:
        yield cont
        return
    node, rest = cont[0], cont[1:]
    kind = node[0]
    if kind == "w":
        yield cont
    elif kind == "seq":
        yield from _heads(tuple(node[1]) + rest, depth + 1)
    elif kind == "alt":
        for o in node[1]:
            yield from _heads((o,) + rest, depth + 1)
    elif kind == "opt":
        yield from _heads((node[1],) + rest, depth + 1)
        yield from _heads(rest, depth + 1)
    elif kind == "rep":
        yield from _heads((node[1], node) + rest, depth + 1)
        yield from _heads(rest, depth + 1)
    elif kind == "run":
        for i, o in enumerate(node[1]):
            others = node[1][:i] + node[1][i + 1:]
            after = (("run", others),) if others else ()
            yield from _heads((o[1],) + after + rest, depth + 1)
        yield from _heads(rest, depth + 1)


def _word_matches(pattern, word):
    """2: a keyword or symbol typed as such; 1: a placeholder's value; 0: no."""
    if pattern in _SYMBOLS:
        return 2 if word == pattern else 0
    if pattern.isupper() and pattern.replace("-", "").isalpha():
        return 2 if word.upper() == pattern else 0
    return 1


def remaining(grammar, words):
    """What is still to type after ``words`` (complete words) in
    ``grammar`` (without the command name): the nodes left of the best
    reading, or None when the words do not fit the grammar."""
    states = {_grammar_tree(grammar): 0}
    for w in words:
        nxt = {}
        for cont, score in states.items():
            for c in _heads(cont):
                if not c:
                    continue
                m = _word_matches(c[0][1], w)
                if m:
                    key = c[1:]
                    sc = score + (m == 2)
                    if nxt.get(key, -1) < sc:
                        nxt[key] = sc
                if len(nxt) >= _MAX_READINGS:
                    break
        if not nxt:
            return None
        states = nxt
    best = max(states.values())
    return next(c for c, sc in states.items() if sc == best)


def _render(node, inner=False):
    kind = node[0]
    if kind == "w":
        return node[1]
    if kind == "seq":
        return " ".join(_render(n) for n in node[1])
    if kind == "alt":
        text = " | ".join(_render(n) for n in node[1])
        return text if inner else "<%s>" % text
    if kind == "opt":
        return "[%s]" % _render(node[1], True)
    if kind == "rep":
        return "[%s ...]" % _render(node[1], True)
    return " ".join(_render(n) for n in node[1])      # run


def _fit(head, nodes, width):
    """``head`` and the rendered ``nodes`` within ``width`` columns:
    optional parts (a run, or one) folded into "[+N more]" from the
    right, keeping every required part visible."""
    items = []                                   # (text, foldable)
    for n in nodes:
        if n[0] == "run":
            items += [(_render(o), True) for o in n[1]]
        else:
            items.append((_render(n), n[0] == "opt"))

    def line(keep):
        out, hidden = [], 0
        for i, (t, foldable) in enumerate(items):
            if foldable and i not in keep:
                hidden += 1
                continue
            if hidden:
                out.append("[+%d more]" % hidden)
                hidden = 0
            out.append(t)
        if hidden:
            out.append("[+%d more]" % hidden)
        return " ".join([head] + out)
    full = line(set(range(len(items))))
    if width is None or len(full) <= width:
        return full
    keep = set(i for i, (_, f) in enumerate(items) if not f)
    for i, (_, f) in enumerate(items):       # unfold from the left while it fits
        if f and len(line(keep | {i})) <= width:
            keep.add(i)
        elif f:
            break
    return line(keep)


def hint(text, width=None):
    """The bottom toolbar for the line typed so far: the grammar of the
    command still to type after the words already typed (as redis-cli's
    hints), within ``width`` columns."""
    from xstream_cli.commands import COMMANDS, SUBCOMMANDS
    words = text.split()
    if not words:
        return "help [COMMAND]   Tab completes   Ctrl-C cancels the line   Ctrl-D or quit exits"
    name = words[0].upper().encode("utf-8", "replace")
    if name == b"HELP":
        return "help [COMMAND]: the command list, or one command's grammar, summary and examples"
    cmd = COMMANDS.get(name)
    base = 1
    if cmd is None:
        subs = SUBCOMMANDS.get(name)
        if subs is None:
            return ""
        if len(words) > 1 or text.endswith(" "):
            cmd = subs.get(words[1].upper().encode("utf-8", "replace")) if len(words) > 1 else None
        if cmd is None:
            return "%s %s" % (name.decode(), " | ".join(sorted(n.decode() for n in subs)))
        base = 2
    gwords = cmd.grammar.split(" ")
    head, grammar = " ".join(gwords[:base]), " ".join(gwords[base:])
    typed = words[base:]
    if typed and not text[-1:].isspace():
        typed = typed[:-1]                       # the word being typed: not taken yet
    left = remaining(grammar, typed) if typed else None
    if left is None or not left:                 # nothing typed, complete, or not this grammar
        return _fit(head, _grammar_tree(grammar), width)
    return _fit(head + ", next:", left, width)


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
