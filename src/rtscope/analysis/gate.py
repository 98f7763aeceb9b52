"""The CI gate of `rtscope compare --fail-on worse[:METRIC,...]`: which rows of a comparison set fail it.

A row fails the gate when its metric is one the gate selects and its verdict, after Holm's correction over
the whole set, is `worse`. Rows `not tested` (too few runs, histogram-only runs) and configurations left
without a baseline never fail it: they are reported (JUnit `skipped`), so a gate that tested nothing is
visible. The verdicts are compare's; the gate computes no statistic of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError, choices
from .defaults import ROWS, TAIL

if TYPE_CHECKING:
    from .compare import Comparison, ComparisonSet, Row

MODES = ("worse",)


@dataclass(frozen=True)
class Gate:
    mode: str = "worse"
    metrics: tuple[str, ...] = ROWS     # the tail row only where compare has it (--tail)
    enforced: bool = True       # False: `--junit` without `--fail-on` (failures reported, exit 0)

    @classmethod
    def parse(cls, text: str) -> "Gate":
        """`worse` (every metric) or `worse:p99,max`; a UsageError naming the valid modes and metrics."""
        mode, sep, names = text.strip().partition(":")
        mode = mode.strip()
        if mode not in MODES:
            raise UsageError(f"--fail-on {text!r}: unknown mode {mode!r}; valid: {choices(MODES)} (the only "
                             f"mode so far), optionally with metrics: worse:{','.join(ROWS)}")
        if not sep:
            return cls(mode)
        metrics = [m.strip() for m in names.split(",")]
        bad = [m for m in metrics if m not in ROWS]
        if bad or not any(metrics):
            what = f"unknown metric {bad[0]!r}" if bad and bad[0] else "no metric after ':'"
            raise UsageError(f"--fail-on {text!r}: {what}; valid metrics: {choices(ROWS)}")
        return cls(mode, tuple(dict.fromkeys(metrics)))

    @property
    def names_tail(self) -> bool:
        """The gate names the tail row (worse:tail): compare must compute it."""
        return self.metrics != ROWS and TAIL in self.metrics

    @property
    def text(self) -> str:
        return self.mode if self.metrics == ROWS else f"{self.mode}:{','.join(self.metrics)}"

    def fails(self, row: Row) -> bool:
        return row.metric in self.metrics and row.verdict == self.mode

    def failures(self, cs: ComparisonSet) -> list[tuple[Comparison, Row]]:
        return [(k, r) for k in cs.comparisons for r in k.rows if self.fails(r)]

    def passed(self, cs: ComparisonSet) -> bool:
        return not self.failures(cs)

    def to_json(self, cs: ComparisonSet) -> dict:
        """`compare --json`'s "gate": the rule, whether the set passed it and the rows that failed it."""
        labels = cs.labels
        failed = self.failures(cs)
        return {"fail_on": self.text, "metrics": [m for m in self.metrics if m != TAIL or cs.tail],
                "enforced": self.enforced,
                "passed": not failed,
                "failures": [{"configuration": labels[k.cell.config], "baseline": labels[k.base.config],
                              "unit": k.cell.config.unit, **r.to_json()} for k, r in failed],
                "not_tested": [{"configuration": labels[k.cell.config], "metric": r.metric, "reason": r.reason}
                               for k in cs.comparisons for r in k.rows
                               if r.metric in self.metrics and r.verdict == "not tested"],
                "not_compared": [{"configuration": labels[c.config], "reason": why} for c, why in cs.unmatched]}
