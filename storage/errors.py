"""Every error text the engine, the command parsers and xs serve's
connection commands can produce.

Redis is the reference for all of these, word for word: a client that
greps for ``NOGROUP`` or matches on Redis's message must see the same
text from xs.  Nothing else in the code base spells out an error text;
it calls one of the helpers below.  The text is the full wire text,
error code included (``ERR ...``, ``NOGROUP ...``, ``BUSYGROUP ...``).
"""


class RedisError(Exception):
    """An error reply.  ``text`` is the full Redis error text, code first."""

    item = None        # in a run of adds: the index of the item refused (Txn.add_auto_many)

    def __init__(self, text):
        Exception.__init__(self, text)
        self.text = text

    def __str__(self):
        return self.text


def _c(b, limit=None):
    """User bytes as Redis's ``%s`` / ``%.Ns`` formats them: a C string,
    so the text stops at a NUL, cut to ``limit`` bytes."""
    if not isinstance(b, bytes):
        b = str(b).encode("utf-8", "surrogateescape")
    nul = b.find(b"\0")
    if nul >= 0:
        b = b[:nul]
    return b if limit is None else b[:limit]


def _show(b):
    """Error bytes -> text, as Redis sends an error: CR and LF become
    spaces (a reply line cannot hold them)."""
    return b.replace(b"\r", b" ").replace(b"\n", b" ").decode("utf-8", "surrogateescape")


def _s(b, limit=None):
    """Bytes from the user, shown inside an error message (see _c, _show)."""
    return _show(_c(b, limit))


# ----------------------------------------------------------- generic errors

def syntax():
    return RedisError("ERR syntax error")


def not_integer():
    return RedisError("ERR value is not an integer or out of range")


def wrong_arity(fullname):
    return RedisError("ERR wrong number of arguments for '%s' command" % fullname)


def unknown_command(name, args):
    """The arguments are quoted while fewer than 128 bytes are shown, the
    last one cut so that the quoted text stays within 128."""
    shown = b""
    for a in args:
        if len(shown) >= 128:
            break
        shown += b"'%s' " % _c(a, 128 - len(shown))
    return RedisError("ERR unknown command '%s', with args beginning with: %s" % (_s(name, 128), _show(shown)))


def unknown_subcommand(sub, container):
    return RedisError("ERR unknown subcommand '%s'. Try %s HELP." % (_s(sub, 128), container.upper()))


def autoclaim_count_too_high():
    """XAUTOCLAIM when COUNT deleted IDs (16 bytes each) cannot be
    allocated (t_stream.c: ztrymalloc of count * sizeof(streamID))."""
    return RedisError("ERR Insufficient memory, failed allocating transient memory, COUNT too high.")


def read_only(reason):
    """A write on a store this user may only read (Redis's READONLY
    code, which clients map to their read-only error; Redis's own text
    speaks of a replica)."""
    return RedisError("READONLY You can't write against a read only store (%s)" % reason)


def config_unknown_option(name):
    return RedisError("ERR Unknown option or number of arguments for CONFIG SET - '%s'" % _s(name))


def config_set_failed(name, why):
    """CONFIG SET's value error; ``name`` as Redis names it: the argument
    for a duplicate, the setting's own name for a bad value."""
    return RedisError("ERR CONFIG SET failed (possibly related to argument '%s') - %s" % (_s(name), why))


def no_such_key():
    return RedisError("ERR no such key")


def invalid_expire_time(command):
    """EXPIRE and its family: the time overflows (Redis names the command
    as it names it, lower case)."""
    return RedisError("ERR invalid expire time in '%s' command" % command)


def unsupported_option(opt):
    return RedisError("ERR Unsupported option %s" % _s(opt))


def expire_nx_and_other():
    return RedisError("ERR NX and XX, GT or LT options at the same time are not compatible")


def expire_gt_and_lt():
    return RedisError("ERR GT and LT options at the same time are not compatible")


