"""Command monitor: OSADL-style long-term latency monitoring of a target, or of a whole fleet from one process
(docs/lab.md)."""

from __future__ import annotations

import threading
from typing import Annotated, Optional

import typer

from ..errors import UsageError
from ..words import counted
from .common import DbOption, Table, app, console, err_console, escape, open_store, settle
from .run import execute_resumable, print_machine_warnings


def interval_line(store, run, load: str, explain: bool) -> str:
    """An interval's line: each CPU's maximum and p99.99 (and, explained, its top cause on a second line)."""
    from ..experiment import monitor as mon
    cpus = "  ".join(f"cpu{r['cpu']} max {r['max_us']:.1f} p99.99 {r['p9999_us']:.1f}"
                     + (f" (+{r['overflows']} over)" if r["overflows"] else "") for r in mon.per_cpu(run))
    line = f"load {load:9} {escape(run['finished_at'] or '')}  {cpus} µs"
    why = mon.top_cause(store, run) if explain else None
    return line + (f"\n      why: {escape(why)} (rtscope explain {run.id})" if why else "")


def running_bound_line(store, run, load: str, phases: bool) -> str:
    """The worst case of the monitoring's intervals so far of this interval's phase: the largest sample and the
    bound at p = 1e-9 per sample, or why there is none."""
    from ..experiment import monitor as mon
    from .tail import worst_case_text
    wc, intervals = mon.worst_case_so_far(store, run)
    newest = "the newest " if intervals == mon.RUNNING_INTERVALS else ""
    details = (f"{newest}{intervals} interval{'s' if intervals > 1 else ''} of load {load}; "
               f"rtscope tail --experiment {run.experiment_id}" + (f" --where load={load}" if phases else ""))
    return worst_case_text(wc, run.primary["unit"], details)


class LiveView:
    """Per interval as it is stored: each CPU's maximum and p99.99, then the worst case of the intervals so far
    (phases: intervals alternate idle and loaded, so each phase's is its own)."""

    def __init__(self, store, plan_total: int, phases: bool = False):
        self.store, self.total, self.phases = store, plan_total, phases

    def started(self, experiment, total: int, done: int) -> None:
        console.print(f"monitor {experiment.id}: {escape(experiment.name)}, {counted(total, 'interval')}, "
                      f"{done} stored already")

    def run_started(self, p) -> None:
        pass

    def run_stored(self, p, run_id: int) -> None:
        load = p.request.settings.get("load", "none")
        try:
            run = self.store.get_run(run_id)
            line = interval_line(self.store, run, load, bool(p.request.settings.get("explain")))
            bound = running_bound_line(self.store, run, load, self.phases)
        except Exception as e:  # noqa: BLE001  (the store went away just after storing it: it is stored)
            if not store_gone(e):
                raise
            console.print(f"[{p.index + 1}/{self.total}] load {load:9} stored as run {run_id} (its figures are "
                          "not shown: the store stopped answering)", highlight=False)
            return
        console.print(f"[{p.index + 1}/{self.total}] {line}", highlight=False)
        console.print("      " + bound, highlight=False)

    def run_spooled(self, p, spooled) -> None:
        load = p.request.settings.get("load", "none")
        console.print(f"[{p.index + 1}/{self.total}] load {load:9} measured, kept in the spool (the store is "
                      "unreachable; written when it answers)", highlight=False)

    def run_skipped(self, p, reason: str) -> None:
        err_console.print(f"[yellow]skipped interval {p.index + 1}:[/] {escape(reason)}")

    def run_failed(self, p, reason: str) -> None:
        console.print(f"[{p.index + 1}/{self.total}] [red]failed[/], not stored: {escape(reason)}", highlight=False,
                      soft_wrap=True)

    def target_down(self, name: str, reason: str, outage) -> None:
        after = (f", given up after {outage.give_up_after} interval{'s' if outage.give_up_after > 1 else ''} down"
                 if outage.give_up_after else "")
        console.print(f"{escape(name)} [red]down[/]: {escape(reason)} (asked again every {outage.retry_s:g} s"
                      f"{after})", highlight=False, soft_wrap=True)

    def target_up(self, name: str) -> None:
        console.print(f"{escape(name)} answers again: its intervals resume", highlight=False)


def store_gone(e: BaseException) -> bool:
    """Whether an error is the store's being unreachable (the monitor goes on: its intervals are spooled)."""
    from ..store import unreachable
    return unreachable(e)


