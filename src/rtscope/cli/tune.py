"""`rtscope tune`: search a spec's knob space for a goal; race the candidates, confirm the winner (docs/tune.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import RtscopeError, UsageError, choices
from ..words import counted
from .common import DbOption, JsonOption, Table, app, console, err_console, escape, open_store, print_json, settle
from .run import print_warnings, resumable


class TuneReporter:
    """One line per planned round and per stored run, on stderr (stdout stays for the result or --json)."""

    def planned(self, tune, step) -> None:
        where = "" if tune.target == "local" else f" ({tune.target})"
        for number, _, why in step.drops:
            err_console.print(f"tune {tune.id}{where}: candidate {number} dropped: {escape(why)}", highlight=False)
        if step.phase == "confirm":
            how = (f"{tune.confirm} interleaved runs of {len(set(step.result['roles'].values()))} arms"
                   if step.result.get("design") == "interleaved" else
                   f"{len(step.new_slots)} fresh runs ({tune.confirm} each)")
            err_console.print(f"tune {tune.id}{where}: race ended ({escape(step.why)}); confirmation: {how} of "
                              f"{roles_text(step.result['roles'])}", highlight=False)
        elif step.phase == "race":
            err_console.print(f"tune {tune.id}{where}: round {step.from_round + 1}: "
                              f"{counted(len(step.new_slots), 'run')}, "
                              f"{counted(len(step.new_candidates), 'new candidate')}", highlight=False)

    def run_started(self, tune, slot) -> None:
        pass

    def run_stored(self, tune, slot, run_id) -> None:
        made = f"run {run_id}" if isinstance(run_id, int) else "run spooled"   # spooled: the store unreachable
        err_console.print(f"{made}: candidate {slot['candidate']} ({slot['phase']}) "
                          f"{escape(slot['request']['cell'])}", highlight=False)


def roles_text(roles: dict[str, int]) -> str:
    """The confirmation's configurations in words: 'candidate 3 (winner), candidate 1 (runner-up) and the
    baseline (candidate 0)'; the baseline named once when it won the race."""
    winner, base, runner = roles["winner"], roles["baseline"], roles.get("runner_up")
    parts = [f"the baseline (candidate {base}), the race's winner" if winner == base
             else f"candidate {winner} (winner)"]
    if runner is not None:
        parts.append(f"candidate {runner} (runner-up)")
    if winner != base:
        parts.append(f"the baseline (candidate {base})")
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def seconds_text(s: float) -> str:
    """A duration for a person: 0.4 s, 6 s, 5 min, 1.5 h."""
    if s < 10:
        return f"{s:.2g} s"
    if s < 120:
        return f"{s:.0f} s"
    return f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


def pause_text(tune) -> str | None:
    """What the pause between calls costs a run (and the budget), and how to drop it when the spec did not ask
    for it; None when its workload does not pause."""
    found = tune.space.pause()
    if found is None:
        return None
    calls, pause_ms, where = found
    each = calls * pause_ms / 1e3
    text = (f"each {'baseline ' if where == 'knob' else ''}run: at least {calls:,} calls × {pause_ms:g} ms pause "
            f"= {seconds_text(each)}")
    if tune.budget.runs is not None:
        text += f", {counted(tune.budget.runs, 'run')} at least {seconds_text(each * tune.budget.runs)}"
    if where == "default":
        text += f" (the {tune.space.base.workload} workload's default pause_ms, {pause_ms:g} ms between calls)"
    if where != "knob":
        text += "; set pause_ms = 0 in the [[workload]] block's params for a faster search"
    return text


def _budget(text: Optional[str], tune_table, spec_arg) -> object:
    from ..experiment.spec.tune import budget_problem, parse_budget
    budget = parse_budget(text) if text is not None else tune_table.budget
    why = budget_problem(budget, tune_table.confirm)
    if why:
        raise UsageError(f"--budget: {why}" if text is not None else f"{spec_arg}: {why}")
    return budget


