"""rtscope run: an experiment spec's runs, stored as each ends; the progress, results and next steps that
`demo` and `monitor` show too."""

from __future__ import annotations

import shlex
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from .. import paths
from ..errors import RtscopeError, UsageError
from ..words import counted
from .common import (DbOption, app, console, err_console, escape, layout_width, open_store, settle, stats_table,
                     wrapped)

if TYPE_CHECKING:
    from rich.progress import Progress

    from ..experiment import execute as exp_mod, spec as spec_mod
    from ..store import Store
    from ..targets import Pool

DEMO_COLUMNS = (("n", "n"), ("mean", "AVG"), ("max", "MAX"), ("var", "VAR"), ("stdev", "STDEV"), ("p99", "p99"))
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
# How --until-decided spends α over its looks (analysis/paired.py look_level), said under its results.
SPENDING_TEXT = ("look k tests at α/2/(k(k+1)) plus the α/2·t² by time t of the budget the looks before did not "
                 "spend, the last look at all of it left")

ScaleOption = Annotated[Optional[str], typer.Option(
    "--scale", help="Which scale.NAME table of the spec to use (default: quick, when the spec has it).")]
DesignOption = Annotated[Optional[str], typer.Option(
    "--design", metavar="runs|interleaved|duet|auto", help="How the configurations are laid out in time, replacing "
    "the spec's `design`: interleaved measures those one process can hold as arms of one run, in blocks; duet runs "
    "those that differ only in their own process's settings side by side, a CPU each (docs/spec.md, \"Designs\").")]


BudgetOption = Annotated[str, typer.Option(
    "--budget", metavar="DURATION", help="With --until-decided: the wall time it may take (20m, 1h, 90s).")]


def with_design(parsed, design: str | None):
    """The spec with --design in place of its own `design` (checked against the valid ones)."""
    import dataclasses
    from ..experiment.spec.model import DESIGNS
    if design is None:
        return parsed
    if design not in DESIGNS:
        raise UsageError(f"unknown --design {design!r}; valid: {', '.join(DESIGNS)}")
    return dataclasses.replace(parsed, design=design)


class ProgressReporter:
    """A rich progress bar (runs done, elapsed, ETA) with one line per stored or skipped run."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.task = None
        self.per_target: dict[str, int] = {}
        self.reasons: set[str] = set()

    def started(self, experiment, total: int, done: int) -> None:
        self.task = self.progress.add_task(escape(experiment.name), total=total, completed=done)

    def fleet(self, counts: dict[str, int]) -> None:
        """Several targets work in parallel: one bar each, under the experiment's."""
        for name, n in counts.items():
            self.per_target[name] = self.progress.add_task(escape(f"  {name}"), total=n)

    def run_started(self, p) -> None:
        from ..experiment import execute as exp_mod
        task = self.per_target.get(exp_mod.target_of(p.request), self.task)
        self.progress.update(task, description=escape(f"[{p.index + 1}] {p.cell} #{p.repetition}"))

    def run_stored(self, p, run_id: int) -> None:
        self.progress.console.print(f"run {run_id}: {escape(p.cell)} #{p.repetition}", highlight=False)
        self._advance(p)

    def run_spooled(self, p, spooled) -> None:
        self.progress.console.print(f"run spooled: {escape(p.cell)} #{p.repetition}", highlight=False)
        self._advance(p)

    def run_failed(self, p, error: str) -> None:
        """A run past its deadline, stopped: said, and out of the total (it is not stored)."""
        self.progress.console.print(f"[red]{escape(error)}[/]; the next run goes on", highlight=False)
        self.run_skipped(p, None)

    def run_repeated(self, p, why: str) -> None:
        self.progress.console.print(f"[yellow]run {p.index + 1} ({escape(p.cell)} #{p.repetition}) interrupted:[/] "
                                    f"{escape(why)}; it is made once more", highlight=False)

    def target_failed(self, name: str, error: str) -> None:
        self.progress.console.print(f"[red]target {escape(name)} failed[/] (its remaining runs stop; the other "
                                    f"targets go on): {escape(error)}", highlight=False)

    def _advance(self, p=None) -> None:
        from ..experiment import execute as exp_mod
        for task in {self.task, self.per_target.get(exp_mod.target_of(p.request)) if p else None} - {None}:
            self.progress.advance(task)
            if self.progress.tasks[task].finished:
                self.progress.update(task, description="done")

    def run_skipped(self, p, reason: str | None) -> None:
        if reason is not None and reason not in self.reasons:  # each reason once; the summary at the end counts them
            self.reasons.add(reason)
            self.progress.console.print(f"[yellow]skipping[/] runs that need what this machine lacks: "
                                        f"{escape(reason)}", highlight=False)
        from ..experiment import execute as exp_mod
        # Out of the total rather than counted as done, so that the ETA counts only runs really made.
        for task in {self.task, self.per_target.get(exp_mod.target_of(p.request))} - {None}:
            t = self.progress.tasks[task]
            self.progress.update(task, total=(t.total or 1) - 1)
            if t.finished:
                self.progress.update(task, description="done")


