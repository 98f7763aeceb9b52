"""Setting explain's kernel side for BEAM runs on trace excerpts (settings/explain_beam_kernel.py, docs/explain.md):
the merge of the kernel's causes into the BEAM's, another VM thread, time the kernel did not see the VM run, and
the scheduler thread followed across CPUs. The culprit on the real kernel: tests/test_explain_beam_kernel.py."""

from __future__ import annotations

import pytest

from rtscope import explain_trace
from rtscope.settings import explain_beam_kernel

pytestmark = pytest.mark.fast


US = 1000
T0 = 800_000_000_000  # the sample's start on CLOCK_MONOTONIC (ns)


def line(comm: str, pid: int, cpu: int, at_us: int, event: str, rest: str) -> str:
    t = T0 + at_us * US
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] d..2. {t // 10**9}.{t % 10**9 // US:06d}: {event}: {rest}"


def switch(cpu: int, at_us: int, prev: tuple[str, int, int], state: str, nxt: tuple[str, int, int]) -> str:
    return line(prev[0], prev[1], cpu, at_us, "sched_switch",
                f"prev_comm={prev[0]} prev_pid={prev[1]} prev_prio={prev[2]} prev_state={state} ==> "
                f"next_comm={nxt[0]} next_pid={nxt[1]} next_prio={nxt[2]}")


SCHED = ("1_scheduler", 501, 19)
DIRTY = ("1_dirty_cpu_sch", 503, 19)
CULPRIT = ("rtsc-culprit", 900, 9)
THREADS = [[500, "beam.smp"], [501, "1_scheduler"], [502, "2_scheduler"], [503, "1_dirty_cpu_sch"]]


def test_kernel_causes_are_carved_out_of_the_beam_interval_they_fell_in():
    """A 1000 µs sample, a major GC from 100 to 600 µs (BEAM side); the culprit preempts the scheduler thread
    from 200 to 400 µs (kernel side), a timer interrupt at 700 µs takes 10 µs: the GC keeps 300 µs, the
    culprit has its 200 µs, the interrupt its 10 µs out of the process's own running time."""
    trace = [
        line(*SCHED[:2], 1, -1000, "sched_wakeup", "comm=1_scheduler pid=501 prio=19 target_cpu=001"),
        switch(1, 200, SCHED, "R+", CULPRIT),
        switch(1, 400, CULPRIT, "S", SCHED),
        line(*SCHED[:2], 1, 700, "local_timer_entry", "vector=236"),
        line(*SCHED[:2], 1, 710, "local_timer_exit", "vector=236"),
    ]
    rec = {"value_ns": 1000 * US, "start_ns": 5, "os_start_ns": T0, "os_end_ns": T0 + 1000 * US, "scheduler": 1,
           "on": [[0, 1]], "self_ns": 500 * US, "unexplained_ns": 0,
           "causes": [{"kind": "gc", "name": "major", "count": 1, "duration_ns": 500 * US,
                       "intervals": [[100 * US, 600 * US]], "pid": None, "irq": None, "prio": None}]}
    vm, by_sched = explain_beam_kernel.vm_threads({"threads": THREADS})
    assert vm == {500, 501, 502, 503} and by_sched == {1: {501}, 2: {502}, 0: {503}}
    got = explain_beam_kernel.merge(rec, {1: explain_trace.parse(trace)}, vm, by_sched, [1])
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    assert by[("thread", "rtsc-culprit")]["duration_ns"] == 200 * US and by[("thread", "rtsc-culprit")]["pid"] == 900
    assert by[("thread", "rtsc-culprit")]["intervals"] == [[200 * US, 400 * US]]  # relative to the sample's start
    assert by[("gc", "major")]["duration_ns"] == 300 * US  # 500 minus the culprit's 200 inside it
    assert by[("irq", "local_timer")]["duration_ns"] == 10 * US
    assert got["self_ns"] == 490 * US and got["unexplained_ns"] == 0
    assert sum(c["duration_ns"] for c in got["causes"]) + got["self_ns"] == rec["value_ns"]
    assert got["cpu"] == 1 and got["measuring_pid"] == 501 and got["note"] is None
    assert [c["kind"] for c in got["causes"]] == ["gc", "thread", "irq"]  # largest first


def test_another_vm_thread_holding_the_cpu_while_the_scheduler_waits_is_vm_thread():
    """The VM pinned to CPU 1 with two schedulers: the second one (spinning for work, +sbwt) preempts the
    measuring scheduler's thread from 200 to 500 µs: a vm_thread cause, named by the thread. Once the measuring
    thread sleeps (from 700 µs), the other one running is the VM's own time, no cause."""
    other = ("2_scheduler", 502, 19)
    trace = [
        line(*SCHED[:2], 1, -1000, "sched_wakeup", "comm=1_scheduler pid=501 prio=19 target_cpu=001"),
        switch(1, 200, SCHED, "R+", other),
        switch(1, 500, other, "S", SCHED),
        switch(1, 700, SCHED, "S", other),
        switch(1, 900, other, "S", SCHED),
    ]
    rec = {"value_ns": 1000 * US, "start_ns": 5, "os_start_ns": T0, "os_end_ns": T0 + 1000 * US, "scheduler": 1,
           "on": [[0, 1]], "self_ns": 800 * US, "unexplained_ns": 0,
           "causes": [{"kind": "scheduled_out", "name": "scheduled out", "count": 1, "duration_ns": 200 * US,
                       "intervals": [[700 * US, 900 * US]], "pid": None, "irq": None, "prio": None}]}
    vm, by_sched = explain_beam_kernel.vm_threads({"threads": THREADS})
    got = explain_beam_kernel.merge(rec, {1: explain_trace.parse(trace)}, vm, by_sched, [1])
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    assert set(by) == {("vm_thread", "2_scheduler"), ("scheduled_out", "scheduled out")}, got["causes"]
    spin = by[("vm_thread", "2_scheduler")]
    assert (spin["pid"], spin["duration_ns"], spin["intervals"]) == (502, 300 * US, [[200 * US, 500 * US]])
    assert by[("scheduled_out", "scheduled out")]["duration_ns"] == 200 * US
    assert got["self_ns"] == 500 * US and got["unexplained_ns"] == 0


def test_time_the_kernel_did_not_see_the_vm_run_is_unexplained_not_self():
    """The CPU idle from 300 to 500 µs while the BEAM says its process was running: not self, unexplained;
    another task running while the VM's threads sleep is no cause."""
    trace = [
        switch(1, 300, SCHED, "R", ("swapper/1", 0, 120)),
        switch(1, 500, ("swapper/1", 0, 120), "R", SCHED),
    ]
    rec = {"value_ns": 1000 * US, "start_ns": 0, "os_start_ns": T0, "os_end_ns": T0 + 1000 * US, "scheduler": 1,
           "on": [[0, 1]], "causes": [], "self_ns": 1000 * US, "unexplained_ns": 0}
    vm, by_sched = explain_beam_kernel.vm_threads({"threads": THREADS})
    got = explain_beam_kernel.merge(rec, {1: explain_trace.parse(trace)}, vm, by_sched, [1])
    assert got["causes"] == [] and got["self_ns"] == 800 * US and got["unexplained_ns"] == 200 * US
    asleep = [switch(1, 300, SCHED, "S", CULPRIT), switch(1, 500, CULPRIT, "S", SCHED)]
    got = explain_beam_kernel.merge(rec, {1: explain_trace.parse(asleep)}, vm, by_sched, [1])
    assert got["causes"] == [] and got["unexplained_ns"] == 200 * US


def test_a_stretch_without_events_belongs_to_the_task_the_next_line_names():
    """The trace here often lacks the sched_switch out of the idle task: the scheduler thread woken at -20 µs,
    its next line at 500 µs. A stretch of the sample (0..100 µs) with no event inside is the VM's own running,
    not idle time."""
    trace = [
        line("<idle>", 0, 1, -20, "sched_wakeup", "comm=1_scheduler pid=501 prio=19 target_cpu=001"),
        line(*SCHED[:2], 1, 500, "local_timer_entry", "vector=236"),
        line(*SCHED[:2], 1, 505, "local_timer_exit", "vector=236"),
    ]
    rec = {"value_ns": 1000 * US, "start_ns": 0, "os_start_ns": T0, "os_end_ns": T0 + 1000 * US, "scheduler": 1,
           "on": [[0, 1], [100 * US, 1]], "causes": [], "self_ns": 1000 * US, "unexplained_ns": 0}
    vm, by_sched = explain_beam_kernel.vm_threads({"threads": THREADS})
    got = explain_beam_kernel.merge(rec, {1: explain_trace.parse(trace)}, vm, by_sched, [1])
    assert got["self_ns"] == 995 * US and got["unexplained_ns"] == 0
    assert [(c["name"], c["duration_ns"]) for c in got["causes"]] == [("local_timer", 5 * US)]


def test_a_scheduler_thread_that_migrates_is_attributed_per_cpu_stretch():
    """Unpinned (two traced CPUs): the scheduler thread preempted on CPU 0 at 200 µs, run on CPU 1 from 300 µs
    where a thread takes 100 µs from it; a dirty-scheduler stretch (its GC) whose thread the trace shows on
    CPU 0."""
    cpu0 = [
        line(*SCHED[:2], 0, -500, "sched_wakeup", "comm=1_scheduler pid=501 prio=19 target_cpu=000"),
        switch(0, 200, SCHED, "R+", CULPRIT),
        switch(0, 900, CULPRIT, "S", DIRTY),
    ]
    cpu1 = [
        switch(1, 300, ("swapper/1", 0, 120), "R", SCHED),
        switch(1, 500, SCHED, "R+", ("kworker/1:1", 77, 120)),
        switch(1, 600, ("kworker/1:1", 77, 120), "S", SCHED),
    ]
    rec = {"value_ns": 1000 * US, "start_ns": 0, "os_start_ns": T0, "os_end_ns": T0 + 1000 * US, "scheduler": 1,
           "on": [[0, 1], [850 * US, 0]], "self_ns": 1000 * US, "unexplained_ns": 0, "causes": []}
    vm, by_sched = explain_beam_kernel.vm_threads({"threads": THREADS})
    events = {0: explain_trace.parse(cpu0), 1: explain_trace.parse(cpu1)}
    assert explain_beam_kernel._homes(events, {501}, T0, T0 + 800 * US) == [(T0, T0 + 300 * US, 0),
                                                                      (T0 + 300 * US, T0 + 800 * US, 1)]
    got = explain_beam_kernel.merge(rec, events, vm, by_sched, [0, 1])
    by = {c["name"]: c for c in got["causes"]}
    # CPU 0 until the thread ran on CPU 1: the culprit from 200 to 300 µs; then the kworker on CPU 1; in the
    # dirty stretch (850..1000 µs, on CPU 0 where its thread was switched in at 900) the culprit again.
    assert by["rtsc-culprit"]["duration_ns"] == 100 * US + 50 * US
    assert by["kworker/1:1"]["duration_ns"] == 100 * US
    assert got["cpu"] == 1 and got["note"] is None
    assert sum(c["duration_ns"] for c in got["causes"]) + got["self_ns"] + got["unexplained_ns"] == rec["value_ns"]
