"""Exceedance plots: the fraction of samples at or above each latency (1 − F) on a log axis, with the tail
analysis' fit (docs/tail.md, "How to read the exceedance plot").

One `Exceedance` per configuration, made from a configuration already loaded (`of_cell`: the report's and
compare's analysis.compare.Cell, whose samples are not read again) by analysis.tail_bound.of_cell:

- the empirical curve: the r-th largest of n samples at 1 − F = r/n, thinned to a few hundred points (every
  one of the largest TOP samples, then ranks evenly spaced on the log axis, so no large sample is dropped);
  a histogram-only configuration at its buckets' lower edges and its exact maximum;
- when the analysis claims a bound: the fitted generalised Pareto tail from its threshold (1 − F = k/n) down
  to p = P_BOUND with its 95 % profile-likelihood band, the threshold, and the bound at P_BOUND with its
  interval (the numbers `rtscope tail` prints);
- when it refuses (or cannot run: too few samples, histograms and samples mixed): the empirical curve only
  and the reason.

`x_range` is the latency axis the configurations share: every sample lies on it, unless a configuration's
FAR largest would stretch it FAR_STRETCH times beyond the rest (then they are counted and stated with their
maximum, on the panel and in the caption, as figures/bulk.py does for the other plots), and every bound
at P_BOUND within BOUND_STRETCH times the samples' span (a heavy tail's bound further out is written at the
axis' edge with its value instead); a band's upper end beyond BAND_STRETCH of that span (an extrapolation the
data cannot pin down) is cut at the edge and stated with its value (`x_range`'s notes).
`exceedance_matplotlib_figure` draws the configurations as stacked panels on that one axis with matplotlib (the
report's paper figures); report/html.py's `exceedance_plotly_figure` draws the same data with plotly.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

import numpy as np

from ..analysis import tail_bound
from ..analysis.results import display_unit
from ..analysis.tail_fit import band
from ..errors import UsageError

P_BOUND = 1e-9            # the labelled bound (the compare row's level)
TOP = 100                 # the largest samples, every one drawn
POINTS = 150              # further ranks, evenly spaced on the log axis
FIT_POINTS = 80           # points of the fitted curve and its band
BAND_STRETCH = 0.5        # a band may widen the axis by this fraction of the data's and bounds' span
BOUND_STRETCH = 4.0       # a bound is drawn up to this many times the samples' span from the smallest one
FAR, FAR_STRETCH = 2, 5.0  # the 2 largest samples of each configuration may stretch the axis up to 5 times
                          # the span of the rest; further out they are stated, as figures/bulk.py does
Y_FLOOR = P_BOUND / 5     # the log axis' lower end, below the bound's label


@dataclass
class Exceedance:
    label: str
    unit: str                           # the measure's stored unit (ns)
    n: int
    x: np.ndarray                       # empirical: values, ascending
    y: np.ndarray                       # the fraction of samples at or above each
    exact: bool                         # from every sample (else a histogram's bucket edges)
    tail: tail_bound.Tail | None = None      # None: the analysis could not run (`reason` says why)
    reason: str | None = None           # why no bound is drawn (None: claimed)
    fit_p: np.ndarray = field(default_factory=lambda: np.empty(0))
    fit_x: np.ndarray = field(default_factory=lambda: np.empty(0))
    band_lo: np.ndarray = field(default_factory=lambda: np.empty(0))
    band_hi: np.ndarray = field(default_factory=lambda: np.empty(0))   # inf: unbounded at that p

    @property
    def claimed(self) -> bool:
        return self.reason is None

    @property
    def threshold(self) -> tuple[float, float]:
        """(threshold value, its 1 − F: the exceedance rate k/n)."""
        f = self.tail.fit
        return f.ex.u, f.ex.zeta

    @property
    def bound(self) -> tail_bound.Level | None:
        """The claimed level at P_BOUND (None when not claimed, or when the threshold lies below it)."""
        if not self.claimed:
            return None
        return next((lv for lv in self.tail.levels if math.isclose(lv.p, P_BOUND)), None)

    @property
    def headline(self) -> str:
        """Why no bound is drawn, short enough for the plot (the caption has all of `reason`)."""
        if self.claimed:
            return ""
        if self.tail is not None and self.tail.failed is not None:
            return f"no bound claimed: the {self.tail.failed.name} check failed (the caption says why)"
        return self.reason.split(";")[0]

    @property
    def max(self) -> float:
        return float(self.x[-1])


def empirical_samples(ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values ascending, fraction at or above) of sorted samples, thinned (module docstring)."""
    n = len(ordered)
    ranks = np.unique(np.concatenate([np.arange(1, min(TOP, n) + 1),
                                      np.round(np.geomspace(1, n, POINTS)).astype(np.int64)]))[::-1]
    return np.asarray(ordered[n - ranks], dtype=float), ranks / n


