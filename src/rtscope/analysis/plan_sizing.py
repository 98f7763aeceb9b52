"""Plans: how many runs × samples per run a comparison needs, and what they cost in wall time.

A verdict compares two configurations by Welch's t-test on their *per-run* statistics (the run is the unit
of replication). With r runs of n samples each, the variance of the mean of one configuration's per-run
values is

    (σ²_b + c_w / n) / r

with σ²_b the between-run variance of the statistic and c_w / n the within-run estimation variance of one
run's statistic at n samples (c_w = within_var × the pilot's samples per run; variance.Components). Two
such configurations differ by Δ = detect × value; a two-sided Welch test at level α detects Δ with

    power = P(|T| > t_{1−α/2, df_W}),  T ~ noncentral t(2(r − 1), Δ / √(2·(σ²_b + c_w/n) / r))

where df_W is the Welch–Satterthwaite df of the two groups' sample variances, itself random: between r − 1
and 2(r − 1); `power_of` averages over it (with 3 or 4 runs that costs several points of power against the
plain df = 2(r − 1)). The usual closed form 2·(σ²_b + c_w/n) / r ≤ (Δ / (t_{1−α/2, df} + t_{power, df}))²
is the same condition up to the noncentral t's skew and df_W's spread (`runs_closed_form`, within a run of
it from 10 runs on); `runs_needed` iterates r upwards until the exact power reaches the target.

Samples per run (Kalibera & Jones, "Rigorous benchmarking in reasonable time", ISMM 2013). A run costs
T_start + n·t_sample of wall time; the total cost r·(T_start + n·t_sample) at a fixed variance of the mean
is smallest at

    n* = √(c_w · T_start / (σ²_b · t_sample))

More samples than n* buy little, since σ²_b does not shrink with n; fewer waste the start-up of each run.
n* is clamped to [min_samples, MAX_SAMPLES] (infinite when σ²_b = 0); then r follows, and with r fixed,
n is lowered to the fewest samples that still reach the power (r is an integer, rounded up, so n* usually
gives more power than needed).

A pilot of a few runs estimates σ²_b poorly (with 5 runs, within a factor of 2.5 either way for 90 %
confidence); `upper_between` replaces it with an upper confidence limit (`rtscope plan --upper 0.8`).

When σ²_b alone needs more than MAX_RUNS runs (the change is smaller than the run-to-run variation can
resolve in reasonable time), the plan is infeasible and says which change MAX_RUNS runs would detect.

A maximum has no within-run estimate (its value grows with n): its plan keeps the pilot's n and sizes r
from the variance of the per-run maxima.

The cost of a run (`estimate_cost`): T_start and t_sample from the pilot runs' wall time. A run's probe
time is finished_at − started_at (stamped by the probe itself, ms resolution); when the runs differ in n,
a least-squares line probe time = a + b·n gives t_sample = b and the probe's own start-up a; otherwise the
probe time is split with a per-sample time known from the workload (exec, gpio: the mean sample plus
`pause_ms`), else all of it is counted as sample time. What the probe does not see — launching the probe
(a VM's boot), applying and undoing settings, storing the previous run — is the gap between one run's
finish and the next run's start; its median is added to T_start.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..errors import UsageError, choices
from .defaults import ALPHA, METRICS

POWER = 0.8
MIN_RUNS = 3              # compare warns below 3 runs (its between-run variation is unknown); 2 is the bare minimum
MAX_RUNS = 100            # more runs per configuration than this is not "reasonable": the plan says so
MIN_SAMPLES = 10
MIN_SAMPLES_QUANTILE = {"p99": 200}   # a p99 of fewer samples is an extreme order statistic, not a quantile
MAX_SAMPLES = 10_000_000
_SEARCH_RUNS = 100_000    # runs_needed looks this far for the infeasible plan's figure


# --- inputs -----------------------------------------------------------------------------------------------------

def parse_detect(text: str) -> float:
    """`5%` or `0.05` -> 0.05: the relative change to detect, in (0, 10]."""
    raw = str(text).strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"--detect {text!r}: expected a relative change such as 5% or 0.05") from None
    if not math.isfinite(value) or value <= 0 or value > 10:
        raise UsageError(f"--detect {text!r}: the change must be above 0 and at most 1000% (5% or 0.05)")
    return value


def check_options(metric: str, alpha: float, power: float) -> None:
    if metric not in METRICS:
        raise UsageError(f"unknown metric {metric!r}; valid metrics: {choices(METRICS)}")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {alpha}")
    if not 0.5 <= power < 1:
        raise UsageError(f"--power must be at least 0.5 and below 1, got {power}")


# --- the statistics ---------------------------------------------------------------------------------------------

def run_variance(between_var: float, c_w: float, n: float) -> float:
    """Variance of one run's statistic at n samples: σ²_b + c_w / n."""
    return between_var + (c_w / n if c_w else 0.0)


