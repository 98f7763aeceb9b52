"""The kernel side of setting explain for BEAM runs: what the OS took from the VM's scheduler threads during
each explained sample, merged with the BEAM's own causes (docs/explain.md, "BEAM runs: both sides").

The harness (beam/lib/rtscope/explain.ex) gives each explained sample its interval on CLOCK_MONOTONIC (the
trace's `mono` clock; mapped from erlang:monotonic_time with an offset read right after the call), the
schedulers it ran on (`on`: the one at its start, then each switch-in; 0 = a dirty scheduler), its BEAM causes
with every stretch (`gc`, `scheduled_out`, `dirty_hop`, `port`), and the VM's OS threads (`N_scheduler`,
`N_dirty_cpu_sch`, ...).
Here, per stretch of one scheduler, the CPU its thread was on (the pinned CPU, else followed through the
trace's sched_switch/sched_wakeup) is attributed with explain_trace.interference: interrupts at any time, other
tasks while a VM thread was runnable there, other threads of the VM while the measuring one waited there
(`vm_thread`).

Merge, so that a sample's causes sum to at most its value: each kernel cause keeps its whole duration and is
carved out of the BEAM interval it fell in (a GC, a time scheduled out, the process running its code); the
BEAM causes keep the rest. Of the process's own running time, only what the kernel saw a VM thread run stays
`self_ns`; the rest (the CPU idle while the VM waited for it, time no event accounts for) is unexplained.
"""

from __future__ import annotations

import re
from typing import Any

from .. import explain_trace
from ..targets import tracefs

Spans = list[tuple[int, int]]
# The BEAM's causes that are stretches of the process not running (their intervals include any collection
# inside them, which their duration leaves out): scheduled out, a hop onto a dirty scheduler and back, a wait
# for a port.
NOT_RUNNING = ("scheduled_out", "dirty_hop", "port")


# --- interval arithmetic on sorted, disjoint [a, b) lists ---------------------------------------------------

