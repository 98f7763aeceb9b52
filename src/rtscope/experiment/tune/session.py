"""A tune in the store, and the work on it: claim a planned run, make it, plan the next round when all are in.

    create(store, spec, ...)   records the tune: an experiment (its runs are the trials) and a tunes row
    load(store, tune_id)       the tune again, from the store only (any host, `--resume ID`)
    work(store, tunes, pool)   makes runs until every given tune is finished; one thread per target

Any number of processes may work on one tune at once (store/tunes.py says how they never make a run twice);
the rounds themselves are planned by rounds.py.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, replace
from typing import Protocol

from ...errors import RtscopeError, UsageError
from ...signals import Terminated, held_signals, sigterm_raises
from ...store import DuplicateRun, Store
from ...targets import LOCAL, Pool
from .. import execute as exp_mod
from ..runner import execute as execute_run, execute_interleaved
from ..spec import Spec
from ..spec import parse as parse_spec
from ..spec.model import Budget, Knob, Range
from . import rounds
from .rounds import FINISHED, RACE
from .space import Space

RUNNING, INTERRUPTED, FAILED = "running", "interrupted", "failed"
LEASE_S = 3600.0          # a claim older than this (its process killed with -9) may be taken over
POLL_S = 0.5              # how often a process waiting for others' runs looks again
STORE_RETRY_S = 2.0       # how often an unreachable store is asked again


@dataclass
class Tune:
    id: int
    experiment_id: int
    name: str
    target: str
    seed: int
    goal: str
    budget: Budget
    alpha: float
    width: int
    confirm: int
    space: Space
    started: float
    spec_path: str | None
    timeout_s: float | None = None
    first_length: float = 1.0
    phase: str = RACE
    round: int = 0
    status: str = RUNNING
    result: dict | None = None

    @property
    def finished(self) -> bool:
        return self.phase == FINISHED


class Reporter(Protocol):
    def planned(self, tune: Tune, step: "rounds.Step") -> None: ...
    def run_started(self, tune: Tune, slot: dict) -> None: ...
    def run_stored(self, tune: Tune, slot: dict, run_id: int) -> None: ...


def _knob_json(k: Knob) -> dict:
    r = k.range
    return {"name": k.name, "kind": k.kind, "values": list(k.values), "line": k.line,
            "range": None if r is None else {"low": r.low, "high": r.high, "log": r.log, "step": r.step,
                                             "integer": r.integer}}


def _knob(d: dict) -> Knob:
    r = d["range"]
    return Knob(d["name"], d["kind"], tuple(d["values"]),
                None if r is None else Range(r["low"], r["high"], r["log"], r["step"], r["integer"]), d["line"])


def create(store: Store, spec: Spec, spec_path: str | None, target: str, seed: int, goal: str, budget: Budget,
           space: Space) -> Tune:
    """Record a new tune of `spec` on `target` (an experiment with no fixed plan, and the tunes row)."""
    t = spec.tune
    name = spec.name if target == "local" else f"{spec.name}@{target}"
    experiment = exp_mod.start(store, replace(spec, name=f"{name} (tune)"), [], seed, spec_path,
                               targets=None if target == "local" else [target])
    options = {"goal": goal, "budget": {"runs": budget.runs, "seconds": budget.seconds}, "alpha": t.alpha,
               "width": t.width, "confirm": t.confirm, "baseline": space.baseline,
               "knobs": [_knob_json(k) for k in space.knobs], "dropped": space.dropped,
               "timeout_s": spec.cells[0].timeout_s, "scale": spec.scale, "first_length": t.first_length}
    now = time.time()
    tune_id = store.tunes.create({"experiment_id": experiment.id, "spec_path": spec_path, "target": target,
                                  "seed": seed, "options": options, "phase": RACE, "round": 0, "status": RUNNING,
                                  "created_at": rounds._now(), "started": now})
    return load(store, tune_id)


def load(store: Store, tune_id: int) -> Tune:
    row = store.tunes.get(tune_id)
    if row is None:
        known = [str(r["id"]) for r in store.tunes.find()]
        raise UsageError(f"no tune {tune_id} in store {store.shown_url}; tunes there: {', '.join(known) or 'none'}")
    experiment = exp_mod.get(store, row["experiment_id"])
    o = row["options"]
    spec = parse_spec(experiment.text, experiment.spec.get("source") or "spec", o.get("scale"))
    space = Space.of(spec, row["target"])
    space = Space([_knob(k) for k in o["knobs"]], space.base, dict(o["baseline"]), list(o["dropped"]))
    b = o["budget"]
    return Tune(row["id"], row["experiment_id"], experiment.name, row["target"], row["seed"], o["goal"],
                Budget(b["runs"], b["seconds"]), o["alpha"], o["width"], o["confirm"], space, row["started"],
                row["spec_path"], o.get("timeout_s"), o.get("first_length", 1.0), row["phase"], row["round"],
                row["status"], row["result"])


def refresh(store: Store, tune: Tune) -> Tune:
    row = store.tunes.get(tune.id)
    tune.phase, tune.round, tune.status, tune.result = row["phase"], row["round"], row["status"], row["result"]
    return tune


def unfinished(store: Store, spec_path: str) -> list[int]:
    return [r["id"] for r in store.tunes.find(spec_path=spec_path) if r["phase"] != FINISHED]


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


def _release_dead(store: Store, tune: Tune) -> None:
    """Claims of processes of this host that are gone (killed): their runs are made again, by anyone."""
    host = socket.gethostname()
    for slot in store.tunes.slots(tune.id):
        holder = slot["claimed_by"]
        if slot["run_id"] is not None or not holder or not holder.startswith(host + ":"):
            continue
        pid = int(holder.split(":")[1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            store.tunes.release(tune.id, slot["plan_index"], holder)
        except PermissionError:
            pass


def work_one(store: Store, tune: Tune, pool: Pool, reporter: Reporter | None, worker: str,
             stop: threading.Event | None = None, on: str | None = None) -> Tune:
    """Make the tune's runs and plan its rounds until it is finished (or `stop` is set). on: another target
    of the same kind that makes this process's runs (a second board working on the tune)."""
    target = pool.get(on or tune.target)
    _release_dead(store, tune)
    while not (stop is not None and stop.is_set()):
        try:
            done = _step(store, tune, target, reporter, worker, on)
        except Exception as e:  # noqa: BLE001  (the store unreachable: the run made is spooled; asked again)
            from ...store import unreachable
            if not unreachable(e):
                raise
            store.keeper.spooled(e)
            time.sleep(STORE_RETRY_S)
            continue
        if done:
            return tune
    return tune


