"""``xs replicate --to redis://HOST:PORT`` (issue 41, item 4): a live
replica on redis-server, Valkey or another ``xs serve``.  A network
client, so it lives in the command-line layer, beside the Redis bridge;
the translation of the change log into Redis commands is
storage.ops.replica_redis's.  Needs redis-py (the ``bridge`` extra).

Sync.  The first time (or when the replica cannot follow the log), every
stream goes over by DUMP/RESTORE (... REPLACE ABSTTL), except a stream
DUMP cannot carry (NACKed entries, IDMP settings or history), which is
built from commands; keys the store does not have are deleted.  Then
each round reads the log's records after the replica's position and
sends them as one MULTI/EXEC with the new position, so a round is
applied whole or not at all.

The position.  One stream key on the replica (``__xs_replica__`` by
default) holds one entry: the store's id, the log's id and generation,
and the sequence number of the last commit applied -- written in the
same MULTI/EXEC as the commands, under WATCH, so two replicators cannot
both apply a round.  A replicator started again reads it and goes on
from there: if the store's log still has every record after it, only
the streams those records touched are copied again (the state they
reached is the store's now); otherwise a full sync, with a line saying
why.

Refusals.  A server that holds keys but no position (or the position of
another store) is not replaced unless asked (``replace``).  A server
older than Redis 7.0 is refused (XSETID ENTRIESADDED, XGROUP CREATE
ENTRIESREAD); a commit that needs a newer command (XNACK, XIDMPRECORD,
XCFGSET) stops the replicator with an error naming the command and the
version that has it.  Extra keys appearing on the replica (someone else
writing) stop it too.
"""
import time

from storage import changelog, codec
from storage.codec import changes
from storage.ops.replica_redis import SINCE, Diverged, Model, NeedsCommand, Translator
from storage.spark.network import no_password as safe_url
from storage.spark.network import one_line as _one_line

POSITION_KEY = b"__xs_replica__"
ACK_S = 1.0                 # the position is acknowledged to the store at most this often
BATCH_BYTES = 8 << 20       # records per round
SYNC_CHUNK = 32 << 20       # payload bytes per pipeline of a full sync
DEFAULT_MAX_BULK = 512 << 20  # Redis's proto-max-bulk-len, when CONFIG GET is refused
DIVERGED = -2               # the position's seq after a round left the replica unlike the store (-1: a sync began)


class ReplicaError(Exception):
    """Replication cannot go on (a message for the user)."""


def _redis():
    try:
        import redis
    except ImportError:
        raise ReplicaError("replicating to Redis needs the 'redis' package: pip install 'xstream[bridge]'")
    return redis


def _version(text):
    try:
        return tuple(int(x) for x in text.split(".")[:3])
    except ValueError:
        return (0,)