def _progress() -> Progress:
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)
    from rich.table import Column
    from rich.text import Text

    class RunProgress(Progress):
        ending: str | None = None   # once set, the display's last state: one whole line instead of the bar

        def get_renderable(self):
            return Text(self.ending) if self.ending is not None else super().get_renderable()

    # Its columns fit 80 (the run's name folds to 30, the bar to 12): no count or time is cut to "…".
    return RunProgress(TextColumn("{task.description}", table_column=Column(max_width=30, no_wrap=True)),
                    BarColumn(bar_width=12), MofNCompleteColumn(), TextColumn("runs"), TimeElapsedColumn(),
                    TextColumn("ETA"), TimeRemainingColumn(), console=err_console)


def print_warnings(spec: spec_mod.Spec) -> None:
    for w in spec.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(w.text(spec.source))}")


def run_experiment(store: Store, experiment: exp_mod.Experiment, spec_arg: str, pool: Pool,
                   bounds=None) -> exp_mod.Outcome:
    """Execute with a progress bar; turn interruptions into a clean message that says how to resume."""
    with progress_display() as progress:
        return execute_resumable(store, experiment, ProgressReporter(progress), pool,
                                 f"resume with `rtscope run {spec_arg} --resume {experiment.id}`", bounds=bounds)


@contextmanager
def progress_display():
    """The progress bar while runs execute. Stopped by Ctrl-C, SIGTERM or an error, it ends on one whole line,
    `stopped: 10 of 20 runs done`, instead of the bar as it was drawn last (half a line, or cut to the terminal
    with `…`); the message that follows says what was kept and how to resume."""
    from ..signals import Terminated
    progress = _progress()
    with progress:
        try:
            yield progress
        except (KeyboardInterrupt, Terminated, RtscopeError):
            task = progress.tasks[0] if progress.tasks else None
            progress.ending = ("stopped" if task is None else
                               f"stopped: {task.completed:g} of {counted(int(task.total or 0), 'run')} done")
            raise


def execute_resumable(store: Store, experiment: exp_mod.Experiment, reporter, pool: Pool,
                      hint: str, outage=None, bounds=None) -> exp_mod.Outcome:
    """exp_mod.execute, its interruptions and failures said in one line each, with how to resume (`outage`: a
    monitoring's target asked again while it is down, experiment/outage.py; `bounds`: experiment/bounds.py)."""
    from ..experiment import execute as exp_mod
    return resumable(lambda: exp_mod.execute(store, experiment, reporter, pool, outage, bounds),
                     f"experiment {experiment.id}", hint)


def resumable(call, what: str, hint: str):
    """call(), its interruptions and failures said in one line each: what was marked, and how to resume."""
    from ..signals import Terminated
    try:
        return call()
    except KeyboardInterrupt:
        raise RtscopeError(f"interrupted: {what} marked interrupted, every finished run is stored; {hint}",
                           exit_code=EXIT_SIGINT) from None
    except Terminated:
        raise RtscopeError(f"terminated (SIGTERM): {what} marked interrupted, every finished run is stored; "
                           f"{hint}", exit_code=EXIT_SIGTERM) from None
    except RtscopeError as e:
        raise RtscopeError(f"{e}\n{what} stopped (marked failed); {hint}", exit_code=e.exit_code) from None


