"""The assumptions a tail bound rests on, each tested before anything is fitted (docs/tail.md).

An extreme-value fit needs the samples of a run independent and identically distributed *in their tail*,
and the runs of a configuration alike in their tails. All three checks look at the exceedances of one
reference threshold (`reference_k`: the 0.99 quantile, at most 5,000 exceedances per run), not at the whole
series: at 10^5–10^6 samples a test on every sample finds a lag-1 correlation of 0.01 (p ≈ 0) that changes
nothing in the tail, while the exceedances are what the fit uses and what dependence would distort.

A check refuses the bound only when its dependence or drift is both significant and material:

| check           | statistic                                            | p                    | refused when  |
| --------------- | ---------------------------------------------------- | -------------------- | ------------- |
| independence    | pairs of exceedances l apart (l = 1..10) over chance | Poisson, × 10 lags   | p < 0.01 and  |
|                 | (each tenth of a run at its own rate), worst lag     |                      | ratio ≥ 2     |
| stationarity    | excess CV of the counts in 10 parts of each run      | χ² of the counts     | p < 0.01 and  |
|                 |                                                      |                      | excess CV≥0.2 |
| run homogeneity | excess CV of the runs' counts over the pooled        | χ² of the counts     | p < 0.01 and  |
|                 | threshold                                            |                      | excess CV≥0.2 |

"ratio ≥ 2": an exceedance makes the next sample's exceedance at least twice as likely as chance (an AR(1)
series with φ = 0.5 gives ≈ 12, φ = 0.1 about 1.8, i.i.d. samples 1). "Excess CV": the spread of the
segment's (run's) exceedance rate beyond the Poisson spread its count would have anyway,
sqrt(max(0, Σ((c − e)² − e)) / Σe²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA = 0.01              # a check's significance level
LAGS = 10                 # independence: lags tested (Bonferroni over them)
CLUSTER_RELEVANT = 2.0    # independence: refuse from this pair ratio on
SEGMENTS = 10             # stationarity: segments per run
DRIFT_RELEVANT = 0.2      # stationarity and homogeneity: refuse from this excess CV on
REFERENCE_QUANTILE = 0.99
REFERENCE_MAX = 5000      # at most this many exceedances per run for the checks


@dataclass
class Check:
    name: str
    statistic: float | None
    p: float | None
    passed: bool | None       # None: not testable on this data (said in `why`)
    why: str

    def to_json(self) -> dict:
        return {"name": self.name, "statistic": self.statistic, "p": self.p, "passed": self.passed,
                "why": self.why}


def reference_k(n: int) -> int:
    """How many exceedances the checks' threshold leaves in n samples."""
    return int(min(REFERENCE_MAX, math.floor(n * (1 - REFERENCE_QUANTILE))))


def reference_threshold(values: np.ndarray, k: int) -> float:
    """The value that about k samples exceed: the (n−k)-th order statistic, or, when ties at it leave fewer
    than k/2 above (quantised samples), the next lower distinct value."""
    n = len(values)
    u = float(np.partition(values, n - k - 1)[n - k - 1])
    if np.count_nonzero(values > u) < k / 2:
        below = values[values < u]
        if len(below):
            u = float(below.max())
    return u


# scipy.special's pdtrc and chdtrc are what scipy.stats' poisson.sf and chi2.sf compute; analysis.special's
# (within 1e-10 of them) import no scipy at all: a refused run costs `show` no fit's import.
def _poisson_sf(observed: int, expected: float) -> float:
    from .special import pdtrc
    return float(pdtrc(observed - 1, expected)) if observed > 0 else 1.0


def _chi2_sf(x: float, df: int) -> float:
    from .special import chdtrc
    return float(chdtrc(df, x))


