"""Commands that analyse stored runs: compare, recommend, report."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.console import Console

from ..analysis.defaults import ALPHA, GOALS, RESAMPLES, SEED
from .common import DbOption, JsonOption, Table, app, console, err_console, escape, open_store, print_json

if TYPE_CHECKING:
    from ..analysis.compare import ComparisonSet
    from ..analysis.select import Selection

Experiment = Annotated[Optional[str], typer.Option(help="Only runs of this experiment (id or name).")]
Workload = Annotated[Optional[str], typer.Option(help="Only runs of this workload.")]
Variant = Annotated[Optional[str], typer.Option(help="Only runs of this variant.")]
Runtime = Annotated[Optional[str], typer.Option(help="Only runs in this runtime.")]
Tag = Annotated[Optional[list[str]], typer.Option("--tag", help="Only runs with this tag (repeatable: all of them).")]
Where = Annotated[Optional[list[str]], typer.Option(
    "--where", help="Only runs where setting or parameter NAME=VALUE (repeatable; the same NAME twice: either "
                    "value; NAME= : runs without it).")]
RunIds = Annotated[Optional[list[int]], typer.Option("--run", help="Only this run id (repeatable).")]
BaselineOpt = Annotated[Optional[list[str]], typer.Option(
    "--baseline", help="The configuration others are compared against: NAME=VALUE of a setting, parameter, "
                       "workload, variant or runtime (repeatable), or `defaults` (no settings).")]
AlphaOpt = Annotated[float, typer.Option("--alpha", help="Significance level after Holm's correction.")]
ResamplesOpt = Annotated[int, typer.Option("--resamples", help="Bootstrap resamples per interval.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the bootstrap (same data, same intervals).")]
PerThreadOpt = Annotated[bool, typer.Option(
    "--per-thread", help="Multi-thread latency runs: take each run's worst thread (highest maximum) instead of "
                         "all its threads.")]

# The terminal is narrow: n.s. = no significant difference (the legend is printed below the tables).
SHORT_VERDICT = {"better": "better", "worse": "worse", "no significant difference": "n.s.", "not tested": "untested"}
VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "no significant difference": "dim",
                 "not tested": "yellow"}


def _selection(experiment, workload, variant, runtime, tag, where, run) -> Selection:
    from ..analysis.select import Selection
    return Selection.from_cli(experiment, workload, variant, runtime, tag, where, run)


def _compare(db, sel: Selection, baseline, alpha, resamples, seed, per_thread=False) -> ComparisonSet:
    from ..analysis.documents import comparison_set
    return comparison_set(open_store(db), sel, baseline, alpha=alpha, resamples=resamples, seed=seed,
                          per_thread=per_thread)


def cause_table(rows) -> Table:
    """Per configuration, the cause shares of its explained samples above the baseline's p99 (setting explain)."""
    kinds = list(dict.fromkeys(r.kind for c in rows for r in c.kinds))
    table = Table(title="why: the excess above the baseline's p99 of the explained samples, per cause kind "
                        "(share; µs per sample)", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("configuration")
    table.add_column("p99 of baseline", justify="right")
    table.add_column("samples", justify="right")
    for kind in kinds:
        table.add_column(kind, justify="right")
    for c in rows:
        cells = []
        for kind in kinds:
            row = next((r for r in c.kinds if r.kind == kind), None)
            cells.append("-" if row is None else f"{row.share:.0%}; {c.per_sample_ns(kind) / 1000:,.1f}")
        table.add_row(escape(c.label), f"{c.reference_ns / 1000:,.1f} µs", str(c.samples), *cells)
    return table


def comparison_table(cs: ComparisonSet, k) -> Table:
    """One comparison: a row per metric."""
    from ..analysis.recommend import change, p_text
    from ..analysis.results import display_unit, fmt
    shown, scale = display_unit(k.cell.config.unit)
    labels = cs.labels
    title = f"[bold]{escape(labels[k.cell.config])}[/] vs {escape(labels[k.base.config])}"
    caption = (f"values in {shown}; {len(k.cell.runs)} vs {len(k.base.runs)} runs, "
               f"{len(k.cell.samples):,} vs {len(k.base.samples):,} samples")
    if k.cliffs_delta is not None:
        caption += f"; Mann-Whitney p {p_text(k.mann_whitney_p)}, Cliff's δ {k.cliffs_delta:+.2f} ({k.magnitude})"
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, title_justify="left", caption_justify="left",
                  pad_edge=False)
    for head, right in (("metric", False), ("baseline", True), ("value", True), ("change", True),
                        ("95% CI of Δ", True), ("p Holm", True), ("verdict", False)):
        table.add_column(head, justify="right" if right else "left")
    for r in k.rows:
        ci = f"{fmt(r.metric, r.ci[0], scale)}..{fmt(r.metric, r.ci[1], scale)}" if r.ci else "-"
        verdict = f"[{VERDICT_STYLE[r.verdict]}]{SHORT_VERDICT[r.verdict]}[/]" + ("*" if r.note else "")
        table.add_row(r.metric, fmt(r.metric, r.baseline, scale), fmt(r.metric, r.value, scale), change(r.ratio),
                      ci, p_text(r.p_holm), verdict)
    return table


