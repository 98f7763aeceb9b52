"""The worst case with a bound: a tail analysis of one run or of one configuration's runs (docs/tail.md).

A pipeline of small steps over a run's samples, loaded once:

1. the assumptions (tail_checks): independence and stationarity of each run's exceedances, and for several
   runs their tails' homogeneity; a failed check refuses the bound, names the check, why it matters and what
   to do, and nothing is fitted;
2. the fit (tail_fit): peaks over a threshold with scipy's genpareto, the threshold chosen by the stated rule
   with its goodness-of-fit test (a failed test at every candidate refuses the bound too); block maxima with
   genextreme as the second method, a cross-check;
3. the levels: the latency exceeded with probability p per sample for p = 1e-3 … 1e-12 with its 95 %
   profile-likelihood interval, the chance of exceeding it within an hour at the run's sample rate, and how
   many times the samples would halve the interval.

The run is the unit of replication: a configuration's runs are checked one by one (their exceedances are
never paired across runs), tested for a common tail, and only then pooled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from ..errors import UsageError, choices
from ..store import Run, Store
from . import tail_checks as checks
from . import tail_fit as fits
from .tail_checks import Check

if TYPE_CHECKING:
    from .distribution import Distribution

LEVELS = tuple(10.0 ** -e for e in range(3, 13))
BOUND_P = 1e-9                # the level `show`, `compare` and `monitor` state (docs/tail.md, "Where it shows")
MIN_SAMPLES = 10_000          # the checks and the fit need 100 exceedances of the 0.99 quantile
SHAPE_EXPONENTIAL = 0.05      # |ξ| below this (or an interval holding 0): an exponential tail


@dataclass
class Level:
    p: float
    value: float
    ci: tuple[float, float | None]
    per_hour: float | None          # P(at least one sample above value within an hour), at the run's rate
    halve: float | None             # times the samples that would halve the interval
    n: int = 0                      # samples the level comes from

    @property
    def more_samples(self) -> int | None:
        """How many more samples (at the same threshold quantile) would halve the interval, to 2 digits."""
        if self.halve is None:
            return None
        more = (self.halve - 1) * self.n
        return int(float(f"{more:.2g}")) if more > 0 else 0

    def to_json(self) -> dict:
        return {"p": self.p, "value_ns": self.value, "ci95_ns": [self.ci[0], self.ci[1]],
                "p_per_hour": self.per_hour, "samples_factor_to_halve": self.halve,
                "more_samples_to_halve": self.more_samples}


@dataclass
class Tail:
    subject: dict                   # {"run": id} or {"configuration": label}
    n: int
    checks: list[Check]
    fit: fits.GpdFit | None = None
    gev: fits.GevFit | None = None
    levels: list[Level] = field(default_factory=list)
    rate_hz: float | None = None
    histogram: bool = False
    notes: list[str] = field(default_factory=list)
    max: float | None = None        # the largest sample seen (a histogram's exact maximum)

    @property
    def failed(self) -> Check | None:
        return next((c for c in self.checks if c.passed is False), None)

    @property
    def claimed(self) -> bool:
        return self.failed is None and self.fit is not None

    @property
    def refused_because(self) -> str | None:
        f = self.failed
        return None if f is None else f"{f.name}: {f.why}"

    @property
    def shape_meaning(self) -> str:
        return shape_meaning(self.fit) if self.fit else ""

    def model_json(self) -> dict | None:
        if not self.claimed:
            return None
        f = self.fit
        return {"method": "peaks over threshold (generalised Pareto, maximum likelihood)", "threshold_ns": f.ex.u,
                "threshold_quantile": f.quantile, "shape": f.shape, "shape_se": f.shape_se,
                "shape_meaning": self.shape_meaning, "scale": f.scale, "exceedances": f.ex.k,
                "gof": {"test": f.gof_test, "p": f.gof_p},
                "interval": "profile likelihood, 95 %",
                "data": "bucket intervals (censored likelihood) and the exact maximum" if self.histogram
                        else "every exceedance", "sample_rate_hz": self.rate_hz,
                "block_maxima": self.gev.to_json(LEVELS) if self.gev else None}

    def to_json(self) -> dict:
        out = {**self.subject, "n": self.n, "checks": [c.to_json() for c in self.checks], "claimed": self.claimed,
               "refused_because": self.refused_because, "model": self.model_json()}
        if self.claimed:
            out["levels"] = [lv.to_json() for lv in self.levels]
        out["notes"] = self.notes
        return out


def shape_meaning(fit: fits.GpdFit) -> str:
    """What the shape says, from its 95 % Wald interval."""
    lo, hi = fit.shape - 1.96 * fit.shape_se, fit.shape + 1.96 * fit.shape_se
    if abs(fit.shape) < SHAPE_EXPONENTIAL or lo <= 0 <= hi:
        return "exponential tail (shape ≈ 0): each decade of p adds about the same latency"
    if fit.shape < 0:
        return (f"bounded tail (shape < 0): the fit puts an end point at about "
                f"{(fit.ex.u + fit.scale / -fit.shape) / 1e3:,.0f} µs")
    return "heavy tail (shape > 0): each decade of p adds more latency than the last"


# --- the pipeline ----------------------------------------------------------------------------------------

def analyse(series: list[np.ndarray], subject: dict, rate_hz: float | None = None, *, gev: bool = True,
            levels: tuple[float, ...] = LEVELS, intervals: bool = True, fit_below: float | None = None) -> Tail:
    """The tail of one run (one array) or of a configuration's runs (one array each), in measurement order.
    gev=False: without the block-maxima cross-check (simulations that look at the bound alone); `levels`: the
    p to state; intervals=False: their point values alone (no profile likelihood; `ci` is (None, None));
    fit_below: fit even when a check failed, unless its p is below this (compare's tail row corrects the checks
    of a configuration's runs for their number: the Tail still reports the check as failed, not claimed)."""
    series = [np.asarray(x, dtype=float) for x in series]
    n = sum(len(x) for x in series)
    need(n, subject)
    cks = []
    indicators = []
    for x in series:
        k = checks.reference_k(len(x))
        indicators.append(x > checks.reference_threshold(x, k) if k >= 10 else np.zeros(len(x), bool))
    cks += [checks.independence(indicators), checks.stationarity(indicators)]
    pooled = series[0] if len(series) == 1 else np.concatenate(series)
    if len(series) > 1:
        u = checks.reference_threshold(pooled, checks.reference_k(n))
        cks.append(checks.homogeneity([int(np.count_nonzero(x > u)) for x in series], [len(x) for x in series]))
    tail = Tail(subject, n, cks, rate_hz=rate_hz, max=float(max(float(np.max(x)) for x in series if len(x))))
    if any(c.passed is False and (fit_below is None or c.p is None or c.p < fit_below) for c in cks):
        return tail
    cands = fits.candidates(n)
    kmax = max(k for _, k in cands)
    top = np.sort(np.partition(pooled, n - kmax - 2)[n - kmax - 2:])
    _fit(tail, lambda k: fits.excesses_exact(top, n, k), n, levels, intervals)
    if tail.fit is not None and tail.fit.ex.resolution is not None:
        tail.notes.append(f"the exceedances are quantised to {tail.fit.ex.resolution / 1e3:g} µs: each value v is "
                          "taken as the interval [v, v + step) (censored likelihood), the threshold as the next step")
    if tail.claimed and gev:
        tail.gev = fits.fit_gev(series)
    return tail


def analyse_histogram(hist: dict, subject: dict, rate_hz: float | None = None,
                      runs: list[dict] | None = None, *, levels: tuple[float, ...] = LEVELS,
                      intervals: bool = True) -> Tail:
    """The tail of a histogram-only run, or of runs' histograms merged (`hist`; `runs`: each run's, same
    buckets): no order, so no independence or stationarity check, and the fit sees bucket intervals
    (tail_fit's docstring). Several runs are tested for homogeneity over a common bucket edge."""
    n = int(hist.get("n", sum(hist["counts"]) + int(hist.get("overflow", 0))))
    need(n, subject)
    cks = [checks.unordered("independence"), checks.unordered("stationarity")]
    if runs and len(runs) > 1:
        edge = fits.excesses_histogram(hist, checks.reference_k(n))
        if edge is None:
            cks.append(Check("run homogeneity", None, None, None, "not testable: too few exceedances"))
        else:
            cks.append(checks.homogeneity([_above(h, edge.u) for h in runs], [_count(h) for h in runs]))
    tail = Tail(subject, n, cks, rate_hz=rate_hz, histogram=True,
                max=None if hist.get("max") is None else float(hist["max"]))
    if tail.failed:
        return tail
    bucket = float(hist['bucket_width']) / 1e3
    tail.notes.append(f"histogram-only: the excesses are known to a bucket ({bucket:g} µs) and the maximum exactly; "
                      "the threshold is a bucket edge; independence and stationarity cannot be tested (no sample "
                      "order); no block-maxima cross-check")
    _fit(tail, lambda k: fits.excesses_histogram(hist, k), n, levels, intervals)
    return tail


def _count(h: dict) -> int:
    return int(h.get("n", sum(h["counts"]) + int(h.get("overflow", 0))))


def _above(h: dict, edge: float) -> int:
    """How many of a histogram's samples lie at or above a bucket edge."""
    first = int(round((edge - float(h.get("min_value", 0))) / float(h["bucket_width"])))
    return int(sum(h["counts"][first:])) + int(h.get("overflow", 0))


def need(n: int, subject: dict) -> None:
    if n < MIN_SAMPLES:
        what = f"run {subject['run']}" if "run" in subject else "the configuration"
        raise UsageError(f"{what} has {n:,} samples; a tail bound needs at least {MIN_SAMPLES:,} (100 beyond the "
                         f"0.99 quantile): measure longer (more iterations) or pool more runs")


def _fit(tail: Tail, excesses_of, n: int, levels: tuple[float, ...] = LEVELS, intervals: bool = True) -> None:
    chosen, tried = fits.choose(excesses_of, n)
    if chosen is None:
        last = tried[-1] if tried else None
        tail.checks.append(Check(
            "goodness of fit", last.gof_statistic if last else None, last.gof_p if last else None, False,
            f"no candidate threshold ({', '.join(f'{f.quantile:g}' for f in tried) or 'none'}) gives a generalised "
            f"Pareto tail that passes its test (p ≥ {fits.GOF_ALPHA}) with a stable shape; the tail is not one "
            "extreme-value family (a mixture of causes?). Measure longer, on a quieter machine, or per condition"
            + ("" if not tried or tried[-1].ex.y is not None else
               f"; with buckets or a clock step this coarse the tail may span too few distinct values to test "
               f"(a candidate needs {fits.MIN_GROUPS} groups of ≥ 5 expected): a finer resolution helps")))
        return
    tail.checks.append(Check("goodness of fit", chosen.gof_statistic, chosen.gof_p, True,
                             f"{chosen.gof_test} of the {chosen.ex.k:,} exceedances against the fit"))
    tail.fit = chosen
    levels = [p for p in levels if p < chosen.ex.zeta]
    if intervals:
        fits.profile_region(chosen)
    for p, (lo, hi, halve) in zip(levels, fits.intervals(chosen, levels) if intervals
                                  else [(None, None, None)] * len(levels)):
        per_hour = -math.expm1(tail.rate_hz * 3600 * math.log1p(-p)) if tail.rate_hz else None
        tail.levels.append(Level(p, float(chosen.level(p)), (lo, hi), per_hour, halve, n))


# --- stored runs -----------------------------------------------------------------------------------------

def rate_of(runs: list[Run], n: int) -> float | None:
    """Samples per second over the runs' measured time (None: a run lacks its start or end)."""
    total = 0.0
    for r in runs:
        try:
            t0 = datetime.fromisoformat(str(r.started_at).replace("Z", "+00:00"))
            t1 = datetime.fromisoformat(str(r.finished_at).replace("Z", "+00:00"))
        except (TypeError, ValueError):
            return None
        total += (t1 - t0).total_seconds()
    return n / total if total > 0 else None


def of_run(store: Store, run: Run, dist: Distribution | None = None, *, levels: tuple[float, ...] = LEVELS,
           intervals: bool = True, gev: bool = True) -> Tail:
    """The tail of one stored run (its samples loaded once, or its histogram; `dist`: the run's distribution
    when the caller has it). levels, intervals, gev: as analyse's."""
    from .distribution import of_run as distribution
    dist = distribution(store, run) if dist is None else dist
    if dist is None or (dist.samples is None and dist.histogram is None):
        raise UsageError(f"run {run.id} kept neither samples nor a histogram: it has no tail to fit")
    if dist.samples is not None:
        return analyse([dist.samples], {"run": run.id}, rate_of([run], len(dist.samples)), gev=gev,
                       levels=levels, intervals=intervals)
    return analyse_histogram(dist.histogram, {"run": run.id}, rate_of([run], _count(dist.histogram)),
                             levels=levels, intervals=intervals)


def of_runs(store: Store, runs: list[Run], *, levels: tuple[float, ...] = LEVELS, intervals: bool = True,
            gev: bool = True) -> Tail:
    """The tail of one configuration's runs (a UsageError naming the configurations when they are several).
    levels, intervals, gev: as analyse's."""
    from .distribution import measured
    from .select import group_runs
    groups = group_runs(runs)
    if len(groups) > 1:
        raise UsageError(f"the selection holds {len(groups)} configurations: "
                         f"{choices(c.label for c in groups)}; choose one with --where NAME=VALUE")
    config, members = next(iter(groups.items()))
    loaded = [(r, *measured(store, r)) for r in members]   # not summarised: the tail needs none of the statistics
    return _of_loaded({"configuration": config.label}, [(r, x) for r, x, _ in loaded if x is not None],
                      [(r, h) for r, _, h in loaded if h is not None], gev=gev, levels=levels, intervals=intervals)


def of_cell(cell, *, gev: bool = True, levels: tuple[float, ...] = LEVELS) -> Tail:
    """The tail of a configuration already loaded for compare or the report (an analysis.compare.Cell): its
    samples as loaded, not read again; the same analysis as of_runs on its runs (gev=False: without the
    block-maxima cross-check, for views that do not show it; levels: the p to state, as analyse's)."""
    from .threads import run_histogram
    hist = [(r, h) for r in cell.hist_runs if (h := run_histogram(r)) is not None]
    return _of_loaded({"configuration": cell.config.label}, [(r, cell.run_samples(r)) for r in cell.sample_runs],
                      hist, gev=gev, levels=levels)


def _of_loaded(subject: dict, raw: list[tuple[Run, np.ndarray]], hist: list[tuple[Run, dict]], *,
               gev: bool = True, levels: tuple[float, ...] = LEVELS, intervals: bool = True) -> Tail:
    """One configuration's tail from its runs' loaded samples (`raw`) or histograms (`hist`), not both."""
    from .stats import merge_histograms
    if raw and hist:
        raise UsageError(f"runs {', '.join(str(r.id) for r, _ in hist)} kept only histograms and runs "
                         f"{', '.join(str(r.id) for r, _ in raw)} raw samples: select one kind with --run")
    if raw:
        tail = analyse([x for _, x in raw], subject, rate_of([r for r, _ in raw], sum(len(x) for _, x in raw)),
                       gev=gev, levels=levels, intervals=intervals)
    elif hist:
        merged = merge_histograms([h for _, h in hist])
        if merged is None:
            raise UsageError("the runs' histograms have different buckets and cannot be pooled; analyse each run")
        tail = analyse_histogram(merged, subject, rate_of([r for r, _ in hist], int(merged["n"])),
                                 runs=[h for _, h in hist], levels=levels, intervals=intervals)
    else:
        raise UsageError("no selected run kept samples or a histogram")
    tail.notes.insert(0, f"runs {', '.join(str(r.id) for r, _ in (raw or hist))}")
    return tail


# --- the worst case in one line: show, monitor ------------------------------------------------------------

# A failed check in a few words (the whole reason: `rtscope tail`).
SHORT_REASON = {"independence": "late samples come in bursts", "stationarity": "the tail drifts during the run",
                "run homogeneity": "the runs' tails differ", "goodness of fit": "no extreme-value model fits the tail"}


NOT_CLAIMED = "not claimed"


def bound_or_reason(value: float | None, reason: str | None) -> tuple[float | None, str | None]:
    """A bound as the lab shows it (its page, `rtscope lab`, the running bound recorded): (its value, None),
    or (None, why there is none)."""
    return (value, None) if value is not None else (None, reason or NOT_CLAIMED)


@dataclass
class WorstCase:
    """The largest sample seen and, when the tail analysis claims one, the bound at BOUND_P per sample."""

    max: float | None               # the largest sample seen (ns); None: not known
    n: int
    level: Level | None = None      # the bound at BOUND_P with its 95 % interval, when claimed
    refused: Check | None = None    # the check that refused the bound
    not_analysed: str | None = None  # why there is no tail analysis at all (too few samples, no samples)
    untested: tuple[str, ...] = ()   # checks the data could not support (a histogram has no sample order)

    @property
    def short_reason(self) -> str | None:
        """Why there is no bound, in a few words (None: there is one)."""
        if self.refused is not None:
            return f"refused by the {self.refused.name} check: {SHORT_REASON.get(self.refused.name, '')}".rstrip(": ")
        return self.not_analysed

    def to_json(self) -> dict:
        lv = self.level
        return {"max_ns": self.max, "n": self.n, "p": BOUND_P, "claimed": lv is not None,
                "value_ns": lv.value if lv else None, "ci95_ns": [lv.ci[0], lv.ci[1]] if lv else None,
                "p_per_hour": lv.per_hour if lv else None,
                "refused_by": self.refused.name if self.refused else None,
                "refused_because": f"{self.refused.name}: {self.refused.why}" if self.refused else None,
                "not_analysed_because": self.not_analysed, "untested": list(self.untested)}


def worst_case_of(tail: Tail, maximum: float | None) -> WorstCase:
    level = next((lv for lv in tail.levels if lv.p == BOUND_P), None) if tail.claimed else None
    return WorstCase(maximum, tail.n, level, tail.failed, None if tail.claimed or tail.failed else
                     f"p = {BOUND_P:g} lies above the fitted tail's threshold rate",
                     tuple(c.name for c in tail.checks if c.passed is None))


def _not_analysed(n: int, error: UsageError) -> str:
    if n < MIN_SAMPLES:
        return f"a bound needs {MIN_SAMPLES:,} samples or more"
    return "the run kept neither samples nor a histogram" if "neither" in str(error) else str(error)


def run_worst_case(store: Store, run: Run, dist: Distribution | None) -> WorstCase:
    """`show`'s worst case: the run's maximum and its bound at BOUND_P (from `dist`, loaded once)."""
    maximum = dist.stats.get("max") if dist is not None else None
    n = int(dist.stats.get("n") or 0) if dist is not None else 0
    try:
        tail = of_run(store, run, dist, levels=(BOUND_P,), gev=False)
    except UsageError as e:
        return WorstCase(maximum, n, not_analysed=_not_analysed(n, e))
    return worst_case_of(tail, maximum)


def runs_worst_case(store: Store, runs: list[Run]) -> WorstCase:
    """`monitor`'s worst case: one configuration's runs (histograms merged or samples pooled)."""
    try:
        tail = of_runs(store, runs, levels=(BOUND_P,), gev=False)
    except UsageError as e:
        from .distribution import of_run as distribution
        found = [d.stats for d in (distribution(store, r) for r in runs) if d is not None]
        maximum = max((st["max"] for st in found if st.get("max") is not None), default=None)
        n = sum(int(st.get("n") or 0) for st in found)
        return WorstCase(maximum, n, not_analysed=_not_analysed(n, e))
    return worst_case_of(tail, tail.max)


# --- one run's bound, for compare's tail row -------------------------------------------------------------

@dataclass
class RunBound:
    """One run's point bound at BOUND_P (its own checks and fit, no interval), or in a few words why none."""

    value: float | None
    short: str | None = None        # "refused: independence", "fewer than 10,000 samples", ...
    note: str | None = None         # a check failed alone but not after the correction for the runs' number

    def to_json(self) -> dict:
        return {"value_ns": self.value, "no_bound": self.short, **({"note": self.note} if self.note else {})}


def run_bound(samples: np.ndarray | None, hist: dict | None, runs: int = 1) -> RunBound:
    """A run's bound at BOUND_P from its samples (in measurement order) or its histogram. runs: how many runs
    its configuration has: a check refuses the run when its p is below tail_checks.ALPHA / runs (Bonferroni:
    the chance that any of the configuration's runs is refused by chance stays within ALPHA per check)."""
    subject = {"run": 0}
    alpha = checks.ALPHA / max(1, runs)
    try:
        if samples is not None:
            tail = analyse([samples], subject, gev=False, levels=(BOUND_P,), intervals=False, fit_below=alpha)
        elif hist is not None:
            tail = analyse_histogram(hist, subject, levels=(BOUND_P,), intervals=False)
        else:
            return RunBound(None, "no samples or histogram")
    except UsageError:
        return RunBound(None, f"fewer than {MIN_SAMPLES:,} samples")
    failed = [c for c in tail.checks if c.passed is False]
    if tail.fit is not None and tail.levels and all(c.p is not None and c.p >= alpha for c in failed):
        note = "; ".join(f"{c.name} p {c.p:.2g} ≥ {alpha:.2g} (0.01 over {runs} runs)" for c in failed)
        return RunBound(tail.levels[0].value, note=note or None)
    refused = next((c for c in failed if c.p is None or c.p < alpha), tail.failed)
    return RunBound(None, f"refused: {refused.name}" if refused else NOT_CLAIMED)
