"""Claims judged on stored runs: a finding (a published study's or a team's own) re-tested with the run as the unit.

A claim names two configurations (`baseline`, `cell`, within `where`), a metric and what is expected of them
(docs/spec.md, "Claims"). Its evidence is the per-run values of the metric in each configuration, as compare
tests them; nothing here computes a p-value of its own: every test is compare's Welch test on per-run values
(compare.welch / run_level_row), and the runs a claim would need come from plan_sizing's power
(plan_sizing.runs_needed) on the variance of the per-run values (the variance components of variance.py).

| expect             | judged by                                                     | holds / contradicted                          |
| ------------------ | ------------------------------------------------------------- | --------------------------------------------- |
| lower, higher      | Welch's t-test on per-run values (two-sided), Holm; and two   | significant in the expected / the other way,  |
|                    | one-sided tests against ±min_effect (TOST), the smaller p     | or the effect within ±min_effect (absent here)|
| same (margin m)    | two one-sided Welch tests against ±m·baseline (TOST), Holm    | within ±m / significantly beyond ±m           |
| ratio [lo, hi]     | the 95 % interval of cell / baseline (Welch on log values)    | interval inside [lo, hi] / outside it         |
| below V            | the 95 % interval of the cell's value (one-sample Welch)      | interval below V / above V                    |

Two configurations measured in one interleaved run are judged on their window-pair differences instead
(paired.py: the same t machinery on the paired estimate, the paired run as the replicate); `design` says which.
A directional claim's smallest effect of interest is its `min_effect` (relative), by default half the published
relative change, else 5 %: an effect shown to lie within ±min_effect of the baseline contradicts the claim, with
the reason "the effect here is at most X ..., where the study saw Y".

Holm's correction runs over the tested lower/higher/same claims of one invocation (one p-value each: for
`same`, the smaller of the equivalence test's p and the test of a difference beyond the margin, the one the
verdict rests on). Ratio and bound claims are judged from their intervals, not corrected.

A claim neither holds nor is contradicted is `undecided`: it says how many runs per configuration would decide
it with 80 % power, from the per-run values' variance and the distance between the estimate and the claim's
boundary (0 for lower/higher, ±m for same, the range's ends, the bound), at α divided by the family's size
(Holm's first step: a conservative figure). With one run a side nothing is known of the between-run variance:
the claim is undecided with that reason and the figure is left to a repeat of 3 runs.

Published absolute figures come from other hardware: they are carried for display and never tested.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..words import unit_word
from .compare import Cell, MIN_RUNS, holm, paired_evidence
from .paired import Estimate, ratio_of, welch_estimate
from .defaults import ALPHA, METRICS, TAIL, few_runs_reason
from .plan_sizing import MIN_RUNS as PLAN_MIN_RUNS, POWER, runs_needed
from .defaults import per_run_name, per_window_name
from .select import Configuration, not_in_force_text, setting_text, value_matches

MEMORY_PER_TASK = "memory_per_task"   # study 5: the least-squares slope of memory against tasks, per run
CLAIM_METRICS = (*METRICS, TAIL, MEMORY_PER_TASK)
DIRECTIONS = ("lower", "higher")
EXPECT_WORDS = (*DIRECTIONS, "same")
EXPECT_TABLES = ("ratio", "below")
VERDICTS = ("holds", "contradicted", "undecided", "not measurable here")
# A unit a claim may state its bound or published figures in, as a factor to the stored unit.
# Why a tested claim is still undecided, per expectation (the runs that would decide it follow).
UNDECIDED_BECAUSE = {
    "lower": "the interval holds 0 and reaches beyond ±min_effect: neither a difference nor its absence is shown",
    "higher": "the interval holds 0 and reaches beyond ±min_effect: neither a difference nor its absence is shown",
    "same": "the interval reaches beyond the margin, and the difference is not shown to be beyond it",
    "ratio": "the interval of the ratio reaches across an end of the range",
    "below": "the interval of the value reaches across the bound",
}
DEFAULT_MIN_EFFECT = 0.05   # a directional claim's smallest effect of interest without published figures
UNITS = {"ns": ("ns", 1.0), "us": ("ns", 1e3), "µs": ("ns", 1e3), "ms": ("ns", 1e6), "s": ("ns", 1e9),
         "B": ("bytes", 1.0), "bytes": ("bytes", 1.0), "KB": ("bytes", 1e3), "KiB": ("bytes", 1024.0),
         "MB": ("bytes", 1e6), "MiB": ("bytes", 1024.0 ** 2)}


@dataclass(frozen=True)
class Expect:
    kind: str                          # lower | higher | same | ratio | below
    margin: float | None = None        # same: relative tolerance
    low: float | None = None           # ratio range
    high: float | None = None
    bound: float | None = None         # below: in `unit`
    unit: str | None = None

    @property
    def text(self) -> str:
        if self.kind == "same":
            return f"same within ±{self.margin:.0%}"
        if self.kind == "ratio":
            return f"ratio {self.low:g}..{self.high:g}"
        if self.kind == "below":
            return f"below {self.bound:g} {unit_word(self.unit)}"
        return self.kind

    def to_json(self) -> dict | str:
        if self.kind in DIRECTIONS:
            return self.kind
        if self.kind == "same":
            return {"same": True, "margin": self.margin}
        if self.kind == "ratio":
            return {"ratio": [self.low, self.high]}
        return {"below": self.bound, "unit": unit_word(self.unit)}


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    metric: str
    expect: Expect
    baseline: tuple[tuple[str, str], ...] = ()   # NAME=VALUE texts, as --where takes them
    cell: tuple[tuple[str, str], ...] = ()
    where: tuple[tuple[str, str], ...] = ()
    source: str = ""
    published: dict = field(default_factory=dict, hash=False, compare=False)
    requires: str | None = None                  # what rtscope cannot make (xenomai, solo5, xen)
    scales: tuple[str, ...] = ()                 # the spec's scales whose matrix makes its cells (empty: every one)
    line: int | None = None
    min_effect: float | None = None              # lower/higher: the smallest effect of interest, relative (None: default)

    @property
    def smallest_effect(self) -> float | None:
        """lower/higher: the relative change below which the effect counts as absent: `min_effect`, else half of
        the published relative change, else DEFAULT_MIN_EFFECT; None for other kinds."""
        if self.expect.kind not in DIRECTIONS:
            return None
        if self.min_effect is not None:
            return self.min_effect
        pub = self.published or {}
        if pub.get("baseline") and pub.get("cell") is not None:
            return abs(pub["cell"] - pub["baseline"]) / abs(pub["baseline"]) / 2.0
        return DEFAULT_MIN_EFFECT

    @property
    def expect_text(self) -> str:
        """What is expected, with a directional claim's smallest effect of interest: `lower (min_effect 20%)`."""
        rel = self.smallest_effect
        return self.expect.text if rel is None else f"{self.expect.text} (min_effect {self.min_effect_text()})"

    def min_effect_of(self, baseline: float | None) -> float | None:
        rel = self.smallest_effect
        return None if rel is None or baseline is None else rel * abs(baseline)

    def min_effect_text(self, baseline: float | None = None) -> str:
        rel = self.smallest_effect
        return "-" if rel is None else f"{rel:.1%}".replace(".0%", "%")

    @property
    def two_sided(self) -> bool:
        """Whether the claim compares two configurations (a bound is on the cell alone)."""
        return self.expect.kind != "below"

    def selects(self, side: str, config: Configuration) -> bool:
        items = (*self.where, *(self.cell if side == "cell" else self.baseline))
        return all(value_matches(config.get(n), v) for n, v in items)

    def side_text(self, side: str) -> str:
        items = self.cell if side == "cell" else self.baseline
        return " ".join(f"{n}={v}" for n, v in items)


