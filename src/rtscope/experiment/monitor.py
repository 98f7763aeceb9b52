"""Long-term latency monitoring, as OSADL's QA farm does: the timer probe for hours, interval after interval.

    rtscope monitor --target pi3 --duration 6h --interval 5m --load cpu

The monitoring is an experiment whose plan is one run per interval, in time
order: `rtprobe timer` (or cyclictest) with one thread per CPU, in histogram
mode (1 µs buckets, the exact maximum and the overflow cycles kept), so memory
stays bounded however long it runs. Each interval is stored as it ends: a
crash or a reboot of the target loses at most the interval in progress, and
`rtscope monitor --resume` continues with the next one. With `--load`,
intervals alternate idle and loaded phases (`--phase` long each), like the
OSADL farm's idle and stress periods.

The per-interval view is computed from each stored run's per-thread
histograms: the maximum and p99.99 of every CPU, then the worst case so far:
the tail analysis (analysis/tail_bound.py, histogram path) of every interval of the
same phase stored until then, its bound at p = 1e-9 per sample or the check
that refused it.

With `--explain K` each interval's run has setting `explain = K`: the probe
keeps each thread's K worst samples (value, deadline, CPU) beside its
histogram, and the interval's own tracefs instance and window keeper (made and
removed with the interval's run, docs/explain.md) say what delayed them; the
per-interval view adds the interval's top cause.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from ..analysis import explain_shares
from ..analysis.stats import summarize_histogram
from ..analysis.threads import thread_histograms
from ..errors import UsageError
from ..store import Run
from . import execute as exp_mod
from . import spec as spec_mod
from .spec import build_request

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
RUNTIMES = ("native", "cyclictest")
BUCKET_US = 1        # OSADL's latency plots: 1 µs bins
HISTOGRAM_US = 10_000  # buckets kept: latencies up to 10 ms in 1 µs bins; beyond: overflows, counted with cycles


def parse_duration(text: str, what: str) -> int:
    """'6h', '5m', '90s', '1h30m', or seconds -> seconds."""
    raw = str(text).strip().lower()
    if raw.isdigit():
        return int(raw)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        raise UsageError(f"invalid {what} {text!r}: write e.g. 6h, 5m, 90s or 1h30m")
    seconds = sum(float(n) * UNITS[u] for n, u in parts)
    if seconds < 1:
        raise UsageError(f"{what} must be at least 1 s, got {text!r}")
    return int(round(seconds))


@dataclass(frozen=True)
class Plan:
    target: str
    duration_s: int
    interval_s: int
    interval_us: float
    runtime: str
    load: str | None
    phase_s: int
    explain: int = 0   # setting explain of every interval: its K worst samples per thread explained
    rt_priority: int | None = None  # the probe's SCHED_FIFO priority (None: the default, normal scheduling)

    @property
    def intervals(self) -> int:
        return max(1, math.ceil(self.duration_s / self.interval_s))

    def phase(self, i: int) -> str:
        """The load of interval i: idle and loaded phases alternate, each `phase_s` long."""
        if not self.load:
            return "none"
        return "none" if (i * self.interval_s // self.phase_s) % 2 == 0 else self.load

    def spec_text(self) -> str:
        """A spec that records what the monitoring measures (the plan itself is made here, in time order)."""
        loads = ["none", self.load] if self.load else ["none"]
        return (f'name = "monitor-{self.target}"\n'
                f'description = "latency monitoring of {self.target}: {self.duration_s} s in intervals of '
                f'{self.interval_s} s{", idle and " + self.load + " load alternating" if self.load else ""}"\n'
                f'tags = ["monitor"]\ntarget = "{self.target}"\norder = "sequential"\n'
                f'[[workload]]\nname = "timer"\nvariants = "absolute"\nruntime = "{self.runtime}"\n'
                f'[workload.params]\ninterval_us = {self.interval_us}\nduration_s = {self.interval_s}\n'
                f'threads = "all"\nhistogram_us = {HISTOGRAM_US}\n'
                f'[workload.settings]\nload = {loads!r}\n'.replace("'", '"')
                + (f"explain = {self.explain}\n" if self.explain else "")
                + (f"rt_priority = {self.rt_priority}\n" if self.rt_priority is not None else ""))


def make_plan(target: str, duration: str, interval: str, interval_us: float, runtime: str, load: str | None,
              phase: str | None, explain: int = 0, rt_priority: int | None = None) -> Plan:
    if runtime not in RUNTIMES:
        raise UsageError(f"unknown runtime {runtime!r} for monitor; valid: {', '.join(RUNTIMES)}")
    if explain < 0:
        raise UsageError(f"--explain must be an integer >= 0 (worst samples per thread; 0 = off), got {explain}")
    if explain and runtime != "native":
        raise UsageError(f"--explain needs runtime native (rtprobe keeps its worst samples); not {runtime}")
    d, i = parse_duration(duration, "duration"), parse_duration(interval, "interval")
    if i > d:
        raise UsageError(f"interval {interval} is longer than the duration {duration}")
    p = parse_duration(phase, "phase") if phase else max(i, min(d // 6, 3600))
    if load in ("none", ""):
        load = None
    if rt_priority is not None and not 1 <= rt_priority <= 99:
        raise UsageError(f"--rt-priority must be an integer 1..99 (SCHED_FIFO), got {rt_priority}")
    return Plan(target, d, i, interval_us, runtime, load, max(p, i), explain, rt_priority)


def cells(plan: Plan) -> tuple[spec_mod.Spec, dict]:
    """The monitoring's spec and its cells by load ("none", and the load of the loaded phases)."""
    spec = spec_mod.parse(plan.spec_text(), f"monitor-{plan.target}")
    return spec, {c.request.settings.get("load", "none"): c for c in spec.cells}


