"""rtscope tail: the worst case with a bound, for one run or one configuration's runs (docs/tail.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ..errors import UsageError
from .common import DbOption, JsonOption, Table, app, console, escape, note_experiment, open_store, print_json

if TYPE_CHECKING:
    from ..analysis.tail_bound import Tail, WorstCase

RunArg = Annotated[Optional[int], typer.Argument(metavar="RUN", help="The run to analyse (see `rtscope runs`).",
                                                show_default=False)]
Experiment = Annotated[Optional[str], typer.Option(help="A configuration's runs of this experiment (id or name).")]
Where = Annotated[Optional[list[str]], typer.Option(
    "--where", help="Only runs where setting or parameter NAME=VALUE (repeatable); the selection must leave one "
                    "configuration.")]
RunIds = Annotated[Optional[list[int]], typer.Option("--run", help="Only this run id (repeatable).")]


@app.command("tail")
def tail_cmd(run: RunArg = None, experiment: Experiment = None, where: Where = None, run_ids: RunIds = None,
             db: DbOption = None, json_out: JsonOption = False) -> None:
    """The latency exceeded with probability p per sample (1e-3 … 1e-12), with 95 % intervals, from an
    extreme-value fit of the tail; claimed only when independence, stationarity (and, for several runs, their
    tails' homogeneity) and the fit's test pass, else refused with the failed check."""
    from ..analysis import tail_bound
    store = open_store(db)
    if run is not None and (experiment or where or run_ids):
        raise UsageError("give a RUN, or select a configuration's runs with --experiment/--where/--run, not both")
    if run is not None:
        found = store.runs(ids=[run])
        if not found:
            ids = [r.id for r in store.runs()]
            shown = ", ".join(map(str, ids[:20])) + (f" … ({len(ids)} runs)" if len(ids) > 20 else "")
            raise UsageError(f"no run {run} in store {store.url}; valid runs: {shown or 'none (the store is empty)'}")
        result = tail_bound.of_run(store, found[0])
    elif experiment or where or run_ids:
        from ..analysis.select import Selection, select_runs
        note_experiment(store, experiment)
        result = tail_bound.of_runs(store, select_runs(store, Selection.from_cli(experiment, where=where,
                                                                           run_ids=run_ids)))
    else:
        raise UsageError("name a RUN (see `rtscope runs`) or a configuration: --experiment ID [--where NAME=VALUE]")
    if json_out:
        print_json(result.to_json())
    else:
        show(result)


def _us(ns: float | None) -> str:
    if ns is None:
        return "unbounded"
    v = ns / 1000
    return f"{v:,.2f}" if abs(v) < 1e5 else f"{v:.4g}"


def show(t: Tail) -> None:
    what = f"run {t.subject['run']}" if "run" in t.subject else f"configuration {t.subject['configuration']}"
    console.print(f"[bold]tail of {escape(what)}[/]: {t.n:,} samples", soft_wrap=False)
    console.print("checks (refused when p < 0.01 and the effect is material; docs/tail.md):")
    for c in t.checks:
        mark = {True: "[green]pass[/]", False: "[bold red]FAIL[/]", None: "[yellow]n/a [/]"}[c.passed]
        figures = "" if c.p is None else f" (statistic {c.statistic:.3g}, p {c.p:.2g})"
        console.print(f"  {mark} {c.name}{figures}: {escape(c.why)}")
    if not t.claimed:
        console.print(f"[bold red]no bound claimed[/]: the {escape(t.failed.name)} check failed (above); "
                      "no number is given.")
        _notes(t)
        return
    f = t.fit
    console.print(f"model: generalised Pareto over {_us(f.ex.u)} µs (the {f.quantile:g} quantile), "
                  f"{f.ex.k:,} exceedances; {f.gof_test} p {f.gof_p:.2g}")
    console.print(f"shape {f.shape:+.3f} ± {1.96 * f.shape_se:.3f}: {escape(t.shape_meaning)}")
    from rich import box
    console.print("latency (µs) exceeded with probability p per sample (95 % profile likelihood):")
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for head in ("p", "exceeded", "95 % interval", "P(>) per hour", "+samples for ½"):
        table.add_column(head, justify="right")
    for lv in t.levels:
        table.add_row(f"{lv.p:.0e}", _us(lv.value), f"{_us(lv.ci[0])}..{_us(lv.ci[1])}",
                      "-" if lv.per_hour is None else f"{lv.per_hour:.2g}",
                      "-" if lv.more_samples is None else f"{lv.more_samples:,}")
    console.print(table)
    console.print("P(>) per hour: the chance that a sample exceeds the level within an hour at the measured rate"
                  + (f" ({t.rate_hz:,.0f} samples/s)" if t.rate_hz else " (unknown: -)")
                  + "; +samples for ½: how many more samples would halve the interval.", style="dim")
    if t.gev is not None:
        g = t.gev
        at = {p: g.level(p) for p in (1e-5, 1e-9) if p in {lv.p for lv in t.levels}}
        console.print(f"cross-check, block maxima ({g.blocks} blocks of {g.block:,}): generalised extreme value "
                      f"shape {g.shape:+.3f}, Cramér–von Mises p {g.gof_p:.2g}; "
                      + ", ".join(f"p {p:.0e}: {_us(v)} µs" for p, v in at.items()), style="dim")
    _notes(t)


def _notes(t: Tail) -> None:
    for note in t.notes:
        console.print(f"note: {escape(note)}", style="dim")


def worst_case_text(wc: WorstCase, unit: str, details: str) -> str:
    """One line (rich markup): the largest sample seen and the bound at p = 1e-9 per sample with its 95 %
    interval and its chance within an hour, or why there is none; `details`: the command that says more."""
    from ..analysis.results import display_unit, fmt
    from ..analysis.tail_bound import BOUND_P, NOT_CLAIMED
    shown, scale = display_unit(unit)
    seen = "max -" if wc.max is None else f"max {fmt('max', wc.max, scale)} {shown}"
    text = f"[bold]worst case[/]: {seen} seen in {wc.n:,} samples; "
    lv = wc.level
    if lv is None:
        return text + f"no bound: {escape(wc.short_reason or NOT_CLAIMED)} ({escape(details)})"
    hi = "unbounded" if lv.ci[1] is None else fmt("max", lv.ci[1], scale)
    hour = "" if lv.per_hour is None else f", P(>) per hour {lv.per_hour:.2g}"
    untested = (f"; assumes {' and '.join(wc.untested)} (not tested: no sample order)" if wc.untested else "")
    return text + (f"bound at p = {BOUND_P:g} per sample {fmt('max', lv.value, scale)} {shown} (95 % "
                   f"{fmt('max', lv.ci[0], scale)}..{hi}{hour}){untested} ({escape(details)})")
