"""What changed in the store, and what is computed from it only once.

The server notices new runs and experiments by polling the store's fingerprint (counts and newest ids: one
cheap query) every POLL_S in a thread of its own while requests ask for it, shared by every open page's
event stream. Pages and documents that depend on the whole store are cached under the fingerprint they were
built from; a stored run never changes, so what is computed from one run is cached under its id. Every cache
is bounded (least recently used out first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Hashable, Iterable

from ..store import Store

POLL_S = 0.5
STALE_S = 5.0   # a fingerprint read longer ago than this is read again by the request that asks
IDLE_S = 60.0   # a thread of Refreshed or Watch ends after this long without a value to make or a request


class Bounded:
    """A thread-safe LRU cache of at most `size` entries. A value is computed outside the lock (two requests
    may compute it at once; both get a correct value)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

    def get(self, key: Hashable, make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def get_many(self, keys: list[Hashable], read: Callable[[list], Iterable[tuple[Hashable, Any]]]) -> dict:
        """The values of `keys`: the cached ones, and those not cached yet made together by `read(missing)`
        (key, value pairs: one query for all of them) and cached. A key `read` does not give is left out."""
        with self._lock:
            missing = [k for k in keys if k not in self._items]
        made = dict(read(missing)) if missing else {}
        out = {}
        for k in keys:
            if k in made:
                out[k] = self.get(k, lambda k=k: made[k])
            else:
                with self._lock:
                    if k in self._items:
                        self._items.move_to_end(k)
                        out[k] = self._items[k]
        return out


class Refreshed:
    """One value made from the store's state (the lab page, /metrics' reading of the boards), made again by a
    thread of its own (one, started with the first value) when the state changes. A request gets the newest
    value made at once: stale (said so: the page then asks again, Prometheus scrapes again) while its own
    state's is being made, so a burst of intervals arriving from a hundred boards never holds a request. Only
    the first value is waited for, and its making's failure raised.

    Values that share `making` (a lock) are made one at a time, and a value is made again no sooner than its
    last making took (at most half the time spent making it): a lab whose store changes every 0.6 s would
    otherwise keep the server's interpreter busy making pages, and its requests waiting for it."""

    def __init__(self, making: threading.Lock | None = None):
        self._making_lock = making or threading.Lock()
        self._ready_at = 0.0          # monotonic time before which the next making does not start
        self._value: Any = None
        self._state: Hashable = None
        self._made = False
        self._error: tuple[Hashable, BaseException] | None = None
        self._wanted: tuple[Hashable, Callable[[], Any]] | None = None
        self._maker: threading.Thread | None = None   # makes each value wanted, one after another
        self._in_making: Hashable = None   # the state being made
        self._cond = threading.Condition()

    def get(self, state: Hashable, make: Callable[[], Any]) -> tuple[Any, bool]:
        """(the value, whether it is stale: made from an earlier state than `state`)."""
        with self._cond:
            if self._made and self._state == state:
                return self._value, False
            if state != self._in_making:      # else made already: its requests get it once made
                self._wanted = (state, make)
            if self._error is not None and self._error[0] == state:
                self._error = None            # made again: its requests wait for this attempt
            if self._maker is None:   # once: a thread started per making made its request wait for the start
                self._maker = threading.Thread(target=self._keep_making, name="rtscope-refresh", daemon=True)
                self._maker.start()
            self._cond.notify_all()
            while not self._made:
                if self._error is not None and self._error[0] == state:
                    raise self._error[1]
                self._cond.wait(1.0)
            return self._value, self._state != state

    def now(self, state: Hashable, make: Callable[[], Any]) -> tuple[Any, bool] | None:
        """As get once a value is made (get never waits then); before that None, never waiting: an async
        route answers on the event loop when this gives a value, else from a thread through get."""
        with self._cond:
            if not self._made:
                return None
        return self.get(state, make)

    def _keep_making(self) -> None:
        while True:
            with self._cond:   # a minute without a change: the thread ends (the next request starts one)
                if self._wanted is None and not self._cond.wait_for(lambda: self._wanted is not None, IDLE_S):
                    self._maker = None
                    return
            time.sleep(max(0.0, self._ready_at - time.monotonic()))   # the newest state wanted by then is made
            with self._cond:
                state, make = self._wanted
                self._wanted, self._in_making = None, state
            with self._making_lock:
                started = time.monotonic()
                try:
                    value, failed = make(), None
                except BaseException as e:  # noqa: BLE001 - handed to the requests that wait for this state
                    value, failed = None, e
                self._ready_at = 2 * time.monotonic() - started
            del make
            with self._cond:
                self._in_making = None
                if failed is not None:
                    self._error = (state, failed)
                else:
                    self._value, self._state, self._made, self._error = value, state, True, None
                self._cond.notify_all()


class Watch:
    """The store's current fingerprint. While it is asked for (IDLE_S), a thread of its own reads it every
    POLL_S, so that a request gets it without a query of its own: a busy PostgreSQL once held a scrape for
    seconds. A request reads it itself only when there is none yet, the one there is older than STALE_S, or
    the last reading failed: its error is then the request's (the live stream says the store is unreachable)."""

    def __init__(self, store: Store):
        self.store = store
        self._value: tuple | None = None
        self._at = 0.0          # monotonic time the value was read
        self._asked = 0.0       # ... and last asked for
        self._failed = False    # the poller's last reading failed
        self._poller: threading.Thread | None = None
        self._lock = threading.Lock()

    def at_hand(self) -> tuple | None:
        """The fingerprint if one is at hand (read, fresh, the last reading did not fail), never querying: else
        None (fingerprint reads it)."""
        with self._lock:
            self._asked = time.monotonic()
            if self._value is not None and not self._failed and self._asked - self._at < STALE_S:
                self._keep_polling()
                return self._value
        return None

    def fingerprint(self) -> tuple:
        value = self.at_hand()
        if value is not None:
            return value
        value = self.store.fingerprint()
        with self._lock:
            self._value, self._at, self._failed = value, time.monotonic(), False
            self._keep_polling()
        return value

    def _keep_polling(self) -> None:   # under the lock
        if self._poller is None:
            self._poller = threading.Thread(target=self._poll, name="rtscope-watch", daemon=True)
            self._poller.start()

    def _poll(self) -> None:
        while True:
            time.sleep(POLL_S)
            with self._lock:
                if time.monotonic() - self._asked > IDLE_S:
                    self._poller = None
                    return
            try:
                value = self.store.fingerprint()
            except Exception:  # noqa: BLE001 - the next request reads it itself and gets the error
                with self._lock:
                    self._failed = True
                continue
            with self._lock:
                self._value, self._at, self._failed = value, time.monotonic(), False