@dataclass
class Judgement:
    claim: Claim
    verdict: str = "undecided"
    unit: str = ""                       # the stored unit of the values below
    baseline: float | None = None        # the mean of the per-run values (None for a bound claim)
    value: float | None = None
    interval: tuple[float, float] | None = None
    interval_of: str = ""                # difference | ratio | value
    p: float | None = None
    p_holm: float | None = None
    runs: tuple[int, int] = (0, 0)       # the cell's runs and the baseline's
    runs_needed: int | None = None
    reason: str = ""
    level: float = 0.95                  # the interval's level (lower on a sequential look: paired.spent)
    design: str = "runs"                 # runs | interleaved | duet: what the evidence came from (paired.py)
    window_samples: int | None = None    # interleaved: the samples of a statistics window
    _absent: str = ""                    # the reason when it is contradicted as an effect below min_effect
    _decide: str = ""                    # which outcome a significant p means: holds | contradicted
    _delta: float | None = None          # distance from the boundary, for runs_needed
    _edge: tuple[float, float] | None = None   # a ratio claim: the measured ratio and the range's end nearest it
    _var: float | None = None            # variance of one run's value (equal-variance two-sample form)
    _alpha_scale: float = 1.0            # a TOST's one-sided level, 2 × α in the two-sided power formula
    _in_force: str = ""                  # what a side had in force instead of a named setting (never_in_force)

    @property
    def ratio(self) -> float | None:
        if self.interval_of == "ratio" and self.interval:
            return math.sqrt(self.interval[0] * self.interval[1])   # the geometric point of the log interval
        return self.value / self.baseline if self.value is not None and self.baseline else None

    @property
    def shown_unit(self) -> tuple[str, float]:
        """The unit the values are shown in, and its size in the stored unit: the published figures' unit when it
        is one of the stored unit's (us for ns), else µs for ns and the stored unit for the rest; `us` as µs."""
        published = (self.claim.published or {}).get("unit")
        if published in UNITS and UNITS[published][0] == self.unit:
            return unit_word(published), UNITS[published][1]
        return ("µs", 1e3) if self.unit == "ns" else (self.unit, 1.0)

    @property
    def metric_text(self) -> str:
        """The metric as the claims tables name it: the mean of its per-run values (defaults.per_run_name), or of
        its windows' values when the claim was judged on interleaved window pairs."""
        if self.design != "runs" and self.window_samples:
            return per_window_name(self.claim.metric, self.window_samples)
        return per_run_name(self.claim.metric)

    def values_text(self) -> str:
        """The measured values as shown: `baseline → cell unit`, or the cell's alone for a bound."""
        from .results import fmt
        if self.baseline is None and self.value is None:
            return "-"
        shown, factor = self.shown_unit
        if not self.claim.two_sided:
            return f"{fmt('mean', self.value, 1 / factor)} {shown}"
        return f"{fmt('mean', self.baseline, 1 / factor)} → {fmt('mean', self.value, 1 / factor)} {shown}"

    def interval_text(self) -> str:
        """The 95 % interval as shown: ×lo..hi for a ratio, Δ lo..hi for a difference, lo..hi for a value."""
        from .results import fmt
        if self.interval is None:
            return "-"
        lo, hi = self.interval
        if self.interval_of == "ratio":
            return f"×{lo:.3g}..{hi:.3g}"
        name, factor = self.shown_unit
        sign = "Δ " if self.interval_of == "difference" else ""
        return f"{sign}{fmt('mean', lo, 1 / factor)}..{fmt('mean', hi, 1 / factor)} {name}"

    def published_text(self) -> str:
        """The claim's published figures as shown: `baseline → cell unit` (a spec's `us` as µs), or `-`."""
        pub = self.claim.published or {}
        if "cell" not in pub:
            return "-"
        unit = unit_word(str(pub.get("unit", "")))
        if not self.claim.two_sided:
            return f"{pub['cell']:g} {unit}".strip()
        base = pub.get("baseline")
        return f"{'?' if base is None else f'{base:g}'} → {pub['cell']:g} {unit}".strip()

    def to_json(self) -> dict:
        c = self.claim
        name, factor = self.shown_unit
        pub = c.published or {}
        published = {**pub, **({"unit": unit_word(pub["unit"])} if "unit" in pub else {})}

        def shown(v: float | None) -> float | None:
            return None if v is None else v / factor

        interval = None
        if self.interval is not None:
            lo, hi = self.interval if self.interval_of == "ratio" else map(shown, self.interval)
            interval = {"of": self.interval_of, "low": lo, "high": hi, "level": self.level,
                        "unit": None if self.interval_of == "ratio" else name}
        return {"id": c.id, "text": c.text, "source": c.source or None, "metric": c.metric,
                "expect": c.expect.to_json(), "where": " ".join(f"{n}={v}" for n, v in c.where) or None,
                "baseline": c.side_text("baseline") or None, "cell": c.side_text("cell"),
                "verdict": self.verdict, "published": published or None,
                "measured": {"baseline": shown(self.baseline), "cell": shown(self.value), "ratio": self.ratio,
                             "unit": name, "runs": self.runs[0], "baseline_runs": self.runs[1]},
                "interval": interval, "p": self.p, "p_holm": self.p_holm, "runs_needed": self.runs_needed,
                "design": self.design, "window_samples": self.window_samples, "min_effect": c.smallest_effect,
                "reason": self.reason or None}


