"""The race, as irace runs it: who leads, who is dropped, when the race ends, and what each round runs.

Every surviving candidate gets one more run per round, in a fresh random order (seeded) beside the
incumbent. After a round, each survivor with at least FIRST_TEST runs is tested against the incumbent on the
goal with rtscope's own test for that metric (analysis.compare: Welch for the mean, the bootstrap for p99,
Brown-Forsythe for stdev, Mann-Whitney on per-run maxima for max), the p-values of the round Holm-corrected
as one family; a survivor significantly worse than the incumbent is dropped. Lower is better.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ...analysis.compare import Cell, adjust, compare_cells

FIRST_TEST = 2          # runs a candidate needs before it can be dropped
RACE_RESAMPLES = 2000   # bootstrap replicates of a race test (the confirmation uses compare's default)


@dataclass
class Standing:
    """One candidate in the race: its knobs, its race runs (pooled in a compare Cell) and its goal value."""

    number: int
    knobs: dict[str, Any]
    origin: str                         # baseline / proposed
    cell_key: str
    entered: int                        # the round it entered
    dropped_round: int | None = None
    reason: str | None = None
    cell: Cell | None = None
    value: float | None = None          # the goal over its race runs (pooled)
    run_ids: list[int] = field(default_factory=list)

    @property
    def alive(self) -> bool:
        return self.dropped_round is None

    @property
    def runs(self) -> int:
        return len(self.run_ids)


def ranked(standings: list[Standing]) -> list[Standing]:
    """Alive candidates, best first: those with FIRST_TEST runs before the newcomers, then by goal value."""
    alive = [s for s in standings if s.alive and s.value is not None]
    return sorted(alive, key=lambda s: (s.runs < FIRST_TEST, s.value, s.number))


def incumbent(standings: list[Standing]) -> Standing | None:
    top = ranked(standings)
    return top[0] if top else None


def drops(standings: list[Standing], goal: str, alpha: float, seed: int) -> list[tuple[Standing, str]]:
    """The survivors significantly worse than the incumbent on the goal (Holm over this round's tests)."""
    lead = incumbent(standings)
    if lead is None or lead.runs < FIRST_TEST:
        return []
    tested = []
    for s in standings:
        if s is lead or not s.alive or s.runs < FIRST_TEST or s.cell is None:
            continue
        row = compare_cells(s.cell, lead.cell, alpha=alpha, resamples=RACE_RESAMPLES, seed=seed).row(goal)
        tested.append((s, row))
    adjust([row for _, row in tested], alpha)
    return [(s, f"{goal} significantly worse than candidate {lead.number} (p_holm {row.p_holm:.2g}, "
                f"{row.value:.6g} vs {row.baseline:.6g} {lead.cell.config.unit})")
            for s, row in tested if row.verdict == "worse"]


def round_order(numbers: list[int], seed: int, round_: int) -> list[int]:
    """The candidates of one round in a fresh random order (the same on every process)."""
    order = sorted(numbers)
    random.Random(seed * 1_000_003 + round_).shuffle(order)
    return order


def confirmation_order(numbers: list[int], repetitions: int, seed: int, round_: int) -> list[tuple[int, int]]:
    """(candidate, repetition) of the confirmation: each repetition a fresh random order of every candidate."""
    out = []
    for rep in range(1, repetitions + 1):
        out += [(n, rep) for n in round_order(numbers, seed, round_ * 1000 + rep)]
    return out