@app.command()
def tune(spec: Annotated[Path, typer.Argument(help="Tune spec (TOML with a \\[tune] table), see docs/tune.md.")],
         goal: Annotated[Optional[str], typer.Option(
             help="What to minimise: p99, max, stdev or mean (default: the spec's goal, else p99).")] = None,
         budget: Annotated[Optional[str], typer.Option(
             help="Runs (40) or a duration (90m, 2h) the whole tune may use, the confirmation included "
                  "(default: the spec's budget, else 60 runs).")] = None,
         target: Annotated[Optional[list[str]], typer.Option(
             "--target", help="Where to tune (repeatable: a fleet, each target tuned on its own, in parallel); "
                              "replaces the spec's `target`. With --resume ID: the target (of the tune's kind) "
                              "this process makes its runs on.")] = None,
         seed: Annotated[Optional[int], typer.Option(help="Seed of the proposals and run orders (default: the "
                                                          "spec's seed, else a fresh one).")] = None,
         resume: Annotated[bool, typer.Option(
             "--resume", help="Continue (or join) an unfinished tune of this spec: the latest ones, or tune ID; "
                              "several processes may work on one tune in a shared PostgreSQL store.")] = False,
         tune_id: Annotated[Optional[int], typer.Argument(metavar="ID", help="With --resume: the tune to work on.",
                                                          show_default=False)] = None,
         write_spec: Annotated[Optional[Path], typer.Option(
             "--write-spec", metavar="FILE", help="Write a plain matrix spec that repeats the confirmation "
                                                  "(a fleet: one file per target, FILE's name + the target).")] = None,
         json_out: JsonOption = False,
         db: DbOption = None) -> None:
    """Find the best knobs for a goal: candidates raced on fresh runs, the winner confirmed against a baseline."""
    from ..experiment import execute as exp_mod, spec as spec_mod, tune as tune_mod
    from ..experiment.spec.check import MAX_SEED
    from ..experiment.spec.tune import GOALS
    from ..targets import LOCAL, Pool

    if tune_id is not None and not resume:
        raise UsageError(f"a tune id ({tune_id}) is only taken with --resume: `rtscope tune {spec} --resume {tune_id}`")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise UsageError(f"--seed must be 0..{MAX_SEED} (as a spec's seed), not {seed}")
    identity = exp_mod.spec_identity(spec)
    with Pool() as pool:
        if resume:
            changed = [n for n, v in (("--goal", goal), ("--budget", budget), ("--seed", seed)) if v is not None]
            if changed:
                raise UsageError(f"{', '.join(changed)} cannot change a resumed tune")
            if target and (len(target) > 1 or tune_id is None):
                raise UsageError("with --resume, --target names the one target this process makes its runs on, "
                                 "for one tune: `rtscope tune SPEC --resume ID --target T`")
            store = open_store(db)
            ids = [tune_id] if tune_id is not None else tune_mod.unfinished(store, identity)
            if not ids:
                raise UsageError(f"no unfinished tune of {spec} in store {store.shown_url}; start one with "
                                 f"`rtscope tune {spec}`")
            tunes = [tune_mod.load(store, i) for i in ids]
            for t in tunes:
                if t.spec_path and t.spec_path != identity:
                    err_console.print(f"[yellow]warning:[/] tune {t.id} was started from {escape(t.spec_path)}, "
                                      f"not {escape(identity)}; it goes on with the spec recorded then")
            for t in tunes:
                err_console.print(f"resuming tune {t.id} ({escape(t.name)}): round {t.round}, phase {t.phase}")
        else:
            parsed = spec_mod.parse(spec_mod.read_text(spec), str(spec))  # every problem before anything runs
            if parsed.tune is None:
                raise UsageError(f"{spec} has no [tune] table: it is a matrix spec (`rtscope run {spec}`); a tune "
                                 "spec names its goal, budget and baseline in [tune] (docs/tune.md)")
            print_warnings(parsed)
            if goal is not None and goal not in GOALS:
                raise UsageError(f"unknown goal {goal!r}; valid goals: {choices(GOALS)}")
            chosen_budget = _budget(budget, parsed.tune, spec)
            names = list(dict.fromkeys(target or [parsed.cells[0].request.settings.get("target", LOCAL)]))
            chosen_seed = seed if seed is not None else parsed.seed if parsed.seed is not None else exp_mod.new_seed()
            spaces = {name: _space(tune_mod, parsed, name, pool) for name in names}
            store = open_store(db)
            tunes = [tune_mod.create(store, parsed, identity, name, chosen_seed, goal or parsed.tune.goal,
                                     chosen_budget, space) for name, space in spaces.items()]
            for t in tunes:
                err_console.print(f"tune {t.id} (experiment {t.experiment_id}): {escape(t.name)}, goal {t.goal}, "
                                  f"budget {t.budget.text}, {len(t.space.knobs)} knobs "
                                  f"({', '.join(k.name for k in t.space.knobs)}), seed {t.seed}")
        for t in tunes[:1]:           # a fleet's tunes share the workload block
            if (why := pause_text(t)) is not None:
                err_console.print(f"tune {t.id}: {escape(why)}", highlight=False)
        hint = f"resume with `rtscope tune {spec} --resume" + (f" {tunes[0].id}`" if len(tunes) == 1 else "`")
        what = f"tune {', '.join(str(t.id) for t in tunes)}"
        on = target[0] if resume and target else None
        try:
            tunes = resumable(lambda: tune_mod.work(store, tunes, pool, TuneReporter(), on), what, hint)
        except tune_mod.Discarded as d:
            raise _discarded(d, tunes, spec) from None
    settle(store, what)
    docs = [t.result for t in tunes]
    if write_spec is not None:
        for t, doc in zip(tunes, docs):
            path = write_spec if len(tunes) == 1 else write_spec.with_name(f"{write_spec.stem}.{t.target}"
                                                                          f"{write_spec.suffix}")
            path.write_text(tune_mod.matrix_spec(doc, t.confirm))
            err_console.print(f"wrote {escape(str(path))}: the confirmation of tune {t.id} as a matrix spec")
    if json_out:
        print_json(docs[0] if len(docs) == 1 else docs)
        return
    for doc in docs:
        _print_result(doc)


