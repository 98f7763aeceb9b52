"""One number everywhere: show, show --json, runs, export, compare, recommend and histogram give the same
n, min, max, mean and percentiles for the same run, with its threads kept apart; a report's tables give one
value per name (a STDEV of pooled samples and a mean of per-run STDEVs are two names, each table says which);
show's title and footer give one definition of its percentiles.

Runs of every kind: raw samples of one thread (native timer), raw samples of two threads (native timer
-t on two CPUs), histogram-only runs of two threads (a real `cyclictest -t 2 --json` and its `-h` text).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re

import numpy as np
import pytest

from rtscope.analysis import stats
from rtscope.store import Store

from test_timer import spec

import synthetic

pytestmark = pytest.mark.fast

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "cyclictest")
CPUS = sorted(os.sched_getaffinity(0))
KEYS = ("n", "min", "max", "mean", "p50", "p90", "p99", "p999", "p9999")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A store with one run of each kind, made through the CLI: {kind: run id}."""
    from rtscope.cli import main

    tmp = tmp_path_factory.mktemp("one-number")
    db = str(tmp / "one.db")

    def rtscope(*args):
        import sys
        argv, sys.argv = sys.argv, ["rtscope", *map(str, args)]
        try:
            main()
        except SystemExit as e:
            assert not e.code, args
        finally:
            sys.argv = argv

    two_cpus = ",".join(map(str, CPUS[:2]))
    rtscope("run", spec(tmp, "interval_us = 200\nloops = 600", "mlock = true"), "--db", db)
    (tmp / "b").mkdir()
    rtscope("run", spec(tmp / "b", f'interval_us = 200\nloops = 600\nthreads = "{two_cpus}"'), "--db", db)
    rtscope("import", "cyclictest", os.path.join(FIXTURES, "two_threads.json"),
            os.path.join(FIXTURES, "two_threads_h.txt"), "--db", db)
    ids = [r.id for r in Store(db).runs()]
    return db, dict(zip(("raw", "raw_threads", "json", "text"), ids))


def _json(cli, *args):
    r = cli(*args)
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.parametrize("kind", ["raw", "raw_threads", "json", "text"])
def test_every_command_gives_the_same_figures(cli, runs, kind):
    db, ids = runs
    run_id = ids[kind]
    shown = _json(cli, "show", run_id, "--db", db, "--json")
    st = shown["stats"]
    hist = _json(cli, "histogram", run_id, "--db", db, "--json")["runs"][0]["stats"]
    compared = _json(cli, "compare", "--run", run_id, "--baseline", "workload=timer", "--db", db, "--json")
    [config] = compared["configurations"]
    recommended = _json(cli, "recommend", "--run", run_id, "--baseline", "workload=timer", "--db", db, "--json")
    for key in KEYS:
        assert hist[key] == pytest.approx(st[key], rel=1e-12), key
        assert config["stats"][key] == pytest.approx(st[key], rel=1e-12), key
    assert recommended["unmatched"] or recommended["recommendations"] is not None
    if shown["run"]["stored_samples"]:
        assert shown["resolution"] is None
        text = cli("export", run_id, "--db", db).out
        rows = list(csv.DictReader(io.StringIO(text)))
        values = np.array([int(r["latency"]) for r in rows])
        assert len(values) == st["n"] and values.min() == st["min"] and values.max() == st["max"]
        assert values.mean() == pytest.approx(st["mean"], rel=1e-12)
        assert np.percentile(values, 99) == pytest.approx(st["p99"], rel=1e-12)
    else:
        assert shown["resolution"] == 1000  # cyclictest's 1 µs buckets, stated beside the figures


@pytest.mark.parametrize("kind", ["raw_threads", "json", "text"])
def test_threads_are_kept_apart_and_add_up_to_the_run(cli, runs, kind):
    db, ids = runs
    shown = _json(cli, "show", ids[kind], "--db", db, "--json")
    threads, st = shown["threads"], shown["stats"]
    assert [t["thread"] for t in threads] == [0, 1]
    assert all(set(t["stats"]) == set(st) for t in threads)  # the same keys as the whole run
    assert sum(t["stats"]["n"] for t in threads) == st["n"]
    assert min(t["stats"]["min"] for t in threads) == st["min"]
    assert max(t["stats"]["max"] for t in threads) == st["max"]
    assert sum(t["stats"]["mean"] * t["stats"]["n"] for t in threads) / st["n"] == pytest.approx(st["mean"])
    if kind == "raw_threads":
        assert [t["cpu"] for t in threads] == CPUS[:2]
    text = cli("show", ids[kind], "--db", db).out
    assert "thread 0" in text and "thread 1" in text and "whole run" in text


