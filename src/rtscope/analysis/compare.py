"""Significance-tested comparisons of configurations against a baseline.

Pooling. The runs of one configuration (select.Configuration) are its
repetitions. Their raw samples are pooled for the distribution tests, and
every metric is also computed per run, so the spread between repetitions is
shown beside the pooled value. A difference that the pooled tests call
significant while the per-run values of the two configurations overlap is
flagged: between-run variation may explain it. With fewer than
MIN_REPETITIONS runs a configuration's between-run variation is unknown, and
a warning says so. Runs that kept only a histogram have no raw samples: they
count for `max` (exact in a histogram) and for the displayed values, and are
skipped, with a note, by every sample-based test.

Lower is better for every metric (times, bytes). One row per configuration
and metric, each with its own test:

| metric | value                 | test (two-sided)                            | 95% interval of the difference |
| ------ | --------------------- | ------------------------------------------- | ------------------------------ |
| mean   | pooled mean           | Welch's t-test                              | Welch                          |
| median | pooled p50            | Mann-Whitney U (direction: Cliff's delta)   | bootstrap, percentile          |
| p99    | pooled p99            | bootstrap z-test (difference / bootstrap SE) | bootstrap, percentile          |
| max    | pooled max            | Mann-Whitney U on the per-run maxima        | -                              |
| stdev  | pooled stdev (n−1)    | Brown-Forsythe (Levene, median-centred)     | -                              |

Mann-Whitney U is exact (the permutation distribution of the rank sum,
ties included) up to EXACT_LIMIT values in all, and uses the normal
approximation with tie and continuity corrections beyond. The tests are
written with numpy and scipy.special (importing scipy.stats costs more than
the whole comparison) and checked against scipy.stats in the test suite.

Every p-value of one comparison set (all rows, all configurations) forms one
family for Holm's step-down correction; a row's verdict is `better`/`worse`
when its Holm-adjusted p ≤ alpha, else `no significant difference`, or
`not tested` with the reason (no raw samples, too few runs to ever reach
alpha). Cliff's delta (δ = P(X>Y) − P(X<Y), X the configuration, Y the
baseline; from the Mann-Whitney U) is labelled with Romano et al.'s
thresholds: |δ| < 0.147 negligible, < 0.33 small, < 0.474 medium, else large.

Bootstrap. A percentile of a bootstrap resample is a function of two order
statistics of the resample, and the k-th order statistic of n draws from the
empirical distribution is x₍⌈n·U⌉₎ with U ~ Beta(k, n−k+1) (the next one
follows as U + (1−U)·Beta(1, n−k)). rtscope draws those directly: exactly
the distribution that resampling all n samples would give, at O(resamples)
cost, so no subsampling is needed however large the runs. RESAMPLES
replicates per group, from a generator seeded by `seed` and the names of the
two configurations: the same data give the same intervals on every run.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UsageError, choices
from ..store import Run, Store
from . import stats
from . import distribution
from .defaults import ALPHA, RESAMPLES, SEED
from .select import CORE_DIMENSIONS, Configuration, group_runs, short_labels, value_matches, value_text
from .stats import merge_histograms

METRICS = ("mean", "median", "p99", "max", "stdev")
STAT_KEY = {"mean": "mean", "median": "p50", "p99": "p99", "max": "max", "stdev": "stdev"}
TESTS = {
    "mean": "Welch t-test",
    "median": "Mann-Whitney U",
    "p99": "bootstrap z-test",
    "max": "Mann-Whitney U on per-run maxima (exact)",
    "stdev": "Brown-Forsythe",
}
MIN_REPETITIONS = 3
# Romano et al. (2006) thresholds for |Cliff's delta|.
MAGNITUDES = ((0.147, "negligible"), (0.33, "small"), (0.474, "medium"), (math.inf, "large"))


# --- statistics ------------------------------------------------------------------------------

def holm(pvalues: list[float]) -> list[float]:
    """Holm step-down adjusted p-values (same order as given)."""
    m = len(pvalues)
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: pvalues[j])):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def magnitude(delta: float) -> str:
    a = abs(delta)
    return next(label for limit, label in MAGNITUDES if a < limit)


EXACT_LIMIT = 60   # Mann-Whitney: exact null distribution up to this many values in all, normal beyond


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney(x: np.ndarray, y: np.ndarray, presorted: bool = False) -> tuple[float, float]:
    """Two-sided Mann-Whitney U p-value and Cliff's delta of x against y.

    Up to EXACT_LIMIT values in all (per-run maxima, tiny runs): the exact permutation distribution
    of the rank sum, ties included. Beyond: the normal approximation with tie and continuity
    corrections (as scipy.stats.mannwhitneyu's asymptotic method). U (pairs x > y plus half the
    ties) and the tie sizes come from binary searches in the two sorted samples, with no sort of
    their union; Cliff's delta = 2U/(n1·n2) − 1."""
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    xs, ys = (x, y) if presorted else (np.sort(np.asarray(x, dtype=np.float64)),
                                       np.sort(np.asarray(y, dtype=np.float64)))
    ux, cx = _runs(xs)
    uy, cy = _runs(ys)
    lo, hi = np.searchsorted(ys, ux, "left"), np.searchsorted(ys, ux, "right")
    u1 = float(np.dot(cx, lo + hi)) / 2.0
    delta = 2.0 * u1 / (n1 * n2) - 1.0
    if n1 + n2 <= EXACT_LIMIT:
        return _exact_rank_sum_p(xs, ys), delta
    # tie sizes in the union: x's values (with the ys equal to them), then the y values x lacks
    t_x = (cx + (hi - lo)).astype(np.float64)
    in_x = np.searchsorted(xs, uy, "right") - np.searchsorted(xs, uy, "left")
    t_y = cy[in_x == 0].astype(np.float64)
    tie_sum = float(np.sum(t_x ** 3 - t_x) + np.sum(t_y ** 3 - t_y))
    n = n1 + n2
    var = n1 * n2 / 12.0 * ((n + 1) - tie_sum / (n * (n - 1)))
    if var <= 0:
        return 1.0, delta
    u = max(u1, n1 * n2 - u1)
    z = (u - n1 * n2 / 2.0 - 0.5) / math.sqrt(var)
    return min(1.0, 2.0 * _norm_sf(z)), delta