# --- per-run values ----------------------------------------------------------------------------------------------

def per_run_values(cell: Cell, metric: str, slope: Callable[[object], float | None] | None = None) -> list[float]:
    """The metric of each run of the cell, as compare tests it (the tail: each run's bound at p = 1e-9, a refused
    run giving none; memory per task: `slope(run)`, the run's least-squares slope)."""
    if metric in METRICS:
        return cell.per_run_values(metric)
    if metric == TAIL:
        return [b.value for b in cell.tail_bounds().values() if b.value is not None]
    if slope is None:
        return []
    return [v for v in (slope(r) for r in cell.runs) if v is not None]


def run_var(cell: Cell, metric: str, values: list[float]) -> float | None:
    """The variance of one run's value: the per-run values' total variance of variance.Components (between-run
    plus within-run at the runs' length); for metrics without components (tail, memory per task) the same
    quantity from the values."""
    if len(values) < 2:
        return None
    if metric in METRICS:
        return cell.components(metric).total_var
    return float(np.var(values, ddof=1))


# --- judging -----------------------------------------------------------------------------------------------------

def find(claim: Claim, side: str, cells: list[Cell], keys: set[str] | None = None) -> tuple[Cell | None, str]:
    """The one configuration of `cells` the claim's side selects, or (None, why). keys: the spec cells the side
    names (`run.cell` of the runs a spec made): a configuration with such a run is the side's, whatever
    settings its runtime records beside them (the BEAM records its defaults, so `fullsweep_after=65535` alone
    also matches its `priority=high` runs); other runs (imported, another spec) are matched by their settings."""
    if keys:
        found = [c for c in cells if any(getattr(r, "cell", None) in keys for r in c.runs)]
        if len(found) == 1:
            return found[0], ""
    found = [c for c in cells if claim.selects(side, c.config)]
    if len(found) == 1:
        return found[0], ""
    what = " ".join(f"{n}={v}" for n, v in (*claim.where, *(claim.cell if side == "cell" else claim.baseline)))
    if not found:
        return None, f"no run of the {side} ({what}) in the selection"
    return None, (f"the {side} ({what}) matches {len(found)} configurations of the selection "
                  f"({'; '.join(c.config.label for c in found[:3])}{'...' if len(found) > 3 else ''}); "
                  "narrow the selection (--where) or the claim's where")