def short_labels(cells: list[str]) -> tuple[dict[str, str], str]:
    """Cell names without what every cell shares (returned apart, for the title): rows show what differs.
    A block of one cell keeps its variant as the row's name, the rest goes to the title (a whole cell's name
    in the first column leaves the figures no room in 80 columns)."""
    if not cells:
        return {}, ""
    words = {c: shlex.split(c) for c in cells}
    heads = [words[c][0].split("/") for c in cells]
    if any(len(h) != 3 for h in heads):
        return {c: c for c in cells}, ""
    keep = [i for i in range(3) if len({h[i] for h in heads}) > 1] or [1]
    common = set.intersection(*(set(words[c][1:]) for c in cells))
    shared = " ".join(["/".join(heads[0][i] for i in range(3) if i not in keep), *map(shlex.quote, sorted(common))])
    return {c: " ".join(["/".join(h[i] for i in keep), *(shlex.quote(t) for t in words[c][1:] if t not in common)])
            for c, h in zip(cells, heads)}, shared.strip()


def print_results(store: Store, outcome: exp_mod.Outcome, spec: spec_mod.Spec, title: str,
                  keys=DEMO_COLUMNS) -> None:
    """One table per workload block, one row per cell: its repetitions' samples pooled (histogram-only runs:
    one row each). What every cell of a block shares goes into the table's title."""
    from ..analysis.results import pooled_stats, run_stats
    from ..analysis.select import in_force_label
    by_cell: dict[str, list] = {}
    for run in store.runs(experiment_id=outcome.experiment.id):
        by_cell.setdefault(run.cell or run.label, []).append(run)
    block_of = {p.cell: p.block for p in outcome.experiment.plan}
    position = {c.key: i for i, c in enumerate(spec.cells)}
    blocks: dict[int, list[str]] = {}
    for cell in sorted(by_cell, key=lambda c: (position.get(c, len(position)), c)):
        blocks.setdefault(block_of.get(cell, -1), []).append(cell)
    for block, cells in blocks.items():
        labels, shared = short_labels(cells)
        labels = {c: in_force_label(label, by_cell[c][0]) for c, label in labels.items()}
        shared = in_force_label(shared, by_cell[cells[0]][0])
        head = title + (f", block {block + 1}" if len(blocks) > 1 and block >= 0 else "")
        by_unit: dict[str, list] = {}
        for cell in cells:
            group = sorted(by_cell[cell], key=lambda r: r.repetition or 0)
            unit = group[0].primary["unit"]
            if all(r.n_samples > 0 for r in group):
                reps = f" ×{len(group)}" if len(group) > 1 else ""
                by_unit.setdefault(unit, []).append((labels[cell] + reps, pooled_stats(store, group)))
            else:
                for r in group:
                    by_unit.setdefault(unit, []).append((f"{labels[cell]} #{r['repetition']} (run {r.id})",
                                                         run_stats(store, r)))
        for unit, rows in by_unit.items():
            console.print(stats_table(head + (f": {shared}" if shared else ""), rows, unit, keys))
    for why in sorted({why for _, why in outcome.skipped}):
        n = sum(1 for _, w in outcome.skipped if w == why)
        console.print(f"{counted(n, 'run')} skipped (not possible on this machine): {escape(why)}")


