"""rtscope compare: configurations against a baseline, metric by metric; the run selection options `recommend`
and `report` share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box
from rich.console import Console

from ..analysis.defaults import ALPHA
from .common import (DbOption, JsonOption, Table, app, console, err_console, escape, layout_width, note_experiment,
                     open_store, print_json, wrapped)

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
FailOnOpt = Annotated[Optional[str], typer.Option(
    "--fail-on", metavar="worse[:METRIC,...]",
    help="A gate for CI: exit 1 when a metric (default: all of mean, median, p99, max, stdev, and tail with "
         "--tail; or those listed) "
         "of a compared configuration is significantly worse than its baseline, 0 otherwise (2: bad input).")]
JunitOpt = Annotated[Optional[Path], typer.Option(
    "--junit", metavar="FILE", help="Write JUnit XML: a test case per configuration × metric; a failure per row "
                                    "that fails the gate (without --fail-on: worse on any metric, exit 0).")]
BaselineExperimentOpt = Annotated[Optional[str], typer.Option(
    "--baseline-experiment", metavar="ID|NAME", help="Baseline: the runs of this experiment, stored earlier; "
                                                     "each configuration is compared with the same one there.")]
BaselineTagOpt = Annotated[Optional[list[str]], typer.Option(
    "--baseline-tag", metavar="TAG", help="Baseline: the runs with this tag (repeatable: all of them), stored "
                                          "earlier; each configuration is compared with the same one there.")]
TailOpt = Annotated[bool, typer.Option(
    "--tail", help="Add the tail row: each run's bound at p = 1e-9 per sample (rtscope tail), tested with the run "
                   "as the unit; a run whose tail is refused leaves its configuration without a bound. Costs a "
                   "tail fit per run (implied by --fail-on worse:tail).")]
VerboseOpt = Annotated[bool, typer.Option(
    "--verbose", "-v", help="Also the variance components of every configuration's metrics (between-run SD, "
                            "within-run SE), after the summary and the tables.")]
PerThreadOpt = Annotated[bool, typer.Option(
    "--per-thread", help="Multi-thread latency runs: take each run's worst thread (highest maximum) instead of "
                         "all its threads.")]

VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "no significant difference": "dim",
                 "not tested": "yellow"}


def selection(experiment, workload, variant, runtime, tag, where, run) -> Selection:
    from ..analysis.select import Selection
    return Selection.from_cli(experiment, workload, variant, runtime, tag, where, run)


def comparisons(db, sel: Selection, baseline, alpha, per_thread=False,
             baseline_sel: Selection | None = None, tail: bool = False, fallback=None) -> ComparisonSet:
    from ..analysis.documents import comparison_set
    for chosen in (sel, baseline_sel):
        note_experiment(open_store(db), chosen and chosen.experiment)
    return comparison_set(open_store(db), sel, baseline, alpha=alpha, per_thread=per_thread,
                          baseline_sel=baseline_sel, tail=tail, fallback=fallback)


def baseline_text(cs: ComparisonSet) -> str:
    from ..analysis.compare import EarlierComparisonSet
    return cs.baseline_text if isinstance(cs, EarlierComparisonSet) else cs.baseline.text


def cause_table(rows) -> Table:
    """Per configuration, the cause shares of its explained samples above the baseline's p99 (setting explain)."""
    kinds = list(dict.fromkeys(r.kind for c in rows for r in c.kinds))
    # The p99 of the baseline's samples pooled, not the mean of its per-run p99 that the comparison tables show:
    # a figure of its own, named so (one statistic, one value).
    table = Table(title="why: the excess above the baseline's pooled p99 of the explained samples, per cause kind "
                        "(share; µs per sample)", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("configuration")
    table.add_column("pooled p99 of baseline", justify="right")
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


def comparison_table(cs: ComparisonSet, k, width: int | None = None) -> Table:
    """One comparison: a row per metric (title and caption wrapped at `width`)."""
    from ..analysis.recommend import change, p_text
    from ..analysis.results import display_unit, fmt
    shown, scale = display_unit(k.cell.config.unit)
    labels = cs.labels
    title = (f"[bold]{escape(wrapped(labels[k.cell.config], width))}[/]\n"
             f"{escape(wrapped('vs ' + labels[k.base.config], width))}")
    caption = (f"values in {shown}, each the mean of the per-run values; {len(k.cell.runs)} vs {len(k.base.runs)} "
               f"runs, {len(k.cell.samples):,} vs {len(k.base.samples):,} samples")
    if k.cliffs_delta is not None:
        caption += f"; Cliff's δ of the samples {k.cliffs_delta:+.2f} ({k.magnitude})"
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, title_justify="left", caption_justify="left",
                  pad_edge=False)
    for head, right in (("metric", False), ("baseline", True), ("value", True), ("change", True),
                        ("95% CI of Δ", True), ("p Holm", True), ("verdict", False)):
        table.add_column(head, justify="right" if right else "left")
    for r in k.rows:
        ci = f"{fmt(r.metric, r.ci[0], scale)}..{fmt(r.metric, r.ci[1], scale)}" if r.ci else "-"
        verdict = f"[{VERDICT_STYLE[r.verdict]}]{r.verdict}[/]" + ("*" if r.note else "")
        refused = r.extra.get("refused", {})
        base = "refused" if refused.get("baseline") else fmt(r.metric, r.baseline, scale)
        value = "refused" if refused.get("configuration") else fmt(r.metric, r.value, scale)
        table.add_row(r.metric, base, value, change(r.ratio), ci, p_text(r.p_holm), verdict)
    return table