def judge(claims: list[Claim], cells: list[Cell], *, alpha: float = ALPHA,
          not_measurable: dict[str, str] | None = None,
          slope: Callable[[object], float | None] | None = None,
          keys: dict[tuple[str, str], set[str]] | None = None,
          interval_alpha: float = 0.05) -> list[Judgement]:
    """Every claim's verdict on these configurations (module doc). not_measurable: claim id -> why this machine
    cannot make its runs (decided by the caller, which knows the targets); slope: a run's memory per task;
    keys: (claim id, side) -> the spec cells that side names (find); interval_alpha: the intervals' level
    (1 − interval_alpha), which a sequential look lowers with alpha (paired.spent)."""
    not_measurable, keys = not_measurable or {}, keys or {}
    out = []
    for claim in claims:
        j = Judgement(claim, level=1.0 - interval_alpha)
        out.append(j)
        if claim.id in not_measurable:
            j.verdict, j.reason = "not measurable here", not_measurable[claim.id]
            continue
        cell, why = find(claim, "cell", cells, keys.get((claim.id, "cell")))
        base, why_base = find(claim, "baseline", cells, keys.get((claim.id, "baseline"))) if claim.two_sided \
            else (None, "")
        if cell is None or (claim.two_sided and base is None):
            j.reason = "; ".join(w for w in (why, why_base) if w)
            continue
        j.unit = cell.config.unit
        unmet, j._in_force = never_in_force(claim, [cell, base], cells)
        if unmet:
            j.verdict, j.reason = "not measurable here", unmet
            continue
        mine = per_run_values(cell, claim.metric, slope)
        theirs = per_run_values(base, claim.metric, slope) if base is not None else []
        {"lower": _direction, "higher": _direction, "same": _same, "ratio": _ratio, "below": _below}[
            claim.expect.kind](j, cell, base, mine, theirs)
    family = [j for j in out if j.p is not None and j.claim.expect.kind in EXPECT_WORDS]
    for j, adjusted in zip(family, holm([j.p for j in family])):
        j.p_holm = adjusted
        if adjusted <= alpha:
            j.verdict = j._decide
            if j.verdict == "contradicted" and j._absent:
                j.reason = j._absent
    level = alpha / max(1, len(family))
    for j in out:
        if j.verdict == "undecided" and not j.reason and j.interval is not None:
            j.reason = UNDECIDED_BECAUSE[j.claim.expect.kind] + _near_an_end(j)
        if j.verdict == "undecided" and j._var is not None and j._delta is not None:
            a = interval_alpha if j.claim.expect.kind in EXPECT_TABLES else level
            j.runs_needed = runs_needed(j._delta, j._var, min(0.5, a * j._alpha_scale), POWER) if j._delta else None
            if j.runs_needed is None and not j.reason:
                j.reason = ("the estimate sits on the claim's boundary: no number of runs decides it"
                            if not j._delta else "more than 100,000 runs per configuration would be needed")
    for j in out:
        if j._in_force:
            j.reason = "; ".join(x for x in (j.reason, f"measured as in force: {j._in_force}") if x)
    return out