@app.command()
def run(spec: Annotated[Path, typer.Argument(help="Experiment spec (TOML): a file, or a shipped spec by name "
                                                  "(`rtscope specs`); see docs/spec.md.")],
        scale: ScaleOption = None,
        seed: Annotated[Optional[int], typer.Option(help="Seed of the random run order (default: the spec's "
                                                    "seed, else a fresh one); recorded with the experiment.")] = None,
        resume: Annotated[bool, typer.Option(
            "--resume", help="Continue an interrupted experiment of this spec without repeating finished runs: "
                             "the latest unfinished one, or experiment ID (`rtscope run SPEC --resume ID`).")] = False,
        experiment_id: Annotated[Optional[int], typer.Argument(
            metavar="ID", help="With --resume: the experiment to continue (see `rtscope runs`).",
            show_default=False)] = None,
        target: Annotated[Optional[list[str]], typer.Option(
            "--target", help="Where the runs execute (repeatable: a fleet, one matrix value each): a target "
                             "defined in the spec or $RTSCOPE_TARGETS, or ssh://user@host:port; replaces the "
                             "spec's `target`. See docs/targets.md.")] = None,
        wait_for_place: Annotated[float, typer.Option(
            "--wait-for-place", metavar="SECONDS", help="A labgrid place held by someone else: wait this long for "
                                                        "it instead of failing (docs/lab.md).")] = 0,
        design: DesignOption = None,
        until_decided: Annotated[bool, typer.Option(
            "--until-decided", help="Add rounds of runs until each configuration is decided against the spec's "
                                    "baseline (better, worse, or the same within ±5 %) or --budget is spent "
                                    "(docs/analysis.md, \"Until decided\").")] = False,
        budget: BudgetOption = "20m",
        run_timeout: Annotated[Optional[float], typer.Option(
            "--run-timeout", metavar="SECONDS", help="Stop a run that takes longer (its probe killed, the run "
                                                     "recorded as failed); default: 3 × its expected duration + "
                                                     "60 s; a spec's timeout_s wins (docs/lab.md).")] = None,
        reconnect_for: Annotated[float, typer.Option(
            "--reconnect-for", metavar="SECONDS", help="A target whose connection is lost mid-run (a reboot): "
                                                       "connect again for this long, then make the run once more "
                                                       "(0: fail at once).")] = 180,
        db: DbOption = None) -> None:
    """Run the experiment a spec describes: every run in random order, each stored as it finishes."""
    from ..experiment import execute as exp_mod, spec as spec_mod
    from ..experiment.spec.check import MAX_SEED
    from ..targets import Pool
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise UsageError(f"--seed must be 0..{MAX_SEED} (as a spec's seed), not {seed}")
    if run_timeout is not None and run_timeout <= 0:
        raise UsageError(f"--run-timeout must be a number of seconds > 0, not {run_timeout:g}")
    if reconnect_for < 0:
        raise UsageError(f"--reconnect-for must be a number of seconds >= 0 (0: fail at once), not {reconnect_for:g}")
    if experiment_id is not None and not resume:
        raise UsageError(f"an experiment id ({experiment_id}) is only taken with --resume: "
                         f"`rtscope run {spec} --resume {experiment_id}`")
    spec = paths.find_spec(spec)
    text = spec_mod.read_text(spec)
    identity = exp_mod.spec_identity(spec)
    if budget != "20m" and not until_decided:
        raise UsageError("--budget goes with --until-decided")
    if until_decided:
        if experiment_id is not None:
            raise UsageError("--until-decided --resume continues the latest interrupted one of the spec; it takes "
                             "no experiment id")
        _run_until_decided(spec, with_design(spec_mod.parse(text, str(spec), scale, target), design), seed, resume,
                           budget, wait_for_place, db)
        return
    if resume:
        if target or design:
            raise UsageError(f"--{'target' if target else 'design'} cannot change a resumed experiment: its plan "
                             "is recorded")
        store = open_store(db)
        experiment = _resume_target(store, experiment_id, identity, spec)
        tune = store.tunes.of_experiment(experiment.id)
        if tune is not None:
            raise UsageError(f"experiment {experiment.id} is the trials of tune {tune['id']}: "
                             f"`rtscope tune {spec} --resume {tune['id']}` continues it")
        if scale is not None and scale != experiment.scale:
            raise UsageError(f"experiment {experiment.id} was started with scale {experiment.scale}; "
                             f"--scale {scale} cannot change it")
        if seed is not None and seed != experiment.seed:
            raise UsageError(f"experiment {experiment.id} was started with seed {experiment.seed}; "
                             f"--seed cannot change a resumed experiment's order")
        # The recorded text, not the file: the plan belongs to it (environments it defines are registered again).
        parsed = spec_mod.parse(experiment.text, str(spec), experiment.scale, experiment.spec.get("targets"))
        if experiment.text != text:
            err_console.print(f"[yellow]warning:[/] {escape(str(spec))} changed since experiment {experiment.id} "
                              "started; continuing the plan recorded then")
        done = len(exp_mod.done_indexes(store, experiment.id))
        err_console.print(f"resuming experiment {experiment.id} ({escape(experiment.name)}, scale "
                          f"{experiment.scale or '-'}, seed {experiment.seed}): {done} of {len(experiment.plan)} "
                          "runs already stored")
    else:
        parsed = spec_mod.parse(text, str(spec), scale, target)  # every problem reported before anything runs
        parsed = with_design(parsed, design)
        if parsed.tune is not None:
            raise UsageError(f"{spec} is a tune spec (it has a [tune] table): `rtscope tune {spec}` searches it")
        print_warnings(parsed)
    with Pool(wait_for_place) as pool:
        if not resume:
            chosen = seed if seed is not None else parsed.seed if parsed.seed is not None else exp_mod.new_seed()
            planned = exp_mod.plan(parsed, chosen)
            refuse_unrunnable(planned, str(spec), pool)
            store = open_store(db)
            experiment = exp_mod.start(store, parsed, planned, chosen, identity, targets=target)
            err_console.print(f"experiment {experiment.id}: {escape(parsed.name)}, scale {parsed.scale or '-'}, "
                              f"{counted(len(parsed.cells), 'cell')}, {counted(len(planned), 'run')}, "
                              f"order {parsed.order}, seed {chosen}")
            print_design(parsed)
        done_now = exp_mod.done_indexes(store, experiment.id)
        exp_mod.expect_boots(pool, [p for p in experiment.plan if p.index not in done_now])
        print_machine_warnings(experiment, pool)
        from ..experiment.bounds import Bounds
        outcome = run_experiment(store, experiment, str(spec), pool, Bounds(run_timeout, reconnect_for))
    settle(store, f"experiment {experiment.id}")
    print_results(store, outcome, parsed, f"experiment {experiment.id}: {parsed.name}")
    print_next(store, experiment, parsed, db)