def planned_run(plan: Plan, cells_: dict, i: int) -> exp_mod.PlannedRun:
    """Interval i's run (0-based): made on demand, so a monitoring of any length holds no list of them."""
    cell = cells_[plan.phase(i)]
    req = build_request("timer", "absolute", plan.runtime, dict(cell.request.params),
                        dict(cell.request.settings), ("monitor", f"interval-{i + 1}"))
    return exp_mod.PlannedRun(i, cell.key, i + 1, 0, req, timeout_s=plan.interval_s * 2 + 120)


def planned_runs(plan: Plan) -> tuple[spec_mod.Spec, list[exp_mod.PlannedRun]]:
    """The monitoring's spec and its plan: one run per interval in time order."""
    spec, by_load = cells(plan)
    return spec, [planned_run(plan, by_load, i) for i in range(plan.intervals)]


def start(store, plan: Plan, identity: str) -> exp_mod.Experiment:
    """The monitoring's experiment, its plan one run per interval in time order; the Plan itself is recorded
    with it (`spec.monitor`), so that another controller can continue it (plan_of)."""
    spec, planned = planned_runs(plan)
    return exp_mod.start(store, spec, planned, 0, identity, record={"monitor": asdict(plan)})


def plan_of(spec: dict) -> Plan | None:
    """The Plan a monitoring experiment was started with, from its recorded spec (None for one of an rtscope
    that did not record it)."""
    recorded = (spec or {}).get("monitor")
    return Plan(**recorded) if isinstance(recorded, dict) else None


def interval_s_of(exp: exp_mod.Experiment) -> float:
    """A monitoring's interval length: its recorded Plan's, else its first interval's duration."""
    plan = plan_of(exp.spec)
    if plan is not None:
        return float(plan.interval_s)
    return float(exp.plan[0].request.params.get("duration_s") or 60) if exp.plan else 60.0


def alone_gave_up(store, target: str, experiment_id: int, why: str) -> None:
    """A monitoring of one target given up on (its target down too long): the board's lab row says so, as a
    fleet's does, for `rtscope lab`, /metrics (rtscope_board_incomplete) and the lab page. Skipped while the
    store is unreachable (the monitoring's status is spooled)."""
    from ..store import unreachable
    from ..store.leases import INCOMPLETE
    try:
        store.leases.ensure([target])
        store.leases.mark(target, INCOMPLETE, why[:500], experiment_id=experiment_id)
    except Exception as e:  # noqa: BLE001
        if not unreachable(e):
            raise


def alone_watches(store, target: str) -> None:
    """A monitoring of one target starts (or resumes): a lab row left `incomplete` by an earlier one is set back
    (the board is watched again, not given up on)."""
    from ..store.leases import INCOMPLETE, RELEASED
    store.leases.mark(target, RELEASED, None, only=INCOMPLETE)


def per_cpu(run: Run) -> list[dict]:
    """Each thread's CPU, max and p99.99 of one interval (from its histogram), in µs."""
    rows = []
    for index, cpu, h in thread_histograms(run):
        stats = summarize_histogram(h)
        cpu = index if cpu is None else cpu
        rows.append({"cpu": cpu, "n": stats["n"], "max_us": (stats["max"] or 0) / 1000,
                     "p9999_us": (stats["p9999"] or 0) / 1000, "overflows": int(h.get("overflow", 0))})
    return rows


def top_cause(store, run: Run) -> str | None:
    """An explained interval's largest culprit and its share of the excess of the explained samples above the
    interval's median (`thread rtsc-culprit/4242 97%`); None when the interval was not explained."""
    explained = store.causes(run.id)
    if not explained:
        return None
    median = explain_shares.run_median(store, run) or 0
    rows = [r for r in explain_shares.shares(explained, median) if r.by == "culprit"]
    return f"{rows[0].label} {rows[0].share:.0%}" if rows else "no explained sample above the median"


# The running bound covers a phase's newest intervals only (an hour at 1-minute intervals), so that each
# interval costs the controller the same time and memory however long the monitoring has run; the whole
# monitoring's is `rtscope tail --experiment N`. Runs are read for this many phases at most (idle and loaded
# alternate: 2).
RUNNING_INTERVALS = 60
PHASES_READ = 4


def worst_case_so_far(store, run: Run, *, record: bool = True):
    """The tail's worst case (analysis.tail_bound.WorstCase) of the intervals stored so far with this interval's
    settings (its phase), at most its newest RUNNING_INTERVALS: their histograms merged, the intervals tested
    for a common tail; and how many intervals that is. `record`: keep it in the store (running_bounds), where
    `rtscope serve` and `rtscope lab` read it instead of fitting again."""
    from ..analysis.tail_bound import runs_worst_case
    newest = store.newest_runs(run.experiment_id, up_to=run.id, limit=RUNNING_INTERVALS * PHASES_READ)
    same = [r for r in newest if r.settings == run.settings][-RUNNING_INTERVALS:]
    wc = runs_worst_case(store, same)
    if record:
        store.add_running_bound(run.id, len(same), wc.to_json(), wc.short_reason)
    return wc, len(same)