def never_in_force(claim: Claim, sides: list[Cell | None], cells: list[Cell]) -> tuple[str, str]:
    """(why the claim is not measurable, a note): a setting the claim names that a side did not get in force makes
    it not measurable when the side ran the same as another configuration (as its baseline, or as the cell that
    asked for the value it got: `min_heap_size=34` ran as `min_heap_size=233`), else a note that says what was in
    force (`min_heap_size 6765 requested, 6772 in force`: the VM's next heap size)."""
    named = {n for n, _ in (*claim.where, *claim.cell, *claim.baseline)}
    why, notes = [], []
    for c in (s for s in sides if s is not None):
        items = [x for x in c.config.not_in_force if x[0] in named]
        if not items:
            continue
        twin = next((d for d in cells if d is not c and c.config.ran_as(d.config)), None)
        if twin is not None:
            ran = ", ".join(setting_text(k, f) for k, _, f in items)
            why.append(f"{not_in_force_text(items)}: its runs ran as those with {ran}, so they never had the "
                       "setting the claim is about")
        else:
            notes.append(not_in_force_text(items))
    return "; ".join(why), "; ".join(notes)


def _few(j: Judgement, n_cell: int, n_base: int, two_sided: bool = True) -> bool:
    j.runs = (n_cell, n_base)
    if n_cell >= MIN_RUNS and (n_base >= MIN_RUNS or not two_sided):
        return False
    j.reason = few_runs_reason(n_cell, n_base if two_sided else None, f" with a {j.claim.metric}",
                               ", and the runs needed cannot be computed")
    return True


def _means(j: Judgement, mine: list[float], theirs: list[float]) -> None:
    j.value = float(np.mean(mine)) if mine else None
    j.baseline = float(np.mean(theirs)) if theirs else None


def _pooled_var(j: Judgement, cell: Cell, base: Cell, mine: list[float], theirs: list[float]) -> float | None:
    a, b = run_var(cell, j.claim.metric, mine), run_var(base, j.claim.metric, theirs)
    return None if a is None or b is None else (a + b) / 2.0


