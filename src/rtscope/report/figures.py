"""Paper-ready static figures (matplotlib): each written as PNG (150 dpi by default; --dpi) and SVG (vector).

The same numbers as the HTML report (report.model): per group of
configurations a box plot, an overlaid histogram (log y; for timer latency
the figure of figures/latency.py, as the `histogram` command draws it), a
CDF, a percentile plot and, for times with enough samples, the exceedance plot of the tail analysis
(figures/exceedance.py); per configuration a time series with GC events; the
memory-per-task scatter with its least-squares lines. Files are named
`<kind>-<slug>.png|svg`; the SVGs carry no date, so the same data give the
same files.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import re
import textwrap
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ..analysis.results import display_unit
from ..analysis.threads import run_histogram
from ..errors import UsageError
from ..figures.tasks import write_figure
from .model import TAIL_LEVELS, Report

DPI = 150
FORMATS = ("png", "svg")


def tex_safe(text: str) -> str:
    """Matplotlib reads $...$ as mathtext: show user strings literally (an escaped \\$ is a plain $)."""
    return str(text).replace("$", r"\$")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "figure"


STYLE = {"svg.hashsalt": "rtscope", "font.size": 9, "axes.grid": True, "grid.alpha": 0.3}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


NOTE_AT = {"upper right": (0.99, 0.98, "right", "top"), "upper left": (0.01, 0.98, "left", "top"),
           "lower right": (0.99, 0.02, "right", "bottom"), "below": (1.0, -0.12, "right", "top")}


def show_bulk(ax, g, axis: str, scale: float, shown: str, where: str = "upper right") -> None:
    """Limit `axis` ("x" or "y") to the group's bulk (figures/bulk.py) and state what lies beyond it `where`
    no data is drawn (a corner of the axes, or below them)."""
    b = g.bulk
    if b is None:
        return
    lo, hi = b.lo * scale, b.hi * scale
    pad = 0.02 * (hi - lo) or max(abs(hi) * 0.05, 1e-9)
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo - pad, hi + pad)
    if b.cut:
        x, y, ha, va = NOTE_AT[where]
        ax.text(x, y, tex_safe(textwrap.fill(b.note(shown, scale), 70)), transform=ax.transAxes,
                ha=ha, va=va, fontsize=6.5, color="#b3161b",
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#b3161b", "linewidth": 0.6})


def box_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(g.boxes) + 2), 4))
    stats = [{"label": tex_safe(textwrap.fill(b.label, 24)), "med": b.median * scale, "q1": b.q1 * scale,
              "q3": b.q3 * scale,
              "whislo": b.whislo * scale, "whishi": b.whishi * scale, "mean": b.mean * scale,
              "fliers": b.outliers * scale} for b in g.boxes]
    ax.bxp(stats, showmeans=True, flierprops={"marker": "o", "markersize": 2, "alpha": 0.5})
    show_bulk(ax, g, "y", scale, shown, "below")
    ax.set_ylabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    ax.set_title(tex_safe(g.title))
    return fig


def histogram_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for c in g.histograms:
        y = np.append(c.y, c.y[-1]) if len(c.y) else c.y
        ax.step(c.x * scale, np.where(y > 0, y, np.nan), where="post", linewidth=1, label=tex_safe(c.label))
    ax.set_yscale("log")
    show_bulk(ax, g, "x", scale, shown)
    ax.set_xlabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    ax.set_ylabel(f"samples per {shown}")
    ax.set_title(tex_safe(g.title))
    ax.legend(fontsize=7, loc="upper left")
    return fig


def latency_plot(plt, g):
    """Timer latency groups: study 2's figure from figures/latency.py (count per 1 µs bucket, statistics in
    the legend); other measures, or values too spread for 1 µs buckets, get histogram_plot."""
    from ..figures import latency
    try:
        series = []
        for c in g.cells:
            label = g.labels[c.config]
            if len(c.samples):
                series.append(latency.from_samples(label, c.samples))
            elif c.hist_runs:
                series.append(latency.from_histograms(label, [run_histogram(r) for r in c.hist_runs]))
        cut = g.bulk is not None and g.bulk.cut
        return latency.latency_figure(series, title=g.title, x_max_us=g.bulk.hi / 1000 if cut else None)
    except UsageError:
        return histogram_plot(plt, g)


def cdf_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for c in g.cdfs:
        ax.plot(c.x * scale, c.y, linewidth=1.2, label=tex_safe(c.label))
    show_bulk(ax, g, "x", scale, shown, "lower right")
    ax.set_xlabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    ax.set_ylabel("fraction of samples ≤ x")
    ax.set_title(tex_safe(g.title))
    ax.legend(fontsize=7, loc="upper left")
    return fig


def percentile_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for c in g.cdfs:
        keep = c.y < 1
        ax.plot(-np.log10(1 - c.y[keep]), c.x[keep] * scale, linewidth=1.2, label=tex_safe(c.label))
    ticks = list(range(len(TAIL_LEVELS) + 1))
    ax.set_xticks(ticks, ["0%", *(f"{100 * q:g}%" for q in TAIL_LEVELS)])
    show_bulk(ax, g, "y", scale, shown, "upper left")
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    ax.set_title(tex_safe(g.title))
    ax.legend(fontsize=7, loc="lower right")
    return fig


def exceedance_plot(plt, g):
    """The exceedance plot of figures/exceedance.py: a panel per configuration on one latency axis."""
    from ..figures.exceedance import exceedance_matplotlib_figure
    return exceedance_matplotlib_figure(g.exceedance, title=g.title)


def series_plot(plt, ts):
    shown, scale = display_unit(ts.unit)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.plot(ts.index, ts.values * scale, linewidth=0.6, label="samples")
    if ts.gc_events:
        ax.plot(ts.gc_index, ts.gc_values * scale, "x", color="#d62728", markersize=3,
                label=f"GC event ({ts.gc_source})")
        ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("sample")
    ax.set_ylabel(shown)
    ax.set_title(tex_safe(f"{ts.label}: run {ts.run_id}"))
    return fig


def task_memory_plot(plt, report: Report, path: Path) -> None:
    """The tasks-table command's figure, reused; labels made literal."""
    series = [dataclasses.replace(x, label=tex_safe(x.label)) for x in report.task_memory]
    write_figure(path, series, "memory", report.task_memory_unit, False)


