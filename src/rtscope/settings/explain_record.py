"""System setting `explain`: record why the worst samples of a run were late (docs/explain.md).

`explain = K` (K > 0) traces the kernel events of the probe's CPUs into rtscope's own tracefs instance on the
run's target while the probe measures (targets/tracefs.py), then, for the K worst samples of each thread,
reads only the trace around each sample's interval and stores what the CPU did instead (explain_trace.py): the
interrupts, softirqs, hrtimer callbacks and threads that ran, and the time no event accounts for. The probe
stamps each sample's start (the timer's deadline, the call's start) in CLOCK_MONOTONIC ns, the trace's clock.
The instance is removed when the run ends (also on an error, Ctrl-C or SIGTERM); one a killed rtscope left
behind is removed at the next start. `explain = 0` (the default) changes nothing.
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, Iterator

import numpy as np

from .. import explain_trace, sysinfo, workloads
from ..errors import RtscopeError, UsageError
from ..options import integer
from ..signals import held_signals
from ..targets import tracefs
from . import explain_beam_kernel
from .base import RunContext, Setting

MARKS_ENV = "RTSCOPE_MARKS"  # probes/lib/worst.h
# runtime -> workloads it explains: native from the kernel's trace (its probe stamps sample starts), beam from
# the measuring process's GC and scheduling trace (the harness's RtScope.Explain, beam/lib/rtscope/explain.ex)
# and, on targets with a shell, from the kernel's trace too (settings/explain_beam_kernel.py).
EXPLAINED = {"native": ("timer", "exec", "gpio"), "beam": ("exec",)}
KERNEL_SIDE = ("native",)
# The column a run's samples are explained by when it is not the primary one: a blink's rising edge after its
# deadline (the probe's start column), not the period between two edges. gpio write explains write_1, its
# primary (docs/gpio.md).
EXPLAINED_COLUMN = {("gpio", "blink"): "lateness"}


def sample_file_explained_column(sf: Any) -> str:
    """The name of the sample file's column whose values the explained samples are, from its start."""
    return EXPLAINED_COLUMN.get((sf.header.get("workload"), sf.header.get("variant")), sf.columns[0].name)


def unsupported(req: Any) -> str | None:
    """Why a run request cannot be explained, else None."""
    if req.workload not in EXPLAINED.get(req.runtime, ()):
        can = "; ".join(f"runtime {rt}: workload {', '.join(ws)}" for rt, ws in EXPLAINED.items())
        return f"setting explain applies to {can}; not to {req.runtime} {req.workload}"
    return None


def _probe_cpus(req: Any, online: list[int]) -> tuple[list[int], bool]:
    """The CPUs the probe may run on (its pinned CPU or threads, else every online CPU of the target), and
    whether it is pinned (a thread of its own per CPU, or `cpu`) or may move between them."""
    threads = req.params.get("threads")
    if threads and threads != "all":
        return sysinfo.parse_cpu_list(str(threads)), True
    if "cpu" in req.settings:
        return [int(req.settings["cpu"])], True
    return online, threads == "all"


def worst(values: np.ndarray, groups: np.ndarray | None, k: int) -> list[int]:
    """Indexes of the k largest values of each group (each thread), largest first."""
    chosen: list[int] = []
    for g in (np.unique(groups) if groups is not None else [None]):
        idx = np.flatnonzero(groups == g) if g is not None else np.arange(len(values))
        top = idx[np.argsort(values[idx], kind="stable")[::-1][:k]]
        chosen.extend(int(i) for i in top)
    return sorted(chosen, key=lambda i: -int(values[i]))