def _runs(sorted_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs."""
    starts = np.flatnonzero(np.concatenate([[True], sorted_x[1:] != sorted_x[:-1]]))
    return sorted_x[starts], np.diff(np.append(starts, len(sorted_x)))


def _exact_rank_sum_p(xs: np.ndarray, ys: np.ndarray) -> float:
    """Two-sided p of x's rank sum over all C(n, n1) equally likely splits (doubled midranks: integers)."""
    both = np.concatenate([xs, ys])
    order = np.argsort(both, kind="stable")
    ranks = np.empty(len(both))
    ranks[order] = np.arange(1, len(both) + 1)
    uniq, inverse = np.unique(both, return_inverse=True)
    mid = np.bincount(inverse, weights=ranks) / np.bincount(inverse)
    scores = np.rint(2 * mid[inverse]).astype(np.int64)
    n1 = len(xs)
    observed = int(scores[:n1].sum())
    top = int(np.sort(scores)[-n1:].sum())
    ways = np.zeros((n1 + 1, top + 1))      # ways[k, s]: subsets of k values with score sum s
    ways[0, 0] = 1.0
    for sc in scores:
        ways[1:, sc:] = ways[1:, sc:] + ways[:-1, :top + 1 - sc]
    dist = ways[n1]
    total = dist.sum()
    low = dist[:observed + 1].sum() / total
    high = dist[observed:].sum() / total
    return float(min(1.0, 2.0 * min(low, high)))


def min_exact_p(n1: int, n2: int) -> float:
    """The smallest two-sided p-value an exact Mann-Whitney test of n1 vs n2 values can give."""
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def bootstrap_quantile(sorted_x: np.ndarray, q: float, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """`resamples` bootstrap replicates of the type-7 quantile q (0..1) of sorted_x (see module doc)."""
    n = len(sorted_x)
    h = (n - 1) * q
    k = int(math.floor(h))
    frac = h - k
    u1 = rng.beta(k + 1, n - k, size=resamples)
    i1 = np.clip(np.ceil(n * u1).astype(np.int64) - 1, 0, n - 1)
    lo = sorted_x[i1]
    if frac == 0 or k + 1 >= n:
        return lo.astype(np.float64)
    u2 = u1 + (1.0 - u1) * rng.beta(1, n - k - 1, size=resamples)
    i2 = np.clip(np.ceil(n * u2).astype(np.int64) - 1, 0, n - 1)
    return lo + frac * (sorted_x[i2] - lo)


def bootstrap_difference(sorted_a: np.ndarray, sorted_b: np.ndarray, q: float, resamples: int,
                         rng: np.random.Generator) -> tuple[float, float, float]:
    """95% percentile interval of quantile(a) − quantile(b), and the bootstrap z-test p-value."""
    reps = bootstrap_quantile(sorted_a, q, resamples, rng) - bootstrap_quantile(sorted_b, q, resamples, rng)
    observed = float(np.percentile(sorted_a, 100 * q) - np.percentile(sorted_b, 100 * q))
    lo, hi = np.percentile(reps, [2.5, 97.5])
    se = float(np.std(reps, ddof=1))
    if se == 0.0:
        p = 1.0 if observed == 0.0 else 0.0
    else:
        p = 2.0 * _norm_sf(abs(observed) / se)
    return float(lo), float(hi), p


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Welch's t-test p-value and 95% interval of mean(a) − mean(b) (Welch-Satterthwaite df)."""
    from scipy.special import stdtr, stdtrit
    n1, n2 = len(a), len(b)
    diff = float(np.mean(a) - np.mean(b))
    v1, v2 = float(np.var(a, ddof=1)) / n1, float(np.var(b, ddof=1)) / n2
    if v1 + v2 == 0:          # t undefined: equal constants or different constants
        return (1.0 if diff == 0 else 0.0), diff, diff
    se = math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / (v1 ** 2 / (n1 - 1) + v2 ** 2 / (n2 - 1))
    p = float(2.0 * stdtr(df, -abs(diff) / se))
    half = float(stdtrit(df, 0.975)) * se
    return min(1.0, p), diff - half, diff + half


def brown_forsythe(a: np.ndarray, b: np.ndarray) -> float:
    """Brown-Forsythe test of equal spread: one-way ANOVA F of |x − median| between the two groups."""
    from scipy.special import fdtrc
    za = np.abs(a - np.median(a))
    zb = np.abs(b - np.median(b))
    n1, n2 = len(za), len(zb)
    ma, mb = float(za.mean()), float(zb.mean())
    grand = (ma * n1 + mb * n2) / (n1 + n2)
    between = n1 * (ma - grand) ** 2 + n2 * (mb - grand) ** 2
    within = float(np.sum((za - ma) ** 2) + np.sum((zb - mb) ** 2))
    if within == 0:
        return 1.0 if between == 0 else 0.0
    w = (n1 + n2 - 2) * between / within
    return float(fdtrc(1, n1 + n2 - 2, w))


# --- cells: the pooled runs of one configuration ----------------------------------------------

@dataclass
class Cell:
    """One configuration and its runs: pooled raw samples, per-run and pooled statistics."""

    config: Configuration
    runs: list[Run]
    per_run: dict[int, dict]                # run id -> statistics of that run
    sample_runs: list[Run]                  # runs with raw samples, in pooled order
    bounds: list[tuple[int, int]]           # slice of `samples` per sample run
    samples: np.ndarray                     # pooled raw primary samples (float64)
    stats: dict                             # statistics of the pooled samples (or merged histograms)
    notes: list[str] = field(default_factory=list)
    _sorted: np.ndarray | None = None

    @property
    def hist_runs(self) -> list[Run]:
        return [r for r in self.runs if r.n_samples == 0]

    @property
    def sorted(self) -> np.ndarray:
        if self._sorted is None:
            self._sorted = np.sort(self.samples)
        return self._sorted

    def run_samples(self, run: Run) -> np.ndarray:
        i = [r.id for r in self.sample_runs].index(run.id)
        a, b = self.bounds[i]
        return self.samples[a:b]

    def metric(self, metric: str) -> float | None:
        return self.stats.get(STAT_KEY[metric])

    def per_run_values(self, metric: str) -> list[float]:
        return [s[STAT_KEY[metric]] for s in self.per_run.values() if s.get(STAT_KEY[metric]) is not None]


def load_cells(store: Store, runs: list[Run], *, per_thread: bool = False) -> list[Cell]:
    """Group runs into configurations and load each one's samples once.

    per_thread: each run stands for its worst thread (highest maximum) instead of all its threads.
    """
    cells = []
    for config, members in group_runs(runs).items():
        per_run, arrays, sample_runs, notes, hists, reported = {}, [], [], [], {}, []
        for run in members:
            dist = distribution.of_run(store, run, per_thread=per_thread)
            if dist is None:
                notes.append(f"run {run.id} has neither samples nor a histogram: ignored")
                continue
            per_run[run.id] = dist.stats
            if dist.reported is not None:
                reported.append(run)
            if dist.exact:
                arrays.append(np.asarray(dist.samples, dtype=np.float64))
                sample_runs.append(run)
            elif dist.histogram is not None:
                hists[run.id] = dist.histogram
        bounds, start = [], 0
        for a in arrays:
            bounds.append((start, start + len(a)))
            start += len(a)
        pooled = np.concatenate(arrays) if arrays else np.empty(0)
        hist_runs = [r for r in members if r.id in hists]
        if len(pooled):
            pooled_stats = stats.summarize(pooled)
            if hist_runs:
                notes.append(f"histogram-only run(s) {', '.join(str(r.id) for r in hist_runs)}: not in the pooled "
                             "samples (they count for max only)")
                pooled_stats["max"] = max([pooled_stats["max"], *(per_run[r.id]["max"] for r in hist_runs)])
        elif hist_runs:
            merged = merge_histograms([hists[r.id] for r in hist_runs])
            if merged is not None:
                pooled_stats = stats.summarize_histogram(merged)
                notes.append("histogram-only runs: values from the histogram (percentiles are bucket upper edges, "
                             "stdev from bucket midpoints)")
            else:
                pooled_stats = {k: None for k in stats.STAT_KEYS}
                per = [per_run[r.id] for r in hist_runs]
                n = sum(p["n"] for p in per)
                pooled_stats.update(n=n, max=max(p["max"] for p in per), min=min(p["min"] for p in per),
                                    mean=sum(p["mean"] * p["n"] for p in per) / n if n else None)
                notes.append("histogram-only runs with different buckets: only n, min, mean and max are pooled")
        else:
            pooled_stats = stats.summarize(pooled)
        if reported:
            pooled_stats = distribution.pool_reported(pooled_stats, list(per_run.values()))
            notes.append(f"imported run(s) {', '.join(str(r.id) for r in reported)}: n, min, mean and max are the "
                         "tool's own figures")
        cells.append(Cell(config, members, per_run, sample_runs, bounds, pooled, pooled_stats, notes))
    return cells


# --- baselines --------------------------------------------------------------------------------

@dataclass
class Baseline:
    """Which configuration each other one is compared against: NAME=VALUE pairs, or `defaults`."""

    assignments: list[tuple[str, str]]
    defaults: bool = False
    # Setting and parameter names per group (workload, variant, measure): an assignment applies only
    # to groups that know its name, so one baseline can serve exec runs (priority=normal) and timer
    # runs (kernel=normal) at once.
    _names: dict[tuple, set[str]] | None = field(default=None, repr=False)

    @classmethod
    def parse(cls, items: list[str]) -> "Baseline":
        if not items:
            raise UsageError("name a baseline: --baseline NAME=VALUE (a setting, parameter, workload, variant or "
                             "runtime), or --baseline defaults (the configuration without settings)")
        assignments, defaults = [], False
        for item in items:
            if item.strip() == "defaults":
                defaults = True
                continue
            name, sep, value = item.partition("=")
            if not sep or not name.strip():
                raise UsageError(f"baseline {item!r}: expected NAME=VALUE or `defaults`")
            assignments.append((name.strip(), value.strip()))
        return cls(assignments, defaults)

    @property
    def names(self) -> set[str]:
        return {n for n, _ in self.assignments}

    @property
    def text(self) -> str:
        return " ".join([*(f"{n}={v}" for n, v in self.assignments), *(["defaults"] if self.defaults else [])])

    @staticmethod
    def _group(c: Configuration) -> tuple:
        return (c.workload, c.variant, c.measure, c.unit)

    def bind(self, configs: list[Configuration]) -> None:
        self._names = {}
        for c in configs:
            self._names.setdefault(self._group(c), set()).update(k for k, _ in (*c.settings, *c.params))

    def applicable(self, c: Configuration) -> list[tuple[str, str]]:
        names = None if self._names is None else self._names.get(self._group(c), set())
        return [(n, v) for n, v in self.assignments if names is None or n in CORE_DIMENSIONS or n in names]

    def matches(self, c: Configuration) -> bool:
        if self.defaults and c.settings:
            return False
        assignments = self.applicable(c)
        if not assignments and not self.defaults:
            return False
        return all(value_matches(c.get(n), v) for n, v in assignments)

    def validate(self, configs: list[Configuration]) -> None:
        """A UsageError naming the valid names or values when the baseline matches nothing."""
        self.bind(configs)
        known = set(CORE_DIMENSIONS) | {k for c in configs for k, _ in (*c.settings, *c.params)}
        for name, _ in self.assignments:
            if name not in known:
                raise UsageError(f"baseline names {name!r}, which no selected run has; valid names: "
                                 f"{choices(sorted(known))}")
        if not any(self.matches(c) for c in configs):
            if self.defaults and not self.assignments:
                names = sorted({k for c in configs for k, _ in c.settings})
                values = "; ".join(f"{n}: {', '.join(sorted({value_text(c.get(n)) for c in configs} - {''}))}"
                                   for n in names)
                raise UsageError("no selected configuration runs without settings (--baseline defaults); "
                                 f"name one with --baseline NAME=VALUE; settings of the selected runs: {values}")
            name, value = next(((n, v) for n, v in self.assignments
                                if not any(value_matches(c.get(n), v) for c in configs)), self.assignments[0])
            values = sorted({value_text(c.get(name)) for c in configs} - {""})
            raise UsageError(f"no selected run has the baseline {self.text}; values of {name}: {choices(values)}")

    def find(self, c: Configuration, configs: list[Configuration]) -> tuple[Configuration | None, str]:
        """The baseline of c: same measure, same core dimensions and parameters unless named, most settings
        in common. Returns (baseline, "") or (None, reason)."""
        named = {n for n, _ in self.applicable(c)}
        free = [d for d in CORE_DIMENSIONS if d not in named]

        def comparable(d: Configuration) -> bool:
            return (d.measure, d.unit) == (c.measure, c.unit) and all(getattr(d, x) == getattr(c, x) for x in free) \
                and {k: v for k, v in d.params if k not in named} == {k: v for k, v in c.params if k not in named}

        candidates = [d for d in configs if d != c and self.matches(d) and comparable(d)]
        if not candidates:
            return None, f"no baseline configuration ({self.text}) with the same workload, variant, runtime, " \
                         "parameters and measure"
        settings_names = sorted({k for d in (c, *candidates) for k, _ in d.settings} - named)

        def shared(d: Configuration) -> int:
            if self.defaults:
                return 0
            return sum(value_text(d.settings_dict.get(n)) == value_text(c.settings_dict.get(n))
                       for n in settings_names)

        best = max(shared(d) for d in candidates)
        top = [d for d in candidates if shared(d) == best]
        if len(top) > 1:
            return None, "ambiguous baseline: " + " or ".join(d.label for d in top) + \
                "; add NAME=VALUE to --baseline to choose"
        return top[0], ""


# --- comparisons ------------------------------------------------------------------------------

@dataclass
class Row:
    metric: str
    baseline: float | None
    value: float | None
    test: str
    p: float | None = None
    ci: tuple[float, float] | None = None
    direction: int = 0                  # -1 lower than the baseline, +1 higher (what the test saw)
    reason: str = ""                    # why not tested
    p_holm: float | None = None
    verdict: str = "not tested"
    note: str = ""

    @property
    def diff(self) -> float | None:
        return None if self.value is None or self.baseline is None else self.value - self.baseline

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.baseline:
            return None
        return self.value / self.baseline

    def to_json(self) -> dict:
        return {"metric": self.metric, "baseline": self.baseline, "value": self.value, "difference": self.diff,
                "ratio": self.ratio, "ci95_difference": list(self.ci) if self.ci else None, "test": self.test,
                "p": self.p, "p_holm": self.p_holm, "verdict": self.verdict,
                **({"not_tested_because": self.reason} if self.reason else {}),
                **({"note": self.note} if self.note else {})}


@dataclass
class Comparison:
    cell: Cell
    base: Cell
    rows: list[Row]
    mann_whitney_p: float | None
    cliffs_delta: float | None
    notes: list[str]

    @property
    def magnitude(self) -> str | None:
        return None if self.cliffs_delta is None else magnitude(self.cliffs_delta)

    def row(self, metric: str) -> Row:
        return next(r for r in self.rows if r.metric == metric)


@dataclass
class ComparisonSet:
    baseline: Baseline
    cells: list[Cell]
    comparisons: list[Comparison]
    unmatched: list[tuple[Cell, str]]
    warnings: list[str]
    alpha: float
    resamples: int
    seed: int

    @property
    def labels(self) -> dict[Configuration, str]:
        return short_labels(c.config for c in self.cells)

    def to_json(self) -> dict:
        labels = self.labels
        return {
            "baseline": self.baseline.text, "alpha": self.alpha, "correction": "holm",
            "resamples": self.resamples, "seed": self.seed, "lower_is_better": True,
            "percentile_definition": stats.PERCENTILE_DEFINITION, "tests": TESTS,
            "configurations": [{"label": labels[c.config], "configuration": c.config.key(),
                                "runs": [r.id for r in c.runs], "n_samples": int(len(c.samples)),
                                "is_baseline": self.baseline.matches(c.config), "stats": c.stats,
                                "notes": c.notes} for c in self.cells],
            "comparisons": [{
                "configuration": labels[k.cell.config], "baseline": labels[k.base.config],
                "unit": k.cell.config.unit, "runs": len(k.cell.runs), "baseline_runs": len(k.base.runs),
                "n_samples": int(len(k.cell.samples)), "baseline_n_samples": int(len(k.base.samples)),
                "mann_whitney_p": k.mann_whitney_p, "cliffs_delta": k.cliffs_delta, "magnitude": k.magnitude,
                "rows": [r.to_json() for r in k.rows], "notes": k.notes} for k in self.comparisons],
            "unmatched": [{"configuration": labels[c.config], "reason": why} for c, why in self.unmatched],
            "warnings": self.warnings,
        }


def _rng(seed: int, *names: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, *(zlib.crc32(n.encode()) for n in names)]))


