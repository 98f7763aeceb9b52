"""Significance-tested comparisons of configurations against a baseline: the run is the unit.

The runs of one configuration (select.Configuration) are its repetitions, and they differ by more than
within-run sampling error says (heap layout, page placement, the machine's load: ~8 % between runs of one
BEAM configuration here). A test that pools samples as if each were an independent replicate calls an A/A
comparison "worse, p = 1e-8". So every metric is computed per run, and the per-run values are the replicates:

| metric | a run's value        | test (two-sided)                 | interval of the difference      |
| ------ | -------------------- | -------------------------------- | ------------------------------- |
| mean   | its mean             | Welch's t-test on per-run values | Welch, 95 %                     |
| median | its p50              | Welch's t-test on per-run values | Welch, 95 %                     |
| p99    | its p99              | Welch's t-test on per-run values | Welch, 95 %                     |
| max    | its max              | Welch's t-test on per-run values | Welch, 95 %                     |
| stdev  | its stdev (n−1)      | Welch's t-test on per-run values | Welch, 95 %                     |

A row's value is the mean of the per-run values (for the mean with equal run lengths, the pooled mean), its
difference is value − baseline and the Welch interval is centred on that difference: the direction, the
interval and the verdict come from one estimate and never disagree. This is the random-effects model of the
per-run statistics (variance.py): each per-run value is the configuration's value plus a run effect plus its
estimation error, independent between runs, so the t-test on them holds its false-positive rate whatever the
between-run variance; with no run effect it loses only the t distribution's few degrees of freedom against a
pooled test (the standard error of a mean over r runs of n samples is the pooled one). docs/analysis.md has
the A/A and power figures (bench/verdicts.py).

With fewer than 2 runs on either side the between-run variation is unknown: the row is `not tested` and says
so. Histogram-only runs take part with the values their histogram gives (percentiles are bucket upper edges,
stdev from bucket midpoints; a note says so); imported runs with the tool's own summary take part in the
metrics the tool stated.

Every p-value of one comparison set (all rows, all configurations) forms one family for Holm's step-down
correction; a row's verdict is `better`/`worse` when its Holm-adjusted p ≤ alpha and its 95 % interval lies
on that side of 0 (always so for alpha ≤ 0.05), else `no significant difference`, or `not tested` with the
reason. Cliff's delta of the pooled samples (δ = P(X>Y) − P(X<Y), X the configuration, Y the baseline) is
shown as an effect size of the whole distributions, labelled with Romano et al.'s thresholds: |δ| < 0.147
negligible, < 0.33 small, < 0.474 medium, else large; it is descriptive, not a test.

Welch's test is written with numpy and analysis.special (importing scipy.stats, or scipy.special, costs more
than the whole comparison) and checked against scipy.stats in the test suite.
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
from ..words import counted
from .defaults import ALPHA, METRICS, MIN_REPETITIONS, REPEAT_ADVICE, ROWS, STAT_KEY, TAIL, few_runs_reason
from .variance import Components, components
from .paired import PAIRED_TEST, PairedResult, paired, pairing, shared_runs
from .select import CORE_DIMENSIONS, Configuration, group_runs, short_labels, value_matches, value_text
from .stats import merge_histograms
from .select import not_in_force_text, setting_text

RUN_TEST = "Welch t-test on per-run values"
TAIL_TEST = "Welch t-test on per-run bounds at p = 1e-9"
TESTS = dict.fromkeys(METRICS, RUN_TEST) | {TAIL: TAIL_TEST}
MIN_RUNS = 2            # fewer on either side: not tested
# Romano et al. (2006) thresholds for |Cliff's delta|.
MAGNITUDES = ((0.147, "negligible"), (0.33, "small"), (0.474, "medium"), (math.inf, "large"))


# --- statistics ------------------------------------------------------------------------------


def _runs(runs) -> str:
    """`run 4`, `runs 4, 7`: a note's runs, the noun in the right number."""
    return ("run " if len(runs) == 1 else "runs ") + ", ".join(str(r.id) for r in runs)

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