def explain_samples(instance: tracefs.Instance, sf: Any, k: int) -> tuple[list[dict], dict]:
    """The causes of the k worst samples per thread of the sample file, and what it cost (for the trailer).

    Each sample's events come from the window keeper (the probe marked it when it entered its thread's
    worst), else from what the instance's ring buffer still holds (the end of the run)."""
    instance.stop()
    column = sample_file_explained_column(sf)
    values = np.asarray(sf.data[column], dtype=np.int64)
    if "start" not in sf.data:
        raise RtscopeError("explain: the probe wrote no start column (an rtprobe older than --start-times?)")
    starts = np.asarray(sf.data["start"], dtype=np.int64)
    cpus = np.asarray(sf.data["cpu"], dtype=np.int64) if "cpu" in sf.data else None
    threads = np.asarray(sf.data["thread"], dtype=np.int64) if "thread" in sf.data else None
    picked = worst(values, threads, k)
    kept, read_bytes = instance.kept_windows([(int(starts[i]), int(starts[i] + values[i])) for i in picked])
    oldest = instance.oldest_ns()
    ring: dict[int, list[int]] = {}  # CPU -> the samples to read from its ring buffer
    windows: dict[int, list] = {}
    # the CPUs a sample's window is read of: its own, or every traced one for a probe that may move
    spread = (lambda cpu: instance.cpus) if instance.follow else (lambda cpu: [cpu])
    out: dict[int, dict] = {}
    for i in picked:
        cpu = int(cpus[i]) if cpus is not None else instance.cpus[0]
        start, end = int(starts[i]), int(starts[i] + values[i])
        out[i] = {"sample_index": i, "thread": int(threads[i]) if threads is not None else None, "cpu": cpu,
                  "value_ns": int(values[i]), "start_ns": start, "causes": [], "self_ns": 0, "idle_ns": 0,
                  "unexplained_ns": max(0, int(values[i])), "note": None}
        lines = kept.get((start, end))
        if cpu not in instance.cpus:
            out[i]["note"] = f"CPU {cpu} was not traced (traced: {workloads.format_cpus(instance.cpus)})"
        elif lines is not None:
            windows[i] = explain_trace.parse(lines)
        elif instance.ring_holds(oldest, cpu, start):
            for c in spread(cpu):
                if instance.ring_holds(oldest, c, start):
                    ring.setdefault(c, []).append(i)
        else:
            out[i]["note"] = ("no trace window: the window keeper did not copy it in time and the ring buffer "
                              f"({instance.buffer_kb} KiB per CPU) no longer held it")
    for cpu, wanted in ring.items():
        got, read = instance.ring_windows(cpu, [(int(starts[i]), int(starts[i] + values[i])) for i in wanted])
        read_bytes += read
        for i, events in zip(wanted, got):
            windows.setdefault(i, []).extend(events)
    per_cpu = {i: explain_trace.by_cpu(events) for i, events in windows.items()}
    for cpu in {out[i]["cpu"] for i in windows}:
        mine = [i for i in windows if out[i]["cpu"] == cpu]
        # The measuring thread: the task most often current at the samples' ends on this CPU (one sample's
        # end may fall a moment before its switch-in shows in the trace).
        ends = [explain_trace.current_at(per_cpu[i].get(cpu, []), out[i]["start_ns"] + out[i]["value_ns"])
                for i in mine]
        measuring = max(set(ends), key=ends.count)
        for i in mine:
            elsewhere = {c: evs for c, evs in per_cpu[i].items() if c != cpu} if instance.follow else None
            out[i].update(explain_trace.attribute(per_cpu[i].get(cpu, []), out[i]["start_ns"],
                                           out[i]["start_ns"] + out[i]["value_ns"], measuring, elsewhere))
    records = [out[i] for i in picked]
    cost = {"samples": len(records), "per_thread": k, "column": column, "cpus": instance.cpus,
            "buffer_kb_per_cpu": instance.buffer_kb, "windows_kept": instance.marked, "trace_bytes_read": read_bytes,
            "trace_bytes_per_sample": round(read_bytes / len(records)) if records else 0, "clock": tracefs.CLOCK}
    return records, cost


def histogram_worst(sf: Any) -> Any:
    """The samples to explain of a run: the sample file itself, or for a run that kept a histogram (no
    samples), its trailer's `worst` — each thread's K worst samples, which rtprobe timer --mark-worst keeps in
    histogram mode — as a sample table; an explained sample's index is then its position in `worst`."""
    if sf.n or "worst" not in sf.trailer:
        return sf
    rows = sf.trailer["worst"]
    data = {name: np.asarray([r[key] for r in rows], dtype=np.int64)
            for name, key in ((sf.columns[0].name, "value"), ("start", "start"), ("cpu", "cpu"),
                              ("thread", "thread"), ("cycle", "cycle"))}
    return SimpleNamespace(columns=sf.columns[:1], data=data, trailer=sf.trailer, header=sf.header)


def with_cycles(records: list[dict], table: Any) -> list[dict]:
    """A histogram run's explained samples also name their cycle (the deadline's number in the run)."""
    for r in records:
        r["cycle"] = int(table.data["cycle"][r["sample_index"]])
    return records


def beam_samples(sf: Any, k: int, *, full: bool = False) -> list[dict]:
    """The explained samples the BEAM harness wrote into the trailer, as stored records (the trailer keeps
    only what it cost, and the clock mapping). `full`: every stretch of each cause (for the kernel side's
    merge), else the first explain_trace.INTERVALS_KEPT."""
    got = sf.trailer.get("explain") or {}
    records = []
    for s in got.get("samples", []):
        causes_ = [{"pid": None, "irq": None, "prio": None, **c} for c in s.get("causes", [])]
        if not full:
            causes_ = [{**c, "intervals": (c.get("intervals") or [])[:explain_trace.INTERVALS_KEPT]} for c in causes_]
        records.append({"sample_index": s["index"], "thread": None, "cpu": None, "value_ns": s["value_ns"],
                        "start_ns": s["start_ns"], "causes": causes_, "self_ns": s.get("self_ns", 0), "idle_ns": 0,
                        "unexplained_ns": s.get("unexplained_ns", 0), "scheduler": s.get("scheduler"),
                        "clock": "erlang:monotonic_time", "note": None,
                        **({"os_start_ns": s.get("os_start_ns"), "os_end_ns": s.get("os_end_ns"), "on": s.get("on"),
                            "offset_bracket_ns": s.get("offset_bracket_ns")} if full else {})})
    sf.trailer["explain"] = {"samples": len(records), "per_thread": k, "source": got.get("source", "erlang:trace")}
    return records


