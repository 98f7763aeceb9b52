"""Command `rtscope histogram RUN [RUN...]`: latency histograms of stored runs, overlaid.

In the terminal: one statistics row per run (min / avg / max, p50 ... p99.99,
overflows, missed periods) and a compact histogram, one bar column per run,
log-scaled. `--figure F.png` / `--figure F.svg` writes the figure
(figures.latency.latency_figure) as well.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box

from ..errors import UsageError
from .common import DbOption, JsonOption, Table, app, console, escape, open_store, print_json, settings_text

if TYPE_CHECKING:
    from ..figures import latency as lat

COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red")


def run_label(run) -> str:
    knobs = settings_text({k: v for k, v in run.settings.items() if k != "cpu_dma_latency_us"})
    return f"run {run.id}: {run.workload} {run.variant} ({run.runtime}; {knobs})"


def stats_rows(series: list[lat.LatencySeries], ids: list[int]) -> Table:
    from ..figures import latency as lat
    table = Table(title="latency (µs)", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=(0, 0, 0, 1))
    for head in ("run", "n", "MIN", "AVG", "MAX", "p50", "p99", "p99.9", "p99.99", "overflow", "missed"):
        table.add_column(head, justify="left" if head == "run" else "right")
    for i, (s, run_id) in enumerate(zip(series, ids)):
        st, le = s.stats, "" if s.exact else "≤"
        table.add_row(f"[{COLOURS[i % len(COLOURS)]}]{run_id}[/]", f"{st['n']:,}",
                      *(lat.fmt_us(st[k]) for k in ("min", "mean", "max")),
                      *(le + lat.fmt_us(st.get(k)) for k, _ in lat.TAIL),
                      "-" if s.exact else f"{s.overflow:,}", "-" if s.missed is None else f"{s.missed:,}")
    return table


def bar(count: int, peak: int, width: int) -> str:
    """Log-scaled bar: 1 count is one cell, the peak fills the width."""
    if count <= 0:
        return ""
    cells = max(1, round(width * math.log10(1 + count) / math.log10(1 + max(peak, 1))))
    return "█" * cells


def histogram_table(series: list[lat.LatencySeries], ids: list[int], rows: int, x_max_us: float | None) -> Table:
    from ..figures import latency as lat
    edges, binned, rest = lat.rebin(series, rows, x_max_us)
    peak = max(int(b.max()) if b.size else 0 for b in binned)
    digits = max(len(f"{int(x):,}") for b, r in zip(binned, rest) for x in (*b, r, 1))
    per_run = (console.width - 14) // len(series) - 1
    width = max(4, min(30, per_run - digits - 1))
    table = Table(title="count per bin (bars log-scaled)", title_justify="left", box=None, pad_edge=False)
    table.add_column("µs", justify="right")
    for i, run_id in enumerate(ids):
        table.add_column(f"run {run_id}", style=COLOURS[i % len(COLOURS)])
    for k in range(len(edges) - 1):
        cells = [f"{bar(int(b[k]), peak, width):<{width}} {int(b[k]):,}" if b[k] else "" for b in binned]
        table.add_row(f"{edges[k]:g}–{edges[k + 1]:g}", *cells)
    table.add_row(f"≥ {edges[-1]:g}", *(f"{'':<{width}} {r:,}" if r else "" for r in rest))
    return table


@app.command("histogram")
def histogram_cmd(
    run_ids: Annotated[list[int], typer.Argument(metavar="RUN [RUN...]", help="Run ids (see `rtscope runs`).")],
    figure: Annotated[Optional[list[Path]], typer.Option(
        "--figure", help="Also write the figure: PATH.png or PATH.svg (repeatable).")] = None,
    rows: Annotated[int, typer.Option(help="Rows of the terminal histogram (4..60).")] = 16,
    x_max_us: Annotated[Optional[float], typer.Option(
        "--x-max-us", help="Right edge in µs [default: all values, unless rare outliers would squash the body]")]
    = None,
    title: Annotated[Optional[str], typer.Option(help="Figure title.")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Latency histograms of runs, overlaid: min/avg/max, p50..p99.99, overflows; terminal and PNG/SVG."""
    from ..figures import latency as lat, save
    if not 4 <= rows <= 60:
        raise UsageError(f"--rows {rows}: valid values are 4..60")
    if x_max_us is not None and x_max_us <= 0:
        raise UsageError(f"--x-max-us {x_max_us}: must be greater than 0")
    for path in figure or []:
        if path.suffix.lower() not in (".png", ".svg"):
            raise UsageError(f"--figure {path}: unknown format {path.suffix or '(no suffix)'!r}; valid: .png, .svg")
    store = open_store(db)
    series = []
    for run_id in run_ids:
        run = store.get_run(run_id)
        series.append(lat.from_run(store, run, run_label(run)))
    written = []
    if figure:
        fig = lat.latency_figure(series, title=title, x_max_us=x_max_us)
        written = [save(fig, path) for path in figure]
    if json_out:
        edges, binned, rest = lat.rebin(series, rows, x_max_us)
        print_json({"runs": [{"id": rid, "label": s.label, "stats": s.stats, "exact_percentiles": s.exact,
                              "overflows": s.overflow, "missed_periods": s.missed,
                              "bins": {"edges_us": edges.tolist(), "counts": b.tolist(), "beyond": r}}
                             for rid, s, b, r in zip(run_ids, series, binned, rest)],
                    "figures": [str(p) for p in written]})
        return
    for i, s in enumerate(series):
        console.print(f"[{COLOURS[i % len(COLOURS)]}]{escape(s.label)}[/]", soft_wrap=True)
    console.print(stats_rows(series, run_ids))
    console.print(histogram_table(series, run_ids, rows, x_max_us))
    if not all(s.exact for s in series):
        console.print("≤: percentile from a histogram (upper edge of its bucket); overflows: values beyond the "
                      "histogram's range")
    for path in written:
        console.print(f"wrote {escape(str(path))}")
