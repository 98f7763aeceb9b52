"""Remedies for the causes of a run's late samples (`rtscope explain RUN --suggest`, docs/explain.md "Remedies").

Each culprit of the run's explained samples (analysis.explain_shares.shares: its share of the excess above the run's
median) is mapped to the rtscope settings that would take it off the measured task's way: a thread on the
probe's CPU to `rt_priority` above it or `cpu` elsewhere, an interrupt to `irq_affinity`, an unbound kworker to
`workqueue_cpumask`, a lower-priority thread that still ran to `rt_runtime_us` (RT throttling), the CPU idle
while the sample waited to `cpu_dma_latency`, the task's moves between CPUs to `cpu`, the probe's own stretched
path to `mlock`, a BEAM collection to `min_heap_size`/`fullsweep_after`, a BEAM process scheduled out to
`priority` and `vm_flags`, another scheduler of the VM on its CPU to `vm_flags` (no spinning). A remedy is a
setting so that it becomes a matrix cell: `explain --write-spec` measures each against the run's configuration.

Pure: the run's record and its explained samples in, remedies out (whether the target can apply one is the
experiment layer's question: experiment/explain_spec.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..workloads import format_cpus
from . import explain_shares

MIN_SHARE = 0.05      # a culprit below this share of the excess gets no remedy of its own
# per-CPU kernel threads: they cannot be moved, only the measured task can
PER_CPU = re.compile(r"^(kworker/\d+:|ksoftirqd/|migration/|cpuhp/|rcuc/|watchdog/|idle_inject/|irq_work/)")
UNBOUND_KWORKER = re.compile(r"^kworker/u\d+:")
IRQ_THREAD = re.compile(r"^irq/(\d+)-")
RCU_THREAD = re.compile(r"^rcu(op|og|_preempt|_sched|_tasks)")
TICK = ("tick_sched_timer", "tick_nohz_handler", "tick_handle_periodic")
IPI_VECTORS = ("call_function", "call_function_single", "reschedule", "irq_work", "thermal_apic", "error_apic")
THROTTLED_NS = 40_000_000  # a normal thread this long in one sample, above the task: RT throttling (50 ms a second)
NORMAL_RT = 80        # the rt_priority suggested to a probe at normal priority (cyclictest's usual)
FULL_SPIN_OFF = "+sbwt none +sbwtdcpu none +sbwtdio none"


@dataclass
class Remedy:
    kind: str                   # the cause it addresses: kind and name (as analysis.explain_shares.Share)
    name: str | None
    pid: int | None
    irq: int | None
    share: float                # of the run's excess above its median that this cause took
    setting: str
    value: Any
    why: str
    cost: str
    applies_on: dict = field(default_factory=dict)  # filled by experiment/explain_spec.applies_on

    @property
    def cause_label(self) -> str:
        if self.kind == explain_shares.UNEXPLAINED:
            return self.name or explain_shares.UNEXPLAINED
        return explain_shares.culprit({"kind": self.kind, "name": self.name, "pid": self.pid, "irq": self.irq})

    @property
    def value_text(self) -> str:
        v = self.value
        return ("true" if v else "false") if isinstance(v, bool) else str(v)

    def to_json(self) -> dict:
        return {"for": {"kind": self.kind, "name": self.name, "pid": self.pid, "irq": self.irq},
                "share": self.share, "setting": self.setting, "value": self.value, "why": self.why,
                "cost": self.cost, "applies_on": self.applies_on}


@dataclass
class _Run:
    """What the remedies need to know of the run: its CPUs, the others, its priority, runtime, settings."""
    settings: dict
    runtime: str
    cpus: list[int]             # the CPUs its explained samples ran on
    others: list[int]           # the target's other online CPUs
    preemption: str = ""        # the kernel's preemption model (the run's machine record)

    @property
    def rt(self) -> int | None:
        v = self.settings.get("rt_priority")
        return int(v) if v is not None else None

    @property
    def move_to(self) -> int | None:
        """The CPU to move the probe to: the highest-numbered other CPU (CPU 0 keeps the housekeeping)."""
        return max(self.others) if self.others else None

    @property
    def cpus_text(self) -> str:
        return format_cpus(self.cpus)


def _run_view(run, explained: list[dict]) -> _Run:
    cpus = sorted({s["cpu"] for s in explained if s.get("cpu") is not None})
    if not cpus and run.settings.get("cpu") is not None:
        cpus = [int(run.settings["cpu"])]
    online = run.machine.get("cpus_online") or list(range(int(run.machine.get("cpu_count") or 0)))
    return _Run(run.settings, run.runtime, cpus, [c for c in online if c not in cpus],
                str(run.machine.get("preemption") or ""))


def _move(r: _Run, what: str) -> tuple[str, Any, str, str] | None:
    if r.move_to is None or "cpu" in r.settings and int(r.settings["cpu"]) == r.move_to:
        return None
    return ("cpu", r.move_to, f"move the measured task off CPU {r.cpus_text}, where {what} runs, to CPU {r.move_to}",
            f"CPU {r.move_to} and whatever runs there; the CPU given up by the task stays busy")


def _irq_away(r: _Run, irq: str, what: str) -> tuple[str, Any, str, str] | None:
    if not r.others:
        return None
    return ("irq_affinity", f"{irq}@{format_cpus(r.others)}",
            f"route {what} to CPU {format_cpus(r.others)}, away from the measured CPU {r.cpus_text}",
            f"CPU {format_cpus(r.others)} handles it instead (its latency there may grow)")


def _cmdline(r: _Run, args: str, why: str) -> tuple[str, Any, str, str]:
    return ("kernel_cmdline", args, why, "a boot of a kernel rtscope boots (QEMU targets); the CPU loses the "
            "periodic tick or RCU callbacks: housekeeping moves to the other CPUs")


def _thread(r: _Run, name: str, prio: int | None, longest_ns: int) -> list[tuple[str, Any, str, str]]:
    out: list[tuple[str, Any, str, str] | None] = []
    thread_rt = 99 - prio if prio is not None and 0 <= prio < 100 else None
    if (m := IRQ_THREAD.match(name)):
        out.append(_irq_away(r, m[1], f"irq {m[1]} (its thread {name})"))
    if UNBOUND_KWORKER.match(name) and r.others:
        out.append(("workqueue_cpumask", format_cpus(r.others),
                    f"run unbound workqueues ({name}) on CPU {format_cpus(r.others)} only",
                    "the unbound work waits for those CPUs"))
    if RCU_THREAD.match(name) or name.startswith("rcuc/"):
        out.append(_cmdline(r, f"rcu_nocbs={r.cpus_text}", f"offload RCU callbacks ({name}) from CPU {r.cpus_text}"))
    if name.startswith("ksoftirqd/") and r.others:
        out.append(_irq_away(r, "*", "every movable interrupt (whose softirqs ksoftirqd runs)"))
    per_cpu = bool(PER_CPU.match(name))
    if r.rt is None:
        if thread_rt is None or thread_rt < 99:
            value = NORMAL_RT if thread_rt is None or thread_rt < NORMAL_RT else thread_rt + 1
            out.append(("rt_priority", value, f"run the measured task at SCHED_FIFO {value}, above {name} "
                        f"({explain_shares.priority(prio) or 'its priority'})",
                        "the task starves every lower thread on its CPU while it runs"))
    elif thread_rt is not None and thread_rt >= r.rt:
        if thread_rt < 99:
            out.append(("rt_priority", thread_rt + 1, f"run the measured task at SCHED_FIFO {thread_rt + 1}, above "
                        f"{name} (FIFO {thread_rt}; the task runs at {r.rt})",
                        f"{name} waits for the task instead"))
    elif thread_rt is None and longest_ns >= THROTTLED_NS:
        # a normal thread ran for tens of ms although the task's SCHED_FIFO preempts it: the rt bandwidth was
        # used up (RT throttling gives normal tasks 50 ms of every second by default)
        out.append(("rt_runtime_us", -1, f"{name} (normal priority) ran {longest_ns / 1e6:.0f} ms while the "
                    f"task at SCHED_FIFO {r.rt} waited: RT throttling (sched_rt_runtime_us); turn it off",
                    "a runaway real-time task can then hang its CPU"))
    elif thread_rt is None:
        # a normal thread the task's SCHED_FIFO should preempt at once: it sat in a section the kernel could
        # not preempt (a kernel preempted only at voluntary points)
        out.append(_move(r, name))
        if r.preemption == "PREEMPT_DYNAMIC":
            out.append(_cmdline(r, "preempt=full", f"{name} (normal priority) ran while the task at SCHED_FIFO "
                                f"{r.rt} waited: a kernel section not preempted (PREEMPT_DYNAMIC kernel); "
                                "boot it with full preemption"))
        return [x for x in out if x]
    out.append(_move(r, name))
    return [x for x in out if x]


def _for(r: _Run, row: explain_shares.Share, split: dict[str, float], detail: dict) -> list[tuple[str, Any, str, str]]:
    """The remedies of one culprit, best first (`detail`: _detail's)."""
    kind, name = row.kind, row.name or ""
    if kind == "thread":
        return _thread(r, name, detail.get("prio"), detail.get("longest_ns", 0))
    if kind == "rt_throttled":
        return [x for x in (("rt_runtime_us", -1, f"{name} (normal priority) ran while the real-time task "
                             "was runnable: RT throttling (sched_rt_runtime_us "
                             "used up); turn it off", "a runaway real-time task can then hang its CPU; on kernels from 6.12 "
                             "the fair deadline server (debugfs sched/fair_server/cpuN/runtime) still gives normal "
                             "tasks 50 ms a second: measure it"),
                            _move(r, f"{name} during RT throttling")) if x]
    if kind == "irq":
        if name == "local_timer" or name in IPI_VECTORS:
            what = "the periodic tick" if name == "local_timer" else f"inter-processor interrupts ({name})"
            out = [_cmdline(r, f"nohz_full={r.cpus_text} isolcpus={r.cpus_text}",
                            f"keep {what} off CPU {r.cpus_text}: a tickless, isolated CPU")]
            return out if name == "local_timer" else out + [x for x in (_move(r, name),) if x]
        target = str(row.irq) if row.irq is not None and not re.fullmatch(r"[\w.:-]+", name) else name
        return [x for x in (_irq_away(r, target, f"irq {name}"), _move(r, f"irq {name}")) if x]
    if kind == "hrtimer":
        if name in TICK:
            return [_cmdline(r, f"nohz_full={r.cpus_text}", f"stop the periodic tick ({name}) on CPU {r.cpus_text}")]
        return [x for x in (_move(r, f"the timer callback {name}"),) if x]
    if kind == "softirq":
        if name == "RCU":
            return [_cmdline(r, f"rcu_nocbs={r.cpus_text}", f"offload RCU callbacks from CPU {r.cpus_text}")]
        if name in ("NET_RX", "NET_TX", "BLOCK", "IRQ_POLL", "TASKLET"):
            return [x for x in (_irq_away(r, "*", f"the interrupts whose {name} softirq ran here"),
                                _move(r, f"the {name} softirq")) if x]
        return [x for x in (_move(r, f"the {name} softirq"),) if x]
    if kind == "gc":
        from ..settings.registry import beam_min_heap_size
        heap = detail.get("heap_before") or 0
        # twice the largest heap, as one of the VM's heap sizes (a heap of 337 words: 987): what is asked for is
        # what the process gets, so the written spec's cell is labelled by what ran (no "(in force: ...)")
        words = beam_min_heap_size(heap * 2)
        out = [("min_heap_size", words, f"a heap of {words:,} words from the start: the process's "
                f"{'collections' if name == 'minor' else 'full sweeps'} (heap up to {heap:,} words) mostly go away",
                f"{words * 8:,} bytes per process with this setting")]
        if name == "major" and int(r.settings.get("fullsweep_after", 65535)) < 65535:
            out.append(("fullsweep_after", 65535, "full sweeps only when the heap outgrows the old one",
                        "old garbage stays longer"))
        return out
    if kind == "scheduled_out":
        out = [("priority", "high", "the measuring process at priority high: normal processes wait for it",
                "other processes of the VM wait for it")]
        if r.settings.get("vm_flags") != FULL_SPIN_OFF:
            out.append(("vm_flags", FULL_SPIN_OFF, "idle schedulers sleep instead of spinning, so a woken "
                        "scheduler thread does not compete with spinning ones for the CPU",
                        "a scheduler woken from sleep starts a little later"))
        return out
    if kind == "vm_thread":   # another thread of the VM held the CPU the measuring scheduler waited for
        if not re.fullmatch(r"\d+_(scheduler|dirty_\w+)", name) or r.settings.get("vm_flags") == FULL_SPIN_OFF:
            return []
        return [("vm_flags", FULL_SPIN_OFF, f"{name}, a scheduler of the VM, held the measuring scheduler's CPU: "
                 "if it was spinning for work, idle schedulers then sleep at once instead",
                 "a scheduler woken from sleep starts a little later")]
    if kind == "page_fault":
        if r.runtime != "native" or r.settings.get("mlock"):
            return []   # locked already: faults on memory mapped during the run (mmap, a growing stack)
        return [("mlock", True, f"the task's own page faults ({name} access) took the time: with its memory "
                 "locked (mlockall, current and future) its pages are resident before it runs",
                 "its memory stays resident")]
    if kind == "migration":
        m = re.search(r"-> (\d+)$", name)
        if not m or "cpu" in r.settings:
            return []
        return [("cpu", int(m[1]), f"pin the measured task to CPU {m[1]}: a pinned task is never moved ({name})",
                 "the task can no longer leave a busy CPU for a free one")]
    if kind == explain_shares.UNEXPLAINED:
        out = []
        if split.get("idle", 0) > 0.3 and r.settings.get("cpu_dma_latency_us") != 0:
            out.append(("cpu_dma_latency", 0, "the CPU sat idle while the sample was due: a wake-up from a deep "
                        "C-state; hold /dev/cpu_dma_latency at 0 during the run", "power: the CPU never sleeps deeply"))
        if split.get("self", 0) > 0.3 and not r.settings.get("mlock") and r.runtime == "native":
            out.append(("mlock", True, "the task's own path was long: page faults in it go away with its memory "
                        "locked (mlockall)", "its memory stays resident"))
        return out
    return []


def suggest(run, explained: list[dict], reference: float, min_share: float = MIN_SHARE) -> list[Remedy]:
    """The remedies for the run's culprits, ranked by the share of the excess above `reference` their cause
    took (a cause's own remedies in the order given: the one that costs least first)."""
    rows = [r for r in explain_shares.shares(explained, reference) if r.by == "culprit" and r.share >= min_share]
    view = _run_view(run, explained)
    above = [s for s in explained if not s.get("note") and s["value_ns"] > reference]
    # what the unexplained rest is made of: the CPU idle, the task's own time, what no event accounts for
    parts = {"idle": sum(s.get("idle_ns", 0) for s in above), "self": sum(s.get("self_ns", 0) for s in above),
             "other": sum(max(0, s["unexplained_ns"] - s.get("idle_ns", 0)) for s in above)}
    total = sum(parts.values()) or 1
    split = {k: v / total for k, v in parts.items()}
    out: list[Remedy] = []
    for row in rows:
        detail = _detail(explained, row)
        for setting, value, why, cost in _for(view, row, split, detail):
            if value_of(run.settings.get(setting)) == value_of(value):
                continue
            name = row.name if row.kind != explain_shares.UNEXPLAINED else None
            out.append(Remedy(row.kind, name, row.pid, row.irq, row.share, setting, value, why, cost))
    seen, unique = set(), []
    for r in out:  # one remedy (setting and value) once: under the largest cause it serves
        if (r.setting, value_of(r.value)) not in seen:
            seen.add((r.setting, value_of(r.value)))
            unique.append(r)
    return unique


# Culprits that no setting takes away, and what takes them away instead.
WITHOUT_SETTING = {
    "pi_boost": "the wait is the lock holder's critical section: shorten it, or keep the lock off the measured "
                "path; no priority helps (the holder runs at the task's own while it holds the lock)",
    "dirty_hop": "the call waited for a dirty scheduler: other dirty work (NIFs, BIFs, collections of large heaps) "
                 "held them all; make that work shorter (chunk it, yield) or keep the dirty call off the measured "
                 "path; +SDcpu adds dirty CPU schedulers only up to the normal schedulers' count",
    "port": "the process waited for a port: suspended on a busy port (its queue above the high watermark while "
            "the other end did not read) or for a synchronous operation's answer; write less at a time, raise the "
            "port's busy limits (open_port's busy_limits_port), or let another process talk to the port",
}


def unremedied(explained: list[dict], reference: float, min_share: float = MIN_SHARE) -> list[dict]:
    """The culprits of at least min_share of the excess above `reference` that no setting takes away (their
    kind's in WITHOUT_SETTING), largest first: {"for": {kind, name, pid, irq}, "share", "why"}."""
    return [{"for": {"kind": r.kind, "name": r.name, "pid": r.pid, "irq": r.irq}, "share": r.share,
             "why": WITHOUT_SETTING[r.kind]}
            for r in explain_shares.shares(explained, reference)
            if r.by == "culprit" and r.share >= min_share and r.kind in WITHOUT_SETTING]


def value_of(v: Any) -> str:
    return "" if v is None else (("true" if v else "false") if isinstance(v, bool) else str(v))


def _detail(explained: list[dict], row: explain_shares.Share) -> dict:
    """What the samples say of one culprit beyond its share: a thread's kernel priority, a GC's largest heap."""
    prio, heap, longest = None, 0, 0
    for s in explained:
        for c in s.get("causes", []):
            if (c["kind"], c.get("name"), c.get("pid"), c.get("irq")) == (row.kind, row.name, row.pid, row.irq):
                prio = c.get("prio", prio) if c.get("prio") is not None else prio
                heap = max(heap, c.get("heap_before") or 0)
                longest = max(longest, c["duration_ns"])
    return {"prio": prio, "heap_before": heap, "longest_ns": longest}
