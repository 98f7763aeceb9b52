"""Planning a tune's next round from what the store holds: a race round, the confirmation, or the verdict.

Every step is a function of the stored runs, the candidates and the seed, so whichever process plans it
plans the same; store.tunes.advance lets only the first one commit it.

Race rounds: the baseline and up to `width` proposed candidates race; after each round the candidates
significantly worse than the incumbent are dropped (race.py) and new proposals (propose.py) take the free
places, as long as the budget leaves room for the round and the confirmation. The race ends when the
budget would not cover another round, when the space has no new configuration and one candidate is left, or
when the incumbent is significantly better than every other survivor once 2 × width candidates have raced.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from ...analysis.compare import load_cells
from ...errors import UsageError
from ...store import Store
from .. import design, execute as exp_mod
from . import confirm, propose, race, result
from ..spec.tune import LENGTH_PARAMS
from .race import Standing

RACE, CONFIRM, FINISHED = "race", "confirm", "finished"
RACE_TAG, CONFIRM_TAG = "tune-race", "tune-confirm"


@dataclass
class Step:
    from_round: int
    phase: str                                   # the phase after this step
    new_candidates: list[dict] = field(default_factory=list)
    drops: list[tuple[int, int, str]] = field(default_factory=list)
    new_slots: list[dict] = field(default_factory=list)
    result: dict | None = None
    why: str = ""                                # why the race ended (confirmation steps)

    @property
    def finished(self) -> bool:
        return self.phase == FINISHED


def standings(store: Store, tune, slots: list[dict], phase: str = RACE) -> list[Standing]:
    """Every candidate with its runs of one phase (race by default) pooled, and its goal value."""
    rows = store.tunes.candidates(tune.id)
    runs = {r.id: r for r in store.runs(experiment_id=tune.experiment_id)}
    out = []
    for c in rows:
        s = Standing(c["number"], dict(c["knobs"]), c["origin"], c["cell"], c["round"], c["dropped_round"],
                     c["reason"])
        s.run_ids = [sl["run_id"] for sl in slots if sl["candidate"] == s.number and sl["phase"] == phase
                     and sl["run_id"] is not None]
        if s.run_ids:
            cells = load_cells(store, [runs[i] for i in s.run_ids])   # one per run length
            s.cell = cells[0]
            s.per_run = {run_id: st for c in cells for run_id, st in c.per_run.items()}
            s.value = race.value_of(s, tune.goal)
        out.append(s)
    return out


def next_step(store: Store, tune) -> Step | None:
    """The next step, or None while runs of the current round are still to be made."""
    slots = store.tunes.slots(tune.id)
    if any(s["run_id"] is None for s in slots):
        return None
    if tune.phase == CONFIRM:
        return _verdict(store, tune, slots)
    return _race_round(store, tune, slots)


def commit(store: Store, tune, step: Step) -> bool:
    done = store.tunes.advance(tune.id, step.from_round, phase=step.phase, new_candidates=step.new_candidates,
                               drops=step.drops, new_slots=step.new_slots,
                               status="finished" if step.finished else None, result=step.result,
                               finished_at=_now() if step.finished else None)
    if done and step.finished:
        exp_mod.set_status(store, tune.experiment_id, exp_mod.FINISHED)
    return done


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _room(tune, slots: list[dict]) -> float:
    """Race runs the budget still allows, the confirmation's runs kept aside."""
    reserve = 3 * tune.confirm
    if tune.budget.runs is not None:
        return tune.budget.runs - len(slots) - reserve
    if not slots:
        return math.inf                  # no measure of a run's length yet: the first round always runs
    elapsed = time.time() - tune.started
    per_run = elapsed / len(slots)
    return math.floor((tune.budget.seconds - elapsed) / per_run) - reserve


def _slot(tune, index: int, s_number: int, key: str, knobs: dict, phase: str, round_: int, repetition: int) -> dict:
    req = tune.space.request(knobs)
    params = dict(req.params)
    length = LENGTH_PARAMS.get(req.workload)
    if phase == RACE and tune.first_length < 1 and isinstance(params.get(length), int):
        # short runs first: the first round at first_length of the spec's length, doubling every round
        share = min(1.0, tune.first_length * 2 ** (round_ - 1))
        params[length] = max(1, round(params[length] * share))
    req = type(req)(req.workload, req.variant, req.runtime, params, req.settings,
                    tuple(sorted({*req.tags, RACE_TAG if phase == RACE else CONFIRM_TAG})))
    planned = exp_mod.PlannedRun(index, key, repetition, 0, req, tune.timeout_s, "fail")
    return {"plan_index": index, "candidate": s_number, "phase": phase, "round": round_, "repetition": repetition,
            "request": planned.to_json()}