class RedisReplica:
    """Replicate ``store`` to the server at ``url``; ``run()`` until
    interrupted.  ``say(line)``: one line per sync and per problem."""

    def __init__(self, store, url, position_key=POSITION_KEY, replace=False, say=None, ssl=None, bound=None,
                 password=None):
        self.store, self.url, self.position_key = store, url, position_key
        self.replace, self.bound = replace, bound
        self.say = say or (lambda line: None)
        self.ssl = ssl or {}
        self.password = password
        self.rid = "redis:" + safe_url(url)
        self.r = None
        self.pos = 0
        self.model = None
        self.translator = None
        self.acked, self.acked_at = None, 0.0
        self.server = ""
        self.caps = frozenset()
        self.active_time = False         # the server restores RDB type 21 (Redis 7.2+): consumers' active-time kept
        self.max_bulk = DEFAULT_MAX_BULK  # the server's proto-max-bulk-len: a bigger DUMP goes as commands
        self.store_id = None
        self.log_id = None
        self.by_commands = set()        # streams the last full sync built from commands
        self.copied = set()             # streams copied whole (a full sync, a resume)

    # ------------------------------------------------------------ set-up

    def connect(self):
        redis = _redis()
        kw = dict(self.ssl)
        if self.password is not None:
            kw["password"] = self.password
        try:
            r = redis.Redis.from_url(self.url, decode_responses=False, socket_timeout=60, protocol=2, **kw)
            r.response_callbacks.clear()
            r.execute_command("PING")
            info = r.execute_command("INFO", "server").decode("utf-8", "replace")
        except (ValueError, redis.RedisError) as e:
            raise ReplicaError("cannot connect to %s: %s" % (safe_url(self.url), e))
        fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
        ver = fields.get("redis_version", "0").strip()
        name = "valkey %s" % fields["valkey_version"].strip() if "valkey_version" in fields else \
            "xs serve %s" % fields["xs_version"].strip() if "xs_version" in fields else "redis %s" % ver
        if _version(ver) < (7, 0):
            raise ReplicaError("%s runs %s; a replica needs Redis 7.0 or newer (XSETID ENTRIESADDED, XGROUP "
                               "CREATE ENTRIESREAD)" % (safe_url(self.url), name))
        self.server = name
        # Redis 7.2 and later (Valkey too) restore RDB type 21, which keeps
        # each consumer's active-time; 7.0 and 7.1 only type 19
        self.active_time = _version(ver) >= (7, 2)
        try:                            # a managed server may refuse CONFIG: Redis's default then
            got = r.execute_command("CONFIG", "GET", "proto-max-bulk-len")
            self.max_bulk = int(got[1])
        except (redis.RedisError, IndexError, ValueError):
            self.max_bulk = DEFAULT_MAX_BULK
        from xstream_cli.bridge import _knows
        self.caps = frozenset(c for c in SINCE if _knows(r, c))
        self.r = r

    def open(self):
        """Connect, register with the store, and bring the replica to the
        store's state: resumed, caught up, or fully synced."""
        self.connect()
        if self.store_id is None:
            self.store_id = self.store.run(lambda tx: tx.store_id(create=True), write=True)
        got = self._position()
        keys = self._call("DBSIZE")
        # refused before registering: a refused replica must not leave the store logging for it
        if got is None and keys and not self.replace:
            raise ReplicaError("%s holds %d keys and no xs position: it is not a replica of this store (give "
                               "--replace to replace what it holds)" % (safe_url(self.url), keys))
        if got is not None and got.get(b"store") != self.store_id.encode() and not self.replace:
            raise ReplicaError("%s is the replica of another store (%s); give --replace to replace it"
                               % (safe_url(self.url), got.get(b"store", b"?").decode("utf-8", "replace")))
        st, _ = changelog.enable(self.store, self.rid, self.bound)
        self.log_id = (st["log"], st.get("gen", 0))
        if got is None:
            return self.full_sync("first sync" if not keys else "replacing what the server held")
        seq = int(got.get(b"seq", b"-1"))
        if got.get(b"store") != self.store_id.encode():
            return self.full_sync("replacing the replica of another store")
        if seq == DIVERGED:
            return self.full_sync("the replica differed from the store when replication last stopped")
        if seq < 0:
            return self.full_sync("an earlier full sync did not finish")
        if got.get(b"log") != st["log"].encode() or int(got.get(b"gen", b"0")) != st.get("gen", 0):
            return self.full_sync("the store's change log was restarted")
        if seq > st["seq"]:
            return self.full_sync("the replica is ahead of the store (restored?)")
        if seq + 1 < st.get("first", 1):
            return self.full_sync("fell behind: commits %d..%d were dropped from the store's log (past its backlog "
                                  "size)" % (seq + 1, st["first"] - 1))
        self.catch_up(seq)

    def _call(self, *args):
        try:
            return self.r.execute_command(*args)
        except _redis().ResponseError as e:
            raise ReplicaError("%s: %s failed: %s" % (safe_url(self.url), args[0], e))

    def _position(self, via=None):
        """The replica's position entry (a dict of bytes), or None."""
        call = via.execute_command if via is not None else self._call
        got = call("XREVRANGE", self.position_key, "+", "-", "COUNT", 1) if call("EXISTS", self.position_key) \
            else []
        if not got:
            return None
        f = got[0][1]
        return {f[j]: f[j + 1] for j in range(0, len(f), 2)}

    def _position_command(self, st, seq, t):
        return ("XADD", self.position_key, "MAXLEN", "=", "1", "*", "store", self.store_id,
                "log", st["log"], "gen", st.get("gen", 0), "seq", seq, "time", t)

    # ------------------------------------------------------------ syncing

    def _snapshot(self):
        """(read-transaction context, Txn, raw transaction)."""
        ctx = self.store.read()
        tx = ctx.__enter__()
        return ctx, tx, ctx.lt

    def full_sync(self, why):
        """Every stream by DUMP/RESTORE (or commands), other keys
        deleted, then the position: the replica is the store as of the
        snapshot's commit."""
        t0 = time.monotonic()
        ctx, tx, lt = self._snapshot()
        try:
            st = _log_state(lt, self.store)
            names = tx.stream_names()
            if self.position_key in names:
                raise ReplicaError("the store has a stream named %r, the replica's position key (choose another "
                                   "with --position-key)" % self.position_key.decode("utf-8", "replace"))
            self._send([self._position_command(st, -1, 0)], "the sync's start")
            have = set(names)
            stale = [k for k in self._scan() if k not in have and k != self.position_key]
            for j in range(0, len(stale), 1000):
                self._send([("DEL",) + tuple(stale[j:j + 1000])], "deleting keys the store does not have")
            model = Model.load(lt, self.store.dbs)
            batch, size, nbytes = [], 0, 0
            for name in names:
                cmds = self._stream_copy(tx, lt, model, name)
                batch += cmds
                n = sum(len(c[3]) if c[0] == "RESTORE" else 64 for c in cmds)
                size += n
                nbytes += n
                if size >= SYNC_CHUNK:
                    self._send(batch, "the full sync")
                    batch, size = [], 0
            self._send(batch + [self._position_command(st, st["seq"], int(time.time() * 1000))], "the full sync",
                       multi=True)
        finally:
            ctx.__exit__(None, None, None)
        self._start(model, st["seq"])
        self.say("full sync to %s (%s): %d streams, %s bytes at commit %d in %.2f s; %s"
                 % (safe_url(self.url), self.server, len(names), format(nbytes, ","), st["seq"],
                    time.monotonic() - t0, why))

    def _stream_copy(self, tx, lt, model, name):
        """The commands that make ``name`` on the replica the store's:
        RESTORE of its DUMP, or commands where DUMP cannot carry it."""
        sid = model.sids[name]
        meta = model.metas[sid]
        self.copied.add(name)
        plain = not meta.idmp_cfg and _no_nacks(lt, self.store.dbs, model, sid)
        if plain:
            payload = tx.dump_value(name, self.active_time)
            # a payload over the server's proto-max-bulk-len (512 MB by
            # default) cannot be sent in one argument: by commands then
            if len(payload) <= self.max_bulk:
                self.by_commands.discard(name)
                return [("RESTORE", name, meta.expire_at or 0, payload, "REPLACE") +
                        (("ABSTTL",) if meta.expire_at else ())]
            del payload
        ops = _creation_ops(lt, self.store.dbs, sid, meta, name)
        self.by_commands.add(name)      # laid out anew: its radix-tree-keys may differ from the store's
        tr = Translator(Model(), self.caps)
        try:
            return [("DEL", name)] + tr.record(ops)
        except NeedsCommand as e:
            raise self._needs(e)

    def catch_up(self, seq):
        """From position ``seq``, with the store's log holding every
        record after it: copy again the streams those records touched
        (RESTORE, or DEL for those gone), then the position -- one
        MULTI/EXEC."""
        ctx, tx, lt = self._snapshot()
        try:
            st = _log_state(lt, self.store)
            model = Model.load(lt, self.store.dbs)
            if seq == st["seq"]:
                self._start(model, seq)
                self.say("resumed at commit %d (%s)" % (seq, self.server))
                return
            names = _touched(lt, self.store, model, seq)
            if names is None:
                ctx.__exit__(None, None, None)
                ctx = None
                return self.full_sync("a stream with a long name went since commit %d" % seq)
            cmds = []
            for name in sorted(names):
                cmds += self._stream_copy(tx, lt, model, name) if name in model.sids else [("DEL", name)]
            self._send(cmds + [self._position_command(st, st["seq"], int(time.time() * 1000))],
                       "catching up", multi=True, expect=seq)
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        self._start(model, st["seq"])
        self.say("resumed at commit %d: %d streams copied again to reach commit %d (%s)"
                 % (seq, len(names), st["seq"], self.server))

    def _start(self, model, seq):
        self.model, self.pos = model, seq
        self.translator = Translator(model, self.caps)
        changelog.ack(self.store, self.rid, seq)
        self.acked, self.acked_at = seq, time.monotonic()

    def _scan(self):
        out, cursor = [], b"0"
        while True:
            cursor, keys = self._call("SCAN", cursor, "COUNT", 1000)
            out += keys
            if cursor in (b"0", 0, "0"):
                return out

    def _needs(self, e):
        have = ", ".join(sorted(self.caps)) or "none of them"
        return ReplicaError("%s: replicating needs %s, which %s at %s lacks (Redis %s or newer has it; of XNACK, "
                            "XIDMPRECORD and XCFGSET it has %s)" % (e.what, e.command, self.server,
                                                                   safe_url(self.url), SINCE[e.command], have))

    # ------------------------------------------------------------- sending

    def _send(self, cmds, what, multi=False, expect=None, keys=None, lengths=()):
        """Send ``cmds`` (one MULTI/EXEC if ``multi``, under WATCH of the
        position: its entry must still say ``expect`` when given); any
        error reply stops replication, and so does a replica holding
        more than ``keys`` keys (and the position) after it, or a stream
        of ``lengths`` ((name, entries) as the store has them after
        ``cmds``) with another length: something else wrote to it."""
        redis = _redis()
        if not cmds:
            return []
        try:
            p = self.r.pipeline(transaction=multi)
            if multi:
                p.watch(self.position_key)
                if expect is not None:
                    cur = self._position(p)
                    if cur is None or int(cur.get(b"seq", b"-2")) != expect:
                        raise ReplicaError("the position on %s moved under this replicator (another xs "
                                           "replicate to it?)" % safe_url(self.url))
                p.multi()
            for c in cmds:
                p.execute_command(*c)
            for name, _ in lengths:
                p.execute_command("XLEN", name)
            if multi:
                p.execute_command("DBSIZE")
            res = p.execute(raise_on_error=False)
        except redis.WatchError:
            raise ReplicaError("the position on %s moved under this replicator (another xs replicate to it?)"
                               % safe_url(self.url))
        except redis.ResponseError as e:
            raise ReplicaError("%s refused %s: %s" % (safe_url(self.url), what, e))
        # the other writer first, the likely cause of a command refused
        stop = self._diverged if multi else ReplicaError
        for (name, n), got in zip(lengths, res[len(cmds):]):
            if got != n:
                raise stop("%s: stream %s has %s entries where the store has %d: something else writes to it"
                           % (safe_url(self.url), _show(name), got, n))
        if multi and keys is not None and not isinstance(res[-1], Exception):
            if int(res[-1]) > keys + 1:
                raise stop("%s holds keys the store does not have: something else writes to it" % safe_url(self.url))
        for c, x in zip(cmds, res):
            if isinstance(x, Exception):
                shown = " ".join(_show(a) for a in c[:6]) + (" ..." if len(c) > 6 else "")
                raise stop("%s refused %s during %s: %s" % (safe_url(self.url), shown, what, x))
        return res

    def _diverged(self, why):
        """The replica no longer equals the store after a MULTI/EXEC (Redis
        applies the commands of a transaction that one of them fails; or
        another writer): its position is marked so that the next start
        copies the store to it again.  The ReplicaError to raise."""
        st = {"log": self.log_id[0], "gen": self.log_id[1]} if self.log_id else {"log": "?"}
        try:
            self._send([self._position_command(st, DIVERGED, int(time.time() * 1000))], "marking the position")
        except Exception as e:      # the connection lost too: a plain restart would resume on it as it is
            return ReplicaError("%s (and its position could not be marked: %s; delete its key %s, then start "
                                "xs replicate with --replace to copy the store to it again)"
                                % (why, _one_line(e), _show(self.position_key)))
        return ReplicaError("%s (the next start copies the store to it again, a full sync: stop the other writer "
                            "first)" % why)

    # ---------------------------------------------------------------- run

    def round(self):
        """Send what the store logged after ``pos``; True if there is more."""
        st, recs = changelog.records(self.store, self.pos, BATCH_BYTES)
        if st is None:
            raise ReplicaError("the store stopped logging (xs replicate --forget?)")
        if (st["log"], st.get("gen", 0)) != self.log_id:
            self.full_sync("the store's change log was restarted")
            return True
        if recs and recs[0][0] != self.pos + 1:
            self.full_sync("fell behind: commits %d..%d were dropped from the store's log (past its backlog size)"
                           % (self.pos + 1, recs[0][0] - 1))
            return True
        if recs:
            cmds = []
            self.translator.touched.clear()
            try:
                for _, _, raw in recs:
                    cmds += self.translator.record(changes.decode_record(raw)[1])
            except NeedsCommand as e:
                raise self._needs(e)
            except Diverged as e:
                self.full_sync("the log did not fit the replica (%s)" % e)
                return True
            except Exception as e:      # a defect of xs's translator: copy again rather than diverge or stop
                self.full_sync("xs could not translate commits %d..%d (an internal error, please report it: "
                               "%s: %s)" % (recs[0][0], recs[-1][0], type(e).__name__, e))
                return True
            seq, t = recs[-1][0], recs[-1][1]
            self._send(cmds + [self._position_command(st, seq, t)], "commits %d..%d" % (recs[0][0], seq),
                       multi=True, expect=self.pos, keys=len(self.model.names), lengths=self._lengths())
            self.pos = seq
        now = time.monotonic()
        if self.acked != self.pos and now - self.acked_at >= ACK_S:
            changelog.ack(self.store, self.rid, self.pos)
            self.acked, self.acked_at = self.pos, now
        return sum(len(r[2]) for r in recs) >= BATCH_BYTES

    def _lengths(self):
        """(name, entries) of the streams this round changed, as the store
        has them after it, checked on the replica in the round's
        MULTI/EXEC (Redis has no version of a key: a length that differs
        is the sign of another writer).  Not for a stream with a TTL: the
        replica may expire it before the store's commit that does."""
        m = self.model
        out = []
        for sid in sorted(self.translator.touched):
            name, meta = m.names.get(sid), m.metas.get(sid)
            if name is not None and meta is not None and meta.expire_at is None:
                out.append((name, meta.length))
        return out

    def run(self, cancel=None):
        """Replicate until interrupted (KeyboardInterrupt, or ``cancel``).
        A lost connection is retried (every 1 s to 10 s, a line each
        time); an error of the replica's stops it."""
        from storage.blocking import Cancelled, wait_until
        redis = _redis()
        backoff = 1.0
        if self.translator is None:
            try:
                self.open()
            except (redis.ConnectionError, redis.TimeoutError) as e:
                raise ReplicaError("cannot reach %s: %s" % (safe_url(self.url), _one_line(e)))
        while True:
            try:
                if self.translator is None:
                    self.open()
                    backoff = 1.0
                if self.round():
                    continue

                def attempt(woken):
                    st, recs = changelog.records(self.store, self.pos, 1)
                    return True if (recs or st is None) else None
                wait = ACK_S - (time.monotonic() - self.acked_at) if self.acked != self.pos else 1.0
                wait_until(self.store, [changelog.WAKE_KEY], attempt, timeout_s=max(0.01, min(wait, 1.0)),
                           cancel=cancel)
            except Cancelled:
                return
            except (redis.ConnectionError, redis.TimeoutError) as e:
                self.translator = None          # the next open() reads the replica's position again
                self.say("lost %s (%s); trying again in %.0f s" % (safe_url(self.url), _one_line(e), backoff))
                if cancel is not None and cancel.is_set():
                    return
                time.sleep(backoff)
                backoff = min(backoff * 2, 10.0)

    def close(self):
        if self.r is not None:
            try:
                self.r.close()
            except Exception:
                pass
            self.r = None


