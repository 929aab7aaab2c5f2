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


def test_waiter_rearms_when_notification_file_is_removed(store):
    from storage import blocking
    with blocking.Waiter(store, [b"s"]) as w:
        path = os.path.join(store.path, blocking.NOTIFY_DIR, blocking.notify_name(b"s"))
        os.unlink(path)
        assert w.wait(5) is True           # spurious wake-up, watch re-armed
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
    threading.Timer(0.2, bell.ring).start()
    t = time.monotonic()
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

    def attempt(woken):
        got = store.run(lambda tx: tx.range(b"s", RangeOptions((0, 0), (2 ** 64 - 1, 2 ** 64 - 1), None)))
        return list(got) if got else None

    assert blocking.wait_until(store, [b"s"], attempt, 0.2) is None
    threading.Timer(0.2, lambda: store.run(lambda tx: tx.add(b"s", [b"a", b"1"], AddOptions(id=(5, 0))),
                                           write=True)).start()
    got = blocking.wait_until(store, [b"s"], attempt, 30)
    assert got is not None and got[0][0] == b"5-0"