def refuse_unavailable(plan, pool) -> None:
    """A monitoring whose first interval cannot run here (a missing runtime; --explain without tracefs or
    root on the target) is refused before anything is stored."""
    from ..errors import RtscopeError
    from ..experiment import execute as exp_mod, monitor as mon
    _, planned = mon.planned_runs(plan)
    why = exp_mod.Availability(pool).reason(planned[0].request)
    if why:
        raise RtscopeError(f"monitor of target {plan.target} cannot run: {why}")


class FleetView:
    """A fleet's progress: one line per interval per board (and per board that goes down, comes back, is taken
    over or finishes), and on a terminal a compact live table under them: board, state, intervals, last
    interval's worst CPU."""

    def __init__(self, store, controller: str, boards: list[str], live: bool, plan_for=None):
        self.store, self.controller, self.plan_for = store, controller, plan_for
        self.rows = {b: {"state": "waiting", "done": 0, "total": None, "last": "", "note": ""} for b in boards}
        self.lock = threading.Lock()
        self.live = None
        if live:
            from rich.live import Live
            self.live = Live(self._table(), console=console, auto_refresh=False, transient=False)

    def __enter__(self) -> "FleetView":
        if self.live is not None:
            self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.stop()

    def _table(self):
        t = Table(title=f"controller {self.controller}", title_justify="left", box=None, pad_edge=False)
        for name in ("board", "state", "intervals", "last interval (worst CPU, µs)", "note"):
            t.add_column(name)
        for b, r in self.rows.items():
            t.add_row(escape(b), r["state"], f"{r['done']}/{r['total'] or '?'}", r["last"], escape(r["note"]))
        return t

    def _say(self, board: str, text: str, **row) -> None:
        with self.lock:
            self.rows[board].update(row)
            (self.live.console if self.live else console).print(f"{escape(board)} {text}", highlight=False,
                                                               soft_wrap=True)
            if self.live is not None:
                self.live.update(self._table(), refresh=True)

    def claimed(self, board, experiment_id, done, total) -> None:
        self._say(board, f"watched: monitoring {experiment_id}, {done} of {counted(total, 'interval')} stored already",
                  state="watching", done=done, total=total, note="")

    def stored(self, board, p, total, run) -> None:
        from ..experiment import monitor as mon
        load = p.request.settings.get("load", "none")
        line = interval_line(self.store, run, load, bool(p.request.settings.get("explain")))
        line += "\n      " + running_bound_line(self.store, run, load, self._phases(board))
        cpus = mon.per_cpu(run)
        worst = (f"max {max(c['max_us'] for c in cpus):.1f} p99.99 {max(c['p9999_us'] for c in cpus):.1f}"
                 if cpus else "–")
        self._say(board, f"[{p.index + 1}/{total}] {line}", state="watching", done=self.rows[board]["done"] + 1,
                  last=worst, note="")

    def _phases(self, board: str) -> bool:
        """Whether the board's intervals alternate idle and loaded phases (each phase has its own bound)."""
        return bool(self.plan_for and self.plan_for(board).load)

    def down(self, board, reason) -> None:
        self._say(board, f"[red]down[/]: {escape(reason)} (asked again until it answers)", state="down",
                  note=reason[:60])

    def up(self, board) -> None:
        self._say(board, "answers again: its intervals resume", state="watching", note="")

    def lost(self, board, why) -> None:
        self._say(board, f"no longer watched here: {escape(why)}", state="elsewhere", note=why[:60])

    def finished(self, board, experiment_id) -> None:
        self._say(board, f"monitoring {experiment_id} finished", state="finished", note="")

    def kept(self, board, p, total, note) -> None:
        self._say(board, f"[{p.index + 1}/{total}] {escape(note)}", state="watching",
                  done=self.rows[board]["done"] + 1, note=note[:60])

    def gave_up(self, board, experiment_id, reason) -> None:
        self._say(board, f"[red]incomplete[/]: monitoring {experiment_id} {escape(reason)}", state="incomplete",
                  note=reason[:60])


EXIT_INCOMPLETE = 3   # a monitoring ended with some boards given up on (--give-up-after)


def raise_incomplete(incomplete: dict[str, str]) -> None:
    """The end of a monitoring some of whose boards were given up on: their names and why, exit 3."""
    from ..errors import RtscopeError
    raise RtscopeError("incomplete monitorings (each board's stored intervals are kept; the same command "
                       "continues them once the board answers):\n  "
                       + "\n  ".join(f"{n}: {why}" for n, why in sorted(incomplete.items())),
                       exit_code=EXIT_INCOMPLETE)


