"""rtscope tasks-table: memory per task and switch cost of stored tasks runs (study 5)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box

from ..errors import UsageError
from ..workloads import TASK_MODELS
from .common import DbOption, JsonOption, Table, app, console, escape, note_experiment, open_store, print_json

if TYPE_CHECKING:
    from ..analysis.fit import Series


def _fit_cells(s: Series) -> list[str]:
    from ..figures.tasks import r_text
    f = s.fit
    if f is None:
        return ["-", "-", "-", "-"]
    return [f"{f.slope:,.1f}", f"{f.intercept:,.0f}", r_text(f.r), r_text(f.r2)]


def memory_tables(series: list[Series], column: str, unit: str) -> list[Table]:
    import numpy as np

    from ..figures.tasks import quantity
    counts = sorted({int(c) for s in series for c in np.unique(s.tasks)})
    cells = [s.by_count() for s in series]
    table = Table(title=f"memory ({quantity(column, unit)}) by number of tasks", box=box.SIMPLE_HEAD)
    table.add_column("tasks", justify="right")
    for s in series:
        table.add_column(escape(s.label), justify="right")
    for c in counts:
        table.add_row(f"{c:,}", *(f"{cell[c]:,.0f}" if c in cell else "-" for cell in cells))
    notes = []
    if len({s.column for s in series}) > 1:
        notes.append("columns: " + "; ".join(f"{s.label} {s.column}" for s in series))
    if any(len(s.run_ids) > 1 for s in series):
        notes.append("cells: median over the runs of each model; the fit uses every point")
    table.caption = "\n".join(notes) or None
    fits = Table(title=f"least-squares fit: slope = {unit} per task, intercept in {unit}", box=box.SIMPLE_HEAD)
    for head in ("model", "slope", "intercept", "r", "r²", "points"):
        fits.add_column(head, justify="left" if head == "model" else "right")
    for s in series:
        fits.add_row(escape(s.label), *_fit_cells(s), f"{len(s.tasks):,}")
    fits.caption = "runs: " + "; ".join(f"{s.label} {','.join(map(str, s.run_ids))}" for s in series)
    return [table, fits]


def switch_table(rows: list[dict]) -> Table:
    from ..analysis import stats
    table = Table(title="switch cost: ns per switch (ping-pong between two tasks)", box=box.SIMPLE_HEAD,
                  caption=f"percentiles over batches: {stats.PERCENTILE_DEFINITION}")
    for head in ("model", "batches", "median", "p99", "mean", "max", "runs"):
        table.add_column(head, justify="left" if head in ("model", "runs") else "right")
    for r in rows:
        table.add_row(escape(r["label"]), f"{r['n']:,}",
                      *(f"{r[k]:,.1f}" if r[k] is not None else "-" for k in ("p50", "p99", "mean", "max")),
                      ",".join(map(str, r["runs"])))
    return table


def _order(s) -> tuple:
    """Runtime, then the models in their registry order (native first: the study's table)."""
    from ..analysis.fit import Series
    runtime, settings, label = (s.runtime, s.settings, s.label) if isinstance(s, Series) else \
        (s["runtime"], s["settings"], s["label"])
    model = settings.get("model")
    order = list(TASK_MODELS)
    return (runtime != "native", runtime, order.index(model) if model in order else len(order),
            label)


def print_whole(table: Table) -> None:
    """Print a table at its natural width even on a narrower console: numbers are never cut."""
    needed = console.measure(table, options=console.options.update_width(10_000)).maximum
    width = console.width
    console.width = max(width, needed)
    try:
        console.print(table)
    finally:
        console.width = width


@app.command("tasks-table")
def tasks_table(
    run_ids: Annotated[Optional[list[int]], typer.Argument(metavar="RUN", help="Run ids (default: every tasks run).")] = None,
    experiment: Annotated[Optional[str], typer.Option(help="Only runs of this experiment (id or name).")] = None,
    column: Annotated[Optional[str], typer.Option(help="Memory column to tabulate and fit (default: each run's "
                                                       "primary column: bytes on the BEAM, rss_bytes from taskmem).")] = None,
    figure: Annotated[Optional[Path], typer.Option(help="Write a scatter plot with the fitted lines (.png, .svg, .pdf).")] = None,
    log: Annotated[bool, typer.Option("--log", help="Log-log axes in the figure (points at 0 are left out).")] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Memory per task (table by task count, least-squares slopes, r, r²) and switch cost of stored tasks runs."""
    from ..analysis import stats
    from ..analysis.fit import memory_series
    from ..analysis.select import Selection, select_runs
    from ..analysis.tasks import switch_rows
    from ..figures.tasks import write_figure
    store = open_store(db)
    note_experiment(store, experiment)
    runs = select_runs(store, Selection(experiment=experiment, workload="tasks", run_ids=list(run_ids or [])))
    memory_runs = [r for r in runs if r.variant == "memory"]
    switch_runs = [r for r in runs if r.variant == "switch"]
    series = sorted(memory_series(store, memory_runs, column) if memory_runs else [], key=_order)
    # Without --column each run shows its primary column (taskmem: rss_bytes; the BEAM: bytes).
    columns = sorted({s.column for s in series})
    shown = column or (columns[0] if len(columns) == 1 else None)
    label = shown or "each run's primary column"
    units = {c.get("unit", "") for r in memory_runs for c in r.columns if c["name"] in (column or columns)}
    unit = units.pop() if len(units) == 1 else "bytes"
    switches = sorted(switch_rows(store, switch_runs) if switch_runs else [], key=_order)
    if figure is not None:
        if not series:
            raise UsageError("--figure needs tasks memory runs in the selection")
        write_figure(figure, series, label, unit, log)
    if json_out:
        print_json({
            "column": shown, "unit": unit,
            "memory": [{"label": s.label, "runtime": s.runtime, "settings": s.settings, "runs": s.run_ids,
                        "column": s.column,
                        "points": [[t, v] for t, v in zip(s.tasks.tolist(), s.values.tolist())],
                        "by_count": {str(c): v for c, v in s.by_count().items()},
                        "fit": s.fit.as_dict() if s.fit else None, "fit_problem": s.fit_problem}
                       for s in series],
            "switch": switches, "percentile_definition": stats.PERCENTILE_DEFINITION,
            "figure": str(figure) if figure else None,
        })
        return
    if series:
        for t in memory_tables(series, label, unit):
            print_whole(t)
        for s in series:
            if s.fit_problem:
                console.print(f"[yellow]no fit for {escape(s.label)}:[/] {escape(s.fit_problem)}")
    if switches:
        print_whole(switch_table(switches))
    if figure is not None:
        console.print(f"wrote {escape(str(figure))}")