def cliffs_delta(xs: np.ndarray, ys: np.ndarray) -> float:
    """Cliff's delta P(X>Y) − P(X<Y) of two sorted samples, from the Mann-Whitney U (pairs x > y plus half
    the ties), counted with binary searches in y: O(n log n), no product of the two samples."""
    if len(xs) == 0 or len(ys) == 0:
        raise ValueError("Cliff's delta needs two non-empty samples")
    lo, hi = np.searchsorted(ys, xs, "left"), np.searchsorted(ys, xs, "right")
    u = float(np.sum(lo + hi, dtype=np.float64)) / 2.0
    return 2.0 * u / (len(xs) * len(ys)) - 1.0


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Welch's t-test p-value and 95% interval of mean(a) − mean(b) (Welch-Satterthwaite df)."""
    from .special import stdtr, stdtrit
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
    histograms: dict[int, dict] = field(default_factory=dict)   # histogram-only runs: run id -> its histogram
    _bounds: dict | None = None

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

    def run_level(self, metric: str) -> float | None:
        """The metric as the tests see it: the mean of the per-run values."""
        values = self.per_run_values(metric)
        return float(np.mean(values)) if values else None

    def components(self, metric: str) -> Components:
        return components(self, metric)

    def tail_bounds(self) -> dict:
        """Per run id: its tail.RunBound at p = 1e-9 (computed once per cell), its checks corrected for the
        number of the configuration's runs."""
        if self._bounds is None:
            from .tail_bound import run_bound
            self._bounds = {}
            for run in self.runs:
                if run.id in self.histograms:
                    self._bounds[run.id] = run_bound(None, self.histograms[run.id], len(self.runs))
                elif run in self.sample_runs:
                    self._bounds[run.id] = run_bound(self.run_samples(run), None, len(self.runs))
                else:
                    self._bounds[run.id] = run_bound(None, None)
        return self._bounds


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
                notes.append(f"histogram-only {_runs(hist_runs)}: not in the pooled "
                             "samples (they count for max only)")
                pooled_stats["max"] = max([pooled_stats["max"], *(per_run[r.id]["max"] for r in hist_runs)])
        elif hist_runs:
            merged = merge_histograms([hists[r.id] for r in hist_runs])
            if merged is not None:
                pooled_stats = stats.summarize_histogram(merged)
                notes.append(f"histogram-only {'run' if len(hist_runs) == 1 else 'runs'}: values from the histogram "
                             "(percentiles are bucket upper edges, "
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
            notes.append(f"imported {_runs(reported)}: n, min, mean and max are the "
                         "tool's own figures")
        cells.append(Cell(config, members, per_run, sample_runs, bounds, pooled, pooled_stats, notes,
                          histograms=hists))
    return cells


def knob_defaults() -> dict[str, Any]:
    """Each knob's default (the value a run records when it does not set it), where the registry knows one."""
    from ..settings.registry import RECORDED_DEFAULTS, SETTINGS
    return {name: RECORDED_DEFAULTS.get(name, s.default) for name, s in SETTINGS.items()}


def at_defaults(c: Configuration, defaults: dict[str, Any] | None = None) -> bool:
    """Does c run with every knob at its default? What a runtime records beside its knobs (its versions, its
    schedulers) is not a knob; a knob recorded at its default (the BEAM's fullsweep_after=65535, an empty
    vm_flags) is as good as unset."""
    defaults = knob_defaults() if defaults is None else defaults
    return all(name not in defaults or value_text(v) == value_text(defaults[name]) for name, v in c.settings)


def present_values(configs: list[Configuration]) -> str:
    """'settings of the selected runs: NAME: V1, V2; ...' over what varies first, then the rest: the knobs only
    (not what a runtime records beside them, such as its version)."""
    knobs = knob_defaults()
    names = sorted({k for c in configs for k, _ in c.settings if k in knobs})
    values = {n: sorted({value_text(c.get(n)) for c in configs} - {""}) for n in names}
    names = [n for n in names if values[n]]
    order = sorted(names, key=lambda n: len(values[n]) < 2)
    return "settings of the selected runs: " + ("; ".join(f"{n}: {', '.join(values[n])}" for n in order)
                                                 if names else "none (try --baseline defaults)")


@dataclass(frozen=True)
class _ArrayRun:
    id: int
    n_samples: int


def cells_from_samples(groups: dict[str, list[np.ndarray]], unit: str = "ns") -> list[Cell]:
    """Cells from arrays held in memory, one array a run (the API's and the simulations' way in): each group
    is the configuration `exec <name> (arrays) label=<name>`, so `--baseline label=NAME` picks one."""
    cells, next_id = [], 1
    for name, arrays in groups.items():
        config = Configuration("exec", "sum", "arrays", (("label", name),), (), "time", unit)
        runs = [_ArrayRun(next_id + i, len(a)) for i, a in enumerate(arrays)]
        next_id += len(arrays)
        per_run = {r.id: stats.summarize(np.asarray(a)) for r, a in zip(runs, arrays)}
        lengths = np.cumsum([0, *(len(a) for a in arrays)])
        samples = np.concatenate([np.asarray(a, dtype=np.float64) for a in arrays]) if arrays else np.empty(0)
        cells.append(Cell(config, runs, per_run, runs, list(zip(lengths[:-1], lengths[1:])), samples,
                          stats.summarize(samples)))
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
    _defaults: dict[str, Any] | None = field(default=None, repr=False)   # knob_defaults(), once bound

    @classmethod
    def parse(cls, items: list[str]) -> "Baseline":
        """NAME=VALUE items and `defaults`; none at all is an error that validate() raises with the values the
        selected runs have."""
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
        self._defaults = knob_defaults()
        self._names = {}
        for c in configs:
            self._names.setdefault(self._group(c), set()).update(k for k, _ in (*c.settings, *c.params))

    def applicable(self, c: Configuration) -> list[tuple[str, str]]:
        names = None if self._names is None else self._names.get(self._group(c), set())
        return [(n, v) for n, v in self.assignments if names is None or n in CORE_DIMENSIONS or n in names]

    def matches(self, c: Configuration) -> bool:
        if self.defaults and not at_defaults(c, self._defaults):
            return False
        assignments = self.applicable(c)
        if not assignments and not self.defaults:
            return False
        return all(value_matches(c.get(n), v) for n, v in assignments)

    def validate(self, configs: list[Configuration]) -> None:
        """A UsageError naming the valid names or values when the baseline matches nothing."""
        self.bind(configs)
        if not self.assignments and not self.defaults:
            raise UsageError("name a baseline: --baseline NAME=VALUE (a setting, parameter, workload, variant or "
                             "runtime), --baseline defaults (every setting at its default), or runs stored "
                             "earlier: --baseline-experiment ID|NAME, --baseline-tag TAG; " + present_values(configs))
        known = set(CORE_DIMENSIONS) | {k for c in configs for k, _ in (*c.settings, *c.params)}
        for name, _ in self.assignments:
            if name not in known:
                raise UsageError(f"baseline names {name!r}, which no selected run has; valid names: "
                                 f"{choices(sorted(known))}")
        if not any(self.matches(c) for c in configs):
            if self.defaults and not self.assignments:
                raise UsageError("no selected configuration runs with every setting at its default (--baseline "
                                 "defaults); "
                                 f"name one with --baseline NAME=VALUE; {present_values(configs)}")
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
            # A parameter only one side has is one its runtime lacks (the BEAM's warmup_calls): not a difference.
            shared = {k for k, _ in d.params} & {k for k, _ in c.params} - named
            return (d.measure, d.unit) == (c.measure, c.unit) and all(getattr(d, x) == getattr(c, x) for x in free) \
                and {k: v for k, v in d.params if k in shared} == {k: v for k, v in c.params if k in shared}

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


def spec_baseline(store: Store, runs: list[Run]) -> list[str] | None:
    """The baseline the selected runs' experiment named in its spec (`baseline = { cpu = 1 }`), as
    --baseline items; None when the runs are of no experiment, or of experiments that name none or differ."""
    ids = {r.experiment_id for r in runs}
    if not ids or None in ids:
        return None
    named = set()
    for exp_id in ids:
        row = store.experiment_row(exp_id) or {}
        items = (row.get("spec") or {}).get("baseline")
        if not items:
            return None
        named.add(tuple(items))
    return list(named.pop()) if len(named) == 1 else None


# --- comparisons ------------------------------------------------------------------------------

@dataclass
class Row:
    metric: str
    baseline: float | None              # the baseline's mean of per-run values
    value: float | None                 # this configuration's mean of per-run values
    test: str
    p: float | None = None
    ci: tuple[float, float] | None = None   # 95 % interval of value − baseline
    direction: int = 0                  # -1 lower than the baseline, +1 higher (the sign of value − baseline)
    reason: str = ""                    # why not tested
    p_holm: float | None = None
    verdict: str = "not tested"
    note: str = ""
    runs: tuple[int, int] = (0, 0)      # runs with a value, this configuration's and the baseline's
    extra: dict = field(default_factory=dict)   # the tail row's per-run bounds and refusals

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
                "runs": self.runs[0], "baseline_runs": self.runs[1],
                "p": self.p, "p_holm": self.p_holm, "verdict": self.verdict,
                **({"not_tested_because": self.reason} if self.reason else {}),
                **({"note": self.note} if self.note else {}), **self.extra}


