"""The race, as irace runs it: who leads, who is dropped, when the race ends, and what each round runs.

Every surviving candidate gets one more run per round, in a fresh random order (seeded) beside the
incumbent. A run is the race's unit (as an instance is irace's): a candidate's value is the median of its
runs' goal values (each run's p99, mean, stdev or max), so one run disturbed by the machine does not decide.
After a round, each survivor with at least FIRST_TEST runs is tested against the incumbent with Welch's
t-test on the runs' goal values (analysis.compare.run_level_row, the test compare gives every metric), the
round's p-values Holm-corrected as one family; a survivor significantly worse than the incumbent is dropped.
Lower is better.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...analysis.compare import STAT_KEY, Cell, adjust, run_level_row
from ...analysis.recommend import p_text
from ...analysis.results import display_unit, fmt

FIRST_TEST = 2          # runs a candidate needs before it can be dropped
RACE_TEST = "Welch t-test on the runs' goal values"


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
    cell: Cell | None = None            # its runs pooled (the first length's, when race runs grow)
    per_run: dict[int, dict] = field(default_factory=dict)   # run id -> that run's statistics
    value: float | None = None          # the median of its race runs' goal values
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


def run_values(s: Standing, goal: str) -> list[float]:
    """The goal value of each of the candidate's race runs."""
    return [st[STAT_KEY[goal]] for st in s.per_run.values() if st.get(STAT_KEY[goal]) is not None]


def value_of(s: Standing, goal: str) -> float | None:
    values = run_values(s, goal)
    return float(np.median(values)) if values else None


def drops(standings: list[Standing], goal: str, alpha: float) -> list[tuple[Standing, str]]:
    """The survivors significantly worse than the incumbent on the goal (Holm over this round's tests)."""
    lead = incumbent(standings)
    if lead is None or lead.runs < FIRST_TEST:
        return []
    base = run_values(lead, goal)
    tested = [(s, run_level_row(goal, run_values(s, goal), base, RACE_TEST)) for s in standings
              if s is not lead and s.alive and s.runs >= FIRST_TEST and s.cell is not None]
    adjust([row for _, row in tested], alpha)
    unit, scale = display_unit(lead.cell.config.unit)
    return [(s, f"{goal} significantly worse than candidate {lead.number} (p (Holm) {p_text(row.p_holm)}; runs' "
                f"mean {fmt(goal, row.value, scale)} vs {fmt(goal, row.baseline, scale)} {unit})")
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
