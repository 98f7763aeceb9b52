"""`/metrics`: the store in Prometheus' text format, for a lab's Prometheus, Alertmanager and Grafana
(prometheus_client; docs/serve.md lists every series, docs/lab.md wires them up).

Per board (a target `rtscope monitor` watches, serve/boards.py), labelled `target`, `kernel` and `preemption`
(and `cpu` for what is per CPU): whether it is up and watched, its controller when the store records one, and
its newest interval — the latency histogram (buckets in seconds, `le`, from the interval's 1 µs buckets; the
values beyond the probe's histogram count only in `+Inf`), the maximum, p99.99 and samples per CPU, the
interval's length, when it was stored and its run id — and the intervals stored. Per target and workload the
runs stored, per target when its newest run was stored.

Labels are names that stay (never a run id or a time), so the series are a handful per board and CPU. What
the store holds is read once per change of the store (the server's cache); up and down are computed at each
scrape, since they change with the clock alone, and the text is made again only when they or the store change
(100 boards of 4 CPUs: 8,400 series, 1.1 MB, about 180 ms to write with prometheus_client).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..store import Store
from .boards import BOUNDS_US, Board, Lab, timestamp
from .views import target_of

BOARD = ["target", "kernel", "preemption"]
PER_CPU = ["target", "cpu", "kernel", "preemption"]


@dataclass(frozen=True)
class Snapshot:
    """What /metrics shows of the store as it is: its boards, runs per (target, workload), each target's newest
    run's storing time."""

    boards: list[Board]
    runs: dict[tuple[str, str], int]
    newest: dict[str, str]


def read(store: Store, lab: Lab) -> Snapshot:
    origins = store.run_origins()
    runs: dict[tuple[str, str], int] = {}
    newest: dict[str, str] = {}
    for _, workload, settings, stored_at, _ in origins:
        target = target_of(settings or {})
        runs[(target, workload)] = runs.get((target, workload), 0) + 1
        newest[target] = max(newest.get(target, ""), stored_at or "")
    return Snapshot(lab.read(origins), runs, newest)


def states(snap: Snapshot, now: float) -> tuple[bool, ...]:
    """What of the exposition changes with the clock alone: each board up or not."""
    return tuple(b.up(now) for b in snap.boards)


def families(snap: Snapshot, now: float) -> list:
    """The metric families of a snapshot at Unix time `now`."""
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily,
                                        InfoMetricFamily)

    def gauge(name, text, labels=BOARD):
        return GaugeMetricFamily(name, text, labels=labels)

    up = gauge("rtscope_board_up", "1 when the board's intervals arrive (its newest stored within 2 interval "
                                   "lengths + 10 s, or its controller says so), else 0.")
    watched = gauge("rtscope_board_watched", "1 while a controller watches the board (its monitoring runs or "
                                             "a controller holds its lease), else 0.")
    controller = InfoMetricFamily("rtscope_board_controller", "The controller watching the board (only where "
                                                              "the store records it).", labels=BOARD)
    stored = CounterMetricFamily("rtscope_board_intervals_stored", "Monitoring intervals stored for the board.",
                                 labels=BOARD)
    length = gauge("rtscope_board_interval_length_seconds", "The length of the board's newest interval.")
    stored_at = gauge("rtscope_board_interval_stored_timestamp_seconds",
                      "When the board's newest interval was stored (Unix time).")
    run_id = gauge("rtscope_board_interval_run_id", "The run id of the board's newest interval (/runs/ID).")
    latency = HistogramMetricFamily("rtscope_board_interval_latency_seconds",
                                    "Timer latency of the board's newest interval, per CPU.", labels=PER_CPU)
    maximum = gauge("rtscope_board_interval_latency_max_seconds",
                    "Maximum latency of the board's newest interval, per CPU (exact, also beyond the histogram).",
                    PER_CPU)
    p9999 = gauge("rtscope_board_interval_latency_p9999_seconds",
                  "p99.99 of the latency of the board's newest interval, per CPU (the upper edge of its 1 µs "
                  "bucket).", PER_CPU)
    samples = gauge("rtscope_board_interval_samples", "Samples of the board's newest interval, per CPU.", PER_CPU)
    for b in snap.boards:
        iv = b.newest
        labels = [b.target, iv.kernel, iv.preemption]
        up.add_metric(labels, 1 if b.up(now) else 0)
        watched.add_metric(labels, 1 if b.watched else 0)
        if b.controller is not None:
            controller.add_metric(labels, {"controller": b.controller})
        stored.add_metric(labels, b.intervals)
        length.add_metric(labels, iv.length_s)
        stored_at.add_metric(labels, b.stored_at)
        run_id.add_metric(labels, iv.run_id)
        for c in iv.cpus:
            cpu_labels = [b.target, str(c.cpu), iv.kernel, iv.preemption]
            buckets = [(f"{bound / 1e6:g}", n) for bound, n in zip(BOUNDS_US, c.at_bounds)] + [("+Inf", c.n)]
            latency.add_metric(cpu_labels, buckets, c.sum_ns / 1e9)
            maximum.add_metric(cpu_labels, c.max_ns / 1e9)
            p9999.add_metric(cpu_labels, c.p9999_ns / 1e9)
            samples.add_metric(cpu_labels, c.n)

    runs = CounterMetricFamily("rtscope_runs_stored", "Runs stored, by target and workload.",
                               labels=["target", "workload"])
    for (target, workload), n in sorted(snap.runs.items()):
        runs.add_metric([target, workload], n)
    last = GaugeMetricFamily("rtscope_last_run_stored_timestamp_seconds",
                             "When the newest run of the target was stored (Unix time).", labels=["target"])
    for target, text in sorted(snap.newest.items()):
        if (ts := timestamp(text)) is not None:
            last.add_metric([target], ts)
    return [up, watched, controller, stored, length, stored_at, run_id, latency, maximum, p9999, samples, runs,
            last]


class Collector:
    """A prometheus_client collector of fixed families."""

    def __init__(self, found: list):
        self.found = found

    def collect(self):
        yield from self.found


def exposition(snap: Snapshot, now: float | None = None) -> tuple[bytes, str]:
    """The text to serve and its content type."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(families(snap, time.time() if now is None else now)))
    return generate_latest(registry), CONTENT_TYPE_LATEST
