"""The wait machinery of storage.blocking through the library API:
notification files, the Waiter (inotify or polling), and the one wait
loop ``wait_until`` with its Canceller and Doorbell.  Blocked reads
through ``xs`` processes are tests/cli/test_blocking_cli.py."""
import os
import time

import pytest

# ------------------------------------------------------------- the engine


def test_notify_touches_only_watched_streams(store):
    from storage import blocking
    d = os.path.join(store.path, blocking.NOTIFY_DIR)
    store.run(lambda tx: tx.add_auto_many([(b"s", [b"a", b"1"])]), write=True)
    assert not os.path.exists(d)           # nobody waited: nothing written
    with blocking.Waiter(store, [b"s"]) as w:
        assert w.uses_inotify
        assert os.listdir(d) == [blocking.notify_name(b"s")]
        assert w.wait(0.05) is False
        store.run(lambda tx: tx.add_auto_many([(b"t", [b"a", b"1"])]), write=True)
        assert w.wait(0.05) is False
        store.run(lambda tx: tx.add_auto_many([(b"s", [b"a", b"1"])]), write=True)
        assert w.wait(5) is True
        assert w.wait(0.05) is False       # events were consumed


def test_a_writer_keeps_the_notification_directory_open_and_opens_the_new_one_after_a_removal(store):
    import shutil

    from storage import blocking
    d = os.path.join(store.path, blocking.NOTIFY_DIR)

    def add():
        store.run(lambda tx: tx.add_auto_many([(b"s", [b"a", b"1"])]), write=True)
    add()
    assert store.notify_fd is None             # nobody waited: no directory, nothing kept
    with blocking.Waiter(store, [b"s"]) as w:
        add()
        fd = store.notify_fd
        assert fd is not None and w.wait(5) is True
        add()
        assert store.notify_fd == fd           # kept: no open a commit
        assert w.wait(5) is True
    shutil.rmtree(d)                           # removed by a careless hand; the next reader makes it again
    with blocking.Waiter(store, [b"s"]) as w:
        assert os.path.isdir(d)
        add()
        assert w.wait(5) is True               # the writer touched the new directory's file
    store.close()
    assert store.notify_fd is None


def test_waiter_rearms_when_notification_file_is_removed(store):
    from storage import blocking
    with blocking.Waiter(store, [b"s"]) as w:
        path = os.path.join(store.path, blocking.NOTIFY_DIR, blocking.notify_name(b"s"))
        os.unlink(path)
        assert w.wait(5) is True           # spurious wake-up, watch re-armed
        end = time.monotonic() + 5         # (the unlink's events may come as two rings)
        while not os.path.exists(path) and time.monotonic() < end:
            w.wait(0.2)
        assert os.path.exists(path)
        store.run(lambda tx: tx.add_auto_many([(b"s", [b"a", b"1"])]), write=True)
        assert w.wait(5) is True


def test_polling_fallback_without_inotify(store, monkeypatch):
    from storage import blocking, inotify
    monkeypatch.setattr(inotify, "_libc", False)
    with blocking.Waiter(store, [b"s"]) as w:
        assert not w.uses_inotify
        assert w.wait(0.05) is False
        store.run(lambda tx: tx.add_auto_many([(b"s", [b"a", b"1"])]), write=True)
        assert w.wait(5) is True


def test_the_wait_loop_times_out_with_none_after_its_timeout(store):
    from storage.blocking import wait_until
    calls = []
    t = time.monotonic()
    assert wait_until(store, [b"s"], lambda woken: calls.append(woken), 0.1) is None
    assert time.monotonic() - t >= 0.1
    assert calls[0] is False


# ============================================================ the one wait loop


