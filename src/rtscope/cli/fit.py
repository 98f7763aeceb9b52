"""Commands for memory per task and switch cost: fit (a CSV of points) and tasks-table (stored tasks runs)."""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box

from ..errors import UsageError, choices
from ..workloads import TASK_MODELS
from .common import DbOption, JsonOption, Table, app, console, escape, open_store, print_json

if TYPE_CHECKING:
    import numpy as np

    from ..analysis.fit import Series

MISSING = {"", "na", "n/a", "nan", "-"}   # a value the study's table left out ("N/A")
# --- rtscope fit -------------------------------------------------------------------------------------------

def _number(text: str, where: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"{where}: {text!r} is not a number (column {name})") from None
    if not math.isfinite(v):
        raise UsageError(f"{where}: {text!r} is not a finite number (column {name})")
    return v


def read_points(text: str, source: str, x_name: str = "tasks", y_name: str = "bytes") -> tuple[np.ndarray, np.ndarray, int]:
    """(x, y, rows without a y value) from CSV text: `tasks,bytes` rows, with or without a header line.

    With a header, the columns are found by name (so `rtscope export` output works); without one, every
    row must hold exactly two values. Blank lines and lines starting with # are ignored.
    """
    import numpy as np
    xs: list[float] = []
    ys: list[float] = []
    skipped = 0
    cols: tuple[int, int] | None = None
    width = 2
    reader = csv.reader(io.StringIO(text))
    for row in reader:
        line = reader.line_num
        where = f"{source}:{line}"
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if cols is None:
            cols = (0, 1)
            if any(_is_name(c) for c in cells):  # a header line
                names = [c.lower() for c in cells]
                missing = [n for n in (x_name, y_name) if n not in names]
                if missing:
                    raise UsageError(f"{where}: header has no column {missing[0]!r}; its columns: "
                                     f"{choices(cells)} (choose others with --x/--y)")
                cols, width = (names.index(x_name), names.index(y_name)), len(cells)
                continue
        if len(cells) != width:
            raise UsageError(f"{where}: expected {width} values ({x_name},{y_name}"
                             f"{',...' if width > 2 else ''}), got {len(cells)}")
        xt, yt = cells[cols[0]], cells[cols[1]]
        x = _number(xt, where, x_name)
        if yt.lower() in MISSING:
            skipped += 1
            continue
        xs.append(x)
        ys.append(_number(yt, where, y_name))
    if cols is None:
        raise UsageError(f"{source}: no data (expected lines of {x_name},{y_name})")
    return np.array(xs), np.array(ys), skipped


def _is_name(cell: str) -> bool:
    if cell.lower() in MISSING:
        return False
    try:
        float(cell)
        return False
    except ValueError:
        return True


@app.command()
def fit(
    file: Annotated[str, typer.Argument(metavar="FILE", help="CSV of tasks,bytes points (header optional; - reads stdin).")],
    x: Annotated[str, typer.Option("--x", help="Column of x, when the CSV has a header.")] = "tasks",
    y: Annotated[str, typer.Option("--y", help="Column of y, when the CSV has a header.")] = "bytes",
    json_out: JsonOption = False,
) -> None:
    """Least-squares line of bytes against tasks: slope (bytes per task), intercept, r and r²."""
    from ..analysis.fit import least_squares
    from ..figures.tasks import r_text
    if file == "-":
        text, source = sys.stdin.read(), "<stdin>"
    else:
        try:
            text = Path(file).read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"cannot read {file}: {getattr(e, 'strerror', None) or e}") from None
        source = file
    xs, ys, skipped = read_points(text, source, x.lower(), y.lower())
    result = least_squares(xs, ys)
    if json_out:
        print_json({**result.as_dict(), "skipped": skipped})
        return
    console.print(f"least-squares fit of {escape(y)} against {escape(x)}: {result.n} points from {escape(source)}"
                  + (f" ({skipped} rows without a value skipped)" if skipped else ""), soft_wrap=True)
    table = Table(box=box.SIMPLE, show_header=False)
    table.add_column()
    table.add_column(justify="right")
    table.add_column()
    table.add_row("slope", f"{result.slope:,.2f}", f"{escape(y)} per {escape(x.rstrip('s'))}")
    table.add_row("intercept", f"{result.intercept:,.0f}", escape(y))
    table.add_row("r", r_text(result.r), "Pearson correlation coefficient")
    table.add_row("r²", r_text(result.r2), "coefficient of determination")
    console.print(table)


# --- rtscope tasks-table -----------------------------------------------------------------------------------

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
