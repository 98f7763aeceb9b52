"""The report's view of a tune (`rtscope tune`): the search and the confirmation, from the tune's stored result.

Search: the goal of every race run in run order, one colour per candidate, and the best value so far; the
candidates with their runs, their goal value and why each dropped out. Confirmation: the best configuration
against the baseline on every metric, from the confirmation's fresh runs only.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..store import Run, Store
from ..words import counted


@dataclass
class TuneView:
    doc: dict                     # the tune's result (experiment/tune/result.py)

    @property
    def title(self) -> str:
        d = self.doc
        where = "" if d["target"] == "local" else f" on {d['target']}"
        return f"tune {d['tune']}{where}: goal {d['goal']}, {counted(d['runs_used'], 'run')}, {d['verdict']}"


def tune_views(store: Store, runs: list[Run]) -> list[TuneView]:
    """The finished tunes whose experiments the report's runs belong to."""
    views = []
    for exp_id in sorted({r.experiment_id for r in runs if r.experiment_id}):
        row = store.tunes.of_experiment(exp_id)
        if row is not None and row["status"] == "finished" and row["result"]:
            views.append(TuneView(row["result"]))
    return views
