"""The report as one self-contained HTML file that works offline.

plotly.js is embedded once: its cartesian bundle, gzip-compressed and
base64-encoded (vendor/README.md), which the page unpacks with the
browser's DecompressionStream before it draws; each plot's figure is a JSON
block read by one small script. Every user-supplied string
(configuration labels, settings, tags, host names) is escaped: jinja2
autoescapes the page; JSON inside <script> has `<`, `>` and `&` written as
\\u escapes, so neither `</script>` nor `<!--` can end or change the block;
strings inside plots are HTML-escaped because plotly reads a few tags in
trace names and titles. A script error or a plot that fails to draw shows a
banner on the page (and is recorded in the body's data-js-errors attribute).
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ..analysis import stats
from ..analysis.compare import RUN_TEST
from ..analysis.recommend import change, p_text
from ..analysis.results import DISPLAY, display_unit, fmt
from ..analysis.select import value_text
from ..figures import bulk as bulk_range, exceedance, ticks
from ..fileio import write_atomic
from ..version import __version__
from ..words import counted
from . import lab
from .model import MAX_OUTLIERS, TAIL_LEVELS, Report, id_ranges, machine_rows, overflow_note
from .paper_view import claim_rows
from .template import DRAW_PLOTS, STYLE, TABLES, TEMPLATE

STATS_COLUMNS = tuple((k, h) for k, h in DISPLAY if k in ("n", "mean", "max", "var", "stdev", "p50", "p99", "p999"))
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")


def script_json(obj: Any) -> str:
    """JSON safe to place inside a <script> element."""
    text = json.dumps(_finite(obj), separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# Plotted values keep 6 significant digits: far below a pixel, and half the bytes of a float's repr.
PLOT_DIGITS = 6


def _short(x: float) -> float | None:
    return float(f"{x:.{PLOT_DIGITS}g}") if math.isfinite(x) else None


def _finite(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f":
            return [_short(v) for v in obj.tolist()]
        return obj.tolist()
    if isinstance(obj, (float, np.floating)):
        return _short(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


def t(text: str) -> str:
    """A user string for plotly (which interprets a few HTML tags and entities)."""
    return html.escape(str(text), quote=False)


# plotly's toolbar (modebar) sits in a plot's top right corner, its top 2..30 px: the title goes below that
# band, so the toolbar never covers it, and wraps at TITLE_CHARS so that it fits a narrow page.
MODEBAR_PX = 34
TITLE_CHARS = 56      # plotly's 17 px title: ~9.4 px a character in Chromium (measured), so 56 fit a 640 px page
TITLE_LINE_PX = 22
TITLE_MARGIN_PX = 50    # the top margin the figures' heights were chosen for


def _title(title: str) -> tuple[dict, int]:
    """The layout's title (wrapped, each line escaped) and the top margin it needs below the toolbar."""
    lines = textwrap.wrap(str(title), TITLE_CHARS, break_long_words=True, break_on_hyphens=False) or [""]
    if len(lines) > 1 and " " not in lines[-1] and " " in lines[-2]:    # no lone word on the last line
        head, word = lines[-2].rsplit(" ", 1)
        lines[-2:] = [head, f"{word} {lines[-1]}"]
    # plotly draws a title of several lines about 13 px higher than one of one line (measured in Chromium)
    return ({"text": "<br>".join(t(line) for line in lines), "yref": "container", "y": 1, "yanchor": "top",
             "pad": {"t": MODEBAR_PX + (14 if len(lines) > 1 else 0)}},
            MODEBAR_PX + TITLE_LINE_PX * len(lines) + 12)


def _layout(title: str, xtitle: str, ytitle: str, **extra) -> dict:
    head, top = _title(title)
    layout = {"title": head, "template": "plotly_white", "height": 440,
              "margin": {"l": 70, "r": 20, "t": top, "b": 60}, "legend": {"orientation": "h", "y": -0.2},
              # the x tick labels 7 px below the axis: the first one never touches a y tick label at the axis
              "xaxis": {"title": {"text": t(xtitle)}, "automargin": True, "ticklabelstandoff": 7},
              "yaxis": {"title": {"text": t(ytitle)}, "automargin": True}}
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(layout.get(key), dict):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    layout["height"] += top - TITLE_MARGIN_PX     # the plot area keeps the height it was chosen with
    return layout


