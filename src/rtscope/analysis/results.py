"""Statistics of stored runs, and how to show their values to people."""

from __future__ import annotations

from ..store import Run, Store
from . import stats
from .distribution import of_run, pool_reported
from ..words import id_ranges  # noqa: F401  (here for the report's modules)

# Study-style columns first (AVG MAX VAR STDEV), then the distribution.
DISPLAY = (("n", "n"), ("min", "MIN"), ("mean", "AVG"), ("max", "MAX"), ("var", "VAR"), ("stdev", "STDEV"),
           ("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99"))


def run_stats(store: Store, run: Run) -> dict:
    """Summary of a run's primary column; from its histograms when the probe kept only those."""
    dist = of_run(store, run)
    return dist.stats if dist is not None else stats.summarize([])


def pooled_stats(store: Store, runs: list[Run]) -> dict:
    """Summary of the primary samples of several runs taken as one sample (repetitions of one cell); n, min,
    mean and max from the runs' own figures when a tool reported them (imported runs)."""
    pooled = stats.summarize([store.primary_samples(r) for r in runs])
    if any(isinstance(r.trailer.get("summary"), dict) for r in runs):
        pooled = pool_reported(pooled, [run_stats(store, r) for r in runs])
    return pooled


def display_unit(unit: str) -> tuple[str, float]:
    """Times are stored in ns and shown in µs; other units as they are."""
    return ("µs", 1e-3) if unit == "ns" else (unit, 1.0)


def fmt(key: str, value, scale: float) -> str:
    if value is None:
        return "-"
    if key == "n":
        return f"{int(value):,}"
    v = round(value * scale * scale if key == "var" else value * scale, 9)  # 78000 ns -> 78, not 78.00000000000001
    if abs(v) >= 1000 or v == int(v):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}" if abs(v) < 1 else f"{v:.2f}"
