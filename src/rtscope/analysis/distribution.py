"""A run's distribution: the one object every command and the report read a run's figures from.

`of_run` takes a stored run (or its worst thread) to its statistics and says
where they come from: every raw sample (exact) or the sum of its threads'
histograms (then `resolution` is the bucket width: percentiles are the upper
edge of the bucket that holds the rank, never above the maximum).

An imported run may also carry the tool's own headline (the sample file's
`summary`: n, min, mean, max, and stdev where the tool prints it). Those
figures are the run's: they replace what the samples or histogram would give
(fio's samples are bin values, Xenomai's log without -h has no samples at all),
and a statistic the tool's output cannot give is None ("not available").
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..store import Run, Store
from . import stats
from .threads import run_histogram, thread_histograms, thread_samples


REPORTED_KEYS = ("n", "min", "mean", "max", "stdev")  # what a tool's summary may state


@dataclass
class Distribution:
    stats: dict
    samples: np.ndarray | None = None   # raw primary samples, in measurement order
    histogram: dict | None = None       # else the merged histogram (sample-file trailer form)
    reported: dict | None = None        # the importing tool's own summary, when it printed one

    @property
    def exact(self) -> bool:
        return self.samples is not None

    @property
    def percentile_definition(self) -> str:
        """How this distribution's percentiles are computed: from samples or from histogram buckets."""
        return stats.PERCENTILE_DEFINITION if self.histogram is None else stats.HISTOGRAM_PERCENTILE_DEFINITION

    @property
    def resolution(self) -> float | None:
        """The bucket width when the figures come from a histogram; None when they are exact."""
        return None if self.histogram is None else float(self.histogram["bucket_width"])


def of_run(store: Store, run: Run, *, per_thread: bool = False) -> Distribution | None:
    """The run's distribution (None: it kept neither samples nor a histogram).

    per_thread: for a run of several threads, its worst thread's (the highest maximum) instead of all of them.
    """
    dist = _measured(store, run, per_thread)
    summary = run.trailer.get("summary")
    if not isinstance(summary, dict) or (per_thread and len(thread_histograms(run)) > 1):
        return dist
    if dist is None:
        return Distribution(with_reported(None, summary), reported=summary)
    return replace(dist, stats=with_reported(dist.stats, summary), reported=summary)


def with_reported(measured: dict | None, summary: dict) -> dict:
    """Statistics with the tool's own figures in place of those derived from its samples or histogram.
    Without samples or a histogram, what the tool did not state (its percentiles) stays None."""
    out = dict(measured) if measured else {k: None for k in stats.STAT_KEYS}
    for key in REPORTED_KEYS:
        if summary.get(key) is not None:
            out[key] = summary[key]
    if summary.get("stdev") is not None:
        out["var"] = float(summary["stdev"]) ** 2
    return out


def pool_reported(pooled: dict, per: list[dict]) -> dict:
    """Several runs' statistics taken as one sample, where some are a tool's reported summary (which its samples,
    if any, do not reproduce): n, min, mean, max and the variance combined from the runs' own figures; the
    percentiles stay the pooled samples' (None for summary-only runs: not available)."""
    per = [p for p in per if p.get("n")]
    n = sum(p["n"] for p in per)
    if not n:
        return pooled
    out = {**pooled, "n": n, "min": min(p["min"] for p in per), "max": max(p["max"] for p in per), "mean": None}
    if all(p["mean"] is not None for p in per):
        out["mean"] = mean = sum(p["mean"] * p["n"] for p in per) / n
        if n > 1 and all(p["var"] is not None for p in per):
            within = sum((p["n"] - 1) * p["var"] for p in per)
            between = sum(p["n"] * (p["mean"] - mean) ** 2 for p in per)
            out["var"] = (within + between) / (n - 1)
            out["stdev"] = out["var"] ** 0.5
    return out


def measured(store: Store, run: Run) -> tuple[np.ndarray | None, dict | None]:
    """What a run's figures come from, not yet summarised: its samples, or its histogram when it kept none
    (None: neither)."""
    return (None, run_histogram(run)) if run.n_samples == 0 else (store.primary_samples(run), None)


def _measured(store: Store, run: Run, per_thread: bool) -> Distribution | None:
    if per_thread and run.n_samples == 0 and len(found := thread_histograms(run)) > 1:
        hist = max(found, key=lambda item: item[2].get("max", 0))[2]
        return Distribution(stats.summarize_histogram(hist), histogram=hist)
    threads = thread_samples(store, run) if per_thread and run.n_samples else []
    if len(threads) > 1:
        values = max((v for _, _, v in threads), key=lambda v: int(v.max()))
        return Distribution(stats.summarize(values), samples=values)
    values, hist = measured(store, run)
    if values is not None:
        return Distribution(stats.summarize(values), samples=values)
    return Distribution(stats.summarize_histogram(hist), histogram=hist) if hist is not None else None