def _color(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


NOTE_LINES, NOTE_CHARS, NOTE_LINE_PX = 6, 48, 15   # the outliers' note: configurations named, characters per
                                                  # line, pixels per line


def _bulk(layout: dict, bulk, axis: str, shown: str, scale: float, lower: float | None = None,
          step: float = 0.0, extra: list[str] | None = None) -> dict:
    """Show the bulk on `axis` ("xaxis" or "yaxis"; figures/bulk.py): its range, and what lies beyond it as a
    note above the plot area's right end (count and max per configuration), with the `extra` lines (values a
    kept histogram could not place)."""
    lines = []
    if bulk is not None:
        lo = bulk.lo * scale if lower is None else lower
        hi = bulk.hi * scale
        pad = max(0.02 * (hi - lo), step) or max(abs(hi) * 0.05, 1e-9)
        layout[axis] = {**layout.get(axis, {}), "range": [lo - (0 if lower is not None else pad), hi + pad],
                        "autorange": False}
    if bulk is not None and bulk.cut:
        total = sum(b.count for b in bulk.beyond)
        lines = [f"→ {total:,} beyond {bulk_range.num(bulk.hi * scale)} {shown} (off the axis)"]
        if bulk.configurations == 1:
            lines[0] += f", max {bulk_range.num(bulk.beyond[0].max * scale)} {shown}"
        else:
            for b in bulk.beyond[:NOTE_LINES]:     # labels wrapped, so the note stays narrow on a narrow page
                text = f"{b.label}: {b.count:,}, max {bulk_range.num(b.max * scale)} {shown}"
                lines += [t(x) for x in textwrap.wrap(text, NOTE_CHARS, break_long_words=True)]
            if len(bulk.beyond) > NOTE_LINES:
                lines.append(f"and {len(bulk.beyond) - NOTE_LINES} more configurations")
    for x in extra or []:
        lines += [t(y) for y in textwrap.wrap("→ " + x, NOTE_CHARS, break_long_words=True)]
    if lines:
        # Above the plot area, right-aligned below the title: the note never covers data (a tail, outliers).
        extra_px = NOTE_LINE_PX * len(lines) + 10          # the plot area keeps its height
        layout["margin"] = {**layout.get("margin", {}), "t": layout.get("margin", {}).get("t", 50) + extra_px}
        layout["height"] = layout.get("height", 440) + extra_px
        layout["annotations"] = [*layout.get("annotations", []), {
            "text": "<br>".join(lines), "xref": "paper", "yref": "paper", "x": 1, "y": 1, "xanchor": "right",
            "yanchor": "bottom", "yshift": 2, "align": "right", "showarrow": False,
            "bordercolor": "#b3161b", "borderwidth": 1, "font": {"size": 11, "color": "#b3161b"},
            "name": "beyond"}]
    return layout


def overflow_lines(curves, shown: str, scale: float) -> list[str]:
    """Per curve of a kept histogram with values beyond its last bucket: the note that says so (model)."""
    named = len(curves) > 1
    return [(f"{c.label}: " if named else "") + overflow_note(c, shown, scale) for c in curves if c.overflow]


BOX_LABEL_CHARS = 30     # a configuration's label wrapped at this many characters beside its box
BOX_LINE_PX, BOX_ROW_PX = 15, 30


def wrap_label(label: str, width: int = BOX_LABEL_CHARS) -> list[str]:
    """A label's lines: broken after a setting (at spaces) first, inside a long word only when it must be."""
    return textwrap.wrap(str(label), width, break_long_words=True, break_on_hyphens=False) or [""]


def box_figure(g, shown: str, scale: float) -> dict:
    """Horizontal boxes, one row per configuration, its whole label beside it (wrapped, never cut): rows 0, 1, ...
    named by the axis' ticks, so an outlier's position is one digit in the page, not its configuration's label."""
    data = []
    for i, b in enumerate(g.boxes):
        name = t(b.label)
        data.append({"type": "box", "orientation": "h", "name": name, "y": [i], "q1": [b.q1 * scale],
                     "median": [b.median * scale], "q3": [b.q3 * scale], "lowerfence": [b.whislo * scale],
                     "upperfence": [b.whishi * scale], "mean": [b.mean * scale], "boxpoints": False,
                     "marker": {"color": _color(i)}, "showlegend": False})
        if len(b.outliers):
            data.append({"type": "scatter", "mode": "markers", "name": f"{name} outliers",
                         "y": [i] * len(b.outliers), "x": b.outliers * scale, "showlegend": False,
                         "marker": {"color": _color(i), "size": 4, "symbol": "circle-open"}})
    lines = [wrap_label(b.label) for b in g.boxes]
    rows = sum(max(BOX_ROW_PX, BOX_LINE_PX * len(x) + 12) for x in lines)
    layout = _layout(f"{g.title}: box plot per configuration", f"{g.cells[0].config.measure} ({shown})", "",
                     height=max(300, rows + 110), showlegend=False,
                     yaxis={"tickvals": list(range(len(g.boxes))),
                            "ticktext": ["<br>".join(t(x) for x in ls) for ls in lines],
                            "range": [len(g.boxes) - 0.5, -0.5], "zeroline": False, "automargin": True,
                            "title": {"text": ""}})
    return {"data": data, "layout": _bulk(layout, g.bulk, "xaxis", shown, scale)}


def _log_yaxis(layout: dict, curves_y) -> None:
    """Readable ticks on a log y axis (figures/ticks.py): full numbers, never a bare mantissa."""
    ys = [v for y in curves_y for v in y if v is not None and v > 0]
    if ys:
        values, texts = ticks.log_ticks(min(ys), max(ys))
        if len(values) >= 2:
            layout["yaxis"] = {**layout["yaxis"], "tickvals": values, "ticktext": texts}


def _xs(x: np.ndarray) -> dict:
    """Bucket edges as plotly's x: evenly spaced ones as a start and a step (two numbers, not one per bucket)."""
    steps = np.diff(x)
    if len(x) > 2 and np.allclose(steps, steps[0], rtol=1e-9, atol=0):
        return {"x0": float(x[0]), "dx": float(steps[0])}
    return {"x": x}


def histogram_figure(g, shown: str, curves=None, title: str = "histogram", bulk=None) -> dict:
    """Histogram curves (the group's, or e.g. one configuration's per CPU with their `bulk`) as steps, log y,
    over the bulk's range."""
    data = []
    scale = display_unit(g.unit)[1]
    firsts, step = [], 0.0
    for i, c in enumerate(g.histograms if curves is None else curves):
        y = np.append(c.y, c.y[-1]) if len(c.y) else c.y
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "color": _color(i), "width": 1.5},
                     "name": t(c.label), **_xs(c.x * scale),
                     "y": [v if v > 0 else None for v in y.tolist()]})
        filled = np.flatnonzero(c.y > 0)
        if len(filled):
            firsts.append(float(c.x[filled[0]]) * scale)
            step = max(step, float(c.x[1] - c.x[0]) * scale)
    layout = _layout(f"{g.title}: {title}", f"{g.cells[0].config.measure} ({shown})", f"samples per {shown}",
                     yaxis={"type": "log"})
    _log_yaxis(layout, [d["y"] for d in data])
    drawn = g.histograms if curves is None else curves
    return {"data": data, "layout": _bulk(layout, g.bulk if curves is None else bulk, "xaxis", shown, scale,
                                          min(firsts) if firsts else None, step, overflow_lines(drawn, shown, scale))}


