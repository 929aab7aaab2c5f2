"""A blocked read, served: XREAD / XREADGROUP ... BLOCK whose first
attempt found nothing, retried whenever one of its streams changes until
it serves something or its timeout passes.  One implementation for every
caller: script mode and the prompt (xstream_cli.execution.session), and xs serve's
blocked clients (xstream_cli.server.engine, with a Canceller for a
client that goes away).  The waiting itself is storage.blocking's one
wait loop (``wait_until``); this module adds what a command needs on top:
the dry run that spares a write transaction on wake-ups that serve
nothing, the fair queue among a group's consumers, CLAIM's wake-up
when an entry becomes idle enough, and the wake-up when a stream's TTL
passes.

Who imports it: xstream_cli.execution.session and xstream_cli.server.engine.
"""
import time

from storage.errors import RedisError

FAIR_GRACE_S = 0.003           # how long a woken group reader defers to older waiters


class Wait:
    """What a blocked read waits for (from its ReadOptions)."""
    __slots__ = ("keys", "timeout_ms", "group", "claim")

    def __init__(self, opts):
        self.keys = opts.keys
        self.timeout_ms = opts.block
        self.group = opts.group           # XREADGROUP: its consumers compete (fair queue)
        self.claim = opts.claim           # CLAIM min-idle: also wake when one becomes claimable


def waits(cmd, args):
    """The Wait of a command whose reply was null, or None if it does not
    block (no BLOCK; XREADGROUP with a history ID)."""
    if not cmd.blocking:
        return None
    o = args[0]
    if o.block is None or (o.group is not None and any(i != b">" for i in o.ids)):
        return None
    return Wait(o)


def serve(store, cmd, args, w, cancel=None):
    """Wait for the blocked read ``cmd(*args)`` (its Wait ``w``) to be
    served or to time out (None).  Each retry is a dry run in a read
    transaction first (storage.txn.WouldWrite): most wake-ups find
    nothing, and a write transaction would commit (for a group read,
    with an fsync).  ``cancel``: a storage.blocking.Canceller (raises
    storage.blocking.Cancelled)."""
    from storage.blocking import wait_until
    from storage.consumers import Queue

    def retry(tx):
        return cmd.run(tx, *args)

    def nothing_to_serve():
        try:
            return store.run(retry, write=False) is None
        except Exception:
            return False

    def attempt(woken):
        if nothing_to_serve():
            return None
        if woken and queue is not None and not queue.first():
            # consumers of a group all wake for one entry: Redis serves
            # the one blocked longest, so give older waiters a moment to
            # take it before competing
            end = time.monotonic() + FAIR_GRACE_S
            while time.monotonic() < end and not queue.first():
                time.sleep(0.0002)
                if nothing_to_serve():
                    return None
        try:
            return store.run(retry, write=True)
        except RedisError as e:
            return e

    stale = [0]     # consecutive "claimable now" answers that served nothing

    def claim_wake():
        ms = store.run(lambda tx: tx.claim_wait_ms(w.keys, w.group, w.claim), write=False)
        if ms is None:
            return None
        # a PEL entry that claims nothing (deleted from the stream) must
        # not make us spin: back off to 1 s
        stale[0] = stale[0] + 1 if ms <= 0 else 0
        return max(ms, 1) / 1000.0 if not stale[0] else min(0.001 * 2 ** stale[0], 1.0)

    def expiry_wake():
        """Seconds until one of the streams expires (EXPIRE): nothing is
        written then, yet the command's answer changes (XREADGROUP's
        stream is gone), so look again at that moment."""
        def soonest(tx):
            times = [t for t in (tx.expire_time(k) for k in w.keys) if t > 0]
            return (min(times) - tx.now()) if times else None
        ms = store.run(soonest, write=False)
        return None if ms is None else max(ms, 0) / 1000.0 + 0.001

    def next_wake():
        waits = [x for x in (claim_wake() if w.claim is not None else None, expiry_wake()) if x is not None]
        return min(waits) if waits else None

    timeout_s = None if w.timeout_ms == 0 else w.timeout_ms / 1000.0
    queue = Queue(store, w.keys[0], w.group) if w.group is not None else None
    try:
        # one stream: the group's readers take turns (only the first in
        # line watches it); several: each watches them all
        turn = queue if queue is not None and len(w.keys) == 1 and queue.path is not None else None
        return wait_until(store, w.keys, attempt, timeout_s, next_wake, cancel, turn=turn)
    finally:
        if queue is not None:
            queue.leave()
