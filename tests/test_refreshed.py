"""serve/live.py's Refreshed: the lab page and /metrics' reading, made again off the request when the store
changes; a request gets the newest copy made at once (said stale when its own state's is still being made),
copies sharing a lock are made one at a time, and no sooner again than the last one took."""

from __future__ import annotations

import threading
import time

import pytest

from rtscope.serve.live import Refreshed

pytestmark = pytest.mark.fast


def eventually(check, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_the_first_copy_is_waited_for_then_the_one_before_is_served_stale_until_made():
    r = Refreshed()
    assert r.get(1, lambda: "one") == ("one", False)          # nothing made yet: waited for
    assert r.get(1, lambda: pytest.fail("made twice")) == ("one", False)
    release = threading.Event()

    def slow():
        release.wait(10)
        return "two"
    started = time.monotonic()
    assert r.get(2, slow) == ("one", True)                      # being made: the copy before, at once
    assert time.monotonic() - started < 5
    release.set()
    eventually(lambda: r.get(2, slow) == ("two", False))       # made in the background meanwhile


def test_now_never_waits_nor_starts_the_first_making():
    """now (what an async route asks on the event loop): None until a first copy is made, without starting its
    making; then what get gives, the copy before while the state's is made."""
    r = Refreshed()
    assert r.now(1, lambda: pytest.fail("made on the event loop")) is None and r._maker is None
    assert r.get(1, lambda: "one") == ("one", False)
    release = threading.Event()

    def two():
        release.wait(10)
        return "two"
    assert r.now(2, two) == ("one", True)
    release.set()
    eventually(lambda: r.now(2, two) == ("two", False))


def test_states_in_between_are_skipped():
    r = Refreshed()
    made = []

    def make(n):
        def f():
            made.append(n)
            time.sleep(0.05)
            return n
        return f
    assert r.get(1, make(1)) == (1, False)
    for n in (2, 3, 4):
        r.get(n, make(n))
        time.sleep(0.01)
    eventually(lambda: r.get(4, make(4)) == (4, False))
    assert made[-1] == 4 and len(made) <= 3                     # 1, then 2 perhaps, then 4: 3 never made


def spans_of(*refreshed: Refreshed, states: int = 3) -> list[tuple[int, float, float]]:
    """Each of `refreshed` asked for states 0..states-1 in turn, each state once all are made: the makings'
    (which, start, end), by start."""
    spans = []

    def make(which, n):
        def f():
            started = time.monotonic()
            time.sleep(0.1)
            spans.append((which, started, time.monotonic()))
            return n
        return f
    for n in range(states):
        for i, r in enumerate(refreshed):
            r.get(n, make(i, n))
        eventually(lambda: all(r.get(n, make(i, n)) == (n, False) for i, r in enumerate(refreshed)))
    return sorted(spans, key=lambda s: s[1])


def test_copies_sharing_a_lock_are_made_one_at_a_time():
    lock = threading.Lock()
    spans = spans_of(Refreshed(lock), Refreshed(lock))
    assert len(spans) == 6 and all(a[2] <= b[1] for a, b in zip(spans, spans[1:])), spans


def test_a_copy_is_made_again_no_sooner_than_its_last_making_took():
    spans = spans_of(Refreshed())
    assert len(spans) == 3
    assert all(b[1] - a[2] >= (a[2] - a[1]) - 0.005 for a, b in zip(spans, spans[1:])), spans


def test_a_failed_first_making_is_raised_to_its_request_and_tried_again():
    r = Refreshed()
    with pytest.raises(RuntimeError, match="store gone"):
        r.get(1, lambda: (_ for _ in ()).throw(RuntimeError("store gone")))
    assert r.get(1, lambda: "back") == ("back", False)


def test_one_thread_makes_every_copy_and_a_request_starts_none():
    """The copies are made by one thread, started with the first: a request that wanted a copy made once had
    to wait for a new thread to start, up to 0.3 s on a loaded host (bench/lab_scale.py's scrapes)."""
    r = Refreshed()
    makers = set()

    def make(n):
        def f():
            makers.add(threading.get_ident())
            return n
        return f
    for n in range(20):
        r.get(n, make(n))
        eventually(lambda n=n: r.get(n, make(n)) == (n, False))
    assert len(makers) == 1 and threading.get_ident() not in makers
    before = threading.active_count()
    for n in range(20, 40):
        r.get(n, make(n))
    eventually(lambda: r.get(39, make(39)) == (39, False))
    assert threading.active_count() == before


def test_the_thread_ends_when_idle_and_the_next_change_starts_one(monkeypatch):
    from rtscope.serve import live
    monkeypatch.setattr(live, "IDLE_S", 0.2)
    r = Refreshed()
    assert r.get(1, lambda: 1) == (1, False)
    maker = r._maker
    eventually(lambda: not maker.is_alive())     # nothing more to make: no thread left holding the server
    r.get(2, lambda: 2)
    eventually(lambda: r.get(2, lambda: 2) == (2, False))


class Counting:
    """A store whose fingerprint is the number of times it was read; `fail` makes the reading raise."""

    def __init__(self):
        self.reads, self.fail, self.threads = 0, False, set()

    def fingerprint(self):
        self.threads.add(threading.get_ident())
        if self.fail:
            raise OSError("the store is unreachable")
        self.reads += 1
        return (self.reads,)


def test_the_watch_reads_the_fingerprint_off_the_request_and_a_failure_reaches_it(monkeypatch):
    """The first request reads the fingerprint itself; then a thread of the watch's reads it every POLL_S and
    the requests get it without a query; once that thread's reading fails, the next request reads it itself and
    gets the error; a minute (IDLE_S) without a request ends the thread."""
    from rtscope.serve import live
    monkeypatch.setattr(live, "POLL_S", 0.05)
    monkeypatch.setattr(live, "IDLE_S", 0.5)
    store = Counting()
    watch = live.Watch(store)
    assert watch.at_hand() is None and store.reads == 0               # at hand: never a query
    assert watch.fingerprint() == (1,) and store.threads == {threading.get_ident()}
    assert watch.at_hand() == (1,) and store.reads == 1
    eventually(lambda: watch.fingerprint() >= (3,))          # read meanwhile by the watch's thread
    store.threads.clear()
    for _ in range(20):
        watch.fingerprint()
        time.sleep(0.01)
    assert threading.get_ident() not in store.threads and len(store.threads) == 1
    store.fail = True
    time.sleep(0.2)                                          # the thread's reading failed
    assert watch.at_hand() is None                           # ... nor a fingerprint the last reading failed
    with pytest.raises(OSError, match="unreachable"):
        watch.fingerprint()
    store.fail = False
    poller = watch._poller
    eventually(lambda: not poller.is_alive())                # nobody asks: the thread ends