def test_cyclictest_imports_keep_cyclictests_own_per_thread_figures(cli, runs):
    """Done when: the JSON and -h imports of a 2-thread run give two threads of n = 8000 with cyclictest's
    own per-thread min and max, the real thread count, and the machine from cyclictest's sysinfo."""
    db, ids = runs
    with open(os.path.join(FIXTURES, "two_threads.json")) as f:
        doc = json.load(f)
    own = {int(k): (t["cycles"], t["min"] * 1000, t["max"] * 1000, t["cpu"]) for k, t in doc["thread"].items()}
    for kind in ("json", "text"):
        shown = _json(cli, "show", ids[kind], "--db", db, "--json")
        got = {t["thread"]: (t["stats"]["n"], t["stats"]["min"], t["stats"]["max"]) for t in shown["threads"]}
        assert got == {k: v[:3] for k, v in own.items()} and all(v[0] == 8000 for v in own.values())
        assert shown["run"]["params"]["threads"] == 2
        # Every value of this run is inside the 400 µs range: the buckets give the exact mean of each thread.
        for t in shown["threads"]:
            assert t["stats"]["mean"] == pytest.approx(doc["thread"][str(t["thread"])]["avg"] * 1000, abs=5)
    json_run = _json(cli, "show", ids["json"], "--db", db, "--json")
    assert [t["cpu"] for t in json_run["threads"]] == [own[0][3], own[1][3]]
    assert json_run["run"]["environment"]["hostname"] == doc["sysinfo"]["nodename"]
    assert json_run["run"]["environment"]["kernel_release"] == doc["sysinfo"]["release"]


def test_compare_per_thread_takes_each_runs_worst_thread(cli, runs):
    db, ids = runs
    whole = _json(cli, "compare", "--run", ids["json"], "--baseline", "workload=timer", "--db", db, "--json")
    worst = _json(cli, "compare", "--run", ids["json"], "--baseline", "workload=timer", "--per-thread", "--db", db,
                  "--json")
    shown = _json(cli, "show", ids["json"], "--db", db, "--json")
    worst_thread = max(shown["threads"], key=lambda t: t["stats"]["max"])
    assert whole["configurations"][0]["stats"]["n"] == 16000
    assert worst["configurations"][0]["stats"] == pytest.approx(worst_thread["stats"])
    recommended = _json(cli, "recommend", "--run", ids["json"], "--baseline", "workload=timer", "--per-thread", "--db", db, "--json")
    assert "recommendations" in recommended


def test_histogram_percentiles_never_pass_the_maximum():
    h = {"bucket_width": 1000, "min_value": 0, "counts": [0, 5, 0, 1], "n": 6, "min": 1000, "max": 3200,
         "sum": 8200, "overflow": 0}
    s = stats.summarize_histogram(h)
    assert s["p9999"] == 3200 and s["p50"] == 2000  # upper edge of its bucket, capped at the maximum


def test_report_draws_each_cpu_of_multi_thread_runs(cli, runs, tmp_path):
    db, ids = runs
    out = tmp_path / "r.html"
    r = cli("report", "--db", db, "-o", out, "--run", ids["json"], "--run", ids["raw_threads"])
    assert r.code == 0, r.err
    page = out.read_text()
    specs = [json.loads(m) for m in re.findall(r'<script type="application/json" id="plot-\d+-spec">(.*?)</script>',
                                               page, re.S)]
    per_cpu = [s for s in specs if s["layout"]["title"]["text"].endswith("per CPU")]
    assert len(per_cpu) == 2  # the imported cyclictest run and the native two-thread run
    for s in per_cpu:
        assert [tr["name"] for tr in s["data"]] in (["CPU 0", "CPU 1"], [f"CPU {c}" for c in CPUS[:2]])
        assert s["layout"]["yaxis"]["type"] == "log"