def monitor_fleet(names: list[str], plan_for, db: Optional[str], give_up_after: int) -> None:
    """Every board of `names` from this process, sharing the lab with other controllers through the store."""
    from ..experiment import fleet
    from ..signals import Terminated
    store = open_store(db)
    name = fleet.controller_name()
    view = FleetView(store, name, names, live=console.is_terminal, plan_for=plan_for)
    controller = fleet.Controller(store, names, plan_for, view, name, give_up_after)
    console.print(f"controller {name}: {counted(len(names), 'board')} ({', '.join(names)}), store {escape(store.url)}, "
                  f"lease {controller.lease_s:.0f} s", highlight=False)
    try:
        with view:
            outcome = controller.run()
    except KeyboardInterrupt:
        from .run import EXIT_SIGINT
        raise_stopped("interrupted", EXIT_SIGINT)
    except Terminated:
        from .run import EXIT_SIGTERM
        raise_stopped("terminated (SIGTERM)", EXIT_SIGTERM)
    settle(store, f"controller {name}")
    failed = {n: e for n, e in controller.failures.items() if n not in outcome.finished}
    incomplete = (f", {len(outcome.incomplete)} incomplete ({', '.join(sorted(outcome.incomplete))})"
                  if outcome.incomplete else "")
    console.print(f"controller {name} finished: {len(outcome.finished)} of {len(names)} boards' monitorings "
                  f"finished{incomplete}, {counted(outcome.stored, 'interval')} stored by this controller",
                  highlight=False)
    from ..errors import RtscopeError
    if failed:
        raise RtscopeError("boards stopped: " + "; ".join(f"{n}: {e}" for n, e in sorted(failed.items())))
    if outcome.incomplete:
        raise_incomplete(outcome.incomplete)


def raise_stopped(what: str, code: int) -> None:
    from ..errors import RtscopeError
    raise RtscopeError(f"{what}: every board's stored interval is kept, its monitoring marked interrupted and its "
                       "lease given back; start the same `rtscope monitor --target ...` again (or another "
                       "controller takes the boards over) to continue", exit_code=code)


@app.command()
def monitor(target: Annotated[list[str], typer.Option(
                help="The target to watch (local, a defined target or a URL); repeat it, or name a fleet of the "
                     "targets file ([fleets]), to watch several boards from this process.")] = ["local"],  # noqa: B006
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
            give_up_after: Annotated[int, typer.Option(
                "--give-up-after", metavar="N", help="A board that stops answering is asked again; down for N "
                "intervals, its monitoring is marked incomplete (with the reason) and the command ends when the "
                "other boards are done, exit 3. 0 = keep asking until it answers.")] = 2,
            db: DbOption = None) -> None:
    """Watch a target's timer latency for hours: one histogram run per interval and CPU, stored as it ends.
    Several targets (or a fleet) are watched from this one process, shared with other controllers of the lab
    through the store (see `rtscope lab`)."""
    from ..experiment import execute as exp_mod, monitor as mon
    from ..experiment.outage import Outage, check_give_up_after
    from ..targets import FLEETS, Pool, expand, resolve
    check_give_up_after(give_up_after)
    names = expand(target)
    if len(names) > 1 or target[0] in FLEETS:
        if resume:
            raise UsageError("--resume is for one target: a fleet's controller always continues its boards' "
                             "unfinished monitorings; start it without --resume")
        for n in names:
            try:
                resolve(n)
            except ValueError as e:
                raise UsageError(str(e)) from None
        plans = {n: mon.make_plan(n, duration, interval, interval_us, runtime, load, phase, explain, rt_priority)
                 for n in names}
        monitor_fleet(names, plans.__getitem__, db, give_up_after)
        return
    target = names[0]
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
        mon.alone_watches(store, target)
        print_machine_warnings(experiment, pool)
        phases = len({q.request.settings.get("load") for q in experiment.plan}) > 1
        outage = Outage(target, mon.interval_s_of(experiment), give_up_after)
        outcome = execute_resumable(store, experiment, LiveView(store, len(experiment.plan), phases), pool,
                                    f"resume with `rtscope monitor --target {target} --resume`", outage)
    if outcome.incomplete:
        mon.alone_gave_up(store, target, experiment.id, outcome.incomplete)
    settle(store, f"monitoring {experiment.id}")
    spooled = f" ({len(outcome.spooled)} of them through the spool)" if outcome.spooled else ""
    stored = len(outcome.stored) + len(outcome.spooled) + outcome.already
    if outcome.incomplete:
        console.print(f"monitoring {experiment.id} incomplete: {stored} of "
                      f"{counted(len(experiment.plan), 'interval')} stored"
                      f"{spooled}; target {escape(target)} given up on", highlight=False)
        raise_incomplete({target: outcome.incomplete})
    console.print(f"monitoring {experiment.id} finished: {counted(stored, 'interval')} stored{spooled}")

