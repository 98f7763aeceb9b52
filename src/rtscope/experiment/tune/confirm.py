"""The confirmation: the verdict from fresh runs of the race's winner, its runner-up and the baseline only.

The race's own runs chose the winner, so they flatter it (the winner's curse); the confirmation's runs,
made afterwards in interleaved random order, decide. Each of winner and runner-up is compared with the
baseline on every metric with analysis.compare's run-level tests (its runs are the replicates), all p-values Holm-corrected as one family. The best
configuration is the one of the two whose goal is significantly better than the baseline's (the lower goal
value if both are); when neither is, the baseline stays the best configuration rtscope can prove.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...analysis.compare import Cell, Comparison, adjust, compare_cells

WINNER, RUNNER_UP, BASELINE = "winner", "runner_up", "baseline"


@dataclass
class Verdict:
    comparisons: dict[str, Comparison]   # role -> its comparison with the baseline
    best: str                            # the role of the best configuration proven (baseline: none beat it)

    @property
    def improved(self) -> bool:
        return self.best != BASELINE

    def shown(self) -> Comparison | None:
        """The comparison the verdict is about: the best's, or the winner's when the baseline stays."""
        return self.comparisons.get(self.best) or self.comparisons.get(WINNER) or self.comparisons.get(RUNNER_UP)


def verdict(cells: dict[str, Cell], goal: str, alpha: float) -> Verdict:
    """cells: role -> the confirmation runs of that configuration (roles WINNER, RUNNER_UP, BASELINE)."""
    base = cells[BASELINE]
    comparisons = {role: compare_cells(cells[role], base)
                   for role in (WINNER, RUNNER_UP) if role in cells}
    rows = [r for k in comparisons.values() for r in k.rows]
    adjust([r for r in rows if r.metric == goal], alpha)
    adjust([r for r in rows if r.metric != goal], alpha)
    proven = [role for role, k in comparisons.items() if k.row(goal).verdict == "better"]
    best = min(proven, key=lambda role: comparisons[role].row(goal).value) if proven else BASELINE
    return Verdict(comparisons, best)
