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
from ..figures.ticks import set_log_ticks
from .model import TAIL_LEVELS, Report, overflow_note

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


NOTE_COLOR = "#b3161b"
LABEL_CHARS = 30        # a configuration's label wrapped at this many characters beside its box
LEGEND_CHARS = 60       # legend entries wrapped at this many characters


def _figure(plt, width: float, height: float):
    """A figure whose layout engine keeps every text (titles, tick labels, a legend outside the axes) inside it
    and off the others."""
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return fig, ax


def _wrap(text: str, width: int) -> str:
    return tex_safe(textwrap.fill(str(text), width, break_long_words=True, break_on_hyphens=False))


def _chars(fig, points: float) -> int:
    """How many characters of a `points`-sized font fit the figure's width (DejaVu Sans: ~0.7 em a character,
    a margin kept)."""
    return max(20, int(fig.get_figwidth() * 72 * 0.95 / (0.7 * points)))


TITLE_PT = 10.8      # matplotlib's "large" at font.size 9 (STYLE)


def title_and_note(ax, title: str, note: str) -> None:
    """The figure's title, and under it, right-aligned above the axes, the note of what lies beyond the axis: a
    note never on the data, never under the legend (which is below the axes)."""
    fig = ax.figure
    if note:
        fig.suptitle(_wrap(title, _chars(fig, TITLE_PT)))
        ax.set_title(_wrap(note, _chars(fig, 6.5)), loc="right", fontsize=6.5, color=NOTE_COLOR)
    else:
        ax.set_title(_wrap(title, _chars(fig, TITLE_PT)))


def _legend_layout(labels: list[str], width: float) -> tuple[list[str], int, float]:
    """Legend entries wrapped, the columns that fit `width` inches, and the legend's height in inches."""
    labels = [textwrap.fill(str(x), LEGEND_CHARS, break_long_words=True, break_on_hyphens=False) for x in labels]
    if not labels:
        return labels, 1, 0.0
    longest = max(len(line) for x in labels for line in x.split("\n"))
    ncols = max(1, min(len(labels), int(width * 14 / (longest + 6))))      # 7 pt: ~14 characters per inch
    rows = [labels[i:i + ncols] for i in range(0, len(labels), ncols)]
    lines = sum(max(x.count("\n") + 1 for x in row) for row in rows)
    return labels, ncols, 0.14 * lines + 0.05 * len(rows) + 0.2


def _sized(plt, labels: list[str], width: float = 6.5, axes_height: float = 3.4):
    """A figure with room for its axes and, below them, the legend of `labels`."""
    return _figure(plt, width, axes_height + _legend_layout(labels, width)[2])


