"""The help tables: the command families, each Redis command's summary,
the Redis version that introduced it, its time complexity and examples
(``DOCS``), and the common commands of the Redis types xs does not hold
(``OTHER_TYPES``, ``other_type``).  Data only, importing nothing: COMMAND
DOCS (xstream_cli.server.docs) and the man pages read them without the
help texts, which list the porcelain commands (and so import them all).

Who imports it: xstream_cli.help_text and xstream_cli.help (which
re-exports every table), xstream_cli.server.docs.
"""

REDIS_DOCS_URL = "https://redis.io/docs/latest/commands/%s/"

# (family, man page, title, blurb, Redis command names) -- every command of
# the command table is in exactly one family (tests/cli/test_help.py checks)
FAMILIES = [
    ("stream", "streams", "stream commands",
     "Adding, reading, trimming and inspecting streams.",
     ["XADD", "XRANGE", "XREVRANGE", "XLEN", "XDEL", "XDELEX", "XTRIM", "XSETID", "XCFGSET",
      "XIDMPRECORD", "XREAD", "XINFO"]),
    ("group", "groups", "consumer group commands",
     "Consumer groups: delivery, pending entries lists (PELs), acknowledgement, claiming.",
     ["XGROUP", "XREADGROUP", "XACK", "XACKDEL", "XNACK", "XPENDING", "XCLAIM", "XAUTOCLAIM"]),
    ("keyspace", "keyspace", "keyspace commands",
     "The keyspace: every key is a stream.",
     ["DEL", "UNLINK", "EXISTS", "TYPE", "KEYS", "SCAN", "RENAME", "COPY", "EXPIRE", "PEXPIRE", "EXPIREAT",
      "PEXPIREAT", "TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME", "PERSIST", "CONFIG",
      "DUMP", "RESTORE"]),
]

PORCELAIN_BLURB = ("Commands that are not Redis names (lower case; they never shadow one): "
                   "for people and scripts.")

