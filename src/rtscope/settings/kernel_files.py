"""System settings `irq_affinity`, `workqueue_cpumask` and `rt_runtime_us`: kernel files written for the run.

- `irq_affinity = "38,virtio0-input.0@0"`: the IRQs (numbers, or action names as /proc/interrupts shows them;
  `*` for every IRQ the kernel lets move) get /proc/irq/N/smp_affinity_list = the CPU list after the `@`. On
  PREEMPT_RT an IRQ's thread follows its IRQ's affinity.
- `workqueue_cpumask = "0"`: the CPUs unbound workqueues' kworkers may run on
  (/sys/devices/virtual/workqueue/cpumask, a hex mask).
- `rt_runtime_us = -1`: /proc/sys/kernel/sched_rt_runtime_us (-1: no RT throttling).

Each is read, checked and written on the run's target (below its sysfs root) and put back when the run ends,
also after a `kill -9` of rtscope (undo.py). A target without the file, a value out of range or a connection
that may not write it makes the setting unavailable, with the reason and the valid values.
"""

from __future__ import annotations

import posixpath
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..errors import RtscopeError
from ..options import integer
from ..targets import Target
from ..targets.tracefs import cpumask
from ..workloads import expand_cpus, format_cpus
from .base import RunContext, Setting, without_shell
from .undo import files_changed

WORKQUEUE_MASK = "sys/devices/virtual/workqueue/cpumask"
RT_RUNTIME = "proc/sys/kernel/sched_rt_runtime_us"
RT_PERIOD = "proc/sys/kernel/sched_rt_period_us"
IRQ_EXAMPLE = '"38,virtio0-input.0@0" or "*@0"'
_IRQ_LINE = re.compile(r"^\s*(\d+):(.*)$")


class Unavailable(RtscopeError):
    """The target cannot take this value of the setting: why, and what it can take."""


def parse_cpus(raw: Any) -> str:
    """A CPU list ('0', '0,2-3', [0, 2]) as normalised text."""
    text = ",".join(str(x) for x in raw) if isinstance(raw, (list, tuple)) else str(raw).strip()
    if not text or text == "all":
        raise ValueError("give a CPU list such as 0 or 0,2-3")
    return format_cpus(expand_cpus(text))


def parse_irq_affinity(raw: Any) -> str:
    """'38, virtio0-input.0 @ 0-1' -> '38,virtio0-input.0@0-1'."""
    if not isinstance(raw, str) or "@" not in raw:
        raise ValueError(f"give IRQs@CPUs, e.g. {IRQ_EXAMPLE}")
    irqs, cpus = raw.rsplit("@", 1)
    names = [w.strip() for w in irqs.split(",") if w.strip()]
    if not names:
        raise ValueError(f"no IRQ before the @ (e.g. {IRQ_EXAMPLE})")
    if "*" in names and len(names) > 1:
        raise ValueError("* stands for every IRQ: give it alone")
    if any(re.search(r"\s", n) for n in names):
        raise ValueError("an IRQ is a number or an action name without spaces, as /proc/interrupts shows it")
    return f"{','.join(names)}@{parse_cpus(cpus)}"


def _check_online(setting: str, cpus: list[int], target: Target) -> None:
    online = target.online_cpus()
    off = [c for c in cpus if c not in online]
    if off:
        raise Unavailable(f"{setting}: CPU {format_cpus(off)} is not online on this machine "
                          f"(online: {format_cpus(online)})")


def _check_writable(paths: list[str], target: Target) -> None:
    denied = target.unwritable(paths)
    if denied:
        raise Unavailable(f"cannot write {denied[0]}: permission denied (run as root)")


def interrupts(target: Target) -> dict[int, list[str]]:
    """IRQ number -> its action names, from /proc/interrupts on the target."""
    path = target.sys_path("proc/interrupts")
    text = target.read_files([path])[path]
    if text is None:
        raise Unavailable(f"irq_affinity: cannot read {path} on this machine")
    lines = text.splitlines()
    ncpus = len(lines[0].split()) if lines else 0
    out = {}
    for line in lines[1:]:
        m = _IRQ_LINE.match(line)
        if m:  # the counters, the chip, the hardware IRQ and trigger, then the actions ("a, b" when shared)
            words = m[2].split()[ncpus:]
            out[int(m[1])] = [w.rstrip(",") for w in words]
    return out


def irq_plan(value: str, target: Target) -> list[tuple[str, str, str]]:
    """(smp_affinity_list path, CPU list, current text) per IRQ the value names; Unavailable saying why not."""
    irqs_text, cpus = value.rsplit("@", 1)
    _check_online("irq_affinity", expand_cpus(cpus), target)
    table = interrupts(target)
    listing = ", ".join(f"{n} ({table[n][-1] if table[n] else '?'})" for n in sorted(table))
    chosen: list[int] = []
    for name in irqs_text.split(","):
        if name == "*":
            chosen = sorted(table)
        elif name.isdigit():
            if int(name) not in table:
                raise Unavailable(f"irq_affinity: no IRQ {name} in /proc/interrupts on this machine; IRQs: {listing}")
            chosen.append(int(name))
        else:
            found = [n for n, words in table.items() if name in words]
            if not found:
                raise Unavailable(f"irq_affinity: no IRQ named {name!r} in /proc/interrupts on this machine; "
                                  f"IRQs: {listing}")
            chosen.extend(found)
    chosen = sorted(set(chosen))
    paths = [target.sys_path(f"proc/irq/{n}/smp_affinity_list") for n in chosen]
    now = target.read_files(paths)
    lacking = [p for p in paths if now[p] is None]
    if irqs_text == "*":
        paths = [p for p in paths if now[p] is not None]  # every IRQ whose affinity can be set
    elif lacking:
        raise Unavailable(f"irq_affinity: the kernel has no {lacking[0]} (an IRQ whose affinity cannot be set)")
    _check_writable(paths, target)
    return [(p, cpus, now[p].strip()) for p in paths]


