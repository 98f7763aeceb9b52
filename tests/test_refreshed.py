"""serve/live.py's Refreshed: the lab page and /metrics' reading, made again off the request when the store
changes; a request gets the newest copy made at once (said stale when its own state's is still being made),
copies sharing a lock are made one at a time, and no sooner again than the last one took."""

from __future__ import annotations

import threading
import time

import pytest

from rtscope.serve.live import Refreshed


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