def empirical_histogram(h: dict) -> tuple[np.ndarray, np.ndarray]:
    """(values ascending, fraction at or above) of a histogram: each non-empty bucket's lower edge (the first
    one's the exact minimum) with the samples in it and above, the overflow at the last edge, the exact
    maximum at 1/n; thinned like samples."""
    counts = np.asarray(h["counts"], dtype=np.int64)
    width, origin = float(h["bucket_width"]), float(h.get("min_value", 0))
    overflow = int(h.get("overflow", 0))
    n = int(h.get("n", counts.sum() + overflow))
    above = np.cumsum(counts[::-1])[::-1] + overflow
    keep = np.flatnonzero(counts)
    x, y = origin + width * keep, above[keep] / n
    if overflow:
        x, y = np.append(x, origin + width * len(counts)), np.append(y, overflow / n)
    if len(x):
        x[0] = max(x[0], float(h["min"]))
    x, y = np.append(x, float(h["max"])), np.append(y, 1 / n)
    if len(x) > TOP + POINTS:
        levels = np.geomspace(1.0, 1 / n, POINTS)
        pick = np.searchsorted(-y, -levels, side="left").clip(0, len(x) - 1)
        pick = np.unique(np.concatenate([pick, np.arange(len(x) - TOP, len(x))]))
        x, y = x[pick], y[pick]
    return x, y


def of_cell(cell, label: str) -> Exceedance:
    """One configuration's exceedance curve and, when claimed, its fit (module docstring)."""
    from ..analysis.stats import merge_histograms
    from ..analysis.threads import run_histogram
    if len(cell.samples):
        x, y = empirical_samples(cell.sorted)
        exact, n = True, len(cell.samples)
    else:
        merged = merge_histograms([h for r in cell.hist_runs if (h := run_histogram(r)) is not None])
        if merged is None or not merged.get("n"):
            raise UsageError(f"{label}: no samples and no histogram to draw")
        x, y = empirical_histogram(merged)
        exact, n = False, int(merged["n"])
    out = Exceedance(label, cell.config.unit, n, x, y, exact)
    try:
        # the plot shows neither the block-maxima cross-check nor levels other than P_BOUND's
        out.tail = tail_bound.of_cell(cell, gev=False, levels=(P_BOUND,))
    except UsageError as e:
        out.reason = f"no tail analysis: {e}"
        return out
    if not out.tail.claimed:
        out.reason = f"no bound claimed: {out.tail.refused_because}"
        return out
    f = out.tail.fit
    if f.ex.zeta > P_BOUND:
        out.fit_p = np.geomspace(f.ex.zeta, P_BOUND, FIT_POINTS)
        out.fit_x = np.asarray(f.level(out.fit_p), dtype=float)
        out.band_lo, out.band_hi = band(f, out.fit_p)
    return out


# --- presentation ------------------------------------------------------------------------------------------

