"""The `migration` cause (docs/explain.md, the cause table): an unpinned probe's sample is followed across its
moves between CPUs (sched_migrate_task). From trace text, and on this host's kernel: two SCHED_FIFO culprits,
one per CPU, start their bursts together, one 20 ms and the other 8 ms, the longer one alternating between the
CPUs. The probe (FIFO 80, not pinned) waits behind the long one on the CPU it last ran on until the other CPU
is free and takes it: explain names the move and the culprit it waited for, on the CPU it waited on — not the
one of the CPU it ended on, which it never waited for."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from contextlib import ExitStack
from types import SimpleNamespace

import pytest

import culprit
import realtiming
from rtscope import explain_trace as causes
from rtscope.analysis import explain_remedies as remedies

pytestmark = pytest.mark.real

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable()
LONG_S, SHORT_S, PERIOD_S = 0.020, 0.008, 0.200

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
    events = causes.by_cpu(causes.parse(TRACE.splitlines()))
    got = causes.attribute(events[0], START, END, measuring=900, elsewhere={1: events[1]})
    by = {(c["kind"], c["name"]): c for c in got["causes"]}
    assert set(by) == {("thread", "rtsc-culprit"), ("irq", "irq_work"), ("migration", "cpu 1 -> 0")}
    assert by[("thread", "rtsc-culprit")]["pid"] == 700
    assert by[("thread", "rtsc-culprit")]["duration_ns"] == 8_020_000 - 5_000 - 10_000   # less the irq_work
    assert by[("irq", "irq_work")]["duration_ns"] == 5_000 + 10_000
    moved = by[("migration", "cpu 1 -> 0")]
    assert (moved["duration_ns"], moved["count"]) == (30_000, 1)   # 8020..8050: CPU 0 idle until the switch
    assert got["causes"][0]["pid"] == 700 and got["self_ns"] == 10_000 and got["idle_ns"] == 0
    # the CPU it ended on alone (a pinned probe's view): the other CPU's culprit, wrongly
    alone = causes.attribute(events[0], START, END, measuring=900)
    assert alone["causes"][0]["pid"] == 701


def test_a_move_from_a_cpu_whose_events_are_missing_leaves_that_part_unexplained():
    events = causes.by_cpu(causes.parse(TRACE.splitlines()))
    got = causes.attribute(events[0], START, END, measuring=900, elsewhere={2: []})
    assert [c["pid"] for c in got["causes"]] == [701]   # no move seen: the CPU it ended on, as before
    # the move written on the destination (a pull), the CPU it left not traced: its part has no events
    [move] = [e for e in events[1] if e.name == causes.MIGRATE]
    ended = sorted(events[0] + [dataclasses.replace(move, cpu=0)], key=lambda e: e.ts_ns)
    got = causes.attribute(ended, START, END, measuring=900, elsewhere={2: []})
    assert [(c["kind"], c["duration_ns"]) for c in got["causes"]] == [("migration", 30_000)]
    assert got["unexplained_ns"] == 8_020_000


def test_a_move_of_a_large_share_is_remedied_by_pinning():
    move = {"kind": "migration", "name": "cpu 1 -> 0", "pid": None, "irq": None, "prio": None, "count": 3,
            "duration_ns": 900_000, "intervals": []}
    s = {"value_ns": 1_000_000, "cpu": 0, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 100_000,
         "causes": [move]}
    run = SimpleNamespace(id=1, settings={"rt_priority": 80}, runtime="native", machine={"cpus_online": [0, 1]})
    [pin] = remedies.suggest(run, [s], 0)
    assert (pin.setting, pin.value) == ("cpu", 0) and "never moved" in pin.why
    pinned = SimpleNamespace(**{**vars(run), "settings": {"rt_priority": 80, "cpu": 1}})
    assert remedies.suggest(pinned, [s], 0) == []


_ALTERNATING = r"""
import math, os, sys, time
cpu, prio = int(sys.argv[1]), int(sys.argv[2])
long_, short, period = float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
with open(f"/proc/self/task/{os.getpid()}/comm", "w") as f:
    f.write(sys.argv[6])
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
print("ready", flush=True)
k = math.ceil(time.monotonic() / period) + 1
while True:
    at = k * period   # every culprit's bursts begin together, on the same clock
    time.sleep(max(0.0, at - time.monotonic()))
    end = at + (long_ if (k + cpu) % 2 == 0 else short)
    while time.monotonic() < end:
        pass
    k += 1
"""


@pytest.mark.timing
@pytest.mark.skipif(WHY is not None or len(CPUS) != 2, reason=WHY or "needs exactly 2 CPUs (both kept busy)")
def test_an_unpinned_probe_is_followed_to_the_culprit_it_waited_for(cli, db, tmp_path, rtprobe):
    """The timer at FIFO 80, not pinned, 1 ms for 2.4 s, `explain = 10`: at least 90 % of the explained samples
    above half the short burst name a move and, as their largest cause within 20 % of the delay it added, the
    culprit of the CPU the move left (the long burst), never the other one."""
    with ExitStack() as stack:
        pids = {}
        for cpu in CPUS:
            proc = subprocess.Popen([sys.executable, "-c", _ALTERNATING, str(cpu), "90", str(LONG_S), str(SHORT_S),
                                     str(PERIOD_S), f"rtsc-burst{cpu}"], stdout=subprocess.PIPE, text=True)
            stack.callback(proc.wait)
            stack.callback(proc.kill)
            assert proc.stdout.readline().strip() == "ready"
            pids[cpu] = proc.pid
        spec = tmp_path / "moves.toml"
        spec.write_text('name = "moves"\n[[workload]]\nname = "timer"\nvariants = ["absolute"]\nruntime = "native"\n'
                        '[workload.params]\nloops = 2400\ninterval_us = 1000\n'
                        '[workload.settings]\nrt_priority = 80\nexplain = 10\n')
        r = cli("run", spec, "--db", db)
    assert r.code == 0, r.err
    run_id, median, samples, late = culprit.late_samples(cli, db, "latency", SHORT_S * 1e9 / 2)
    big = [s for s in late if not realtiming.stalled(s)]

    def followed(s: dict) -> bool:
        moves = [c for c in s["causes"] if c["kind"] == "migration"]
        if len(moves) != 1:
            return False
        left = int(moves[0]["name"].split()[1])      # "cpu A -> B": the CPU it waited on
        threads = [c for c in s["causes"] if c["kind"] != "migration"]
        top = threads[0] if threads else {}
        added = s["value_ns"] - median - sum(c["duration_ns"] for c in s["causes"] if c is not top)
        return top.get("pid") == pids[left] and abs(top["duration_ns"] - added) <= 0.2 * added
    detail = [(s["value_ns"], s["cpu"], s["causes"][:3]) for s in samples]
    assert len(big) >= 5, detail   # about 12 bursts, each delaying one sample by most of the short one
    assert sum(map(followed, big)) >= 0.9 * len(big), detail
    text = cli("explain", run_id, "--db", db).out
    assert "migration cpu " in text
