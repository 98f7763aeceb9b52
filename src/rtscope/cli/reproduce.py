"""`rtscope reproduce SPEC|STUDY`: a spec's claims judged on runs made now, or on stored runs (docs/reproduction.md)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich import box

from .. import paths
from ..analysis.defaults import ALPHA
from ..errors import UsageError, choices
from ..words import counted
from .compare import AlphaOpt, Experiment, RunIds, Tag, Where
from .common import DbOption, JsonOption, Table, app, console, err_console, escape, open_store, print_json
from .run import SPENDING_TEXT, BudgetOption, DesignOption, ScaleOption, until_decided_runs, with_design

if TYPE_CHECKING:
    from ..analysis.claims import Judgement

FAIL_ON = ("contradicted",)
VERDICT_STYLE = {"holds": "bold green", "contradicted": "bold red", "undecided": "yellow",
                 "not measurable here": "dim"}


@app.command()
def reproduce(
    spec: Annotated[Path, typer.Argument(help="A spec with [[claim]] tables: a file, or a shipped study by name "
                                              "(nerves-rt, kernels, msgq, storage, tasks).")],
    scale: ScaleOption = None,
    repetitions: Annotated[Optional[int], typer.Option(
        "--repetitions", help="Runs per configuration (default: the spec's at its scale); an undecided claim "
                              "says how many would decide it.")] = None,
    experiment: Experiment = None, tag: Tag = None, where: Where = None, run: RunIds = None,
    alpha: AlphaOpt = ALPHA,
    fail_on: Annotated[Optional[str], typer.Option(
        "--fail-on", metavar="contradicted", help="A gate for CI: exit 1 when a claim is contradicted.")] = None,
    junit: Annotated[Optional[Path], typer.Option(
        "--junit", metavar="FILE", help="Write JUnit XML: a test case per claim (contradicted: a failure; "
                                        "undecided or not measurable here: skipped).")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed of the runs' random order.")] = None,
    until_decided: Annotated[bool, typer.Option(
        "--until-decided", help="Add rounds of runs until every claim is decided or --budget is spent; the claims "
                                "are judged after rounds 2, 3, 4, 6, 8, 11, ... at levels that keep the "
                                "false-positive rate at α over every look (docs/reproduction.md).")] = False,
    budget: BudgetOption = "20m",
    resume: Annotated[bool, typer.Option(
        "--resume", help="With --until-decided: continue the latest interrupted one of this spec.")] = False,
    design: DesignOption = None,
    db: DbOption = None, json_out: JsonOption = False,
) -> None:
    """Judge a spec's claims: run the configurations they name (only those), or, with --experiment, --tag or
    --run, judge stored runs. Each claim holds, is contradicted, is undecided (with the runs per configuration
    that would decide it) or is not measurable here (with why). --where narrows either."""
    from ..analysis.claims import memory_slope
    from ..analysis.compare import check_options, load_cells
    from ..experiment import claim_runs, execute as exp_mod, spec as spec_mod
    from ..options import parse_assignment
    from ..targets import Pool
    check_options(alpha)
    if fail_on is not None and fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {fail_on!r}: valid: {choices(FAIL_ON)}")
    if repetitions is not None and repetitions < 1:
        raise UsageError(f"--repetitions must be at least 1, got {repetitions}")
    _check_junit(junit)
    path = paths.find_spec(spec)
    parsed = with_design(spec_mod.load(path, scale), design)
    if not parsed.claims:
        raise UsageError(f"{path} has no [[claim]] tables: nothing to reproduce (docs/spec.md, \"Claims\"; the "
                         "shipped studies have them: nerves-rt, kernels, msgq, storage, tasks)")
    wheres = [parse_assignment(w) for w in where or []]
    stored = bool(experiment or tag or run)
    if (resume or budget != "20m") and not until_decided:
        raise UsageError("--budget and --resume go with --until-decided")
    if until_decided and (stored or repetitions is not None):
        raise UsageError("--until-decided chooses how many runs to make: it takes neither --repetitions nor stored "
                         "runs (--experiment, --tag, --run)")
    if stored and repetitions is not None:
        raise UsageError("--repetitions runs configurations; with --experiment, --tag or --run stored runs are "
                         "judged and nothing runs")
    command = f"rtscope reproduce {shlex.quote(str(spec))}" + (f" --scale {parsed.scale}" if scale else "") + \
        (f" --db {shlex.quote(db)}" if db else "")
    store = open_store(db)
    with Pool() as pool:
        absent = claim_runs.unmeasurable(parsed, exp_mod.Availability(pool, boot=False))
        aside = claim_runs.set_aside(parsed, wheres, command)
        if stored:
            from ..analysis.select import CORE_DIMENSIONS, Selection, select_runs
            from .common import note_experiment
            note_experiment(store, experiment)
            core = {n: v for n, v in wheres if n in CORE_DIMENSIONS}     # --where variant=fib: compare's --variant
            runs = select_runs(store, Selection(experiment, **core, tags=list(tag or []),
                                                where=[(n, v) for n, v in wheres if n not in core],
                                                run_ids=list(run or [])))
        elif until_decided:
            from ..experiment.monitor import parse_duration
            judgements, runs, sequence = until_decided_runs(
                store, parsed, path, pool, absent, aside, wheres, seed, alpha, parse_duration(budget, "--budget"),
                resume, f"rtscope reproduce {path} --until-decided --resume")
        else:
            runs = _run_claims(store, parsed, path, pool, absent, aside, wheres, repetitions, seed)
    if not until_decided:
        sequence = None
        judgements = claim_runs.verdicts(parsed, load_cells(store, runs), absent, aside, alpha=alpha,
                                         slope=memory_slope(store), stored=stored)
    from ..analysis.claims import machine_text, needed_command
    machine = runs[0].machine if runs else pool_machine()
    if junit is not None:
        from ..report import junit as junit_report
        n = junit_report.write_claims(judgements, parsed.name, junit, enforced=fail_on is not None)
        err_console.print(f"wrote {escape(str(junit))}: {n['tests']} test cases, {n['failures']} failures, "
                          f"{n['skipped']} skipped")
    if json_out:
        print_json({"spec": parsed.name, "scale": parsed.scale, "alpha": alpha, "correction": "holm",
                    "machine": machine_text(machine), "runs": [r.id for r in runs], "until_decided": sequence,
                    "claims": [j.to_json() | {"command": next_command(j, command, aside, sequence)}
                               for j in judgements]})
    else:
        print_claims(judgements, parsed.name, alpha, machine, command, aside, sequence)
        if sequence:
            console.print(_sequence_text(sequence, alpha), style="dim")
    if fail_on is not None and any(j.verdict == "contradicted" for j in judgements):
        raise typer.Exit(1)


def _check_junit(junit: Path | None) -> None:
    if junit is None:
        return
    if junit.is_dir():
        raise UsageError(f"--junit {junit} is a directory; give a file name such as {junit / 'claims.xml'}")
    if not junit.parent.is_dir():
        raise UsageError(f"cannot write {junit}: directory {junit.parent} does not exist")


def _run_claims(store, parsed, path, pool, absent, aside, wheres, repetitions, seed) -> list:
    """Run the configurations of the claims that can be judged here; their runs, and skipped runs' reasons added
    to `absent`."""
    from ..experiment import claim_runs, execute as exp_mod
    from .run import print_warnings, run_experiment
    wanted = [c for c in parsed.claims if c.id not in absent and c.id not in aside]
    sub = claim_runs.trimmed(parsed, wanted, wheres, repetitions)
    if not sub.cells:
        return []
    print_warnings(parsed)
    chosen = seed if seed is not None else parsed.seed if parsed.seed is not None else exp_mod.new_seed()
    planned = exp_mod.plan(sub, chosen)
    experiment = exp_mod.start(store, sub, planned, chosen, exp_mod.spec_identity(path))
    err_console.print(f"experiment {experiment.id}: {escape(parsed.name)}, scale {parsed.scale or '-'}, "
                      f"{counted(len(sub.cells), 'configuration')} named by claims, {counted(len(planned), 'run')}")
    outcome = run_experiment(store, experiment, str(path), pool)
    skipped = {p.cell: why for p, why in outcome.skipped}
    for claim in wanted:
        for c in claim_runs.cells_of(parsed, claim, wheres):
            if c.key in skipped:
                absent.setdefault(claim.id, skipped[c.key])
    return store.runs(experiment_id=experiment.id)


def _sequence_text(sequence: dict, alpha: float) -> str:
    return (f"until decided: experiment {sequence['experiment']}, {sequence['rounds']} rounds, {sequence['looks']} "
            f"looks in {sequence['wall_s']:g} s (budget {sequence['budget_s']} s); {SPENDING_TEXT}, so every look "
            f"together keeps the false-positive rate at α = {alpha:g}")


def pool_machine() -> dict:
    from ..targets import Pool
    with Pool() as pool:
        return pool.get("local").snapshot()


def next_command(j: Judgement, command: str, aside: dict[str, str], sequence: dict | None) -> str | None:
    """The command that would decide an undecided claim: more runs, or after --until-decided, a longer budget for
    the rounds it would need at this pace."""
    from ..analysis.claims import needed_command
    if sequence is None or j.verdict != "undecided" or j.runs_needed is None or not sequence["rounds"]:
        return needed_command(j, command, aside)
    minutes = max(1, -(-j.runs_needed * sequence["wall_s"] // sequence["rounds"] // 60))
    return f"{command} --until-decided --budget {int(minutes)}m"


def print_claims(judgements: list[Judgement], name: str, alpha: float, machine: dict, command: str,
                 aside: dict[str, str], sequence: dict | None = None) -> None:
    from ..analysis.claims import machine_text
    table = Table(title=f"claims of {escape(name)}: published → measured (baseline → cell)", box=box.SIMPLE_HEAD,
                  title_justify="left", pad_edge=False)
    levels = {j.level for j in judgements if j.interval is not None} or {0.95}
    # One level for all: the column says it; claims decided at different looks: each interval says its own.
    interval_head = (f"{levels.pop():.4g} interval".replace("0.95 ", "95% ") if len(levels) == 1
                     else "interval (its level)")
    for head in ("claim", "metric", "expect", "published", "measured", interval_head, "verdict"):
        table.add_column(head)
    for j in judgements:
        interval = j.interval_text()
        if interval_head == "interval (its level)" and j.interval is not None:
            interval += f" ({j.level:.4g})"
        table.add_row(escape(j.claim.id), j.metric_text, escape(j.claim.expect_text), escape(j.published_text()),
                      j.values_text(), interval, f"[{VERDICT_STYLE[j.verdict]}]{j.verdict}[/]")
    console.print(table)
    for j in judgements:
        if j.verdict in ("undecided", "not measurable here"):
            line = f"{j.claim.id}: {j.verdict}"
            if j.runs_needed is not None:
                line += (f": about {j.runs_needed} rounds in all would decide it at 80 % power at the next look's level"
                         if sequence else f": {j.runs_needed} runs per configuration would decide it at 80 % power")
            if j.reason:
                line += f": {j.reason}"
            if (cmd := next_command(j, command, aside, sequence)):
                line += f"; `{cmd}`"
            console.print(escape(line), style="yellow" if j.verdict == "undecided" else "dim", soft_wrap=True)
    hardware = sorted({j.claim.published.get("hardware") for j in judgements if j.claim.published} - {None})
    console.print(f"published on: {escape('; '.join(hardware) or 'not stated')}; measured on: "
                  f"{escape(machine_text(machine))} — published absolute figures are shown, never tested",
                  soft_wrap=True)
    from ..words import counted
    tested = sum(j.p_holm is not None for j in judgements)
    from ..analysis.claims import evidence_text
    evidence = evidence_text(judgements)
    console.print(f"lower/higher: {evidence}, and within ±min_effect the effect is absent (contradicted); same: "
                  f"two one-sided tests within the margin; Holm over {counted(tested, 'such claim')}, α = {alpha:g}; "
                  "ratio, below: the interval (docs/reproduction.md)", style="dim", soft_wrap=True)
