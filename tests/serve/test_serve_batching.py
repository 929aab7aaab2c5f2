"""Adversarial tests of xs serve's batching (engine.py): group commit in
the engine thread, XREADGROUP/XACK runs of several clients under
one savepoint (Txn.shared) with the one-by-one fallback, one-command
jobs answered without a join.

Everything goes through the product: a real ``xs serve`` subprocess,
several raw-socket clients pipelining at once, ``xs`` CLI processes on
the same store, SIGTERM and SIGKILL.  Replies and final state are
compared with redis-server 7.0 fed the same commands in the same order
where the order is fixed (each client's pipeline is sent whole, the
clients one after the other, while the server is kept busy so that
they land in ONE group commit); elsewhere invariants are checked
(every entry delivered once, PEL counts agree, every reply durable)."""
import random
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from conftest import ROOT, XS, Resp3, xs_json
from tests.harness.served import Served, wire

# ----------------------------------------------------------------- clients


class Pipe(Resp3):
    """A RESP3 connection that sends a whole pipeline in one write."""

    def send(self, cmds):
        self.sock.sendall(wire(*cmds))

    def recv(self, n):
        return [self._read() for _ in range(n)]

    def pipe(self, cmds):
        self.send(cmds)
        return self.recv(len(cmds))

    def close(self):
        self.sock.close()


@pytest.fixture
def srv(tmp_path):
    s = Served(tmp_path / "store")
    yield s
    s.stop(signal.SIGKILL)


# ------------------------------------------------------------- normalising

BUCKET = 10000


def _bucket(v):
    return "~%d" % round(v / BUCKET) if isinstance(v, int) and v >= 0 else v


def _norm(argv, reply):
    """Mask wall-clock values (idle times, delivery and seen times).

    Consumers with nothing pending are left out of XINFO replies: an
    XREADGROUP that serves nothing creates its consumer in xs (as Redis
    7.2+) but not in redis-server 7.0."""
    if isinstance(reply, dict) and "error" in reply:
        return reply
    name = argv[0].upper()
    sub = argv[1].upper() if len(argv) > 1 else ""
    if name == "XADD" and argv[1] == "v" and isinstance(reply, str):
        return "<v>"                 # its auto IDs can equal u's: kept out of the numbering
    if name == "XINFO" and sub == "GROUPS" and isinstance(reply, list):
        return [{k: v for k, v in g.items() if k != "consumers"} for g in reply]
    if name == "XINFO" and sub == "CONSUMERS" and isinstance(reply, list):
        reply = [c for c in reply if c.get("pending")]
    if name == "XPENDING" and len(argv) > 3 and isinstance(reply, list):
        return [[e[0], e[1], _bucket(e[2]), e[3]] for e in reply]
    if name == "XINFO" and sub == "CONSUMERS":
        return [{k: (_bucket(v) if k in ("idle", "inactive") else v) for k, v in c.items()} for c in reply]
    if name == "XINFO" and sub == "STREAM" and isinstance(reply, dict):
        r = {k: v for k, v in reply.items() if not k.startswith("radix-tree")}
        gs = []
        for g in r.get("groups") or []:
            g = dict(g)
            g["pending"] = [[p[0], p[1], "T", p[3]] for p in g.get("pending", [])]
            cons = []
            for c in g.get("consumers", []):
                if not c.get("pel-count"):
                    continue
                c = {k: ("T" if k in ("seen-time", "active-time") else v) for k, v in c.items()}
                c["pending"] = [[p[0], "T", p[2]] for p in c.get("pending", [])]
                cons.append(c)
            g["consumers"] = cons
            gs.append(g)
        if "groups" in r:
            r["groups"] = gs
        return r
    return reply


def _same(ref, got):
    """Equal, except that xs's maps may hold fields redis 7.0 lacks (8.x
    adds inactive, active-time, pel-count ...)."""
    if isinstance(ref, dict) and isinstance(got, dict):
        return all(k in got and _same(v, got[k]) for k, v in ref.items())
    if isinstance(ref, list) and isinstance(got, list):
        return len(ref) == len(got) and all(_same(a, b) for a, b in zip(ref, got))
    return ref == got and type(ref) is type(got)