def workqueue_plan(value: str, target: Target) -> list[tuple[str, str, str]]:
    cpus = expand_cpus(value)
    _check_online("workqueue_cpumask", cpus, target)
    path = target.sys_path(WORKQUEUE_MASK)
    now = target.read_files([path])[path]
    if now is None:
        raise Unavailable(f"workqueue_cpumask: the kernel has no {path} (unbound workqueues' CPU mask, "
                          "Linux 4.2 and later)")
    _check_writable([path], target)
    return [(path, cpumask(cpus), now.strip())]  # the kernel's bitmap text, as tracing_cpumask's


def from_mask(text: str) -> int:
    return int(text.strip().replace(",", "") or "0", 16)


def rt_runtime_plan(value: int, target: Target) -> list[tuple[str, str, str]]:
    path, period_path = target.sys_path(RT_RUNTIME), target.sys_path(RT_PERIOD)
    got = target.read_files([path, period_path])
    if got[path] is None or got[period_path] is None:
        raise Unavailable(f"rt_runtime_us: the kernel has no {path} (RT throttling is not configurable here)")
    period = int(got[period_path])
    if value > period:
        raise Unavailable(f"rt_runtime_us {value} is above the RT period of this machine "
                          f"(sched_rt_period_us = {period}); valid: -1 (no throttling) or 1..{period}")
    _check_writable([path], target)
    return [(path, str(value), got[path].strip())]


def parse_rt_runtime(raw: Any) -> int:
    value = integer(-1)(raw)
    if value == 0:
        raise ValueError("0 would stop every real-time task, the probe's too")
    return value


@dataclass(frozen=True)
class KernelFileSetting(Setting):
    """A system setting that writes kernel files on the target for the run and puts them back after it."""

    plan: Callable[[Any, Target], list[tuple[str, str, str]]] | None = None
    same: Callable[[str, str], bool] = lambda a, b: a.strip() == b.strip()
    describe: Callable[[Any, list[tuple[str, str, str]]], str] | None = None

    switchable: bool = True     # the files can be switched between an interleaved run's blocks (block_writes)

    def __post_init__(self) -> None:
        object.__setattr__(self, "unavailable", self.check_machine)
        object.__setattr__(self, "apply", self.applied)
        if self.switchable:
            object.__setattr__(self, "block_writes", self.plan)

    def check_machine(self, value: Any, target: Target) -> str | None:
        why = without_shell(self.name, target)
        if why:
            return why
        try:
            self.plan(value, target)
        except Unavailable as e:
            return str(e)
        return None

    @contextmanager
    def applied(self, value: Any, ctx: RunContext) -> Iterator[None]:
        why = without_shell(self.name, ctx.target)
        if why:
            raise RtscopeError(why)
        writes = self.plan(value, ctx.target)  # Unavailable (an RtscopeError) says why not
        every = isinstance(value, str) and value.startswith("*@")  # `*`: the IRQs the kernel lets move
        with files_changed(self.name, writes, ctx, same=self.same, skip_refused=every) as changed:
            where = "" if ctx.target.is_local else f" on target {ctx.target.name}"
            ctx.notes.append(f"{self.name} = {value}{where}: " + self.describe(value, changed))
            yield


def _same_cpus(a: str, b: str) -> bool:
    return expand_cpus(a.strip()) == expand_cpus(b.strip())


def _irq_note(value: str, changed: list[tuple[str, str, str]]) -> str:
    moved = ", ".join(f"{posixpath.basename(posixpath.dirname(p))} (was {old})" for p, _, old in changed)
    return f"IRQ {moved} moved to CPU {value.rsplit('@', 1)[1]}" if changed else "no IRQ could be moved"


def _file_note(value: Any, changed: list[tuple[str, str, str]]) -> str:
    return "; ".join(f"{p} = {new} (was {old})" for p, new, old in changed)


SETTINGS = (
    KernelFileSetting(
        "irq_affinity", parse_irq_affinity,
        f"IRQs@CPUs: IRQ numbers or /proc/interrupts action names, or * for every IRQ, e.g. {IRQ_EXAMPLE}",
        "move these IRQs (and on PREEMPT_RT their threads) to these CPUs for the run "
        "(/proc/irq/N/smp_affinity_list); put back afterwards", scope="system",
        plan=irq_plan, same=_same_cpus, describe=_irq_note,
        switchable=False),   # `*`: the IRQs the kernel refuses to move are left out as the run goes
    KernelFileSetting(
        "workqueue_cpumask", parse_cpus, "a CPU list such as 0 or 0,2-3 (online CPUs)",
        "keep unbound workqueues' kworkers on these CPUs for the run (/sys/devices/virtual/workqueue/cpumask); "
        "put back afterwards", scope="system",
        plan=workqueue_plan, same=lambda a, b: from_mask(a) == from_mask(b), describe=_file_note),
    KernelFileSetting(
        "rt_runtime_us", parse_rt_runtime, "-1 (no RT throttling) or 1..sched_rt_period_us (µs)",
        "real-time tasks' runtime per period (/proc/sys/kernel/sched_rt_runtime_us; -1: no RT throttling) for "
        "the run; put back afterwards", scope="system",
        plan=rt_runtime_plan, describe=_file_note),
)