def compare_cells(cell: Cell, base: Cell, *, alpha: float = ALPHA, resamples: int = RESAMPLES,
                  seed: int = SEED) -> Comparison:
    """The rows of one configuration against its baseline, before the Holm correction."""
    x, y = cell.samples, base.samples
    notes: list[str] = []
    rows: list[Row] = []
    mw_p = delta = None
    have_samples = len(x) > 0 and len(y) > 0
    if not have_samples:
        notes.append("no raw samples on one side (histogram-only runs): sample-based tests skipped")
    elif cell.hist_runs or base.hist_runs:
        notes.append("histogram-only runs are left out of the sample-based tests")
    if have_samples:
        mw_p, delta = mann_whitney(cell.sorted, base.sorted, presorted=True)
    for metric in METRICS:
        row = Row(metric, base.metric(metric), cell.metric(metric), TESTS[metric])
        rows.append(row)
        if metric == "max":
            a, b = cell.per_run_values("max"), base.per_run_values("max")
            floor = min_exact_p(len(a), len(b)) if a and b else 1.0
            if floor > alpha:
                row.reason = f"{len(a)} vs {len(b)} runs: the smallest possible p-value is {floor:.2g}"
            else:
                row.p, d = mann_whitney(np.asarray(a, float), np.asarray(b, float))
                row.direction = int(np.sign(d))
            continue
        if not have_samples:
            row.reason = "no raw samples (histogram-only runs)"
            continue
        if metric in ("mean", "stdev") and (len(x) < 2 or len(y) < 2):
            row.reason = "fewer than 2 samples"
            continue
        if metric == "mean":
            row.p, lo, hi = welch(x, y)
            row.ci = (lo, hi)
            row.direction = int(np.sign(row.diff or 0))
        elif metric == "median":
            lo, hi, _ = bootstrap_difference(cell.sorted, base.sorted, 0.5, resamples,
                                             _rng(seed, cell.config.label, base.config.label, metric))
            row.p, row.ci, row.direction = mw_p, (lo, hi), int(np.sign(delta))
        elif metric == "p99":
            lo, hi, row.p = bootstrap_difference(cell.sorted, base.sorted, 0.99, resamples,
                                                 _rng(seed, cell.config.label, base.config.label, metric))
            row.ci, row.direction = (lo, hi), int(np.sign(row.diff or 0))
        elif metric == "stdev":
            row.p = brown_forsythe(x, y)
            row.direction = int(np.sign(row.diff or 0))
    return Comparison(cell, base, rows, mw_p, delta, notes)


