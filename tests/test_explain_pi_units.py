"""The `pi_boost` cause (docs/explain.md, the cause table and "Remedies") on trace text: a lock holder the kernel
ran at the measured task's priority (priority inheritance, sched_pi_setprio) while the task waited for its lock
is pi_boost until it lets go, and gets no priority remedy. On this host's kernel: tests/test_explain_pi.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rtscope import explain_trace
from rtscope.analysis import explain_remedies

pytestmark = pytest.mark.fast


# The probe (pid 900, FIFO 80: kernel prio 19) wakes for its call while the holder (901, normal) holds the lock,
# finds it held, boosts the holder, which runs its section out at prio 19 and lets go (back to 120).
TRACE = """\
   rtprobe-holder-901     [001] d..2.   100.000000: sched_switch: prev_comm=rtprobe-holder prev_pid=901 prev_prio=120 prev_state=R+ ==> next_comm=rtprobe next_pid=900 next_prio=19
          rtprobe-900     [001] d..1.   100.000010: sched_pi_setprio: comm=rtprobe-holder pid=901 oldprio=120 newprio=19
          rtprobe-900     [001] d..2.   100.000020: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=rtprobe-holder next_pid=901 next_prio=19
   rtprobe-holder-901     [001] d.h1.   100.002000: irq_handler_entry: irq=26 name=virtio0-input.0
   rtprobe-holder-901     [001] d.h1.   100.002010: irq_handler_exit: irq=26 ret=handled
   rtprobe-holder-901     [001] d..1.   100.005020: sched_pi_setprio: comm=rtprobe-holder pid=901 oldprio=19 newprio=120
   rtprobe-holder-901     [001] d..2.   100.005030: sched_switch: prev_comm=rtprobe-holder prev_pid=901 prev_prio=120 prev_state=R+ ==> next_comm=rtprobe next_pid=900 next_prio=19
          rtprobe-900     [001] d..2.   100.005040: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=rtprobe-holder next_pid=901 next_prio=120
"""


def test_a_boosted_holder_is_pi_boost_until_it_lets_go():
    """From the boost to the holder's return to its own priority it is a pi_boost cause, an interrupt inside it
    excepted; before the boost (outside the sample) and after, the holder is an ordinary thread."""
    events = explain_trace.parse(TRACE.splitlines())
    got = explain_trace.attribute(events, 100_000_000_000, 100_005_040_000, measuring=900)
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    boosted = by[("pi_boost", "rtprobe-holder")]
    assert (boosted["pid"], boosted["prio"]) == (901, 120)   # its own priority (nice 0)
    assert boosted["duration_ns"] == 5_000_000 - 10_000     # 020..5020, less the irq's 10 µs
    assert by[("irq", "virtio0-input.0")]["duration_ns"] == 10_000
    # back at its own priority, the 10 µs to its switch (the unlock's way out): an ordinary thread
    assert by[("thread", "rtprobe-holder")]["duration_ns"] == 10_000
    assert got["self_ns"] == 20_000 + 10_000    # 000..020 and 5030..5040
    # after the sample, at its own priority again: an ordinary thread
    later = explain_trace.attribute(events, 100_005_040_000, 100_005_100_000, measuring=900)
    assert [(c["kind"], c["pid"]) for c in later["causes"]] == [("thread", 901)]


def test_a_boosted_holder_gets_no_priority_remedy():
    """A higher priority for the task would not help (the holder runs at the task's priority while it holds the
    lock), so no rt_priority above it is suggested; as a thread the same holder would get one."""
    holder = {"kind": "pi_boost", "name": "rtprobe-holder", "pid": 901, "irq": None, "prio": 19,
              "duration_ns": 9_000_000, "intervals": [[0, 9_000_000]]}
    s = {"value_ns": 10_000_000, "cpu": 1, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [holder]}
    run = SimpleNamespace(id=1, settings={"cpu": 1, "rt_priority": 80}, runtime="native",
                          machine={"cpus_online": [0, 1]})
    assert explain_remedies.suggest(run, [s], 0) == []
    [said] = explain_remedies.unremedied([s], 0)      # said instead: what takes it away
    assert said["for"]["pid"] == 901 and said["share"] == pytest.approx(0.9) and "critical section" in said["why"]
    as_thread = {**s, "causes": [{**holder, "kind": "thread"}]}
    assert "rt_priority" in [r.setting for r in explain_remedies.suggest(run, [as_thread], 0)]