# ============================================================== helpers

def _show(a):
    if isinstance(a, bytes):
        return a.decode("utf-8", "backslashreplace")[:80]
    return str(a)


def _log_state(lt, store):
    raw = lt.get(changes.META_CHANGELOG, db=store.dbs[b"meta"])
    if raw is None:
        raise ReplicaError("the store stopped logging (xs replicate --forget?)")
    return changes.decode_log_state(raw)


def _no_nacks(lt, dbs, model, sid):
    """Whether no group of stream ``sid`` holds a NACKed entry (DUMP
    refuses those)."""
    pel = dbs[b"pel"]
    for gid, (s, _) in model.groups.items():
        if s != sid:
            continue
        c = lt.cursor(db=pel)
        p = codec.gid_prefix(gid)
        if c.set_range(p):
            for k, v in c:
                if not k.startswith(p):
                    break
                if not codec.decode_pending(v)[0]:
                    return False
    return True


def _creation_ops(lt, dbs, sid, meta, name):
    """A change-log record's ops that make stream ``sid`` from nothing
    (what a command-built copy translates)."""
    p = codec.sid_prefix(sid)
    ops = [(changes.OP_PUT, b"keys", codec.name_key(name), meta.encode())]

    def prefixed(db, prefix):
        c = lt.cursor(db=dbs[db])
        if c.set_range(prefix):
            for k, v in c:
                if k[:len(prefix)] != prefix:
                    return
                yield bytes(k), bytes(v)
    ops += [(changes.OP_PUT, b"shapes", k, v) for k, v in prefixed(b"shapes", p)]
    ops.append((changes.OP_MULTI, b"log", list(prefixed(b"log", p))))
    gids = []
    for k, v in prefixed(b"groups", p):
        ops.append((changes.OP_PUT, b"groups", k, v))
        gids.append(codec.GroupMeta.decode(v).gid)
    for gid in gids:
        gp = codec.gid_prefix(gid)
        ops += [(changes.OP_PUT, b"consumers", k, v) for k, v in prefixed(b"consumers", gp)]
        ops += [(changes.OP_PUT, b"cnames", k, v) for k, v in prefixed(b"cnames", gp)]
        ops += [(changes.OP_PUT, b"pel", k, v) for k, v in prefixed(b"pel", gp)]
    ops += [(changes.OP_PUT, b"idmp", k, v) for k, v in prefixed(b"idmp", p)]
    return ops