def x_range(series: list[Exceedance]) -> tuple[float, float, list[str]]:
    """The shared latency axis (stored unit): from the smallest sample to the largest of every sample and
    every bound at P_BOUND within BOUND_STRETCH times the samples' span (a heavy tail's bound further out
    would squash every sample into the axis' first pixels: it is stated instead), widened for the bands by
    at most BAND_STRETCH of that span; and a note per bound or band beyond it."""
    lo = min(float(s.x[0]) for s in series)
    top = max(s.max for s in series)
    body = max(float(s.x[-min(FAR + 1, len(s.x))]) for s in series)   # below each one's FAR largest samples
    if top - lo > FAR_STRETCH * max(body - lo, 1.0):                  # a few far samples: the axis ends near
        top = body + 0.1 * (body - lo)                                 # the rest, they are stated (beyond)
    reach = lo + BOUND_STRETCH * max(top - lo, abs(top) * 0.05, 1.0)
    core = max([top] + [s.bound.value for s in series if s.bound is not None and s.bound.value <= reach])
    span = max(core - lo, abs(core) * 0.05, 1.0)
    tops = [float(s.band_hi[np.isfinite(s.band_hi)].max()) for s in series
            if len(s.band_hi) and np.isfinite(s.band_hi).any()]
    hi = min(max([core, *tops]), core + BAND_STRETCH * span)
    notes = [f"{s.label}: {text}" for s in series if (text := beyond(s, hi))]
    shown, scale = display_unit(series[0].unit)
    for s in series:
        if s.bound is not None and s.bound.value > hi:
            notes.append(f"{s.label}: the bound, {bound_text(s)}, lies beyond the axis (its samples would not "
                         "be readable on an axis that reaches it)")
        elif len(s.band_hi) and s.band_hi.max() > hi:
            first = float(s.fit_p[np.argmax(s.band_hi > hi)])
            end = s.band_hi[-1]
            notes.append(f"{s.label}: the 95 % band leaves the axis from 1 − F = {first:.0e} on; at {P_BOUND:.0e} "
                         "its upper end is " + ("unbounded" if not np.isfinite(end) else f"{num(end * scale)} {shown}"))
    return lo, hi, notes


def beyond(s: Exceedance, hi: float) -> str:
    """'2 samples beyond 35.1 µs, off the axis (max 4,917 µs)', or '' (every one of the largest TOP samples is
    drawn, so the fraction at or above the first one beyond counts them)."""
    if s.max <= hi:
        return ""
    shown, scale = display_unit(s.unit)
    count = int(round(float(s.y[np.argmax(s.x > hi)]) * s.n))
    return (f"{count:,} sample{'s' if count != 1 else ''} beyond {num(hi * scale)} {shown}, off the axis (max "
            f"{num(s.max * scale)} {shown})")


def num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def interval_text(lv: tail_bound.Level, scale: float) -> str:
    hi = "unbounded" if lv.ci[1] is None else num(lv.ci[1] * scale)
    return f"{num(lv.ci[0] * scale)}–{hi}"


def bound_text(s: Exceedance) -> str:
    """'p = 1e-9: 26.7 µs (95 %: 22.8–32.8)' for the label at the bound."""
    shown, scale = display_unit(s.unit)
    lv = s.bound
    return f"p = {lv.p:.0e}: {num(lv.value * scale)} {shown} (95 %: {interval_text(lv, scale)})"


def threshold_text(s: Exceedance) -> str:
    shown, scale = display_unit(s.unit)
    f = s.tail.fit
    return f"threshold {num(f.ex.u * scale)} {shown} (q {f.quantile:g})"


def _check(c) -> str:
    if c.passed is None:
        return f"{c.name} not testable"
    return f"{c.name} p {c.p:.2g}"


def summary(s: Exceedance) -> str:
    """One configuration's line of the caption: the checks and the model, or why no bound is drawn."""
    if not s.claimed:
        return f"{s.label}: {s.reason}"
    shown, scale = display_unit(s.unit)
    t, f = s.tail, s.tail.fit
    text = (f"{s.label}: claimed; checks passed ({', '.join(_check(c) for c in t.checks)}); generalised Pareto "
            f"over {num(f.ex.u * scale)} {shown} (the {f.quantile:g} quantile, {f.ex.k:,} exceedances), shape "
            f"{f.shape:+.3f}: {t.shape_meaning.split(' (')[0]}")
    if s.bound is not None:
        text += f"; at p = {P_BOUND:.0e}: {num(s.bound.value * scale)} {shown} (95 %: {interval_text(s.bound, scale)})"
    return text + "."


CAPTION = ("Exceedance plot (docs/tail.md): the fraction of samples at or above each value on a log scale, down "
           "to 1/n at the largest sample (dotted: the data's end); where a bound is claimed, the "
           "fitted generalised Pareto tail from its threshold (▲) with its 95 % profile-likelihood band, and "
           "the value exceeded with probability {p} per sample (◆, with its interval). A straight fitted line "
           "is an exponential tail, one bending right a heavy tail, one turning down a bounded tail.")


def caption(series: list[Exceedance], notes: list[str]) -> str:
    """The plot's caption: how to read it, then one line per configuration (and what lies off the axis)."""
    return "\n".join([CAPTION.format(p=f"{P_BOUND:.0e}"), *(summary(s) for s in series), *notes])


