"""Latency histograms: count per µs bucket, log y, one curve per configuration overlaid.

This is study 2's figure (and OSADL's latency plots): min/avg/max alone hide
the shape, the histogram shows it. A `LatencySeries` is one configuration's
histogram with its statistics; make it from every raw sample
(`from_samples`), from the trailer histograms a probe or importer kept
(`from_histograms`, threads merged) or from a stored run (`from_run`).
`latency_figure` draws any number of them and returns a matplotlib Figure;
`rebin` groups them into a few rows for a terminal.

Statistics: from samples, percentiles interpolate linearly (type 7, see
analysis/stats.py); from a histogram they are the upper edge of the bucket holding
the rank (shown with ≤); min, max and mean are exact either way, except for
imported cyclictest histograms whose mean comes from its printed average.
Overflows are values beyond a kept histogram's range: counted, position
unknown, never dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..analysis import stats
from ..analysis.distribution import of_run
from ..errors import UsageError

BUCKET_NS = 1000  # 1 µs, as the probe's and cyclictest's histograms
MAX_BUCKETS = 10_000_000
TAIL = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("p9999", "p99.99"))


@dataclass
class LatencySeries:
    label: str
    histogram: dict             # trailer form (docs/sample-format.md), values in ns, threads merged
    stats: dict                 # n, min, mean, max, p50 ... p9999 (ns)
    overflow: int = 0           # values beyond the kept histogram's range (0 when every sample is kept)
    missed: int | None = None   # missed periods, when the probe counts them
    exact: bool = True          # percentiles from every sample (else bucket upper bounds)

    @property
    def counts(self) -> np.ndarray:
        return np.asarray(self.histogram["counts"], dtype=np.int64)

    @property
    def edges_us(self) -> np.ndarray:
        h = self.histogram
        return (h.get("min_value", 0) + h["bucket_width"] * np.arange(len(h["counts"]) + 1)) / 1000.0


def merge_histograms(hists: Iterable[dict]) -> dict:
    """stats.merge_histograms, refusing layouts that cannot be summed (a figure needs one)."""
    merged = stats.merge_histograms(list(hists))
    if merged is None:
        raise ValueError("no histograms to merge, or histograms with different bucket layouts cannot be merged")
    return merged


def from_samples(label: str, values_ns, *, missed: int | None = None, bucket_ns: int = BUCKET_NS) -> LatencySeries:
    """Every raw sample: exact statistics, a histogram of `bucket_ns` buckets covering all of them."""
    a = np.asarray(values_ns, dtype=np.int64)
    if a.size == 0:
        raise UsageError(f"{label}: no samples to draw")
    lo = min(0, int(a.min()) // bucket_ns * bucket_ns)
    buckets = int((int(a.max()) - lo) // bucket_ns) + 1
    if buckets > MAX_BUCKETS:
        raise UsageError(f"{label}: values up to {a.max() / 1e6:.0f} ms make {buckets:,} buckets of "
                         f"{bucket_ns / 1e3:g} µs; too many to draw")
    h = stats.histogram(a, bucket_ns, buckets, lo)
    hist = {"unit": "ns", "bucket_width": bucket_ns, "min_value": lo, "counts": h.counts.tolist(), "overflow": 0,
            "n": int(a.size), "min": int(a.min()), "max": int(a.max()), "sum": int(a.sum())}
    return LatencySeries(label, hist, stats.summarize(a), 0, missed, True)


def from_histograms(label: str, hists, *, missed: int | None = None) -> LatencySeries:
    """Probe- or importer-kept histograms (a dict name -> histogram, or a list), threads merged."""
    items = list(hists.values()) if isinstance(hists, dict) else list(hists)
    try:
        merged = merge_histograms(items)
    except ValueError as e:
        raise UsageError(f"{label}: {e}") from None
    if merged["n"] == 0:
        raise UsageError(f"{label}: the histograms hold no values")
    return LatencySeries(label, merged, stats.summarize_histogram(merged), merged["overflow"], missed, False)


def from_run(store, run, label: str | None = None) -> LatencySeries:
    """A stored run: its samples when it kept them, else its trailer histograms."""
    label = label or f"run {run.id}: {run.label}"
    if run.primary.get("unit") != "ns":
        raise UsageError(f"run {run.id} measures {run.primary['name']} in {run.primary.get('unit') or 'no unit'}, "
                         "not a time: no latency histogram")
    missed = (run.trailer.get("counters") or {}).get("missed_periods")
    dist = of_run(store, run)
    if dist is None:
        raise UsageError(f"run {run.id} has neither samples nor histograms")
    if dist.exact:
        return from_samples(label, dist.samples, missed=missed)
    return from_histograms(label, [dist.histogram], missed=missed)


# --- presentation ------------------------------------------------------------------------------------------

def fmt_us(ns) -> str:
    """ns -> µs text with sensible precision."""
    if ns is None:
        return "-"
    us = ns / 1000.0
    return f"{us:,.0f}" if abs(us) >= 100 else f"{us:.1f}" if abs(us) >= 10 else f"{us:.2f}"


def stat_line(s: LatencySeries) -> str:
    st, le = s.stats, "" if s.exact else "≤"
    tail = " · ".join(f"{name} {le}{fmt_us(st.get(key))}" for key, name in TAIL)
    extra = f" · overflows {s.overflow:,}" if not s.exact else ""
    if s.missed:
        extra += f" · missed {s.missed:,}"
    return (f"n {st['n']:,} · min {fmt_us(st['min'])} · avg {fmt_us(st['mean'])} · max {fmt_us(st['max'])} µs\n"
            f"{tail} µs{extra}")


def _literal(text: str) -> str:
    """Matplotlib reads $...$ as math: show labels literally."""
    return str(text).replace("$", r"\$")


def default_x_max_us(series: list[LatencySeries]) -> float:
    """Right edge: every value, unless rare outliers would squash the body (beyond 5 x the largest p99.9:
    then 3 x that p99.9);
    never beyond what a kept histogram covers (past it there are only overflow counts)."""
    top = max(s.stats["max"] for s in series) / 1000.0 + 1
    body = max(_body_us(s) for s in series)
    edge = top if top <= 5 * max(body, 1.0) else 3 * body
    ranges = [float(s.edges_us[-1]) for s in series if not s.exact]
    return min(edge, max(ranges)) if ranges and len(ranges) == len(series) else edge


def _body_us(s: LatencySeries) -> float:
    """p99.9 in µs; for a kept histogram at most its range (a rank in the overflows reads as the max)."""
    p999 = (s.stats.get("p999") or s.stats["max"]) / 1000.0
    return p999 if s.exact else min(p999, float(s.edges_us[-1]))


def beyond(s: LatencySeries, x_max_us: float) -> int:
    """Values at or beyond x_max_us (outside the drawn range), overflows included."""
    return drawn_beyond(s, x_max_us) + s.overflow


def drawn_beyond(s: LatencySeries, x_max_us: float) -> int:
    """Values of the kept buckets at or beyond x_max_us (overflows not counted)."""
    edges = s.edges_us
    first = int(np.searchsorted(edges[:-1], x_max_us, side="left"))
    return int(s.counts[first:].sum())


def overflow_text(s: LatencySeries) -> str:
    """'3 beyond the last bucket (65 µs), max 76 µs, not drawn' for a kept histogram's overflows, else ''."""
    if not s.overflow:
        return ""
    return (f"{s.overflow:,} beyond the last bucket ({fmt_us(s.edges_us[-1] * 1000)} µs), "
            f"max {fmt_us(s.stats['max'])} µs, not drawn")