def _touched(lt, store, model, after):
    """The names of the streams the records after ``after`` touched (as
    the store names them now, or as a record named them if gone); None
    if one cannot be named (a long name, stored hashed, that went)."""
    import lmdb
    try:
        db = lt.cursor(db=store.env.open_db(changes.CHANGELOG_DB, txn=lt, create=False))
    except lmdb.NotFoundError:
        return set()
    names = set()
    sids = set()
    gid_sid = {gid: s for gid, (s, _) in model.groups.items()}
    if db.set_range(changes.seq_key(after + 1)):
        for _, raw in db:
            for op in changes.decode_record(raw)[1]:
                code, dbn, a = op[0], op[1], op[2]
                if dbn == b"keys":
                    if code == changes.OP_PUT:
                        sids.add(codec.StreamMeta.decode(op[3]).sid)
                    n = codec.name_from_key(a)
                    if n is None and code != changes.OP_PUT:
                        n = next((nm for nm in model.sids if codec.name_key(nm) == a), None)
                        if n is None:
                            return None
                    if n is not None:
                        names.add(n)
                elif dbn in (b"log", b"shapes", b"idmp", b"groups") and code != changes.OP_MULTI:
                    sids.add(codec.number_of(a))
                elif dbn in (b"log", b"shapes", b"idmp", b"groups"):
                    sids.update(codec.number_of(k) for k, _ in op[2])
                elif dbn in (b"consumers", b"pel", b"cnames"):
                    keys_ = [a] if code != changes.OP_MULTI else [k for k, _ in op[2]]
                    for k in keys_:
                        s = gid_sid.get(codec.number_of(k))
                        if s is not None:
                            sids.add(s)
    names.update(model.names[s] for s in sids if s in model.names)
    return names