@dataclass
class Comparison:
    cell: Cell
    base: Cell
    rows: list[Row]
    cliffs_delta: float | None          # of the pooled samples: descriptive
    notes: list[str]
    design: str = "runs"                # runs | interleaved | duet (paired.py: rows on window-pair differences)

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

    @property
    def tail(self) -> bool:
        """Whether the set has the tail row (compare --tail)."""
        return any(r.metric == TAIL for k in self.comparisons for r in k.rows)

    @property
    def labels(self) -> dict[Configuration, str]:
        return short_labels(c.config for c in self.cells)

    def to_json(self) -> dict:
        labels = self.labels
        return {
            "baseline": self.baseline.text, "alpha": self.alpha, "correction": "holm", "unit_of_replication": "run",
            "lower_is_better": True, "percentile_definition": stats.PERCENTILE_DEFINITION,
            "tests": TESTS if self.tail else dict.fromkeys(METRICS, RUN_TEST), "tail_row": self.tail,
            "configurations": [{"label": labels[c.config], "configuration": c.config.key(),
                                "runs": [r.id for r in c.runs], "n_samples": int(len(c.samples)),
                                "is_baseline": self.baseline.matches(c.config), "stats": c.stats,
                                "variance_components": {m: c.components(m).to_json() for m in METRICS},
                                "notes": c.notes} for c in self.cells],
            "comparisons": [{
                "configuration": labels[k.cell.config], "baseline": labels[k.base.config],
                "unit": k.cell.config.unit, "runs": len(k.cell.runs), "baseline_runs": len(k.base.runs),
                "n_samples": int(len(k.cell.samples)), "baseline_n_samples": int(len(k.base.samples)),
                "cliffs_delta": k.cliffs_delta, "magnitude": k.magnitude, "design": k.design,
                "rows": [r.to_json() for r in k.rows], "notes": k.notes} for k in self.comparisons],
            "unmatched": [{"configuration": labels[c.config], "reason": why} for c, why in self.unmatched],
            "warnings": self.warnings,
        }


