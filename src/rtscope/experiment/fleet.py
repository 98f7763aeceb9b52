"""Monitoring a fleet from one process, and a lab shared by several such controllers (docs/lab.md).

    rtscope monitor --target lab --duration 8h --interval 5m --db postgresql://lab@dbhost/rtscope

Each board gets its own monitoring (experiment `monitor-<board>`, one histogram run per interval, experiment/
monitor.py) and its own worker thread: its intervals follow each other on their own schedule, each stored as it
ends. A board that stops answering is marked `down` with the reason and asked again every few seconds; when it
answers, its monitoring continues with the interval it lost. The other boards never wait for it.

Threads, not asyncio: a board's interval is the runner's blocking work (paramiko's blocking SSH client, the
target's file transfers, the settings it applies and undoes), as in a fleet's `rtscope run`; an event loop would
have to hand every one of those calls to a thread anyway. A worker thread costs its stack's touched pages (tens
of kB) and its SSH connection's transport thread; a board's state is its Plan, its cells and a counter — every
interval's planned run is made when it starts (monitor.planned_run), so memory per board does not grow with the
duration.

Several controllers share a lab through the store's lease tables (store/leases.py): a controller works only on
boards whose lease it holds, renews its leases every quarter of a lease (a lease is half an interval, at least
LEASE_MIN_S), and stores an interval only while it still holds the board (in the run's own transaction). A
controller killed with -9 stops renewing: its boards' leases run out within half an interval and the others take
them over within the next quarter of a lease, continuing each board's monitoring where it stopped. A controller
takes at most its share of the unwatched boards (the fleet's boards over the live controllers, rounded up), so
one started later takes over what nobody watches without grabbing every board at once.

A board's monitoring is the one its lease row names while that is unfinished (whoever started it); a controller
that finds none starts one with its own plan. A controller is done when each of its boards' monitorings, the
ones it saw or started, has finished, or was given up on: a board down for `give_up_after` intervals (2 by
default; 0: never) has its monitoring marked `incomplete` with the reason, and its lease given back.

While the store is unreachable (docs/store.md), a board's interval goes to the store's spool with the board and
controller whose lease row it updates, and the board goes on while this controller can prove its lease: once
its last renewal is older than 0.9 of a lease, the controller stops watching it (the interval under way is not
kept). When the store answers again, the spool is written first (an interval's lease row only if this
controller still holds the board), then the controller claims the boards it can: whoever holds a lease wins, and
a board is never watched by two controllers, since each stopped before its lease could run out.
"""

from __future__ import annotations

import ctypes
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from ..errors import RtscopeError, UsageError
from ..signals import Terminated, held_signals, sigterm_raises
from ..store import DuplicateRun, Run, Store
from ..store.leases import DOWN, FINISHED, INCOMPLETE, RELEASED, WATCHING, held_now
from ..store.spool import Spooled
from ..targets import Pool
from . import execute as exp_mod
from . import monitor as mon
from .outage import GIVE_UP_AFTER, Outage, check_give_up_after, close as _close
from .runner import execute as execute_run

LEASE_MIN_S = 2.0         # a lease is half an interval, at least this long (a renewal every quarter of it)


class Reporter(Protocol):
    def claimed(self, board: str, experiment_id: int, done: int, total: int) -> None: ...
    def stored(self, board: str, planned: exp_mod.PlannedRun, total: int, run: Run) -> None: ...
    def down(self, board: str, reason: str) -> None: ...
    def up(self, board: str) -> None: ...
    def lost(self, board: str, why: str) -> None: ...
    def finished(self, board: str, experiment_id: int) -> None: ...
    def kept(self, board: str, planned: exp_mod.PlannedRun, total: int, note: str) -> None: ...
    def gave_up(self, board: str, experiment_id: int, reason: str) -> None: ...


class LeaseLost(RtscopeError):
    """This controller no longer holds the board (another took it): its interval is not stored."""


def controller_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def store_gone(e: BaseException) -> bool:
    """Whether an error is the store's being unreachable (a board then goes on, or stops while the lease
    cannot be proven; never a failure of the board)."""
    from ..store import unreachable
    return unreachable(e)


def lease_seconds(interval_s: float) -> float:
    """Half an interval (at least LEASE_MIN_S): a killed controller's boards are free again within half an
    interval, and taken over within the next quarter of a lease plus the time to connect to them."""
    return max(interval_s / 2, LEASE_MIN_S)


