"""Setting explain on runs that keep a histogram instead of every sample, without tracefs: rtprobe timer
--histogram-us --mark-worst K keeps each thread's K worst samples (a few hundred cycles as a normal task), and
`rtscope monitor --explain K` refuses bad input and a machine without tracefs before it measures. The culprit
named on the real kernel, and the monitor stopped midway: tests/test_explain_histogram.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from rtscope.store import Store

pytestmark = pytest.mark.fast


def test_probe_keeps_each_threads_worst_in_histogram_mode(rtprobe, tmp_path):
    """rtprobe timer --histogram-us --mark-worst K: each thread's K worst in the trailer, largest first, the
    first of them the histogram's exact maximum; without --mark-worst, no `worst`."""
    from rtscope import samplefile
    out = tmp_path / "h.rts"
    base = [str(rtprobe), "timer", "--output", str(out), "--loops", "400", "--interval-us", "200", "--threads", "all",
            "--histogram-us", "100"]
    subprocess.run(base + ["--mark-worst", "3"], check=True, capture_output=True)
    sf = samplefile.read(out)
    assert sf.n == 0
    threads = len(sf.trailer["threads"])
    worst = sf.trailer["worst"]
    assert [w["thread"] for w in worst] == [k for k in range(threads) for _ in range(3)]
    for k in range(threads):
        mine = [w for w in worst if w["thread"] == k]
        assert [w["value"] for w in mine] == sorted((w["value"] for w in mine), reverse=True)
        assert mine[0]["value"] == sf.trailer["histograms"][f"thread{k}"]["max"]
        # a deadline the thread woke too late for is skipped, its cycle number too: cycles can pass the loops
        cycles = sf.trailer["threads"][k]["cycles"]
        assert len({w["cycle"] for w in mine}) == 3 and all(0 <= w["cycle"] < cycles for w in mine), (mine, cycles)
        # the start is the deadline: start + cycle's distance from the run's first deadline lines up
        starts = {w["cycle"]: w["start"] for w in mine}
        (c0, s0), (c1, s1) = sorted(starts.items())[:2]
        assert s1 - s0 == (c1 - c0) * 200_000
    subprocess.run(base, check=True, capture_output=True)
    assert "worst" not in samplefile.read(out).trailer


@pytest.mark.parametrize("args, code, message", [
    (["--runtime", "cyclictest"], 2, "--explain needs runtime native (rtprobe keeps its worst samples); not cyclictest"),
    (["--explain", "-1"], 2, "--explain must be an integer >= 0"),
    (["--rt-priority", "0"], 2, "--rt-priority must be an integer 1..99 (SCHED_FIFO), got 0"),
])
def test_monitor_explain_bad_input(cli, db, args, code, message):
    r = cli("monitor", "--explain", "3", *args, "--db", db)
    assert r.code == code and message in " ".join(r.err.split())


def test_monitor_explain_refused_without_tracefs(cli, db, tmp_path, monkeypatch, rtprobe):
    monkeypatch.setenv("RTSCOPE_SYSFS_ROOT", str(tmp_path / "no-tracefs"))
    r = cli("monitor", "--duration", "2s", "--interval", "1s", "--explain", "3", "--db", db)
    assert r.code == 1
    said = " ".join(r.err.split())
    assert "monitor of target local cannot run: setting explain: target local: tracefs not mounted at" in said
    assert not Path(db).exists() or (Store(db).runs() == [] and Store(db).experiment_rows() == [])
