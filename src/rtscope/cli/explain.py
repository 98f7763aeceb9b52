"""rtscope explain: why a run's worst samples were late (setting explain, docs/explain.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import UsageError
from .common import DbOption, JsonOption, Table, app, console, escape, open_store, print_json


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:,.1f}"


def _detail(cause: dict) -> str:
    """What else is known of a cause: a thread's priority as chrt says it (FIFO 90, nice 0); a GC's count and heap
    sizes (words)."""
    from ..analysis.causes import priority
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


@app.command("explain")
def explain(run_id: Annotated[int, typer.Argument(metavar="RUN", help="Run id (see `rtscope runs`).")],
            worst: Annotated[Optional[int], typer.Option("--worst", min=1, metavar="K",
                                                         help="Only the K worst explained samples.")] = None,
            db: DbOption = None, json_out: JsonOption = False) -> None:
    """Why the worst samples of a run were late: per sample the interrupts, softirqs, threads, GCs that ran
    instead, and the share of the excess time per cause over the run."""
    from ..analysis import causes
    from ..analysis.documents import explain_document
    store = open_store(db)
    run = store.get_run(run_id)
    if json_out:
        doc = explain_document(store, run, worst)
        if doc is None:
            raise _not_explained(run.id)
        print_json(doc)
        return
    explained = store.causes(run.id)
    if not explained:
        raise _not_explained(run.id)
    explained = explained[:worst] if worst is not None else explained
    median = causes.run_median(store, run) or 0
    summary = causes.shares(explained, median)
    console.print(f"[bold]run {run.id}[/]: {escape(run.label)}; {len(explained)} explained sample(s), largest first")
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
            table.add_row(escape(causes.culprit(c)), escape(_detail(c)),
                          _us(c["duration_ns"]), f"{c['duration_ns'] / s['value_ns']:.0%}")
        table.add_row("the measuring " + ("process" if run.runtime == "beam" else "thread") + " itself", "", _us(s.get("self_ns", 0)),
                      f"{s.get('self_ns', 0) / s['value_ns']:.0%}")
        table.add_row("unexplained", "", _us(s["unexplained_ns"]), f"{s['unexplained_ns'] / s['value_ns']:.0%}")
        console.print(table)
    if not summary:
        console.print(f"\nno explained sample above the run's median ({_us(median)} µs)")
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