class LeasedSink:
    """Stores an interval in one transaction with the compare-and-set of its board's lease: nothing is stored
    by a controller that no longer holds the board."""

    def __init__(self, store: Store, board: "Board"):
        self.store, self.board = store, board

    def add_run(self, sf, environment, **kw) -> int | Spooled:
        """The interval stored (its id), or spooled while the store is unreachable (with its lease row's update,
        written later only if this controller still holds the board)."""
        b = self.board
        keeper = self.store.keeper

        def write() -> int:
            with b.ctl.write_lock, self.store.transaction() as c:
                run_id = self.store.add_run(sf, environment, conn=c, **kw)
                if not self.store.leases.hold(c, b.name, b.ctl.name, b.ctl.lease_s, state=WATCHING, reason=None,
                                              last_run_id=run_id, intervals=b.done + 1,
                                              last_interval_at=sf.trailer.get("finished_at")):
                    raise LeaseLost(f"board {b.name}: another controller holds it now; interval not stored")
            return run_id
        lease = {"target": b.name, "controller": b.ctl.name, "intervals": b.done + 1}
        return keeper.guarded(write, lambda: keeper.spool.add_runs([(sf, environment, kw)], lease=lease))


class Board:
    """One board's worker: its monitoring, made interval by interval in a thread of its own."""

    def __init__(self, ctl: "Controller", name: str, plan: mon.Plan):
        self.ctl, self.name, self.plan = ctl, name, plan
        self.seen: int | None = None      # the monitoring this controller follows (seen unfinished, or started)
        self.done_for_us = False          # that monitoring has finished
        self.done = 0                     # intervals stored of it
        self.made = 0                     # ... by this controller
        self.thread: threading.Thread | None = None
        self.stop = threading.Event()
        self.pool: Pool | None = None
        self.held_until = 0.0             # monotonic: past this without a renewal, the lease may be gone
        self.delay_s = 0.0                # before its first interval (start)
        self.incomplete: str | None = None  # why its monitoring was given up on (the board down too long)

    @property
    def working(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, delay_s: float = 0.0) -> None:
        """Work on the board from now, its first interval `delay_s` later (the boards a controller takes at once
        spread over an interval, as Prometheus spreads its scrapes: their intervals do not all end, and get
        stored and read, in the same second)."""
        self.delay_s = delay_s
        self.stop = threading.Event()
        self.held_until = time.monotonic() + self.ctl.lease_s
        self.thread = threading.Thread(target=self._work, name=f"rtscope-board-{self.name}", daemon=True)
        self.thread.start()

    def lose(self, why: str) -> None:
        """Stop at once (the lease is gone, or the controller stops): the interval under way is not stored."""
        if not self.stop.is_set():
            self.stop.set()
            if why:
                self.ctl.reporter.lost(self.name, why)
        pool = self.pool
        if pool is not None:
            pool.interrupt()

    # --- the worker --------------------------------------------------------------------------------------
    def _experiment(self, row: dict) -> tuple[exp_mod.Experiment, Callable[[int], exp_mod.PlannedRun], int]:
        """The board's monitoring to work on (its row's while unfinished, else a new one of our plan), how to
        make its interval i, and its length."""
        store = self.ctl.store
        if row.get("experiment_id") is not None and row.get("experiment_status") in exp_mod.UNFINISHED:
            exp = exp_mod.get(store, row["experiment_id"])
            plan = mon.plan_of(exp.spec)
            if plan is None:  # a monitoring of an rtscope that did not record its Plan: its stored plan
                planned = exp.plan
                return exp, planned.__getitem__, len(planned)
            exp.plan = []  # not kept: its runs are made from the Plan
        else:
            plan = self.plan
            exp = self.ctl.write(mon.start, store, plan, f"monitor:{self.name}")
            exp.plan = []
            if not self.ctl.write(store.leases.update, self.name, self.ctl.name, self.ctl.lease_s,
                                  experiment_id=exp.id, intervals=0, last_run_id=None, last_interval_at=None):
                raise LeaseLost(f"board {self.name}: lost before its monitoring started")
        self.seen = exp.id
        _, cells = mon.cells(plan)
        return exp, lambda i: mon.planned_run(plan, cells, i), plan.intervals

    def _work(self) -> None:
        ctl, store = self.ctl, self.ctl.store
        try:
            row = ctl.claimed_rows.pop(self.name)
            if store.keeper.spool.files():
                store.keeper.flush()   # what was spooled first: its intervals are not made again
            exp, planned_run, total = self._experiment(row)
            if exp.status != exp_mod.RUNNING:
                ctl.write(exp_mod.set_status, store, exp.id, exp_mod.RUNNING)
            todo = _missing(exp_mod.done_indexes(store, exp.id), total)
            self.done = total - sum(len(r) for r in todo)
            ctl.reporter.claimed(self.name, exp.id, self.done, total)
            sink = LeasedSink(store, self)
            outage = Outage(self.name, self.plan.interval_s, ctl.give_up_after)
            self.pool = Pool()
            availability: exp_mod.Availability | None = None
            todo_iter = (i for r in todo for i in r)
            i = next(todo_iter, None)
            if i is not None and self.stop.wait(self.delay_s):
                return
            while i is not None and not self.stop.is_set():
                p = planned_run(i)
                try:
                    if availability is None:
                        availability = exp_mod.Availability(self.pool)
                    target = self.pool.get(self.name)
                    why = availability.reason(p.request)
                    if why:
                        raise RtscopeError(why)
                    gap = outage.gap_note()
                    if outage.answered():
                        ctl.try_write(store.leases.update, self.name, ctl.name, ctl.lease_s, state=WATCHING,
                                      reason=None)
                        ctl.reporter.up(self.name)
                    if self.stop.is_set():
                        return
                    run_id = execute_run(p.request, sink, timeout=p.timeout_s, target=target,
                                         experiment_id=exp.id, plan_index=p.index, cell=p.cell,
                                         repetition=p.repetition, notes=[gap] if gap else None)
                except LeaseLost as e:
                    self.lose(str(e))
                    return
                except DuplicateRun:   # stored meanwhile: the spool of this board's previous controller
                    self.done += 1
                    ctl.reporter.kept(self.name, p, total, "stored already (by its previous controller)")
                    i = next(todo_iter, None)
                    continue
                except Exception as e:  # noqa: BLE001  (any failure of the board: down, asked again later)
                    if self.stop.is_set():
                        return
                    if store_gone(e):
                        raise
                    reason = outage.failed(e, self.pool)
                    if reason is not None:
                        ctl.try_write(store.leases.update, self.name, ctl.name, ctl.lease_s, state=DOWN,
                                      reason=reason[:500])
                        ctl.reporter.down(self.name, reason)
                    why = outage.given_up()
                    if why is not None:
                        self._give_up(exp.id, why)
                        return
                    self.pool, availability = Pool(), None
                    self.stop.wait(outage.retry_s)
                    continue
                self.done += 1
                self.made += 1
                self._report(p, total, run_id)
                give_back_freed_memory()
                i = next(todo_iter, None)
            if i is None and not self.stop.is_set():
                ctl.write(exp_mod.keep_status, store, exp.id, exp_mod.FINISHED,
                          {"target": self.name, "controller": ctl.name, "state": FINISHED, "reason": None})
                self.done_for_us = True
                ctl.reporter.finished(self.name, exp.id)
        except BaseException as e:  # noqa: BLE001  (the board stops; the controller reports it and goes on)
            if not self.stop.is_set():
                if store_gone(e):   # its lease cannot be proven: the controller claims it again later
                    self.lose(f"store {store.keeper.shown_url} unreachable ({store.keeper.error or e}); "
                              "taken again when it answers")
                else:
                    ctl.failures[self.name] = e
                    self.lose(f"stopped: {e}")
        finally:
            pool, self.pool = self.pool, None
            _close(pool)


    def _report(self, p: exp_mod.PlannedRun, total: int, run_id: int | Spooled) -> None:
        """An interval stored (its figures, read back) or spooled."""
        ctl = self.ctl
        if isinstance(run_id, Spooled):
            ctl.reporter.kept(self.name, p, total, "measured, kept in the spool (the store is unreachable)")
            return
        try:
            ctl.reporter.stored(self.name, p, total, ctl.store.get_run(run_id))
        except Exception as e:  # noqa: BLE001
            if not store_gone(e):
                raise
            ctl.reporter.kept(self.name, p, total, f"stored as run {run_id} (its figures are not shown: the store "
                                                   "stopped answering)")

    def _give_up(self, exp_id: int, why: str) -> None:
        """A board down for give_up_after intervals: its monitoring marked incomplete with the reason, its lease
        given back."""
        ctl = self.ctl
        ctl.write(exp_mod.keep_status, ctl.store, exp_id, exp_mod.INCOMPLETE,
                  {"target": self.name, "controller": ctl.name, "state": INCOMPLETE, "reason": why[:500]})
        self.incomplete = why
        self.done_for_us = True
        ctl.reporter.gave_up(self.name, exp_id, why)