def print_comparisons(cs: ComparisonSet) -> None:
    from ..analysis.compare import TESTS
    labels = cs.labels
    console.print(f"against [bold]{escape(cs.baseline.text)}[/]: lower is better; p-values Holm-corrected over "
                  f"all {sum(r.p is not None for k in cs.comparisons for r in k.rows)} tests, α = {cs.alpha:g}")
    for k in cs.comparisons:
        console.print(comparison_table(cs, k))
    if not cs.comparisons:
        console.print("nothing to compare: every selected configuration is a baseline or has no baseline")
    console.print("Δ = value − baseline; n.s. = no significant difference; tests: " +
                  "; ".join(f"{m}: {t}" for m, t in TESTS.items()) +
                  f"; bootstrap: {cs.resamples:,} resamples, seed {cs.seed}", style="dim")
    reasons = sorted({f"{r.metric}: {r.reason}" for k in cs.comparisons for r in k.rows if r.reason})
    for reason in reasons:
        console.print(f"not tested: {escape(reason)}", style="yellow")
    for k in cs.comparisons:
        for r in k.rows:
            if r.note:
                console.print(f"* {escape(labels[k.cell.config])} {r.metric}: {escape(r.note)}")
        for note in k.notes + k.cell.notes:
            console.print(f"note: {escape(labels[k.cell.config])}: {escape(note)}")
    print_unmatched_and_warnings(cs, console)


def print_unmatched_and_warnings(cs: ComparisonSet, to: Console) -> None:
    """The configurations left without a baseline, and the set's warnings."""
    for cell, why in cs.unmatched:
        to.print(f"[yellow]not compared:[/] {escape(cs.labels[cell.config])}: {escape(why)}")
    for w in cs.warnings:
        to.print(f"[yellow]warning:[/] {escape(w)}")


@app.command()
def compare(
    baseline: BaselineOpt = None,
    experiment: Experiment = None, workload: Workload = None, variant: Variant = None, runtime: Runtime = None,
    tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA, resamples: ResamplesOpt = RESAMPLES, seed: SeedOpt = SEED,
    per_thread: PerThreadOpt = False, db: DbOption = None, json_out: JsonOption = False,
) -> None:
    """Compare configurations with a baseline: change, tests, effect size, intervals and a verdict per metric."""
    from ..analysis import causes
    from ..analysis.documents import compare_document
    cs = _compare(db, _selection(experiment, workload, variant, runtime, tag, where, run), baseline, alpha,
                  resamples, seed, per_thread)
    why = causes.comparison_shares(open_store(db), cs)
    if json_out:
        print_json(compare_document(open_store(db), cs, why))
        return
    print_comparisons(cs)
    if why:
        console.print(cause_table(why))


