"""rtscope monitor under a real load (stress-ng): intervals stored as they end, alternating idle and load phases,
per-CPU histograms only, and after each interval the worst case of its phase so far (a bound or the check that
refused it), recorded with the interval. Bad input: tests/test_monitor.py."""

from __future__ import annotations

import re

import pytest

from rtscope.experiment import monitor as mon
from rtscope.store import Store

pytestmark = [pytest.mark.real, pytest.mark.alone]


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
