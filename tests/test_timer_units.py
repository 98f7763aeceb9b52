"""Workload timer on the native probe as a normal task: short runs (every sample, histogram mode), every bad input,
and the latency views (histogram merging and statistics, the terminal histogram, PNG/SVG figures). The kernel
refusing SCHED_FIFO: tests/test_timer.py."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

from rtscope.analysis import stats
from rtscope.errors import UsageError
from rtscope.figures import latency as lat
from rtscope.figures import save
from rtscope.paths import repo_file
from rtscope.store import Store

pytestmark = pytest.mark.fast


CPUS = sorted(os.sched_getaffinity(0))


def spec(tmp_path, params: str, settings: str = "", variant: str = "absolute", runtime: str = "native"):
    p = tmp_path / "spec.toml"
    p.write_text(f'name = "timer"\n[[workload]]\nname = "timer"\nvariants = ["{variant}"]\nruntime = "{runtime}"\n'
                 f"[workload.params]\n{params}\n[workload.settings]\n{settings}\n")
    return p


# --- short runs, as a normal task -------------------------------------------------------------------------

def test_native_timer_keeps_every_sample(cli, db, tmp_path, rtprobe):
    r = cli("run", spec(tmp_path, "interval_us = 200\nloops = 1000", f"mlock = true\ncpu = {CPUS[-1]}"), "--db", db)
    assert r.code == 0, r.err
    store = Store(db)
    [run] = store.runs()
    assert (run["workload"], run["variant"], run["runtime"], run["n_samples"]) == ("timer", "absolute", "native", 1000)
    assert run["params"] == {"interval_us": 200, "loops": 1000}
    assert run["settings"]["cpu"] == CPUS[-1] and run["settings"]["mlock"] is True
    data = store.samples(run.id)
    missed = run["trailer"]["counters"]["missed_periods"]
    # Cycles count deadlines: the measured ones and the missed ones, in order.
    assert np.all(np.diff(data["cycle"]) >= 1) and data["cycle"][-1] == 999 + missed
    assert np.all(data["latency"] >= 0) and set(data["cpu"].tolist()) == {CPUS[-1]}
    assert run["trailer"]["threads"][0]["samples"] == 1000
    shown = json.loads(cli("show", run.id, "--db", db, "--json").out)
    assert shown["stats"]["n"] == 1000 and 0 <= shown["stats"]["min"] <= shown["stats"]["p50"]


def test_native_timer_histogram_mode_threads(cli, db, tmp_path, rtprobe):
    r = cli("run", spec(tmp_path, 'interval_us = 100\nloops = 1000\nhistogram_us = 200\nthreads = "all"',
                        variant="relative"), "--db", db)
    assert r.code == 0, r.err
    store = Store(db)
    [run] = store.runs()
    hists = run["trailer"]["histograms"]
    assert run["n_samples"] == 0 and sorted(hists) == [f"thread{k}" for k in range(len(CPUS))]
    for h in hists.values():
        assert h["n"] == 1000 and len(h["counts"]) == 200 and sum(h["counts"]) + h["overflow"] == 1000
        assert h["min"] <= h["max"] and h["min"] * 1000 <= h["sum"] <= h["max"] * 1000
    series = lat.from_run(store, run)
    assert series.stats["n"] == 1000 * len(CPUS) and not series.exact
    assert series.overflow == run["trailer"]["counters"]["overflows"]


# --- bad input: each a clear error, nothing stored ------------------------------------------------------------

@pytest.mark.parametrize("params, settings, message", [
    ("interval_us = 0", "", "interval_us: must be greater than 0"),
    ("interval_us = -200", "", "must be greater than 0"),
    ("interval_us = 0.0004", "", "below the resolution of CLOCK_MONOTONIC"),
    ('threads = "0,1023"', "", "CPU 1023 does not exist, is offline or is not allowed for this process; "
                               "allowed CPUs: "),
    ("loops = 10", "cpu = 1023", "CPU 1023 does not exist"),
    ('threads = "3-1"', "", "runs backwards"),
    ('threads = "all"', "cpu = 0", "give one of them"),
    ("duration_s = 0.0001", "", "shorter than one interval"),
    ("histogram_us = 0", "", "histogram_us"),
])
def test_bad_timer_input(cli, db, tmp_path, rtprobe, params, settings, message):
    r = cli("run", spec(tmp_path, params, settings), "--db", db)
    assert r.code == 2, r.out + r.err
    assert message in r.err
    assert Store(db).runs() == []


def test_probe_rejects_bad_interval_directly(rtprobe, tmp_path):
    for value, message in (("0", "greater than 0"), ("0.0004", "below the resolution")):
        res = subprocess.run([str(rtprobe), "timer", "--interval-us", value, "--output", str(tmp_path / "x.rts")],
                             capture_output=True, text=True)
        assert res.returncode == 2 and message in res.stderr


# --- histogram logic (deterministic) ------------------------------------------------------------------------

def hist(counts, overflow=0, lo=0, width=1000, **kw):
    n = sum(counts) + overflow
    return {"unit": "ns", "bucket_width": width, "min_value": lo, "counts": counts, "overflow": overflow, "n": n,
            **kw}


def test_merge_histograms_sums_threads():
    a = hist([0, 2, 1], overflow=1, min=1100, max=90_000, sum=100_000)
    b = hist([1, 0, 0, 0, 3], min=500, max=4_900, sum=15_000)
    m = lat.merge_histograms([a, b])
    assert m["counts"] == [1, 2, 1, 0, 3] and m["overflow"] == 1 and m["n"] == 8
    assert (m["min"], m["max"], m["sum"]) == (500, 90_000, 115_000)
    with pytest.raises(ValueError, match="different bucket layouts"):
        lat.merge_histograms([a, hist([1], width=1)])


def test_histogram_series_statistics_are_bounds():
    # 10 values: 1 in [0,1) µs, 8 in [1,2) µs, 1 overflow (beyond 3 µs).
    h = hist([1, 8, 0], overflow=1, min=800, max=50_000, sum=70_000, overflow_cycles=[7])
    s = lat.from_histograms("t", {"thread0": h}, missed=2)
    assert s.stats["n"] == 10 and s.stats["min"] == 800 and s.stats["max"] == 50_000 and s.stats["mean"] == 7000
    assert s.stats["p50"] == 2000        # upper edge of the bucket holding rank 5
    assert s.stats["p99"] == 50_000      # rank 10 is the overflow: only the max bounds it
    assert s.overflow == 1 and s.missed == 2 and not s.exact
    assert "p50 ≤2.00" in lat.stat_line(s) and "overflows 1" in lat.stat_line(s) and "missed 2" in lat.stat_line(s)
    with pytest.raises(UsageError, match="hold no values"):
        lat.from_histograms("empty", [hist([0, 0])])


def test_sample_series_is_exact():
    values = np.array([5_000, 5_400, 6_100, 12_000, 78_000])
    s = lat.from_samples("s", values)
    assert s.exact and s.stats == stats.summarize(values)
    assert s.histogram["counts"][5] == 2 and s.histogram["counts"][78] == 1 and sum(s.histogram["counts"]) == 5
    assert lat.beyond(s, 50.0) == 1 and lat.beyond(s, 79.0) == 0


def test_rebin_and_default_range():
    s = lat.from_samples("s", np.array([5_500] * 4000 + [9_200] * 1000 + [400_000]))
    # One outlier far beyond the body: the right edge stops at 3 x p99.9 (9.2 µs) ... and counts what lies beyond.
    assert lat.default_x_max_us([s]) == pytest.approx(27.6)
    assert lat.beyond(s, 27.6) == 1
    edges, [counts], [rest] = lat.rebin([s], rows=4, x_max_us=12)
    assert edges.tolist() == [5, 7, 9, 11, 13]
    assert counts.tolist() == [4000, 0, 1000, 0] and rest == 1
    assert lat.default_x_max_us([lat.from_samples("t", np.array([5_000, 6_000, 70_000]))]) == 71.0  # all shown
    h = lat.from_histograms("h", [hist([0, 3, 1], overflow=2, min=1_000, max=900_000, sum=1)])
    assert lat.default_x_max_us([h]) == 3.0  # never past a kept histogram's range


# --- terminal and figures -----------------------------------------------------------------------------------

def test_histogram_command_terminal_and_figures(cli, db, tmp_path, rtprobe):
    assert cli("run", spec(tmp_path, "interval_us = 100\nloops = 1000"), "--db", db).code == 0
    fixture = repo_file("tests", "fixtures", "cyclictest", "hist_H.txt")
    assert cli("import", "cyclictest", fixture, "--db", db).code == 0
    png, svg = tmp_path / "lat.png", tmp_path / "lat.svg"
    r = cli("histogram", "1", "2", "--figure", png, "--figure", svg, "--db", db)
    assert r.code == 0, r.err
    for head in ("MIN", "AVG", "MAX", "p50", "p99", "p99.9", "p99.99", "overflow", "missed", "run 1", "run 2"):
        assert head in r.out
    assert "≤" in r.out  # run 2's percentiles come from a histogram
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "run 2" in text
    data = json.loads(cli("histogram", "1", "2", "--json", "--db", db).out)
    assert [x["stats"]["n"] for x in data["runs"]] == [1000, 1000]
    assert data["runs"][1]["overflows"] == 10 and data["runs"][0]["exact_percentiles"] is True
    assert sum(data["runs"][1]["bins"]["counts"]) + data["runs"][1]["bins"]["beyond"] == 1000


def test_histogram_command_bad_input(cli, db, tmp_path, rtprobe):
    assert cli("run", spec(tmp_path, "interval_us = 100\nloops = 50"), "--db", db).code == 0
    r = cli("histogram", "1", "--figure", tmp_path / "x.jpg", "--db", db)
    assert r.code == 2 and "valid: .png, .svg" in r.err
    r = cli("histogram", "7", "--db", db)
    assert r.code == 2 and "no run 7" in r.err
    r = cli("histogram", "1", "--rows", "2", "--db", db)
    assert r.code == 2 and "4..60" in r.err


def test_figure_function_is_reusable(tmp_path):
    a = lat.from_samples("kernel A", np.random.default_rng(1).gamma(4, 3000, 5000).astype(np.int64))
    b = lat.from_histograms("kernel B $x$", [hist([0, 5, 50, 20, 2], overflow=3, min=1200, max=80_000,
                                                  sum=300_000)])
    fig = lat.latency_figure([a, b], title="two kernels")
    ax = fig.axes[0]
    legend = fig.legends[0]            # below the axes, never on a curve
    assert ax.get_yscale() == "log" and len(legend.get_texts()) == 2 and ax.get_legend() is None
    assert "kernel B $x$" in legend.get_texts()[1].get_text().replace("\\$", "$")
    assert "3 beyond the last bucket (5.00 µs), max 80.0 µs, not drawn" in legend.get_texts()[1].get_text()
    assert save(fig, tmp_path / "f.svg").stat().st_size > 1000
    with pytest.raises(UsageError, match="valid: .png, .svg"):
        save(fig, tmp_path / "f.pdf")
