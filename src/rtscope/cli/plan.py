"""`rtscope plan SPEC --detect 5%`: runs × samples per run a spec needs, from its pilot runs (docs/plan.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .. import paths
from ..analysis.defaults import ALPHA, METRICS
from .common import DbOption, JsonOption, Table, app, console, err_console, escape, note_experiment, print_json


def duration_text(ns: float | None) -> str:
    if ns is None:
        return "-"
    s = ns / 1e9
    if s < 60:
        return f"{s:.3g} s"
    if s < 3600:
        return f"{s / 60:.3g} min"
    return f"{s / 3600:.3g} h"


@app.command()
def plan(
    spec: Annotated[Path, typer.Argument(help="The experiment spec (TOML) to size; its pilot runs are the latest "
                                              "experiment of the spec's name in the store.")],
    detect: Annotated[str, typer.Option("--detect", help="The relative change to detect: 5% or 0.05.")] = "5%",
    metric: Annotated[str, typer.Option(help=f"The metric compared: {', '.join(METRICS)}.")] = "mean",
    alpha: Annotated[float, typer.Option(
        "--alpha", help="Significance level of compare's two-sided tests, after Holm's correction.")] = ALPHA,
    power: Annotated[float, typer.Option("--power", help="Probability of detecting the change.")] = 0.8,
    experiment: Annotated[Optional[str], typer.Option(help="Plan from this experiment (id or name) instead of "
                                                           "the latest of the spec's name.")] = None,
    upper: Annotated[Optional[float], typer.Option(
        "--upper", help="Size with this upper confidence limit of the pilot's between-run variance (e.g. 0.8) "
                        "instead of its estimate: a pilot of few runs underestimates it half the time.")] = None,
    tests: Annotated[Optional[int], typer.Option(
        "--tests", help="How many tests share α in the compare the plan is for (Holm; each planned at α/TESTS, "
                        "its worst case) [default: 5 metrics × (cells − 1) per block]; 1: one test at α.")] = None,
    write: Annotated[Optional[Path], typer.Option("--write", help="Write the sized spec to this file.")] = None,
    db: DbOption = None, json_out: JsonOption = False,
) -> None:
    """How many runs × samples per run a spec needs to detect a change, and what that costs in wall time."""
    from ..analysis import plan_sizing
    from ..errors import UsageError
    from ..experiment import plan_spec
    from ..experiment.spec import read_text
    from .common import open_store
    change = plan_sizing.parse_detect(detect)
    plan_sizing.check_options(metric, alpha, power)
    if upper is not None and not 0.5 <= upper < 1:
        raise UsageError(f"--upper must be at least 0.5 and below 1 (e.g. 0.8), got {upper}")
    if tests is not None and tests < 1:
        raise UsageError(f"--tests must be at least 1, got {tests}")
    path = paths.find_spec(spec)
    if write is not None and write.resolve() == Path(path).resolve():
        raise UsageError(f"--write {write} would overwrite the spec itself; name another file")
    store = open_store(db)
    note_experiment(store, experiment)
    sp = plan_spec.plan_spec(store, path, change, metric, alpha=alpha, power=power, experiment=experiment,
                             upper=upper, tests=tests)
    if write is not None and sp.feasible:
        plan_spec.write_sized(read_text(path), sp, write)
    if json_out:
        print_json(sp.to_json())
    else:
        print_plan(sp)
    if write is not None and not sp.feasible:
        err_console.print(f"[yellow]not written:[/] {escape(str(write))}: no plan reaches {sp.power:.0%} power "
                          f"within {plan_sizing.MAX_RUNS} runs per configuration")


def print_plan(sp) -> None:
    from rich import box

    from ..analysis.results import display_unit, fmt
    from ..analysis import plan_sizing
    console.print(f"[bold]plan for {escape(sp.spec)}[/]: detect a {sp.detect:.3g} ({sp.detect:.1%}) change of "
                  f"{sp.metric} with {sp.power:.0%} power, two-sided α = {sp.alpha:g} over {sp.tests} tests "
                  f"(Holm's worst "
                  f"case: {sp.test_alpha:.3g} a test); from experiment "
                  f"{sp.experiment_id} ({escape(sp.experiment)}), scale {sp.scale or '-'}" +
                  (f"; σ_b at its {sp.upper:.0%} upper confidence limit" if sp.upper else ""))
    table = Table(box=box.SIMPLE_HEAD, title=f"per configuration: {sp.metric}; σ_b: SD of its per-run values "
                  "between runs, σ_w: "
                  "SE within one pilot run; runs × samples alone and at its block's",
                  title_justify="left", pad_edge=False)
    for head in ("configuration", "value", "σ_b", "σ_w", "alone", "in block", "power", "wall"):
        table.add_column(head, justify="left" if head == "configuration" else "right")
    costs = []
    for c in sp.configs:
        comp = c.components
        _, scale = display_unit(c.runs[0].primary.get("unit", "ns") if c.runs else "ns")
        own, p = c.own, c.common or c.own
        alone = f"{own.runs} × {own.samples:,}" if own.feasible else f">{plan_sizing.MAX_RUNS} runs"
        block = f"{p.runs} × {p.samples:,}" if c.common is not None and p.runs else "-"
        table.add_row(escape(c.label), fmt(sp.metric, comp.value, scale), fmt(sp.metric, c.between_var ** 0.5, scale),
                      fmt(sp.metric, comp.within_se, scale), alone, block, f"{p.power:.0%}", duration_text(p.wall_ns))
        costs.append(f"{escape(c.label)}: {comp.runs} pilot runs × {comp.samples_per_run:,.0f} samples; a run "
                     f"costs {c.cost.start_ns / 1e9:.3g} s + n × {c.cost.sample_ns / 1e6:.3g} ms "
                     f"({escape(c.cost.how)})")
    console.print(table)
    unit = next((display_unit(c.runs[0].primary.get("unit", "ns"))[0] for c in sp.configs if c.runs), "")
    console.print(f"values in {unit}; wall: runs × (start + samples × sample time)", style="dim")
    for line in costs:
        console.print(line, style="dim")
    for b in sp.blocks:
        if b.runs is None:
            continue
        change = f"repetitions = {b.runs}" + (f", {b.param} = {b.param_value}" if b.param else "")
        console.print(f"block {b.block + 1} ({b.workload}, {b.cells} cells): [bold]{b.runs} runs × {b.samples:,} "
                      f"samples[/] per configuration; {b.runs * b.cells} runs, {duration_text(b.wall_ns)}; in "
                      f"the spec: {change}")
    if sp.feasible:
        console.print(f"[bold]whole spec:[/] {sum(b.runs * b.cells for b in sp.blocks)} runs, "
                      f"{duration_text(sp.wall_ns)} on the pilot's target")
        if sp.written:
            console.print(f"wrote {escape(sp.written)} (experiment {escape(sp.sized_name or '')}): "
                          f"`{escape(sp.command())}`")
        else:
            console.print("to run it: `rtscope plan ... --write SIZED.toml`, then `rtscope run SIZED.toml`")
    else:
        console.print(f"[bold red]not feasible[/] within {plan_sizing.MAX_RUNS} runs per configuration")
    for c in sp.configs:
        for note in (c.own.notes if c.own else []):
            console.print(f"note: {escape(c.label)}: {escape(note)}")
    for b in sp.blocks:
        for note in b.notes:
            console.print(f"note: {escape(note)}")
    for note in sp.notes:
        console.print(f"[yellow]warning:[/] {escape(note)}")
