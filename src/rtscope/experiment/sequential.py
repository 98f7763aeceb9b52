"""`rtscope reproduce --until-decided`: rounds of runs added until every claim is decided or the budget is spent.

One experiment holds every round: its plan grows by one round at a time (a round: one repetition of each
configuration, or of each interleaved run, that an undecided claim still needs), each stored as it finishes, so
an interrupted one resumes (`--resume`) where it stopped. After round n of `LOOK_ROUNDS` the claims are judged
at that look's level (analysis/paired.py `spent`: α / (k (k+1)) at look k, summing to α over any number of
looks); a claim decided at a look keeps its verdict, and its configurations are not run again. When the budget
(wall time) would be overrun by one more round, the claims still undecided keep `undecided` with the runs that
would decide them at the next look's level.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Callable

from ..analysis.paired import spent
from ..store import Store
from . import execute as exp_mod
from .claim_runs import cells_of
from .spec import Spec

# Rounds after which the claims are judged: about ×1.4 apart, so that later looks cost little power.
LOOK_ROUNDS = (2, 3, 4, 6, 8, 11, 16, 23, 32, 45, 64, 91, 128, 181, 256)


def look_of(rounds: int) -> int | None:
    """The look (1-based) that comes after `rounds` rounds, or None."""
    return LOOK_ROUNDS.index(rounds) + 1 if rounds in LOOK_ROUNDS else None


@dataclass
class Progress:
    """What a sequential judgement has decided so far."""

    rounds: int = 0
    look: int = 0
    decided: dict[str, object] = field(default_factory=dict)   # claim id -> its Judgement at the deciding look
    started: float = field(default_factory=time.monotonic)
    round_seconds: list[float] = field(default_factory=list)


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
    planned = exp_mod.plan(sub, seed + rnd, start=len(exp.plan))
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
    progress = Progress()
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
        look = look_of(done)
        judgements = None
        if look is not None:
            progress.look = look
            level = spent(alpha, look)
            judgements = judge(level)
            for j in judgements:
                if j.claim.id not in progress.decided and j.verdict in ("holds", "contradicted"):
                    progress.decided[j.claim.id] = j
            final = [progress.decided.get(j.claim.id, j) for j in judgements]
            on_look(progress, final)
        open_claims = [c for c in claims if c.id not in progress.decided and
                       (not final or next(j for j in final if j.claim.id == c.id).verdict == "undecided")]
        if final and not open_claims:
            break
        per_round = max(progress.round_seconds[-3:], default=0.0)
        if time.monotonic() - progress.started + per_round > budget_s:
            if judgements is None:            # the budget ends between looks: one last look, at the next level
                progress.look += 1
                judgements = judge(spent(alpha, progress.look))
                final = [progress.decided.get(j.claim.id, j) for j in judgements]
                on_look(progress, final)
            break
        planned = next_round(spec, exp, open_claims, seed, done + 1)
        if not planned:
            break
        exp.plan = exp.plan + planned
        store.update_experiment(exp.id, plan=[p.to_json() for p in exp.plan], status=exp_mod.RUNNING)
    return final, progress