def run_level_row(metric: str, mine: list[float], base: list[float], test: str = RUN_TEST) -> Row:
    """One metric tested with the run as the unit: Welch's t-test on the per-run values (before Holm)."""
    row = Row(metric, float(np.mean(base)) if base else None, float(np.mean(mine)) if mine else None, test,
              runs=(len(mine), len(base)))
    if len(mine) < MIN_RUNS or len(base) < MIN_RUNS:
        row.reason = few_runs_reason(len(mine), len(base), f" with a {metric}")
        return row
    row.p, lo, hi = welch(np.asarray(mine, float), np.asarray(base, float))
    row.ci, row.direction = (lo, hi), int(np.sign(row.diff))
    return row


def tail_row(cell: Cell, base: Cell) -> Row:
    """The bound at p = 1e-9 per sample, tested with the run as the unit: each run's bound (tail.run_bound: its
    own checks and fit) is a per-run value for run_level_row. A configuration with a run whose tail is refused
    (or not analysable) has no bound: the row is not tested and says which runs and why."""
    if len(cell.runs) < MIN_RUNS or len(base.runs) < MIN_RUNS:       # no fit needed to know it
        return _untested_tail(cell, base)
    mine, theirs = cell.tail_bounds(), base.tail_bounds()
    missing = {side: {rid: b for rid, b in bounds.items() if b.value is None}
               for side, bounds in (("configuration", mine), ("baseline", theirs))}
    extra = {"p_level": 1e-9,
             "per_run": {side: {str(rid): b.to_json() for rid, b in bounds.items()}
                         for side, bounds in (("configuration", mine), ("baseline", theirs))}}
    if any(missing.values()):
        row = Row(TAIL, None, None, TAIL_TEST, runs=(len(mine) - len(missing["configuration"]),
                                                     len(theirs) - len(missing["baseline"])), extra=extra)
        row.reason = "no bound: " + "; ".join(
            f"{why} (run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))} of the {side})"
            for side, b in missing.items() if b for why, ids in _by_reason(b))
        row.extra["refused"] = {side: sorted({b.short for b in bs.values()}) for side, bs in missing.items()}
        if not missing["configuration"]:
            row.value = float(np.mean([b.value for b in mine.values()]))
        if not missing["baseline"]:
            row.baseline = float(np.mean([b.value for b in theirs.values()]))
        return row
    row = run_level_row(TAIL, [b.value for b in mine.values()], [b.value for b in theirs.values()], TAIL_TEST)
    row.extra = extra
    return row


