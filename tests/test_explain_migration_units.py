"""The `migration` cause (docs/explain.md, the cause table) on trace text: an unpinned probe's sample is followed
across its moves between CPUs (sched_migrate_task) to the CPU it waited on; a move from a CPU whose events are
missing leaves that part unexplained; a large share is remedied by pinning. On this host's kernel:
tests/test_explain_migration.py."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from rtscope import explain_trace
from rtscope.analysis import explain_remedies

pytestmark = pytest.mark.fast


# The probe (pid 900, FIFO 80: kernel prio 19) is due at 100.000000 on CPU 1, where a culprit (pid 700, FIFO 90)
# runs; CPU 0's culprit (701) ends at 100.008000, its push IPI moves the probe from CPU 1, and CPU 0, idle from
# then on, switches to it.
TRACE = """\
          rtprobe-900     [001] d..2.    99.999000: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=rtsc-culprit next_pid=700 next_prio=9
    rtsc-culprit-700   [001] d.h1.   100.004000: irq_work_entry: vector=246
    rtsc-culprit-700   [001] d.h1.   100.004005: irq_work_exit: vector=246
    rtsc-culprit-700   [001] d.h2.   100.008010: irq_work_entry: vector=246
    rtsc-culprit-700   [001] d.h2.   100.008020: sched_migrate_task: comm=rtprobe pid=900 prio=19 orig_cpu=1 dest_cpu=0
    rtsc-culprit-700   [001] d.h1.   100.008030: irq_work_exit: vector=246
          <idle>-0       [000] d..2.    99.999500: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtsc-culprit next_pid=701 next_prio=9
    rtsc-culprit-701   [000] d..2.   100.008000: sched_switch: prev_comm=rtsc-culprit prev_pid=701 prev_prio=9 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
          <idle>-0     [000] d..2.   100.008050: sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtprobe next_pid=900 next_prio=19
"""
START, END = 100_000_000_000, 100_008_060_000


def test_a_moved_sample_is_followed_to_the_cpu_it_waited_on():
    """Before the move, CPU 1's culprit (and the push IPI) are the causes; after it, CPU 0's idle task up to the
    switch-in is the move's own time. CPU 0's culprit, which ran before the move, is no cause: the probe was not
    on CPU 0 then."""
    events = explain_trace.by_cpu(explain_trace.parse(TRACE.splitlines()))
    got = explain_trace.attribute(events[0], START, END, measuring=900, elsewhere={1: events[1]})
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    assert set(by) == {("thread", "rtsc-culprit"), ("irq", "irq_work"), ("migration", "cpu 1 -> 0")}
    assert by[("thread", "rtsc-culprit")]["pid"] == 700
    assert by[("thread", "rtsc-culprit")]["duration_ns"] == 8_020_000 - 5_000 - 10_000   # less the irq_work
    assert by[("irq", "irq_work")]["duration_ns"] == 5_000 + 10_000
    moved = by[("migration", "cpu 1 -> 0")]
    assert (moved["duration_ns"], moved["count"]) == (30_000, 1)   # 8020..8050: CPU 0 idle until the switch
    assert got["causes"][0]["pid"] == 700 and got["self_ns"] == 10_000 and got["idle_ns"] == 0
    # the CPU it ended on alone (a pinned probe's view): the other CPU's culprit, wrongly
    alone = explain_trace.attribute(events[0], START, END, measuring=900)
    assert alone["causes"][0]["pid"] == 701


def test_a_move_from_a_cpu_whose_events_are_missing_leaves_that_part_unexplained():
    events = explain_trace.by_cpu(explain_trace.parse(TRACE.splitlines()))
    got = explain_trace.attribute(events[0], START, END, measuring=900, elsewhere={2: []})
    assert [c["pid"] for c in got["causes"]] == [701]   # no move seen: the CPU it ended on, as before
    # the move written on the destination (a pull), the CPU it left not traced: its part has no events
    [move] = [e for e in events[1] if e.name == explain_trace.MIGRATE]
    ended = sorted(events[0] + [dataclasses.replace(move, cpu=0)], key=lambda e: e.ts_ns)
    got = explain_trace.attribute(ended, START, END, measuring=900, elsewhere={2: []})
    assert [(c["kind"], c["duration_ns"]) for c in got["causes"]] == [("migration", 30_000)]
    assert got["unexplained_ns"] == 8_020_000


def test_a_move_of_a_large_share_is_remedied_by_pinning():
    move = {"kind": "migration", "name": "cpu 1 -> 0", "pid": None, "irq": None, "prio": None, "count": 3,
            "duration_ns": 900_000, "intervals": []}
    s = {"value_ns": 1_000_000, "cpu": 0, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 100_000,
         "causes": [move]}
    run = SimpleNamespace(id=1, settings={"rt_priority": 80}, runtime="native", machine={"cpus_online": [0, 1]})
    [pin] = explain_remedies.suggest(run, [s], 0)
    assert (pin.setting, pin.value) == ("cpu", 0) and "never moved" in pin.why
    pinned = SimpleNamespace(**{**vars(run), "settings": {"rt_priority": 80, "cpu": 1}})
    assert explain_remedies.suggest(pinned, [s], 0) == []
