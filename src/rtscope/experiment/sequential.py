"""`rtscope reproduce --until-decided`: rounds of runs added until every claim is decided or the budget is spent.

One experiment holds every round: its plan grows by one round at a time (a round: one repetition of each
configuration, or of each interleaved run, that an undecided claim still needs), each stored as it finishes, so
an interrupted one resumes (`--resume`) where it stopped, with the budget's time it had used and the α its
looks had spent (kept in the experiment's record). After round n of `LOOK_ROUNDS`, and once more when one more
round would overrun the budget, the claims are judged at the level analysis/paired.py `look_level` gives: half
of α spent by look, half by the fraction of the budget used, the last look taking what is left of that half
(docs/analysis.md, "Until decided"). A claim decided at a look keeps its verdict, and its configurations are
not run again; those still undecided at the end keep `undecided` with the runs that would decide them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

from ..analysis.paired import look_level
from ..signals import Terminated, held_signals
from ..store import Store
from . import execute as exp_mod
from .claim_runs import cells_of
from .spec import Spec

# Rounds after which the claims are judged, about ×1.4 apart: each look spends its share of the by-look half of α
# and the time half's α of the time since the look before, so looks much closer together would each test at a
# small level.
LOOK_ROUNDS = (2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)


def look_of(rounds: int) -> int | None:
    """The look (1-based) that comes after `rounds` rounds, or None."""
    return LOOK_ROUNDS.index(rounds) + 1 if rounds in LOOK_ROUNDS else None


@dataclass
class Progress:
    """What a sequential judgement has decided so far, and what it has used: looks, α, the budget's time (of
    this call and, for a resumed sequence, of the calls before it)."""

    rounds: int = 0
    look: int = 0
    spent: float = 0.0            # of α's time half (analysis/paired.py look_level)
    elapsed_before: float = 0.0
    decided: dict[str, object] = field(default_factory=dict)   # claim id -> its Judgement at the deciding look
    started: float = field(default_factory=time.monotonic)
    round_seconds: list[float] = field(default_factory=list)

    def elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def record(self, budget_s: float) -> dict:
        return {"budget_s": budget_s, "elapsed_s": round(self.elapsed(), 3), "looks": self.look,
                "spent": self.spent}


def resumed_progress(exp: exp_mod.Experiment) -> Progress:
    """The progress an interrupted sequence had kept in its experiment's record (a new one: nothing used)."""
    record = exp.spec.get("until_decided") or {}
    return Progress(look=int(record.get("looks", 0)), spent=float(record.get("spent", 0.0)),
                    elapsed_before=float(record.get("elapsed_s", 0.0)))


def rounds_done(store: Store, exp: exp_mod.Experiment) -> int:
    """Complete rounds of the experiment: the highest repetition whose planned runs are all stored or skipped."""
    done = exp_mod.done_indexes(store, exp.id)
    by_round: dict[int, list[bool]] = {}
    for p in exp.plan:
        by_round.setdefault(p.repetition, []).append(p.index in done)
    complete = 0
    for r in sorted(by_round):
        if not all(by_round[r]):
            break
        complete = r
    return complete


def next_round(spec: Spec, exp: exp_mod.Experiment, claims: list, seed: int, rnd: int) -> list[exp_mod.PlannedRun]:
    """Round `rnd`: one repetition of the configurations these claims name, appended to the experiment's plan."""
    keys = {c.key for claim in claims for c in cells_of(spec, claim)}
    cells = [dataclasses.replace(c, repetitions=1) for c in spec.cells if c.key in keys]
    sub = dataclasses.replace(spec, cells=cells)
    planned = exp_mod.plan(sub, seed + rnd, start=len(exp.plan), one_round=True)
    return [dataclasses.replace(p, repetition=rnd) for p in planned]


def until_decided(store: Store, spec: Spec, exp: exp_mod.Experiment, claims: list, *, budget_s: float,
                  alpha: float,
                  run_round: Callable[[exp_mod.Experiment], None],
                  judge: Callable[[float], list], on_look: Callable[[Progress, list], None]) -> tuple[list, Progress]:
    """Add rounds to `exp` until every one of `claims` (those measurable here) is decided or `budget_s` would be
    overrun.

    run_round(exp): executes the experiment's missing runs; judge(level): every claim judged at that level on the
    experiment's runs; on_look(progress, judgements): shows a look. Returns the final judgements (a claim decided
    at an earlier look keeps that look's judgement) and the progress."""
    progress = resumed_progress(exp)
    try:
        return _rounds(store, spec, exp, claims, budget_s, alpha, run_round, judge, on_look, progress)
    except (KeyboardInterrupt, Terminated):
        with held_signals():    # stopped mid-round: the time it used still counts when it is resumed
            _keep(store, exp, progress, budget_s)
        raise


def _rounds(store: Store, spec: Spec, exp: exp_mod.Experiment, claims: list, budget_s: float, alpha: float,
            run_round: Callable[[exp_mod.Experiment], None], judge: Callable[[float], list],
            on_look: Callable[[Progress, list], None], progress: Progress) -> tuple[list, Progress]:
    seed = exp.seed
    final: list = []
    while True:
        t0 = time.monotonic()
        run_round(exp)
        exp = exp_mod.get(store, exp.id)
        done = rounds_done(store, exp)
        if done > progress.rounds:
            progress.round_seconds.append(time.monotonic() - t0)
        progress.rounds = done
        per_round = max(progress.round_seconds[-3:], default=0.0)
        last = progress.elapsed() + per_round > budget_s     # one more round would overrun the budget
        if look_of(done) is not None or last:
            progress.look += 1
            level, by_time = look_level(alpha, progress.look,
                                        1.0 if last else min(1.0, progress.elapsed() / budget_s), progress.spent)
            progress.spent += by_time
            _keep(store, exp, progress, budget_s)    # spent before it is judged: a stop now still counts it
            judgements = judge(level)
            for j in judgements:
                if j.claim.id not in progress.decided and j.verdict in ("holds", "contradicted"):
                    progress.decided[j.claim.id] = j
            final = [progress.decided.get(j.claim.id, j) for j in judgements]
            on_look(progress, final)
        _keep(store, exp, progress, budget_s)
        open_claims = [c for c in claims if c.id not in progress.decided and
                       (not final or next(j for j in final if j.claim.id == c.id).verdict == "undecided")]
        if (final and not open_claims) or last:
            break
        planned = next_round(spec, exp, open_claims, seed, done + 1)
        if not planned:
            break
        exp.plan = exp.plan + planned
        store.update_experiment(exp.id, plan=[p.to_json() for p in exp.plan], status=exp_mod.RUNNING)
    return final, progress


def _keep(store: Store, exp: exp_mod.Experiment, progress: Progress, budget_s: float) -> None:
    """The time, looks and α used so far, in the experiment's record (what `--resume` continues from)."""
    exp.spec = {**exp.spec, "until_decided": progress.record(budget_s)}
    store.update_experiment(exp.id, spec=exp.spec)