def beam_kernel_samples(instance: tracefs.Instance, sf: Any, k: int) -> list[dict]:
    """A BEAM run's explained samples with both sides: the harness's (GCs, times scheduled out) and the
    kernel's (what the OS took from the VM's scheduler threads), merged (settings/explain_beam_kernel.py)."""
    got = sf.trailer.get("explain") or {}
    records, cost = explain_beam_kernel.kernel_side(instance, beam_samples(sf, k, full=True), got)
    for r in records:
        for key in ("os_start_ns", "os_end_ns", "on"):
            r.pop(key, None)
    sf.trailer["explain"] = {**sf.trailer["explain"], **cost, "clock_mapping": explain_beam_kernel.clock_summary(got)}
    return records


def read_steal(target: Any) -> dict[int, int]:
    """The target's steal-time counters now (/proc/stat, per CPU, USER_HZ ticks); {} where it has none."""
    path = target.sys_path("proc/stat")
    try:
        return sysinfo.parse_steal(target.read_files([path])[path] or "")
    except RtscopeError:
        return {}


def steal_during(before: dict[int, int], after: dict[int, int], cpus: list[int]) -> dict | None:
    """What the hypervisor took from the traced CPUs between two readings (recorded in the run's trailer as
    explain.steal): per CPU and summed, in ns (whole USER_HZ ticks: 10 ms steps)."""
    common = [c for c in cpus if c in before and c in after]
    if not common:
        return None
    tick = 1_000_000_000 // sysinfo.USER_HZ
    per_cpu = {str(c): (after[c] - before[c]) * tick for c in common}
    return {"ns": sum(per_cpu.values()), "per_cpu_ns": per_cpu, "tick_ns": tick, "source": "/proc/stat steal"}


def kernel_side(req: Any, target: Any) -> bool:
    """Whether the run is explained from its target's kernel trace: native runs, and BEAM runs on a target
    with a shell (a BEAM node target has none: the BEAM side only)."""
    return req.runtime in KERNEL_SIDE or (req.runtime == "beam" and getattr(target, "runtimes", None) is None)


@contextmanager
def explaining(value: int, ctx: RunContext) -> Iterator[None]:
    """Trace the run's CPUs on its target while it measures; always remove the instance."""
    if not value:
        yield
        return
    why = unsupported(ctx.request)
    if why:
        raise UsageError(why)
    if not kernel_side(ctx.request, ctx.target):
        ctx.explain = lambda sf: beam_samples(sf, value)
        yield
        return
    target = ctx.target
    missing = tracefs.missing(target)
    if missing:
        raise RtscopeError(f"explain = {value}: {missing}")
    gone = tracefs.remove_stale(target)
    if gone:
        ctx.notes.append(f"removed tracefs instance(s) a killed rtscope left behind: {', '.join(gone)}")
    online = target.online_cpus()
    cpus, pinned = _probe_cpus(ctx.request, online)
    instance = tracefs.Instance(target, cpus, follow=not pinned)
    steal_before = read_steal(target)

    def explain(sf: Any) -> list[dict]:
        steal = steal_during(steal_before, read_steal(target), instance.cpus)
        if ctx.request.runtime == "beam":
            records = beam_kernel_samples(instance, sf, value)
        else:
            table = histogram_worst(sf)
            records, cost = explain_samples(instance, table, value)
            sf.trailer["explain"] = cost
            records = records if table is sf else with_cycles(records, table)
        if steal is not None:
            sf.trailer["explain"]["steal"] = steal
        return records

    try:
        instance.start()
        instance.keep_windows(ctx.run_dir, online)
        # rtprobe --mark-worst (the native runtime adds it) and the BEAM harness append the worst samples'
        # windows here.
        ctx.command_prefix = ctx.command_prefix + ["env", f"{MARKS_ENV}={instance.marks}"]
        ctx.explain = explain
        yield
    finally:
        with held_signals():
            instance.remove()


def check_target(value: int, target: Any) -> str | None:
    """Whether the target can trace its kernel (a BEAM node target, which runs only the BEAM harness and has
    no shell, explains from the BEAM's own trace)."""
    if not value or target.runtimes is not None:
        return None
    return tracefs.missing(target)


SETTINGS = (Setting(
    "explain", integer(0), "an integer >= 0 (samples per thread; 0 = off)",
    "record the causes of the worst samples: kernel events of the probe's CPUs (interrupts, softirqs, "
    "threads) kept around this many worst samples per thread (docs/explain.md)", 0,
    scope="system", apply=explaining, unavailable=check_target),)
