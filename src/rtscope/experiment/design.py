"""Designs: how the configurations of an experiment are laid out in time (the spec's `design`, docs/spec.md).

| design | what it lays out |
| --- | --- |
| `runs` (default) | every configuration in runs of its own, rounds of repetitions in a seeded random order (execute.plan) |
| `interleaved` | the configurations of one `[[workload]]` block that one process can measure side by side become the *arms* of one run: arm after arm in blocks of `block` samples, each round a fresh random permutation of the arms (balanced: every arm once per round), so a drift of the machine hits every arm alike; configurations that cannot be arms are an error naming why |
| `duet` | configurations that cannot share a process (VM flags, a thread's priority, mlock) but differ only in such settings of their own process (and the variant, the runtime's arm parameters) run *side by side*: one process each, at the same time, each pinned to a CPU of its own (the arms take turns over the CPUs from one repetition to the next), started together at a gate every arm waits at; so a drift of the machine hits them alike. Every configuration of the spec must find its partners (any `[[workload]]` block), at least 2 repetitions (the CPUs' turns) |
| `auto` | `interleaved` where a block allows it, then `duet` for two configurations left that differ only in their own processes' settings, `runs` for the rest, and says which and why |

Which configurations can be arms of one run is the runtime's to say (`Runtime.arm_unavailable`,
`arm_settings`, `arm_params`): on the BEAM, exec sum/fib/sleep/nothing/spawn_each/spawn_recursive and msgq
pmap whose configurations differ only in the measuring process's spawn options (fullsweep_after,
min_heap_size, priority, message_queue_data), the variant and n or elements; natively (`rtprobe interleave`),
exec sum/fib/sleep/nothing that differ only in the variant, n and the measuring thread's rt_priority and cpu,
and in system settings that are file writes (`Setting.block_writes`: governor, min_freq, rt_runtime_us,
workqueue_cpumask), which the probe switches before each arm's blocks (runner.py journals and restores the
files). Everything else of the configurations (target, runtime, workload, other system settings, VM settings,
iterations, pause, repetitions) must be the same: that is the group.

The block: `block = N` in the spec, else the largest divisor of the arms' iterations that is at most
iterations / 10 and at most 200 samples (at least 10 blocks per arm where iterations allow, a block a second or
less at the study's 5 ms pause: short enough to follow the drift, long enough for a block's max). The p99 or max
of a block of 20 is not the run's: the paired test names what it compares (analysis/paired.py).

Every arm is stored as an ordinary run, with its plan index, and its header's `pairing` names the run it shared
(`id`), the design, its arm number, the block length and its blocks' positions in the run (a duet's arm: its
CPU, and a block of one sample: the arms' k-th samples were taken at about the same time).

A duet's arms must fit the target's CPUs, one each (checked when it runs); `auto` makes duets of two.

To add a design: a name in DESIGNS, its grouping in `groups`, its schedule beside `block_order`, what executes it
in execute.py (`_execute_group`) and runner.py, and its test in analysis/paired.py.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..errors import UsageError
from ..runtimes import RUNTIMES
from ..runtimes.base import RunRequest
from ..settings.registry import SETTINGS
from .spec import Spec
from .spec.model import DESIGNS, Cell

RUNS, INTERLEAVED, DUET, AUTO = DESIGNS
AUTO_DUET_ARMS = 2       # design auto pairs two configurations side by side: every machine it measures has 2 CPUs
MIN_DUET_REPETITIONS = 2  # the arms swap CPUs between repetitions: one repetition would confound arm and CPU
# A default block is short: the arms then alternate every few samples, and what drifts on the machine on any
# time scale longer than a few calls (the host's other jobs, the VM's speed phases) falls on all of them alike.
# The statistics are taken over windows of many blocks (analysis/paired.py window_samples), long enough for a
# p99 or a max. Measured: A/A log-ratio spread of a run's mean 0.006 with blocks of 5, 0.041 with blocks of 200
# (docs/analysis.md, "Blocks and windows").
MAX_BLOCK = 5            # samples: a default block at most this long
MIN_BLOCKS = 10          # a default block at most iterations / MIN_BLOCKS long
MAX_ORDER = 20_000       # blocks of one interleaved run at most: its order is one argument of the harness's command


@dataclass(frozen=True)
class Group:
    """Cells measured together: the arms of one interleaved run, or of a duet."""

    cells: tuple[Cell, ...]
    block: int                      # samples of an arm per block (a duet: 1, its arms' samples side by side)
    design: str = INTERLEAVED

    @property
    def key(self) -> str:
        return "|".join(c.key for c in self.cells)


@dataclass
class Layout:
    """A spec's cells as the design lays them out: interleaved groups, and the cells in runs of their own with
    why (auto: the reason a cell could not be an arm)."""

    design: str
    groups: list[Group]
    alone: list[Cell]
    reasons: dict[str, str]         # cell key -> why it runs alone (design auto)

    def notes(self) -> list[str]:
        out = [f"design {self.design}: {len(g.cells)} configurations interleaved in blocks of {g.block} samples"
               if g.design == INTERLEAVED else
               f"design {self.design}: {len(g.cells)} configurations side by side (a duet), a CPU each"
               for g in self.groups]
        by_reason: dict[str, int] = {}
        for why in self.reasons.values():
            by_reason[why] = by_reason.get(why, 0) + 1
        out += [f"design {self.design}: {n} configuration{'s' if n != 1 else ''} in runs of their own: {why}"
                for why, n in sorted(by_reason.items())]
        return out


def _shares_nothing(req: RunRequest) -> str | None:
    """Why a request can be neither an arm of an interleaved run nor of a duet, whatever the others; else None."""
    if req.runtime not in RUNTIMES:
        return f"runtime {req.runtime} is not known"
    if req.settings.get("explain"):
        return "setting explain traces the samples of one run"
    return None


def _arm_reason(req: RunRequest) -> str | None:
    why = _shares_nothing(req) or RUNTIMES[req.runtime].arm_unavailable(req)
    if why is None and int(req.params.get("iterations", 0)) < 2:
        why = "fewer than 2 samples per run"
    return why


def _duet_reason(cell: Cell, min_repetitions: int) -> str | None:
    req = cell.request
    if (why := _shares_nothing(req)) is not None:
        return why
    if "cpu" in req.settings:
        return "setting cpu: a duet pins each of its arms to a CPU of its own"
    if cell.repetitions < min_repetitions:
        return (f"{cell.repetitions} repetition: a duet's arms take turns over the CPUs, which needs "
                f"{min_repetitions} repetitions or more")
    return RUNTIMES[req.runtime].duet_unavailable(req)


def _shared_by_arms(req: RunRequest) -> tuple:
    """What the arms of one interleaved run share: everything but the runtime's arm settings and parameters and
    the variant."""
    rt = RUNTIMES[req.runtime]
    settings = tuple(sorted((k, repr(v)) for k, v in req.settings.items()
                            if k not in rt.arm_settings and not switched_per_block(rt, k)))
    params = tuple(sorted((k, repr(v)) for k, v in req.params.items() if k not in rt.arm_params))
    return req.workload, req.runtime, settings, params


def switched_per_block(rt, name: str) -> bool:
    """Whether the arms of one interleaved run of runtime `rt` may differ in setting `name`: a system setting
    that is file writes (governor, rt_runtime_us, workqueue_cpumask), switched before each arm's blocks."""
    setting = SETTINGS.get(name)
    return rt.switches_files and setting is not None and setting.block_writes is not None


