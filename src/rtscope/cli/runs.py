"""Commands over stored runs: runs, show, export."""

from __future__ import annotations

import csv
import io
import json
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.console import Group

from ..analysis.documents import run_summary
from .common import DbOption, JsonOption, Table, app, console, escape, open_store, print_json, settings_text

if TYPE_CHECKING:
    from ..store import Run


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
                      f"{r.n_samples:,}", r.started_at, str(r.experiment_id or ""))
    console.print(table)
    if not found:
        console.print("no runs yet: try `rtscope demo`")


def with_unit(key: str, shown: str, sep: str = " ") -> str:
    """A statistic's header suffix for its display unit `shown` (analysis.results.display_unit): ` (µs)`, a
    variance's ` (µs²)`; nothing for a count, nor for a unitless quantity (never an empty `()` or `(²)`)."""
    if key == "n" or not shown:
        return ""
    return f"{sep}({shown}²)" if key == "var" else f"{sep}({shown})"


def stats_table(title: str, rows: list[tuple[str, dict]], unit: str, keys=None, width: int | None = None):
    """One table of figures per row label (`keys`: the (statistic, header) columns, by default
    analysis.results.DISPLAY), for a terminal of `width` columns (the console's by default).

    Figures and their headers always show whole: labels fold to make room; where the figures still do not fit,
    the headers put their unit on a second line, then the units move into the title, and last the columns go
    into as many tables as needed, one under the other, each with the labels."""
    from ..analysis.results import DISPLAY, display_unit, fmt
    keys = DISPLAY if keys is None else keys
    width = width or console.width
    shown, scale = display_unit(unit)
    figures = {k: [fmt(k, st.get(k), scale) for _, st in rows] for k, _ in keys}
    longest = max((len(label) for label, _ in rows), default=3)

    def heads(unit_sep: str | None) -> dict[str, str]:
        return {k: head + ("" if unit_sep is None else with_unit(k, shown, unit_sep)) for k, head in keys}

    def column_width(key: str, head: str) -> int:
        return max(len(line) for line in [*figures[key], *head.split("\n")])

    def need(chunk, named: dict[str, str]) -> int:  # 3 characters of border and padding per column
        return label_width + sum(column_width(k, named[k]) for k in chunk) + 3 * (len(chunk) + 1) + 1

    # The first layout that fits: roomy labels before narrow ones, units in the headers before the title.
    for label_width, unit_sep in ((w, sep) for w in (min(longest, 24), min(longest, 12)) for sep in (" ", "\n", None)):
        named = heads(unit_sep)
        if need(named, named) <= width:
            break
    title_unit = "" if unit_sep or not shown else f" (in {shown}{f', VAR in {shown}²' if 'var' in named else ''})"
    chunks: list[list[str]] = [[]]
    for key in named:
        if chunks[-1] and need([*chunks[-1], key], named) > width:
            chunks.append([])
        chunks[-1].append(key)
    tables = []
    for chunk in chunks:
        table = Table(title=(title + title_unit) if chunk is chunks[0] else None)
        table.add_column("run", min_width=label_width)
        for key in chunk:
            table.add_column(named[key], justify="right", min_width=column_width(key, named[key]))
        for i, (label, _) in enumerate(rows):
            table.add_row(escape(label), *(figures[k][i] for k in chunk))
        tables.append(table)
    return tables[0] if len(tables) == 1 else Group(*tables)


@app.command()
def show(run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see `rtscope runs`).")],
         db: DbOption = None, json_out: JsonOption = False) -> None:
    """Show a run: the study's AVG MAX VAR STDEV, percentiles, settings, machine state and worst case (the
    largest sample and the tail's bound at p = 1e-9 per sample, or the check that refused it)."""
    from .. import sysinfo
    from ..analysis import causes, distribution, stats, threads
    from ..analysis.distribution import REPORTED_KEYS
    from ..analysis.documents import show_document
    from ..analysis.results import DISPLAY, display_unit, fmt
    store = open_store(db)
    run = store.get_run(run_id)
    dist = distribution.of_run(store, run)
    st = dist.stats if dist else stats.summarize([])
    bucket = dist.resolution if dist else None
    if json_out:
        print_json(show_document(store, run, dist))
        return
    parts = threads.breakdown(store, run)
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
    reported = dist.reported if dist else None
    for key, head in DISPLAY:
        value = "not available" if reported and st.get(key) is None else fmt(key, st.get(key), scale)
        # the title gives the unit; a variance's differs
        table.add_row(head + (with_unit(key, shown) if key == "var" else ""), value)
    console.print(table)
    if reported:
        stated = ", ".join(dict(DISPLAY)[k] for k in REPORTED_KEYS if reported.get(k) is not None)
        console.print(f"{stated}: {escape(run.tool)}'s own figures ({escape(str(reported.get('source', 'its output')))})")
    if bucket is not None:
        console.print(f"resolution: histogram buckets of {fmt('min', bucket, scale)} {shown}; percentiles are the "
                      "upper edge of the bucket that holds the rank, variance from bucket midpoints")
    if run.primary["unit"] == "ns":
        from ..analysis.tail import run_worst_case
        from .tail import worst_case_text
        console.print(worst_case_text(run_worst_case(store, run, dist), "ns", f"rtscope tail {run.id}"),
                      highlight=False)
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
