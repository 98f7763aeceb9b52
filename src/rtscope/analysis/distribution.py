"""A run's distribution: the one object every command and the report read a run's figures from.

`of_run` takes a stored run (or its worst thread) to its statistics and says
where they come from: every raw sample (exact) or the sum of its threads'
histograms (then `resolution` is the bucket width: percentiles are the upper
edge of the bucket that holds the rank, never above the maximum).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..store import Run, Store
from . import stats
from .threads import run_histogram, thread_histograms, thread_samples


@dataclass
class Distribution:
    stats: dict
    samples: np.ndarray | None = None   # raw primary samples, in measurement order
    histogram: dict | None = None       # else the merged histogram (sample-file trailer form)

    @property
    def exact(self) -> bool:
        return self.samples is not None

    @property
    def resolution(self) -> float | None:
        """The bucket width when the figures come from a histogram; None when they are exact."""
        return None if self.histogram is None else float(self.histogram["bucket_width"])


def of_run(store: Store, run: Run, *, per_thread: bool = False) -> Distribution | None:
    """The run's distribution (None: it kept neither samples nor a histogram).

    per_thread: for a run of several threads, its worst thread's (the highest maximum) instead of all of them.
    """
    if run.n_samples == 0:
        if per_thread and len(found := thread_histograms(run)) > 1:
            hist = max(found, key=lambda item: item[2].get("max", 0))[2]
        else:
            hist = run_histogram(run)
        return Distribution(stats.summarize_histogram(hist), histogram=hist) if hist is not None else None
    threads = thread_samples(store, run) if per_thread else []
    values = max((v for _, _, v in threads), key=lambda v: int(v.max())) if len(threads) > 1 else \
        store.primary_samples(run)
    return Distribution(stats.summarize(values), samples=values)