# The order of the summary: a comparison with a worse row first, then better, then neither, then untested.
RANK = {"worse": 0, "better": 1, "no significant difference": 2, "not tested": 3}


def verdict_text(k) -> tuple[int, str]:
    """A comparison's verdicts in one phrase ("worse: mean; better: p99, max"), and its rank in the summary."""
    by: dict[str, list[str]] = {}
    for r in k.rows:
        by.setdefault(r.verdict, []).append(r.metric)
    parts = [f"{v}: {', '.join(by[v])}" for v in ("worse", "better") if v in by]
    if parts and "no significant difference" in by:
        parts.append(f"no significant difference: {', '.join(by['no significant difference'])}")
    if not parts:
        parts = ["no significant difference" if "no significant difference" in by else "not tested"]
    if "not tested" in by and len(by) > 1:
        parts.append(f"not tested: {', '.join(by['not tested'])}")
    return min(RANK[v] for v in by) if by else RANK["not tested"], "; ".join(parts)


def relative(label: str, base: str) -> str:
    """A configuration's label as it differs from its baseline's (the words the baseline's label lacks, in
    order): `fullsweep_after=0` under `against sum (beam) fullsweep_after=65535 ...`; the whole label when they
    share every word."""
    from ..analysis.select import PARAM_WORDS
    glued = [(w, w.replace(" ", "\0")) for w in PARAM_WORDS.values()]   # `size n=4000` is one word here

    def split(text: str) -> list[str]:
        for w, g in glued:
            text = text.replace(w + "=", g + "=")
        return text.split()
    words = set(split(base))
    return " ".join(w for w in split(label) if w not in words).replace("\0", " ") or label


def ordered(cs: ComparisonSet) -> list:
    """The comparisons in a stable order: by baseline, then by configuration (labels as shown)."""
    labels = cs.labels
    return sorted(cs.comparisons, key=lambda k: (labels[k.base.config], labels[k.cell.config]))


def experiments_text(db, cs: ComparisonSet) -> str:
    """'experiment 3 (nerves-rt)': the experiments whose runs were compared ("" when none recorded one)."""
    ids = sorted({getattr(r, "experiment_id", None) for c in cs.cells for r in c.runs} - {None})
    if not ids:
        return ""
    names = dict(open_store(db).experiment_names())
    return ("experiment " if len(ids) == 1 else "experiments ") + ", ".join(
        f"{i} ({names[i]})" if names.get(i) else str(i) for i in ids)


