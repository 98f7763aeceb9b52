"""Experiments: a spec's cells planned in a seeded random order, executed run by run, resumable.

    plan(spec, seed)              the ordered runs; the same spec and seed give the same order
    start(store, spec, ...)       records the experiment (status `running`) with its seed and plan
    execute(store, experiment)    runs every planned run not stored yet, each stored as it finishes

Each run is stored in one transaction together with its experiment id and
plan index, so an experiment killed at any moment (even `kill -9`) loses at
most the run in progress, and resuming runs exactly the missing plan indexes.
An experiment stopped by Ctrl-C or SIGTERM is marked `interrupted`, one
stopped by a failed run `failed`; both can be resumed.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa

from .errors import RtscopeError, UsageError
from .runner import execute as execute_run
from .signals import Terminated, held_signals, sigterm_raises
from .runtimes import RUNTIMES
from .runtimes.base import RunRequest
from .settings import SETTINGS
from .spec import Spec
from .store import Store, experiments, runs, to_jsonable

RUNNING, FINISHED, INTERRUPTED, FAILED = "running", "finished", "interrupted", "failed"
UNFINISHED = (RUNNING, INTERRUPTED, FAILED)


@dataclass(frozen=True)
class PlannedRun:
    index: int                  # position in the plan (0-based): the order runs are made in
    cell: str
    repetition: int             # 1-based
    block: int
    request: RunRequest
    timeout_s: float | None = None
    on_unavailable: str = "fail"

    def to_json(self) -> dict:
        r = self.request
        return {"index": self.index, "cell": self.cell, "repetition": self.repetition, "block": self.block,
                "workload": r.workload, "variant": r.variant, "runtime": r.runtime, "params": r.params,
                "settings": r.settings, "tags": list(r.tags), "timeout_s": self.timeout_s,
                "on_unavailable": self.on_unavailable}

    @classmethod
    def from_json(cls, d: dict) -> "PlannedRun":
        req = RunRequest(d["workload"], d["variant"], d["runtime"], dict(d["params"]), dict(d["settings"]),
                         tuple(d.get("tags", ())))
        return cls(d["index"], d["cell"], d["repetition"], d.get("block", 0), req, d.get("timeout_s"),
                   d.get("on_unavailable", "fail"))


def new_seed() -> int:
    return secrets.randbits(32)


def plan(spec: Spec, seed: int, order: str | None = None) -> list[PlannedRun]:
    """The runs of a spec in the order they are made.

    random (default): rounds; round r holds repetition r of every cell, in a fresh random order, so
      slow drift of the machine (temperature, background load) spreads over all cells alike.
    shuffle: one random permutation of all runs.  sequential: spec order, repetitions back to back.
    """
    order = order or spec.order
    rng = random.Random(seed)
    pairs = []
    if order == "sequential":
        pairs = [(c, r) for c in spec.cells for r in range(1, c.repetitions + 1)]
    elif order == "shuffle":
        pairs = [(c, r) for c in spec.cells for r in range(1, c.repetitions + 1)]
        rng.shuffle(pairs)
    elif order == "random":
        for r in range(1, max((c.repetitions for c in spec.cells), default=0) + 1):
            round_ = [(c, r) for c in spec.cells if c.repetitions >= r]
            rng.shuffle(round_)
            pairs += round_
    else:
        raise UsageError(f"unknown order {order!r}; valid: random, shuffle, sequential")
    return [PlannedRun(i, c.key, r, c.block, c.request, c.timeout_s, c.on_unavailable)
            for i, (c, r) in enumerate(pairs)]


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


def start(store: Store, spec: Spec, planned: list[PlannedRun], seed: int, spec_path: str | None) -> Experiment:
    """Record a new experiment (status running) with its seed and whole plan."""
    doc = {"text": spec.text, "scale": spec.scale, "order": spec.order, "source": spec.source,
           "parsed": to_jsonable(spec.raw)}
    row = {"name": spec.name, "spec": doc, "spec_path": spec_path, "seed": seed,
           "plan": [p.to_json() for p in planned], "status": RUNNING, "created_at": _now()}
    with store.transaction() as c:
        exp_id = c.execute(experiments.insert().values(**row)).inserted_primary_key[0]
    return get(store, exp_id)


def _from_row(r) -> Experiment:
    return Experiment(r["id"], r["name"], r["spec_path"], r["seed"], r["status"], r["created_at"],
                      r["finished_at"], r["spec"] or {}, [PlannedRun.from_json(p) for p in r["plan"] or []])


def get(store: Store, exp_id: int) -> Experiment:
    with store.engine.connect() as c:
        row = c.execute(sa.select(experiments).where(experiments.c.id == exp_id)).mappings().first()
    if row is None:
        raise UsageError(f"no experiment {exp_id} in store {store.url}")
    return _from_row(row)


def latest_unfinished(store: Store, spec_path: str) -> Experiment | None:
    q = (sa.select(experiments).where(experiments.c.spec_path == spec_path, experiments.c.status.in_(UNFINISHED))
         .order_by(experiments.c.id.desc()).limit(1))
    with store.engine.connect() as c:
        row = c.execute(q).mappings().first()
    return _from_row(row) if row else None


def done_indexes(store: Store, exp_id: int) -> set[int]:
    q = sa.select(runs.c.plan_index).where(runs.c.experiment_id == exp_id)
    with store.engine.connect() as c:
        return {i for (i,) in c.execute(q) if i is not None}


def set_status(store: Store, exp_id: int, status: str) -> None:
    values = {"status": status, "finished_at": _now() if status == FINISHED else None}
    with held_signals(), store.transaction() as c:
        c.execute(experiments.update().where(experiments.c.id == exp_id).values(**values))


# --- running -------------------------------------------------------------------------------------------

class Reporter(Protocol):
    def started(self, experiment: Experiment, total: int, done: int) -> None: ...
    def run_started(self, planned: PlannedRun) -> None: ...
    def run_stored(self, planned: PlannedRun, run_id: int) -> None: ...
    def run_skipped(self, planned: PlannedRun, reason: str) -> None: ...


class Availability:
    """Whether this machine can make a run: its runtime and every system setting (answers cached)."""

    def __init__(self):
        self._cache: dict[tuple, str | None] = {}

    def _ask(self, key: tuple, question) -> str | None:
        if key not in self._cache:
            self._cache[key] = question()
        return self._cache[key]

    def reason(self, req: RunRequest) -> str | None:
        if req.runtime not in RUNTIMES:
            return f"runtime {req.runtime} is not known to this rtscope"
        missing = self._ask(("runtime", req.runtime), RUNTIMES[req.runtime].unavailable)
        if missing:
            return f"runtime {req.runtime} is not available: {missing}"
        try:
            RUNTIMES[req.runtime].prepare(req)  # e.g. a helper binary of the runtime that is not built
        except UsageError:
            raise
        except RtscopeError as e:
            return f"runtime {req.runtime}: {e}"
        for name, value in sorted(req.settings.items()):
            setting = SETTINGS.get(name)
            if setting is None:
                return f"setting {name} is not known to this rtscope"
            check = setting.unavailable  # optional: system settings that depend on the machine
            if check is not None:
                why = self._ask(("setting", name, repr(value)), lambda: check(value))
                if why:
                    return f"setting {name}: {why}"  # the reasons name the value when it matters
        return None


def unavailable_runs(planned: list[PlannedRun], availability: Availability | None = None) -> list[tuple[PlannedRun, str]]:
    availability = availability or Availability()
    return [(p, why) for p in planned if (why := availability.reason(p.request))]


@dataclass
class Outcome:
    experiment: Experiment
    stored: list[tuple[PlannedRun, int]] = field(default_factory=list)
    skipped: list[tuple[PlannedRun, str]] = field(default_factory=list)
    already: int = 0            # runs stored before this invocation (resume)

    @property
    def status(self) -> str:
        return self.experiment.status


def execute(store: Store, exp: Experiment, reporter: Reporter | None = None) -> Outcome:
    """Make every planned run that is not stored yet, in plan order; mark the experiment's status."""
    done = done_indexes(store, exp.id)
    todo = [p for p in exp.plan if p.index not in done]
    outcome = Outcome(exp, already=len(exp.plan) - len(todo))
    availability = Availability()
    if reporter:
        reporter.started(exp, len(exp.plan), outcome.already)
    status = FAILED
    with sigterm_raises():
        try:
            if exp.status != RUNNING:
                set_status(store, exp.id, RUNNING)
            for p in todo:
                why = availability.reason(p.request)
                if why:
                    if p.on_unavailable == "fail":
                        raise RtscopeError(f"run {p.index + 1} ({p.cell}) cannot run here: {why} "
                                           "(the spec says on_unavailable = \"fail\")")
                    outcome.skipped.append((p, why))
                    if reporter:
                        reporter.run_skipped(p, why)
                    continue
                if p.index in done_indexes(store, exp.id):
                    continue  # stored meanwhile by another `--resume` of the same experiment
                if reporter:
                    reporter.run_started(p)
                run_id = execute_run(p.request, store, timeout=p.timeout_s, experiment_id=exp.id,
                                     plan_index=p.index, cell=p.cell, repetition=p.repetition)
                outcome.stored.append((p, run_id))
                if reporter:
                    reporter.run_stored(p, run_id)
            status = FINISHED
        except (KeyboardInterrupt, Terminated):
            status = INTERRUPTED
            raise
        finally:
            set_status(store, exp.id, status)
            exp.status = status
    return outcome
