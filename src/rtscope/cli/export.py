"""rtscope export: every raw sample of a stored run, as CSV or JSON."""

from __future__ import annotations

import csv
import io
import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..analysis.documents import run_summary
from .common import DbOption, app, console, escape, open_store

if TYPE_CHECKING:
    from ..store import Run


class ExportFormat(str, Enum):
    csv = "csv"
    json = "json"


class Units(str, Enum):
    ns = "ns"
    us = "us"


def export_columns(run: Run, data: dict, units: Units) -> tuple[list[str], list]:
    """Column names and arrays; `us` gives the nerves_rt_perf layout count,time,... in µs."""
    cols = [c["name"] for c in run.columns]
    arrays = [data[c] for c in cols]
    n = len(arrays[0]) if arrays else 0
    import numpy as np
    if units is Units.us:
        # The leading time columns in µs: one is `time`; several (gpio write's write_1, write_0) are
        # time_for_<name>, as nerves_rt_perf's GPIO CSV has them.
        times = 0
        while times < len(cols) and run.columns[times].get("unit") == "ns":
            times += 1
        if times <= 1:
            first = arrays[0] / 1000.0 if times else arrays[0]
            return ["count", "time", *cols[1:]], [np.arange(1, n + 1), first, *arrays[1:]]
        return (["count", *(f"time_for_{c}" for c in cols[:times]), *cols[times:]],
                [np.arange(1, n + 1), *(a / 1000.0 for a in arrays[:times]), *arrays[times:]])
    names, out = ["index", *cols], [np.arange(n), *arrays]
    pairing = run.header.get("pairing") if isinstance(run.header, dict) else None
    if pairing and n and "blocks" in pairing:   # an arm of an interleaved run: each sample's block, its position
        block = int(pairing["block_samples"])
        names.append("block")
        out.append(np.asarray(pairing["blocks"], dtype=np.int64)[np.minimum(np.arange(n) // block,
                                                                            len(pairing["blocks"]) - 1)])
    return names, out


@app.command()
def export(
    run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id.")],
    fmt_: Annotated[ExportFormat, typer.Option("--format", help="csv: one row per sample; json: columns.")] = ExportFormat.csv,
    units: Annotated[Units, typer.Option(help="ns: as stored; us: nerves_rt_perf style count,time,... in µs.")] = Units.ns,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write [default: stdout].")] = None,
    db: DbOption = None,
) -> None:
    """Export every raw sample of a run."""
    from ..fileio import write_atomic
    store = open_store(db)
    run = store.get_run(run_id)
    names, arrays = export_columns(run, store.samples(run.id), units)
    if fmt_ is ExportFormat.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        w.writerows(zip(*(a.tolist() for a in arrays)))
        text = buf.getvalue()
    else:
        text = json.dumps({"run": run_summary(run), "columns": run.columns, "units": units.value,
                           "samples": {n: a.tolist() for n, a in zip(names, arrays)}}) + "\n"
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_atomic(output, text, "export")
        console.print(f"wrote {len(arrays[0]) if arrays else 0:,} samples to {escape(str(output))}")