LEGEND_CHARS = 60


def latency_figure(series: list[LatencySeries], *, title: str | None = None, x_max_us: float | None = None,
                   log_y: bool = True):
    """Overlaid latency histograms (count per bucket, log y) with each series' statistics in the legend, which
    sits below the axes (never on a curve); values beyond the axis or the kept buckets are stated there."""
    import textwrap

    from matplotlib.figure import Figure

    from .ticks import set_log_ticks

    if not series:
        raise UsageError("no runs to draw")
    x_max = x_max_us or default_x_max_us(series)
    x_min = min(0.0, min(s.stats["min"] for s in series) / 1000.0)
    labels = []
    for s in series:
        label = "\n".join(textwrap.wrap(_literal(s.label), LEGEND_CHARS, break_long_words=True)) + "\n" + stat_line(s)
        out = drawn_beyond(s, x_max)
        if out:
            label += f" · {out:,} beyond {x_max:,.0f} µs"
        if s.overflow:
            label += "\n" + overflow_text(s)
        labels.append(label)
    lines = sum(x.count("\n") + 1 for x in labels)
    ncols = 2 if len(series) > 3 else 1
    fig = Figure(figsize=(9, 4.4 + 0.13 * lines / ncols), layout="constrained")
    ax = fig.add_subplot()
    peak = 1
    for s, label in zip(series, labels):
        counts = s.counts
        peak = max(peak, int(counts.max()) if counts.size else 1)
        ax.stairs(counts, s.edges_us, label=label, linewidth=1.1)
    if log_y:
        ax.set_yscale("log", nonpositive="clip")
        ax.set_ylim(0.7, peak * 2.0)
        set_log_ticks(ax, [np.array([1.0, peak])])
    ax.set_xlim(x_min, x_max)
    widths = {s.histogram["bucket_width"] for s in series}
    ax.set_xlabel("latency (µs)")
    ax.set_ylabel(f"count per {widths.pop() / 1000.0:g} µs" if len(widths) == 1 else
                  "count per bucket (bucket widths differ)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(_literal(title or "timer wake-up latency"))
    note = None if all(s.exact for s in series) else (
        "≤: percentile from a histogram (upper edge of its bucket); overflows: values beyond its range")
    fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="outside lower center", ncols=ncols, title=note,
               title_fontsize=6.5, frameon=False)
    return fig


def rebin(series: list[LatencySeries], rows: int = 16, x_max_us: float | None = None):
    """Group every series into about `rows` equal bins of whole µs from the smallest value to x_max.

    Returns (edges in µs, list of per-series count arrays, list of per-series counts beyond the last edge).
    """
    x_max = x_max_us or default_x_max_us(series)
    lo = math.floor(min(s.stats["min"] for s in series) / 1000.0)
    step = max(1, math.ceil((x_max - lo) / rows))
    edges = lo + step * np.arange(rows + 1, dtype=float)
    edges = edges[: int(np.searchsorted(edges, x_max, side="left")) + 1]
    binned, rest = [], []
    for s in series:
        e, c = s.edges_us, s.counts
        out = np.zeros(len(edges) - 1, dtype=np.int64)
        # Buckets are whole µs (or finer), so each falls in exactly one row.
        idx = np.searchsorted(edges, e[:-1], side="right") - 1
        inside = (idx >= 0) & (idx < len(out))
        np.add.at(out, idx[inside], c[inside])
        binned.append(out)
        rest.append(int(c[~inside & (idx >= len(out))].sum()) + s.overflow)
    return edges, binned, rest