def _discarded(d, tunes, spec) -> RtscopeError:
    """The failure of tunes of which some stored no run (removed from the store): nothing to resume of those."""
    gone = [t for t in tunes if t.id in d.ids]
    kept = [t for t in tunes if t.id not in d.ids and t.phase != "finished"]
    text = (f"{d.error}\ntune {', '.join(str(t.id) for t in gone)} stored no run, so it was removed from the "
            f"store with its experiment (nothing to resume); start again with `rtscope tune {spec}`")
    if kept:
        text += (f"\ntune {', '.join(str(t.id) for t in kept)} stopped (marked failed); resume with "
                 f"`rtscope tune {spec} --resume" + (f" {kept[0].id}`" if len(kept) == 1 else "`"))
    return RtscopeError(text, exit_code=d.error.exit_code)


def _space(tune_mod, parsed, name: str, pool):
    """The space on one target: what it cannot apply dropped with the reason, refused if nothing is left."""
    from ..experiment import execute as exp_mod
    space = tune_mod.Space.of(parsed, name)
    target = pool.get(name)
    space = space.restrict(target)
    where = "" if name == "local" else f" on target {name}"
    for why in space.dropped:
        err_console.print(f"[yellow]warning:[/] left out of the search{escape(where)}: {escape(why)}")
    if not space.knobs:
        line = parsed.knobs[0].line if parsed.knobs else None
        raise UsageError(f"{parsed.source}{f':{line}' if line else ''}: nothing left to tune{where}: "
                         + "; ".join(space.dropped))
    why = exp_mod.Availability(pool).reason(space.request(space.baseline))
    if why:
        raise RtscopeError(f"{parsed.source}: the tune cannot run{where}: {why}")
    return space


def _knobs(settings: dict) -> str:
    from ..analysis.select import value_text
    return " ".join(f"{k}={value_text(v)}" for k, v in sorted(settings.items())) or "defaults"


def _print_result(doc: dict) -> None:
    from ..analysis.recommend import p_text
    scale, unit = (1e3, "µs") if doc.get("unit") == "ns" else (1, doc.get("unit") or "")
    where = "" if doc["target"] == "local" else f" on {doc['target']}"
    console.print(f"tune {doc['tune']}{escape(where)} (experiment {doc['experiment']}): goal {doc['goal']}, "
                  f"{counted(doc['runs_used'], 'run')}; the race ended: {escape(doc['race_ended'])}")
    best, base = doc["best"], doc["baseline"]
    if doc["verdict"] == "improved":
        imp = doc["improvement"]
        console.print(f"[bold]best: {escape(_knobs(best['settings']))}[/] — {doc['goal']} {imp['change']:+.1%} "
                      f"against the baseline {escape(_knobs(base['settings']))} (confirmed on fresh runs)")
    else:
        console.print(f"[bold]no configuration beat the baseline {escape(_knobs(base['settings']))} "
                      f"significantly[/] on fresh runs; the race's winner was "
                      f"{escape(_knobs(doc['winner']['settings']))}")
    shown = best if doc["verdict"] == "improved" else doc["winner"]
    table = Table(title=f"confirmation: {_knobs(shown['settings'])} vs baseline" + (f" ({unit})" if unit else ""))
    for col in ("metric", "baseline", "value", "change", "95% CI of difference", "p (Holm)", "verdict"):
        table.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for r in doc["confirmation"]:
        ci = r["ci95_difference"]
        fmt = (lambda v: "-" if v is None else f"{v / scale:.2f}")
        table.add_row(r["metric"], fmt(r["baseline"]), fmt(r["value"]),
                      "-" if r["ratio"] is None else f"{r['ratio'] - 1:+.1%}",
                      "-" if not ci else f"{ci[0] / scale:.2f} .. {ci[1] / scale:.2f}",
                      p_text(r["p_holm"]), r["verdict"])
    console.print(table)
    for note in doc.get("confirmation_notes", []):
        console.print(f"note: {escape(note)}", soft_wrap=True)
    if doc["importance"]:
        console.print("knobs that mattered (Optuna's importance): " +
                      ", ".join(f"{k} {v:.2f}" for k, v in doc["importance"].items()))
    console.print(f"compare, report and recommend work on it: `rtscope report --experiment {doc['experiment']}`")
