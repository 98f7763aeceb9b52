"""One run's threads: each thread's identity (index, CPU), distribution and overflows.

A multi-thread latency run (rtprobe timer -t N, cyclictest -t N run or
imported) keeps its threads apart: raw samples carry a `thread` (and `cpu`)
column, histogram-only runs one trailer histogram per thread (`thread<i>`,
with its `cpu` there or in the trailer's `threads` list). The whole run's
distribution is the sum of all threads: `run_histogram` is the one rule that
merges them, for every command and the report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..store import Run, Store
from . import stats


@dataclass
class ThreadPart:
    """One thread of a run: its index, its CPU (None: not recorded), statistics and overflows."""

    thread: int
    cpu: int | None
    stats: dict
    overflow: int = 0

    def to_json(self) -> dict:
        return {"thread": self.thread, "cpu": self.cpu, "stats": self.stats, "overflow": self.overflow}


def thread_histograms(run: Run) -> list[tuple[int, int | None, dict]]:
    """(thread index, CPU, histogram) of each trailer histogram, in thread order."""
    hists = run.trailer.get("histograms") or {}
    listed = {t.get("thread"): t for t in run.trailer.get("threads", []) if isinstance(t, dict)}
    out = []
    for position, (name, h) in enumerate(hists.items()):
        suffix = name.removeprefix("thread")
        index = int(suffix) if name.startswith("thread") and suffix.isdigit() else position
        cpu = h.get("cpu", listed.get(index, {}).get("cpu"))
        out.append((index, None if cpu is None else int(cpu), h))
    return sorted(out, key=lambda item: item[0])


def run_histogram(run: Run) -> dict | None:
    """The run's whole distribution as one histogram: the sum of its threads' (None: it kept none,
    or they have different bucket layouts)."""
    return stats.merge_histograms([h for _, _, h in thread_histograms(run)])


def thread_samples(store: Store, run: Run) -> list[tuple[int, int | None, np.ndarray]]:
    """(thread index, CPU, primary samples) of each thread of a raw run with a `thread` column, in thread
    order; the CPU is where the thread ran most (an unpinned thread may migrate), None when not recorded."""
    names = {c["name"] for c in run.columns}
    if run.n_samples == 0 or "thread" not in names:
        return []
    primary = run.primary["name"]
    data = store.samples(run.id, [primary, "thread", *(["cpu"] if "cpu" in names else [])])
    out = []
    for t in np.unique(data["thread"]).tolist():
        mine = data["thread"] == t
        cpu = None
        if "cpu" in data:
            cpus, counts = np.unique(data["cpu"][mine], return_counts=True)
            cpu = int(cpus[np.argmax(counts)])
        out.append((int(t), cpu, data[primary][mine]))
    return out


def breakdown(store: Store, run: Run) -> list[ThreadPart]:
    """Each thread of a multi-thread run; empty for a run of one thread (or none recorded)."""
    if run.n_samples == 0:
        parts = [ThreadPart(i, cpu, stats.summarize_histogram(h), int(h.get("overflow", 0)))
                 for i, cpu, h in thread_histograms(run)]
    else:
        parts = [ThreadPart(i, cpu, stats.summarize(values)) for i, cpu, values in thread_samples(store, run)]
    return parts if len(parts) > 1 else []
