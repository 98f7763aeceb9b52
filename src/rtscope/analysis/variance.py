"""Variance components of a configuration's metric: between runs and within a run.

A metric of a configuration (its mean, median, p99, max or stdev) is measured once per run. Those per-run
values vary for two reasons (the one-way random-effects model of Kalibera & Jones, ISMM 2013):

    value of run i = the configuration's value + run effect (variance σ²_b) + estimation error of run i

The estimation error is the within-run sampling error of the statistic at the run's sample count n: its
variance, the *within* part, shrinks as 1/n; the run effect (heap layout, page placement, the machine's load
during the run) does not shrink with more samples, only with more runs. The variance of the per-run values is
their sum; σ²_b is what is left of it after the within part (never below 0).

Within-run estimation variance of one run's statistic, from its own samples:
- mean: s² / n;
- median, p99: distribution-free, from the order statistics around the quantile's rank: the ranks
  n·q ± 1.96·√(n·q·(1−q)) hold the quantile with about 95 % confidence (the binomial interval), so
  SE ≈ (x₍hi₎ − x₍lo₎) / (2·1.96) (the Price–Bonett idea; no density estimate needed);
- stdev: the delta method, Var(s) ≈ (m₄ − s⁴) / (4·s²·n) with m₄ the fourth central moment;
- max: none: a maximum has no within-run sampling estimate; only its between-run variance is known.
Runs kept as histograms give the mean's within part (from their n and variance) and none of the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .defaults import STAT_KEY


class Cell(Protocol):
    """What a configuration's runs give (compare.Cell has it; compare imports this module, not the reverse)."""

    runs: list
    per_run: dict[int, dict]
    sample_runs: list

    def run_samples(self, run) -> np.ndarray: ...

QUANTILE = {"median": 0.5, "p99": 0.99}
_Z95 = 1.959963984540054


@dataclass
class Components:
    metric: str
    runs: int                    # runs with a value of this metric
    samples_per_run: float       # mean sample count of those runs
    value: float | None          # mean of the per-run values
    between_var: float | None    # σ²_b ≥ 0, None with fewer than 2 runs
    within_var: float | None     # mean estimation variance of one run's statistic at its own n (None: unknown)
    total_var: float | None      # variance (ddof=1) of the per-run values

    @property
    def between_sd(self) -> float | None:
        return None if self.between_var is None else math.sqrt(self.between_var)

    @property
    def within_se(self) -> float | None:
        return None if self.within_var is None else math.sqrt(self.within_var)

    @property
    def between_share(self) -> float | None:
        """σ²_b / (σ²_b + within): how much of a run's deviation is the run's own, not sampling error."""
        if self.between_var is None or self.within_var is None or self.between_var + self.within_var == 0:
            return None
        return self.between_var / (self.between_var + self.within_var)

    def to_json(self) -> dict:
        return {"metric": self.metric, "runs": self.runs, "samples_per_run": self.samples_per_run,
                "value": self.value, "between_run_var": self.between_var, "within_run_var": self.within_var,
                "per_run_var": self.total_var, "between_run_share": self.between_share}


def estimation_var(metric: str, samples: np.ndarray | None, run_stats: dict) -> float | None:
    """The within-run sampling variance of one run's statistic (see module doc); None when unknown."""
    n = run_stats.get("n") or 0
    if metric == "mean":
        var = run_stats.get("var")
        return None if var is None or n < 2 else float(var) / n
    if samples is None or len(samples) < 2 or metric == "max":
        return None
    x = np.asarray(samples, dtype=np.float64)
    n = len(x)
    if metric in QUANTILE:
        q = QUANTILE[metric]
        half = _Z95 * math.sqrt(n * q * (1.0 - q))
        lo, hi = max(0, int(math.floor(n * q - half)) - 1), min(n - 1, int(math.ceil(n * q + half)) - 1)
        part = np.partition(x, (lo, hi))
        return float(((part[hi] - part[lo]) / (2.0 * _Z95)) ** 2)
    if metric == "stdev":
        d2 = np.square(x - x.mean())        # not np.dot (threads, stats.sum_of_squares), nor d ** 4 (pow: 10× slower)
        m2 = float(np.add.reduce(d2)) / n
        if m2 == 0:
            return 0.0
        m4 = float(np.mean(np.square(d2, out=d2)))
        return max(0.0, (m4 - m2 * m2) / (4.0 * m2 * n))
    raise ValueError(f"unknown metric {metric!r}")


def per_run_values(cell: Cell, metric: str) -> dict[int, float]:
    """run id -> that run's value of the metric (runs without one left out)."""
    key = STAT_KEY[metric]
    return {rid: float(s[key]) for rid, s in cell.per_run.items() if s.get(key) is not None}


def components(cell: Cell, metric: str) -> Components:
    values = per_run_values(cell, metric)
    runs = [r for r in cell.runs if r.id in values]
    if not runs:
        return Components(metric, 0, 0.0, None, None, None, None)
    v = np.asarray([values[r.id] for r in runs])
    with_samples = {r.id for r in cell.sample_runs}
    within = [estimation_var(metric, cell.run_samples(r) if r.id in with_samples else None, cell.per_run[r.id])
              for r in runs]
    within_var = float(np.mean(within)) if within and all(w is not None for w in within) else None
    total = float(np.var(v, ddof=1)) if len(v) > 1 else None
    between = None if total is None else max(0.0, total - (within_var or 0.0))
    per_n = float(np.mean([cell.per_run[r.id].get("n") or 0 for r in runs]))
    return Components(metric, len(runs), per_n, float(v.mean()), between, within_var, total)