def cdf_figure(g, shown: str, scale: float) -> dict:
    data = [{"type": "scatter", "mode": "lines", "name": t(c.label), "x": c.x * scale, "y": c.y,
             "line": {"color": _color(i)}} for i, c in enumerate(g.cdfs)]
    layout = _layout(f"{g.title}: cumulative distribution", f"{g.cells[0].config.measure} ({shown})",
                     "fraction of samples ≤ x")
    return {"data": data, "layout": _bulk(layout, g.bulk, "xaxis", shown, scale)}


def percentile_figure(g, shown: str, scale: float) -> dict:
    """Value against −log10(1 − q): the tail spread out, 90% / 99% / 99.9% evenly spaced."""
    data = []
    for i, c in enumerate(g.cdfs):
        keep = c.y < 1
        # the axis position to 1/1000 of a decade: below a pixel, and a short number
        data.append({"type": "scatter", "mode": "lines", "name": t(c.label), "x": np.round(-np.log10(1 - c.y[keep]), 3),
                     "y": c.x[keep] * scale, "line": {"color": _color(i)}})
    ticks = list(range(len(TAIL_LEVELS) + 1))
    text = ["0%", *(f"{100 * q:g}%" for q in TAIL_LEVELS)]
    layout = _layout(f"{g.title}: percentiles", "percentile", f"{g.cells[0].config.measure} ({shown})",
                     xaxis={"tickvals": ticks, "ticktext": text})
    layout = _bulk(layout, g.bulk, "yaxis", shown, scale)
    if "range" in layout["yaxis"]:
        for d in data:
            d["x"], d["y"] = _below(d["x"], d["y"], layout["yaxis"]["range"][1])
    return {"data": data, "layout": layout}


def _below(x: np.ndarray, y: np.ndarray, top: float) -> tuple[np.ndarray, np.ndarray]:
    """A rising curve up to where it leaves the axis at `top` (a point there, interpolated): its tail beyond is
    not drawn at all, so no renderer can put it over the `beyond` note above the plot area, which states it."""
    k = int(np.searchsorted(y, top, side="right"))
    if k == len(y) or k == 0:
        return (x, y) if k else (x[:0], y[:0])
    cross = x[k - 1] + (x[k] - x[k - 1]) * (top - y[k - 1]) / (y[k] - y[k - 1])
    return np.append(x[:k], round(float(cross), 3)), np.append(y[:k], top)


PANEL_PX, PANEL_GAP_PX, LEGEND_PX = 210, 46, 70     # the exceedance plot: each configuration's panel


def _log_axis(y: np.ndarray) -> list[float]:
    """Values on a log axis to 3 significant digits: 0.4 %, far below a pixel of a panel spanning 9 decades."""
    return [float(f"{v:.3g}") for v in np.asarray(y, float).tolist()]


def _log(v: float) -> float:
    """Plotly places annotations on a log axis by the value's log10."""
    return math.log10(v)


