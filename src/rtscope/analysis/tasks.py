"""Study 5's switch table, computed from stored `tasks switch` runs (the memory fit is in fit.py beside it)."""

from __future__ import annotations

import numpy as np

from ..store import Run, Store
from . import stats
from .fit import model_label, varying_settings


def switch_rows(store: Store, runs: list[Run]) -> list[dict]:
    """Per task model: ns per switch over every batch of its runs (median, p99 and the rest of stats)."""
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault((run.runtime, tuple(sorted(run.settings.items()))), []).append(run)
    rows = []
    varying = varying_settings([dict(k[1]) for k in groups])
    for (runtime, settings), members in groups.items():
        values = np.concatenate([store.primary_samples(r) for r in members])
        st = stats.summarize(values)
        rows.append({"label": model_label(runtime, dict(settings), varying), "runtime": runtime,
                     "settings": dict(settings), "runs": [r.id for r in members],
                     "unit": members[0].primary.get("unit", ""), **st})
    return rows