# name -> (summary, since (Redis version), time complexity, examples).
# Summaries and complexities are written for xs from the Redis command
# reference; an example is one command line as typed in a shell after "xs".
# A command's examples run in order on an empty store (as Redis's own pages
# do, they first add what they need: entries, a group, pending entries);
# tests/cli/test_help_examples.py runs them and compares with redis-server.
_ENTRY = "XADD events 1700000000000-0 user alice action login"
_ENTRIES = [_ENTRY, "XADD events 1700000000001-0 user bob action logout"]
_PENDING = _ENTRIES + ["XGROUP CREATE events workers 0", "XREADGROUP GROUP workers alice STREAMS events '>'"]
DOCS = {
    "XADD": (
        "Append an entry (field-value pairs) to a stream and print its ID; the stream is "
        "created unless NOMKSTREAM is given. '*' lets xs pick the ID; MAXLEN / MINID trim "
        "in the same step; IDMP / IDMPAUTO drop a producer's duplicate submissions.",
        "5.0.0",
        "O(1) per added entry, plus O(N) for the N entries evicted when trimming.",
        ["XADD events '*' user alice action login",
         "XADD events MAXLEN '~' 1000 '*' user bob action logout",
         "XADD orders 1700000000000-0 user carol item book",
         "XADD events IDMP producer-1 req-42 '*' user dave action pay"]),
    "XRANGE": (
        "Entries with IDs between start and end, oldest first. '-' and '+' are the smallest "
        "and largest IDs, '(' before an ID excludes it; COUNT caps the reply.",
        "5.0.0",
        "O(N) in the entries returned (O(1) for a small fixed COUNT), plus O(log N) to find "
        "the start.",
        _ENTRIES + ["XRANGE events - +",
         "XRANGE events 1700000000000 + COUNT 10",
         "XRANGE events '(1700000000000-0' + COUNT 10"]),
    "XREVRANGE": (
        "XRANGE in reverse: entries from end down to start, newest first.",
        "5.0.0",
        "O(N) in the entries returned (O(1) for a small fixed COUNT).",
        _ENTRIES + ["XREVRANGE events + - COUNT 1",
         "XREVRANGE events + 1700000000000"]),
    "XLEN": (
        "The number of entries in a stream (0 when it does not exist).",
        "5.0.0", "O(1).",
        [_ENTRY, "XLEN events"]),
    "XDEL": (
        "Delete entries by ID; prints how many existed. The stream keeps its last ID.",
        "5.0.0", "O(1) per ID.",
        _ENTRIES + ["XDEL events 1700000000000-0",
         "XDEL events 1700000000000-0 1700000000001-0"]),
    "XDELEX": (
        "Delete entries by ID, saying per ID what happened, and choose what becomes of their "
        "references in consumer groups' pending lists: KEEPREF keeps them, DELREF removes "
        "them, ACKED deletes only entries every group has acknowledged.",
        "8.2.0", "O(1) per ID, plus the consumer groups visited for DELREF and ACKED.",
        _PENDING + ["XDELEX events ACKED IDS 1 1700000000000-0",
                    "XDELEX events IDS 2 1700000000000-0 1700000000001-0"]),
    "XTRIM": (
        "Trim a stream to at most MAXLEN entries, or drop the entries older than the MINID "
        "ID; '~' lets xs trim less than asked, LIMIT caps the entries removed.",
        "5.0.0", "O(N) in the entries evicted.",
        _ENTRIES + ["XTRIM events MAXLEN 1000",
                    "XTRIM events MINID 1700000000001",
         "XTRIM events MAXLEN '~' 1000 LIMIT 100"]),
    "XSETID": (
        "Set a stream's last ID (and optionally its entries-added counter and largest "
        "deleted ID): later '*' IDs continue from there.",
        "5.0.0", "O(1).",
        [_ENTRY, "XSETID events 1800000000000-0"]),
    "XIDMPRECORD": (
        "Record that a producer's idempotent ID added an existing entry, so a later XADD IDMP "
        "with the same pair is a duplicate (replaying IDMP history, as Redis's AOF does). OK "
        "also when the pair already maps to that entry; an error when it maps to another.",
        "8.8.0", "O(1).",
        [_ENTRY, "XIDMPRECORD events producer-1 order-42 1700000000000-0"]),
    "XCFGSET": (
        "Configure a stream's idempotent-production memory: how many seconds (IDMP-DURATION) "
        "and how many IDs per producer (IDMP-MAXSIZE) XADD IDMP remembers. Clears what was "
        "remembered.",
        "8.6.0", "O(1).",
        [_ENTRY, "XCFGSET events IDMP-DURATION 300",
         "XCFGSET events IDMP-DURATION 300 IDMP-MAXSIZE 1000"]),
    "XREAD": (
        "Read entries after the given IDs from one or more streams; '$' means only new "
        "entries, '+' the last one. BLOCK waits (milliseconds, 0 forever) until something "
        "arrives, even from another process.",
        "5.0.0",
        "O(M) per stream for the M entries returned; a write wakes the readers blocked on "
        "its stream.",
        _ENTRIES + ["XREAD COUNT 10 STREAMS events 0",
         "XREAD BLOCK 5000 STREAMS events '$'",
         "XREAD STREAMS events orders 0 0"]),
    "XINFO": (
        "Inspect a stream, its consumer groups or a group's consumers.",
        "5.0.0", "See the subcommands.",
        _PENDING + ["XINFO STREAM events", "XINFO GROUPS events", "XINFO CONSUMERS events workers"]),
    "XINFO STREAM": (
        "A stream's length, first and last entries, IDs and counters, groups; FULL adds its "
        "entries, groups, pending lists and consumers (COUNT caps each list, 0 for all).",
        "5.0.0", "O(1); FULL: O(N) in the entries and pending entries returned.",
        _PENDING + ["XINFO STREAM events", "XINFO STREAM events FULL COUNT 5"]),
    "XINFO GROUPS": (
        "A stream's consumer groups: consumers, pending entries, last delivered ID, lag.",
        "5.0.0", "O(1) per group.",
        _PENDING + ["XINFO GROUPS events"]),
    "XINFO CONSUMERS": (
        "A group's consumers: pending entries, idle time, inactive time.",
        "5.0.0", "O(1) per consumer.",
        _PENDING + ["XINFO CONSUMERS events workers"]),
    "XINFO HELP": (
        "The XINFO subcommands, briefly.",
        "5.0.0", "O(1).",
        ["XINFO HELP"]),
    "XGROUP": (
        "Create, move, destroy consumer groups; create and delete consumers.",
        "5.0.0", "See the subcommands.",
        ["XGROUP CREATE events workers '$' MKSTREAM", "XGROUP HELP"]),
    "XGROUP CREATE": (
        "Create a consumer group that delivers entries after the given ID ('$': only new "
        "ones, 0: all); MKSTREAM creates a missing stream, ENTRIESREAD sets its lag counter.",
        "5.0.0", "O(1).",
        ["XGROUP CREATE events workers 0 MKSTREAM",
         "XGROUP CREATE events audit '$'"]),
    "XGROUP SETID": (
        "Move a group's last delivered ID (replay with 0, skip to the end with '$').",
        "5.0.0", "O(1).",
        ["XGROUP CREATE events workers '$' MKSTREAM", "XGROUP SETID events workers 0"]),
    "XGROUP DESTROY": (
        "Delete a consumer group, its consumers and its pending entries list.",
        "5.0.0", "O(N) in the group's pending entries.",
        ["XGROUP CREATE events workers '$' MKSTREAM", "XGROUP DESTROY events workers"]),
    "XGROUP CREATECONSUMER": (
        "Add a consumer to a group (XREADGROUP also creates consumers when they first read).",
        "6.2.0", "O(1).",
        ["XGROUP CREATE events workers '$' MKSTREAM", "XGROUP CREATECONSUMER events workers alice"]),
    "XGROUP DELCONSUMER": (
        "Delete a consumer; its pending entries are dropped from the group (claim them first).",
        "5.0.0", "O(1), plus O(N) in the consumer's pending entries.",
        _PENDING + ["XGROUP DELCONSUMER events workers alice"]),
    "XGROUP HELP": (
        "The XGROUP subcommands, briefly.",
        "5.0.0", "O(1).",
        ["XGROUP HELP"]),
    "XREADGROUP": (
        "Read as a consumer of a group: '>' delivers entries never delivered to the group "
        "and adds them to the consumer's pending list (until XACK); another ID re-reads the "
        "consumer's own pending entries. NOACK skips the pending list; CLAIM also takes over "
        "entries pending longer than min-idle-time; BLOCK waits as in XREAD.",
        "5.0.0",
        "O(M) per stream for the M entries returned; CLAIM adds O(log N) per claimed entry.",
        _ENTRIES + ["XGROUP CREATE events workers 0",
                    "XREADGROUP GROUP workers alice COUNT 10 STREAMS events '>'",
         "XREADGROUP GROUP workers alice BLOCK 5000 STREAMS events '>'",
         "XREADGROUP GROUP workers alice STREAMS events 0",
         "XREADGROUP GROUP workers alice CLAIM 60000 COUNT 10 STREAMS events '>'"]),
    "XACK": (
        "Acknowledge entries: remove them from the group's pending entries list. Prints how "
        "many were pending.",
        "5.0.0", "O(1) per ID.",
        _PENDING + ["XACK events workers 1700000000000-0",
         "XACK events workers 1700000000000-0 1700000000001-0"]),
    "XACKDEL": (
        "Acknowledge entries and delete them from the stream in one step; KEEPREF / DELREF "
        "/ ACKED choose what happens to other groups' references to them.",
        "8.2.0", "O(1) per ID, plus the consumer groups visited for DELREF and ACKED.",
        _PENDING + ["XACKDEL events workers IDS 1 1700000000000-0",
         "XACKDEL events workers ACKED IDS 2 1700000000000-0 1700000000001-0"]),
    "XNACK": (
        "Give pending entries back to the group without acknowledging them, so another "
        "consumer gets them at once. SILENT takes one off their delivery count, FAIL keeps "
        "it, FATAL sets it to the maximum (failed for good); RETRYCOUNT sets it exactly.",
        "8.8.0", "O(1) per ID.",
        _PENDING + ["XNACK events workers FAIL IDS 1 1700000000000-0",
         "XNACK events workers SILENT IDS 2 1700000000000-0 1700000000001-0"]),
    "XPENDING": (
        "A group's pending entries: without a range, a summary (count, smallest and largest "
        "ID, count per consumer); with start end count, one line per entry (ID, consumer, "
        "idle milliseconds, deliveries), filtered by IDLE and consumer.",
        "5.0.0",
        "O(N) in the entries returned; the summary is O(1) plus O(C) for C consumers; IDLE "
        "scans the range.",
        _PENDING + ["XPENDING events workers",
         "XPENDING events workers - + 10",
         "XPENDING events workers IDLE 60000 - + 10 alice"]),
    "XCLAIM": (
        "Take over pending entries idle for at least min-idle-time milliseconds: they move to "
        "the given consumer with their delivery count raised (JUSTID: not raised, IDs only).",
        "5.0.0", "O(log N) per ID, N the size of the pending entries list.",
        _PENDING + ["XCLAIM events workers bob 60000 1700000000000-0",
         "XCLAIM events workers bob 60000 1700000000000-0 JUSTID"]),
    "XAUTOCLAIM": (
        "Scan the pending entries list from start and claim up to COUNT (default 100) entries "
        "idle for at least min-idle-time; prints the cursor to continue from, the claimed "
        "entries and the IDs of entries that no longer exist.",
        "6.2.0", "O(1) for a small COUNT (the scan visits at most 10 x COUNT entries).",
        _PENDING + ["XAUTOCLAIM events workers bob 60000 0-0 COUNT 10",
         "XAUTOCLAIM events workers bob 60000 0-0 JUSTID"]),
    "DEL": (
        "Delete streams, with their entries, groups and pending lists; prints how many "
        "existed.",
        "1.0.0", "O(N) in the keys given, plus O(M) in the entries of each deleted stream.",
        [_ENTRY, "DEL events", "DEL events orders"]),
    "UNLINK": (
        "Delete streams, as DEL does (Redis frees their memory later; a store has nothing "
        "to free later); prints how many existed.",
        "4.0.0", "O(1) for each key given, plus O(M) in the entries of each deleted stream.",
        [_ENTRY, "UNLINK events orders"]),
    "EXISTS": (
        "How many of the given keys exist (a key named twice counts twice).",
        "1.0.0", "O(N) in the keys given.",
        [_ENTRY, "EXISTS events", "EXISTS events orders"]),
    "TYPE": (
        "The type of a key: 'stream', or 'none' when it does not exist.",
        "1.0.0", "O(1).",
        [_ENTRY, "TYPE events"]),
    "KEYS": (
        "Every key matching a glob-style pattern (* ? [abc] [^a] [a-z], \\ escapes).",
        "1.0.0", "O(N) in the keys of the store.",
        [_ENTRY, "KEYS '*'", "KEYS 'ev*'"]),
    "SCAN": (
        "Walk the keyspace in steps: each call prints the cursor of the next call (0 when "
        "done) and some keys, filtered by MATCH pattern and TYPE.",
        "2.8.0", "O(1) per call, O(N) for a complete walk.",
        [_ENTRY, "SCAN 0", "SCAN 0 MATCH 'ev*' COUNT 100", "SCAN 0 TYPE stream"]),
    "RENAME": (
        "Rename a stream, keeping its entries and groups; a stream already named newkey is "
        "deleted first.",
        "1.0.0", "O(1), plus deleting an existing newkey.",
        [_ENTRY, "RENAME events events-2024"]),
    "COPY": (
        "Copy a stream to a new key: its entries, counters, idempotent-production history, "
        "groups, consumers and pending entries. Prints 1, or 0 when the source does not exist "
        "or the destination does (REPLACE deletes it first). DB takes only 0: a store is one "
        "database.",
        "6.2.0", "O(N) in the entries and pending entries copied.",
        [_ENTRY, "COPY events events-backup", "COPY events events-backup REPLACE"]),
    "EXPIRE": (
        "Give a stream a time to live in seconds: once it passes, the stream is gone for every "
        "command and every process, as if deleted (a time of 0 or less deletes it now). NX: "
        "only if it has no TTL; XX: only if it has one; GT / LT: only if the new time is later "
        "/ earlier (no TTL counts as forever). Prints 1, or 0 when the key is missing or the "
        "condition fails. RENAME and COPY carry the TTL; other writes keep it; PERSIST removes it.",
        "1.0.0", "O(1).",
        [_ENTRY, "EXPIRE events 3600", "EXPIRE events 7200 GT"]),
    "PEXPIRE": (
        "EXPIRE in milliseconds.",
        "2.6.0", "O(1).",
        [_ENTRY, "PEXPIRE events 90000"]),
    "EXPIREAT": (
        "EXPIRE at a Unix time in seconds (a time already past deletes the stream now).",
        "1.2.0", "O(1).",
        [_ENTRY, "EXPIREAT events 4102444800", "EXPIRETIME events"]),
    "PEXPIREAT": (
        "EXPIREAT in milliseconds.",
        "2.6.0", "O(1).",
        [_ENTRY, "PEXPIREAT events 4102444800000 NX", "PEXPIRETIME events"]),
    "TTL": (
        "The seconds until a stream expires (rounded); -1 when it has no TTL, -2 when it does "
        "not exist.",
        "1.0.0", "O(1).",
        [_ENTRY, "TTL events", "TTL no-such-stream"]),
    "PTTL": (
        "TTL in milliseconds.",
        "2.6.0", "O(1).",
        [_ENTRY, "PTTL events"]),
    "EXPIRETIME": (
        "The Unix time in seconds at which a stream expires; -1 when it has no TTL, -2 when it "
        "does not exist.",
        "7.0.0", "O(1).",
        [_ENTRY, "EXPIREAT events 4102444800", "EXPIRETIME events"]),
    "PEXPIRETIME": (
        "EXPIRETIME in milliseconds.",
        "7.0.0", "O(1).",
        [_ENTRY, "PEXPIREAT events 4102444800123", "PEXPIRETIME events"]),
    "PERSIST": (
        "Remove a stream's TTL: it no longer expires. Prints 1, or 0 when it had none or does "
        "not exist.",
        "2.2.0", "O(1).",
        [_ENTRY, "EXPIRE events 3600", "PERSIST events", "TTL events"]),
    # DUMP / RESTORE (issue 26).  An example "-x CMD ..." takes its last
    # argument from stdin, as redis-cli -x: there, the reply of the example
    # before it (a payload holds NUL bytes, which no command line can).
    "DUMP": (
        "Print a stream in Redis's own serialization (RDB type 19, RDB version 10), for RESTORE "
        "in xs or in Redis 7.0 and later; nil when the key does not exist. The payload is "
        "binary: --raw prints it with a newline after it, as redis-cli does. Not carried: "
        "consumers' active-time and the IDMP history (Redis 7.0 has no place for them); a "
        "stream with NACKed entries is refused.",
        "2.6.0", "O(N) in the entries, groups and pending entries of the stream.",
        [_ENTRY, "DUMP events"]),
    "RESTORE": (
        "Make a stream from a DUMP payload of xs or of Redis 5 to 8.0 (its entries, counters, "
        "groups, consumers and pending entries); REPLACE overwrites an existing key, ttl is "
        "0 or a TTL in ms (ABSTTL: a Unix time in ms). A payload of another type is refused: "
        "xs stores only streams. In a shell: xs --raw DUMP events | head -c -1 | "
        "xs -x RESTORE events-copy 0.",
        "2.6.0", "O(N) in the entries, groups and pending entries restored.",
        [_ENTRY, "DUMP events", "-x RESTORE events-copy 0"]),
    "CONFIG": (
        "The store's settings: CONFIG GET and CONFIG SET of the listpack node sizes "
        "(stream-node-max-entries, stream-node-max-bytes) and of the idempotent-production "
        "settings new streams take (stream-idmp-duration, stream-idmp-maxsize).",
        "2.0.0", "Depends on the subcommand.",
        ["CONFIG GET stream-node-*"]),
    "CONFIG GET": (
        "Print the store's settings whose names match the patterns: stream-node-max-bytes, "
        "stream-node-max-entries, stream-idmp-duration and stream-idmp-maxsize.",
        "2.0.0", "O(N) for N settings.",
        ["CONFIG GET stream-node-*", "CONFIG GET stream-node-max-entries", "CONFIG GET stream-idmp-*"]),
    "CONFIG SET": (
        "Change the store's settings, for every process that uses the store. The node sizes "
        "decide where XADD starts a new node, so what XTRIM ~ removes (at most 100 nodes' "
        "worth without LIMIT); nodes already made keep their bounds, as in Redis. "
        "stream-idmp-duration (1 to 86400 seconds) and stream-idmp-maxsize (1 to 10000) are "
        "the IDMP-DURATION and IDMP-MAXSIZE of streams made from then on.",
        "2.0.0", "O(N) for N settings (plus, once, the nodes of a store upgraded from format 2).",
        ["CONFIG SET stream-node-max-entries 10",
         "CONFIG SET stream-node-max-bytes 4kb stream-node-max-entries 0",
         "CONFIG SET stream-idmp-duration 3600"]),
}


