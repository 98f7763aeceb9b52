"""rtscope fit: the least-squares line of a CSV of tasks,bytes points (memory per task)."""

from __future__ import annotations

import csv
import io
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box

from ..errors import UsageError, choices
from .common import JsonOption, Table, app, console, escape, print_json

if TYPE_CHECKING:
    import numpy as np

MISSING = {"", "na", "n/a", "nan", "-"}   # a value the study's table left out ("N/A")


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
