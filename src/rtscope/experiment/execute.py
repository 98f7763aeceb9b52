"""Experiments: a spec's cells planned in a seeded random order, executed run by run, resumable.

    plan(spec, seed)              the ordered runs; the same spec and seed give the same order
    start(store, spec, ...)       records the experiment (status `running`) with its seed and plan
    execute(store, experiment)    runs every planned run not stored yet, each stored as it finishes

Each run is stored in one transaction together with its experiment id and
plan index, so an experiment killed at any moment (even `kill -9`) loses at
most the run in progress, and resuming runs exactly the missing plan indexes.
An experiment stopped by Ctrl-C or SIGTERM is marked `interrupted`, one
stopped by a failed run `failed`; both can be resumed.

While the store is unreachable, each finished run (and the experiment's
status at its end) goes to the store's spool (store/spool.py) and the runs go
on; the spool is written to the store, each run once, when it answers again.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Protocol

from ..errors import RtscopeError, UsageError
from ..runtimes import RUNTIMES
from ..runtimes.base import RunRequest
from ..settings import undo
from ..settings.registry import SETTINGS
from ..signals import Terminated, held_signals, sigterm_raises
from ..store import DuplicateRun, Store, to_jsonable, unreachable
from ..store.spool import Spooled
from ..targets import LOCAL, Pool, redact_spec, resolve, tracefs
from .bounds import Bounds, record_attempt
from .design import DUET, INTERLEAVED, MIN_DUET_REPETITIONS, Group, layout
from .outage import GaveUp, Outage
from .runner import execute as execute_run, execute_duet, execute_interleaved
from .spec import Spec

BOOTED_KINDS = ("qemu",)  # targets rtscope boots itself: `rtscope check` does not
# Targets whose processes run on this host's CPUs: with `local` among an experiment's targets, their runs take
# turns with local runs instead of overlapping them (a VM's runs would load the CPUs a local run measures on).
HOSTED_KINDS = ("local", *BOOTED_KINDS)

RUNNING, FINISHED, INTERRUPTED, FAILED = "running", "finished", "interrupted", "failed"
INCOMPLETE = "incomplete"   # a monitoring given up on: its board was down too long (experiment/fleet.py)
UNFINISHED = (RUNNING, INTERRUPTED, FAILED, INCOMPLETE)


@dataclass(frozen=True)
class PlannedRun:
    index: int                  # position in the plan (0-based): the order runs are made in
    cell: str
    repetition: int             # 1-based
    block: int
    request: RunRequest
    timeout_s: float | None = None
    on_unavailable: str = "fail"
    pair: str | None = None             # an arm of an interleaved run or a duet: its key in the plan (design.py)
    block_samples: int | None = None    # its block length
    design: str | None = None           # with pair: interleaved or duet

    def to_json(self) -> dict:
        r = self.request
        return {"index": self.index, "cell": self.cell, "repetition": self.repetition, "block": self.block,
                "workload": r.workload, "variant": r.variant, "runtime": r.runtime, "params": r.params,
                "settings": r.settings, "tags": list(r.tags), "timeout_s": self.timeout_s,
                "on_unavailable": self.on_unavailable,
                **({"pair": self.pair, "block_samples": self.block_samples, "design": self.design}
                   if self.pair else {})}

    @classmethod
    def from_json(cls, d: dict) -> "PlannedRun":
        req = RunRequest(d["workload"], d["variant"], d["runtime"], dict(d["params"]), dict(d["settings"]),
                         tuple(d.get("tags", ())))
        return cls(d["index"], d["cell"], d["repetition"], d.get("block", 0), req, d.get("timeout_s"),
                   d.get("on_unavailable", "fail"), d.get("pair"), d.get("block_samples"),
                   d.get("design", INTERLEAVED) if d.get("pair") else None)


def new_seed() -> int:
    return secrets.randbits(32)


def plan(spec: Spec, seed: int, order: str | None = None, start: int = 0, one_round: bool = False) -> list[PlannedRun]:
    """The runs of a spec in the order they are made (indexes from `start`).

    random (default): rounds; round r holds repetition r of every cell, in a fresh random order, so
      slow drift of the machine (temperature, background load) spreads over all cells alike.
    shuffle: one random permutation of all runs.  sequential: spec order, repetitions back to back.
    With design interleaved, duet or auto (design.py), the arms of one interleaved run (or duet) take the place
    of one cell in that order, with consecutive indexes. one_round: the spec is one round of a sequence
    (sequential.py), whose rounds give a duet's arms their turns over the CPUs.
    """
    order = order or spec.order
    rng = random.Random(seed)
    lay = layout(spec, min_repetitions=1 if one_round else MIN_DUET_REPETITIONS)
    units: list[Group | Any] = [*lay.groups, *lay.alone]
    units.sort(key=lambda u: spec.cells.index(u.cells[0] if isinstance(u, Group) else u))
    reps = {id(u): (u.cells[0] if isinstance(u, Group) else u).repetitions for u in units}
    pairs = []
    if order == "sequential":
        pairs = [(u, r) for u in units for r in range(1, reps[id(u)] + 1)]
    elif order == "shuffle":
        pairs = [(u, r) for u in units for r in range(1, reps[id(u)] + 1)]
        rng.shuffle(pairs)
    elif order == "random":
        for r in range(1, max(reps.values(), default=0) + 1):
            round_ = [(u, r) for u in units if reps[id(u)] >= r]
            rng.shuffle(round_)
            pairs += round_
    else:
        raise UsageError(f"unknown order {order!r}; valid: random, shuffle, sequential")
    out: list[PlannedRun] = []
    for u, r in pairs:
        if isinstance(u, Group):
            pair = f"{start + len(out)}"
            out += [PlannedRun(start + len(out) + i, c.key, r, c.block, c.request, c.timeout_s, c.on_unavailable,
                               pair, u.block, u.design) for i, c in enumerate(u.cells)]
        else:
            out.append(PlannedRun(start + len(out), u.key, r, u.block, u.request, u.timeout_s, u.on_unavailable))
    return out


# --- the experiments table -----------------------------------------------------------------------------

@dataclass
class Experiment:
    id: int
    name: str
    spec_path: str | None
    seed: int
    status: str
    created_at: str
    finished_at: str | None
    spec: dict[str, Any]
    plan: list[PlannedRun] = field(default_factory=list)

    @property
    def scale(self) -> str | None:
        return self.spec.get("scale")

    @property
    def text(self) -> str:
        return self.spec.get("text", "")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def spec_identity(path: str | Path) -> str:
    """How an experiment remembers its spec file: the resolved path."""
    return str(Path(path).resolve())


def start(store: Store, spec: Spec, planned: list[PlannedRun], seed: int, spec_path: str | None,
          targets: list[str] | None = None, record: dict | None = None) -> Experiment:
    """Record a new experiment (status running) with its seed, whole plan and the --target choice (and what
    the caller records beside them: a monitoring's Plan)."""
    text, raw = redact_spec(spec.text, spec.raw)  # a node's cookie is never stored
    doc = {"text": text, "scale": spec.scale, "order": spec.order, "design": spec.design, "source": spec.source,
           "parsed": to_jsonable(raw), "targets": targets or None, "baseline": spec.baseline or None,
           **(record or {})}
    row = {"name": spec.name, "spec": doc, "spec_path": spec_path, "seed": seed,
           "plan": [p.to_json() for p in planned], "status": RUNNING, "created_at": _now()}
    return get(store, store.add_experiment(row))


def _from_row(r) -> Experiment:
    return Experiment(r["id"], r["name"], r["spec_path"], r["seed"], r["status"], r["created_at"],
                      r["finished_at"], r["spec"] or {}, [PlannedRun.from_json(p) for p in r["plan"] or []])


def get(store: Store, exp_id: int) -> Experiment:
    row = store.experiment_row(exp_id)
    if row is None:
        raise UsageError(f"no experiment {exp_id} in store {store.url}")
    return _from_row(row)


def latest_unfinished(store: Store, spec_path: str) -> Experiment | None:
    row = store.latest_experiment_row(spec_path, UNFINISHED)
    return _from_row(row) if row else None


def done_indexes(store: Store, exp_id: int) -> set[int]:
    return store.stored_plan_indexes(exp_id)


def stored_meanwhile(store: Store, exp_id: int, index: int) -> bool:
    """Whether another process stored this plan index meanwhile (False when the store cannot be asked: its
    unique plan index then refuses a second copy)."""
    from ..store import unreachable
    try:
        return index in done_indexes(store, exp_id)
    except Exception as e:  # noqa: BLE001
        if unreachable(e):
            return False
        raise


def set_status(store: Store, exp_id: int, status: str) -> None:
    with held_signals():
        store.update_experiment(exp_id, status=status, finished_at=_now() if status == FINISHED else None)


def keep_status(store: Store, exp_id: int, status: str, board: dict | None = None) -> bool:
    """set_status, spooled while the store is unreachable (True: written now). board: a fleet board's lease
    given back with it (target, controller, state, reason)."""
    with held_signals():
        return store.keeper.set_status(exp_id, status, _now() if status == FINISHED else None, board)


# --- running -------------------------------------------------------------------------------------------

class Reporter(Protocol):
    def started(self, experiment: Experiment, total: int, done: int) -> None: ...
    def run_started(self, planned: PlannedRun) -> None: ...
    def run_stored(self, planned: PlannedRun, run_id: int) -> None: ...
    def run_skipped(self, planned: PlannedRun, reason: str) -> None: ...
    def run_spooled(self, planned: PlannedRun, spooled: Spooled) -> None: ...


def target_of(req: RunRequest) -> str:
    return req.settings.get("target", LOCAL)


class Availability:
    """Whether a run can be made on its target: its runtime and every system setting (answers cached)."""

    def __init__(self, pool: Pool | None = None, boot: bool = True):
        self._cache: dict[tuple, str | None] = {}
        self.pool = pool or Pool()
        self.boot = boot  # False: targets that must be booted (VMs) are not asked (`rtscope check`)

    def _ask(self, key: tuple, question) -> str | None:
        if key not in self._cache:
            self._cache[key] = question()
        return self._cache[key]

    def reason(self, req: RunRequest) -> str | None:
        if req.runtime not in RUNTIMES:
            return f"runtime {req.runtime} is not known to this rtscope"
        name = target_of(req)
        if not self.boot and resolve(name).kind in BOOTED_KINDS:
            return None
        target = self.pool.get(name)  # an unreachable target is an error, not a reason to skip
        if target.cannot_run(req.runtime):
            return target.cannot_run(req.runtime)
        missing = self._ask(("runtime", name, req.runtime), lambda: RUNTIMES[req.runtime].unavailable(target))
        if missing:
            return f"runtime {req.runtime} is not available: {missing}"
        try:
            RUNTIMES[req.runtime].prepare(req)  # e.g. a helper binary of the runtime that is not built
        except UsageError:
            raise
        except RtscopeError as e:
            return f"runtime {req.runtime}: {e}"
        for setting_name, value in sorted(req.settings.items()):
            setting = SETTINGS.get(setting_name)
            if setting is None:
                return f"setting {setting_name} is not known to this rtscope"
            check = setting.unavailable  # optional: system settings that depend on the machine
            if check is not None:
                why = self._ask(("setting", name, setting_name, repr(value)), lambda: check(value, target))
                if why:
                    where = "" if target.is_local else f" on target {name}"
                    return f"setting {setting_name}{where}: {why}"  # the reasons name the value when it matters
        return None


def stale_traces(planned: list[PlannedRun], availability: Availability) -> list[str]:
    """The tracefs instances a killed rtscope left on the targets of the runs with setting explain."""
    lines = []
    for name in sorted({target_of(p.request) for p in planned if p.request.settings.get("explain")}):
        if not availability.boot and resolve(name).kind in BOOTED_KINDS:
            continue
        target = availability.pool.get(name)
        if tracefs.missing(target):
            continue
        for instance, who in tracefs.stale(target):
            whose = (f"rtscope pid {who.pid} on {who.host}, no longer running" if who and who.alive is False
                     else f"made on host {who.host}: cannot tell whether its rtscope runs" if who else "unknown owner")
            lines.append(f"target {name}: tracefs instance {instance} ({whose}); the next run with explain "
                         "on this host removes one whose rtscope is gone")
    return lines


def expect_boots(pool: Pool, planned: list[PlannedRun]) -> None:
    """Tell the pool the settings of each target's first run before it opens them (a VM boots as that run
    needs: setting kernel_cmdline)."""
    for p in planned:
        pool.expect(target_of(p.request), p.request.settings)


def stale_changes(planned: list[PlannedRun], availability: Availability) -> list[str]:
    """What a killed rtscope left changed on the runs' targets (undo journals whose rtscope is gone)."""
    lines = []
    for name in sorted({target_of(p.request) for p in planned}):
        if not availability.boot and resolve(name).kind in BOOTED_KINDS:
            continue
        target = availability.pool.get(name)
        if target.runtimes is not None:
            continue  # no shell there (a BEAM node): no setting writes its files
        for journal, who, entries in undo.stale(target):
            whose = (f"rtscope pid {who.pid} on {who.host}, no longer running" if who and who.alive is False
                     else f"made on host {who.host}: cannot tell whether its rtscope runs" if who else "unknown owner")
            values = ", ".join(f"{path} (was {old})" for path, old in entries)
            lines.append(f"target {name}: {values} left changed ({journal}, {whose}); the next run on this "
                         "target from this host writes them back")
    return lines


def unavailable_runs(planned: list[PlannedRun], availability: Availability | None = None) -> list[tuple[PlannedRun, str]]:
    availability = availability or Availability()
    expect_boots(availability.pool, planned)
    return [(p, why) for p in planned if (why := availability.reason(p.request))]


@dataclass
class Outcome:
    experiment: Experiment
    stored: list[tuple[PlannedRun, int]] = field(default_factory=list)
    skipped: list[tuple[PlannedRun, str]] = field(default_factory=list)
    spooled: list[PlannedRun] = field(default_factory=list)   # kept in the spool: the store was unreachable
    already: int = 0            # runs stored before this invocation (resume)
    incomplete: str | None = None   # a monitoring given up on: why (its target down too long)
    bounds: Bounds = field(default_factory=Bounds)   # the runs' deadlines, how long a lost target is tried again

    @property
    def status(self) -> str:
        return self.experiment.status


def execute(store: Store, exp: Experiment, reporter: Reporter | None = None, pool: Pool | None = None,
            outage: Outage | None = None, bounds: Bounds | None = None) -> Outcome:
    """Make every planned run that is not stored yet, in plan order per target; mark the experiment's status.

    Runs on one target are made one at a time (they would disturb each other); different targets work in
    parallel, one thread each. A target that fails (gone mid-experiment, a run that failed) stops its own
    runs; the others finish, and the experiment is then marked failed and resumable. With `outage` (a
    monitoring of one target), a target that fails once it has answered is asked again instead, and given up on
    after the outage's intervals: the experiment is then marked incomplete (Outcome.incomplete says why).
    `bounds` (experiment/bounds.py): a run past its deadline is stopped and recorded as failed, the target's next
    run goes on (the experiment ends failed); a run whose target was lost is made once more once it is back."""
    done = done_indexes(store, exp.id)
    todo = [p for p in exp.plan if p.index not in done]
    outcome = Outcome(exp, already=len(exp.plan) - len(todo), bounds=bounds or Bounds())
    if done and any(p.timeout_s is None for p in todo):
        outcome.bounds.learn(store.runs(experiment_id=exp.id))  # resumed: the deadlines from the runs made
    if outage is not None:
        outcome.bounds.reconnect_for = 0  # a monitoring's target is asked again by its outage
    by_target: dict[str, list[PlannedRun]] = {}
    for p in todo:
        by_target.setdefault(target_of(p.request), []).append(p)
    own_pool = pool is None
    pool = pool or Pool()
    expect_boots(pool, todo)
    availability = Availability(pool)
    if reporter:
        reporter.started(exp, len(exp.plan), outcome.already)
        if len(by_target) > 1 and hasattr(reporter, "fleet"):
            reporter.fleet({name: len(runs_) for name, runs_ in by_target.items()})
    status = FAILED
    try:
        with sigterm_raises():
            try:
                if exp.status != RUNNING:
                    set_status(store, exp.id, RUNNING)
                if len(by_target) <= 1:
                    for name, runs_ in by_target.items():
                        _execute_on(store, exp, name, runs_, pool, availability, outcome, reporter, None, None,
                                    outage)
                else:
                    _execute_fleet(store, exp, by_target, pool, availability, outcome, reporter)
                if outcome.bounds.failed:
                    from ..words import counted
                    raise RtscopeError(f"{counted(len(outcome.bounds.failed), 'run')} failed, the others are "
                                       "stored:\n  " + "\n  ".join(why for _, why in outcome.bounds.failed))
                status = FINISHED
            except GaveUp as e:
                status, outcome.incomplete = INCOMPLETE, str(e)
            except (KeyboardInterrupt, Terminated):
                status = INTERRUPTED
                raise
            finally:
                keep_status(store, exp.id, status)
                exp.status = status
    finally:
        if own_pool:
            pool.close()
    return outcome


def _execute_on(store: Store, exp: Experiment, name: str, planned: list[PlannedRun], pool: Pool,
                availability: Availability, outcome: Outcome, reporter: Reporter | None,
                stop: threading.Event | None, lock: threading.Lock | None, outage: Outage | None = None,
                turn: threading.Lock | None = None) -> None:
    """The runs of one target, in plan order (with `outage`: each asked again while the target is down; with
    `turn`: each run holds it, so that targets sharing this host's CPUs take turns)."""
    pool.get(name)   # connect (or fail) before the first run
    for unit in _units(planned):
        if stop is not None and stop.is_set():
            return
        if outage is None:
            with turn or nullcontext():
                _execute_unit(store, exp, name, unit, pool, availability, outcome, reporter, lock)
            continue
        while True:
            try:
                outcome.bounds.gap = outage.gap_note()
                _execute_unit(store, exp, name, unit, pool, availability, outcome, reporter, lock)
            except (UsageError, DuplicateRun):
                raise
            except Exception as e:  # noqa: BLE001  (the target failed: down, asked again; the store's: raised)
                if unreachable(e):
                    raise
                if outage.since is None and outage.only_the_interval(e):  # a failed interval; the next goes on
                    p = unit[0]   # a monitoring's runs are made one by one
                    outcome.bounds.fail(p, f"interval {p.index + 1} failed (target {name} answers): {e}", reporter,
                                        lambda why: record_attempt(store, exp, p, 1, "failed", why, lock))
                    break
                reason = outage.failed(e, pool)
                if reason is not None and reporter and hasattr(reporter, "target_down"):
                    reporter.target_down(name, reason, outage)
                why = outage.given_up()
                if why is not None:
                    raise GaveUp(why) from None
                time.sleep(outage.retry_s)
                continue
            if outage.answered() and reporter and hasattr(reporter, "target_up"):
                reporter.target_up(name)
            break


def _units(planned: list[PlannedRun]) -> list[list[PlannedRun]]:
    """The planned runs as they are made: a run alone, or the arms of one interleaved run or duet (consecutive,
    one pair)."""
    out: list[list[PlannedRun]] = []
    for p in planned:
        if p.pair is not None and out and out[-1][0].pair == p.pair:
            out[-1].append(p)
        else:
            out.append([p])
    return out


def _execute_unit(store: Store, exp: Experiment, name: str, unit: list[PlannedRun], pool: Pool,
                  availability: Availability, outcome: Outcome, reporter: Reporter | None,
                  lock: threading.Lock | None) -> None:
    if len(unit) == 1:   # a run alone (or the one arm of an interleaved run or duet not stored yet: it runs alone)
        _execute_one(store, exp, name, unit[0], pool, availability, outcome, reporter, lock)
        return
    arms = []
    for p in unit:
        why = availability.reason(p.request)
        if why:
            _unavailable(p, why, outcome, reporter)
        elif not stored_meanwhile(store, exp.id, p.index):
            arms.append(p)
    if len(arms) < 2:
        for p in arms:
            _execute_one(store, exp, name, p, pool, availability, outcome, reporter, lock)
        return
    if reporter:
        reporter.run_started(arms[0])
    target, first = pool.get(name), arms[0]
    kwargs = [dict(experiment_id=exp.id, plan_index=p.index, cell=p.cell, repetition=p.repetition) for p in arms]
    if first.design == DUET:   # the arms take turns over the CPUs, one step a repetition
        measure = lambda timeout, notes: execute_duet(   # noqa: E731
            [p.request for p in arms], store.keeper, turn=first.repetition - 1, timeout=timeout, target=target,
            store_lock=lock, notes=notes, store_kwargs=kwargs)
    else:
        measure = lambda timeout, notes: execute_interleaved(   # noqa: E731
            [p.request for p in arms], store.keeper, block=first.block_samples, timeout=timeout, target=target,
            store_lock=lock, notes=notes, store_kwargs=kwargs)
    try:  # within its deadline (an arm's, times the arms), made again once if its target was lost (bounds.py)
        results = outcome.bounds.make(
            first, target, measure,
            lambda attempt, result, why: record_attempt(store, exp, first, attempt, result, why, lock),
            lambda: all(stored_meanwhile(store, exp.id, p.index) for p in arms), reporter)
    except DuplicateRun:
        return
    for p, run_id in zip(arms, results or [None] * len(arms)):
        _stored(p, run_id, outcome, reporter)


def _unavailable(p: PlannedRun, why: str, outcome: Outcome, reporter: Reporter | None) -> None:
    if p.on_unavailable == "fail":
        raise RtscopeError(f"run {p.index + 1} ({p.cell}) cannot run here: {why} "
                           "(the spec says on_unavailable = \"fail\")")
    outcome.skipped.append((p, why))
    if reporter:
        reporter.run_skipped(p, why)


def _stored(p: PlannedRun, run_id: Any, outcome: Outcome, reporter: Reporter | None) -> None:
    if run_id is None:
        return   # failed at its deadline (recorded), or stored meanwhile by another `--resume`
    if isinstance(run_id, Spooled):
        outcome.spooled.append(p)
        if reporter and hasattr(reporter, "run_spooled"):
            reporter.run_spooled(p, run_id)
        return
    outcome.stored.append((p, run_id))
    if reporter:
        reporter.run_stored(p, run_id)


def _execute_one(store: Store, exp: Experiment, name: str, p: PlannedRun, pool: Pool, availability: Availability,
                 outcome: Outcome, reporter: Reporter | None, lock: threading.Lock | None) -> None:
    """One planned run on its target: made and stored (or spooled), skipped when it cannot run there."""
    target = pool.get(name)
    why = availability.reason(p.request)
    if why:
        _unavailable(p, why, outcome, reporter)
        return
    if stored_meanwhile(store, exp.id, p.index):
        return  # stored meanwhile by another `--resume` of the same experiment
    if reporter:
        reporter.run_started(p)
    try:  # within its deadline, made again once if its target was lost (experiment/bounds.py)
        run_id = outcome.bounds.make(
            p, target, lambda timeout, notes: execute_run(
                p.request, store.keeper, timeout=timeout, target=target, store_lock=lock, experiment_id=exp.id,
                plan_index=p.index, cell=p.cell, repetition=p.repetition, notes=notes),
            lambda attempt, result, why: record_attempt(store, exp, p, attempt, result, why, lock),
            lambda: stored_meanwhile(store, exp.id, p.index), reporter)
    except DuplicateRun:
        return  # another `--resume` of the same experiment stored it while this one measured
    _stored(p, run_id, outcome, reporter)


def _execute_fleet(store: Store, exp: Experiment, by_target: dict[str, list[PlannedRun]], pool: Pool,
                   availability: Availability, outcome: Outcome, reporter: Reporter | None) -> None:
    """One thread per target; the main thread waits, and on Ctrl-C/SIGTERM stops every target's run."""
    lock = threading.Lock()
    hosted = {name for name in by_target if resolve(name).kind in HOSTED_KINDS}
    turn = threading.Lock() if len(hosted) > 1 and any(resolve(n).kind == "local" for n in hosted) else None
    jobs = {name: (lambda stop, name=name, planned=planned: _execute_on(
                store, exp, name, planned, pool, availability, outcome, reporter, stop, lock,
                turn=turn if name in hosted else None))
            for name, planned in by_target.items()}
    in_parallel(jobs, pool, reporter.target_failed if reporter and hasattr(reporter, "target_failed") else None)


def in_parallel(jobs: dict[str, Callable[[threading.Event], None]], pool: Pool,
                on_failure: Callable[[str, str], None] | None = None) -> None:
    """Each target's job (called with a stop event) in a thread of its own; the main thread waits, and on
    Ctrl-C/SIGTERM sets the event and interrupts every target's run. A failed target stops only its own job;
    the failures are raised together at the end."""
    for name in jobs:
        pool.get(name)  # connect (or fail) before anything runs anywhere
    stop = threading.Event()
    failures: dict[str, BaseException] = {}

    def work(name: str, job: Callable[[threading.Event], None]) -> None:
        try:
            job(stop)
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            failures[name] = e
            if on_failure is not None and not stop.is_set():
                on_failure(name, str(e))

    threads = [threading.Thread(target=work, args=item, name=f"rtscope-target-{item[0]}", daemon=True)
               for item in jobs.items()]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(0.1)
    except BaseException:
        stop.set()
        with held_signals():
            pool.interrupt()
            for t in threads:
                t.join()
        raise
    if failures:
        lines = [f"target {name}: {e}" for name, e in sorted(failures.items())]
        raise RtscopeError(f"{len(failures)} of {len(jobs)} targets failed (the others finished):\n  "
                           + "\n  ".join(lines))