def _race_round(store: Store, tune, slots: list[dict]) -> Step:
    r = tune.round
    step = Step(r, RACE)
    field_ = standings(store, tune, slots)
    if r > 0:
        for s, why in race.drops(field_, tune.goal, tune.alpha):
            s.dropped_round, s.reason = r, why
            step.drops.append((s.number, r, why))
    if r == 0:
        base = Standing(0, dict(tune.space.baseline), "baseline", tune.space.key(tune.space.baseline), 1)
        field_.append(base)
        step.new_candidates.append(_candidate_row(base))
    alive = [s for s in field_ if s.alive]
    proposed_alive = [s for s in alive if s.origin != "baseline"]
    room = _room(tune, slots)
    want = int(min(tune.width - len(proposed_alive), room - len(alive)))
    history = [(s.knobs, s.value) for s in field_]
    new = propose.propose(tune.space, history, want, tune.seed * 100_003 + r, startup=tune.width) if want > 0 else []
    ended = ""
    if r > 0 and len(alive) == 1 and step.drops and len(field_) >= 2 * tune.width:
        ended = "the incumbent is significantly better than every other survivor"
    elif len(alive) + len(new) > room:
        ended = "the budget leaves room only for the confirmation"
    elif len(alive) + len(new) < 2:
        ended = "the space holds no other configuration to race"
    if ended:
        if r == 0:   # the checker's minimum budget leaves room; a space of the baseline alone does not
            raise UsageError(f"nothing to race on target {tune.target}: {ended} (the space, after what this "
                             "target cannot apply, holds the baseline only)")
        return _confirmation(tune, field_, slots, step, ended)
    for knobs in new:
        s = Standing(len(field_), knobs, "proposed", tune.space.key(knobs), r + 1)
        field_.append(s)
        step.new_candidates.append(_candidate_row(s))
        alive.append(s)
    index = len(slots)
    by_number = {s.number: s for s in field_}
    for n in race.round_order([s.number for s in alive], tune.seed, r + 1):
        s = by_number[n]
        step.new_slots.append(_slot(tune, index, n, s.cell_key, s.knobs, RACE, r + 1, s.runs + 1))
        index += 1
    return step


def _candidate_row(s: Standing) -> dict:
    return {"number": s.number, "knobs": s.knobs, "cell": s.cell_key, "origin": s.origin, "round": s.entered}


def roles(field_: list[Standing]) -> dict[str, int]:
    """Candidate numbers of the confirmation's roles: the race's winner, its runner-up and the baseline."""
    top = race.ranked(field_)
    winner = top[0]
    others = [s for s in top[1:]] or sorted((s for s in field_ if s is not winner and s.value is not None),
                                            key=lambda s: (s.value, s.number))
    out = {confirm.WINNER: winner.number, confirm.BASELINE: 0}
    runner = next((s for s in others if s.number != winner.number), None)
    if runner is not None:
        out[confirm.RUNNER_UP] = runner.number
    return out


def _confirmation(tune, field_: list[Standing], slots: list[dict], step: Step, why: str) -> Step:
    """The confirmation's slots: per repetition every chosen configuration in a fresh random order; where one
    process can hold them all (design.arms_unavailable), each repetition is one interleaved run whose arms are
    those slots (consecutive plan indexes, one `pair`), judged on window pairs."""
    chosen = roles(field_)
    numbers = sorted(set(chosen.values()))
    by_number = {s.number: s for s in field_}
    index = len(slots)
    for n, rep in race.confirmation_order(numbers, tune.confirm, tune.seed, tune.round + 1):
        s = by_number[n]
        step.new_slots.append(_slot(tune, index, n, s.cell_key, s.knobs, CONFIRM, tune.round + 1,
                                    s.runs + rep))
        index += 1
    if len(numbers) > 1:
        _interleave(step.new_slots, len(numbers))
    step.phase, step.why = CONFIRM, why
    step.result = {"roles": chosen, "race_ended": why, "design": _design_of(step.new_slots)}
    return step


def _interleave(new_slots: list[dict], arms: int) -> None:
    """Make each repetition's `arms` consecutive slots the arms of one interleaved run, where they can be."""
    planned = [exp_mod.PlannedRun.from_json(sl["request"]) for sl in new_slots]
    if design.arms_unavailable([p.request for p in planned[:arms]]) is not None:
        return
    block = design.default_block(int(planned[0].request.params["iterations"]), arms)
    for first in range(0, len(new_slots), arms):
        for sl, p in zip(new_slots[first:first + arms], planned[first:first + arms]):
            sl["request"] = replace(p, pair=str(new_slots[first]["plan_index"]), block_samples=block,
                                    design=design.INTERLEAVED).to_json()


def _design_of(new_slots: list[dict]) -> str:
    return (design.INTERLEAVED if new_slots and new_slots[0]["request"].get("pair") is not None
            else design.RUNS)


def _verdict(store: Store, tune, slots: list[dict]) -> Step:
    chosen = dict((tune.result or {})["roles"])
    field_ = standings(store, tune, slots)
    confirmed = standings(store, tune, slots, CONFIRM)
    by_number = {s.number: s for s in confirmed}
    cells = {role: by_number[n].cell for role, n in chosen.items()
             if role == confirm.BASELINE or n != chosen[confirm.BASELINE]}
    v = confirm.verdict(cells, tune.goal, tune.alpha)
    history = [(s.knobs, s.value) for s in field_]
    importance = propose.importance(tune.space, history, tune.seed)
    runs = store.runs(experiment_id=tune.experiment_id)
    doc = result.build(tune, field_, chosen, v, importance, slots, runs, (tune.result or {}).get("race_ended", ""))
    return Step(tune.round, FINISHED, result=doc)