AUTO_ID = re.compile(r"^\d{13,}-\d+$")


def _auto_ids(tree, table):
    """Auto IDs (``XADD u *``) as <idN>, numbered in order of appearance."""
    if isinstance(tree, str) and AUTO_ID.match(tree):
        return table.setdefault(tree, "<id%d>" % len(table))
    if isinstance(tree, list):
        return [_auto_ids(x, table) for x in tree]
    if isinstance(tree, dict):
        return {k: _auto_ids(v, table) for k, v in tree.items()}
    return tree


def _diff(sent, ref, got):
    queued = {}                      # client -> the commands queued since MULTI
    tables = ({}, {})
    for (who, argv), a, b in zip(sent, ref, got):
        name = argv[0].upper()
        if name == "MULTI":
            queued[who] = []
        elif name == "EXEC" and who in queued:
            body = queued.pop(who)
            if isinstance(a, list) and isinstance(b, list) and len(a) == len(b) == len(body):
                a = [_norm(q, x) for q, x in zip(body, a)]
                b = [_norm(q, x) for q, x in zip(body, b)]
        elif who in queued:
            queued[who].append(argv)
        if not _same(_auto_ids(_norm(argv, a), tables[0]), _auto_ids(_norm(argv, b), tables[1])):
            return "client %s: %s\n  redis: %r\n  xs:    %r" % (who, " ".join(argv), a, b)
    return None


# ---------------------------------------------------- a deterministic mix

