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

from .. import stats
from ..store import Run, Store


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
    hists = run["trailer"].get("histograms") or {}
    listed = {t.get("thread"): t for t in run["trailer"].get("threads", []) if isinstance(t, dict)}
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


def resolution(run: Run) -> float | None:
    """The bucket width (in the run's unit) when its figures come from histograms, else None (exact)."""
    if run["n_samples"]:
        return None
    merged = run_histogram(run)
    return float(merged["bucket_width"]) if merged else None


def breakdown(store: Store, run: Run) -> list[ThreadPart]:
    """Each thread of a multi-thread run; empty for a run of one thread (or none recorded)."""
    if run["n_samples"] == 0:
        parts = [ThreadPart(i, cpu, stats.summarize_histogram(h), int(h.get("overflow", 0)))
                 for i, cpu, h in thread_histograms(run)]
        return parts if len(parts) > 1 else []
    names = {c["name"] for c in run["columns"]}
    if "thread" not in names:
        return []
    primary = run.primary["name"]
    data = store.samples(run.id, [primary, "thread", *(["cpu"] if "cpu" in names else [])])
    threads = data["thread"]
    indices = np.unique(threads)
    if len(indices) < 2:
        return []
    parts = []
    for t in indices.tolist():
        mine = threads == t
        cpu = None
        if "cpu" in data:
            cpus, counts = np.unique(data["cpu"][mine], return_counts=True)
            cpu = int(cpus[np.argmax(counts)])  # where the thread ran most (it may migrate unpinned)
        parts.append(ThreadPart(int(t), cpu, stats.summarize(data[primary][mine])))
    return parts


def worst(parts: list[ThreadPart], key: str = "max") -> ThreadPart | None:
    """The thread with the highest `key` statistic (the worst case of a latency run)."""
    scored = [p for p in parts if p.stats.get(key) is not None]
    return max(scored, key=lambda p: p.stats[key]) if scored else None


def distribution_source(store: Store, run: Run, *, per_thread: bool = False) -> tuple[np.ndarray | None, dict | None]:
    """What a run's statistics are computed from: its raw primary samples, else its merged histogram.

    per_thread: only the worst thread's (highest maximum) samples or histogram, for runs of several threads.
    """
    if run["n_samples"] == 0:
        found = thread_histograms(run)
        if per_thread and len(found) > 1:
            return None, max(found, key=lambda item: item[2].get("max", 0))[2]
        return None, run_histogram(run)
    values = store.primary_samples(run)
    names = {c["name"] for c in run["columns"]}
    if per_thread and "thread" in names:
        thread = store.samples(run.id, ["thread"])["thread"]
        indices = np.unique(thread)
        if len(indices) > 1:
            worst_index = max(indices.tolist(), key=lambda t: int(values[thread == t].max()))
            return values[thread == worst_index], None
    return values, None
