"""Recommend the configuration that best meets a goal, with its evidence and its cost.

For a goal metric (minimise max, p99, stdev, mean or median) and every group
of configurations that share a baseline (see compare.Baseline), the
recommendation is the configuration whose goal row is `better` than the
baseline after the Holm correction and whose goal value is the lowest. Its
evidence is that row (change, 95% interval of the difference where the test
has one, p-value, Cliff's delta of the whole distribution) and its cost is
every other metric's row. When two or more configurations are better, the
best is tested once more against the runner-up (one uncorrected test, said
so): if that is not significant they are reported as tied. When none is
better, the recommendation is to keep the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError, choices
from .defaults import GOALS
from .compare import METRICS, Comparison, ComparisonSet, Cell, compare_cells
from .results import display_unit, fmt



def check_goal(goal: str) -> str:
    if goal not in GOALS:
        raise UsageError(f"unknown goal {goal!r}; valid goals: {choices(GOALS)} (each is minimised)")
    return goal


def change(ratio: float | None) -> str:
    """'−58%' / '+5.0%' (a relative change, with a real minus sign)."""
    if ratio is None:
        return "n/a"
    pct = (ratio - 1.0) * 100.0
    text = f"{abs(pct):.0f}%" if abs(pct) >= 10 else f"{abs(pct):.1f}%"
    return ("−" if pct < 0 else "+") + text


def p_text(p: float | None) -> str:
    if p is None:
        return "-"
    if p == 0.0:
        return "<1e-300"
    return f"{p:.2g}" if p < 0.001 else f"{p:.3f}"


@dataclass
class Recommendation:
    goal: str
    baseline: Cell
    comparisons: list[Comparison]
    best: Comparison | None
    runner_up: Comparison | None = None
    runner_up_p: float | None = None      # uncorrected test of best against runner-up on the goal
    tied: bool = False

    def evidence(self, labels: dict) -> str:
        k = self.best
        if k is None:
            return ""
        row = k.row(self.goal)
        shown, scale = display_unit(k.cell.config.unit)
        parts = [f"{self.goal} {change(row.ratio)}"]
        if row.ci:
            parts.append(f"95% CI of the difference {fmt(row.metric, row.ci[0], scale)} .. "
                         f"{fmt(row.metric, row.ci[1], scale)} {shown}")
        parts.append(f"{row.test} p (Holm) {p_text(row.p_holm)}")
        if k.cliffs_delta is not None:
            parts.append(f"Cliff's δ {k.cliffs_delta:+.2f} ({k.magnitude})")
        return ", ".join(parts)

    def cost(self) -> list[str]:
        if self.best is None:
            return []
        out = []
        for m in METRICS:
            if m == self.goal:
                continue
            r = self.best.row(m)
            out.append(f"{m} {change(r.ratio)} ({r.verdict})")
        return out

    def others(self, labels: dict) -> list[str]:
        out = []
        for k in self.comparisons:
            if k is self.best:
                continue
            r = k.row(self.goal)
            what = r.verdict if r.verdict == "no significant difference" else \
                f"{self.goal} {change(r.ratio)} ({r.verdict})"
            out.append(f"{labels[k.cell.config]}: {what}")
        return out

    @property
    def untested(self) -> str:
        """Why nothing could be judged on the goal ("" when some row was tested)."""
        rows = [k.row(self.goal) for k in self.comparisons]
        return rows[0].reason if rows and all(r.verdict == "not tested" for r in rows) else ""

    def summary(self, labels: dict) -> str:
        base = labels[self.baseline.config]
        if self.best is None and self.untested:
            return f"no recommendation against {base}: {self.goal} is not tested ({self.untested})"
        if self.best is None:
            return f"keep {base}: no configuration is significantly better on {self.goal}"
        text = f"{labels[self.best.cell.config]} (against {base}): {self.evidence(labels)}"
        if self.tied and self.runner_up is not None:
            text += f"; tied with {labels[self.runner_up.cell.config]} (p {p_text(self.runner_up_p)}, uncorrected)"
        return text

    def to_json(self, labels: dict) -> dict:
        best = self.best
        return {
            "goal": self.goal, "baseline": labels[self.baseline.config],
            "recommended": labels[best.cell.config] if best else labels[self.baseline.config],
            "not_in_force": (best.cell if best else self.baseline).config.not_in_force_json,
            "keep_baseline": best is None and not self.untested, "not_tested_because": self.untested or None,
            "summary": self.summary(labels),
            "evidence": ({**best.row(self.goal).to_json(), "cliffs_delta": best.cliffs_delta,
                          "magnitude": best.magnitude} if best else None),
            "cost": {m: best.row(m).to_json() for m in METRICS if m != self.goal} if best else None,
            "runner_up": ({"configuration": labels[self.runner_up.cell.config], "p_uncorrected": self.runner_up_p,
                           "tied": self.tied} if self.runner_up else None),
            "others": [{"configuration": labels[k.cell.config], "not_in_force": k.cell.config.not_in_force_json,
                        **k.row(self.goal).to_json()}
                       for k in self.comparisons if k is not best],
        }


def recommend(cs: ComparisonSet, goal: str) -> list[Recommendation]:
    """One recommendation per baseline configuration (per group compared against it)."""
    check_goal(goal)
    groups: dict[int, list[Comparison]] = {}
    for k in cs.comparisons:
        groups.setdefault(id(k.base), []).append(k)
    out = []
    for comps in groups.values():
        # A configuration that ran with its baseline's settings is no setting to recommend (an A/A comparison).
        better = sorted((k for k in comps if k.row(goal).verdict == "better"
                         and not k.cell.config.ran_as(k.base.config)),
                        key=lambda k: k.row(goal).value)
        rec = Recommendation(goal, comps[0].base, comps, better[0] if better else None)
        if len(better) >= 2:
            rec.runner_up = better[1]
            head = compare_cells(better[0].cell, better[1].cell).row(goal)
            rec.runner_up_p = head.p
            rec.tied = head.p is None or head.p > cs.alpha
        out.append(rec)
    return out
