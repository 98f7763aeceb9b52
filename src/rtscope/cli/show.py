"""rtscope show: one stored run's figures, settings, machine, worst case and causes."""

from __future__ import annotations

from typing import Annotated

import typer

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
    console.print(f"[bold]run {run.id}[/]: {escape(run.label)}  tool {escape(run['tool'])} {escape(run['tool_version'])}")
    console.print(f"settings: {escape(settings_text(run['settings'], run))}")
    console.print(f"params:   {escape(settings_text(run['params']))}")
    if isinstance(pairing := run.header.get("pairing"), dict) and pairing.get("id"):   # an interleaved run's arm
        console.print(f"design:   {pairing.get('design', 'interleaved')}, arm {pairing['arm'] + 1} of {pairing['arms']} "
                      f"of run {pairing['id']}: {len(pairing['blocks'])} blocks of {pairing['block_samples']} samples "
                      "(`rtscope export` gives each sample's block)")
    if "kernel_release" in env:
        console.print(f"machine:  {escape(env.get('cpu_model', '?'))} × {env.get('cpu_count')}, kernel "
                      f"{escape(env['kernel_release'])} ({env.get('preemption')}), board {escape(str(env.get('board') or '-'))}")
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
    for note in run.trailer.get("notes", []) + sysinfo.warnings(env):
        console.print(f"[yellow]warning:[/] {escape(note)}")