def _group_key(cell: Cell) -> tuple:
    return (cell.block, *_shared_by_arms(cell.request), cell.repetitions, cell.timeout_s, cell.on_unavailable)


def arms_unavailable(reqs: list[RunRequest]) -> str | None:
    """None when these requests can be the arms of one interleaved run (a tune's confirmation asks), else why
    not."""
    for req in reqs:
        if (why := _arm_reason(req)) is not None:
            return why
    if len({_shared_by_arms(r) for r in reqs}) > 1:
        return "they differ in more than their arm settings and parameters"
    return None


def _duet_key(cell: Cell) -> tuple:
    """What the arms of a duet share: everything but the settings of their own processes (the runtime's probe
    settings: VM flags, spawn options, priority, mlock), its arm parameters and the variant; from any block."""
    req = cell.request
    rt = RUNTIMES[req.runtime]
    own = {k for k in rt.settings if SETTINGS[k].scope == "probe"}
    settings = tuple(sorted((k, repr(v)) for k, v in req.settings.items() if k not in own))
    params = tuple(sorted((k, repr(v)) for k, v in req.params.items() if k not in rt.arm_params))
    return (req.workload, req.runtime, settings, params, cell.repetitions, cell.timeout_s, cell.on_unavailable)


def default_block(iterations: int, arms: int = 2) -> int:
    """The largest divisor of `iterations` at most min(MAX_BLOCK, iterations // MIN_BLOCKS) (at least 1), or, where
    that would give the run more than MAX_ORDER blocks, the smallest divisor that does not."""
    cap = max(1, min(MAX_BLOCK, iterations // MIN_BLOCKS))
    block = next(d for d in range(cap, 0, -1) if iterations % d == 0)
    if iterations // block * arms > MAX_ORDER:
        block = next(d for d in range(block, iterations + 1) if iterations % d == 0 and iterations // d * arms <= MAX_ORDER)
    return block


def iterations_of(cell: Cell) -> int:
    return int(cell.request.params.get("iterations", 0))


def layout(spec: Spec, design: str | None = None, block: int | None = None,
           min_repetitions: int = MIN_DUET_REPETITIONS) -> Layout:
    """The spec's cells grouped by its design (or `design`), with the block length (or `block`); duets need
    `min_repetitions` (1: a round of a sequence, whose rounds give the arms their turns over the CPUs)."""
    design = design or spec.design
    block = block or spec.block
    if design not in DESIGNS:
        raise UsageError(f"unknown design {design!r}; valid: {', '.join(DESIGNS)}")
    if design == RUNS:
        return Layout(design, [], list(spec.cells), {})
    if design == DUET:
        return _duets(spec, list(spec.cells), Layout(design, [], [], {}), None, min_repetitions)
    reasons: dict[str, str] = {}
    candidates: dict[tuple, list[Cell]] = {}
    for cell in spec.cells:
        why = _arm_reason(cell.request)
        if why is None:
            candidates.setdefault(_group_key(cell), []).append(cell)
        else:
            reasons[cell.key] = why
    groups, alone = [], [c for c in spec.cells if c.key in reasons]
    for cells in candidates.values():
        if len(cells) < 2:
            reasons[cells[0].key] = "no other configuration of its block can share its process"
            alone.append(cells[0])
            continue
        n = iterations_of(cells[0])
        b = block or default_block(n, len(cells))
        if n % b:
            raise UsageError(f"design {design}: block = {b} does not divide the arms' {n} iterations "
                             f"({cells[0].key} ...); choose a divisor of {n}")
        if n // b * len(cells) > MAX_ORDER:
            raise UsageError(f"design {design}: block = {b} gives {len(cells)} arms {n // b * len(cells):,} blocks, "
                             f"more than one run takes ({MAX_ORDER:,}); choose a divisor of {n} of at least "
                             f"{-(-n * len(cells) // MAX_ORDER)}")
        groups.append(Group(tuple(cells), b))
    if design == INTERLEAVED and reasons:
        key, why = next(iter(reasons.items()))
        raise UsageError(f"design interleaved: configuration {key} cannot be an arm of an interleaved run: {why}; "
                         "use design = \"auto\" to run such configurations in runs of their own")
    alone.sort(key=lambda c: spec.cells.index(c))
    return _duets(spec, alone, Layout(design, groups, [], reasons), AUTO_DUET_ARMS, min_repetitions)


def _duets(spec: Spec, cells: list[Cell], lay: Layout, max_arms: int | None, min_repetitions: int) -> Layout:
    """`cells` laid out side by side where they can be (design duet: all of them, or an error naming the one
    that cannot; auto: groups of up to `max_arms`, the rest in runs of their own with why)."""
    strict = max_arms is None
    why_not: dict[str, str] = {}
    candidates: dict[tuple, list[Cell]] = {}
    for cell in cells:
        why = _duet_reason(cell, min_repetitions)
        if why is None:
            candidates.setdefault(_duet_key(cell), []).append(cell)
        else:
            why_not[cell.key] = why
    for group in candidates.values():
        if len(group) < 2:
            why_not[group[0].key] = "no other configuration differs from it only in its own process's settings"
        elif not strict and len(group) > max_arms:   # said instead of why the cells could not be interleaved
            for c in group:
                why_not[c.key] = lay.reasons[c.key] = (
                    f"{len(group)} configurations differ only in their own processes' settings; design auto runs "
                    f"{max_arms} side by side (design = \"duet\": one per CPU)")
        else:
            lay.groups.append(Group(tuple(group), 1, DUET))
            for c in group:
                lay.reasons.pop(c.key, None)
    if strict and why_not:
        key, why = next(iter(why_not.items()))
        raise UsageError(f"design duet: configuration {key} cannot run side by side with another: {why}; "
                         "use design = \"auto\" to run such configurations in runs of their own")
    for c in cells:
        if c.key in why_not:
            lay.alone.append(c)
            lay.reasons.setdefault(c.key, why_not[c.key])
    lay.alone.sort(key=lambda c: spec.cells.index(c))
    return lay


def block_order(arms: int, rounds: int, seed: str) -> list[int]:
    """The arm of each block: `rounds` rounds, each a fresh random permutation of the arms (seeded by the
    pairing id, so a repeated run of the same plan index measures in the same order)."""
    rng = random.Random(seed)
    order: list[int] = []
    for _ in range(rounds):
        round_ = list(range(arms))
        rng.shuffle(round_)
        order += round_
    return order