def _literal(text: str) -> str:
    return str(text).replace("$", r"\$")


def exceedance_matplotlib_figure(series: list[Exceedance], *, title: str):
    """The configurations as stacked panels sharing one latency axis, 1 − F on a log y axis."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    if not series:
        raise UsageError("no configurations to draw")
    shown, scale = display_unit(series[0].unit)
    lo, hi, _ = x_range(series)      # far samples and bounds are stated in their panels
    fig = Figure(figsize=(8, 1.3 + 2.0 * len(series)), layout="constrained")
    axes = fig.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, s) in enumerate(zip(axes, series)):
        colour = f"C{i}"
        ax.set_yscale("log")
        ax.set_ylim(Y_FLOOR, 1.5)
        ax.set_yticks([1, 1e-3, 1e-6, 1e-9], ["1", "10⁻³", "10⁻⁶", "10⁻⁹"])
        ax.yaxis.set_minor_locator(NullLocator())        # no minor tick per decade: ten decades per panel
        ax.grid(True, which="major", alpha=0.3)
        ax.plot(s.x * scale, s.y, ".-", color=colour, markersize=2.5, linewidth=0.8, label="samples: 1 − F")
        ax.axhline(1 / s.n, color="#888", linestyle=":", linewidth=0.8, label="1/n: the data end")
        if s.claimed and len(s.fit_p):
            ax.fill_betweenx(s.fit_p, s.band_lo * scale, np.minimum(s.band_hi, hi) * scale, color="black",
                             alpha=0.12, linewidth=0, label="95 % band")
            ax.plot(s.fit_x * scale, s.fit_p, "--", color="black", linewidth=1, label="fitted tail")
        if s.claimed:
            u, zeta = s.threshold
            ax.plot([u * scale], [zeta], "^", color="#2ca02c", markersize=7, label="threshold")
            ax.annotate(_literal(threshold_text(s)), (u * scale, zeta), textcoords="offset points",
                        xytext=(6, 3), ha="left", va="bottom", fontsize=7)      # above right: no data there
            if (lv := s.bound) is not None and lv.value > hi:       # stated at the edge (x_range)
                ax.annotate(_literal("→ " + bound_text(s)), (1, lv.p), xycoords=("axes fraction", "data"),
                            textcoords="offset points", xytext=(-4, 7), ha="right", va="bottom", fontsize=7)
            elif lv is not None:
                top = hi if lv.ci[1] is None else min(lv.ci[1], hi)
                ax.errorbar([lv.value * scale], [lv.p], xerr=[[(lv.value - lv.ci[0]) * scale],
                                                               [(top - lv.value) * scale]],
                            fmt="D", color="black", markersize=5, capsize=3, label=f"bound at p = {lv.p:.0e}")
                ax.annotate(_literal(bound_text(s)), (lv.value * scale, lv.p), textcoords="offset points",
                            xytext=(0, 7), ha="left" if lv.value < (lo + hi) / 2 else "right", va="bottom",
                            fontsize=7)
        else:
            ax.text(0.99, 0.04, _literal(textwrap.fill(s.headline, 60)), transform=ax.transAxes, ha="right",
                    va="bottom", fontsize=7, color="#b3161b",
                    bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "#b3161b", "linewidth": 0.6})
        if (far := beyond(s, hi)):        # top right: the curve is near 1 − F = 1 only at the left
            ax.text(0.99, 0.96, _literal("→ " + far), transform=ax.transAxes, ha="right", va="top", fontsize=6.5,
                    color="#b3161b")
        ax.set_title(_literal(s.label), fontsize=8, loc="left")
        ax.set_ylabel("fraction ≥ x")
    handles = {}
    for ax in axes:                 # every kind once (a refused first panel has no fit to name)
        for h, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault("samples: 1 − F" if name == "samples: 1 − F" else name, h)
    axes[0].legend(handles.values(), handles.keys(), fontsize=6.5, loc="lower left", framealpha=0.85)
    axes[-1].set_xlim(lo * scale, hi * scale)
    axes[-1].set_xlabel(f"{_literal(title.split(': ')[-1]) if ': ' in title else 'value'} ({shown})")
    fig.suptitle(_literal(f"{title}: exceedance"), fontsize=10)
    return fig
