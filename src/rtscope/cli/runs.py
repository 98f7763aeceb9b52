"""Commands over stored runs: runs, show, export."""

from __future__ import annotations

import csv
import io
import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from .. import sysinfo
from ..analysis import stats
from ..analysis import causes, distribution, threads
from ..analysis.results import DISPLAY, display_unit, fmt
from ..fileio import write_atomic
from ..store import Run
from .common import DbOption, JsonOption, app, console, escape, open_store, print_json, settings_text


def run_summary(run: Run) -> dict:
    return {"id": run.id, "workload": run.workload, "variant": run.variant, "runtime": run.runtime,
            "settings": run.settings, "params": run.params, "n_samples": run.n_samples,
            "started_at": run.started_at, "finished_at": run.finished_at, "tags": run.tags,
            "experiment_id": run.experiment_id, "cell": run.cell, "repetition": run.repetition}


@app.command("runs")
def list_runs(
    db: DbOption = None,
    workload: Annotated[Optional[str], typer.Option(help="Only runs of this workload.")] = None,
    experiment: Annotated[Optional[int], typer.Option(help="Only runs of this experiment id.")] = None,
    json_out: JsonOption = False,
) -> None:
    """List stored runs."""
    store = open_store(db)
    found = store.runs(workload=workload, experiment_id=experiment)
    if json_out:
        print_json([run_summary(r) for r in found])
        return
    table = Table(title=f"runs in {store.url}")
    for col in ("id", "workload", "variant", "runtime", "settings", "samples", "started (UTC)", "experiment"):
        table.add_column(col, justify="right" if col in ("id", "samples") else "left")
    for r in found:
        table.add_row(str(r.id), r.workload, r.variant, r.runtime, escape(settings_text(r.settings)),
                      f"{r.n_samples:,}", r.started_at[:19], str(r.experiment_id or ""))
    console.print(table)
    if not found:
        console.print("no runs yet: try `rtscope demo`")


def stats_table(title: str, rows: list[tuple[str, dict]], unit: str, keys=DISPLAY) -> Table:
    shown, scale = display_unit(unit)
    table = Table(title=title)
    table.add_column("run", no_wrap=True)
    for key, head in keys:
        table.add_column(head + ("" if key == "n" else f" ({shown}²)" if key == "var" else f" ({shown})"),
                         justify="right")
    for label, st in rows:
        table.add_row(escape(label), *(fmt(k, st.get(k), scale) for k, _ in keys))
    return table


@app.command()
def show(run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see `rtscope runs`).")],
         db: DbOption = None, json_out: JsonOption = False) -> None:
    """Show a run: the study's AVG MAX VAR STDEV, percentiles, settings and machine state."""
    store = open_store(db)
    run = store.get_run(run_id)
    dist = distribution.of_run(store, run)
    st = dist.stats if dist else stats.summarize([])
    bucket = dist.resolution if dist else None
    parts = threads.breakdown(store, run)
    if json_out:
        summary = run_summary(run)
        summary.update(environment=run.machine, trailer=run.trailer, tool=run.tool,
                       tool_version=run.tool_version, columns=run.columns,
                       percentile_definition=stats.PERCENTILE_DEFINITION, unit=run.primary["unit"])
        print_json({"run": summary, "settings": run.settings, "stats": st, "resolution": bucket,
                    "threads": [p.to_json() for p in parts]})
        return
    env = run.machine
    console.print(f"[bold]run {run.id}[/]: {escape(run.label)}  tool {escape(run['tool'])} {escape(run['tool_version'])}")
    console.print(f"settings: {escape(settings_text(run['settings']))}")
    console.print(f"params:   {escape(settings_text(run['params']))}")
    if "kernel_release" in env:
        console.print(f"machine:  {escape(env.get('cpu_model', '?'))} × {env.get('cpu_count')}, kernel "
                      f"{escape(env['kernel_release'])} ({env.get('preemption')}), board {escape(str(env.get('board') or '-'))}")
    shown, scale = display_unit(run.primary["unit"])
    table = Table(title=f"{run.primary['name']} in {shown}; percentiles: {stats.PERCENTILE_DEFINITION}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, head in DISPLAY:
        table.add_row(head + (" (²)" if key == "var" else ""), fmt(key, st.get(key), scale))
    console.print(table)
    if bucket is not None:
        console.print(f"resolution: histogram buckets of {fmt('min', bucket, scale)} {shown}; percentiles are the "
                      "upper edge of the bucket that holds the rank, variance from bucket midpoints")
    if parts:
        rows = [(f"thread {p.thread}" + ("" if p.cpu is None else f" (CPU {p.cpu})"), p.stats) for p in parts]
        console.print(stats_table(f"per thread, {run.primary['name']}", [*rows, ("whole run", st)],
                                  run.primary["unit"]))
    for name, count in (run.trailer.get("counters") or {}).items():
        console.print(f"{name}: {count:,}" if isinstance(count, int) else f"{name}: {count}")
    why = causes.top_line(store, run)
    if why:
        console.print(f"causes:   {escape(why)} (rtscope explain {run.id})", soft_wrap=True)
    for note in run.trailer.get("notes", []) + sysinfo.warnings(env):
        console.print(f"[yellow]warning:[/] {escape(note)}")


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
    return ["index", *cols], [np.arange(n), *arrays]


@app.command()
def export(
    run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id.")],
    fmt_: Annotated[ExportFormat, typer.Option("--format", help="csv: one row per sample; json: columns.")] = ExportFormat.csv,
    units: Annotated[Units, typer.Option(help="ns: as stored; us: nerves_rt_perf style count,time,... in µs.")] = Units.ns,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="File to write [default: stdout].")] = None,
    db: DbOption = None,
) -> None:
    """Export every raw sample of a run."""
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
