"""Tab completion at the interactive prompt: the candidates for the
word being typed -- command names (Redis's, the prompt's own and the
porcelain's), subcommands, keywords of the command's grammar, and
stream, group and consumer names read from the store (``Names``: one
read transaction at most every NAMES_TTL seconds, never one that
creates a store).  A completion never fails the prompt.

Who imports it: xstream_cli.prompt (its prompt_toolkit completer).
"""
import os
import time

NAMES_TTL = 3.0            # seconds between reads of stream / group names from the store
MAX_STREAMS = 2000         # stream names offered (and whose groups are read)
_LOCAL = ("HELP", "QUIT", "EXIT", "CLEAR")


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
    from xstream_cli.output.pretty_text import token as dec  # a name as typed: bare, or quoted with escapes
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
