"""Command storage-table: study 4's table straight from stored storage runs (computed in analysis/storage.py).

Rows are the modes, columns the environments, one table per file configuration;
see analysis/storage.py for what each figure is. This module only renders.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich import box

from ..errors import UsageError
from ..words import counted
from .common import DbOption, JsonOption, Table, app, console, escape, note_experiment, open_store, print_json

if TYPE_CHECKING:
    from ..analysis.storage import StorageTable


def human_bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return str(n)
    for shift, unit in ((40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift:
            v = n / (1 << shift)
            return f"{v:g} {unit}" if v == int(v) else f"{v:.1f} {unit}"
    return f"{n} bytes"


def title_of(t: StorageTable) -> str:
    p = t.params
    extra = [k for k in ("direct", "fdatasync", "drop_caches") if p.get(k)]
    return (f"storage: {human_bytes(p['size'])} file, {human_bytes(p['block_size'])} blocks"
            + (f", {', '.join(extra)}" if extra else ""))


def render(t: StorageTable, what: str) -> Table:
    from ..analysis.storage import MODES, human_time
    heads = {"mean": "mean time per pass", "pass": "per pass p50 / p99", "block": "per block p50 / p99"}
    table = Table(title=heads[what], box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("")
    for c in t.columns:
        table.add_column(escape(c), justify="right")
    for variant, label in MODES:
        row = []
        present = False
        for c in t.columns:
            cell = t.cells.get((variant, c))
            present |= cell is not None
            if cell is None:
                row.append("")
            elif what == "mean":
                row.append(human_time(cell.pass_mean))
            elif what == "pass":
                row.append("-" if cell.pass_p50 is None else f"{human_time(cell.pass_p50)} / {human_time(cell.pass_p99)}")
            else:
                row.append("-" if cell.block_p50 is None else
                           f"{human_time(cell.block_p50)} / {human_time(cell.block_p99)}")
        if present:
            table.add_row(label, *row)
    return table


@app.command("storage-table")
def storage_table(
    runs: Annotated[Optional[list[int]], typer.Argument(metavar="[RUN]...", help="Storage run ids [default: all].")] = None,
    experiment: Annotated[Optional[str], typer.Option(help="Only the runs of this experiment (id or name).")] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Study 4's table: mean time per pass for write(sync) / write / read in each environment, and percentiles."""
    from ..analysis.select import experiment_id
    from ..analysis.storage import build_tables
    if runs and experiment:
        raise UsageError("give either --experiment or run ids, not both")
    store = open_store(db)
    if runs:
        found = store.runs(ids=list(runs))
        missing = sorted(set(runs) - {r.id for r in found})
        if missing:
            raise UsageError(f"no run {missing[0]} in store {store.url} (see `rtscope runs --workload storage`)")
        other = [r for r in found if r.workload != "storage"]
        if other:
            raise UsageError(f"run {other[0].id} is a {other[0]['workload']} run, not storage")
    else:
        note_experiment(store, experiment)
        exp = experiment_id(store, experiment) if experiment else None
        found = store.runs(workload="storage", experiment_id=exp)
    if not found:
        where = f" of experiment {experiment}" if experiment else ""
        raise UsageError(f"no storage runs{where} in store {store.url}; measure some first (docs/storage.md)")
    tables = build_tables(store, found)
    if json_out:
        print_json([{"params": t.params, "columns": t.columns,
                     "cells": [{"variant": v, "column": c, **cell.to_dict()} for (v, c), cell in t.cells.items()]}
                    for t in tables])
        return
    for t in tables:
        console.print(f"[bold]{escape(title_of(t))}[/] ({counted(sum(len(c.runs) for c in t.cells.values()), 'run')})")
        for what in ("mean", "pass", "block"):
            console.print(render(t, what))
    console.print("mean per pass: rtprobe's mean pass time; fio: job runtime / loops (ms resolution: '-' when fio ran "
                  "less than 100 ms). "
                  "Percentiles: per pass, linear interpolation (type 7); per block, rtprobe's histogram "
                  "(upper bucket edge) and fio's json+ bins.", style="dim")
