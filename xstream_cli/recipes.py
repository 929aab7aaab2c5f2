"""Recipes: one sentence and one block of commands per everyday task,
kcat-style.  ``xs help recipes`` prints them; tools/gen_docs.py writes
them to docs/recipes.md; tests/cli/test_recipes.py runs every block as a
shell script (``needs``: what else it needs: "spark", "redis-py").

A block is run by bash with ``set -e`` in an empty directory, with the
default store (the environment's) set to a store there that holds a
stream ``events`` (a user's store); a command that runs until stopped
ends with ``&`` (the test stops it when the block is done).  The blocks
are also run one after another in one shell, as a reader who tries them
all in turn would: so no block may depend on a file another block makes,
nor make one (a store, a snapshot) that another block expects not to
exist (each block names its own: restored.xs, copy.xs).
"""

RECIPES = [
    ("Produce events from a script",
     "One command per line on stdin: a batch is one transaction with one fsync, and each reply (the new ID) "
     "is printed once it is on disk.",
     ["printf 'XADD events * user alice action login\\nXADD events * user bob action logout\\n' | xs",
      "seq 1000 | sed 's/.*/XADD events * n &/' | xs > /dev/null"], ()),
    ("Watch a stream",
     "The last entries, then every new one as it is committed (Ctrl-C ends it); --since 1h for the last "
     "hour, -c N to stop after N.",
     ["xs tail -f events &",
      "xs XADD events '*' user carol action login",
      "xs tail --since 1h -c 5 events"], ()),
    ("Process with a worker, dead-letter what keeps failing, re-drive it",
     "Each entry through a command, at least once (here it fails: false); after --max-deliveries failed "
     "deliveries an entry goes to jobs:dead, and xs redrive puts it back once the cause is fixed.",
     ["xs XADD jobs '*' file cat.png",
      "xs worker jobs -g resizers -c w1 --once --max-deliveries 1 --dead-letter jobs:dead -- false "
      "|| echo 'some entries failed'",
      "xs redrive jobs:dead",
      "xs worker jobs -g resizers -c w1 --once -- cat"], ()),
    ("Nightly retention that keeps unacknowledged work",
     "From cron: entries older than a week go, except those a consumer group has not acknowledged yet "
     "(-q: a mail only when something fails or work is held back with --drop-unacked).",
     ["xs trim --max-age 7d --dry-run",
      "xs trim --max-age 7d -q"], ()),
    ("Archive old entries to Parquet",
     "With Spark (pip install 'xstreamlog[spark]'): written, read back and checked, then trimmed; "
     "--binary for values that are not UTF-8.",
     ["xs XADD events '*' user alice",
      "xs archive events --to archive --older-than 0s -q",
      "ls archive"], ("spark",)),
    ("Back up and restore",
     "A checksummed snapshot of one consistent moment; restore verifies it before changing anything.",
     ["xs XADD events '*' user alice",
      "xs save events.snap -q",
      "xs restore --check events.snap",
      "xs --db restored.xs restore events.snap -q"], ()),
    ("Import from any producer",
     "JSON objects or field=value lines, one per line, into one stream; xs export lines (with IDs) "
     "into the streams they name.",
     ["echo '{\"user\": \"dave\", \"n\": 3}' | xs import --stream events -q -",
      "echo 'user=erin action=\"log in\"' | xs import --stream events --format kv -q -",
      "xs export events | xs --db copy.xs import -q -"], ()),
    ("Point redis-cli, redis-py or Node at xs serve",
     "A private Unix socket in the store's directory (only you can reach it); any Redis client speaks to it "
     "(node-redis: createClient({ socket: { path: 'events.xs/serve.sock' } })).",
     ["xs --db events.xs serve &",
      "until [ -S events.xs/serve.sock ]; do sleep 0.1; done",
      "redis-cli -s events.xs/serve.sock XADD events '*' user frank",
      "python3 -c \"import redis; print(redis.Redis(unix_socket_path='events.xs/serve.sock').xlen('events'))\""],
     ("redis-py",)),
    ("JSON for scripts",
     "--json prints one document per reply, --jsonl one line per entry in the shape of xs export "
     "(bytes that are not UTF-8 as {\"b64\": ...}); both stream a long range.",
     ["xs XADD events '*' user alice",
      "xs --json XRANGE events - + COUNT 10",
      "xs --jsonl XRANGE events - + | head -n 1"], ()),
    ("A small pipeline, from producer to archive",
     "Produce, process with a group, keep a week while it is unread, archive the rest.",
     ["printf 'XADD orders * sku a1 qty 2\\nXADD orders * sku b7 qty 1\\n' | xs > /dev/null",
      "xs worker orders -g billing -c b1 --once -q -- cat",
      "xs ls orders",
      "xs trim orders --max-age 7d -q",
      "xs archive orders --to archive --older-than 0s -q"], ("spark",)),
]


def text(width=78):
    """The recipes as ``xs help recipes`` prints them."""
    import textwrap
    out = ["xs recipes (docs/recipes.md; each is run by the tests)", ""]
    for title, sentence, commands, _ in RECIPES:
        out.append(title)
        out += textwrap.wrap(sentence, width, initial_indent="  ", subsequent_indent="  ")
        out += ["    " + c for c in commands]
        out.append("")
    return "\n".join(out)


def markdown():
    """docs/recipes.md."""
    out = ["# Recipes", "",
           "[README](../README.md) · [user guide](guide.md) · [workers](workers.md)", "",
           "One task, one sentence, one block of commands; `xs help recipes` prints the same.  Every block",
           "is run by tests/cli/test_recipes.py (generated from xstream_cli/recipes.py by tools/gen_docs.py).",
           ""]
    for title, sentence, commands, needs in RECIPES:
        out += ["## " + title, "", sentence + (" (Needs %s.)" % " and ".join(needs) if needs else ""), ""]
        out += ["    " + c for c in commands]
        out.append("")
    return "\n".join(out)