def print_design(parsed) -> None:
    """What an interleaved, duet or auto design made of the spec's cells, a line each (nothing for design runs)."""
    from ..experiment.design import layout
    if parsed.design != "runs":
        for line in layout(parsed).notes():
            err_console.print(escape(line), soft_wrap=True)


def baseline_of(cells: list) -> str | None:
    """A --baseline for `rtscope compare` among these spec cells (spec order), from the spec's own axes: the first
    setting whose value differs between them, at the first cell's value, else the runtime, the variant, the
    workload; `defaults` when the first cell has no setting that differs (or an empty one, e.g. vm_flags = "": a
    value `--baseline` cannot name); None with fewer than two cells."""
    if len(cells) < 2:
        return None
    first = cells[0].request
    for name in sorted({k for c in cells for k in c.request.settings}):
        if len({repr(c.request.settings.get(name)) for c in cells}) > 1 and first.settings.get(name, "") != "":
            value = first.settings[name]
            return f"{name}={str(value).lower() if isinstance(value, bool) else value}"
    for name in ("runtime", "variant", "workload"):
        if len({getattr(c.request, name) for c in cells}) > 1:
            return f"{name}={getattr(first, name)}"
    return "defaults"


def print_next(store: Store, experiment: exp_mod.Experiment, spec: spec_mod.Spec, db: str | None) -> None:
    """How an experiment ended, and the commands that look further, ready to paste: show, compare (with two
    configurations or more), report."""
    runs = store.runs(experiment_id=experiment.id)
    stored = {r.cell for r in runs}
    on = f" --db {shlex.quote(db)}" if db else ""
    console.print(f"\nexperiment {experiment.id} ({escape(experiment.name)}): {counted(len(runs), 'run')} stored in "
                  f"{escape(store.shown_url)}", soft_wrap=True)
    if not runs:
        return
    lines = [f"rtscope show {min(r.id for r in runs)}{on}"]
    baseline = baseline_of([c for c in spec.cells if c.key in stored])
    if baseline is not None:
        lines.append(f"rtscope compare --experiment {experiment.id} --baseline {shlex.quote(baseline)}{on}")
        per_cell = Counter(r.cell for r in runs if "pairing" not in r.header)   # an interleaved run tests its blocks
        if per_cell and min(per_cell.values()) < 2:
            from ..analysis.defaults import REPEAT_ADVICE   # compare's advice, word for word
            lines.append(f"(one run of a configuration: compare shows its values but can test nothing, the run being "
                         f"the unit; {REPEAT_ADVICE}: `repetitions` in the spec)")
    lines.append(f"rtscope report --experiment {experiment.id} -o report.html{on}")
    width = layout_width()   # the commands whole (to be pasted), the prose between them wrapped
    console.print("next:\n" + "\n".join(escape(wrapped(line, width, indent="  ", hang=" ") if line.startswith("(")
                                               else f"  {line}") for line in lines), soft_wrap=True)