def legend_below(ax) -> None:
    """The configurations' legend below the axes (never on a curve), entries wrapped, in as many columns as fit."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    labels, ncols, _ = _legend_layout(labels, ax.figure.get_figwidth())
    ax.figure.legend(handles, labels, loc="outside lower center", ncols=ncols, fontsize=7, frameon=False)


def show_bulk(ax, g, axis: str, scale: float, shown: str) -> str:
    """Limit `axis` ("x" or "y") to the group's bulk (figures/bulk.py); the note of what lies beyond it ('' when
    nothing does), for title_and_note."""
    b = g.bulk
    if b is None:
        return ""
    lo, hi = b.lo * scale, b.hi * scale
    pad = 0.02 * (hi - lo) or max(abs(hi) * 0.05, 1e-9)
    (ax.set_xlim if axis == "x" else ax.set_ylim)(lo - pad, hi + pad)
    return b.note(shown, scale) if b.cut else ""


def overflow_notes(curves, shown: str, scale: float) -> str:
    named = len(curves) > 1
    return "; ".join((f"{c.label}: " if named else "") + overflow_note(c, shown, scale) for c in curves if c.overflow)


def box_plot(plt, g):
    """Horizontal boxes, one row per configuration with its whole label beside it (wrapped, never cut)."""
    shown, scale = display_unit(g.unit)
    labels = [_wrap(b.label, LABEL_CHARS) for b in g.boxes]
    rows = sum(max(1, x.count("\n") + 1) * 0.16 + 0.12 for x in labels)
    fig, ax = _figure(plt, 7, max(3.0, rows + 1.4))
    stats = [{"label": label, "med": b.median * scale, "q1": b.q1 * scale, "q3": b.q3 * scale,
              "whislo": b.whislo * scale, "whishi": b.whishi * scale, "mean": b.mean * scale,
              "fliers": b.outliers * scale} for label, b in zip(labels, g.boxes)]
    ax.bxp(stats, showmeans=True, orientation="horizontal", flierprops={"marker": "o", "markersize": 2, "alpha": 0.5})
    ax.invert_yaxis()                 # the first configuration on top, as in the tables
    ax.tick_params(axis="y", labelsize=7)
    note = show_bulk(ax, g, "x", scale, shown)
    ax.set_xlabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    title_and_note(ax, g.title, note)
    return fig


def histogram_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = _sized(plt, [c.label for c in g.histograms])
    for c in g.histograms:
        y = np.append(c.y, c.y[-1]) if len(c.y) else c.y
        ax.step(c.x * scale, np.where(y > 0, y, np.nan), where="post", linewidth=1, label=tex_safe(c.label))
    ax.set_yscale("log")
    set_log_ticks(ax, [c.y for c in g.histograms])
    note = "; ".join(x for x in (show_bulk(ax, g, "x", scale, shown), overflow_notes(g.histograms, shown, scale)) if x)
    ax.set_xlabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    ax.set_ylabel(f"samples per {shown}")
    title_and_note(ax, g.title, note)
    legend_below(ax)
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
        b = g.bulk          # its range reaches the largest value, or the note counts what lies beyond it
        return latency.latency_figure(series, title=g.title,
                                      x_max_us=(b.hi + 0.02 * (b.hi - b.lo)) / 1000 if b and b.hi > b.lo else None)
    except UsageError:
        return histogram_plot(plt, g)


def cdf_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = _sized(plt, [c.label for c in g.cdfs])
    for c in g.cdfs:
        ax.plot(c.x * scale, c.y, linewidth=1.2, label=tex_safe(c.label))
    note = show_bulk(ax, g, "x", scale, shown)
    ax.set_xlabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    ax.set_ylabel("fraction of samples ≤ x")
    title_and_note(ax, g.title, note)
    legend_below(ax)
    return fig


def percentile_plot(plt, g):
    shown, scale = display_unit(g.unit)
    fig, ax = _sized(plt, [c.label for c in g.cdfs])
    for c in g.cdfs:
        keep = c.y < 1
        ax.plot(-np.log10(1 - c.y[keep]), c.x[keep] * scale, linewidth=1.2, label=tex_safe(c.label))
    ticks = list(range(len(TAIL_LEVELS) + 1))
    ax.set_xticks(ticks, ["0%", *(f"{100 * q:g}%" for q in TAIL_LEVELS)])
    note = show_bulk(ax, g, "y", scale, shown)
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"{tex_safe(g.cells[0].config.measure)} ({shown})")
    title_and_note(ax, g.title, note)
    legend_below(ax)
    return fig


def exceedance_plot(plt, g):
    """The exceedance plot of figures/exceedance.py: a panel per configuration on one latency axis."""
    from ..figures.exceedance import exceedance_matplotlib_figure
    return exceedance_matplotlib_figure(g.exceedance, title=g.title)


def series_plot(plt, ts):
    shown, scale = display_unit(ts.unit)
    fig, ax = _figure(plt, 7, 3.2)
    ax.plot(ts.index, ts.values * scale, linewidth=0.6, label="samples")
    if ts.gc_events:
        ax.plot(ts.gc_index, ts.gc_values * scale, "x", color="#d62728", markersize=3,
                label=f"GC event ({ts.gc_source})")
        ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("sample")
    ax.set_ylabel(shown)
    ax.set_title(_wrap(f"{ts.label}: run {ts.run_id}", _chars(fig, TITLE_PT)))
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
