"""The lab's boards as `rtscope serve` sees them: every target `rtscope monitor` watches or watched, the
figures of its newest monitoring interval, and whether it is watched and up.

A board is a target with monitoring intervals (runs tagged "monitor"). What names it does not change from one
read to the next: the target's name, and the kernel release and preemption model its newest interval recorded.
Its state at a given time:

    watched  the monitoring its newest interval belongs to is still running (a controller is on it); a
             monitoring ended with Ctrl-C, SIGTERM or at its end leaves the board unwatched
    up       its newest interval was stored at most DOWN_AFTER_INTERVALS interval lengths + DOWN_GRACE_S ago:
             the board answers and its intervals arrive. A watched board that is not up is *down* (it stopped
             answering, or its controller died: a `kill -9` leaves the monitoring `running`)

When a fleet controller (`rtscope monitor --target FLEET`) holds a live lease on a board (store/leases.py), the
board is watched by that controller, and up or down as the controller says; without a lease its controller is
unknown (None) and the times of its intervals decide. A board whose monitoring was given up on (its lease row
`incomplete`, the board down for --give-up-after intervals) is down, unwatched and `incomplete`, with the reason.
/metrics and the lab page also show the boards of the lease table that have no interval stored yet (`silent`: a
board that died before its first interval), down, with their controller's reason.

Read in two parts: what the store holds (`Lab.read`, cached by the server until the store changes; each
interval's figures computed once per run, a stored run never changes) and the state at a time (`Board.up`),
which changes with the clock alone.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..analysis.tail_bound import bound_or_reason
from ..analysis.threads import thread_histograms
from ..experiment import execute as exp_mod, monitor
from ..store import Run, Store
from .live import Bounded
from .origins import Counts, Origins

DOWN_AFTER_INTERVALS = 2   # a board is down once this many intervals are missing ...
DOWN_GRACE_S = 10.0        # ... plus this (storing, the next interval's start, clocks of the lab's machines)
RECENT_RUNS = 32           # runs kept whole in memory: the newest read (the lab page's latest results among them)
RECORD_GRACE_S = 30.0      # a controller records an interval's running bound within seconds of storing it
# Upper bounds in µs at which an interval's samples are counted: 1-2-5 steps from 1 µs to 10 ms, the range a
# latency monitor measures (Prometheus' histogram buckets, `le`).
BOUNDS_US = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


@dataclass(frozen=True)
class CpuFigures:
    """One CPU's thread of an interval: samples, maximum and p99.99 (ns), samples at or under each of
    BOUNDS_US (every sample, beyond the probe's histogram too, in `n`), and the sum of the samples (ns)."""

    cpu: int
    n: int
    max_ns: float
    p9999_ns: float
    at_bounds: tuple[int, ...]
    sum_ns: float


@dataclass(frozen=True)
class Interval:
    """A stored monitoring interval, summed up: what the metrics and the lab need of it."""

    run_id: int
    experiment_id: int | None
    kernel: str
    preemption: str
    length_s: float
    finished_at: str | None
    cpus: tuple[CpuFigures, ...]
    top_cause: str | None      # an explained interval's largest culprit and its share (monitor.top_cause)


@dataclass(frozen=True)
class Lease:
    target: str
    controller: str | None  # None: nobody holds it (a board given up on)
    state: str             # "up" or "down", as the controller says; "incomplete": given up on
    reason: str | None = None


@dataclass(frozen=True)
class Board:
    target: str
    newest: Interval | None  # None: no interval stored yet (a board of the lease table only; /metrics)
    intervals: int         # intervals stored, every monitoring of the target
    stored_at: float       # Unix time the newest interval was stored
    watched: bool
    controller: str | None
    lease_up: bool | None  # the controller's word, when a lease records it
    reason: str | None = None   # why its controller marked it down (or gave it up)
    incomplete: bool = False    # its monitoring was given up on (down for --give-up-after intervals)

    @property
    def down_after_s(self) -> float:
        return DOWN_AFTER_INTERVALS * (self.newest.length_s if self.newest else 0) + DOWN_GRACE_S

    def up(self, now: float) -> bool:
        if self.lease_up is not None:
            return self.lease_up
        return self.newest is not None and now - self.stored_at <= self.down_after_s

    def state(self, now: float) -> str:
        """up, down (watched but silent), incomplete (given up on) or unwatched."""
        if self.up(now):
            return "up"
        return "down" if self.watched else "incomplete" if self.incomplete else "unwatched"


def counts_at(h: dict, bounds_us=BOUNDS_US) -> tuple[int, ...]:
    """A probe-kept histogram's samples at or under each bound: a stored bucket [lo, lo + w) counts under a
    bound when its upper edge is at most the bound."""
    counts = np.asarray(h["counts"], dtype=np.int64)
    upper = float(h.get("min_value", 0)) + float(h["bucket_width"]) * np.arange(1, len(counts) + 1)
    cum = np.concatenate([[0], np.cumsum(counts)])
    return tuple(int(cum[int(np.searchsorted(upper, b * 1000.0, side="right"))]) for b in bounds_us)


def interval_of(store: Store, run: Run) -> Interval:
    """A monitoring interval's figures per CPU (monitor's own per-CPU statistics), what names its board, and its
    top cause when it was explained (read once: the lab page is made again whenever the store changes)."""
    rows = {r["cpu"]: r for r in monitor.per_cpu(run)}
    cpus = []
    for index, cpu, h in thread_histograms(run):
        row = rows[index if cpu is None else cpu]
        cpus.append(CpuFigures(row["cpu"], int(h.get("n", row["n"])), float(h.get("max", row["max_us"] * 1000)),
                               row["p9999_us"] * 1000, counts_at(h), float(h.get("sum", 0))))
    m = run.machine or {}
    return Interval(run.id, run.experiment_id, str(m.get("kernel_release") or "unknown"),
                    str(m.get("preemption") or "unknown"), float(run.params.get("duration_s") or 0),
                    run.finished_at, tuple(cpus),
                    monitor.top_cause(store, run) if run.settings.get("explain") else None)


def timestamp(text: str | None) -> float | None:
    """An ISO time of the store as Unix time (None when absent or not a time)."""
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


def leases(store: Store) -> dict[str, Lease]:
    """The fleet controllers' live leases (store/leases.py), and the boards given up on, per target."""
    from ..store.leases import INCOMPLETE, held_now
    now, rows = store.leases.rows()
    out = {}
    for r in rows:
        if held_now(r, now):
            out[r["target"]] = Lease(r["target"], r["controller"], "down" if r["state"] == "down" else "up",
                                     r["reason"])
        elif r["state"] == INCOMPLETE:
            out[r["target"]] = Lease(r["target"], None, INCOMPLETE, r["reason"])
    return out


def lease_board(target: str, lease: Lease | None, **interval) -> Board:
    """A board's state as its lease row says (no lease: the times of its intervals decide)."""
    incomplete = lease is not None and lease.state == "incomplete"
    running = interval.pop("running", False)
    return Board(target, watched=(lease is not None and not incomplete) or running,
                 controller=lease.controller if lease else None,
                 lease_up=None if lease is None else lease.state == "up", reason=lease.reason if lease else None,
                 incomplete=incomplete, **interval)


class Lab:
    """The store's boards; each interval's figures computed once (a stored run never changes)."""

    def __init__(self, store: Store, cached: int = 1024):
        self.store = store
        self.origins = Origins(store)      # what the store holds, read incrementally
        self.intervals = Bounded(cached)   # run id -> Interval
        self.recent = Bounded(RECENT_RUNS)  # run id -> the run, for the newest runs read
        self.recorded: dict[int, RunningBound] = {}             # newest run id -> the bound recorded for it
        self.latest: dict[str, tuple[int, RunningBound]] = {}   # per board: its newest bound known, of which run
        self.fitted = 0                    # bounds fitted so far: a page made before the newest one is stale
        self._fitting: set[int] = set()
        self._recording: set[int | None] = set()   # monitorings (experiment ids) whose controller records bounds
        self._lock = threading.Lock()
        self._fitter = ThreadPoolExecutor(1, thread_name_prefix="rtscope-bound")

    def read_runs(self, ids: list[int]) -> list[Run]:
        """These runs read from the store in one query, the newest of them kept for the next reader (the lab
        page's latest results are the intervals just read here)."""
        found = self.store.runs(ids=ids)
        for run in found[-self.recent.size:]:
            self.recent.get(run.id, lambda run=run: run)
        return found

    def runs(self, ids: list[int]) -> dict[int, Run]:
        """These runs, by id: the recent ones from memory, the others read (a stored run never changes)."""
        return self.recent.get_many(ids, lambda missing: ((r.id, r) for r in self.read_runs(missing)))

    def bound(self, board: Board, now: float) -> "RunningBound | None":
        """The running bound as of a board's newest interval, as its controller recorded it (running_bounds).
        Until it is recorded, the board's previous bound (None: none yet). An interval of a monitoring whose
        controller records none (an rtscope before running_bounds), or still without one RECORD_GRACE_S after
        it was stored (its controller stopped meanwhile), is fitted here, once, off the request."""
        run_id = board.newest.run_id
        found = self.recorded.get(run_id)
        with self._lock:
            if found is not None:
                self.latest[board.target] = (run_id, found)
                self._recording.add(board.newest.experiment_id)
                return found
            fitted = self.latest.get(board.target)
            if fitted is not None and fitted[0] == run_id:
                return fitted[1]
            awaited = (board.newest.experiment_id in self._recording and now - board.stored_at < RECORD_GRACE_S)
            if not awaited and run_id not in self._fitting:
                self._fitting.add(run_id)
                self._fitter.submit(self._fit, board.target, run_id)
        return fitted[1] if fitted is not None else None

    def read_recorded(self, run_ids: list[int]) -> None:
        """Know the recorded bounds of these intervals (the boards' newest): those not known yet read in one
        query (a recorded bound never changes); the others' forgotten."""
        known = {i: self.recorded[i] for i in run_ids if i in self.recorded}
        for run_id, b in self.store.running_bounds([i for i in run_ids if i not in known]).items():
            known[run_id] = RunningBound(*bound_or_reason(b["value_ns"], b["reason"]))
        self.recorded = known

    def _fit(self, target: str, run_id: int) -> None:
        try:
            found = running_bound(self.store, self.store.get_run(run_id))   # (not recorded: serve reads only)
        except Exception as e:   # noqa: BLE001 - a failed fit is shown as the reason there is no bound
            found = RunningBound(None, f"the fit failed: {e}")
        with self._lock:
            self._fitting.discard(run_id)
            if run_id >= self.latest.get(target, (-1, None))[0]:   # a newer interval's fit may have ended first
                self.latest[target] = (run_id, found)
            self.fitted += 1

    def read(self, counts: Counts | None = None, silent: bool = False) -> list[Board]:
        """Every board, by target name (`counts`: the store's as the caller has read them; `silent`: also the
        boards of the lease table that have no interval stored, newest None)."""
        newest = (self.origins.read() if counts is None else counts).boards
        intervals = self.intervals.get_many([b.run_id for b in newest.values()], lambda missing: (
            (run.id, interval_of(self.store, run)) for run in self.read_runs(missing)))
        found = {t: intervals[b.run_id] for t, b in newest.items()}
        statuses = self.store.experiment_statuses(sorted({iv.experiment_id for iv in found.values()
                                                          if iv.experiment_id is not None}))
        held = leases(self.store)
        boards = [lease_board(target, held.get(target), newest=found[target], intervals=newest[target].runs,
                              stored_at=timestamp(newest[target].stored_at) or 0.0,
                              running=statuses.get(found[target].experiment_id) == exp_mod.RUNNING)
                  for target in sorted(newest)]
        if silent:
            _, rows = self.store.leases.rows()
            boards += [lease_board(r["target"], held.get(r["target"]), newest=None, intervals=0, stored_at=0.0,
                                   running=r["experiment_status"] == exp_mod.RUNNING)
                       if r["target"] in held else
                       Board(r["target"], None, 0, 0.0, r["experiment_status"] == exp_mod.RUNNING, None, None,
                             r["reason"])
                       for r in rows if r["target"] not in newest]
            boards.sort(key=lambda b: b.target)
        return boards


FITTING = "being fitted from the intervals so far"


@dataclass(frozen=True)
class RunningBound:
    """A board's tail bound at BOUND_P per sample from its intervals so far (monitor's running bound), or why
    there is none."""

    value_ns: float | None
    reason: str | None


def running_bound(store: Store, run: Run) -> RunningBound:
    """The bound `rtscope monitor` prints after this interval: every interval of its monitoring with its phase."""
    wc, _ = monitor.worst_case_so_far(store, run, record=False)
    return RunningBound(*bound_or_reason(wc.level.value if wc.level is not None else None, wc.short_reason))


NO_INTERVAL = "no interval stored yet"


def page_rows(lab: Lab, now: float) -> list[dict]:
    """The lab page's boards table: per board its kernel and preemption model, state (and why it is down or was
    given up on), its newest interval's worst CPU (max and p99.99, µs), the running tail bound at p = 1e-9 per
    sample (or why none), the top cause when that interval was explained, the intervals stored, who watches it,
    and its monitoring (the per-board page with its history). As in /metrics, the boards of the lease table that
    have no interval yet (died before their first) are listed too, with their state and reason."""
    rows = []
    boards = lab.read(silent=True)
    lab.read_recorded([b.newest.run_id for b in boards if b.newest is not None])
    for b in boards:
        iv = b.newest
        controller = b.controller or ("-" if not b.watched else "?")
        if iv is None:
            rows.append({"target": b.target, "kernel": "-", "preemption": "-", "state": b.state(now),
                         "reason": b.reason, "max_us": None, "p9999_us": None, "bound_us": None,
                         "bound_reason": NO_INTERVAL, "top_cause": None, "intervals": 0, "controller": controller,
                         "finished_at": "", "experiment": None, "run": None})
            continue
        worst = max(iv.cpus, key=lambda c: c.max_ns, default=None)
        bound = lab.bound(b, now) or RunningBound(None, FITTING)
        rows.append({"target": b.target, "kernel": iv.kernel, "preemption": iv.preemption, "state": b.state(now),
                     "reason": b.reason, "max_us": None if worst is None else worst.max_ns / 1000,
                     "p9999_us": None if worst is None else max(c.p9999_ns for c in iv.cpus) / 1000,
                     "bound_us": None if bound.value_ns is None else bound.value_ns / 1000,
                     "bound_reason": bound.reason,
                     "top_cause": iv.top_cause,
                     "intervals": b.intervals, "controller": controller,
                     "finished_at": iv.finished_at or "", "experiment": iv.experiment_id, "run": iv.run_id})
    return rows