def _untested_tail(cell: Cell, base: Cell) -> Row:
    row = run_level_row(TAIL, [], [], TAIL_TEST)
    row.runs = (len(cell.runs), len(base.runs))
    row.reason = few_runs_reason(len(cell.runs), len(base.runs))
    return row


def _by_reason(bounds: dict) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for rid, b in bounds.items():
        out.setdefault(b.short, []).append(rid)
    return list(out.items())


def compare_cells(cell: Cell, base: Cell, *, tail: bool = False) -> Comparison:
    """The rows of one configuration against its baseline, before the Holm correction (tail: with the tail
    row)."""
    notes: list[str] = []
    if cell.hist_runs or base.hist_runs:
        notes.append("histogram-only runs take part with their histogram's values: percentiles are bucket upper "
                     "edges, stdev from bucket midpoints")
    if cell.config.not_in_force and cell.config.ran_as(base.config):
        notes.append(same_as_baseline(cell.config))
    delta = None
    if len(cell.samples) and len(base.samples):
        delta = cliffs_delta(cell.sorted, base.sorted)
    rows = paired_rows(cell, base)
    design = rows[0].extra["paired"]["design"] if rows else "runs"
    if rows:
        notes.append(f"design {design}: {PAIRED_TEST} ({rows[0].extra['paired_text']}); max, p99, median and "
                     f"stdev are those of {rows[0].extra['paired']['window_samples']}-sample windows")
    else:
        rows = [run_level_row(m, cell.per_run_values(m), base.per_run_values(m)) for m in METRICS]
    if tail:
        rows.append(tail_row(cell, base))
    return Comparison(cell, base, rows, delta, notes, design)


def paired_evidence(cell: Cell, base: Cell, metric: str) -> PairedResult | None:
    """The paired estimate of a metric from the interleaved runs or duets the two configurations share
    (paired.py), or None when they share none (each was measured in runs of its own: Welch on per-run values).
    The pairs of the first one's design and block length are judged together."""
    shared = [(a, b) for a, b in shared_runs(cell.sample_runs, base.sample_runs)]
    if not shared:
        return None
    first = pairing(shared[0][0])
    block, design = first["block_samples"], first.get("design", "interleaved")
    shared = [(a, b) for a, b in shared
              if (pairing(a)["block_samples"], pairing(a).get("design", "interleaved")) == (block, design)
              and pairing(b)["block_samples"] == block]
    arrays = [(cell.run_samples(a), base.run_samples(b)) for a, b in shared]
    cpus = [pairing(a).get("cpu") for a, _ in shared] if design == "duet" else None   # a duet's arrangements
    return paired(arrays, block, metric, design, cpus)


def paired_rows(cell: Cell, base: Cell) -> list[Row]:
    """compare's rows from window-pair differences when the two configurations were interleaved; [] otherwise."""
    rows = []
    for m in METRICS:
        res = paired_evidence(cell, base, m)
        if res is None and m == "stdev" and rows:    # windows of one sample: no stdev
            row = Row(m, None, None, PAIRED_TEST, runs=rows[0].runs)
            row.reason = "blocks of one sample have no stdev: set a longer block"
            rows.append(row)
            continue
        if res is None:
            return []
        row = Row(m, res.baseline, res.value, PAIRED_TEST, runs=(res.runs, res.runs))
        row.p = res.estimate.p()
        row.ci = tuple(res.estimate.difference(x) for x in res.estimate.interval())
        row.direction = int(np.sign(res.estimate.value))
        row.extra = {"paired": res.to_json(), "paired_text": res.describe()}
        rows.append(row)
    return rows


def same_as_baseline(config: Configuration) -> str:
    """The note of a configuration that ran with its baseline's settings (what it asked for was not in force)."""
    return (f"ran with the baseline's settings ({not_in_force_text(config.not_in_force)}): an A/A comparison, "
            "not a test of " + ", ".join(setting_text(k, r) for k, r, _ in config.not_in_force))


