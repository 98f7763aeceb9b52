"""`/metrics`: the store in Prometheus' text format, for a lab's Prometheus and Grafana (prometheus_client).

Per target and CPU, the latest monitoring interval (`rtscope monitor`) as a latency histogram — buckets in
seconds, as Prometheus names them (`le`), from the interval's 1 µs buckets; the values beyond the probe's
histogram count only in `+Inf` — and its maximum; the runs stored per target and workload; the time the
newest run of each target was stored. Computed at scrape time from the store (cached until it changes).
"""

from __future__ import annotations

from datetime import datetime

import numpy as np

from ..analysis.threads import thread_histograms
from ..store import Store
from .views import target_of

# Upper bucket bounds in µs: 1-2-5 steps from 1 µs to 10 ms, the range a latency monitor measures.
BOUNDS_US = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


def cumulative(h: dict) -> list[tuple[str, int]]:
    """A probe-kept histogram as Prometheus buckets: (le in seconds, samples ≤ le), +Inf last (every sample).

    A stored bucket [lo, lo + w) counts under a bound when its upper edge is at most the bound."""
    counts = np.asarray(h["counts"], dtype=np.int64)
    upper = float(h.get("min_value", 0)) + float(h["bucket_width"]) * np.arange(1, len(counts) + 1)
    cum = np.concatenate([[0], np.cumsum(counts)])
    out = []
    for bound_us in BOUNDS_US:
        inside = int(np.searchsorted(upper, bound_us * 1000.0, side="right"))
        out.append((f"{bound_us / 1e6:g}", int(cum[inside])))
    total = int(h.get("n", int(counts.sum()) + int(h.get("overflow", 0))))
    out.append(("+Inf", total))
    return out


def _timestamp(text: str | None) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else None
    except ValueError:
        return None


class StoreCollector:
    """A prometheus_client collector reading the store when scraped."""

    def __init__(self, store: Store):
        self.store = store

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        runs = CounterMetricFamily("rtscope_runs_stored", "Runs stored, by target and workload.",
                                   labels=["target", "workload"])
        last = GaugeMetricFamily("rtscope_last_run_stored_timestamp_seconds",
                                 "When the newest run of the target was stored (Unix time).", labels=["target"])
        latency = HistogramMetricFamily("rtscope_monitor_latency_seconds",
                                        "Timer latency of the latest monitoring interval (rtscope monitor), "
                                        "per target and CPU.", labels=["target", "cpu"])
        maximum = GaugeMetricFamily("rtscope_monitor_latency_max_seconds",
                                    "Maximum latency of the latest monitoring interval, per target and CPU.",
                                    labels=["target", "cpu"])
        interval = GaugeMetricFamily("rtscope_monitor_interval_run",
                                     "The run id of the target's latest monitoring interval.", labels=["target"])
        counted: dict[tuple[str, str], int] = {}
        newest: dict[str, str] = {}
        latest_monitor: dict[str, int] = {}
        for run_id, workload, settings, stored_at, tags in self.store.run_origins():
            target = target_of(settings or {})
            counted[(target, workload)] = counted.get((target, workload), 0) + 1
            newest[target] = max(newest.get(target, ""), stored_at or "")
            if "monitor" in (tags or []):
                latest_monitor[target] = run_id
        for (target, workload), n in sorted(counted.items()):
            runs.add_metric([target, workload], n)
        for target, stored_at in sorted(newest.items()):
            if (ts := _timestamp(stored_at)) is not None:
                last.add_metric([target], ts)
        monitor_runs = {r.id: r for r in self.store.runs(ids=list(latest_monitor.values()))} if latest_monitor \
            else {}
        for target, run_id in sorted(latest_monitor.items()):
            interval.add_metric([target], run_id)
            for index, cpu, h in thread_histograms(monitor_runs[run_id]):
                cpu_label = str(index if cpu is None else cpu)
                latency.add_metric([target, cpu_label], cumulative(h), float(h.get("sum", 0)) / 1e9)
                maximum.add_metric([target, cpu_label], float(h.get("max", 0)) / 1e9)
        yield from (runs, last, latency, maximum, interval)


def exposition(store: Store) -> tuple[bytes, str]:
    """The text to serve and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(store))
    return generate_latest(registry), CONTENT_TYPE_LATEST