def exceedance_plotly_figure(g) -> dict:
    """The exceedance plot (figures/exceedance.py): one panel per configuration, stacked on one latency axis,
    1 − F on a log y axis; the fit, its band, the threshold and the bound at P_BOUND where claimed, the reason
    where not."""
    series = g.exceedance
    shown, scale = display_unit(g.unit)
    lo, hi, _ = exceedance.x_range(series)
    count = len(series)
    area = count * PANEL_PX + (count - 1) * PANEL_GAP_PX
    layout = _layout(f"{g.title}: exceedance", f"{g.cells[0].config.measure} ({shown})", "",
                     height=area + TITLE_MARGIN_PX + 60 + LEGEND_PX, margin={"b": 60 + LEGEND_PX},
                     legend={"orientation": "h", "y": -56 / area, "yanchor": "top"}, hovermode="closest")
    del layout["yaxis"]
    data, notes = [], layout.setdefault("annotations", [])
    ticks = [1, 1e-3, 1e-6, 1e-9]
    seen: set[str] = set()

    def once(kind: str) -> bool:
        """Each kind of trace named in the legend once (a refused panel has no fit to name)."""
        new = kind not in seen
        seen.add(kind)
        return new

    for i, s in enumerate(series):
        xa, ya = ("x", "y") if i == 0 else (f"x{i + 1}", f"y{i + 1}")
        top = 1 - i * (PANEL_PX + PANEL_GAP_PX) / area
        bottom = top - PANEL_PX / area
        last = i == count - 1
        layout["xaxis" if i == 0 else f"xaxis{i + 1}"] = {
            **({"matches": "x"} if i else {}), "anchor": ya, "range": [lo * scale, hi * scale], "autorange": False,
            "showticklabels": last, "title": {"text": t(f"{g.cells[0].config.measure} ({shown})") if last else ""}}
        layout["yaxis" if i == 0 else f"yaxis{i + 1}"] = {
            "type": "log", "anchor": xa, "domain": [max(bottom, 0), min(top, 1)], "autorange": False,
            "range": [_log(exceedance.Y_FLOOR), _log(1.5)], "tickvals": ticks,
            "ticktext": ["1", "10⁻³", "10⁻⁶", "10⁻⁹"], "title": {"text": "fraction ≥ x"}}
        notes.append({"text": t(s.label), "xref": "paper", "yref": "paper", "x": 0, "y": min(top, 1),
                      "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 12},
                      "name": "configuration"})
        if s.claimed and len(s.fit_p):
            band_hi = np.minimum(s.band_hi, hi)
            data.append({"type": "scatter", "mode": "lines", "name": "95 % band", "legendgroup": "band",
                         "showlegend": once("band"), "xaxis": xa, "yaxis": ya, "fill": "toself",
                         "fillcolor": "rgba(0,0,0,0.13)", "line": {"width": 0}, "hoverinfo": "skip",
                         "x": np.concatenate([s.band_lo, band_hi[::-1]]) * scale,
                         "y": _log_axis(np.concatenate([s.fit_p, s.fit_p[::-1]]))})
        data.append({"type": "scatter", "mode": "lines+markers", "name": t(f"samples: {s.label}"),
                     "xaxis": xa, "yaxis": ya, "x": s.x * scale, "y": _log_axis(s.y),
                     "line": {"color": _color(i), "width": 1}, "marker": {"color": _color(i), "size": 3},
                     "hovertemplate": f"%{{x:.4g}} {shown}: fraction ≥ x %{{y:.3g}}<extra></extra>"})
        data.append({"type": "scatter", "mode": "lines", "name": "1/n: the data end", "legendgroup": "end",
                     "showlegend": once("end"), "xaxis": xa, "yaxis": ya, "x": [lo * scale, hi * scale],
                     "y": [1 / s.n, 1 / s.n], "line": {"color": "#888", "width": 1, "dash": "dot"},
                     "hoverinfo": "skip"})
        if (far := exceedance.beyond(s, hi)):    # top right: the curve is near 1 − F = 1 only at the left
            notes.append({"text": t("→ " + far), "xref": f"{xa} domain", "yref": f"{ya} domain", "x": 1, "y": 1,
                          "xanchor": "right", "yanchor": "top", "showarrow": False, "bordercolor": "#b3161b",
                          "borderwidth": 1, "bgcolor": "rgba(255,255,255,0.85)",
                          "font": {"size": 11, "color": "#b3161b"}, "name": "beyond"})
        if not s.claimed:       # below 1/n, where no sample can be
            notes.append({"text": "<br>".join(t(x) for x in textwrap.wrap(s.headline, 60)),
                          "xref": f"{xa} domain", "yref": f"{ya} domain", "x": 0.99, "y": 0.03, "xanchor": "right",
                          "yanchor": "bottom", "align": "right", "showarrow": False, "bordercolor": "#b3161b",
                          "borderwidth": 1, "bgcolor": "rgba(255,255,255,0.85)",
                          "font": {"size": 11, "color": "#b3161b"}, "name": "refused"})
            continue
        if len(s.fit_p):
            data.append({"type": "scatter", "mode": "lines", "name": "fitted tail", "legendgroup": "fit",
                         "showlegend": once("fit"), "xaxis": xa, "yaxis": ya, "x": s.fit_x * scale, "y": _log_axis(s.fit_p),
                         "line": {"color": "#000", "width": 1.5, "dash": "dash"},
                         "hovertemplate": f"fit: %{{x:.4g}} {shown} exceeded with p %{{y:.2g}}<extra></extra>"})
        u, zeta = s.threshold
        data.append({"type": "scatter", "mode": "markers", "name": "threshold", "legendgroup": "threshold",
                     "showlegend": once("threshold"), "xaxis": xa, "yaxis": ya, "x": [u * scale], "y": [zeta],
                     "marker": {"symbol": "triangle-up", "size": 11, "color": "#2ca02c"},
                     "hovertemplate": t(exceedance.threshold_text(s)) + "<extra></extra>"})
        # above and right of the marker: the curve falls to the right, so nothing is drawn there
        notes.append({"text": t(exceedance.threshold_text(s)), "xref": xa, "yref": ya, "x": u * scale,
                      "y": _log(zeta), "xanchor": "left", "yanchor": "bottom", "xshift": 7, "yshift": 3,
                      "showarrow": False, "font": {"size": 11}, "name": "threshold"})
        lv = s.bound
        if lv is not None and lv.value > hi:           # a heavy tail's bound beyond the axis: stated at its edge
            notes.append({"text": t("→ " + exceedance.bound_text(s)), "xref": f"{xa} domain", "yref": ya, "x": 1,
                          "y": _log(lv.p), "xanchor": "right", "yanchor": "bottom", "yshift": 8, "showarrow": False,
                          "font": {"size": 11}, "bgcolor": "rgba(255,255,255,0.8)", "name": "bound"})
        elif lv is not None:
            top_ci = hi if lv.ci[1] is None else min(lv.ci[1], hi)
            data.append({"type": "scatter", "mode": "markers", "name": f"bound at p = {lv.p:.0e} (95 %)",
                         "legendgroup": "bound", "showlegend": once("bound"), "xaxis": xa, "yaxis": ya,
                         "x": [lv.value * scale], "y": [lv.p],
                         "marker": {"symbol": "diamond", "size": 9, "color": "#000"},
                         "error_x": {"type": "data", "symmetric": False, "array": [(top_ci - lv.value) * scale],
                                     "arrayminus": [(lv.value - lv.ci[0]) * scale], "color": "#000",
                                     "thickness": 1.5, "width": 5},
                         "hovertemplate": t(exceedance.bound_text(s)) + "<extra></extra>"})
            notes.append({"text": t(exceedance.bound_text(s)), "xref": xa, "yref": ya, "x": lv.value * scale,
                          "y": _log(lv.p), "xanchor": "left" if lv.value < (lo + hi) / 2 else "right",
                          "yanchor": "bottom", "yshift": 8,
                          "showarrow": False, "font": {"size": 11}, "bgcolor": "rgba(255,255,255,0.8)",
                          "name": "bound"})
    return {"data": data, "layout": layout}