def same_object():
    return RedisError("ERR source and destination objects are the same")


def db_index_out_of_range():
    return RedisError("ERR DB index is out of range")


def invalid_cursor():
    return RedisError("ERR invalid cursor")


def unknown_type_name(name):
    return RedisError("ERR unknown type name '%s'" % _s(name))


def novalues_only_hscan():
    return RedisError("ERR NOVALUES option can only be used in HSCAN")


def internal(exc):
    if isinstance(exc, MemoryError):      # the process ran out: nothing was committed
        return out_of_memory()
    return RedisError("ERR internal error: %s" % (exc,))


def out_of_memory():
    return RedisError("ERR out of memory (this process could not allocate what the command needs; "
                      "nothing was written; with a long reply, ask for less: COUNT)")


# ----------------------------------------------------------------- stream IDs

def invalid_id():
    return RedisError("ERR Invalid stream ID specified as stream command argument")


def invalid_start():
    return RedisError("ERR invalid start ID for the interval")


def invalid_end():
    return RedisError("ERR invalid end ID for the interval")


# ----------------------------------------------------------------------- XADD

def xadd_zero_id():
    return RedisError("ERR The ID specified in XADD must be greater than 0-0")


def xadd_id_too_small():
    return RedisError("ERR The ID specified in XADD is equal or smaller than the target stream top item")


def xadd_exhausted():
    return RedisError("ERR The stream has exhausted the last possible ID, unable to add more items")


def maxlen_negative():
    return RedisError("ERR The MAXLEN argument must be >= 0.")


def limit_negative():
    return RedisError("ERR The LIMIT argument must be >= 0.")


def maxlen_and_minid():
    return RedisError("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")


def limit_without_strategy():
    return RedisError("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")


def xtrim_without_strategy():
    return RedisError("ERR syntax error, XTRIM must be called with a trimming strategy")


def limit_without_approx():
    return RedisError("ERR syntax error, LIMIT cannot be used without the special ~ option")


def idmp_explicit_id():
    return RedisError("ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs")


def idmp_twice():
    return RedisError("ERR syntax error, IDMP/IDMPAUTO specified multiple times")


def idmp_empty_pid(opt):
    return RedisError("ERR syntax error, %s requires a non-empty producer ID" % opt)


def idmp_empty_iid():
    return RedisError("ERR syntax error, IDMP requires a non-empty idempotent ID")


# XIDMPRECORD (Redis 8.8): the documented cases; these texts could not be
# checked against Redis's source here (the mirror predates 8.8)
def xidmprecord_no_entry():
    return RedisError("ERR The specified stream ID was deleted or doesn't exist")


def xidmprecord_empty(what):
    return RedisError("ERR XIDMPRECORD requires a non-empty %s" % what)


def xidmprecord_other_id():
    return RedisError("ERR The specified IDMP producer-id/idempotent-id pair maps to a different stream ID")


def idmp_duration_range():
    return RedisError("ERR IDMP-DURATION must be between 1 and 86400 seconds")


def idmp_maxsize_range():
    return RedisError("ERR IDMP-MAXSIZE must be between 1 and 10000 entries")


def xcfgset_twice(opt):
    return RedisError("ERR %s specified multiple times" % opt)


def xcfgset_no_option():
    return RedisError("ERR At least one parameter must be specified")


# --------------------------------------------------------------------- XSETID

def xsetid_smaller_than_maxdel_arg():
    return RedisError("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")


def xsetid_smaller_than_maxdel():
    return RedisError("ERR The ID specified in XSETID is smaller than current max_deleted_entry_id")


def xsetid_smaller_than_top():
    return RedisError("ERR The ID specified in XSETID is smaller than the target stream top item")


def xsetid_entries_added_small():
    return RedisError("ERR The entries_added specified in XSETID is smaller than the target stream length")


def entries_added_negative():
    return RedisError("ERR entries_added must be positive")


# ---------------------------------------------------------------- XREAD family

