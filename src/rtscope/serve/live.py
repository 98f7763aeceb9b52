"""What changed in the store, and what is computed from it only once.

The server notices new runs and experiments by polling the store's fingerprint (counts and newest ids: one
cheap query) at most every POLL_S, shared by every open page's event stream. Pages and documents that depend
on the whole store are cached under the fingerprint they were built from; a stored run never changes, so what
is computed from one run is cached under its id. Every cache is bounded (least recently used out first).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Hashable, Iterable

from ..store import Store

POLL_S = 0.5


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


class Watch:
    """The store's current fingerprint, re-read when older than POLL_S."""

    def __init__(self, store: Store):
        self.store = store
        self._value: tuple | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    def fingerprint(self) -> tuple:
        with self._lock:
            if self._value is None or time.monotonic() - self._at >= POLL_S:
                self._value = self.store.fingerprint()
                self._at = time.monotonic()
            return self._value