def _overlap_note(row: Row, cell: Cell, base: Cell) -> str:
    if row.metric == "max" or row.verdict not in ("better", "worse"):
        return ""
    a, b = cell.per_run_values(row.metric), base.per_run_values(row.metric)
    if len(a) < 2 or len(b) < 2:
        return ""
    if min(a) <= max(b) and min(b) <= max(a):
        return "per-run values overlap: between-run variation is as large as the difference"
    return ""


def check_options(alpha: float, resamples: int) -> None:
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must be between 0 and 1, got {alpha}")
    if resamples < 100:
        raise UsageError(f"resamples must be at least 100, got {resamples}")


def adjust(rows: list[Row], alpha: float) -> None:
    """Holm-correct the tested rows as one family and give each its verdict."""
    tested = [r for r in rows if r.p is not None]
    for r, adj in zip(tested, holm([r.p for r in tested])):
        r.p_holm = adj
        r.verdict = ("better" if r.direction < 0 else "worse") if adj <= alpha and r.direction else \
            "no significant difference"


def compare(cells: list[Cell], baseline: Baseline, *, alpha: float = ALPHA, resamples: int = RESAMPLES,
            seed: int = SEED, min_repetitions: int = MIN_REPETITIONS) -> ComparisonSet:
    """Compare every configuration with its baseline; Holm-correct all p-values as one family."""
    check_options(alpha, resamples)
    configs = [c.config for c in cells]
    baseline.validate(configs)
    by_config = {c.config: c for c in cells}
    comparisons, unmatched = [], []
    for cell in cells:
        if baseline.matches(cell.config):
            continue
        base, why = baseline.find(cell.config, configs)
        if base is None:
            unmatched.append((cell, why))
            continue
        comparisons.append(compare_cells(cell, by_config[base], alpha=alpha, resamples=resamples, seed=seed))
    adjust([r for k in comparisons for r in k.rows], alpha)
    for k in comparisons:
        for r in k.rows:
            r.note = _overlap_note(r, k.cell, k.base)
    labels = short_labels(configs)
    warnings = []
    few = [c for c in cells if len(c.runs) < min_repetitions and
           (baseline.matches(c.config) or any(k.cell is c for k in comparisons))]
    if few:
        warnings.append(f"fewer than {min_repetitions} runs of " + "; ".join(
            f"{labels[c.config]} ({len(c.runs)})" for c in few) +
            ": between-run variation is unknown, and the tests treat pooled samples as independent")
    return ComparisonSet(baseline, cells, comparisons, unmatched, warnings, alpha, resamples, seed)


