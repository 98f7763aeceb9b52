"""The `rt_throttled` cause (docs/explain.md, the cause table and "Remedies") on trace text: a normal-priority
task that ran while the measured SCHED_FIFO task was runnable on its CPU, which only RT throttling allows; its
remedy, rt_runtime_us = -1 first. On this host's kernel: tests/test_explain_throttled.py."""

from __future__ import annotations

import pytest

from rtscope import explain_trace
from rtscope.analysis import explain_remedies

pytestmark = pytest.mark.fast


NORMAL = "rtsc-normal"

TRACE = """\
          rtprobe-900     [001] d..2.   100.000000: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=rtsc-fifo next_pid=901 next_prio=49
        rtsc-fifo-901     [001] d.h1.   100.001000: sched_wakeup: comm=rtprobe pid=900 prio=19 target_cpu=001
        rtsc-fifo-901     [001] d..2.   100.001005: sched_switch: prev_comm=rtsc-fifo prev_pid=901 prev_prio=49 prev_state=R ==> next_comm=rtsc-normal next_pid=902 next_prio=120
      rtsc-normal-902     [001] d..2.   100.041000: sched_switch: prev_comm=rtsc-normal prev_pid=902 prev_prio=120 prev_state=R ==> next_comm=rtprobe next_pid=900 next_prio=19
          rtprobe-900     [001] .....   100.041010: sys_exit: NR 230 = 0
"""


def test_a_normal_task_over_a_runnable_fifo_task_is_rt_throttling():
    events = explain_trace.parse(TRACE.splitlines())
    got = explain_trace.attribute(events, 100_001_000_000, 100_041_010_000)
    assert got["measuring_pid"] == 900
    top = got["causes"][0]
    assert (top["kind"], top["name"], top["pid"], top["prio"]) == ("rt_throttled", NORMAL, 902, 120)
    assert top["duration_ns"] == 39_995_000
    # a short one (a kernel section not preempted at once) stays a thread cause
    short = explain_trace.attribute(events, 100_001_000_000, 100_001_010_000)
    assert [c["kind"] for c in short["causes"]] == ["thread"]
    # the same normal task over a normal-priority measured task is just a thread
    normal = TRACE.replace("prio=19", "prio=120")
    got = explain_trace.attribute(explain_trace.parse(normal.splitlines()), 100_001_000_000, 100_041_010_000)
    assert got["causes"][0]["kind"] == "thread"
    # its remedy: RT throttling off first
    from types import SimpleNamespace
    run = SimpleNamespace(id=1, settings={"cpu": 1, "rt_priority": 80}, runtime="native",
                          machine={"cpus_online": [0, 1]})
    s = {"value_ns": 40_010_000, "cpu": 1, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [top]}
    assert [(r.setting, r.value) for r in explain_remedies.suggest(run, [s], 0)] == [("rt_runtime_us", -1), ("cpu", 0)]
