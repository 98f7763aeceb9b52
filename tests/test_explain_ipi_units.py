"""Inter-processor interrupts as causes (docs/explain.md, the cause table) on trace text: x86's irq_vectors events
for function calls (TLB shootdowns among them), rescheduling and irq work are `irq` causes named by the vector,
remedied by an isolated, tickless CPU. On this host's kernel: tests/test_explain_ipi.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rtscope import explain_trace
from rtscope.analysis import explain_remedies

pytestmark = pytest.mark.fast


TRACE = """\
          rtprobe-900     [001] d..2.   100.000000: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
           <idle>-0       [001] d.h1.   100.001000: call_function_single_entry: vector=251
           <idle>-0       [001] d.h1.   100.001030: call_function_single_exit: vector=251
           <idle>-0       [001] d.h1.   100.001040: reschedule_entry: vector=253
           <idle>-0       [001] d.h1.   100.001045: reschedule_exit: vector=253
           <idle>-0       [001] d..2.   100.001050: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtprobe next_pid=900 next_prio=19
"""


def test_ipi_vectors_are_irq_causes_named_by_the_vector():
    got = explain_trace.attribute(explain_trace.parse(TRACE.splitlines()), 100_000_990_000, 100_001_060_000, measuring=900)
    by = {c["name"]: c for c in got["causes"]}
    assert (by["call_function_single"]["kind"], by["call_function_single"]["irq"],
            by["call_function_single"]["duration_ns"]) == ("irq", 251, 30_000)
    assert (by["reschedule"]["irq"], by["reschedule"]["duration_ns"]) == (253, 5_000)
    # their remedy: keep the CPU isolated and tickless (a boot), else another CPU
    run = SimpleNamespace(id=1, settings={"cpu": 1, "rt_priority": 80}, runtime="native",
                          machine={"cpus_online": [0, 1]})
    s = {"value_ns": 30_000, "cpu": 1, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [by["call_function_single"]]}
    assert [(r.setting, r.value) for r in explain_remedies.suggest(run, [s], 0)] == [
        ("kernel_cmdline", "nohz_full=1 isolcpus=1"), ("cpu", 0)]
