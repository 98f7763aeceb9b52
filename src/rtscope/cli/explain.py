"""rtscope explain: why a run's worst samples were late (setting explain, docs/explain.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from ..words import counted
from .common import DbOption, JsonOption, Table, app, console, err_console, escape, open_store, print_json


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:,.1f}"


def _detail(cause: dict) -> str:
    """What else is known of a cause: a thread's priority as chrt says it (FIFO 90, nice 0); a GC's count and heap
    sizes (words)."""
    from ..analysis.explain_shares import priority
    parts = []
    if cause.get("prio") is not None:
        parts.append(priority(cause["prio"]))
    if cause.get("count", 1) > 1:
        parts.append(f"{cause['count']}×")
    if cause.get("heap_before") is not None:
        parts.append(f"heap {cause['heap_before']:,} → {cause.get('heap_after', 0):,} words")
    return ", ".join(parts)


def _not_explained(run_id: int) -> UsageError:
    return UsageError(f"run {run_id} has no explained samples: measure it with setting explain = K "
                      "(K worst samples per thread), e.g. `explain = 10` in [workload.settings]; see docs/explain.md")


def _print_steal(got: dict | None) -> None:
    if got is None:
        return
    cpus = ", ".join(f"CPU {c} {_us(ns)} µs" for c, ns in got["per_cpu_ns"].items())
    console.print(f"\nsteal time (/proc/stat, whole run, 10 ms steps): the hypervisor took {_us(got['steal_ns'])} µs "
                  f"from the traced CPUs ({cpus}); of the explained samples' unexplained excess "
                  f"({_us(got['unexplained_excess_ns'])} µs) at most {_us(got['hypervisor_at_most_ns'])} µs is the "
                  "hypervisor's")


def _experiment_targets(store, run) -> dict:
    """The target definitions of the run's experiment's spec ([targets.NAME]), defined again in this process as
    in the one that made the run, so that its target can be asked."""
    from .. import targets
    if run.experiment_id is None:
        return {}
    row = store.experiment_row(run.experiment_id) or {}
    tables = ((row.get("spec") or {}).get("parsed") or {}).get("targets") or {}
    for name, table in tables.items():
        targets.define(name, table, f"experiment {run.experiment_id}'s [targets.{name}]")
    return tables


def _remedies(store, run) -> tuple[list, list[dict]]:
    """The run's remedies, ranked, each with whether its target can apply it (docs/explain.md, "Remedies"), and
    its culprits no setting takes away."""
    from ..analysis import explain_shares, explain_remedies
    from ..experiment.explain_spec import applies_on
    _experiment_targets(store, run)
    explained = store.causes(run.id)
    median = explain_shares.run_median(store, run) or 0
    return (applies_on(run, explain_remedies.suggest(run, explained, median)),
            explain_remedies.unremedied(explained, median))


def _print_remedies(found: list, unremedied: list[dict]) -> None:
    from ..analysis.explain_shares import culprit
    for u in unremedied:
        console.print(f"\n[bold]no setting[/] takes away {escape(culprit(u['for']))} ({u['share']:.0%} of the "
                      f"excess): {escape(u['why'])}")
    if not found:
        console.print("\n[bold]remedies[/]: none (" + ("no other culprit" if unremedied else "no culprit")
                      + " takes 5 % or more of the excess above the median)")
        return
    t = Table(title="remedies, ranked by the share of the excess their cause took")
    for head in ("cause", "share", "setting", "on target", "why"):
        t.add_column(head, justify="right" if head == "share" else "left")
    for r in found:
        a = r.applies_on
        t.add_row(escape(r.cause_label), f"{r.share:.0%}", escape(f"{r.setting} = {r.value_text}"),
                  escape(f"{a['target']}: " + ("yes" if a["ok"] else f"no: {a['reason']}")), escape(r.why))
    console.print(t)


def _write_spec(store, run, found: list, path: Path, repetitions: int, most: int) -> None:
    from ..experiment.explain_spec import ab_spec
    from ..fileio import write_atomic
    if path.is_dir() or not path.parent.is_dir():
        raise UsageError(f"--write-spec {path}: " + ("is a directory; give a file name such as "
                         f"{path / 'remedies.toml'}" if path.is_dir() else f"directory {path.parent} does not exist"))
    text = ab_spec(run, found, repetitions=repetitions, most=most, targets=_experiment_targets(store, run) or None)
    write_atomic(path, text, "spec")
    err_console.print(f"wrote {escape(str(path))}: run it with `rtscope run {escape(str(path))}`, then "
                      f"`rtscope compare --experiment remedies-run-{run.id}`")


@app.command("explain")
def explain(run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see `rtscope runs`).")],
            worst: Annotated[Optional[int], typer.Option("--worst", min=1, metavar="K",
                                                         help="Only the K worst explained samples.")] = None,
            suggest: Annotated[bool, typer.Option(
                "--suggest", help="Also the remedies: per culprit the settings that would take it away, ranked by "
                                  "its share of the excess, and whether the run's target can apply each.")] = False,
            write_spec: Annotated[Optional[Path], typer.Option(
                "--write-spec", metavar="FILE", help="Write an A/B spec: the run's configuration as the baseline "
                                                     "and a cell per remedy that applies (and their combination).")] = None,
            repetitions: Annotated[int, typer.Option("--repetitions", min=2, metavar="N",
                                                     help="--write-spec: runs per cell.")] = 5,
            most: Annotated[int, typer.Option("--remedies", min=1, metavar="N",
                                              help="--write-spec: measure the N best remedies that apply.")] = 3,
            db: DbOption = None, json_out: JsonOption = False) -> None:
    """Why the worst samples of a run were late: per sample the interrupts, softirqs, threads, GCs that ran
    instead, and the share of the excess time per cause over the run; with --suggest, the remedies."""
    from ..analysis import explain_shares
    from ..analysis.documents import explain_document
    store = open_store(db)
    run = store.get_run(run_id)
    if not store.causes(run.id):
        raise _not_explained(run.id)
    found, unremedied = _remedies(store, run) if suggest or write_spec is not None else ([], [])
    if write_spec is not None:
        _write_spec(store, run, found, write_spec, repetitions, most)
    if json_out:
        doc = explain_document(store, run, worst)
        if suggest:
            doc["remedies"] = [r.to_json() for r in found]
            doc["unremedied"] = unremedied
        print_json(doc)
        return
    explained = store.causes(run.id)
    explained = explained[:worst] if worst is not None else explained
    median = explain_shares.run_median(store, run) or 0
    summary = explain_shares.shares(explained, median)
    console.print(f"[bold]run {run.id}[/]: {escape(run.label)}; {counted(len(explained), 'explained sample')}, largest first")
    for s in explained:
        where = ", ".join(p for p in (f"thread {s['thread']}" if s["thread"] is not None else "",
                                      f"CPU {s['cpu']}" if s["cpu"] is not None else "",
                                      f"scheduler {s['scheduler']}" if s.get("scheduler") is not None else "",
                                      f"cycle {s['cycle']}" if s.get("cycle") is not None else "") if p)
        console.print(f"\n[bold]sample {s['sample_index']}[/] ({where}): {_us(s['value_ns'])} µs")
        if s.get("note"):
            console.print(f"  [yellow]not explained:[/] {escape(s['note'])}")
            continue
        table = Table(show_header=True, box=None, pad_edge=False)
        table.add_column("cause")
        table.add_column("detail")
        table.add_column("µs", justify="right")
        table.add_column("share", justify="right")
        for c in s.get("causes", []):
            table.add_row(escape(explain_shares.culprit(c)), escape(_detail(c)),
                          _us(c["duration_ns"]), f"{c['duration_ns'] / s['value_ns']:.0%}")
        table.add_row("the measuring " + ("process" if run.runtime == "beam" else "thread") + " itself", "", _us(s.get("self_ns", 0)),
                      f"{s.get('self_ns', 0) / s['value_ns']:.0%}")
        table.add_row("unexplained", "", _us(s["unexplained_ns"]), f"{s['unexplained_ns'] / s['value_ns']:.0%}")
        console.print(table)
    if not summary:
        console.print(f"\nno explained sample above the run's median ({_us(median)} µs)")
        _print_steal(explain_shares.steal(run, explained, median))
        if suggest:
            _print_remedies(found, unremedied)
        return
    for by, title in (("kind", "per cause kind"), ("culprit", "per culprit")):
        t = Table(title=f"share of the excess above the median ({_us(median)} µs), {title}")
        t.add_column(by)
        t.add_column("excess µs", justify="right")
        t.add_column("share", justify="right")
        t.add_column("samples", justify="right")
        for r in summary:
            if r.by == by:
                t.add_row(escape(r.label), _us(r.excess_ns), f"{r.share:.0%}", str(r.samples))
        console.print(t)
    _print_steal(explain_shares.steal(run, explained, median))
    if suggest:
        _print_remedies(found, unremedied)