def timeout_not_integer():
    return RedisError("ERR timeout is not an integer or out of range")


def timeout_negative():
    return RedisError("ERR timeout is negative")


def timeout_out_of_range():
    return RedisError("ERR timeout is out of range")


def xread_unbalanced(xreadgroup):
    if xreadgroup:
        return RedisError("ERR Unbalanced 'xreadgroup' list of streams: "
                          "for each stream key an ID or '>' must be specified.")
    return RedisError("ERR Unbalanced 'xread' list of streams: "
                      "for each stream key an ID, '+', or '$' must be specified.")


def group_only_xreadgroup():
    return RedisError("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")


def noack_only_xreadgroup():
    return RedisError("ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.")


def claim_only_xreadgroup():
    return RedisError("ERR The CLAIM option is only supported by XREADGROUP. You called XREAD instead.")


def missing_group_option():
    return RedisError("ERR Missing GROUP option for XREADGROUP")


def dollar_in_xreadgroup():
    return RedisError("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history "
                      "of this consumer by specifying a proper ID, or use the > ID to get new messages. "
                      "The $ ID would just return an empty result set.")


def plus_in_xreadgroup():
    return RedisError("ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history "
                      "of this consumer by specifying a proper ID, or use the > ID to get new messages. "
                      "The + ID would just return an empty result set.")


def gt_in_xread():
    return RedisError("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> "
                      "<consumer> option.")


def maxcount_invalid():
    return RedisError("ERR MAXCOUNT must be a positive integer")


def maxcount_below_count():
    return RedisError("ERR MAXCOUNT must be greater than or equal to COUNT")


def maxsize_invalid():
    return RedisError("ERR MAXSIZE must be a positive integer")


def min_idle_not_integer():
    return RedisError("ERR min-idle-time is not an integer or out of range")


def min_idle_negative():
    return RedisError("ERR min-idle-time must be a positive integer")


# ------------------------------------------------------------ consumer groups

def nogroup_xreadgroup(key, group):
    return RedisError("NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP option"
                      % (_s(key), _s(group)))


def nogroup_key(key, group):
    """NOGROUP as XPENDING, XCLAIM, XAUTOCLAIM, XGROUP SETID/DELCONSUMER/... word it."""
    return RedisError("NOGROUP No such key '%s' or consumer group '%s'" % (_s(key), _s(group)))


def nogroup_for_key(key, group):
    """NOGROUP as XINFO CONSUMERS words it."""
    return RedisError("NOGROUP No such consumer group '%s' for key name '%s'" % (_s(group), _s(key)))


def busygroup():
    return RedisError("BUSYGROUP Consumer Group name already exists")


def xgroup_mkstream_needed():
    return RedisError("ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
                      "want to use the MKSTREAM option to create an empty stream automatically.")


def entries_read_invalid():
    return RedisError("ERR value for ENTRIESREAD must be positive or -1")


def count_positive():
    return RedisError("ERR COUNT must be > 0")


def invalid_min_idle():
    return RedisError("ERR Invalid min-idle-time argument for XCLAIM")


def invalid_idle():
    return RedisError("ERR Invalid IDLE option argument for XCLAIM")


def invalid_time():
    return RedisError("ERR Invalid TIME option argument for XCLAIM")


def invalid_retrycount():
    return RedisError("ERR Invalid RETRYCOUNT option argument for XCLAIM")


def numids_positive():
    return RedisError("ERR Number of IDs must be a positive integer")


def ids_required():
    return RedisError("ERR IDS option is required")


def numids_mismatch():
    return RedisError("ERR The `numids` parameter must match the number of arguments")


def subcommand_syntax(sub, container):
    return RedisError("ERR unknown subcommand or wrong number of arguments for '%s'. Try %s HELP."
                      % (_s(sub, 128), container.upper()))


def xclaim_option(opt):
    return RedisError("ERR Unrecognized XCLAIM option '%s'" % _s(opt))


