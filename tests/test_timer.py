"""Workload timer when the kernel refuses SCHED_FIFO (root taking away its own right to it): rtscope run exits 1
naming the refusal, for the native probe and cyclictest. Runs as a normal task, bad input and the latency
views: tests/test_timer_units.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from rtscope.store import Store
from test_timer_units import spec

pytestmark = pytest.mark.real


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("prlimit"),
                    reason="needs root, setpriv and prlimit to take away the right to SCHED_FIFO")
@pytest.mark.parametrize("runtime", ["native", "cyclictest"])
def test_priority_the_kernel_refuses(db, tmp_path, rtprobe, runtime):
    if runtime == "cyclictest" and not shutil.which("cyclictest"):
        pytest.skip("cyclictest not installed")
    # No CAP_SYS_NICE and RLIMIT_RTPRIO 0: the kernel refuses SCHED_FIFO even to root.
    argv = ["prlimit", "--rtprio=0:0", "setpriv", "--bounding-set=-sys_nice", "--",
            sys.executable, "-m", "rtscope", "run",
            str(spec(tmp_path, "interval_us = 200\nloops = 100", "rt_priority = 90", runtime=runtime)), "--db", db]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    said = "SCHED_FIFO priority 90 refused by the kernel" if runtime == "native" else "Unable to change scheduling"
    assert said in res.stderr
    assert Store(db).runs() == []
