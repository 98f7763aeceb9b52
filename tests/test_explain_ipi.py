"""Inter-processor interrupts as causes (docs/explain.md, the cause table): x86's irq_vectors events for
function calls (TLB shootdowns among them), rescheduling and irq work are `irq` causes named by the vector. From
trace text, and on this host's kernel: another CPU sends the probe's CPU function-call IPIs (each cpu-wide perf
event opened or closed there is installed or removed by one) while an explained timer run measures, and its
samples name them. They cannot be made to delay a sample by more than this VM's own noise (~4 ms, an IPI takes
microseconds), so the test checks that they are named and timed, not that they lead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

import culprit
from rtscope import explain_trace as causes
from rtscope.analysis import explain_remedies as remedies
from rtscope.store import Store

pytestmark = pytest.mark.real

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable() or (
    None if Path("/sys/kernel/tracing/events/irq_vectors/call_function_single_entry").is_dir()
    else "this kernel has no irq_vectors:call_function_single_entry event (x86 only)")
needs_ipi = pytest.mark.skipif(WHY is not None or len(CPUS) < 2, reason=WHY or "needs 2 CPUs")

TRACE = """\
          rtprobe-900     [001] d..2.   100.000000: sched_switch: prev_comm=rtprobe prev_pid=900 prev_prio=19 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
           <idle>-0       [001] d.h1.   100.001000: call_function_single_entry: vector=251
           <idle>-0       [001] d.h1.   100.001030: call_function_single_exit: vector=251
           <idle>-0       [001] d.h1.   100.001040: reschedule_entry: vector=253
           <idle>-0       [001] d.h1.   100.001045: reschedule_exit: vector=253
           <idle>-0       [001] d..2.   100.001050: sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=rtprobe next_pid=900 next_prio=19
"""


def test_ipi_vectors_are_irq_causes_named_by_the_vector():
    got = causes.attribute(causes.parse(TRACE.splitlines()), 100_000_990_000, 100_001_060_000, measuring=900)
    by = {c["name"]: c for c in got["causes"]}
    assert (by["call_function_single"]["kind"], by["call_function_single"]["irq"],
            by["call_function_single"]["duration_ns"]) == ("irq", 251, 30_000)
    assert (by["reschedule"]["irq"], by["reschedule"]["duration_ns"]) == (253, 5_000)
    # their remedy: keep the CPU isolated and tickless (a boot), else another CPU
    run = SimpleNamespace(id=1, settings={"cpu": 1, "rt_priority": 80}, runtime="native",
                          machine={"cpus_online": [0, 1]})
    s = {"value_ns": 30_000, "cpu": 1, "note": None, "self_ns": 0, "idle_ns": 0, "unexplained_ns": 0,
         "causes": [by["call_function_single"]]}
    assert [(r.setting, r.value) for r in remedies.suggest(run, [s], 0)] == [
        ("kernel_cmdline", "nohz_full=1 isolcpus=1"), ("cpu", 0)]


# Each cpu-wide perf event opened on CPU N is installed there by a function call to N, and removed by another
# when closed: a loop of them is an IPI storm aimed at one CPU (root, or perf_event_paranoid <= 0).
IPI_STORM = r"""
import ctypes, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
libc = ctypes.CDLL(None, use_errno=True)
attr = (ctypes.c_uint8 * 128)()
ctypes.c_uint32.from_buffer(attr, 0).value = 1        # PERF_TYPE_SOFTWARE, config 0: cpu-clock
ctypes.c_uint32.from_buffer(attr, 4).value = 128      # size
end = time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    fd = libc.syscall(298, attr, -1, int(sys.argv[2]), -1, 0)   # perf_event_open(attr, pid -1, cpu, -1, 0)
    if fd < 0:
        sys.exit(f"perf_event_open: errno {ctypes.get_errno()}")
    os.close(fd)
"""


@pytest.mark.timing
@needs_ipi
@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the storm's syscall number is x86_64's")
def test_function_call_ipis_from_another_cpu_are_named_in_the_samples(cli, db, tmp_path, rtprobe):
    cpu, other = CPUS[-1], CPUS[0]
    spec = tmp_path / "timer.toml"
    spec.write_text(culprit.timer_spec("ipi", 1000, cpu).replace("explain = 5", "explain = 40"))
    storm = subprocess.Popen([sys.executable, "-c", IPI_STORM, str(other), str(cpu), "60"],
                             stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert storm.poll() is None, storm.stderr.read()
        r = cli("run", spec, "--db", db)
        assert r.code == 0, r.err
    finally:
        storm.kill()
        storm.wait()
    [run] = Store(db).runs()
    samples = json.loads(cli("explain", run.id, "--db", db, "--json").out)["samples"]
    ipis = [c for s in samples for c in s["causes"] if c["kind"] == "irq" and c["name"] == "call_function_single"]
    assert ipis, [(s["value_ns"], [(c["kind"], c["name"]) for c in s["causes"]]) for s in samples]
    assert all(c["irq"] is not None and 0 < c["duration_ns"] < 1_000_000 for c in ipis), ipis
    print(f"function-call IPIs in {sum(any(c in ipis for c in s['causes']) for s in samples)} of {len(samples)} "
          f"explained samples, {sorted(c['duration_ns'] for c in ipis)} ns", file=sys.__stderr__)