def _step(store: Store, tune: Tune, target, reporter: Reporter | None, worker: str, on: str | None) -> bool:
    """One step of work_one: a run made (or its slot found taken), a round planned, or a wait for others' runs.
    True when the tune is finished."""
    if store.keeper.spool.files():
        store.keeper.flush()   # runs spooled while the store was unreachable: their slots done
    refresh(store, tune)
    if tune.finished:
        return True
    slot = None
    try:
        with held_signals():          # a signal is taken only once the claimed slot is known, to give back
            slot = store.tunes.claim(tune.id, worker, time.time(), LEASE_S)
        if slot is not None:
            _make(store, tune, slot, target, reporter, on)
            return False
    except DuplicateRun:
        return False
    except BaseException as e:
        from ...store import unreachable
        if slot is not None and not unreachable(e):
            with held_signals():
                store.tunes.release(tune.id, slot["plan_index"], worker)
        raise
    step = rounds.next_step(store, tune)
    if step is None:                   # others' runs still in progress
        time.sleep(POLL_S)
        return False
    if rounds.commit(store, tune, step) and reporter:
        reporter.planned(tune, step)
    return False


def _planned(slot: dict, tune: Tune, on: str | None) -> exp_mod.PlannedRun:
    """The slot's run, on another target of the same kind when `on` is given."""
    planned = exp_mod.PlannedRun.from_json(slot["request"])
    if on is not None and on != tune.target:
        settings = {k: v for k, v in planned.request.settings.items() if k != "target"}
        if on != LOCAL:
            settings["target"] = on
        planned = replace(planned, request=replace(planned.request, settings=settings))
    return planned