_NODES = 24   # quantiles of the variance split B at which Welch's critical value is averaged (power_of)


def power_of(delta: float, var_run: float, runs: int, alpha: float = ALPHA, welch: bool = True) -> float:
    """Power of the two-sided Welch test on per-run values, `runs` runs on each side, to detect |Δ|.

    With equal variances and equal r, Welch's statistic is Student's pooled t, noncentral t with df 2(r − 1) and
    noncentrality Δ / √(2v/r); only its critical value differs: t_{1−α/2} at the Welch–Satterthwaite df
    (r − 1) / (B² + (1 − B)²), where B = s₁² / (s₁² + s₂²) ~ Beta((r−1)/2, (r−1)/2) is independent of the
    statistic. The power is averaged over B's quantiles (with few runs Welch's df, down to r − 1, costs power
    that df = 2(r − 1) does not show). welch=False: Student's t-test."""
    import numpy as np
    from scipy.special import nctdtr
    if runs < 2:
        return 0.0
    if var_run <= 0:
        return 1.0 if delta else 0.0
    df = 2.0 * (runs - 1)
    ncp = abs(delta) / math.sqrt(2.0 * var_run / runs)
    crit = _critical(runs, alpha, welch)
    if ncp - float(np.max(crit)) > 12.0:       # beyond nctdtr's accuracy, and power is 1 to 1e-30
        return 1.0
    p = 1.0 - nctdtr(df, ncp, crit) + nctdtr(df, ncp, -crit)
    if not np.all(np.isfinite(p)):    # nctdtr fails for some large df: the normal limit
        from scipy.special import ndtr
        p = 1.0 - ndtr(crit - ncp) + ndtr(-crit - ncp)
    return min(1.0, max(0.0, float(np.mean(p))))


@functools.lru_cache(maxsize=4096)
def _critical(runs: int, alpha: float, welch: bool):
    """Welch's critical values at the quantiles of B (power_of), or Student's one."""
    import numpy as np
    from scipy.special import betaincinv, stdtrit
    if not welch:
        return np.asarray([stdtrit(2.0 * (runs - 1), 1.0 - alpha / 2.0)])
    half = (runs - 1) / 2.0
    b = betaincinv(half, half, (np.arange(_NODES) + 0.5) / _NODES)
    return stdtrit((runs - 1) / (b * b + (1.0 - b) ** 2), 1.0 - alpha / 2.0)