def give_back_freed_memory() -> None:
    """Return the memory an interval freed to the system (glibc's malloc_trim): an explained interval's trace
    windows and arrays are freed in its thread's malloc arena, which glibc would otherwise keep, so that a
    controller's RSS would creep up to the sum of every board's largest interval. Elsewhere a no-op."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


_malloc_trim = None


def _missing(stored: set[int], total: int) -> list[range]:
    """The plan indexes not stored, as ranges (few: a monitoring is made in order), not a list of them."""
    out, start = [], 0
    for i in sorted(stored):
        if i > start:
            out.append(range(start, min(i, total)))
        start = max(start, i + 1)
    if start < total:
        out.append(range(start, total))
    return out


@dataclass
class Outcome:
    finished: list[str]   # boards whose monitoring finished
    stored: int           # intervals this controller stored (or spooled)
    incomplete: dict[str, str] = field(default_factory=dict)   # boards given up on, and why


class Controller:
    """Watches every board of `names` whose lease it gets; plan_for(name) is the Plan of a new monitoring."""

    def __init__(self, store: Store, names: list[str], plan_for: Callable[[str], mon.Plan], reporter: Reporter,
                 name: str | None = None, give_up_after: int = GIVE_UP_AFTER):
        if not names:
            raise UsageError("a fleet needs at least one board")
        self.give_up_after = check_give_up_after(give_up_after)
        self.store, self.reporter = store, reporter
        self.name = name or controller_name()
        self.boards = {n: Board(self, n, plan_for(n)) for n in names}
        self.lease_s = lease_seconds(min(b.plan.interval_s for b in self.boards.values()))
        self.write_lock = threading.Lock()  # this controller's writes one at a time (a SQLite store's writer)
        self.claimed_rows: dict[str, dict] = {}
        self.failures: dict[str, BaseException] = {}
        self.quit = threading.Event()

    def run(self) -> Outcome:
        store, leases = self.store, self.store.leases
        names = list(self.boards)
        with self.write_lock:
            leases.join(self.name, socket.gethostname(), os.getpid(), len(names), self.lease_s)
            leases.ensure(names)
        try:
            with sigterm_raises():
                try:
                    while not self.quit.is_set():
                        if self._tick(names):
                            break
                        self.quit.wait(self.lease_s / 4)
                except (KeyboardInterrupt, Terminated):
                    self._stop_all()
                    raise
        finally:
            with held_signals(), self.write_lock:
                try:
                    leases.leave(self.name)
                except Exception:  # noqa: BLE001  (the store is gone: the row runs out by itself)
                    pass
        return Outcome([n for n, b in self.boards.items() if b.done_for_us and b.incomplete is None],
                       sum(b.made for b in self.boards.values()),
                       {n: b.incomplete for n, b in self.boards.items() if b.incomplete is not None})

    def write(self, call, *args, **kw):
        """A write of this controller's, one at a time (a SQLite store has one writer)."""
        with self.write_lock:
            return call(*args, **kw)

    def try_write(self, call, *args, **kw):
        """write(), skipped while the store is unreachable (a board's state: written again with its next change)."""
        try:
            return self.write(call, *args, **kw)
        except Exception as e:  # noqa: BLE001
            if not store_gone(e):
                raise
            self.store.keeper.down(e)
            return None

    def _tick(self, names: list[str]) -> bool:
        """One round: renew, notice finished monitorings, claim a share of the unwatched boards. True when done.
        While the store is unreachable: each board whose lease cannot be proven any more stops."""
        working = [n for n, b in self.boards.items() if b.working]
        try:
            return self._round(names, working)
        except Exception as e:  # noqa: BLE001  (the store unreachable: past its lease, a board stops)
            if not store_gone(e):
                raise
            keeper = self.store.keeper
            since = time.strftime("%H:%M:%S", time.localtime(keeper.down(e)))
            for n in working:
                if time.monotonic() > self.boards[n].held_until:
                    self.boards[n].lose(f"its lease cannot be proven: store {keeper.shown_url} unreachable since "
                                        f"{since}; watched again once it answers and the board is free")
            return False

    def _round(self, names: list[str], working: list[str]) -> bool:
        leases = self.store.leases
        with self.write_lock:
            held = leases.renew(self.name, working, self.lease_s)
        if self.store.keeper.spool.files():
            self.store.keeper.flush()   # the store answers again: what waits in the spool goes first
        for n in working:
            b = self.boards[n]
            if n in held:
                b.held_until = time.monotonic() + self.lease_s * 0.9
            elif b.working and not b.done_for_us:
                b.lose("another controller holds it now")
        now, rows = leases.rows(names)
        by_name = {r["target"]: r for r in rows}
        for n, b in self.boards.items():
            row = by_name.get(n, {})
            if b.working or b.done_for_us:
                continue
            if row.get("experiment_id") is not None:
                if row.get("experiment_status") in exp_mod.UNFINISHED and b.seen is None:
                    b.seen = row["experiment_id"]  # a monitoring under way elsewhere: ours to follow
                elif row.get("experiment_id") == b.seen and row.get("experiment_status") == exp_mod.FINISHED:
                    b.done_for_us = True
        if all(b.done_for_us for b in self.boards.values()):
            return True
        live = max(1, len(set(leases.live_controllers()) | {self.name}))
        share = math.ceil(len(names) / live)
        mine = sum(b.working for b in self.boards.values())
        taken = 0   # boards taken in this round: their first intervals spread over an interval
        for n, b in self.boards.items():
            if mine >= share:
                break
            row = by_name.get(n, {})
            if b.working or b.done_for_us or (row.get("controller") not in (None, self.name)
                                              and (row.get("lease_until") or 0) >= now):
                continue
            with self.write_lock:
                got = leases.claim(n, self.name, self.lease_s)
            if got is not None:
                got["experiment_status"] = row.get("experiment_status")
                if got.get("experiment_id") != row.get("experiment_id"):  # changed between the two reads
                    got["experiment_status"] = (self.store.experiment_row(got["experiment_id"]) or {}).get("status")
                self.claimed_rows[n] = got
                b.start(delay_s=b.plan.interval_s * taken / share)
                taken += 1
                mine += 1
        return False

    def _stop_all(self) -> None:
        """Ctrl-C / SIGTERM: every board's interval stopped (not stored), its monitoring marked interrupted, its
        lease given back for another controller (or a later one) to continue."""
        with held_signals():
            for b in self.boards.values():
                if b.working:
                    b.lose("")
            for b in self.boards.values():
                if b.thread is not None:
                    b.thread.join(30)
            for n, b in self.boards.items():
                if b.seen is not None and not b.done_for_us and b.thread is not None:
                    try:
                        exp_mod.set_status(self.store, b.seen, exp_mod.INTERRUPTED)
                        self.store.leases.release(n, self.name, RELEASED, "its controller was stopped")
                    except Exception:  # noqa: BLE001  (the store is gone: the lease runs out by itself)
                        pass


