"""The `migration` cause (docs/explain.md, the cause table) on this host's kernel: two SCHED_FIFO culprits, one
per CPU, start their bursts together, one 20 ms and the other 8 ms, the longer one alternating between the CPUs.
The probe (FIFO 80, not pinned) waits behind the long one on the CPU it last ran on until the other CPU is free
and takes it: explain names the move and the culprit it waited for, on the CPU it waited on — not the one of the
CPU it ended on, which it never waited for. On trace text: tests/test_explain_migration_units.py."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack

import pytest

import culprit
import realtiming

pytestmark = [pytest.mark.real, pytest.mark.alone]

CPUS = sorted(os.sched_getaffinity(0))
WHY = culprit.tracing_unavailable()
LONG_S, SHORT_S, PERIOD_S = 0.020, 0.008, 0.200


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
