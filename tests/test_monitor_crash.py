"""rtscope monitor killed with SIGKILL mid-monitoring (a process of its own, intervals of 2 s): at most one
interval is lost, and `--resume` continues the plan without repeating a stored one. Bad input:
tests/test_monitor.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

import pytest

from rtscope.store import Store
from proc_helpers import default_signals

pytestmark = pytest.mark.real


def test_a_crash_loses_at_most_one_interval_and_resume_continues(tmp_path):
    db = str(tmp_path / "m.db")
    argv = [sys.executable, "-m", "rtscope", "monitor", "--duration", "12s", "--interval", "2s", "--db", db]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, preexec_fn=default_signals)
    # The monitor prints an interval's line once it is stored: kill it then, mid-monitoring. (Polling the
    # store from here instead raced with a loaded machine: the monitoring could end before a poll saw a run.)
    watchdog = threading.Timer(60, proc.kill)
    watchdog.start()
    try:
        first = next((line for line in proc.stdout if line.startswith("[1/6]")), None)
    finally:
        watchdog.cancel()
    assert first is not None, proc.communicate()
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    before = len(Store(db).runs())
    assert 1 <= before < 6
    r = subprocess.run(argv[:4] + ["--resume", "--db", db], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{before} stored already" in r.stdout
    assert sorted(x["plan_index"] for x in Store(db).runs()) == list(range(6))