def series_figure(ts) -> dict:
    shown, scale = display_unit(ts.unit)
    data = [{"type": "scatter", "mode": "lines", "name": "samples", "x": ts.index, "y": ts.values * scale,
             "line": {"width": 1, "color": _color(0)}}]
    if ts.gc_events:
        data.append({"type": "scatter", "mode": "markers", "name": f"GC event ({t(ts.gc_source)})",
                     "x": ts.gc_index, "y": ts.gc_values * scale,
                     "marker": {"color": "#d62728", "symbol": "x", "size": 6}})
    return {"data": data, "layout": _layout(f"{ts.label}: run {ts.run_id}", "sample", shown, height=360)}


def monitor_histogram_figure(view) -> dict:
    """OSADL's latency plot: one curve per CPU, 1 µs bins, log y."""
    data = []
    for i, (cpu, h) in enumerate(sorted(view.histograms.items())):
        x, y = lab.histogram_xy(h)
        data.append({"type": "scatter", "mode": "lines", "line": {"shape": "hv", "width": 1, "color": _color(i)},
                     "name": f"CPU {cpu} (max {h['max'] / 1000:,.1f} µs)", "x": x, "y": y})
    layout = _layout(f"{view.name} on {view.target}: latency per CPU", "latency (µs)", "samples")
    layout["yaxis"]["type"] = "log"
    _log_yaxis(layout, [d["y"] for d in data])
    bulk = bulk_range.of_series({}, {f"CPU {cpu}": h for cpu, h in view.histograms.items()})
    firsts = [float(x[0]) for x, _ in (lab.histogram_xy(h) for h in view.histograms.values()) if len(x)]
    widths = [h["bucket_width"] / 1000 for h in view.histograms.values()]
    return {"data": data, "layout": _bulk(layout, bulk, "xaxis", "µs", 1e-3, min(firsts) if firsts else None,
                                          max(widths, default=0.0))}


def monitor_series_figure(view) -> dict:
    """The maximum of each interval per CPU, in time order; loaded intervals shaded."""
    cpus = sorted({c for *_, m in view.intervals for c in m})
    data = [{"type": "scatter", "mode": "lines+markers", "name": f"CPU {c}", "line": {"color": _color(i)},
             "x": [iv[0] + 1 for iv in view.intervals], "y": [iv[3].get(c, 0) / 1000 for iv in view.intervals]}
            for i, c in enumerate(cpus)]
    layout = _layout(f"{view.name} on {view.target}: maximum per interval", "interval", "max latency (µs)")
    layout["shapes"] = [{"type": "rect", "xref": "x", "yref": "paper", "x0": iv[0] + 0.5, "x1": iv[0] + 1.5,
                         "y0": 0, "y1": 1, "fillcolor": "#ff7f0e", "opacity": 0.15, "line": {"width": 0}}
                        for iv in view.intervals if iv[2] != "none"]
    return {"data": data, "layout": layout}


def tune_search_figure(view) -> dict:
    """Each race run's goal value in run order (one colour per candidate) and the best value so far."""
    d = view.doc
    shown, scale = display_unit(d.get("unit") or "ns")
    points = [p for p in d["search"]["best_so_far"] if p["value"] is not None]
    data = []
    for i, number in enumerate(sorted({p["candidate"] for p in points})):
        mine = [(k, p) for k, p in enumerate(points, 1) if p["candidate"] == number]
        cand = next(c for c in d["search"]["candidates"] if c["candidate"] == number)
        label = " ".join(f"{k}={value_text(v)}" for k, v in sorted(cand["settings"].items())) or "defaults"
        data.append({"type": "scatter", "mode": "markers", "name": t(f"{number}: {label}"),
                     "marker": {"color": _color(i)}, "x": [k for k, _ in mine],
                     "y": [p["value"] * scale for _, p in mine]})
    data.append({"type": "scatter", "mode": "lines", "name": "best so far", "line": {"color": "#000", "shape": "hv"},
                 "x": list(range(1, len(points) + 1)), "y": [p["best"] * scale for p in points]})
    return {"data": data, "layout": _layout(f"tune {d['tune']}: the search", "race run",
                                            f"{d['goal']} of the run ({shown})")}