def runs_closed_form(delta: float, var_run: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The textbook r: 2·v·(t_{1−α/2, df} + t_{power, df})² / Δ², iterated over df = 2(r − 1) (not rounded)."""
    from scipy.special import stdtrit
    r = 2.0
    for _ in range(100):
        df = 2.0 * (max(r, 2.0) - 1.0)
        q = float(stdtrit(df, 1.0 - alpha / 2.0) + stdtrit(df, power))
        new = max(2.0, 2.0 * var_run * q * q / (delta * delta))
        if abs(new - r) < 1e-9:
            break
        r = new
    return r


def runs_needed(delta: float, var_run: float, alpha: float = ALPHA, power: float = POWER,
                min_runs: int = MIN_RUNS, limit: int = _SEARCH_RUNS, welch: bool = True) -> int | None:
    """The fewest runs per configuration (≥ min_runs) whose power reaches `power`; None beyond `limit`."""
    if power_of(delta, var_run, min_runs, alpha, welch) >= power:
        return min_runs
    if power_of(delta, var_run, limit, alpha, welch) < power:
        return None
    lo, hi = min_runs, limit          # power(lo) < power ≤ power(hi); power grows with r
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power_of(delta, var_run, mid, alpha, welch) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def detectable(var_run: float, runs: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest |Δ| that `runs` runs per configuration detect with `power`."""
    if var_run <= 0:
        return 0.0
    lo, hi = 0.0, math.sqrt(var_run)
    while power_of(hi, var_run, runs, alpha) < power:
        hi *= 2.0
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if power_of(mid, var_run, runs, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def optimal_samples(between_var: float, c_w: float, start_ns: float, sample_ns: float) -> float:
    """Kalibera & Jones's n* = √(c_w·T_start / (σ²_b·t_sample)): the samples per run of the cheapest plan."""
    if c_w <= 0:
        return 0.0
    if between_var <= 0 or sample_ns <= 0:
        return math.inf
    return math.sqrt(c_w * max(start_ns, 0.0) / (between_var * sample_ns))


def upper_between(total_var: float, within_var: float | None, runs: int, level: float) -> float:
    """σ²_b from the `level` upper confidence limit of the per-run values' variance (χ² with runs − 1 df):
    a pilot of few runs underestimates σ²_b about half the time, and a plan sized on the estimate then misses
    its power about as often (Browne 1995: size on an upper limit of the pilot's variance)."""
    from scipy.special import chdtri
    df = runs - 1
    if df < 1:
        raise ValueError("an upper limit needs at least 2 runs")
    upper = total_var * df / float(chdtri(df, level))
    return max(0.0, upper - (within_var or 0.0))


# --- cost -------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cost:
    """A run's wall time: start_ns (T_start: launch, settings, storing, the probe's own start) + n × sample_ns."""

    start_ns: float
    sample_ns: float
    how: str = ""

    def run_ns(self, n: float) -> float:
        return self.start_ns + n * self.sample_ns

    def to_json(self) -> dict:
        return {"start_s": self.start_ns / 1e9, "sample_ms": self.sample_ns / 1e6, "how": self.how}


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


def estimate_cost(samples: Sequence[int], probe_ns: Sequence[float], gaps_ns: Iterable[float] = (),
                  per_sample_ns: float | None = None) -> Cost:
    """T_start and t_sample from pilot runs (see the module doc): samples and probe time per run, the gaps
    between runs (outside the probe), and a per-sample time the workload implies (None: unknown)."""
    pairs = [(float(n), float(d)) for n, d in zip(samples, probe_ns) if n > 0 and d >= 0]
    if not pairs:
        raise ValueError("no run with samples and a probe time")
    gaps = [g for g in gaps_ns if g >= 0]
    outside = _median(gaps) if gaps else 0.0
    where = f"; + {outside / 1e9:.3g} s between runs (median of {len(gaps)} gaps)" if gaps else \
        "; no gap between runs measured (one run): launch and storing not counted"
    ns = [n for n, _ in pairs]
    if len(set(ns)) > 1 and len(pairs) >= 3:
        mn = sum(ns) / len(ns)
        md = sum(d for _, d in pairs) / len(pairs)
        sxx = sum((n - mn) ** 2 for n in ns)
        slope = sum((n - mn) * (d - md) for n, d in pairs) / sxx
        if slope > 0:
            intercept = max(0.0, md - slope * mn)
            return Cost(intercept + outside, slope,
                        f"regression of probe time on samples over {len(pairs)} runs{where}")
    if per_sample_ns is not None and per_sample_ns > 0:
        rest = max(0.0, _median([d - n * per_sample_ns for n, d in pairs]))
        return Cost(rest + outside, per_sample_ns,
                    f"probe time − samples × (mean sample + pause){where}")
    return Cost(outside, _median([d / n for n, d in pairs]), f"probe time / samples{where}")


# --- one configuration's plan -----------------------------------------------------------------------------------

@dataclass
class Plan:
    """Runs × samples per run for one configuration (or a whole matrix), and what they cost."""

    metric: str
    detect: float                     # relative change
    delta: float                      # absolute change: detect × value
    value: float
    between_var: float
    c_w: float | None                 # within-run variance × samples (None: a maximum's, unknown)
    pilot_runs: int
    pilot_samples: float
    optimal_samples: float | None     # n* (None: fixed n)
    samples: int
    runs: int | None                  # None: more than MAX_RUNS needed
    power: float                      # predicted at runs × samples (at MAX_RUNS when infeasible)
    run_ns: float
    cost: Cost
    alpha: float = ALPHA
    target_power: float = POWER
    smallest_detectable: float | None = None   # relative change MAX_RUNS runs detect, when infeasible
    notes: list[str] = field(default_factory=list)

    @property
    def feasible(self) -> bool:
        return self.runs is not None

    @property
    def wall_ns(self) -> float | None:
        return None if self.runs is None else self.runs * self.run_ns

    def to_json(self) -> dict:
        return {"metric": self.metric, "detect": self.detect, "delta": self.delta, "value": self.value,
                "between_run_var": self.between_var, "within_run_var_x_samples": self.c_w,
                "pilot_runs": self.pilot_runs, "pilot_samples_per_run": self.pilot_samples,
                "optimal_samples": None if self.optimal_samples in (None, math.inf) else self.optimal_samples,
                "runs": self.runs, "samples": self.samples, "power": self.power, "alpha": self.alpha,
                "target_power": self.target_power, "run_s": self.run_ns / 1e9,
                "wall_s": None if self.wall_ns is None else self.wall_ns / 1e9, "cost": self.cost.to_json(),
                "feasible": self.feasible, "smallest_detectable": self.smallest_detectable, "notes": self.notes}


def min_samples(metric: str) -> int:
    return MIN_SAMPLES_QUANTILE.get(metric, MIN_SAMPLES)


def _fewest_samples(delta: float, between_var: float, c_w: float, runs: int, alpha: float, power: float,
                    lo: int, hi: int) -> int:
    """The fewest n in [lo, hi] at which `runs` runs reach `power` (hi when none fewer does)."""
    if power_of(delta, run_variance(between_var, c_w, lo), runs, alpha) >= power:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if power_of(delta, run_variance(between_var, c_w, mid), runs, alpha) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def plan_one(metric: str, value: float, between_var: float, within_var: float | None, pilot_runs: int,
             pilot_samples: float, cost: Cost, detect: float, *, alpha: float = ALPHA, power: float = POWER,
             samples: int | None = None, min_runs: int = MIN_RUNS, max_runs: int = MAX_RUNS,
             total_var: float | None = None) -> Plan:
    """The cheapest runs × samples that detect `detect` × value with `power` (module doc).

    within_var None (a maximum): n stays at the pilot's and the per-run values' variance (total_var, else
    between_var) is the variance of a run. samples: force this n instead of n*."""
    delta = abs(detect * value)
    notes: list[str] = []
    n_lo = min_samples(metric)
    if within_var is None:
        c_w = None
        n = int(round(pilot_samples)) if samples is None else int(samples)
        n_opt = None
        var_run = total_var if total_var is not None else between_var
        notes.append(f"{metric}: no within-run estimate (a maximum grows with n); n kept at {n}")
    else:
        c_w = within_var * pilot_samples
        n_opt = optimal_samples(between_var, c_w, cost.start_ns, cost.sample_ns)
        if samples is not None:
            n = int(samples)
        else:
            n = int(min(MAX_SAMPLES, max(n_lo, round(n_opt) if math.isfinite(n_opt) else MAX_SAMPLES)))
        var_run = run_variance(between_var, c_w, n)
    r = runs_needed(delta, var_run, alpha, power, min_runs, max_runs)
    if r is None:
        floor = detectable(var_run, max_runs, alpha, power)
        rel = floor / abs(value) if value else None
        notes.append(f"more than {max_runs} runs needed: {max_runs} runs of {n:,} samples detect a change of "
                     f"{rel:.1%}" if rel is not None else f"more than {max_runs} runs needed")
        if c_w is not None and between_var > 0:
            alone = detectable(between_var, max_runs, alpha, power) / abs(value) if value else None
            if alone is not None and alone > detect:
                notes.append(f"the between-run variance alone limits {max_runs} runs to {alone:.1%}, "
                             "whatever the samples per run")
        return Plan(metric, detect, delta, value, between_var, c_w, pilot_runs, pilot_samples, n_opt, n, None,
                    power_of(delta, var_run, max_runs, alpha), cost.run_ns(n), cost, alpha, power, rel, notes)
    if c_w is not None and samples is None:
        n = _fewest_samples(delta, between_var, c_w, r, alpha, power, n_lo, max(n, n_lo))
        var_run = run_variance(between_var, c_w, n)
    return Plan(metric, detect, delta, value, between_var, c_w, pilot_runs, pilot_samples, n_opt, n, r,
                power_of(delta, var_run, r, alpha), cost.run_ns(n), cost, alpha, power, None, notes)


# --- a matrix: one runs × samples for every configuration -------------------------------------------------------

@dataclass
class Demand:
    """What one configuration asks of a common plan: its components, its cost, how many cells of the spec it is."""

    key: str
    metric: str
    value: float
    between_var: float
    within_var: float | None
    total_var: float | None
    pilot_runs: int
    pilot_samples: float
    cost: Cost
    cells: int = 1


def plan_matrix(demands: list[Demand], detect: float, *, alpha: float = ALPHA, power: float = POWER,
                min_runs: int = MIN_RUNS, max_runs: int = MAX_RUNS) -> tuple[int, int | None, dict[str, Plan]]:
    """One samples-per-run n and runs r for every configuration (a spec has one `repetitions` and one
    iteration count): the n of least total wall time among each configuration's own n and a geometric grid,
    r the largest any configuration needs at that n (None, with the largest of their own n, when one needs more
    than max_runs at every n). Returns (n, r, the plan of each configuration at n, r)."""
    if not demands:
        raise ValueError("no configuration to plan")

    def own(d: Demand, n: int | None = None) -> Plan:
        return plan_one(d.metric, d.value, d.between_var, d.within_var, d.pilot_runs, d.pilot_samples, d.cost,
                        detect, alpha=alpha, power=power, samples=n, min_runs=min_runs, max_runs=max_runs,
                        total_var=d.total_var)

    def var_run(d: Demand, n: int) -> float:
        if d.within_var is None:
            return d.total_var if d.total_var is not None else d.between_var
        return run_variance(d.between_var, d.within_var * d.pilot_samples, n)

    def delta(d: Demand) -> float:
        return abs(detect * d.value)

    fixed = [d for d in demands if d.within_var is None]
    if fixed:   # a maximum: n is the pilot's (the largest of them, when they differ)
        candidates = [int(round(max(d.pilot_samples for d in demands)))]
    else:
        lo = min(min_samples(d.metric) for d in demands)
        grid = [int(round(lo * 10 ** (k / 8))) for k in range(0, 8 * 7 + 1)]
        candidates = sorted({*(own(d).samples for d in demands), *(g for g in grid if g <= MAX_SAMPLES)})
    best = None
    for n in candidates:
        # power depends on Δ² / var_run and r only: the configuration with the largest var_run / Δ² needs the most
        worst = max(demands, key=lambda d: var_run(d, n) / delta(d) ** 2 if delta(d) else math.inf)
        r = runs_needed(delta(worst), var_run(worst, n), alpha, power, min_runs, max_runs)
        total = None if r is None else r * sum(d.cells * d.cost.run_ns(n) for d in demands)
        rank = (r is None, total if total is not None else -power_of(delta(worst), var_run(worst, n), max_runs, alpha),
                n)
        if best is None or rank < best[0]:
            best = (rank, n, r)
    _, n, r = best
    if r is None and not fixed:   # out of reach at any n: show the configurations at their own cheapest n
        n = max(own(d).samples for d in demands)
    final = {}
    for d in demands:
        p = own(d, n)
        if r is not None:
            p.runs, p.power = r, power_of(p.delta, var_run(d, n), r, alpha)
            p.notes = [x for x in p.notes if not x.startswith("more than")]
        final[d.key] = p
    return n, r, final