def _estimate(j: Judgement, cell: Cell, base: Cell, mine: list[float], theirs: list[float],
              log: bool = False) -> Estimate | None:
    """The evidence of a two-sided claim: window-pair differences when the two configurations were interleaved
    (paired.py; the replicate is then the paired run), else Welch on per-run values (on logs for a ratio); None
    when there is too little to test (the reason set)."""
    if j.claim.metric in METRICS:
        res = paired_evidence(cell, base, j.claim.metric)
        if res is not None:
            j.value, j.baseline, j.design = res.value, res.baseline, res.design
            j.runs, j.window_samples = (res.runs, res.runs), res.window_samples
            j._var = res.estimate.se ** 2 * res.runs / 2.0   # one paired run's, in runs_needed's two-sample form
            return res.estimate
    _means(j, mine, theirs)
    if _few(j, len(mine), len(theirs)):
        return None
    a, b = np.asarray(mine, float), np.asarray(theirs, float)
    if log:
        if min(mine) <= 0 or min(theirs) <= 0:
            j.reason = f"a ratio needs positive values; the {j.claim.metric} of a run is ≤ 0"
            return None
        a, b = np.log(a), np.log(b)
        j._var = (float(np.var(a, ddof=1)) + float(np.var(b, ddof=1))) / 2.0
    else:
        j._var = _pooled_var(j, cell, base, mine, theirs)
    return welch_estimate(a, b)


def _direction(j, cell, base, mine, theirs) -> None:
    """lower/higher: significant in the expected direction holds, in the other contradicts; and an effect shown
    smaller than the claim's smallest effect of interest (±min_effect × baseline, two one-sided tests) is absent
    here, which contradicts the claim too. Of the two tests, whose null hypotheses exclude each other, the one
    with the smaller p is the claim's (as for `same`)."""
    est = _estimate(j, cell, base, mine, theirs)
    if est is None:
        return
    lo, hi = est.interval(1.0 - j.level)
    j.interval, j.interval_of = (est.difference(lo), est.difference(hi)), "difference"
    want = -1 if j.claim.expect.kind == "lower" else 1
    p_dir = est.p()
    j._decide = "holds" if np.sign(est.value) == want else "contradicted"
    if not (lo > 0 or hi < 0):   # the interval holds 0: whatever Holm says, no direction is shown
        j._decide = "undecided"
    rel = j.claim.smallest_effect
    p_absent = max(est.above(est.relative(-rel, j.baseline)), 1.0 - est.above(est.relative(rel, j.baseline))) \
        if rel else 1.0
    m = est.relative(rel, j.baseline) if rel else 0.0
    lo, hi = j.interval
    if p_absent < p_dir:
        j.p, j._decide = p_absent, "contradicted"
        j._absent = (f"the effect here is at most {_relative(max(abs(lo), abs(hi)), j.baseline)} of the baseline "
                     f"(interval inside ±{j.claim.min_effect_text(j.baseline)}, the smallest effect of interest)"
                     f"{_published_change(j.claim)}")
        j._delta, j._alpha_scale = abs(m - abs(est.value)), 2.0
    else:
        j.p = p_dir
        j._delta = abs(est.value)


def _relative(x: float, base: float | None) -> str:
    return f"{x / abs(base):.1%}" if base else f"{x:g}"


def _published_change(claim: Claim) -> str:
    pub = claim.published or {}
    if pub.get("baseline") and pub.get("cell") is not None:
        return f", where the study saw {(pub['cell'] - pub['baseline']) / pub['baseline']:+.0%}"
    return ""


def _same(j, cell, base, mine, theirs) -> None:
    """TOST: the difference is within ±m when both one-sided tests (against −m and +m) reject; it is beyond the
    margin when the one-sided test on its side does."""
    est = _estimate(j, cell, base, mine, theirs)
    if est is None:
        return
    margin = j.claim.expect.margin
    m = est.relative(margin, j.baseline)
    lo, hi = est.interval(1.0 - j.level)
    j.interval, j.interval_of = (est.difference(lo), est.difference(hi)), "difference"
    above_low = est.above(est.relative(-margin, j.baseline))   # H0: diff ≤ −m  against  diff > −m
    below_high = 1.0 - est.above(m)                            # H0: diff ≥ +m  against  diff < +m
    equivalent = max(above_low, below_high)
    beyond = min(1.0 - above_low, 1.0 - below_high)   # H0: |diff| within the margin, on the side it lies
    if equivalent <= beyond:
        j.p, j._decide = equivalent, "holds"
    else:
        j.p, j._decide = beyond, "contradicted"
    j._delta = abs(m - abs(est.value))
    j._alpha_scale = 2.0


