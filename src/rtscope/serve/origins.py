"""The store's runs as the lab page, the targets and /metrics count them: per target its runs and newest run,
per target and workload its runs, and per board its monitoring intervals (runs tagged "monitor") and newest.

Read incrementally: a refresh asks the store only for the runs with an id above the highest seen (a lab
stores one interval per board per minute: a hundred boards change the store every 0.6 s, and reading every
run's origin again took 15-300 ms at 2,000 runs). A run stored with a lower id after a higher one was read (a
PostgreSQL sequence hands out ids before the transactions commit, in any order) or a run removed leaves the
store's run count different from the runs counted: then everything is read again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from ..store import Store
from .views import target_of


@dataclass(frozen=True)
class Newest:
    """How many runs, and the newest one's id and storing time (ISO text)."""

    runs: int
    run_id: int
    stored_at: str


@dataclass(frozen=True)
class Counts:
    """One moment of the store: every target's runs, runs per (target, workload), every board's intervals,
    the latest storing time per target."""

    targets: dict[str, Newest] = field(default_factory=dict)
    by_workload: dict[tuple[str, str], int] = field(default_factory=dict)
    boards: dict[str, Newest] = field(default_factory=dict)
    last_stored: dict[str, str] = field(default_factory=dict)
    total: int = 0
    last_id: int = 0


def _counted(into: dict[str, Newest], target: str, run_id: int, stored_at: str) -> None:
    was = into.get(target)
    if was is None:
        into[target] = Newest(1, run_id, stored_at)
    elif run_id > was.run_id:
        into[target] = Newest(was.runs + 1, run_id, stored_at)
    else:
        into[target] = Newest(was.runs + 1, was.run_id, was.stored_at)


def fold(counts: Counts, rows) -> Counts:
    """counts with these run_origins() rows added (a new Counts: a snapshot handed out never changes)."""
    targets, by_workload = dict(counts.targets), dict(counts.by_workload)
    boards, last_stored = dict(counts.boards), dict(counts.last_stored)
    total, last_id = counts.total, counts.last_id
    for run_id, workload, settings, stored_at, tags in rows:
        target, stored_at = target_of(settings or {}), stored_at or ""
        _counted(targets, target, run_id, stored_at)
        by_workload[(target, workload)] = by_workload.get((target, workload), 0) + 1
        last_stored[target] = max(last_stored.get(target, ""), stored_at)
        if "monitor" in (tags or []):
            _counted(boards, target, run_id, stored_at)
        total, last_id = total + 1, max(last_id, run_id)
    return Counts(targets, by_workload, boards, last_stored, total, last_id)


class Origins:
    """The store's Counts, brought up to date by reading only the runs stored since."""

    def __init__(self, store: Store):
        self.store = store
        self._counts = Counts()
        self._lock = threading.Lock()

    def read(self) -> Counts:
        with self._lock:
            counts = fold(self._counts, self.store.run_origins(after_id=self._counts.last_id))
            if counts.total != self.store.run_count():    # a late commit below the highest id, or a removal
                counts = fold(Counts(), self.store.run_origins())
            self._counts = counts
            return counts