# Jobs for the worker processes: set before the pool forks, so children read them from inherited
# memory instead of receiving every sample through a pipe.
_JOBS: list[tuple] = []


def _names(report: Report) -> list[tuple]:
    """(builder, argument, file stem) for every figure, with unique stems."""
    used: set[str] = set()

    def stem(kind: str, label: str) -> str:
        base = f"{kind}-{slug(label)}"
        name, i = base, 2
        while name in used:
            name, i = f"{base}-{i}", i + 1
        used.add(name)
        return name

    jobs = []
    for g in report.groups:
        if g.boxes:
            jobs.append((box_plot, g, stem("box", g.title)))
        if g.histograms:
            timer = g.unit == "ns" and g.cells[0].config.workload == "timer"
            jobs.append((latency_plot if timer else histogram_plot, g, stem("histogram", g.title)))
        if g.cdfs:
            jobs.append((cdf_plot, g, stem("cdf", g.title)))
            jobs.append((percentile_plot, g, stem("percentiles", g.title)))
        if g.exceedance:
            jobs.append((exceedance_plot, g, stem("exceedance", g.title)))
    for ts in report.series:
        jobs.append((series_plot, ts, stem("series", ts.label)))
    if report.task_memory:
        jobs.append((task_memory_plot, report, stem("task-memory", "fit")))
    return jobs


def _render(index: int, directory: Path, dpi: int) -> list[Path]:
    builder, arg, name = _JOBS[index]
    plt = _pyplot()
    paths = [directory / f"{name}.{ext}" for ext in FORMATS]
    try:
        with plt.rc_context(STYLE):
            if builder is task_memory_plot:
                for path in paths:
                    builder(plt, arg, path)
                return paths
            fig = builder(plt, arg)
            try:
                if fig.get_layout_engine() is None:
                    fig.tight_layout()
                for path in paths:
                    fig.savefig(path, dpi=dpi, metadata={"Date": None} if path.suffix == ".svg" else {})
            finally:
                plt.close(fig)
    except OSError as e:
        raise UsageError(f"cannot write figure {name} in {directory}: {e.strerror or e}") from None
    return paths


def write(report: Report, directory: str | Path, dpi: int = DPI) -> list[Path]:
    """Every figure of the report as PNG (at `dpi`) and SVG under `directory`; returns the files written.

    Figures are independent: they are drawn in parallel, one process per CPU (forked, Linux)."""
    global _JOBS
    if not 20 <= dpi <= 1200:
        raise UsageError(f"dpi must be 20..1200, got {dpi}")
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create figure directory {directory}: {e.strerror or e}") from None
    _pyplot()
    _JOBS = _names(report)
    try:
        workers = min(len(_JOBS), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
        if workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
            return [p for i in range(len(_JOBS)) for p in _render(i, directory, dpi)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            return [p for paths in pool.map(_render, range(len(_JOBS)), [directory] * len(_JOBS),
                                            [dpi] * len(_JOBS)) for p in paths]
    finally:
        _JOBS = []