@pytest.mark.parametrize("inotify", [True, False])
def test_a_doorbell_wakes_the_wait_loop_from_another_thread(store, monkeypatch, inotify):
    """xs worker's finished jobs ring a Doorbell: the wait ends at once
    for another attempt, with or without inotify."""
    import threading

    from storage import blocking, inotify
    if not inotify:
        monkeypatch.setattr(inotify, "_libc", False)
    bell = blocking.Doorbell()
    calls = []

    def attempt(woken):
        calls.append(time.monotonic())
        return "rung" if len(calls) == 2 else None
    t = time.monotonic()                   # before the timer starts: it rings 0.2 s after this
    threading.Timer(0.2, bell.ring).start()
    try:
        assert blocking.wait_until(store, [b"s"], attempt, 30, bell=bell) == "rung"
    finally:
        bell.close()
    assert 0.2 <= calls[1] - t < 5


def test_a_hang_up_of_a_watched_descriptor_cancels_the_wait_loop(store):
    """xs tail -f: the reader of its pipe going away ends the wait."""
    import threading

    from storage import blocking
    r, w = os.pipe()
    threading.Timer(0.2, os.close, (r,)).start()
    try:
        with pytest.raises(blocking.Cancelled):
            blocking.wait_until(store, [b"s"], lambda woken: None, 30, hangup_fds=(w,))
    finally:
        os.close(w)


@pytest.mark.parametrize("inotify", [True, False])
def test_a_cancelled_wait_ends_at_once_whether_it_sleeps_on_inotify_or_polls(store, monkeypatch, inotify):
    import threading

    from storage import blocking, inotify
    if not inotify:
        monkeypatch.setattr(inotify, "_libc", False)       # as where inotify is unavailable: poll
        monkeypatch.setattr(blocking, "POLL_MAX_S", 30.0)   # a poll step far longer than the test waits
    canceller = blocking.Canceller()
    attempts = []
    threading.Timer(0.3, canceller.cancel).start()
    t = time.monotonic()
    with pytest.raises(blocking.Cancelled):
        blocking.wait_until(store, [b"s"], lambda woken: attempts.append(woken), None, None, canceller)
    assert time.monotonic() - t < 5
    assert attempts and attempts[0] is False
    canceller.close()


def test_wait_until_returns_the_first_result_a_write_makes_and_none_at_the_deadline(store):
    import threading

    from storage import blocking
    from storage.options import AddOptions, RangeOptions
    from tests.harness.stores import id_text

    def attempt(woken):
        got = store.run(lambda tx: tx.range(b"s", RangeOptions((0, 0), (2 ** 64 - 1, 2 ** 64 - 1), None)))
        return list(got) if got else None

    assert blocking.wait_until(store, [b"s"], attempt, 0.2) is None
    threading.Timer(0.2, lambda: store.run(lambda tx: tx.add(b"s", [b"a", b"1"], AddOptions(id=(5, 0))),
                                           write=True)).start()
    got = blocking.wait_until(store, [b"s"], attempt, 30)
    assert got is not None and id_text(got[0][0]) == "5-0"


# ==================================================== a group's readers take turns


def _blocked_group_readers(store, n, taken, monkeypatch):
    """``n`` threads blocked as consumers of one group on stream s (each
    with its queue ticket, started in order), whose attempts take an
    item from ``taken['ready']``; returns (threads, attempts per reader,
    what each got)."""
    import threading

    from storage import blocking
    from storage.consumers import Queue
    # readers behind our own process's never look "anyway", however short the period
    monkeypatch.setattr(blocking, "TURN_CHECK_S", 0.02)
    calls = [0] * n
    got = [None] * n
    lock = threading.Lock()
    stop = taken["stop"] = [blocking.Canceller() for _ in range(n)]

    def reader(i):
        q = Queue(store, b"s", b"g")
        try:
            def attempt(woken):
                with lock:
                    calls[i] += 1
                    return taken["ready"].pop(0) if taken["ready"] else None
            got[i] = blocking.wait_until(store, [b"s"], attempt, 30, cancel=stop[i], turn=q)
        except blocking.Cancelled:
            pass
        finally:
            q.leave()
    threads = []
    for i in range(n):
        t = threading.Thread(target=reader, args=(i,), daemon=True)
        t.start()
        threads.append(t)
        end = time.monotonic() + 10
        while calls[i] == 0 and time.monotonic() < end:    # in line before the next one comes
            time.sleep(0.001)
    time.sleep(0.1)                                         # all asleep
    return threads, calls, got


