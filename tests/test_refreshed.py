"""serve/live.py's Refreshed: the lab page and /metrics' reading, made again off the request when the store
changes; a request waits a little for its own state's copy, else gets the one before, said stale."""

from __future__ import annotations

import threading
import time

import pytest

from rtscope.serve.live import Refreshed


def test_the_first_copy_is_waited_for_then_a_slow_one_is_served_stale():
    r = Refreshed(wait_s=0.1)
    assert r.get(1, lambda: "one") == ("one", False)          # nothing made yet: waited for
    assert r.get(1, lambda: pytest.fail("made twice")) == ("one", False)
    release = threading.Event()

    def slow():
        release.wait(10)
        return "two"
    started = time.monotonic()
    assert r.get(2, slow) == ("one", True)                      # not made within 0.1 s: the copy before
    assert time.monotonic() - started < 5
    release.set()
    deadline = time.monotonic() + 10
    while r.get(2, slow) != ("two", False):                     # made in the background meanwhile
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_a_quick_copy_is_served_fresh_and_states_in_between_are_skipped():
    r = Refreshed(wait_s=1)
    made = []

    def make(n):
        def f():
            made.append(n)
            time.sleep(0.05)
            return n
        return f
    assert r.get(1, make(1)) == (1, False)
    got = []
    threads = [threading.Thread(target=lambda n=n: got.append(r.get(n, make(n)))) for n in (2, 3, 4)]
    for t in threads:
        t.start()
        time.sleep(0.01)
    for t in threads:
        t.join()
    assert (4, False) in got and made[-1] == 4
    assert len(made) <= 4                                       # never more than one per state asked


def test_a_failed_making_is_raised_to_its_request_and_tried_again():
    r = Refreshed(wait_s=0.1)
    with pytest.raises(RuntimeError, match="store gone"):
        r.get(1, lambda: (_ for _ in ()).throw(RuntimeError("store gone")))
    assert r.get(1, lambda: "back") == ("back", False)