class Mix:
    """Random pipelines over streams s and t, groups g and g2, consumers
    c1..c4; explicit IDs only, so that redis and xs can agree."""

    def __init__(self, seed):
        self.r = random.Random(seed)
        self.next_s = 41
        self.next_t = 11

    def setup(self):
        out = [["XADD", "s", "1-%d" % i, "f", "v%d" % i] for i in range(1, 41)]
        out += [["XADD", "t", "1-%d" % i, "f", "w%d" % i] for i in range(1, 11)]
        out += [["XGROUP", "CREATE", "s", "g", "0"], ["XGROUP", "CREATE", "s", "g2", "0"],
                ["XGROUP", "CREATE", "t", "g", "0"], ["XGROUP", "CREATE", "u", "g", "$", "MKSTREAM"]]
        return out

    def _id(self):
        return "1-%d" % self.r.randint(1, self.next_s + 2)

    def _cons(self):
        return self.r.choice(["c1", "c2", "c3", "c4"])

    def command(self):
        r = self.r
        k = r.random()
        count = r.choice([[], ["COUNT", "1"], ["COUNT", "1"], ["COUNT", "2"], ["COUNT", "2"], ["COUNT", "3"]] * 3
                         + [[]])         # mostly COUNT: s lasts, so the runs around errors deliver
        if k < 0.30:
            return [["XREADGROUP", "GROUP", "g", self._cons()] + count
                    + (["NOACK"] if r.random() < 0.15 else []) + ["STREAMS", "s", ">"]]
        if k < 0.36:
            return [["XREADGROUP", "GROUP", r.choice(["g", "g", "g2"]), self._cons()] + count
                    + ["STREAMS", "s", r.choice(["0", self._id(), "0"])]]
        if k < 0.39:
            return [["XREADGROUP", "GROUP", "g", self._cons(), "COUNT", "2", "STREAMS", "s", "t", ">", ">"]]
        if k < 0.40:       # BLOCK with a history ID never waits: still not in a shared run
            return [["XREADGROUP", "GROUP", "g", self._cons(), "BLOCK", "5", "STREAMS", "s", "0"]]
        if k < 0.45:       # errors: the run they are in is undone and rerun one by one
            before = ["XREADGROUP", "GROUP", "g", self._cons(), "COUNT", "1", "STREAMS", "s", ">"]
            bad = r.choice([["XREADGROUP", "GROUP", "nogroup", "c1", "STREAMS", "s", ">"],
                            ["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "bad-id"],
                            ["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "nokey", ">"],
                            ["XACK", "s", "g", "1-1", "bad"]])
            return [before, bad, ["XACK", "s", "g", self._id(), self._id()]]
        if k < 0.60:
            return [["XACK", "s", r.choice(["g", "g", "g", "g2"])] + [self._id() for _ in range(r.randint(1, 4))]]
        if k < 0.62:
            return [["XACK", "t", "g", "1-%d" % r.randint(1, 12)]]
        if k < 0.66:
            return [["XCLAIM", "s", "g", self._cons(), "0"] + [self._id() for _ in range(r.randint(1, 3))]
                    + (["JUSTID"] if r.random() < 0.3 else [])]
        if k < 0.69:
            return [["XAUTOCLAIM", "s", "g", self._cons(), "0", r.choice(["0-0", self._id()]), "COUNT", "3"]]
        if k < 0.77:
            self.next_s += 1
            return [["XADD", "s", "1-%d" % self.next_s, "f", "n%d" % self.next_s]]
        if k < 0.79:
            return [["XDEL", "s", self._id()]]
        if k < 0.80:
            return [["XTRIM", "s", "MINID", "1-%d" % r.randint(1, 12)]]
        if k < 0.82:
            return [["XGROUP", "DELCONSUMER", "s", "g", self._cons()]]
        if k < 0.83:
            return [["XGROUP", "SETID", "s", "g2", r.choice(["0", "$", self._id()])]]
        if k < 0.84:
            return [["XGROUP", "DESTROY", "s", "g2"], ["XGROUP", "CREATE", "s", "g2", "0"]]
        if k < 0.85:
            return [["XGROUP", "CREATECONSUMER", "s", "g", "c4"]]
        if k < 0.86:
            self.next_t = 2
            return [["DEL", "t"], ["XADD", "t", "1-1", "f", "again"], ["XGROUP", "CREATE", "t", "g", "0"]]
        if k < 0.88:
            self.next_t += 1
            return [["XADD", "t", "1-%d" % self.next_t, "f", "x"]]
        if k < 0.90:       # plain XADD *: a run of the other kind, across clients
            return [["XADD", r.choice(["u", "u", "v"]), "*", "f", "a"] for _ in range(r.randint(1, 3))]
        if k < 0.91:
            return [r.choice([["XREADGROUP", "GROUP", "g", self._cons(), "COUNT", "2", "STREAMS", "u", "s", ">", ">"],
                              ["XAUTOCLAIM", "u", "g", self._cons(), "0", "0-0", "COUNT", "2"],
                              ["XREADGROUP", "GROUP", "g", self._cons(), "STREAMS", "u", "0"]])]
        if k < 0.92:
            return [["XPENDING", "s", "g"]]
        if k < 0.95:
            return [["XPENDING", "s", "g", "-", "+", "5", self._cons()]]
        if k < 0.97:
            return [["XINFO", "GROUPS", "s"]]
        return [["XLEN", "s"]]

    def pipeline(self, n):
        out = []
        while len(out) < n:
            out += self.command()
        return out

    def multi(self):
        body = self.pipeline(self.r.randint(2, 4))
        return [["MULTI"]] + body + [["EXEC"]]


FINAL = ([["XINFO", "STREAM", s, "FULL"] for s in ("s", "t", "u")] + [["XPENDING", "u", "g", "-", "+", "1000"]]
         + [["XPENDING", "s", g, "-", "+", "1000"] for g in ("g", "g2")]
         + [["XPENDING", "t", "g", "-", "+", "1000"], ["XINFO", "GROUPS", "s"], ["XINFO", "CONSUMERS", "s", "g"]])


def _play(port, rounds, clients, stagger):
    """Play ``rounds`` (each a list of (client index, pipeline)) on a
    server; each round's pipelines are sent one after the other, ``stagger``
    seconds apart, before any reply is read.  Returns [(who, argv)] and
    the replies, in send order."""
    conns = [Pipe(port) for _ in range(clients)]
    sent, replies = [], []
    try:
        for rnd in rounds:
            for who, cmds in rnd:
                conns[who].send(cmds)
                if stagger:
                    time.sleep(stagger)
                else:                               # the reference: strictly one after the other
                    replies += conns[who].recv(len(cmds))
                sent += [(who, a) for a in cmds]
            if stagger:
                for who, cmds in rnd:
                    replies += conns[who].recv(len(cmds))
    finally:
        for c in conns:
            c.close()
    return sent, replies


def _rounds(seed, nrounds=14, nclients=4):
    """Client 0 keeps the server busy (a pipeline of 300 XADDs to another
    stream) so that the other clients' pipelines, sent meanwhile, make ONE
    group commit; the last client of a round may send MULTI ... EXEC (it
    is sent last: its EXEC reaches the engine after the plain jobs)."""
    mix = Mix(seed)
    rounds = [[(1, mix.setup())]]
    pad = 0
    watching = False
    for _ in range(nrounds):
        rnd = [(0, [["XADD", "pad", "1-%d" % (pad + i + 1), "f", "p"] for i in range(300)])]
        pad += 300
        for who in range(1, nclients):
            rnd.append((who, mix.pipeline(mix.r.randint(1, 6))))
        if watching:                 # EXEC after other clients' pipelines ran since WATCH
            rnd.append((nclients, mix.multi()))
            watching = False
        elif mix.r.random() < 0.3:
            rnd.append((nclients, mix.multi()))
        elif mix.r.random() < 0.3:
            # v only gets plain XADD * runs: xs also counts a group's
            # deliveries and acks as changes of its stream for WATCH, redis
            # 7.0 does not (a difference outside batching, see the report)
            rnd.append((nclients, [["WATCH", "v"]]))
            watching = True
        rounds.append(rnd)
    rounds.append([(1, FINAL)])
    return rounds


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_several_clients_pipelining_one_group_answer_and_end_as_redis_server(srv, redis, seed):
    """XREADGROUP (new and history, COUNT, NOACK, two streams, failing),
    XACK, XCLAIM, XAUTOCLAIM, XADD, XDEL, XTRIM, XGROUP DELCONSUMER /
    SETID / DESTROY, DEL and MULTI/EXEC from five clients whose pipelines
    share group commits: every reply and the final XINFO STREAM FULL /
    XPENDING as redis-server's, fed the same commands in the same order."""
    redis.flushall()
    rounds = _rounds(seed)
    sent, got = _play(srv.port, rounds, 5, 0.002)
    sent_ref, ref = _play(redis.port, rounds, 5, 0)
    assert sent == sent_ref
    assert len(got) == len(ref)
    problem = _diff(sent, ref, got)
    assert problem is None, problem


# --------------------------------------------------- invariants under load

def _ids(reply):
    """The entry IDs of an XREADGROUP reply (RESP3: {key: entries})."""
    out = []
    for entries in (reply or {}).values():
        out += [e[0] for e in entries]
    return out


def _cli(db, *lines):
    return xs_json(db, *lines)


def _pending_ids(db, key, group):
    rows = _cli(db, "XPENDING %s %s - + 1000000" % (key, group))[0]
    return {r[0]: r for r in rows}


def test_workers_pipelining_reads_and_acks_beside_cli_writers_and_multi_get_every_entry_once(srv):
    """Four workers pipeline "XACK what I had, XREADGROUP more" (one of
    them inside MULTI/EXEC, one with history reads), a blocked worker
    waits with BLOCK, a served producer pipelines plain XADDs and an
    ``xs`` process adds entries too: every entry is delivered exactly once,
    every XACK counts exactly the IDs it acks, and the group's PEL and
    counters agree with what the clients saw."""
    _cli(srv.db, "XGROUP CREATE jobs g $ MKSTREAM")
    served_n, cli_n = 600, 300
    total = served_n + cli_n
    delivered = []                   # (consumer, id) of every > delivery
    acked = []
    errors = []
    lock = threading.Lock()
    done = threading.Event()

    def producer():
        p = Pipe(srv.port)
        for b in range(0, served_n, 20):
            r = p.pipe([["XADD", "jobs", "*", "n", str(b + i)] for i in range(20)])
            if any(isinstance(x, dict) for x in r):
                errors.append(r)
        p.close()

    def worker(name, multi=False, history=False):
        p = Pipe(srv.port)
        mine = []
        try:
            while not done.is_set():
                cmds = []
                if mine:
                    cmds.append(["XACK", "jobs", "g"] + mine)
                cmds.append(["XREADGROUP", "GROUP", "g", name, "COUNT", "3", "STREAMS", "jobs", ">"])
                if history:
                    cmds.append(["XREADGROUP", "GROUP", "g", name, "STREAMS", "jobs", "0"])
                if multi:
                    r = p.pipe([["MULTI"]] + cmds + [["EXEC"]])
                    assert r[0] == "OK" and all(x == "QUEUED" for x in r[1:-1]), r
                    r = r[-1]
                else:
                    r = p.pipe(cmds)
                if mine:
                    if r[0] != len(mine):
                        errors.append(("XACK", name, mine, r[0]))
                    with lock:
                        acked.extend(mine)
                    r = r[1:]
                got = _ids(r[0])
                if history and r[1] is not None and set(_ids(r[1])) != set(got):
                    errors.append(("history", name, got, r[1]))
                with lock:
                    delivered.extend((name, i) for i in got)
                mine = got
                if not got:
                    time.sleep(0.005)
            if mine:
                r = p.pipe([["XACK", "jobs", "g"] + mine])
                with lock:
                    acked.extend(mine)
        except Exception as e:
            errors.append(("worker", name, repr(e)))
        finally:
            p.close()

    def blocked_worker():
        p = Pipe(srv.port)
        try:
            while not done.is_set():
                r = p.pipe([["XREADGROUP", "GROUP", "g", "b", "COUNT", "2", "BLOCK", "300", "STREAMS", "jobs", ">"]])[0]
                got = _ids(r)
                with lock:
                    delivered.extend(("b", i) for i in got)
                if got:
                    if p.pipe([["XACK", "jobs", "g"] + got])[0] != len(got):
                        errors.append(("XACK b", got))
                    with lock:
                        acked.extend(got)
        except Exception as e:
            errors.append(("blocked", repr(e)))
        finally:
            p.close()

    threads = [threading.Thread(target=worker, args=("w1",)), threading.Thread(target=worker, args=("w2",)),
               threading.Thread(target=worker, args=("w3", True)),             # in MULTI/EXEC
               threading.Thread(target=worker, args=("w4", False, True)),      # with history reads
               threading.Thread(target=blocked_worker), threading.Thread(target=producer)]
    for t in threads:
        t.start()
    lines = "".join("XADD jobs * cli %d\n" % i for i in range(cli_n)).encode()
    cli = subprocess.run(XS + ["--db", srv.db, "--raw"], input=lines, capture_output=True, cwd=ROOT, timeout=60)
    assert cli.returncode == 0, cli.stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with lock:
            if len(delivered) >= total:
                break
        time.sleep(0.05)
    done.set()
    for t in threads:
        t.join(20)
    assert not errors, errors[:5]
    ids = [i for _, i in delivered]
    assert len(ids) == len(set(ids)), "an entry was delivered twice"
    stream_ids = [e[0] for e in _cli(srv.db, "XRANGE jobs - +")[0]]
    assert len(stream_ids) == total and set(ids) == set(stream_ids)
    assert sorted(acked) == sorted(set(acked))
    c = srv.client(protocol=3)
    assert c.xpending("jobs", "g")["pending"] == total - len(acked) == 0
    info = c.xinfo_groups("jobs")[0]
    assert info["entries-read"] == total and info["lag"] == 0 and info["pending"] == 0
    cons = c.xinfo_consumers("jobs", "g")
    assert sorted(x["name"] for x in cons) == [b"b", b"w1", b"w2", b"w3", b"w4"]
    assert all(x["pending"] == 0 for x in cons)


def test_a_blocked_xreadgroup_wakes_on_a_served_and_a_cli_xadd_while_shared_runs_go_on(srv):
    """A reader blocked on group gb of q is woken by a served client's XADD
    and by an ``xs XADD`` process, with the entry each added, while three
    workers keep pipelining XREADGROUP/XACK runs on group g of q."""
    _cli(srv.db, "XGROUP CREATE q gb $ MKSTREAM", "XGROUP CREATE q g $")
    done = threading.Event()
    errors = []
    runs = [0]

    def worker(name):
        p = Pipe(srv.port)
        mine = ["0-1"]
        try:
            while not done.is_set():
                r = p.pipe([["XACK", "q", "g"] + mine,
                            ["XREADGROUP", "GROUP", "g", name, "COUNT", "1", "STREAMS", "q", ">"],
                            ["XREADGROUP", "GROUP", "g", name, "STREAMS", "q", "0"]])
                if any(isinstance(x, dict) and "error" in x for x in r):
                    errors.append(r)
                mine = _ids(r[1]) or ["0-1"]
                runs[0] += 1
        except Exception as e:
            errors.append(repr(e))
        finally:
            p.close()

    workers = [threading.Thread(target=worker, args=("w%d" % k,)) for k in range(3)]
    for t in workers:
        t.start()
    try:
        b, adder = Pipe(srv.port), Pipe(srv.port)
        for how in ("served", "cli"):
            b.send([["XREADGROUP", "GROUP", "gb", "b", "BLOCK", "10000", "STREAMS", "q", ">"]])
            time.sleep(0.3)
            t0 = time.monotonic()
            if how == "served":
                new = adder.pipe([["XADD", "q", "*", "by", how]])[0]
            else:
                p = subprocess.run(XS + ["--db", srv.db, "XADD", "q", "*", "by", how], capture_output=True,
                                   cwd=ROOT, timeout=30)
                assert p.returncode == 0, p.stderr
                new = p.stdout.decode().strip()
            r = b.recv(1)[0]
            waited = time.monotonic() - t0
            assert r == {"q": [[new, ["by", how]]]}, (how, r)
            assert waited < 3, "%s XADD woke the blocked reader after %.1fs" % (how, waited)
        assert adder.pipe([["PING"]]) == ["PONG"]
        b.close()
        adder.close()
    finally:
        done.set()
        for t in workers:
            t.join(10)
    assert not errors, errors[:3]
    assert runs[0] > 10


def _close_hard(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()


def test_clients_gone_mid_pipeline_leave_the_group_as_delivered_in_order(srv):
    """Clients that send 400 XREADGROUP COUNT 1 and reset the connection at
    once, beside one that reads its replies: the server goes on, and the
    group's PEL is exactly the first entries-read entries of the stream
    (none skipped, none twice), each consumer's count its share."""
    lines = ["XADD s 1-%d f v" % i for i in range(1, 3001)] + ["XGROUP CREATE s g 0"]
    _cli(srv.db, *lines)
    read = ["XREADGROUP", "GROUP", "g", None, "COUNT", "1", "STREAMS", "s", ">"]
    keeper = Pipe(srv.port)
    got = []
    for k in range(6):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"".join(wire([a if a is not None else "gone%d" % k for a in read]) for _ in range(400)))
        if k % 2:
            time.sleep(0.01)
        _close_hard(s)
        got += _ids(keeper.pipe([[a if a is not None else "keeper" for a in read]] * 5)[-1])
    assert keeper.pipe([["PING"]]) == ["PONG"]
    time.sleep(0.5)
    info = _cli(srv.db, "XINFO GROUPS s")[0][0]
    summary = _cli(srv.db, "XPENDING s g")[0]
    pel = sorted(_pending_ids(srv.db, "s", "g"), key=lambda i: int(i.split("-")[1]))
    n = info["entries-read"]
    assert info["pending"] == summary[0] == len(pel) == n
    assert pel == ["1-%d" % i for i in range(1, n + 1)]
    per = {c: int(cnt) for c, cnt in (summary[3] or [])}
    assert sum(per.values()) == n
    rows = _pending_ids(srv.db, "s", "g")
    for c, cnt in per.items():
        assert sum(1 for r in rows.values() if r[1] == c) == cnt
    assert per.get("keeper") == 30 and all(rows[i][1] == "keeper" for i in got)


def _durability_load(srv, sig):
    """Three clients pipeline XADDs, XACKs of what they had and XREADGROUPs
    until ``sig`` hits the server; every reply received must be in the
    store read afterwards by an ``xs`` process."""
    _cli(srv.db, "XGROUP CREATE w g $ MKSTREAM")
    added, delivered, acked, ack_unanswered = set(), set(), set(), set()
    problems = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(name):
        p = Pipe(srv.port)
        mine = []
        try:
            while not stop.is_set():
                cmds = [["XADD", "w", "*", "by", name], ["XADD", "w", "*", "by", name]]
                if mine:
                    cmds.append(["XACK", "w", "g"] + mine)
                cmds.append(["XREADGROUP", "GROUP", "g", name, "COUNT", "3", "STREAMS", "w", ">"])
                p.send(cmds)
                if mine:
                    with lock:
                        ack_unanswered.update(mine)
                r = p.recv(len(cmds))
                with lock:
                    added.update(r[:2])
                    if mine:
                        if r[2] != len(mine):
                            problems.append(("XACK counted", r[2], mine))
                        acked.update(mine)
                        ack_unanswered.difference_update(mine)
                    mine = _ids(r[-1])
                    delivered.update(mine)
        except (OSError, ConnectionError):
            pass                     # the server went away
        except Exception as e:
            problems.append(repr(e))
        finally:
            p.close()
    threads = [threading.Thread(target=client, args=("c%d" % k,)) for k in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.2)
    t0 = time.monotonic()
    srv.proc.send_signal(sig)
    srv.proc.wait(30)
    exit_s = time.monotonic() - t0
    stop.set()
    for t in threads:
        t.join(10)
    assert not problems, problems[:3]
    assert len(added) > 30 and len(acked) > 10
    stream = set(e[0] for e in _cli(srv.db, "XRANGE w - +")[0])
    assert added <= stream, "%d replied XADDs lost" % len(added - stream)
    pending = _pending_ids(srv.db, "w", "g")
    assert not (acked & set(pending)), "replied XACKs lost: %r" % sorted(acked & set(pending))[:5]
    lost = delivered - acked - ack_unanswered - set(pending)
    assert not lost, "replied deliveries neither pending nor acked: %r" % sorted(lost)[:5]
    return exit_s


def test_sigterm_under_pipelined_reads_and_acks_exits_0_with_every_reply_durable(srv):
    exit_s = _durability_load(srv, signal.SIGTERM)
    assert srv.proc.returncode == 0
    assert exit_s < 5, "SIGTERM took %.1fs to stop the server" % exit_s


def test_kill_9_under_pipelined_reads_and_acks_keeps_every_reply(srv):
    _durability_load(srv, signal.SIGKILL)
    assert srv.proc.returncode == -signal.SIGKILL


def test_a_200k_entry_xrange_then_everyone_is_answered_and_the_blocked_reader_served(srv):
    """An XRANGE of 200k entries runs in the engine; meanwhile an
    ``xs`` process wakes a blocked XREADGROUP (its re-check waits for the
    store lock): afterwards the XRANGE has every entry, the blocked reader
    its entry and other clients their answers."""
    lines = "".join("XADD big * f v%d\n" % i for i in range(200000)).encode()
    p = subprocess.run(XS + ["--db", srv.db, "--raw"], input=lines, capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    _cli(srv.db, "XGROUP CREATE q g $ MKSTREAM")
    blocked, big, other = Pipe(srv.port), Pipe(srv.port), Pipe(srv.port)
    blocked.send([["XREADGROUP", "GROUP", "g", "b", "BLOCK", "20000", "STREAMS", "q", ">"]])
    time.sleep(0.2)
    big.send([["XRANGE", "big", "-", "+"]])
    # COUNT 1: whichever of the two new entries ``o`` takes, one is left for the blocked
    # reader (its wake-up by the CLI process may come after o's read)
    other.send([["XADD", "q", "*", "by", "served"],
                ["XREADGROUP", "GROUP", "g", "o", "COUNT", "1", "STREAMS", "q", ">"]])
    cli = subprocess.Popen(XS + ["--db", srv.db, "XADD", "q", "*", "by", "cli"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=ROOT)
    out, err = cli.communicate(timeout=30)
    assert cli.returncode == 0, err
    data = big.buf                   # 10 MB: read raw, the test's RESP parser is slow on it
    big.sock.settimeout(30)
    while not data.endswith(b"$7\r\nv199999\r\n"):
        chunk = big.sock.recv(1 << 20)
        assert chunk, "the server closed the XRANGE connection"
        data += chunk
    assert data.startswith(b"*200000\r\n*2\r\n$") and data.count(b"\r\n$1\r\nf\r\n") == 200000
    served_id, o = other.recv(2)
    b = blocked.recv(1)[0]
    ids = {served_id, out.decode().strip()}
    assert len(b["q"]) == 1 and b["q"][0][0] in ids
    assert _ids(o) and set(_ids(o)) | {b["q"][0][0]} == ids
    assert other.pipe([["XLEN", "big"], ["PING"]]) == [200000, "PONG"]
    for c in (blocked, big, other):
        c.close()


HOLD_WRITE_LOCK = """
import sys, time
from storage import Store
s = Store(sys.argv[1])
with s.write():                   # what an xs process does during a long write (xs's lock, then LMDB's)
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_ping_is_answered_while_another_process_holds_the_write_lock(srv):
    """Another process (an ``xs`` import, compaction, a stopped CLI
    writer) holds the store's write lock for 4 s; a served XADD must wait
    for it, but PING from another client must not."""
    writer, pinger = Pipe(srv.port), Pipe(srv.port)
    holder = subprocess.Popen([XS[0], "-c", HOLD_WRITE_LOCK, srv.db, "4"], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout.readline() == b"held\n"
        writer.send([["XADD", "x", "*", "a", "b"]])
        time.sleep(0.2)
        pinger.sock.settimeout(3)
        t0 = time.monotonic()
        try:
            pong = pinger.pipe([["PING"]])
        except socket.timeout:
            pong = None
        waited = time.monotonic() - t0
        writer.sock.settimeout(10)
        added = writer.recv(1)[0]        # answered once the lock is free, and durable
        assert isinstance(added, str) and _cli(srv.db, "XLEN x")[0] == 1
        assert pong == ["PONG"] and waited < 1, "PING waited %.1fs for another process's write lock" % waited
    finally:
        holder.wait(10)
        writer.close()
        pinger.close()


def test_sigterm_ends_the_server_while_another_process_holds_the_write_lock(srv):
    """SIGTERM while an XADD waits for a write lock another process holds
    for a minute: after the drain time (10 s) the server exits 0 without
    it; the client gets no reply (the connection closes) and the entry
    was never written (issue 29, item 9)."""
    writer = Pipe(srv.port)
    holder = subprocess.Popen([XS[0], "-c", HOLD_WRITE_LOCK, srv.db, "60"], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert holder.stdout.readline() == b"held\n"
        writer.send([["XADD", "x", "*", "a", "b"]])
        time.sleep(0.3)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        try:
            rc = srv.proc.wait(40)
        except subprocess.TimeoutExpired:
            rc = None
        took = time.monotonic() - t0
        assert rc == 0 and took < 25, (rc, took)
        writer.sock.settimeout(5)
        assert writer.sock.recv(100) == b""          # closed, never answered
        err = srv.log()
        assert "write lock is held by another process" in err, err
    finally:
        holder.kill()
        holder.wait(10)
        writer.close()
    assert _cli(srv.db, "XLEN x")[0] == 0