def test_a_new_entry_wakes_the_reader_first_in_line_not_every_reader_of_the_group(store, monkeypatch):
    """400 blocked consumers of a group all woke for every new entry
    (1.24 cores at 20 XADD/s): now only the one first in line watches the
    stream, and the one it serves passes the turn to the next."""
    from storage.options import AddOptions
    n, k = 40, 5
    taken = {"ready": []}
    threads, calls, got = _blocked_group_readers(store, n, taken, monkeypatch)
    try:
        time.sleep(0.3)
        assert calls == [1] * n                   # asleep: nobody looks while nothing changes
        for e in range(k):
            taken["ready"].append(e)
            store.run(lambda tx: tx.add(b"s", [b"e", b"%d" % e], AddOptions(id=(e + 1, 0))), write=True)
            threads[e].join(10)
            assert not threads[e].is_alive()
        time.sleep(0.2)
        assert got[:k] == list(range(k))          # the longest waiting first, one entry each
        extra = sum(calls) - n
        # per entry: the reader it serves, and the next one in line looking once
        assert extra <= 2 * k + 1, calls
    finally:
        for c in taken["stop"]:
            c.cancel()
        for t in threads:
            t.join(10)
        for c in taken["stop"]:
            c.close()


def test_a_reader_behind_another_process_s_still_looks_every_turn_check(store, monkeypatch):
    """The reader first in line may be another process, stopped (Ctrl-Z)
    or killed: the next one looks anyway every TURN_CHECK_S, so an entry
    waits at most that long."""
    import subprocess
    import threading

    from storage import blocking
    from storage.consumers import Queue
    from storage.options import AddOptions
    monkeypatch.setattr(blocking, "TURN_CHECK_S", 0.3)
    other = subprocess.Popen(["sleep", "60"])     # a live process first in line, that never serves
    stuck = Queue(store, b"s", b"g")
    os.rename(stuck.path, stuck.path.rsplit(".", 1)[0] + ".%d" % other.pid)
    taken = {"ready": []}
    q = Queue(store, b"s", b"g")
    assert q.ahead() == other.pid
    out = []

    def attempt(woken):
        return taken["ready"].pop() if taken["ready"] else None
    t = threading.Thread(target=lambda: out.append(blocking.wait_until(store, [b"s"], attempt, 30, turn=q)))
    t.start()
    try:
        time.sleep(0.1)
        taken["ready"].append("entry")
        t0 = time.monotonic()
        store.run(lambda tx: tx.add(b"s", [b"a", b"1"], AddOptions(id=(1, 0))), write=True)
        t.join(10)
        assert out == ["entry"]
        assert 0.1 < time.monotonic() - t0 < 2.0   # not at the write (not its turn) but at the next look
    finally:
        q.leave()
        stuck.leave()
        other.kill()
        other.wait()


def test_a_reader_leaving_first_in_line_passes_the_turn_on(store, monkeypatch):
    """The reader first in line times out or is cancelled: the next live
    one is told at once (its ticket touched) and watches the stream."""
    import threading

    from storage import blocking
    from storage.consumers import Queue
    from storage.options import AddOptions
    monkeypatch.setattr(blocking, "TURN_CHECK_S", 60.0)
    first = Queue(store, b"s", b"g")
    q = Queue(store, b"s", b"g")
    taken = {"ready": []}
    out = []
    calls = []

    def attempt(woken):
        calls.append(woken)
        return taken["ready"].pop() if taken["ready"] else None
    t = threading.Thread(target=lambda: out.append(blocking.wait_until(store, [b"s"], attempt, 30, turn=q)))
    t.start()
    try:
        time.sleep(0.2)
        assert calls == [False]
        first.leave()
        end = time.monotonic() + 5
        while len(calls) < 2 and time.monotonic() < end:
            time.sleep(0.005)
        assert calls == [False, True]              # woken by its ticket, now watching s
        taken["ready"].append("entry")
        store.run(lambda tx: tx.add(b"s", [b"a", b"1"], AddOptions(id=(1, 0))), write=True)
        t.join(5)
        assert out == ["entry"]
    finally:
        q.leave()
