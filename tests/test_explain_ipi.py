"""Inter-processor interrupts as causes (docs/explain.md, the cause table) on this host's kernel: another CPU sends
the probe's CPU function-call IPIs (each cpu-wide perf event opened or closed there is installed or removed by
one) while an explained timer run measures, and its samples name them. They cannot be made to delay a sample by
more than this VM's own noise (~4 ms, an IPI takes microseconds), so the test checks that they are named and
timed, not that they lead. On trace text: tests/test_explain_ipi_units.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import culprit
from rtscope.store import Store

pytestmark = [pytest.mark.real, pytest.mark.alone]

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable() or (
    None if Path("/sys/kernel/tracing/events/irq_vectors/call_function_single_entry").is_dir()
    else "this kernel has no irq_vectors:call_function_single_entry event (x86 only)")
needs_ipi = pytest.mark.skipif(WHY is not None or len(CPUS) < 2, reason=WHY or "needs 2 CPUs")


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
