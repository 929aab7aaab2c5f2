"""The grammar hint in the prompt's bottom toolbar: what is still to
type, as redis-cli's hints do.  The grammar is parsed into a small tree
(words, sequences, <a | b>, [optional], [repeated ...], and runs of
optional parts, which Redis takes in any order), the words typed are
matched against it (every reading at once, keywords preferred over
placeholders), and what is left of the best reading is shown, fitted to
the terminal's width by folding optional parts ("[+4 more]") before
anything required.

Who imports it: xstream_cli.prompt (the toolbar).
"""

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