def check_options(alpha: float) -> None:
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must be between 0 and 1, got {alpha}")


def adjust(rows: list[Row], alpha: float) -> None:
    """Holm-correct the tested rows as one family and give each its verdict.

    A verdict needs the adjusted p within alpha and the interval on the side of its direction, so that the
    value, the interval and the verdict shown never disagree (for alpha ≤ 0.05 the second follows from the
    first)."""
    tested = [r for r in rows if r.p is not None]
    for r, adj in zip(tested, holm([r.p for r in tested])):
        r.p_holm = adj
        r.verdict = "no significant difference"
        if adj > alpha or not r.direction:
            continue
        if r.ci is not None and not (r.ci[1] < 0 if r.direction < 0 else r.ci[0] > 0):
            r.note = "the 95 % interval includes 0"
            continue
        r.verdict = "better" if r.direction < 0 else "worse"


def few_runs_warning(few: list[tuple[str, int]], min_repetitions: int, shown: int = 3) -> str:
    """One warning for every configuration with fewer than min_repetitions runs: a few named, the rest counted."""
    counts = sorted({runs for _, runs in few})
    each = counted(counts[0], "run") + " each" if len(counts) == 1 else "runs: " + ", ".join(map(str, counts))
    named = "; ".join(label if len(counts) == 1 else f"{label} ({runs})" for label, runs in few[:shown])
    more = f" and {len(few) - shown} more" if len(few) > shown else ""
    whom = f"{counted(len(few), 'configuration')} ({each})" if len(few) > 1 else f"{named} ({each.split(' each')[0]})"
    return (f"fewer than {min_repetitions} runs of {whom}" + (f": {named}{more}" if len(few) > 1 else "") +
            "; the between-run variation rests on too few runs (with a single run it is unknown and nothing is "
            f"tested); {REPEAT_ADVICE}")


def compare(cells: list[Cell], baseline: Baseline, *, alpha: float = ALPHA,
            min_repetitions: int = MIN_REPETITIONS, tail: bool = False) -> ComparisonSet:
    """Compare every configuration with its baseline; Holm-correct all p-values as one family (tail: with the
    tail row, which joins the family)."""
    check_options(alpha)
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
        comparisons.append(compare_cells(cell, by_config[base], tail=tail))
    adjust([r for k in comparisons for r in k.rows], alpha)
    labels = short_labels(configs)
    warnings = []
    # A configuration compared only in interleaved runs has window pairs for replicates: few runs are no warning.
    run_level = [k for k in comparisons if k.design == "runs"]
    few = [c for c in cells if len(c.runs) < min_repetitions and
           any(k.cell is c or k.base is c for k in run_level)]
    if few:
        warnings.append(few_runs_warning([(labels[c.config], len(c.runs)) for c in few], min_repetitions))
    return ComparisonSet(baseline, cells, comparisons, unmatched, warnings, alpha)


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
                         source: str = "earlier runs", alpha: float = ALPHA,
                         min_repetitions: int = MIN_REPETITIONS, tail: bool = False) -> EarlierComparisonSet:
    """Compare every configuration of `cells` with a configuration of `base_cells`, runs stored earlier.

    Each cell is paired with the earlier cell of the same configuration (workload, variant, runtime,
    settings, parameters, measure). With a `baseline` (NAME=VALUE, `defaults`), a cell that does not itself
    match it is paired as `compare` pairs within one set (Baseline.find), among the earlier
    configurations. Every p-value of the set is one Holm family, as in `compare`."""
    check_options(alpha)
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
        comparisons.append(compare_cells(cell, by_config[base], tail=tail))
    adjust([r for k in comparisons for r in k.rows], alpha)
    used = {id(k.base): k.base for k in comparisons}
    warnings = []
    few = [c for c in (*(k.cell for k in comparisons), *used.values()) if len(c.runs) < min_repetitions]
    if few:
        labels = short_labels([*(c.config for c in cells), *base_configs])
        warnings.append(few_runs_warning([(labels[c.config] + (" (baseline)" if id(c) in used else ""), len(c.runs))
                                          for c in few], min_repetitions))
    return EarlierComparisonSet(baseline, [*cells, *base_cells], comparisons, unmatched, warnings, alpha,
                                base_cells=base_cells, source=source)