def tune_sections(report: Report, plot) -> list[dict]:
    out = []
    for view in report.tunes:
        d = view.doc
        shown, scale = display_unit(d.get("unit") or "ns")

        def knobs(settings: dict) -> str:
            return " ".join(f"{k}={value_text(v)}" for k, v in sorted(settings.items())) or "defaults"

        rows = [{"metric": r["metric"], "baseline": fmt(r["metric"], r["baseline"], scale),
                 "value": fmt(r["metric"], r["value"], scale),
                 "change": "–" if r["ratio"] is None else f"{r['ratio'] - 1:+.1%}",
                 "ci": "–" if not r["ci95_difference"] else
                 f"{fmt(r['metric'], r['ci95_difference'][0], scale)} .. {fmt(r['metric'], r['ci95_difference'][1], scale)}",
                 "p": "–" if r["p_holm"] is None else p_text(r["p_holm"]), "verdict": r["verdict"]}
                for r in d["confirmation"]]
        shown_cfg = d["best"] if d["verdict"] == "improved" else d["winner"]
        out.append({
            "title": view.title, "unit": shown, "best": knobs(d["best"]["settings"]),
            "baseline": knobs(d["baseline"]["settings"]), "compared": knobs(shown_cfg["settings"]),
            "race_ended": d["race_ended"], "rows": rows,
            "importance": ", ".join(f"{k} {v:.2f}" for k, v in d["importance"].items()),
            "dropped_from_space": d["dropped_from_space"],
            "candidates": [{"number": c["candidate"], "origin": c["origin"], "settings": knobs(c["settings"]),
                            "runs": len(c["runs"]), "value": fmt(d["goal"], c["value"], scale),
                            "fate": c["reason"] or ("raced to the end" if c["runs"] else "not run")}
                           for c in d["search"]["candidates"]],
            "plot": plot(tune_search_figure(view), "Dots: the goal of each race run, one colour per candidate; "
                                                   "line: the best value so far. The race's runs only choose the "
                                                   "candidates; the verdict comes from the confirmation's fresh "
                                                   "runs."),
        })
    return out


def fleet_table(report: Report) -> list[dict]:
    return [{"target": f.target, "kernel": f.kernel, "preemption": f.preemption, "machine": f.machine,
             "runs": f.runs, "n": f"{f.n:,}", "max": fmt("max", f.worst_max, 1e-3),
             "p9999": fmt("p9999", f.worst_p9999, 1e-3), "accelerator": f.accelerator or "–"} for f in report.fleet]


def task_memory_figure(report: Report) -> dict:
    shown, scale = display_unit(report.task_memory_unit)
    data = []
    for i, s in enumerate(report.task_memory):
        data.append({"type": "scatter", "mode": "markers", "name": t(s.label), "x": s.tasks, "y": s.values * scale,
                     "marker": {"color": _color(i), "size": 5}})
        if s.fit is not None:
            xs = np.array([s.tasks.min(), s.tasks.max()])
            data.append({"type": "scatter", "mode": "lines", "name": t(f"{s.label}: {s.fit.slope * scale:,.0f} "
                                                                      f"{shown}/task"),
                         "x": xs, "y": s.fit.at(xs) * scale, "line": {"color": _color(i), "dash": "dash"}})
    return {"data": data, "layout": _layout("memory against task count, least-squares lines", "tasks",
                                            f"memory ({shown})")}


# --- tables -----------------------------------------------------------------------------------------------

def stats_tables(report: Report) -> list[dict]:
    """Study-style tables (AVG MAX VAR STDEV and percentiles), one per unit."""
    out: dict[str, dict] = {}
    for c in report.cells:
        unit = c.config.unit
        shown, scale = display_unit(unit)
        table = out.setdefault(unit, {"unit": shown, "heads": [
            h + ("" if k == "n" else f" ({shown}²)" if k == "var" else f" ({shown})") for k, h in STATS_COLUMNS],
            "rows": []})
        table["rows"].append({"label": report.labels[c.config], "full": full_label(c.config), "runs": id_list(c),
                              "cells": [fmt(k, c.stats.get(k), scale) for k, _ in STATS_COLUMNS]})
    return list(out.values())


def full_label(config) -> str:
    """Every setting and parameter of a configuration (the tables show what varies; this is the tooltip)."""
    from ..analysis.select import PARAM_WORDS
    params = " ".join(f"{PARAM_WORDS.get(k, k)}={value_text(v)}" for k, v in config.params)
    return config.label + (f" {params}" if params else "")


def id_list(cell) -> str:
    return id_ranges([r.id for r in cell.runs])


def comparison_rows(report: Report) -> list[dict]:
    cs = report.comparisons
    if cs is None:
        return []
    labels = cs.labels
    out = []
    for k in cs.comparisons:
        shown, scale = display_unit(k.cell.config.unit)
        rows = []
        for r in k.rows:
            rows.append({"metric": r.metric, "baseline": fmt(r.metric, r.baseline, scale),
                         "value": fmt(r.metric, r.value, scale), "change": change(r.ratio),
                         "ci": f"{fmt(r.metric, r.ci[0], scale)} .. {fmt(r.metric, r.ci[1], scale)}" if r.ci else "–",
                         "p": p_text(r.p), "p_holm": p_text(r.p_holm), "verdict": r.verdict,
                         "css": r.verdict.replace(" ", "-"), "why": r.reason or r.note})
        out.append({"label": labels[k.cell.config], "baseline": labels[k.base.config], "unit": shown,
                    "runs": f"{len(k.cell.runs)} vs {len(k.base.runs)}",
                    "delta": f"{k.cliffs_delta:+.2f} ({k.magnitude})" if k.cliffs_delta is not None else "–",
                    "rows": rows, "notes": k.notes})
    return out


# --- the page ---------------------------------------------------------------------------------------------

PLOTLY_BUNDLE = Path(__file__).parent / "vendor" / "plotly-cartesian-4.1.1.min.js.gz"