# Common Redis commands of the types xs does not hold (xs holds streams
# only): after "ERR unknown command 'SET'" a terminal is told so instead
# of the closest stream command's name.
OTHER_TYPES = {
    "strings": "SET GET GETSET GETDEL GETEX SETNX SETEX PSETEX MSET MSETNX MGET APPEND STRLEN GETRANGE "
               "SETRANGE INCR INCRBY INCRBYFLOAT DECR DECRBY",
    "hashes": "HSET HSETNX HMSET HGET HMGET HGETALL HDEL HEXISTS HKEYS HVALS HLEN HINCRBY HINCRBYFLOAT HSCAN",
    "lists": "LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP BLPOP BRPOP LMOVE BLMOVE LRANGE LLEN LINDEX LSET LREM "
             "LTRIM LINSERT LPOS RPOPLPUSH BRPOPLPUSH",
    "sets": "SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD SPOP SRANDMEMBER SINTER SUNION SDIFF SMOVE SSCAN",
    "sorted sets": "ZADD ZREM ZRANGE ZREVRANGE ZRANGEBYSCORE ZSCORE ZCARD ZINCRBY ZRANK ZREVRANK ZCOUNT "
                   "ZPOPMIN ZPOPMAX BZPOPMIN BZPOPMAX ZSCAN",
    "pub/sub": "PUBLISH SUBSCRIBE PSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE",
}
_OTHER_TYPE_OF = {n: t for t, names in OTHER_TYPES.items() for n in names.split()}


def other_type(name):
    """The Redis type ("strings", "hashes", ...) whose common command
    ``name`` is (case-insensitive), or None."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return _OTHER_TYPE_OF.get(name.upper())