def print_machine_warnings(experiment: exp_mod.Experiment, pool: Pool) -> None:
    """pyperf-style warnings about the state of every target the experiment runs on."""
    from .. import sysinfo
    from ..experiment import execute as exp_mod
    names = sorted({exp_mod.target_of(p.request) for p in experiment.plan})
    for name in names:
        target = pool.get(name)
        where = "" if target.is_local else f"target {name}: "
        for w in sysinfo.warnings(target.snapshot()):
            err_console.print(f"[yellow]warning:[/] {escape(where + w)}")


def _resume_target(store: Store, exp_id: int | None, identity: str, spec: Path) -> exp_mod.Experiment:
    from ..experiment import execute as exp_mod
    if exp_id is None:
        found = exp_mod.latest_unfinished(store, identity)
        if found is None:
            raise UsageError(f"no unfinished experiment of {spec} in store {store.url}; "
                             f"start one with `rtscope run {spec}`")
        return found
    found = exp_mod.get(store, exp_id)
    if found.status == exp_mod.FINISHED:
        raise UsageError(f"experiment {exp_id} is already finished ({found.finished_at}); nothing to resume")
    if found.spec_path and found.spec_path != identity:
        err_console.print(f"[yellow]warning:[/] experiment {exp_id} was started from {escape(found.spec_path)}, "
                          f"not {escape(identity)}")
    return found


def refuse_unrunnable(planned: list, source: str, pool: Pool) -> None:
    """With on_unavailable = "fail", refuse before anything runs when a target cannot make a run."""
    from ..experiment import execute as exp_mod
    failing = [(p, why) for p, why in exp_mod.unavailable_runs(planned, exp_mod.Availability(pool))
               if p.on_unavailable == "fail"]
    if failing:
        reasons = sorted({why for _, why in failing})
        raise RtscopeError(f"{len(failing)} of {len(planned)} runs of {source} cannot run on this machine "
                           f"(on_unavailable = \"fail\"; set it to \"skip\" to run the rest):\n  " + "\n  ".join(reasons))


def _run_until_decided(spec: Path, parsed, seed, resume: bool, budget: str, wait_for_place: float,
                       db: str | None) -> None:
    """`rtscope run SPEC --until-decided`: the spec's comparisons with its baseline, as claims (mean lower, smallest
    effect of interest 5 %), decided round by round; a table of each configuration's verdict."""
    import dataclasses
    from ..analysis.defaults import ALPHA
    from ..experiment import claim_runs, execute as exp_mod
    from ..experiment.monitor import parse_duration
    from ..targets import Pool
    from .common import Table
    parsed = dataclasses.replace(parsed, claims=claim_runs.comparison_claims(parsed))
    budget_s = parse_duration(budget, "--budget")
    with Pool(wait_for_place) as pool:
        absent = claim_runs.unmeasurable(parsed, exp_mod.Availability(pool, boot=False))
        store = open_store(db)
        judgements, runs, sequence = until_decided_runs(store, parsed, spec, pool, absent, {}, [], seed, ALPHA,
                                                        budget_s, resume, f"rtscope run {spec} --until-decided --resume")
    labels, common = short_labels([j.claim.id for j in judgements])
    table = Table(title=f"{escape(parsed.name)}: {escape(common)} against the baseline ({' '.join(parsed.baseline)}), "
                        "mean", title_justify="left")
    for head in ("configuration", "baseline → value", "interval of Δ", "verdict"):
        table.add_column(head)
    for j in judgements:
        table.add_row(escape(labels[j.claim.id]), j.values_text(), j.interval_text(), decided_word(j))
    console.print(table)
    console.print(f"until decided: experiment {sequence['experiment']}, {sequence['rounds']} rounds, "
                  f"{sequence['looks']} looks in {sequence['wall_s']:g} s (budget {sequence['budget_s']} s); "
                  f"{SPENDING_TEXT}, α = {ALPHA:g} over every look; same: within ±5 % of the baseline", style="dim")


def decided_word(j) -> str:
    """A comparison decided as a claim that the configuration is lower: better, worse, same (within ±min_effect),
    or the claim's own word when it is not decided."""
    if j.verdict == "holds":
        return "better"
    if j.verdict == "contradicted":
        return f"same (±{j.claim.min_effect_text()})" if j._absent else "worse"
    return j.verdict