def why_figure(w) -> dict:
    """A sample's interval on a time axis (µs from its start) and each cause's stretches as bars, one lane
    per cause, on the sample's CPU (or scheduler)."""
    from ..analysis.explain_shares import culprit
    lanes = [f"sample ({w.where})" if w.where else "sample"]
    data = [{"type": "bar", "orientation": "h", "name": "the sample", "y": [lanes[0]], "x": [w.value_ns / 1000],
             "base": [0], "marker": {"color": "#bbbbbb"}, "hovertemplate": "%{x:.1f} µs<extra></extra>"}]
    for i, c in enumerate(w.causes[:8]):
        lane = culprit(c)
        spans = c.get("intervals") or []
        data.append({"type": "bar", "orientation": "h", "name": lane, "y": [lane] * len(spans),
                     "base": [a / 1000 for a, _ in spans], "x": [(b - a) / 1000 for a, b in spans],
                     "marker": {"color": _color(i)},
                     "hovertemplate": f"{t(lane)}: %{{x:.1f}} µs from %{{base:.1f}} µs<extra></extra>"})
    layout = _layout(w.label, "µs from the sample's start", "", barmode="overlay", showlegend=False,
                     margin={"l": 230}, height=150 + 34 * len(data))
    layout["yaxis"]["autorange"] = "reversed"
    return {"data": data, "layout": layout}


def why_table(report: Report) -> dict | None:
    rows = report.why_shares
    if not rows:
        return None
    kinds = list(dict.fromkeys(k.kind for c in rows for k in c.kinds))
    return {"kinds": kinds, "reference": rows[0].reference,
            "rows": [{"label": c.label, "reference": f"{c.reference_ns / 1000:,.1f}", "samples": c.samples,
                      "cells": [next((f"{k.share:.0%} ({c.per_sample_ns(kind) / 1000:,.1f})"
                                      for k in c.kinds if k.kind == kind), "–") for kind in kinds]}
                     for c in rows]}


def plotly_payload() -> str:
    """The embedded plotly.js: gzip bytes as base64 (ASCII, nothing to escape in the page)."""
    return base64.b64encode(PLOTLY_BUNDLE.read_bytes()).decode("ascii")


DEFAULT_LEGEND = {"orientation": "h", "y": -0.2}
LEGEND_CHARS, LEGEND_LINE_PX, LEGEND_ENTRY_PX = 48, 16, 6


def fit_legend(spec: dict) -> dict:
    """A plot's legend below everything else (the x axis' ticks and title), its entries wrapped at LEGEND_CHARS,
    the figure made taller by the legend's height counted as one entry per row (as on a narrow page): long
    configuration labels never run off the page, never cover the axis, never squash the plot area."""
    layout = spec["layout"]
    if layout.get("showlegend") is False or layout.get("legend") != DEFAULT_LEGEND:
        return spec
    shown = [d for d in spec["data"] if d.get("showlegend", True) and d.get("name")]
    if len(shown) < 2:
        return spec                                # plotly draws no legend for a single trace
    px = 10
    for d in shown:
        lines = textwrap.wrap(d["name"], LEGEND_CHARS, break_long_words=False, break_on_hyphens=False) or [""]
        d["name"] = "<br>".join(lines)
        px += LEGEND_LINE_PX * len(lines) + LEGEND_ENTRY_PX
    layout["legend"] = {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0,
                        "xanchor": "left"}
    layout["margin"] = {**layout.get("margin", {}), "b": layout.get("margin", {}).get("b", 60) + px}
    layout["height"] = layout.get("height", 440) + px
    return spec


class Plots:
    """The page's plots in order: each an element id, its figure as script-safe JSON and a caption."""

    def __init__(self, prefix: str = "plot"):
        self.prefix, self.entries = prefix, []

    def __call__(self, spec: dict, caption: str = "") -> dict:
        spec = fit_legend(spec)
        entry = {"id": f"{self.prefix}-{len(self.entries) + 1}", "json": script_json(spec), "caption": caption}
        self.entries.append(entry)
        return entry


def sections(report: Report, plot: Plots) -> dict:
    """The report's plotted sections (groups, time series, task memory, monitoring), each plot made by `plot`:
    the HTML report and `rtscope serve`'s pages draw the same figures."""
    groups = []
    for g in report.groups:
        shown, scale = display_unit(g.unit)
        entries = []
        if g.boxes:
            outl = sum(b.n_outliers for b in g.boxes)
            thinned = any(b.n_outliers > MAX_OUTLIERS for b in g.boxes)
            entries.append(plot(box_figure(g, shown, scale),
                                f"Boxes: quartiles (type 7); whiskers: furthest samples within 1.5 IQR; "
                                f"{outl:,} outliers beyond" + (f" (at most {MAX_OUTLIERS} drawn per box, evenly "
                                                               "by rank)" if thinned else "")))
        if g.histograms:
            entries.append(plot(histogram_figure(g, shown), f"Samples per {shown} on a log scale; empty buckets "
                                                            "are left blank."))
        for label, curves, thread_bulk in g.per_thread:
            entries.append(plot(histogram_figure(g, shown, curves, f"{label}, per CPU", thread_bulk), "One curve per CPU (per thread when its "
                                                                            "CPU is not known), log y, as OSADL "
                                                                            "plots latency."))
        if g.cdfs:
            entries.append(plot(cdf_figure(g, shown, scale)))
            entries.append(plot(percentile_figure(g, shown, scale), "The tail spread out: each step right is "
                                                                    "ten times rarer."))
        if g.exceedance:
            entries.append(plot(exceedance_plotly_figure(g), exceedance.caption(g.exceedance,
                                                                         exceedance.x_range(g.exceedance)[2])))
        groups.append({"title": g.title, "plots": entries, "notes": g.notes})
    series = []
    for ts in report.series:
        shown, scale = display_unit(ts.unit)
        cap = f"{ts.n:,} samples"
        if len(ts.index) < ts.n:
            cap += f", drawn as each block's minimum and maximum ({len(ts.index):,} points)"
        if ts.gc_events:
            cap += f"; {ts.gc_events:,} GC events ({ts.gc_source})"
            if ts.gc_mean is not None and ts.other_mean is not None:
                cap += (f": mean {fmt('mean', ts.gc_mean, scale)} {shown} with a GC event, "
                        f"{fmt('mean', ts.other_mean, scale)} {shown} without")
        series.append(plot(series_figure(ts), cap))
    task = None
    if report.task_memory:
        shown, scale = display_unit(report.task_memory_unit)
        task = {"plot": plot(task_memory_figure(report), "Dashed: least-squares lines. r is Pearson's correlation "
                                                         "coefficient, r² the coefficient of determination."),
                "unit": shown,
                "rows": [{"label": s.label, "runs": ", ".join(map(str, s.run_ids)), "n": len(s.tasks),
                          "slope": f"{s.fit.slope * scale:,.1f}" if s.fit else "–",
                          "intercept": f"{s.fit.intercept * scale:,.0f}" if s.fit else "–",
                          "r": f"{s.fit.r:.4f}" if s.fit and s.fit.r is not None else "–",
                          "r2": f"{s.fit.r2:.4f}" if s.fit and s.fit.r2 is not None else "–",
                          "problem": s.fit_problem or ""} for s in report.task_memory]}
    monitoring = [{"title": f"{v.name} on {v.target}: {counted(len(v.intervals), 'interval')}",
                   "plots": [plot(monitor_histogram_figure(v), "Every sample of every interval, per CPU, in 1 µs bins "
                                                               "(log y), as OSADL plots its farm's latency."),
                             plot(monitor_series_figure(v), "Shaded: intervals under load.")]}
                  for v in report.monitoring]
    why = [plot(why_figure(w), f"{w.value_ns / 1000:,.1f} µs: the grey bar is the sample's interval, each "
                                "coloured bar a stretch of one cause; the measuring "
                                f"{'thread' if w.where.startswith('CPU') else 'process'} itself "
                                f"{w.self_ns / 1000:,.1f} µs, unexplained {w.unexplained_ns / 1000:,.1f} µs.")
           for w in report.why]
    return {"groups": groups, "series": series, "task": task, "monitoring": monitoring,
            "tunes": tune_sections(report, plot), "why": why}