def invalid_min_idle_autoclaim():
    return RedisError("ERR Invalid min-idle-time argument for XAUTOCLAIM")


# ---------------------------------------------------------------------- XNACK

def nack_mode():
    return RedisError("ERR mode must be SILENT, FAIL, or FATAL")


def nack_numids():
    return RedisError("ERR numids must be a positive integer")


def nack_numids_mismatch():
    return RedisError("ERR number of IDs doesn't match numids")


def nack_retrycount():
    return RedisError("ERR Invalid RETRYCOUNT value, must be >= 0")


def nack_option(opt):
    return RedisError("ERR Unrecognized XNACK option '%s'" % _s(opt))


def nack_ids_expected():
    return RedisError("ERR syntax error, expected IDS keyword")


# --------------------------------------------- DUMP / RESTORE (issue 26, item 7)
# Redis's cluster.c (restoreCommand, verifyDumpPayload) and server.c
# (shared.busykeyerr), word for word; then the two xs adds.

def busykey():
    return RedisError("BUSYKEY Target key name already exists.")


def invalid_ttl():
    return RedisError("ERR Invalid TTL value, must be >= 0")


def invalid_idletime():
    return RedisError("ERR Invalid IDLETIME value, must be >= 0")


def invalid_freq():
    return RedisError("ERR Invalid FREQ value, must be >= 0 and <= 255")


def dump_payload_wrong():
    return RedisError("ERR DUMP payload version or checksum are wrong")


def bad_data_format():
    return RedisError("ERR Bad data format")


def restore_not_stream(type_name):
    """A valid payload of a type xs does not hold (it holds streams only)."""
    return RedisError("ERR Bad data format: the payload holds a %s, and xs stores only streams" % type_name)


def dump_nacked(group):
    """DUMP writes Redis 7.0's stream type, which has no place for the
    NACKed entries of Redis 8.10 (XNACK)."""
    return RedisError("ERR DUMP cannot carry the NACKed entries of group '%s' (Redis 7.0's serialization has "
                      "no place for them): claim them (XCLAIM) first" % _s(group))


# ---------------------------------------------------------------- script mode

def line_too_long(n, limit):
    """A script line longer than the limit (xstream_cli.execution.script.MAX_LINE_BYTES)."""
    if limit % (1 << 20) == 0:
        lim = "%d MB" % (limit >> 20)
    else:
        lim = "%d bytes" % limit
    return RedisError("ERR line too long (%d bytes, the limit is %s)" % (n, lim))


# ---------------------------------------------------------------- XS.PAGE
# xs serve's own command (xstream_cli.server.stored_page): no Redis text to follow

def page_format(asked, spoken):
    """XS.PAGE asked for a stored form this server does not send."""
    return RedisError("ERR XS.PAGE format %s is not supported (this server sends format %d)" % (asked, spoken))


def page_count(top):
    """XS.PAGE's count outside 1..top."""
    return RedisError("ERR XS.PAGE count must be between 1 and %d" % top)


# xs serve's connection texts (Redis's server.c / acl.c, word for word)
NOAUTH = "NOAUTH Authentication required."
WRONGPASS = "WRONGPASS invalid username-password pair or user is disabled."
NOPASS = ("ERR AUTH <password> called without any password configured for the default user. "
          "Are you sure your configuration is correct?")
DENIED = ("DENIED Redis is running in protected mode because protected mode is enabled and no password is "
          "set for the default user. In this mode connections are only accepted from the loopback interface. "
          "If you want to connect from external computers to Redis you may adopt one of the following "
          "solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from "
          "the loopback interface by connecting to Redis from the same host the server is running, however "
          "MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make "
          "this change permanent. 2) Alternatively you can just disable the protected mode by editing the "
          "Redis configuration file, and setting the protected mode option to 'no', and then restarting the "
          "server. 3) If you started the server manually just for testing, restart it with the "
          "'--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You "
          "only need to do one of the above things in order for the server to start accepting connections "
          "from the outside.")