@pytest.mark.parametrize("kind", ["raw", "json", "text"])
def test_runs_counts_the_samples_show_counts(cli, runs, monkeypatch, kind):
    """An imported histogram stores no samples: `runs` counts what its histograms hold, as `show` does."""
    db, ids = runs
    n = _json(cli, "show", ids[kind], "--db", db, "--json")["stats"]["n"]
    listed = {r["id"]: r for r in _json(cli, "runs", "--db", db, "--json")}
    assert listed[ids[kind]]["n_samples"] == n > 0
    assert listed[ids[kind]]["stored_samples"] == (n if kind == "raw" else 0)
    monkeypatch.setenv("COLUMNS", "80")
    row = next(line for line in cli("runs", "--db", db).out.splitlines() if re.match(rf"\W*{ids[kind]}\b", line))
    assert f"{n:,}" in row


@pytest.mark.parametrize("kind", ["raw", "text"])
def test_show_says_one_percentile_definition(cli, runs, kind):
    db, ids = runs
    text = " ".join(cli("show", ids[kind], "--db", db).out.split())
    doc = _json(cli, "show", ids[kind], "--db", db, "--json")
    if kind == "raw":
        assert f"percentiles: {stats.PERCENTILE_DEFINITION}" in text and "upper edge" not in text
    else:
        assert f"percentiles: {stats.HISTOGRAM_PERCENTILE_DEFINITION}" in text
        assert "linear interpolation" not in text
        assert f"percentiles are {stats.HISTOGRAM_PERCENTILE_DEFINITION}" in text
    assert doc["run"]["percentile_definition"] in text


STUDY = synthetic.spec_text("one-stdev", 3, ["min_heap_size = [233, 46422]"], [
    ("heap-stdev", "a large heap lowers sum's STDEV", "stdev", "min_heap_size = 233", "min_heap_size = 46422",
     "lower")], extra='[paper]\nlayout = "stats"\n')


def test_a_reports_stdev_has_one_value_per_name(cli, tmp_path, monkeypatch):
    """The study table's STDEV pools the runs' samples (it holds the spread between runs too); the claims and
    compare test the mean of the per-run STDEVs: two quantities, two names, one value each."""
    synthetic.enable(monkeypatch)
    db, spec_file = str(tmp_path / "s.db"), tmp_path / "one-stdev.toml"
    spec_file.write_text(STUDY)
    assert cli("run", spec_file, "--db", db, "--seed", 1).code == 0
    r = cli("report", "--experiment", "one-stdev", "--baseline", "min_heap_size=233", "--db", db,
            "-o", tmp_path / "r.html", "--tables", tmp_path / "t")
    assert r.code == 0, r.err
    store = Store(db)
    base_runs = [x for x in store.runs() if x.settings["min_heap_size"] == 233]
    per_run = [float(np.std(store.primary_samples(x), ddof=1)) for x in base_runs]
    pooled = float(np.std(np.concatenate([store.primary_samples(x) for x in base_runs]), ddof=1))
    assert pooled > np.mean(per_run) * 1.01        # the synthetic runs differ from each other: two numbers

    [paper] = [p for p in (tmp_path / "t").glob("paper-*.csv")]
    rows = list(csv.DictReader(io.StringIO(paper.read_text())))
    row = next(x for x in rows if x["configuration"].endswith("min_heap_size=233"))
    stdev_head = next(h for h in rows[0] if h.startswith("STDEV") and not h.endswith("published"))
    assert float(row[stdev_head]) == pytest.approx(pooled / 1000, rel=1e-9)
    caption = (tmp_path / "t" / paper.name.replace(".csv", ".md")).read_text()
    assert "pooled" in caption

    [claims] = list((tmp_path / "t").glob("claims-*.csv"))
    [claim] = list(csv.DictReader(io.StringIO(claims.read_text())))
    assert claim["metric"] == "mean of per-run STDEV"
    assert float(claim["measured baseline"]) == pytest.approx(np.mean(per_run) / 1000, rel=1e-9)

    compared = _json(cli, "compare", "--experiment", "one-stdev", "--baseline", "min_heap_size=233", "--db", db,
                     "--json")
    [row] = [x for k in compared["comparisons"] for x in k["rows"] if x["metric"] == "stdev"]
    assert row["baseline"] == pytest.approx(np.mean(per_run), rel=1e-9)
    monkeypatch.setenv("COLUMNS", "80")
    text = " ".join(cli("reproduce", spec_file, "--experiment", "one-stdev", "--db", db).out.split())
    assert "mean of per-run STDEV" in text