# --- the lab's status (`rtscope lab`) -------------------------------------------------------------------------

def bound_of(recorded: dict | None) -> dict:
    """A last interval's running bound as `rtscope lab` shows it: µs, or why there is none (None: its controller
    has not recorded one)."""
    from ..analysis.tail_bound import bound_or_reason
    if recorded is None:
        return {"bound_us": None, "bound_reason": "not recorded (yet) by its controller"}
    value, reason = bound_or_reason(recorded["value_ns"], recorded["reason"])
    return {"bound_us": None if value is None else value / 1000, "bound_reason": reason}


def lab_status(store: Store) -> dict:
    """Every board of the lease table: its controller, state, intervals and last interval, and the controllers
    alive. A board whose holder stopped renewing shows `unwatched` (its lease ran out) until another takes it."""
    now, rows = store.leases.rows()
    live = set(store.leases.live_controllers())
    bounds = store.running_bounds([r["last_run_id"] for r in rows if r["last_run_id"] is not None])
    boards = []
    for r in rows:
        held = held_now(r, now)
        state = r["state"] if held else (r["state"] if r["state"] in (FINISHED, INCOMPLETE) else "unwatched")
        reason = r["reason"]
        if r["controller"] is not None and not held:
            reason = f"the lease of {r['controller']} ran out {now - (r['lease_until'] or now):.0f} s ago"
        planned = None
        if r["experiment_id"] is not None:
            exp = store.experiment_row(r["experiment_id"])
            plan = mon.plan_of((exp or {}).get("spec"))
            planned = plan.intervals if plan else len((exp or {}).get("plan") or [])
        last = None
        if r["last_run_id"] is not None:
            found = store.runs(ids=[r["last_run_id"]])
            if found:
                cpus = mon.per_cpu(found[0])
                last = {"run": r["last_run_id"], "finished_at": r["last_interval_at"],
                        "load": found[0]["settings"].get("load", "none"),
                        "max_us": max((c["max_us"] for c in cpus), default=None),
                        "p9999_us": max((c["p9999_us"] for c in cpus), default=None), **bound_of(bounds.get(
                            r["last_run_id"]))}
        boards.append({"board": r["target"], "controller": r["controller"] if held else None, "state": state,
                       "reason": reason, "experiment": r["experiment_id"],
                       "experiment_status": r["experiment_status"], "intervals": r["intervals"],
                       "planned": planned, "last_interval": last,
                       "lease_left_s": round(r["lease_until"] - now, 1) if held else None})
    return {"controllers": sorted(live), "boards": boards}