def until_decided_runs(store, parsed, path, pool, absent, aside, wheres, seed, alpha, budget_s, resume,
                       resume_command: str):
    """Rounds of the claims' configurations until each is decided or the budget is spent
    (experiment/sequential.py; `reproduce --until-decided`, and `run --until-decided` with the spec's comparisons
    as claims); the final judgements, the runs and what the sequence did."""
    from ..analysis.claims import memory_slope
    from ..analysis.compare import load_cells
    from ..experiment import claim_runs, execute as exp_mod, sequential
    from ..signals import Terminated
    wanted = [c for c in parsed.claims if c.id not in absent and c.id not in aside]
    identity = exp_mod.spec_identity(path)
    experiment = exp_mod.latest_unfinished(store, identity) if resume else None
    if resume and (experiment is None or "until_decided" not in experiment.spec):
        raise UsageError(f"no interrupted `--until-decided` of {path} in store {store.url}")
    if experiment is None:
        sub = claim_runs.trimmed(parsed, wanted, wheres, 1)
        print_warnings(parsed)
        chosen = seed if seed is not None else parsed.seed if parsed.seed is not None else exp_mod.new_seed()
        planned = exp_mod.plan(sub, chosen, one_round=True)   # round 1 of the sequence
        experiment = exp_mod.start(store, sub, planned, chosen, identity,
                                   record={"until_decided": {"budget_s": budget_s}})
    record = experiment.spec.get("until_decided") or {}
    budget_s = record.get("budget_s", budget_s)     # resumed: the experiment's own budget, its time used counted
    used = record.get("elapsed_s", 0)
    err_console.print(f"experiment {experiment.id}: {escape(parsed.name)} until decided (budget {budget_s} s"
                      + (f", {used:.0f} s of it used before" if used else "") + "), "
                      f"{counted(len(wanted), 'claim')} measurable here, design {parsed.design}")
    hint = f"resume with `{resume_command}`"
    slope = memory_slope(store)

    def judge(level):
        cells = load_cells(store, store.runs(experiment_id=experiment.id))
        return claim_runs.verdicts(parsed, cells, absent, aside, alpha=level, slope=slope, stored=False,
                                   interval_alpha=level)

    def on_look(progress, judgements):
        counts = {v: sum(j.verdict == v for j in judgements) for v in ("holds", "contradicted", "undecided")}
        err_console.print(f"look {progress.look} after {progress.rounds} rounds "
                          f"({time_text(progress)}): " + ", ".join(f"{n} {v}" for v, n in counts.items()))
        for j in judgements:
            if j.verdict == "undecided" and j.claim.id not in absent and j.claim.id not in aside:
                err_console.print(f"  {escape(j.claim.id)}: {j.interval_text()} (level {j.level:.4g})",
                                  highlight=False)

    def sequence_of_rounds():
        # A stop between two rounds (while a look is judged) is said and marked as one during a round is.
        try:
            return sequential.until_decided(
                store, parsed, experiment, wanted, budget_s=budget_s, alpha=alpha,
                run_round=lambda exp: exp_mod.execute(store, exp, _Quiet(), pool), judge=judge, on_look=on_look)
        except (KeyboardInterrupt, Terminated):
            exp_mod.set_status(store, experiment.id, exp_mod.INTERRUPTED)
            raise

    final, progress = resumable(sequence_of_rounds, f"experiment {experiment.id}", hint)
    exp_mod.set_status(store, experiment.id, exp_mod.FINISHED)
    sequence = {"experiment": experiment.id, "rounds": progress.rounds, "looks": progress.look,
                "budget_s": budget_s, "wall_s": round(progress.elapsed(), 1),
                "decided_at": {cid: j.level for cid, j in progress.decided.items()}}
    return final, store.runs(experiment_id=experiment.id), sequence


class _Quiet:
    """A reporter that says nothing per run (the looks say what matters)."""

    def __getattr__(self, name):
        return lambda *a, **k: None


def time_text(progress) -> str:
    s = progress.elapsed()
    return f"{int(s // 60)} min {int(s % 60)} s" if s >= 60 else f"{s:.0f} s"