VERDICT_CSS = {"holds": "better", "contradicted": "worse", "undecided": "not-tested",
               "not measurable here": "no-significant-difference"}


def paper_section(report: Report, plot) -> dict | None:
    """The paper's view (report/paper_view.py): the study's tables, the latency histograms below them, the claims."""
    v = report.paper
    if v is None:
        return None
    hists = []
    if v.histograms:
        for g in report.groups:
            if g.histograms and g.cells[0].config.measure == "latency":
                shown = display_unit(g.unit)[0]
                hists.append(plot(histogram_figure(g, shown), f"Overlaid latency histograms, samples per {shown} "
                                                              "(log y), as the study drew them."))
    from ..analysis.claims import evidence_text
    claims = [row | {"css": VERDICT_CSS[row["verdict"]]} for row in claim_rows(v)]
    return {"view": v, "histograms": hists, "claims": claims,
            "tested": sum(j.p_holm is not None for j in v.claims), "evidence": evidence_text(v.claims)}


def template_cache_dir() -> Path:
    """Where the compiled templates are kept: $RTSCOPE_CACHE/jinja2, else $XDG_CACHE_HOME/rtscope/jinja2, else
    ~/.cache/rtscope/jinja2."""
    root = os.environ.get("RTSCOPE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rtscope")
    return Path(root) / "jinja2"


def _bytecode_cache():
    """jinja2's bytecode cache of the report's templates (compiling them costs about 0.1 s a report), keyed by
    jinja2 on each template's name and the SHA-1 of its source, so an edited template is compiled afresh. A
    cache directory that cannot be created, read or written costs only the compilation (None: no cache)."""
    import jinja2

    class Cache(jinja2.FileSystemBytecodeCache):
        def load_bytecode(self, bucket):
            try:
                super().load_bytecode(bucket)
            except Exception:         # unreadable, truncated, another version's: compile afresh
                bucket.reset()

        def dump_bytecode(self, bucket):
            try:
                super().dump_bytecode(bucket)
            except OSError:
                pass

    directory = template_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return Cache(str(directory))


def render(report: Report, plotly_gz: str | None = None) -> str:
    import jinja2
    if plotly_gz is None:
        plotly_gz = plotly_payload()
    plots = Plots()
    paper = paper_section(report, plots)
    parts = sections(report, plots)
    cs = report.comparisons
    env = jinja2.Environment(loader=jinja2.DictLoader({"tables.html": TABLES, "report.html": TEMPLATE}),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             bytecode_cache=_bytecode_cache())
    env.globals["machine_rows"] = machine_rows
    template = env.get_template("report.html")
    return template.render(
        r=report, style=STYLE, draw_plots=DRAW_PLOTS, version=__version__, plotly_gz=plotly_gz, machines=report.machines,
        stats_tables=stats_tables(report), comparisons=comparison_rows(report), **parts,
        series_omitted=report.series_omitted, plots=plots.entries,
        fleet=fleet_table(report), why_table=why_table(report), paper=paper,
        any_gc=any(ts.gc_events for ts in report.series),
        configurations=len(report.cells), run_test=RUN_TEST,
        baseline=cs.baseline.text if cs else "", alpha=cs.alpha if cs else None,
        warnings=(cs.warnings if cs else []),
        unmatched=[(cs.labels[c.config], why) for c, why in cs.unmatched] if cs else [],
        percentile_definition=stats.PERCENTILE_DEFINITION,
    )


def write(report: Report, path: str | os.PathLike) -> Path:
    """Render and write atomically."""
    path = Path(path)
    text = render(report)
    write_atomic(path, text, "report")
    return path