def _near_an_end(j) -> str:
    """For a ratio measured within 1 % of its range's end: that a truth so close to an end may take any budget
    to decide (the interval must shrink to the gap between them)."""
    if j._edge is None:
        return ""
    ratio, end = j._edge
    gap = abs(ratio / end - 1)
    return (f"; the measured ratio {ratio:.3f} is {gap * 100:.1f} % from the range's end {end:g}, and a ratio "
            "that close to an end is decided only when the interval is narrower than the gap, if ever"
            ) if gap < 0.01 else ""


def _ratio(j, cell, base, mine, theirs) -> None:
    est = _estimate(j, cell, base, mine, theirs, log=True)   # paired evidence is a log ratio already
    if est is None:
        return
    lo, hi = est.interval(1.0 - j.level)
    j.interval, j.interval_of = (ratio_of(lo), ratio_of(hi)), "ratio"
    e = j.claim.expect
    if e.low <= j.interval[0] and j.interval[1] <= e.high:
        j.verdict = "holds"
    elif j.interval[1] < e.low or j.interval[0] > e.high:
        j.verdict = "contradicted"
    nearest = min((e.low, e.high), key=lambda end: abs(est.value - math.log(end)))
    j._delta = abs(est.value - math.log(nearest))
    j._edge = (ratio_of(est.value), nearest)


def _below(j, cell, base, mine, theirs) -> None:
    """One configuration's value against a bound: Welch's test of the per-run values against a constant is the
    one-sample t-test (the constant side has no variance; Welch's df is then n − 1)."""
    j.value = float(np.mean(mine)) if mine else None
    if _few(j, len(mine), 0, two_sided=False):
        return
    unit, factor = UNITS[j.claim.expect.unit]
    bound = j.claim.expect.bound * factor
    lo, hi = welch_estimate(np.asarray(mine, float), np.full(2, bound)).interval(1.0 - j.level)
    j.interval, j.interval_of = (lo + bound, hi + bound), "value"
    if hi < 0:
        j.verdict = "holds"
    elif lo > 0:
        j.verdict = "contradicted"
    j._delta = abs(j.value - bound)
    var = run_var(cell, j.claim.metric, mine)
    j._var = None if var is None else var / 2.0   # one sample of r runs: the two-sample formula at half the variance


def memory_slope(store) -> Callable[[object], float | None]:
    """A run's memory per task: the least-squares slope of its primary column against its `tasks` column
    (fit.least_squares, as `rtscope tasks-table` fits a model's runs together); None for a run without them."""
    from ..errors import UsageError
    from .fit import least_squares

    def slope(run) -> float | None:
        names = [c["name"] for c in run.columns]
        primary = run.primary["name"]
        if "tasks" not in names or primary not in names:
            return None
        data = store.samples(run.id, ["tasks", primary])
        try:
            return least_squares(data["tasks"], data[primary]).slope
        except UsageError:
            return None
    return slope


def evidence_text(judgements) -> str:
    """How lower/higher claims were tested, said alike by reproduce, the report's claims table and its tables:
    `Welch t-test on per-run values`, or with interleaved or duet claims the paired test first."""
    from ..words import counted
    designs = {}
    for j in judgements:
        if j.design != "runs":
            designs[j.design] = designs.get(j.design, 0) + 1
    paired = ", ".join(f"{d} ({counted(n, 'claim')})" for d, n in sorted(designs.items()))
    return ("Welch t-test on per-run values" if not paired else
            f"{paired}: paired t-test on window-pair differences, else Welch t-test on per-run values")


def needed_command(j: Judgement, command: str, aside: dict[str, str]) -> str | None:
    """The command that would decide an undecided claim (a set-aside one's reason names its own)."""
    if j.verdict != "undecided" or j.claim.id in aside:
        return None
    if j.runs_needed is not None:
        return f"{command} --repetitions {j.runs_needed}"
    if j.runs[0] < 2 or (j.claim.two_sided and j.runs[1] < 2):
        return f"{command} --repetitions {PLAN_MIN_RUNS}"
    return None


def machine_text(env: dict) -> str:
    """A machine as a line: CPU, architecture, kernel and preemption model; a VM's accelerator."""
    parts = [env.get("cpu_model") or "?", env.get("machine") or "?", f"Linux {env.get('kernel_release') or '?'}",
             env.get("preemption") or ""]
    if env.get("board"):
        parts.insert(0, env["board"])
    if env.get("accelerator"):
        parts.append(f"VM ({env['accelerator']})")
    return ", ".join(p for p in parts if p)
