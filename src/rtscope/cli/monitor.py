"""Command monitor: OSADL-style long-term latency monitoring of a target (docs/lab.md)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import UsageError
from .common import DbOption, app, console, err_console, escape, open_store
from .run import execute_resumable, print_machine_warnings


class LiveView:
    """Per interval as it is stored: each CPU's maximum and p99.99, then the worst case of the intervals so far
    (phases: intervals alternate idle and loaded, so each phase's is its own)."""

    def __init__(self, store, plan_total: int, phases: bool = False):
        self.store, self.total, self.phases = store, plan_total, phases

    def started(self, experiment, total: int, done: int) -> None:
        console.print(f"monitor {experiment.id}: {escape(experiment.name)}, {total} intervals, {done} stored already")

    def run_started(self, p) -> None:
        pass

    def run_stored(self, p, run_id: int) -> None:
        from ..experiment import monitor as mon
        run = self.store.get_run(run_id)
        cpus = "  ".join(f"cpu{r['cpu']} max {r['max_us']:.1f} p99.99 {r['p9999_us']:.1f}"
                         + (f" (+{r['overflows']} over)" if r["overflows"] else "") for r in mon.per_cpu(run))
        load = p.request.settings.get("load", "none")
        console.print(f"[{p.index + 1}/{self.total}] load {load:9} {escape(run['finished_at'] or '')}  {cpus} µs",
                      highlight=False)
        why = mon.top_cause(self.store, run) if p.request.settings.get("explain") else None
        if why:
            console.print(f"      why: {escape(why)} (rtscope explain {run_id})", highlight=False)
        from .tail import worst_case_text
        wc, intervals = mon.worst_case_so_far(self.store, run)
        details = (f"{intervals} interval{'s' if intervals > 1 else ''} of load {load}; rtscope tail --experiment "
                   f"{run.experiment_id}" + (f" --where load={load}" if self.phases else ""))
        console.print("      " + worst_case_text(wc, run.primary["unit"], details), highlight=False)

    def run_skipped(self, p, reason: str) -> None:
        err_console.print(f"[yellow]skipped interval {p.index + 1}:[/] {escape(reason)}")


def refuse_unavailable(plan, pool) -> None:
    """A monitoring whose first interval cannot run here (a missing runtime; --explain without tracefs or
    root on the target) is refused before anything is stored."""
    from ..errors import RtscopeError
    from ..experiment import execute as exp_mod, monitor as mon
    _, planned = mon.planned_runs(plan)
    why = exp_mod.Availability(pool).reason(planned[0].request)
    if why:
        raise RtscopeError(f"monitor of target {plan.target} cannot run: {why}")


@app.command()
def monitor(target: Annotated[str, typer.Option(help="The target to watch (local, a defined target or a URL).")]
            = "local",
            duration: Annotated[str, typer.Option(help="How long: 6h, 30m, 1h30m ...")] = "1h",
            interval: Annotated[str, typer.Option(help="One stored run per interval: 5m, 60s ...")] = "5m",
            interval_us: Annotated[float, typer.Option("--interval-us", help="Timer period of the probe.")] = 200,
            runtime: Annotated[str, typer.Option(help="native (rtprobe timer) or cyclictest.")] = "native",
            load: Annotated[Optional[str], typer.Option(
                help="Alternate idle and loaded phases (cpu, io, vm, hackbench), as OSADL's farm does.")] = None,
            phase: Annotated[Optional[str], typer.Option(
                help="Length of each idle/load phase (default: a sixth of the duration, at most 1 h).")] = None,
            rt_priority: Annotated[Optional[int], typer.Option(
                "--rt-priority", metavar="N", help="The probe's SCHED_FIFO priority 1..99, as OSADL's farm runs "
                "cyclictest (default: normal scheduling).")] = None,
            explain: Annotated[int, typer.Option(
                "--explain", metavar="K", help="Explain each interval's K worst samples per CPU: what ran instead "
                "(setting explain: the target's tracefs, root; docs/explain.md). 0 = off.")] = 0,
            resume: Annotated[bool, typer.Option("--resume", help="Continue the latest unfinished monitoring of "
                                                 "this target (after a crash or a reboot of the target).")] = False,
            db: DbOption = None) -> None:
    """Watch a target's timer latency for hours: one histogram run per interval and CPU, stored as it ends."""
    from ..experiment import execute as exp_mod, monitor as mon
    from ..targets import Pool
    identity = f"monitor:{target}"
    store = open_store(db)
    if resume:
        experiment = exp_mod.latest_unfinished(store, identity)
        if experiment is None:
            raise UsageError(f"no unfinished monitoring of target {target} in store {store.url}")
    else:
        plan = mon.make_plan(target, duration, interval, interval_us, runtime, load, phase, explain, rt_priority)
    with Pool() as pool:
        if not resume:
            refuse_unavailable(plan, pool)
            experiment = mon.start(store, plan, identity)
        print_machine_warnings(experiment, pool)
        phases = len({q.request.settings.get("load") for q in experiment.plan}) > 1
        outcome = execute_resumable(store, experiment, LiveView(store, len(experiment.plan), phases), pool,
                                    f"resume with `rtscope monitor --target {target} --resume`")
    console.print(f"monitoring {experiment.id} finished: {len(outcome.stored) + outcome.already} intervals stored")