@app.command()
def recommend(
    goal: Annotated[str, typer.Option(help=f"What to minimise: {', '.join(GOALS)}.")] = "p99",
    baseline: BaselineOpt = None,
    experiment: Experiment = None, workload: Workload = None, variant: Variant = None, runtime: Runtime = None,
    tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA, resamples: ResamplesOpt = RESAMPLES, seed: SeedOpt = SEED,
    per_thread: PerThreadOpt = False, db: DbOption = None, json_out: JsonOption = False,
) -> None:
    """The configuration that best meets a goal, its evidence and its cost on the other metrics."""
    from ..analysis.recommend import check_goal, recommend as make_recommendations
    check_goal(goal)
    cs = _compare(db, _selection(experiment, workload, variant, runtime, tag, where, run), baseline or ["defaults"],
                  alpha, resamples, seed, per_thread)
    recs = make_recommendations(cs, goal)
    labels = cs.labels
    if json_out:
        print_json({"goal": goal, "alpha": alpha, "recommendations": [r.to_json(labels) for r in recs],
                    "warnings": cs.warnings,
                    "unmatched": [{"configuration": labels[c.config], "reason": w} for c, w in cs.unmatched]})
        return
    if not recs:
        console.print("nothing to recommend: no configuration could be compared with a baseline")
    for rec in recs:
        base = rec.baseline.config
        console.print(f"[bold]{escape(base.workload)} {escape(base.variant)}, minimise {goal}:[/] "
                      f"{escape(rec.summary(labels))}")
        if rec.best is not None:
            console.print("  cost: " + escape(", ".join(rec.cost())))
        for other in rec.others(labels):
            console.print(f"  {escape(other)}")
    print_unmatched_and_warnings(cs, err_console)


def report_title(store, runs, sel: Selection) -> str:
    """The selection, and the experiment's name when the runs are of one experiment."""
    ids = {r.experiment_id for r in runs}
    if len(ids) == 1 and None not in ids:
        from ..experiment.execute import get
        return f"rtscope report: {get(store, ids.pop()).name} ({sel.describe()})"
    return f"rtscope report: {sel.describe()}"


@app.command()
def report(
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path("report.html"),
    figures: Annotated[Optional[Path], typer.Option("--figures", help="Also write every figure as PNG and SVG "
                                                                      "into this directory.")] = None,
    tables: Annotated[Optional[Path], typer.Option("--tables", help="Also write every table as Markdown, LaTeX "
                                                                    "and CSV into this directory.")] = None,
    dpi: Annotated[int, typer.Option(help="Resolution of the PNG figures (the SVGs are vector).")] = 150,
    title: Annotated[Optional[str], typer.Option(help="Title of the report.")] = None,
    baseline: BaselineOpt = None,
    experiment: Experiment = None, workload: Workload = None, variant: Variant = None, runtime: Runtime = None,
    tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA, resamples: ResamplesOpt = RESAMPLES, seed: SeedOpt = SEED,
    db: DbOption = None,
) -> None:
    """Write one self-contained HTML report (works offline), and optionally figures and tables for a paper."""
    from ..analysis.select import select_runs
    from ..errors import UsageError
    from ..report import html as html_report, model
    if output.is_dir():
        raise UsageError(f"--output {output} is a directory; give a file name such as {output / 'report.html'}")
    if not output.parent.is_dir():
        raise UsageError(f"cannot write {output}: directory {output.parent} does not exist")
    if not 20 <= dpi <= 1200:
        raise UsageError(f"--dpi must be 20..1200, got {dpi}")
    sel = _selection(experiment, workload, variant, runtime, tag, where, run)
    store = open_store(db)
    runs = select_runs(store, sel)
    rep = model.build(store, runs, title=title or report_title(store, runs, sel), selection=sel.describe(),
                      baseline=baseline, alpha=alpha, resamples=resamples, seed=seed)
    try:
        html_report.write(rep, output)
    except OSError as e:
        raise UsageError(f"cannot write {output}: {e.strerror or e}") from None
    console.print(f"wrote {escape(str(output))} ({output.stat().st_size / 1e6:.1f} MB, {len(runs)} runs)")
    if figures is not None:
        from ..report import figures as fig_mod
        files = fig_mod.write(rep, figures, dpi)
        console.print(f"wrote {len(files)} figure files to {escape(str(figures))}")
    if tables is not None:
        from ..report import tables as tab_mod
        files = tab_mod.write(rep, tables)
        console.print(f"wrote {len(files)} table files to {escape(str(tables))}")
    for note in rep.notes:
        err_console.print(f"note: {escape(note)}")
