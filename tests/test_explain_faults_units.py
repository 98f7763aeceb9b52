"""The `page_fault` cause (docs/explain.md, the cause table and "Remedies") on trace text: the measuring thread's
own page faults, from x86's exceptions:page_fault_user, timed to the next event and counted, the access from the
error code; its remedy, mlock = true. On this host's kernel: tests/test_explain_faults.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rtscope import explain_trace
from rtscope.analysis import explain_remedies

pytestmark = pytest.mark.fast


TRACE = """\
          rtprobe-900     [001] .....   100.000000: page_fault_user: address=0x7f0000000000 ip=0x5500 error_code=0x6
          rtprobe-900     [001] .....   100.000100: page_fault_user: address=0x7f0000001000 ip=0x5500 error_code=0x6
          rtprobe-900     [001] d.h1.   100.000150: local_timer_entry: vector=236
          rtprobe-900     [001] d.h1.   100.000170: local_timer_exit: vector=236
          rtprobe-900     [001] .....   100.000200: page_fault_user: address=0x7f0000002000 ip=0x5500 error_code=0x4
          rtprobe-900     [001] d..2.   100.000300: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=R ==> next_comm=kworker/1:1 next_pid=77 next_prio=120
      kworker/1:1-77      [001] d..2.   100.000400: sched_switch: prev_comm=kworker/1:1 prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=rtprobe next_pid=900 next_prio=19
          rtprobe-900     [001] .....   100.000500: page_fault_user: address=0x7f0000003000 ip=0x7f00 error_code=0x14
"""


def test_faults_are_timed_to_the_next_event_and_counted():
    """Back to back write faults are timed to the next fault, less the interrupt inside one; being switched out
    ends a fault; a fault before the sample's start is none of its causes; the access comes from the error
    code (bit 1 write, bit 4 instruction fetch)."""
    events = explain_trace.parse(TRACE.splitlines())
    got = explain_trace.attribute(events, 100_000_050_000, 100_000_600_000)   # the first fault is before the start
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    assert got["measuring_pid"] == 900
    write = by[("page_fault", "write")]
    assert (write["duration_ns"], write["count"]) == (80_000, 1)     # 100.000100..200, the timer's 20 µs out
    assert by[("irq", "local_timer")]["duration_ns"] == 20_000
    read = by[("page_fault", "read")]
    assert (read["duration_ns"], read["count"]) == (100_000, 1)      # 200..300: switched out then
    assert by[("thread", "kworker/1:1")]["duration_ns"] == 100_000
    instruction = by[("page_fault", "instruction")]
    assert (instruction["duration_ns"], instruction["count"]) == (100_000, 1)   # to the sample's end
    # before the first fault of the sample, and the 50 µs of the first fault before it began: its own time
    assert got["self_ns"] == 50_000 + 100_000   # 050..100 (the fault before the start is not one), 400..500
    # another cause keeps no count
    assert "count" not in by[("thread", "kworker/1:1")]


def test_a_fault_remedy_is_mlock_for_a_native_run_not_yet_locked():
    fault = {"kind": "page_fault", "name": "write", "pid": None, "irq": None, "prio": None, "count": 4096,
             "duration_ns": 9_000_000}
    s = {"value_ns": 10_000_000, "cpu": 1, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [fault]}
    run = SimpleNamespace(id=1, settings={"cpu": 1, "rt_priority": 80}, runtime="native",
                          machine={"cpus_online": [0, 1]})
    [r] = explain_remedies.suggest(run, [s], 0)
    assert (r.kind, r.name, r.setting, r.value) == ("page_fault", "write", "mlock", True)
    locked = SimpleNamespace(**{**vars(run), "settings": {**run.settings, "mlock": True}})
    assert explain_remedies.suggest(locked, [s], 0) == []