def independence(indicators: list[np.ndarray]) -> Check:
    """Clustering of the exceedances: pairs of exceedances `lag` samples apart against chance, per run and
    within each of its SEGMENTS parts (chance from that part's own rate: a drift is stationarity's, not this)."""
    parts = [part for ind in indicators for part in np.array_split(ind, SEGMENTS)]
    best = (2.0, 1.0, 1)      # (p, ratio, lag)
    for lag in range(1, LAGS + 1):
        observed, expected = 0, 0.0
        for part in parts:
            n, k = len(part), int(np.count_nonzero(part))
            if n <= lag or k < 2:
                continue
            observed += int(np.count_nonzero(part[:-lag] & part[lag:]))
            expected += (n - lag) * k * (k - 1) / (n * (n - 1))
        if expected <= 0:
            continue
        p = min(1.0, LAGS * _poisson_sf(observed, expected))
        if p < best[0]:
            best = (p, observed / expected, lag)
    p, ratio, lag = best
    if p > 1 or sum(int(np.count_nonzero(ind)) for ind in indicators) < 50:
        return Check("independence", None, None, None, "not testable: too few exceedances")
    refused = p < ALPHA and ratio >= CLUSTER_RELEVANT
    text = (f"exceedances of the reference threshold come in pairs {lag} sample(s) apart {ratio:.1f}× as often as "
            "chance gives")
    if refused:
        text += ("; dependent samples make the interval too narrow and the bound optimistic. Leave more time "
                 "between samples (a longer interval or pause), or find what makes the late samples come in "
                 "bursts (rtscope explain)")
    return Check("independence", round(ratio, 4), p, not refused, text)


def _excess_cv(counts: np.ndarray, expected: np.ndarray) -> float:
    d = float(np.sum((counts - expected) ** 2 - expected) / np.sum(expected ** 2))
    return math.sqrt(max(0.0, d))


def stationarity(indicators: list[np.ndarray]) -> Check:
    """The exceedance rate over each run's time: counts in SEGMENTS consecutive segments, χ² against flat."""
    counts, expected = [], []
    for ind in indicators:
        segments = np.array_split(ind, SEGMENTS)
        c = np.array([np.count_nonzero(s) for s in segments], dtype=float)
        total = c.sum()
        if total < 5 * SEGMENTS:
            continue
        counts.append(c)
        expected.append(total * np.array([len(s) for s in segments], dtype=float) / len(ind))
    if not counts:
        return Check("stationarity", None, None, None, "not testable: too few exceedances")
    c, e = np.concatenate(counts), np.concatenate(expected)
    p = _chi2_sf(float(np.sum((c - e) ** 2 / e)), len(counts) * (SEGMENTS - 1))
    cv = _excess_cv(c, e)
    refused = p < ALPHA and cv >= DRIFT_RELEVANT
    text = (f"the exceedance rate varies by {cv:.0%} (beyond chance) between {SEGMENTS} consecutive parts of "
            "the run")
    if refused:
        text += ("; a tail that changes during the run has no single bound. Measure on a quieter machine (no "
                 "other load, fixed governor), warm up before measuring, or make separate runs per condition")
    return Check("stationarity", round(cv, 4), p, not refused, text)


def homogeneity(counts: list[int], sizes: list[int]) -> Check:
    """The runs' exceedance counts over the pooled threshold against their share of the samples."""
    c, n = np.asarray(counts, dtype=float), np.asarray(sizes, dtype=float)
    e = c.sum() * n / n.sum()
    if len(c) < 2 or e.min() < 5:
        return Check("run homogeneity", None, None, None, "not testable: fewer than 2 runs with 5 expected "
                     "exceedances each")
    p = _chi2_sf(float(np.sum((c - e) ** 2 / e)), len(c) - 1)
    cv = _excess_cv(c, e)
    refused = p < ALPHA and cv >= DRIFT_RELEVANT
    text = f"the runs' exceedance rates over the pooled threshold vary by {cv:.0%} beyond chance"
    if refused:
        text += ("; runs whose tails differ are not repetitions of one tail, and pooling them hides the "
                 "difference. Find what differs between runs (rtscope compare), make more runs, or measure on "
                 "a quieter machine")
    return Check("run homogeneity", round(cv, 4), p, not refused, text)


def unordered(name: str) -> Check:
    """A check a histogram-only run cannot have: it kept no sample order."""
    return Check(name, None, None, None, "not testable: a histogram-only run kept no sample order")