def _union(spans: Spans) -> Spans:
    out: Spans = []
    for a, b in sorted(s for s in spans if s[1] > s[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlap(x: Spans, y: Spans) -> int:
    x, y = _union(x), _union(y)
    total, j = 0, 0
    for a, b in x:
        while j < len(y) and y[j][1] <= a:
            j += 1
        k = j
        while k < len(y) and y[k][0] < b:
            total += min(b, y[k][1]) - max(a, y[k][0])
            k += 1
    return total


def _minus(x: Spans, y: Spans) -> Spans:
    out: Spans = []
    y = _union(y)
    for a, b in _union(x):
        for c, d in y:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


# --- which thread, on which CPU ----------------------------------------------------------------------------

def vm_threads(explained: dict) -> tuple[set[int], dict[int, set[int]]]:
    """The VM's thread ids, and per scheduler id the threads that run it (0: every dirty CPU scheduler)."""
    names = {int(tid): str(name) for tid, name in explained.get("threads") or []}
    by_sched: dict[int, set[int]] = {}
    for tid, name in names.items():
        m = re.fullmatch(r"(\d+)_scheduler", name)
        if m:
            by_sched.setdefault(int(m[1]), set()).add(tid)
        elif re.fullmatch(r"\d+_dirty_cpu_s\w*", name):
            by_sched.setdefault(0, set()).add(tid)
    return set(names), by_sched


def _homes(events: dict[int, list[explain_trace.Event]], tids: set[int], a: int, b: int) -> list[tuple[int, int, int]]:
    """[(from, to, cpu)] covering [a, b]: the CPU the threads `tids` were on, from the switches in and out of
    them and their wake-ups (target_cpu), across the traced CPUs' events. Before the first sign of them in
    [a, b], their last CPU before a; [] when the trace never shows them."""
    moves: list[tuple[int, int]] = []
    for cpu, evs in events.items():
        for e in evs:
            if e.ts_ns > b:
                break
            if e.name == "sched_switch":
                m = re.search(r"prev_pid=(\d+) .*next_pid=(\d+)", e.rest)
                if m and (int(m[1]) in tids or int(m[2]) in tids):
                    moves.append((e.ts_ns, cpu))
            elif e.name == "sched_wakeup":
                f = e.fields()
                if f.get("pid", "").isdigit() and int(f["pid"]) in tids and f.get("target_cpu", "").isdigit():
                    moves.append((e.ts_ns, int(f["target_cpu"])))
            elif e.pid in tids:
                moves.append((e.ts_ns, cpu))
    moves.sort()
    before = [cpu for t, cpu in moves if t <= a]
    inside = [(t, cpu) for t, cpu in moves if a < t <= b]
    if not before and not inside:
        return []
    out: list[tuple[int, int, int]] = []
    at, cpu = a, before[-1] if before else inside[0][1]
    for t, c in inside:
        if c != cpu:
            out.append((at, t, cpu))
            at, cpu = t, c
    out.append((at, b, cpu))
    return [s for s in out if s[1] > s[0]]


# --- one sample ----------------------------------------------------------------------------------------------

def _stretches(rec: dict) -> list[tuple[int, int, int]]:
    """(from, to, scheduler) on CLOCK_MONOTONIC from the harness's `on`."""
    start, end = rec["os_start_ns"], rec["os_end_ns"]
    on = sorted((int(rel), sched) for rel, sched in rec.get("on") or [[0, rec.get("scheduler")]])
    out = []
    for i, (rel, sched) in enumerate(on):
        to = start + on[i + 1][0] if i + 1 < len(on) else end
        if to > start + rel:
            out.append((start + rel, min(to, end), sched))
    return out


def merge(rec: dict, events: dict[int, list[explain_trace.Event]], vm: set[int], by_sched: dict[int, set[int]],
          traced: list[int]) -> dict:
    """The sample record `rec` (BEAM causes with every stretch, relative to its start) with the kernel's
    causes merged in, from the events of the traced CPUs around it (docs: the merge)."""
    start, end, value = rec["os_start_ns"], rec["os_end_ns"], rec["value_ns"]
    kernel: dict[tuple, dict] = {}
    spans: Spans = []        # kernel causes' time, relative to the sample's start
    vm_ran: Spans = []       # a VM thread ran (the kernel's view), relative
    covered: Spans = []      # the stretches the kernel side attributed, relative
    cpu_time: dict[int, int] = {}
    missed: list[str] = []
    for a, b, sched in _stretches(rec):
        tids = by_sched.get(sched, set()) if sched is not None else set()
        if len(traced) == 1:  # the VM pinned (or a one-CPU target): every thread of it is there
            homes = [(a, b, traced[0])]
        elif not tids:
            missed.append(f"{(b - a) / 1000:.0f} µs on scheduler {sched}: no thread of that name in the VM")
            continue
        else:
            homes = _homes(events, tids, a, b)
            if not homes:
                missed.append(f"{(b - a) / 1000:.0f} µs on scheduler {sched}: its thread is not in the trace")
        for x, y, cpu in homes:
            if cpu not in events:
                missed.append(f"{(y - x) / 1000:.0f} µs on CPU {cpu}, which was not traced")
                continue
            got = explain_trace.interference(events[cpu], x, y, vm, cpu, origin_ns=start, running=tids)
            cpu_time[cpu] = cpu_time.get(cpu, 0) + y - x
            covered.append((x - start, y - start))
            vm_ran.extend((p - start, q - start) for p, q in got.vm_spans)
            for c in got.causes:
                key = (c["kind"], c["name"], c["pid"], c["irq"])
                if key not in kernel:
                    kernel[key] = {**c, "duration_ns": 0, "intervals": []}
                kernel[key]["duration_ns"] += c["duration_ns"]
                room = explain_trace.INTERVALS_KEPT - len(kernel[key]["intervals"])
                kernel[key]["intervals"].extend(c["intervals"][:max(0, room)])
            spans.extend((p - start, q - start) for p, q, _ in got.spans)
    # The BEAM's intervals: each GC kind's stretches; scheduled out (GC excluded); the rest its own running.
    gc = _union([(x, y) for c in rec["causes"] if c["kind"] == "gc" for x, y in c.get("intervals", [])])
    merged = []
    for c in rec["causes"]:
        mine = [(x, y) for x, y in c.get("intervals", [])]
        if c["kind"] in NOT_RUNNING:
            mine = _minus(mine, gc)
        left = max(0, c["duration_ns"] - _overlap(mine, spans))
        if left > 0:
            merged.append({**c, "duration_ns": left,
                           "intervals": c.get("intervals", [])[:explain_trace.INTERVALS_KEPT]})
    busy = _union(gc + [(x, y) for c in rec["causes"] if c["kind"] in NOT_RUNNING for x, y in c["intervals"]])
    own = _minus([(0, value)], busy)  # the process running its code, as the BEAM sees it
    # Its own time where the kernel saw a VM thread run, plus where the kernel side did not look.
    self_ns = _overlap(own, vm_ran) + _overlap(_minus(own, spans), _minus([(0, value)], covered))
    merged.extend(kernel.values())
    merged.sort(key=lambda c: -c["duration_ns"])
    total = sum(c["duration_ns"] for c in merged)
    self_ns = max(0, min(self_ns, value - total))
    measuring = by_sched.get(rec.get("scheduler") or -1) or set()
    return {**rec, "causes": merged, "self_ns": self_ns, "unexplained_ns": max(0, value - total - self_ns),
            "start_ns": start, "erlang_start_ns": rec["start_ns"],
            "cpu": max(cpu_time, key=cpu_time.get) if cpu_time else None,
            "measuring_pid": min(measuring) if measuring else None, "clock": tracefs.CLOCK,
            "note": "kernel side not covered: " + "; ".join(missed) if missed else None}


def _windows(instance: tracefs.Instance,
             wanted: list[dict]) -> tuple[dict[int, dict[int, list[explain_trace.Event]]], int]:
    """Per sample (by index into `wanted`): its events per traced CPU, from the window keeper's copies (the
    harness marked each sample when it entered its worst so far), else from the ring buffer; and the bytes
    read."""
    spans = [(rec["os_start_ns"], rec["os_end_ns"]) for rec in wanted]
    kept, read_bytes = instance.kept_windows(spans)
    oldest = instance.oldest_ns()
    out: dict[int, dict[int, list[explain_trace.Event]]] = {}
    ring: list[int] = []  # the samples to read from the ring buffers
    for i, (a, b) in enumerate(spans):
        lines = kept.get((a, b))
        if lines is not None:
            out[i] = explain_trace.by_cpu(explain_trace.parse(lines))
        elif all(instance.ring_holds(oldest, c, a) for c in instance.cpus):
            ring.append(i)
    for cpu in instance.cpus if ring else []:
        got, read = instance.ring_windows(cpu, [spans[i] for i in ring])
        read_bytes += read
        for i, evs in zip(ring, got):
            out.setdefault(i, {})[cpu] = evs
    return out, read_bytes


def kernel_side(instance: tracefs.Instance, records: list[dict], explained: dict) -> tuple[list[dict], dict]:
    """The BEAM samples `records` (full BEAM intervals) with their kernel causes merged in, and what it cost."""
    instance.stop()
    vm, by_sched = vm_threads(explained)
    mapped = [r for r in records if r.get("os_start_ns") is not None]
    windows, read_bytes = _windows(instance, mapped)
    out = []
    mapped_index = {id(r): i for i, r in enumerate(mapped)}
    for r in records:
        if r.get("os_start_ns") is None:
            out.append({**r, "note": "kernel side not covered: the VM has no OS monotonic clock source"})
            continue
        i = mapped_index[id(r)]
        if i not in windows:
            out.append({**r, "note": "kernel side not covered: the window keeper did not copy its trace in time "
                                     f"and the ring buffer ({instance.buffer_kb} KiB per CPU) no longer held it"})
            continue
        # Every traced CPU appears (an empty list: a CPU with no event in the window).
        events = {c: windows[i].get(c, []) for c in instance.cpus}
        out.append(merge(r, events, vm, by_sched, instance.cpus))
    for r in out:
        for c in r["causes"]:
            c["intervals"] = c.get("intervals", [])[:explain_trace.INTERVALS_KEPT]
    cost = {"samples": len(out), "cpus": instance.cpus, "buffer_kb_per_cpu": instance.buffer_kb,
            "trace_bytes_read": read_bytes,
            "trace_bytes_per_sample": round(read_bytes / len(out)) if out else 0, "clock": tracefs.CLOCK}
    return out, cost


def clock_summary(explained: dict) -> dict[str, Any] | None:
    """The harness's clock mapping for the trailer: the offsets at the run's start and end, their drift, and
    the widest per-sample bracket."""
    clock = explained.get("clock")
    if not clock:
        return None
    brackets = [s.get("offset_bracket_ns") for s in explained.get("samples", []) if s.get("offset_bracket_ns")]
    return {**clock, "sample_bracket_max_ns": max(brackets) if brackets else None}