def print_summary(cs: ComparisonSet, source: str, width: int | None) -> None:
    """One line per comparison with its verdicts, grouped by baseline, the worst news first."""
    labels = cs.labels
    tests = sum(r.p is not None for k in cs.comparisons for r in k.rows)
    from ..words import counted
    family = (f"p-values Holm-corrected over {counted(tests, 'test')}" if tests else "no test could be made")
    head = (f"compare{f' {source}' if source else ''}: {counted(len(cs.comparisons), 'comparison')} against "
            f"{baseline_text(cs)}; lower is better; {family}, α = {cs.alpha:g}")
    console.print(escape(wrapped(head, width)), soft_wrap=True)
    groups: dict[str, list] = {}
    for k in cs.comparisons:
        groups.setdefault(labels[k.base.config], []).append(k)
    for base in sorted(groups):
        console.print(escape(wrapped(f"against {base}:", width)), soft_wrap=True)
        lines = [(*verdict_text(k), relative(labels[k.cell.config], base)) for k in groups[base]]
        for _, verdict, label in sorted(lines, key=lambda t: (t[0], t[2])):
            console.print(escape(wrapped(f"{label}: {verdict}", width, indent="  ")), soft_wrap=True)
    if not cs.comparisons:
        console.print(escape(wrapped("nothing to compare: every selected configuration is a baseline or has no "
                                     "baseline", width)), soft_wrap=True)
    involved = {id(c) for k in cs.comparisons for c in (k.cell, k.base)} | {id(c) for c, _ in cs.unmatched}
    alone = sorted(labels[c.config] for c in cs.cells if id(c) not in involved)
    for label in alone:     # a baseline no selected configuration is compared with
        console.print(escape(wrapped(f"{label}: a baseline with nothing to compare", width)), soft_wrap=True)


def print_comparisons(cs: ComparisonSet, source: str = "", verbose: bool = False) -> None:
    """The summary first (one line per comparison), then a table per comparison in a stable order, the notes, and
    with verbose the variance components; at a known width (a terminal, $COLUMNS) no line is wider."""
    from ..analysis.compare import RUN_TEST
    labels = cs.labels
    width = layout_width()

    def say(text: str, style: str | None = None, indent: str = "") -> None:
        console.print(escape(wrapped(text, width, indent=indent)), style=style, soft_wrap=True)

    print_summary(cs, source, width)
    if cs.comparisons:
        console.print()
        say("details, one table per comparison:")
    for k in ordered(cs):
        console.print(comparison_table(cs, k, width), width=width)
        for r in k.rows:        # what belongs to this comparison, under its table
            if r.note:
                say(f"* {r.metric}: {r.note}")
        for note in k.notes + k.cell.notes:
            say(f"note: {note}")
    designs = {k.design for k in cs.comparisons}
    tests = (f"the run is the unit: every metric is tested with a {RUN_TEST}" if designs <= {"runs"} else
             f"design {' and '.join(sorted(designs - {'runs'}))}: the window pair is the unit, every metric tested "
             "with a paired t-test on the log ratios of window pairs (the run as a cluster)"
             + (f"; the others, measured in runs of their own, with a {RUN_TEST}" if "runs" in designs else ""))
    say(f"Δ = value − baseline; {tests} (docs/analysis.md)", style="dim")
    if cs.tail:
        say("tail: the latency exceeded with p = 1e-9 per sample, each run's own bound (rtscope tail RUN); "
            "refused: a run's tail failed a check, so its configuration has no bound", style="dim")
    reasons = sorted({f"{r.metric}: {r.reason}" for k in cs.comparisons for r in k.rows
                      if r.reason and r.metric != "tail"})
    reasons += [f"tail of {labels[k.cell.config]}: {r.reason}" for k in ordered(cs) for r in k.rows
                if r.reason and r.metric == "tail"]
    for reason in reasons:
        say(f"not tested: {reason}", style="yellow")
    if verbose:
        console.print(variance_table(cs), width=width)
    else:
        say("the variance components of each configuration's metrics: --verbose", style="dim")
    print_unmatched_and_warnings(cs, console)


def variance_table(cs: ComparisonSet) -> Table:
    """Per configuration and metric: the between-run SD and the within-run standard error of one run's value."""
    from ..analysis.compare import METRICS
    from ..analysis.results import display_unit, fmt
    table = Table(title="variance components of each metric's per-run values (- : unknown)", box=box.SIMPLE_HEAD,
                  title_justify="left", pad_edge=False)
    for head, right in (("configuration", False), ("metric", False), ("runs", True), ("between-run SD", True),
                        ("within-run SE", True), ("between share", True)):
        table.add_column(head, justify="right" if right else "left", overflow="fold")
    labels = cs.labels
    for c in cs.cells:
        shown, scale = display_unit(c.config.unit)
        for i, m in enumerate(METRICS):
            v = c.components(m)
            table.add_row(escape(labels[c.config]) if i == 0 else "", m, str(v.runs),
                          "-" if v.between_sd is None else f"{fmt(m, v.between_sd, scale)} {shown}",
                          "-" if v.within_se is None else f"{fmt(m, v.within_se, scale)} {shown}",
                          "-" if v.between_share is None else f"{v.between_share:.0%}",
                          end_section=i == len(METRICS) - 1)
    return table


