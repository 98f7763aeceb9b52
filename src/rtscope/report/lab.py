"""The lab's views in the report: OSADL-style monitoring plots and the fleet's worst-case table.

Monitoring (runs of `rtscope monitor`, tagged "monitor"): per CPU, the
latency histogram over every interval (1 µs bins, log y), and the maximum of
each interval in time order, loaded intervals shaded.

Fleet (runs on more than one target): one row per target with its kernel,
preemption model and board, and the worst case over its latency runs —
the table a lab looks at first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analysis import stats
from ..analysis.results import run_stats
from ..analysis.threads import thread_histograms
from ..store import Run, Store

LATENCY_WORKLOADS = ("timer",)


@dataclass
class MonitorView:
    name: str
    target: str
    histograms: dict[int, dict] = field(default_factory=dict)      # cpu -> merged histogram
    intervals: list[tuple[int, str, str, dict[int, float]]] = field(default_factory=list)  # index, end, load, cpu->max ns


def monitor_views(runs: list[Run]) -> list[MonitorView]:
    views: dict[int, MonitorView] = {}
    for run in sorted((r for r in runs if "monitor" in (r.tags or [])), key=lambda r: (r.experiment_id or 0,
                                                                                           r.plan_index or 0)):
        settings = run.settings
        view = views.setdefault(run.experiment_id or 0, MonitorView(
            f"monitoring {run.experiment_id}", str(settings.get("target", "local"))))
        maxima: dict[int, float] = {}
        for index, cpu, h in thread_histograms(run):
            cpu = index if cpu is None else cpu
            merged = stats.merge_histograms([view.histograms.get(cpu), h])
            if merged is not None:
                view.histograms[cpu] = merged
            maxima[cpu] = float(h.get("max", 0))
        view.intervals.append((run.plan_index or 0, run.finished_at or "", str(settings.get("load", "none")),
                               maxima))
    return list(views.values())


@dataclass
class FleetRow:
    target: str
    kernel: str
    preemption: str
    machine: str
    runs: int
    n: int
    worst_max: float | None      # ns
    worst_p9999: float | None    # ns
    accelerator: str | None


def fleet_rows(store: Store, runs: list[Run]) -> list[FleetRow]:
    """One row per target when the runs span several; [] otherwise."""
    by_target: dict[str, list[Run]] = {}
    for r in runs:
        by_target.setdefault(str(r.settings.get("target", "local")), []).append(r)
    if len(by_target) < 2:
        return []
    rows = []
    for name, members in sorted(by_target.items()):
        env = members[-1].machine or {}
        latency = [r for r in members if r.workload in LATENCY_WORKLOADS]
        summaries = [run_stats(store, r) for r in latency]
        maxima = [s["max"] for s in summaries if s.get("max") is not None]
        tails = [s["p9999"] for s in summaries if s.get("p9999") is not None]
        rows.append(FleetRow(name, str(env.get("kernel_release", "?")), str(env.get("preemption", "?")),
                             str(env.get("board") or env.get("cpu_model") or env.get("machine") or "?"), len(members),
                             sum(int(s.get("n") or 0) for s in summaries), max(maxima) if maxima else None,
                             max(tails) if tails else None, env.get("accelerator")))
    return rows


def histogram_xy(h: dict) -> tuple[np.ndarray, np.ndarray]:
    """Bucket lower edges (µs) and counts of the non-empty buckets."""
    counts = np.asarray(h["counts"], dtype=np.int64)
    edges = (float(h.get("min_value", 0)) + float(h["bucket_width"]) * np.arange(len(counts))) / 1000
    keep = counts > 0
    return edges[keep], counts[keep]