def compare_runs(store: Store, runs: list[Run], baseline_items: list[str], *, per_thread: bool = False,
                 **kw: Any) -> ComparisonSet:
    return compare(load_cells(store, runs, per_thread=per_thread), Baseline.parse(baseline_items), **kw)


# --- baselines from runs stored earlier ------------------------------------------------------

@dataclass
class EarlierComparisonSet(ComparisonSet):
    """A ComparisonSet whose baselines are runs stored earlier (another experiment, a tag) instead of
    configurations among the compared runs. `cells` holds the compared cells, then `base_cells`."""

    base_cells: list[Cell] = field(default_factory=list)
    source: str = ""            # how the baseline runs were selected, e.g. "tag nightly-2026-11-20"

    @property
    def baseline_text(self) -> str:
        named = self.baseline.text
        return f"the runs of {self.source}" + (f" ({named})" if named else ", the same configuration")

    def to_json(self) -> dict:
        out = super().to_json()
        base = {id(c) for c in self.base_cells}
        for cell, entry in zip(self.cells, out["configurations"]):
            entry["is_baseline"] = id(cell) in base
        out["baseline"] = self.baseline_text
        out["baseline_selection"] = self.source
        return out


def compare_with_earlier(cells: list[Cell], base_cells: list[Cell], baseline: Baseline | None = None, *,
                         source: str = "earlier runs", alpha: float = ALPHA, resamples: int = RESAMPLES,
                         seed: int = SEED, min_repetitions: int = MIN_REPETITIONS) -> EarlierComparisonSet:
    """Compare every configuration of `cells` with a configuration of `base_cells`, runs stored earlier.

    Each cell is paired with the earlier cell of the same configuration (workload, variant, runtime,
    settings, parameters, measure). With a `baseline` (NAME=VALUE, `defaults`), a cell that does not itself
    match it is paired as `compare` pairs within one set (Baseline.find), among the earlier
    configurations. Every p-value of the set is one Holm family, as in `compare`."""
    check_options(alpha, resamples)
    baseline = baseline or Baseline([])
    base_configs = [c.config for c in base_cells]
    if baseline.assignments or baseline.defaults:     # bind it to the earlier configurations' names
        try:
            baseline.validate(base_configs)
        except UsageError as e:
            raise UsageError(f"baseline runs ({source}): {e}") from None
    by_config = {c.config: c for c in base_cells}
    named = bool(baseline.assignments or baseline.defaults)
    comparisons, unmatched = [], []
    for cell in cells:
        if cell.config in by_config and (not named or baseline.matches(cell.config)):
            base, why = cell.config, ""
        elif named:
            base, why = baseline.find(cell.config, base_configs)
            why = why and f"{why} among the runs of {source}"
        else:
            base, why = None, f"no configuration with the same workload, variant, runtime, settings, " \
                              f"parameters and measure among the runs of {source}"
        if base is None:
            unmatched.append((cell, why))
            continue
        comparisons.append(compare_cells(cell, by_config[base], alpha=alpha, resamples=resamples, seed=seed))
    adjust([r for k in comparisons for r in k.rows], alpha)
    used = {id(k.base): k.base for k in comparisons}
    warnings = []
    few = [c for c in (*(k.cell for k in comparisons), *used.values()) if len(c.runs) < min_repetitions]
    if few:
        labels = short_labels([*(c.config for c in cells), *base_configs])
        warnings.append(f"fewer than {min_repetitions} runs of " + "; ".join(
            f"{labels[c.config]}{' (baseline)' if id(c) in used else ''} ({len(c.runs)})" for c in few) +
            ": their between-run variation rests on too few runs; repeat each configuration 5 times or more")
    return EarlierComparisonSet(baseline, [*cells, *base_cells], comparisons, unmatched, warnings, alpha,
                                resamples, seed, base_cells=base_cells, source=source)