def print_unmatched_and_warnings(cs: ComparisonSet, to: Console) -> None:
    """The configurations left without a baseline, and the set's warnings (wrapped at the layout width)."""
    width = layout_width(to)
    for cell, why in sorted(cs.unmatched, key=lambda u: cs.labels[u[0].config]):
        text = wrapped(f"not compared: {cs.labels[cell.config]}: {why}", width)
        to.print(f"[yellow]not compared:[/]{escape(text[len('not compared:'):])}", soft_wrap=True)
    for w in cs.warnings:
        text = wrapped(f"warning: {w}", width)
        to.print(f"[yellow]warning:[/]{escape(text[len('warning:'):])}", soft_wrap=True)


@app.command()
def compare(
    baseline: BaselineOpt = None,
    experiment: Experiment = None, workload: Workload = None, variant: Variant = None, runtime: Runtime = None,
    tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA,
    per_thread: PerThreadOpt = False, tail: TailOpt = False,
    baseline_experiment: BaselineExperimentOpt = None, baseline_tag: BaselineTagOpt = None,
    fail_on: FailOnOpt = None, junit: JunitOpt = None, verbose: VerboseOpt = False,
    db: DbOption = None, json_out: JsonOption = False,
) -> None:
    """Compare configurations with a baseline: change, tests, effect size, intervals and a verdict per metric.

    The baseline is a configuration among the selected runs (--baseline NAME=VALUE), or runs stored earlier
    (--baseline-experiment, --baseline-tag): then each configuration is compared with the same configuration
    there. --fail-on and --junit make it a gate for CI (docs/analysis.md, "Gating CI")."""
    from ..analysis import explain_shares
    from ..analysis.documents import compare_document
    from ..analysis.gate import Gate
    from ..errors import UsageError
    gate = Gate.parse(fail_on) if fail_on is not None else Gate(enforced=False) if junit is not None else None
    if junit is not None:
        if junit.is_dir():
            raise UsageError(f"--junit {junit} is a directory; give a file name such as {junit / 'rtscope.xml'}")
        if not junit.parent.is_dir():
            raise UsageError(f"cannot write {junit}: directory {junit.parent} does not exist")
    baseline_sel = None
    if baseline_experiment is not None or baseline_tag:
        baseline_sel = selection(baseline_experiment, workload, variant, runtime, baseline_tag, where, None)
    cs = comparisons(db, selection(experiment, workload, variant, runtime, tag, where, run), baseline, alpha,
                  per_thread, baseline_sel, tail or (gate is not None and gate.names_tail))
    why = explain_shares.comparison_shares(open_store(db), cs)
    if junit is not None:
        from ..report import junit as junit_report
        n = junit_report.write(cs, gate, junit)
        err_console.print(f"wrote {escape(str(junit))}: {n['tests']} test cases, {n['failures']} failures, "
                          f"{n['skipped']} skipped" + ("" if gate.enforced else " (no --fail-on: failures are "
                                                       "rows worse on any metric; exit status 0)"))
    if json_out:
        doc = compare_document(open_store(db), cs, why)
        if gate is not None:
            doc["gate"] = gate.to_json(cs)
        print_json(doc)
    else:
        print_comparisons(cs, experiments_text(db, cs), verbose)
        if why:
            console.print(cause_table(why), width=layout_width())
        if gate is not None:
            print_gate(cs, gate)
    if gate is not None and gate.enforced and not gate.passed(cs):
        raise typer.Exit(1)


def print_gate(cs: ComparisonSet, gate) -> None:
    """The gate's outcome: the rows that fail it, or that none does."""
    if not gate.enforced:
        return
    labels = cs.labels
    failed = gate.failures(cs)
    rows = sum(r.metric in gate.metrics for k in cs.comparisons for r in k.rows)
    if not failed:
        console.print(f"[bold green]gate passed[/] (--fail-on {gate.text}): no row of {rows} is worse")
        return
    console.print(f"[bold red]gate failed[/] (--fail-on {gate.text}): {len(failed)} of {rows} rows worse: " +
                  "; ".join(f"{escape(labels[k.cell.config])} {r.metric}" for k, r in failed))
