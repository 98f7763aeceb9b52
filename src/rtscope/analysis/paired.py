"""Paired tests: configurations measured inside one run (design `interleaved`) or side by side (design `duet`)
judged on window-pair differences.

An interleaved run (experiment/design.py) measures several arms in one process: arm after arm in blocks of
`block_samples` samples, in a randomized balanced order (each round a fresh permutation of the arms). Each arm
is stored as an ordinary run whose header says `pairing = {id, design, arm, arms, block_samples, blocks}`.
Two configurations that have runs of one pairing id are *paired*: the k-th block of one and the k-th block of
the other lie in the same round, seconds apart, so a drift of the machine hits both alike and cancels in their
difference. A duet (design `duet`) is paired the same way with blocks of one sample: its arms ran side by side,
a process each on a CPU of its own, released together at a start gate, so their k-th windows were measured at
about the same time (as long as the arms keep the same pace). The arms swap CPUs from one repetition to the
next, and the duet is judged as a crossover (`strata`: the CPU of the cell's arm in each run): the estimate is
the mean of each arrangement's mean difference, so a CPU's own speed cancels, and the run-level variance (b) is
the runs' spread within their arrangement.

| step | what |
| --- | --- |
| a window | `window_samples` consecutive samples of an arm: a whole number of its blocks (`window_samples()`), the k-th window of every arm spanning the same rounds |
| a window's value | the metric (mean, median, p99, max, stdev n−1) of its samples |
| a pair's difference | log(cell's window value) − log(baseline's), window by window: this machine's drift is a change of speed, which multiplies every block of a round alike |
| the estimate | the mean of all differences: the log of the cell's ratio to the baseline; shown as a difference, baseline × (e^x − 1), with the interval mapped the same way |
| its variance | the largest of (a) the within-run variance of the differences over their count, inflated by the lag-1 serial correlation r1 of the differences, (1+r1)/(1−r1) when r1 > 0, with (N−R)/inflation degrees of freedom, (a') the same from batch means (batches of √m consecutive pairs of a run), which a correlation longer than one pair does not fool, and (b) with R ≥ 2 paired runs, the variance of the runs' mean differences over R (the run as a cluster), with R−1 degrees of freedom |
| the test | Student's t on estimate / standard error, two-sided; the interval at any level from the same t |

Blocks and windows: the arms alternate every `block_samples` samples (short by default, experiment/design.py:
what drifts over a few calls hits every arm alike), and the statistics are taken over windows of many blocks,
long enough for a p99 or a max. Runs stored with long blocks (before the windows) have windows of one block:
their verdicts are as before. For max, p99, median and stdev the value compared is the statistic of a window
(of `window_samples` samples), named so wherever it is shown (`max per 200-sample window`): it is not the
run's max. The mean of windows of equal length is the run's mean.

`removed` says how much variance the pairing took away: 1 − var(differences) / (var(cell's blocks) + var(the
baseline's blocks)), the variances over every paired block (so the drift between and within runs counts in the
unpaired figure, as it would in runs measured apart).

Looking again (`--until-decided`): half of α is spent by look, α/2 / (k (k+1)) at look k, so that a clear
effect stops the sequence at its first looks; the other half by the budget's time, α/2 · t² in all by the
fraction t of the budget used (a power-family spending function, ρ = 2), the look at the budget's end taking
all of that half that is left, so that a small effect is decided at the end. A look's level is the sum of its
two parts. Both halves sum to at most α/2 whatever the number and times of the looks, so the chance that any
look of an A/A comparison calls a difference is at most α (a union bound: simple, valid, somewhat conservative;
docs/analysis.md has the figures). `look_level(alpha, look, t, spent_by_time)` gives the level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .defaults import STAT_KEY

DESIGN_RUNS = "runs"
PAIRED_TEST = "paired t-test on window-pair differences"
MAX_WINDOW = 200          # samples: a window at most this long (or one block, if that is longer)
MIN_WINDOWS = 10          # and at most an arm's samples / MIN_WINDOWS
MAX_INFLATION = 10.0      # the serial-correlation factor's cap: beyond it the blocks are too short to follow the drift


# The largest log ratio turned back into a ratio: an early look's small level with one or two degrees of
# freedom can give an interval wider than any float ratio; beyond e^700 it stays finite (and valid JSON).
LOG_CAP = 700.0


def ratio_of(log_ratio: float) -> float:
    return math.exp(min(log_ratio, LOG_CAP))


@dataclass(frozen=True)
class Estimate:
    """A difference (or a log ratio) with its standard error and degrees of freedom: every p-value and interval
    of a paired or a Welch test follows from these three numbers."""

    value: float
    se: float
    df: float
    log_of: float | None = None     # a log ratio: the baseline value it multiplies (shown as a difference)

    def difference(self, x: float) -> float:
        """x (a value of the estimate's scale) as a difference: baseline × (e^x − 1) for a log ratio."""
        return self.log_of * math.expm1(min(x, LOG_CAP)) if self.log_of is not None else x

    def relative(self, r: float, baseline: float | None) -> float:
        """A relative change r (0.05: +5 %) on the estimate's scale."""
        return math.log1p(r) if self.log_of is not None else r * abs(baseline or 0.0)

    def p(self, shift: float = 0.0) -> float:
        """Two-sided p of value = shift."""
        from .special import stdtr
        if self.se == 0:
            return 1.0 if self.value == shift else 0.0
        return min(1.0, float(2.0 * stdtr(self.df, -abs(self.value - shift) / self.se)))

    def above(self, shift: float) -> float:
        """One-sided p of H0 value ≤ shift against value > shift."""
        from .special import stdtr
        if self.se == 0:
            return 0.0 if self.value > shift else 1.0
        return float(stdtr(self.df, -(self.value - shift) / self.se))

    def interval(self, alpha: float = 0.05) -> tuple[float, float]:
        """The two-sided (1 − alpha) interval."""
        from .special import stdtrit
        half = float(stdtrit(self.df, 1.0 - alpha / 2.0)) * self.se if self.se else 0.0
        return self.value - half, self.value + half


def welch_estimate(a: np.ndarray, b: np.ndarray) -> Estimate:
    """mean(a) − mean(b) with Welch's standard error and Welch–Satterthwaite degrees of freedom."""
    n1, n2 = len(a), len(b)
    v1, v2 = float(np.var(a, ddof=1)) / n1, float(np.var(b, ddof=1)) / n2
    diff = float(np.mean(a) - np.mean(b))
    if v1 + v2 == 0:
        return Estimate(diff, 0.0, max(1.0, n1 + n2 - 2.0))
    df = (v1 + v2) ** 2 / (v1 ** 2 / (n1 - 1) + v2 ** 2 / (n2 - 1))
    return Estimate(diff, math.sqrt(v1 + v2), df)


EARLY_SHARE = 0.5    # of α, spent by look count; the rest by the budget's time
SPENDING_POWER = 2   # ρ of t^ρ: larger keeps more of the time half for the budget's end


def look_level(alpha: float, look: int, t: float, spent_by_time: float) -> tuple[float, float]:
    """The level of look `look` (1-based) of a sequential judgement at time t (the fraction of the budget used,
    1 at its end) after looks that spent `spent_by_time` of the time half, and the part of it spent by time:
    α/2 / (k (k+1)) + (α/2 · t^ρ − spent_by_time, never below 0)."""
    if look < 1:
        raise ValueError("looks are counted from 1")
    if not 0 <= t <= 1:
        raise ValueError(f"a look's time is a fraction of the budget, 0 to 1, not {t}")
    by_time = max(0.0, alpha * (1 - EARLY_SHARE) * t ** SPENDING_POWER - spent_by_time)
    return alpha * EARLY_SHARE / (look * (look + 1)) + by_time, by_time


# --- block values -----------------------------------------------------------------------------------------

def pairing(run: Any) -> dict | None:
    """The run's pairing record (its header's), or None for a run measured on its own."""
    p = (getattr(run, "header", None) or {}).get("pairing")
    return p if isinstance(p, dict) and p.get("id") else None


def design_of(runs: list) -> str:
    """The design the runs were measured in: the one every run's pairing names, or `runs`."""
    designs = {(pairing(r) or {}).get("design", DESIGN_RUNS) for r in runs}
    return designs.pop() if len(designs) == 1 else DESIGN_RUNS


def window_samples(samples: int, block: int) -> int:
    """The samples of a statistics window of an arm with `samples` samples in blocks of `block`: the largest whole
    number of blocks that divides the arm's blocks and is at most min(MAX_WINDOW, samples // MIN_WINDOWS) samples
    (at least one block)."""
    blocks = max(1, samples // block)
    cap = max(1, min(MAX_WINDOW, samples // MIN_WINDOWS) // block)
    return block * next(k for k in range(min(cap, blocks), 0, -1) if blocks % k == 0)


def block_values(samples: np.ndarray, block: int, metric: str) -> np.ndarray:
    """The metric of each full window (or block) of `block` consecutive samples."""
    nb = len(samples) // block
    x = np.asarray(samples[:nb * block], dtype=np.float64).reshape(nb, block)
    key = STAT_KEY[metric]
    if key == "mean":
        return x.mean(axis=1)
    if key == "max":
        return x.max(axis=1)
    if key == "stdev":
        return x.std(axis=1, ddof=1) if block > 1 else np.full(nb, np.nan)
    q = {"p50": 50.0, "p99": 99.0}[key]
    return np.percentile(x, q, axis=1)   # linear interpolation (type 7), as stats.summarize


@dataclass
class PairedResult:
    """One metric of a cell against its baseline from their shared interleaved runs."""

    estimate: Estimate
    value: float                 # the cell's mean window value
    baseline: float              # the baseline's
    block_samples: int           # the arms alternated every block_samples samples
    window_samples: int          # the statistics are those of windows of window_samples samples
    runs: int                    # paired runs (clusters)
    pairs: int                   # window pairs
    serial_r1: float | None      # lag-1 correlation of the differences within runs
    removed: float | None        # share of the variance the pairing removed
    cluster: bool                # the run-level variance (b) was the larger
    design: str = "interleaved"  # or duet: the arms side by side, their k-th windows taken at about one time

    def describe(self) -> str:
        how = ("the arms side by side" if self.design == "duet" else
               f"the arms alternating every {self.block_samples}")
        parts = [f"{self.pairs} window pairs of {self.window_samples} samples in {self.runs} "
                 f"{self.design} run{'s' if self.runs != 1 else ''}, {how}"]
        if self.removed is not None:
            parts.append(f"pairing removed {max(0.0, self.removed):.0%} of the variance")
        if self.serial_r1 is not None:
            parts.append(f"serial correlation r1 = {self.serial_r1:.2f}")
        if self.cluster:
            parts.append("the run as a cluster")
        return ", ".join(parts)

    def to_json(self) -> dict:
        return {"design": self.design, "test": PAIRED_TEST, "block_samples": self.block_samples,
                "window_samples": self.window_samples, "paired_runs": self.runs, "window_pairs": self.pairs,
                "serial_r1": self.serial_r1,
                "variance_removed": self.removed, "run_as_cluster": self.cluster,
                "standard_error": self.estimate.se, "df": self.estimate.df}


def shared_runs(cell_runs: list, base_runs: list) -> list[tuple[Any, Any]]:
    """(cell run, baseline run) of each pairing id the two configurations share, in id order."""
    theirs = {p["id"]: r for r in base_runs if (p := pairing(r))}
    out = []
    for r in cell_runs:
        p = pairing(r)
        if p and p["id"] in theirs and theirs[p["id"]].id != r.id:
            out.append((r, theirs[p["id"]]))
    return sorted(out, key=lambda pair: pairing(pair[0])["id"])


def paired(pairs: list[tuple[np.ndarray, np.ndarray]], block: int, metric: str,
           design: str = "interleaved", strata: list | None = None) -> PairedResult | None:
    """The paired estimate (a log ratio) from each shared run's (cell samples, baseline samples), arms alternating
    every `block` samples, judged on windows of window_samples(); None when fewer than two window pairs have a
    value (windows of one sample have no stdev; a log needs positive values). strata: each run's arrangement (a
    duet: the CPU of the cell's arm), whose own effect the estimate and the run-level variance leave out."""
    log = True
    diffs, mine, theirs, kept = [], [], [], []
    if not pairs:
        return None
    window = window_samples(min(min(len(a), len(b)) for a, b in pairs), block)
    for i, (a, b) in enumerate(pairs):
        va, vb = block_values(a, window, metric), block_values(b, window, metric)
        k = min(len(va), len(vb))
        va, vb = va[:k], vb[:k]
        ok = np.isfinite(va) & np.isfinite(vb)
        if log:
            ok &= (va > 0) & (vb > 0)
        va, vb = va[ok], vb[ok]
        if len(va):
            diffs.append(np.log(va) - np.log(vb))
            mine.append(va)
            theirs.append(vb)
            if strata is not None:
                kept.append(strata[i])   # the arrangement of each run that has a window pair
    n = sum(len(d) for d in diffs)
    if n < 2:
        return None
    return _estimate(diffs, np.concatenate(mine), np.concatenate(theirs), block, window, design,
                     None if strata is None else kept)


def _batch_means(centred: list[np.ndarray]) -> tuple[float, float] | None:
    """The variance of the grand mean from batch means (batches of √m consecutive pairs within each run), which a
    serial correlation longer than one pair does not fool as the lag-1 factor alone can; with its df."""
    sums, batches, runs = 0.0, 0, 0
    for c in centred:
        size = max(1, int(math.isqrt(len(c))))
        nb = len(c) // size
        if nb < 2 or size < 2:
            continue
        means = c[:nb * size].reshape(nb, size).mean(axis=1)
        sums += float(np.sum((means - means.mean()) ** 2)) * size
        batches += nb
        runs += 1
    if batches - runs < 1:
        return None
    n = sum(len(c) for c in centred)
    return sums / (batches - runs) / n, float(batches - runs)


def _by_stratum(means: np.ndarray, strata: list) -> tuple[float, float, int] | None:
    """A crossover's estimate from its runs' mean differences: the mean of each arrangement's mean (a CPU's own
    speed, which favours the arm on it, cancels), with the variance from the runs' spread within arrangements
    and its df; None with one arrangement only. The variance is None-like (-1) with no run to spare."""
    groups: dict = {}
    for m, s in zip(means, strata):
        groups.setdefault(s, []).append(float(m))
    if len(groups) < 2:
        return None
    k, runs = len(groups), len(means)
    estimate = float(np.mean([np.mean(g) for g in groups.values()]))
    if runs - k < 1:
        return estimate, -1.0, 0
    s2 = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups.values()) / (runs - k)
    return estimate, s2 / k ** 2 * sum(1.0 / len(g) for g in groups.values()), runs - k


def _estimate(diffs: list[np.ndarray], mine: np.ndarray, theirs: np.ndarray, block: int,
              window: int, design: str, strata: list | None = None) -> PairedResult | None:
    runs, n = len(diffs), sum(len(d) for d in diffs)
    allv = np.concatenate(diffs)
    grand = float(allv.mean())
    crossover = _by_stratum(np.array([d.mean() for d in diffs]), strata) if strata else None
    centred = [d - d.mean() for d in diffs]
    ss_within = float(sum(np.sum(c * c) for c in centred))
    df_within = n - runs
    r1 = None
    inflation = 1.0
    lagged = [(c[1:], c[:-1]) for c in centred if len(c) >= 3]
    if lagged and ss_within > 0:
        r1 = float(sum(np.sum(x * y) for x, y in lagged) / ss_within)
        if r1 > 0:
            inflation = min(MAX_INFLATION, (1 + r1) / (1 - r1) if r1 < 1 else MAX_INFLATION)
    var_w = (ss_within / df_within) * inflation / n if df_within > 0 else math.inf
    df_w = max(1.0, df_within / inflation) if df_within > 0 else 1.0
    batched = _batch_means(centred)
    if batched is not None and batched[0] > var_w:
        var_w, df_w = batched
    var_b, df_b, cluster = -1.0, float(runs - 1), False
    if crossover is not None:   # a duet whose arms swapped CPUs: the CPUs' own speeds left out
        grand, var_b, df_b = crossover[0], crossover[1], float(crossover[2])
    elif runs >= 2:
        means = np.array([d.mean() for d in diffs])
        var_b = float(np.var(means, ddof=1)) / runs
    if var_b > var_w or (df_b >= 1 and var_b >= 0 and not math.isfinite(var_w)):   # the runs are the replicates
        var, df, cluster = var_b, df_b, True
    else:
        var, df = var_w, df_w
    if not math.isfinite(var):
        return None
    unpaired = float(np.var(np.log(mine), ddof=1) + np.var(np.log(theirs), ddof=1)) if len(mine) > 1 else 0.0
    removed = 1.0 - float(np.var(allv, ddof=1)) / unpaired if unpaired > 0 else None
    baseline = float(theirs.mean())
    return PairedResult(Estimate(grand, math.sqrt(max(var, 0.0)), df, baseline), float(mine.mean()), baseline,
                        block, window, runs, n, r1, removed, cluster, design)
