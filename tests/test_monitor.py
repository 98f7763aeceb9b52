"""rtscope monitor: intervals stored as they end, idle/load phases, resume after a crash, on a target."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from rtscope.experiment import monitor as mon
from rtscope.errors import UsageError
from rtscope.store import Store
from proc_helpers import default_signals

pytestmark = pytest.mark.fast


def test_intervals_alternate_idle_and_load_and_keep_per_cpu_histograms(cli, db, monkeypatch):
    r = cli("monitor", "--duration", "6s", "--interval", "2s", "--load", "cpu", "--phase", "2s", "--db", db)
    assert r.code == 0, r.err
    assert "monitoring 1 finished: 3 intervals stored" in r.out
    store = Store(db)
    runs = store.runs()
    assert [x["settings"]["load"] for x in runs] == ["none", "cpu", "none"]
    assert [x["plan_index"] for x in runs] == [0, 1, 2]
    for run in runs:
        assert run["n_samples"] == 0 and "monitor" in run["tags"]   # histograms only: bounded memory
        rows = mon.per_cpu(run)
        assert [r["cpu"] for r in rows] == list(range(len(rows))) and all(r["n"] > 1000 for r in rows)
        assert all(0 < r["p9999_us"] <= r["max_us"] + 1 for r in rows)
    assert "cpu0 max" in r.out and "load cpu" in r.out
    # after each interval, the worst case of its phase's intervals so far: the samples of those intervals, and
    # a bound at p = 1e-9 or the check that refused it (these are the tail analysis' histogram path)
    lines = [x.strip() for x in r.out.splitlines() if x.strip().startswith("worst case:")]
    assert len(lines) == 3, r.out
    seen = [sum(t["n"] for t in mon.per_cpu(x)) for x in runs]
    expected = zip([seen[0], seen[1], seen[0] + seen[2]], [1, 1, 2], ["none", "cpu", "none"])
    for line, (n, intervals, load) in zip(lines, expected):
        assert f"seen in {n:,} samples" in line, line
        assert re.search(r"bound at p = 1e-09 per sample [\d,.]+ µs \(95 % |no bound: refused by the "
                         r"(goodness of fit|run homogeneity) check", line), line
        assert line.endswith(f"({intervals} interval{'s' if intervals > 1 else ''} of load {load}; rtscope tail "
                             f"--experiment 1 --where load={load})"), line
    # ... and recorded with the interval (running_bounds), as serve and `rtscope lab` read it
    recorded = store.running_bounds([x.id for x in runs])
    for run, intervals in zip(runs, [1, 1, 2]):
        wc, n = mon.worst_case_so_far(store, run, record=False)
        assert n == intervals and recorded[run.id]["intervals"] == intervals
        assert recorded[run.id]["value_ns"] == (wc.level.value if wc.level else None)
        assert recorded[run.id]["reason"] == wc.short_reason
    # at most the phase's newest RUNNING_INTERVALS: each interval costs the same however long the monitoring ran
    monkeypatch.setattr(mon, "RUNNING_INTERVALS", 1)
    wc, n = mon.worst_case_so_far(store, runs[2], record=False)
    assert (n, wc.n) == (1, seen[2])


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


@pytest.mark.parametrize("args, message", [
    (["--duration", "6x"], "invalid duration '6x': write e.g. 6h, 5m, 90s or 1h30m"),
    (["--duration", "10s", "--interval", "1m"], "interval 1m is longer than the duration 10s"),
    (["--runtime", "beam"], "unknown runtime 'beam' for monitor; valid: native, cyclictest"),
    (["--resume"], "no unfinished monitoring of target local"),
])
def test_bad_input(cli, db, args, message):
    r = cli("monitor", *args, "--db", db)
    assert r.code == 2 and message in " ".join(r.err.split())


def test_durations():
    assert mon.parse_duration("1h30m", "d") == 5400 and mon.parse_duration("90", "d") == 90
    with pytest.raises(UsageError):
        mon.parse_duration("0s", "d")
