"""rtscope show: one stored run's figures, settings, machine, worst case and causes."""

from __future__ import annotations

from typing import Annotated

import typer

from ..words import tool_text
from .common import (DbOption, JsonOption, Table, app, console, escape, open_store, print_json, settings_text,
                     stats_table, with_unit)


@app.command()
def show(run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see `rtscope runs`).")],
         db: DbOption = None, json_out: JsonOption = False) -> None:
    """Show a run: the study's AVG MAX VAR STDEV, percentiles, settings, machine state and worst case (the
    largest sample and the tail's bound at p = 1e-9 per sample, or the check that refused it)."""
    from .. import sysinfo
    from ..analysis import explain_shares, distribution, stats, threads
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
    console.print(f"[bold]run {run.id}[/]: {escape(run.label)}  tool {escape(tool_text(run.tool, run.tool_version))}")
    console.print(f"settings: {escape(settings_text(run['settings'], run))}")
    console.print(f"params:   {escape(settings_text(run['params']))}")
    if isinstance(pairing := run.header.get("pairing"), dict) and pairing.get("id"):   # an interleaved run's arm
        arm = f"arm {pairing['arm'] + 1} of {pairing['arms']} of run {pairing['id']}"
        if pairing.get("design") == "duet":
            console.print(f"design:   duet, {arm}: side by side with the other arms, on CPU {pairing['cpu']}")
        else:
            console.print(f"design:   {pairing.get('design', 'interleaved')}, {arm}: {len(pairing['blocks'])} blocks "
                          f"of {pairing['block_samples']} samples (`rtscope export` gives each sample's block)")
    if "kernel_release" in env:
        console.print(f"machine:  {escape(machine_text(env))}")
    shown, scale = display_unit(run.primary["unit"])
    table = Table(title=f"{run.primary['name']} in {shown}; percentiles: "
                        f"{dist.percentile_definition if dist else stats.PERCENTILE_DEFINITION}")
    table.add_column("statistic")
    table.add_column("value", justify="right")
    reported = dist.reported if dist else None
    for key, head in DISPLAY:
        value = "not available" if reported and st.get(key) is None else fmt(key, st.get(key), scale)
        # the title gives the unit; a variance's differs
        table.add_row(head + (with_unit(key, shown) if key == "var" else ""), value)
    imported(run)
    title, table.title = table.title, None   # a line of its own: a table of two columns would fold it narrow
    console.print(escape(title), style="bold")
    console.print(table)
    if reported:
        stated = ", ".join(dict(DISPLAY)[k] for k in REPORTED_KEYS if reported.get(k) is not None)
        console.print(f"{stated}: {escape(run.tool)}'s own figures ({escape(str(reported.get('source', 'its output')))})")
    if bucket is not None:
        console.print(f"resolution: histogram buckets of {fmt('min', bucket, scale)} {shown}; percentiles are "
                      f"{dist.percentile_definition}, variance from bucket midpoints")
    if run.primary["unit"] == "ns":
        from ..analysis.tail_bound import run_worst_case
        from .tail import worst_case_text
        console.print(worst_case_text(run_worst_case(store, run, dist), "ns", f"rtscope tail {run.id}"),
                      highlight=False)
    if parts:
        rows = [(f"thread {p.thread}" + ("" if p.cpu is None else f" (CPU {p.cpu})"), p.stats) for p in parts]
        console.print(stats_table(f"per thread, {run.primary['name']}", [*rows, ("whole run", st)],
                                  run.primary["unit"]))
    for name, count in (run.trailer.get("counters") or {}).items():
        console.print(f"{name}: {count:,}" if isinstance(count, int) else f"{name}: {count}")
    why = explain_shares.top_line(store, run)
    if why:
        console.print(f"causes:   {escape(why)} (rtscope explain {run.id})", soft_wrap=True)
    for note in run.trailer.get("notes", []):   # what the tool's output says of itself: notes, not warnings
        console.print(f"note: {escape(note)}")
    for warning in sysinfo.warnings(env):       # the machine's state that makes the numbers untrustworthy
        console.print(f"[yellow]warning:[/] {escape(warning)}")


def imported(run) -> None:
    """An import said as one: the file, how its start is known, and the figures that are the tool's own."""
    source = run.header.get("imported_from")
    if source is None:
        return
    start = {"file modified": f"{run.started_at} (the file's modification time: the tool records no start)",
             "not recorded": "not recorded"}.get(run.started_from, run.started_at)
    console.print(f"imported: {escape(str(source))}; started {escape(start)}")
    if own := run.trailer.get("own_figures"):
        console.print(f"{escape(run.tool)}'s own figures: {escape(str(own))}")


def machine_text(env: dict) -> str:
    """The machine record in a line, of what it holds (an import's file may record only the kernel)."""
    cpus = (f"{env.get('cpu_model') or '?'} × {env['cpu_count']}" if env.get("cpu_count") else
            env.get("cpu_model") or env.get("machine"))
    board = env.get("board") or ("-" if "cpu_count" in env else None)
    return ", ".join(p for p in (cpus, f"kernel {env['kernel_release']} ({env.get('preemption') or '?'})",
                                  None if board is None else f"board {board}", env.get("note")) if p)