def _make(store: Store, tune: Tune, slot: dict, target, reporter: Reporter | None, on: str | None) -> None:
    """Make and store the run of a claimed slot; an arm of an interleaved run (the confirmation's) is made with
    every other arm this process can claim too (alone when it gets none: another process holds them)."""
    planned = _planned(slot, tune, on)
    arms = [slot, *(_siblings(store, tune, slot) if planned.pair is not None else [])]
    if reporter:
        reporter.run_started(tune, slot)
    try:
        if len(arms) == 1:
            ids = [execute_run(planned.request, store.keeper, timeout=planned.timeout_s, target=target,
                               experiment_id=tune.experiment_id, plan_index=planned.index,
                               cell=planned.cell, repetition=planned.repetition)]
        else:
            runs = [_planned(sl, tune, on) for sl in arms]
            kwargs = [dict(experiment_id=tune.experiment_id, plan_index=p.index, cell=p.cell, repetition=p.repetition)
                      for p in runs]
            ids = execute_interleaved([p.request for p in runs], store.keeper, block=planned.block_samples,
                                      target=target, timeout=planned.timeout_s, store_kwargs=kwargs)
    except BaseException:
        with held_signals():
            for sl in arms[1:]:     # the claimed slot itself is given back by the caller
                store.tunes.release(tune.id, sl["plan_index"], sl["claimed_by"])
        raise
    if reporter:
        for sl, run_id in zip(arms, ids):
            if run_id is not None:
                reporter.run_stored(tune, sl, run_id)


def _siblings(store: Store, tune: Tune, slot: dict) -> list[dict]:
    """The other arms of the slot's interleaved run that this worker could claim (not stored, nobody holds them)."""
    pair = slot["request"]["pair"]
    worker, now = slot["claimed_by"], time.time()
    out = []
    for other in store.tunes.slots(tune.id):
        if other["plan_index"] != slot["plan_index"] and other["request"].get("pair") == pair \
                and other["run_id"] is None:
            got = store.tunes.claim_slot(tune.id, other, worker, now, LEASE_S)
            if got is not None:
                out.append(got)
    return out


def work(store: Store, tunes: list[Tune], pool: Pool, reporter: Reporter | None = None,
         on: str | None = None) -> list[Tune]:
    """Work on every given tune until each is finished: one thread per tune when there are several (a fleet:
    each target tuned on its own). Ctrl-C / SIGTERM: the run in progress is undone and given back, the tunes
    marked interrupted; `--resume` continues without repeating a finished run."""
    worker = worker_name()
    with sigterm_raises():
        try:
            _set_status(store, tunes, RUNNING)
            if len(tunes) == 1:
                work_one(store, tunes[0], pool, reporter, worker, on=on)
            else:
                _fleet(store, tunes, pool, reporter, worker)
        except (KeyboardInterrupt, Terminated):
            _set_status(store, [t for t in tunes if not refresh(store, t).finished], INTERRUPTED)
            raise
        except Exception as e:           # an RtscopeError, or a bug's exception: the traceback stays
            gone = _fail(store, tunes)
            if gone and isinstance(e, RtscopeError):
                raise Discarded(e, gone) from None
            raise
    return [refresh(store, t) for t in tunes]


class Discarded(Exception):
    """The tunes whose start failed before any run was stored: removed from the store with their experiment
    (an empty failed experiment is nothing to resume or look at); `error` says why they failed."""

    def __init__(self, error: RtscopeError, ids: list[int]):
        super().__init__(str(error))
        self.error, self.ids = error, ids


def _fail(store: Store, tunes: list[Tune]) -> list[int]:
    """Mark the unfinished tunes failed, except those that stored no run: removed. Their ids."""
    gone = []
    with held_signals():
        for t in tunes:
            if refresh(store, t).finished:
                continue
            if store.tunes.discard(t.id):
                gone.append(t.id)
            else:
                _set_status(store, [t], FAILED)
    return gone


def _set_status(store: Store, tunes: list[Tune], status: str) -> None:
    with held_signals():
        for t in tunes:
            if t.phase != FINISHED:
                store.tunes.update(t.id, status=status)
                exp_mod.set_status(store, t.experiment_id, status)


def _fleet(store: Store, tunes: list[Tune], pool: Pool, reporter: Reporter | None, worker: str) -> None:
    exp_mod.in_parallel({t.target: (lambda stop, t=t: work_one(store, t, pool, reporter, worker, stop)) for t in tunes},
                        pool)
