"""The tail where it shows: show's worst-case line (text and JSON), compare --tail's row (the run-level test,
refusals, the Holm family, the gate and JUnit), on 80 columns and piped. Monitor's line: tests/test_monitor.py."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import tail_synthetic as ts
from report_fixtures import add_experiment, add_histogram_run, add_run
from terminal import on_terminal, piped
from rtscope.analysis import tail_bound
from rtscope.analysis.compare import TAIL_TEST, holm, run_level_row
from rtscope.store import Store

pytestmark = pytest.mark.fast

N = 30_000


def _fits_80(text: str) -> None:
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines()), text


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Configurations of 3 runs each: a (a generalised Pareto tail), b (a's samples × 3: a worse tail),
    ar (dependent samples: refused), one (a single run), and runs for show: short, histogram-only."""
    tmp = tmp_path_factory.mktemp("tailrows")
    db = str(tmp / "t.db")
    s = Store(db)
    exp = add_experiment(s, "rows")
    rng = np.random.default_rng(21)
    ids: dict[str, list[int]] = {"a": [], "b": [], "ar": []}
    for _ in range(3):
        x = ts.spliced(N, 0.1, rng)
        ids["a"].append(add_run(s, tmp, x.astype(np.int64), experiment_id=exp, settings={"k": "a"}))
        ids["b"].append(add_run(s, tmp, (3 * ts.spliced(N, 0.1, rng)).astype(np.int64), experiment_id=exp,
                                settings={"k": "b"}))
        ids["ar"].append(add_run(s, tmp, ts.ar1(N, 0.6, rng).astype(np.int64), experiment_id=exp,
                                 settings={"k": "ar"}))
    ids["one"] = [add_run(s, tmp, ts.spliced(N, 0.1, rng).astype(np.int64), experiment_id=exp,
                          settings={"k": "one"})]
    ids["short"] = [add_run(s, tmp, ts.spliced(2000, 0.1, rng).astype(np.int64), settings={"k": "short"})]
    ids["hist"] = [add_histogram_run(s, tmp, ts.spliced(N, 0.0, rng).astype(np.int64), bucket_width=100,
                                     buckets=200, settings={"k": "hist"})]
    return tmp, db, ids


# --- show ------------------------------------------------------------------------------------------------

def test_show_worst_case_is_tails_bound(cli, store):
    tmp, db, ids = store
    run = ids["a"][0]
    doc = json.loads(cli("show", run, "--db", db, "--json").out)
    wc = doc["worst_case"]
    assert set(wc) >= {"max_ns", "n", "p", "claimed", "value_ns", "ci95_ns", "p_per_hour", "refused_by",
                       "refused_because", "not_analysed_because", "untested"}
    assert wc["claimed"] is True and wc["p"] == 1e-9 and wc["n"] == N and wc["refused_by"] is None
    assert wc["max_ns"] == doc["stats"]["max"]
    # the same number `rtscope tail` gives at p = 1e-9, with its interval
    full = json.loads(cli("tail", run, "--db", db, "--json").out)
    level = next(lv for lv in full["levels"] if lv["p"] == 1e-9)
    assert wc["value_ns"] == pytest.approx(level["value_ns"], rel=1e-9)
    assert wc["ci95_ns"] == pytest.approx(level["ci95_ns"], rel=1e-9)
    assert wc["p_per_hour"] == pytest.approx(level["p_per_hour"], rel=1e-9)
    assert wc["ci95_ns"][0] <= wc["value_ns"] <= wc["ci95_ns"][1] and wc["value_ns"] > wc["max_ns"]

    text = piped(tmp, "show", run, "--db", db).out          # the default path: piped, never wrapped
    line = next(x for x in text.splitlines() if x.startswith("worst case:"))
    value, lo, hi = (f"{v / 1000:,.2f}" for v in (wc["value_ns"], *wc["ci95_ns"]))
    assert f"max {wc['max_ns'] / 1000:,.2f} µs seen in {N:,} samples" in line
    assert f"bound at p = 1e-09 per sample {value} µs (95 % {lo}..{hi}" in line
    assert line.endswith(f"(rtscope tail {run})")
    _fits_80(on_terminal(tmp, "show", run, "--db", db).out)


@pytest.mark.parametrize("kind, words, key", [
    ("ar", "no bound: refused by the independence check: late samples come in bursts", "refused_by"),
    ("short", "no bound: a bound needs 10,000 samples or more", "not_analysed_because"),
])
def test_show_without_a_bound_says_why(cli, store, kind, words, key):
    tmp, db, ids = store
    run = ids[kind][0]
    text = cli("show", run, "--db", db).out
    line = next(x for x in text.splitlines() if x.startswith("worst case:"))
    assert words in line and f"(rtscope tail {run})" in line and "bound at" not in line
    wc = json.loads(cli("show", run, "--db", db, "--json").out)["worst_case"]
    assert wc["claimed"] is False and wc["value_ns"] is None and wc["ci95_ns"] is None and wc[key]
    if kind == "ar":
        assert wc["refused_by"] == "independence" and wc["refused_because"].startswith("independence: ")


def test_show_histogram_run_says_what_is_assumed(cli, store):
    tmp, db, ids = store
    run = ids["hist"][0]
    text = cli("show", run, "--db", db).out
    line = next(x for x in text.splitlines() if x.startswith("worst case:"))
    assert "bound at p = 1e-09" in line and "assumes independence and stationarity" in line
    wc = json.loads(cli("show", run, "--db", db, "--json").out)["worst_case"]
    assert wc["untested"] == ["independence", "stationarity"] and wc["claimed"]


# --- compare --tail --------------------------------------------------------------------------------------

def _comparison(doc: dict, label: str) -> dict:
    return next(k for k in doc["comparisons"] if k["configuration"] == label)


def test_compare_tail_row_is_the_run_level_test_of_per_run_bounds(cli, store):
    tmp, db, ids = store
    r = cli("compare", "--experiment", "rows", "--baseline", "k=a", "--tail", "--db", db, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["tail_row"] is True and doc["tests"]["tail"] == TAIL_TEST
    row = next(x for x in _comparison(doc, "k=b")["rows"] if x["metric"] == "tail")
    # each run's value is the point bound `rtscope tail RUN` states at p = 1e-9
    mine = [row["per_run"]["configuration"][str(i)]["value_ns"] for i in ids["b"]]
    base = [row["per_run"]["baseline"][str(i)]["value_ns"] for i in ids["a"]]
    for rid, value in zip(ids["b"], mine):
        level = json.loads(cli("tail", rid, "--db", db, "--json").out)["levels"][6]
        assert level["p"] == 1e-9 and value == pytest.approx(level["value_ns"], rel=1e-9)
    expected = run_level_row("tail", mine, base, TAIL_TEST)
    assert row["p"] == pytest.approx(expected.p) and row["ci95_difference"] == pytest.approx(list(expected.ci))
    assert row["value"] == pytest.approx(np.mean(mine)) and row["baseline"] == pytest.approx(np.mean(base))
    assert row["verdict"] == "worse" and row["runs"] == 3 and row["baseline_runs"] == 3
    # the tail row is in the Holm family: every tested p of the set, the tail rows' included
    tested = [x for k in doc["comparisons"] for x in k["rows"] if x["p"] is not None]
    assert row in tested
    adjusted = holm([x["p"] for x in tested])
    assert [x["p_holm"] for x in tested] == pytest.approx(adjusted)

    # refused runs: no number is invented, the row says which runs and which check
    refused = next(x for x in _comparison(doc, "k=ar")["rows"] if x["metric"] == "tail")
    assert refused["verdict"] == "not tested" and refused["p"] is None and refused["value"] is None
    assert refused["refused"] == {"configuration": ["refused: independence"], "baseline": []}
    assert refused["not_tested_because"] == (f"no bound: refused: independence (runs "
                                             f"{', '.join(map(str, ids['ar']))} of the configuration)")
    assert refused["baseline"] == pytest.approx(np.mean(base))
    one = next(x for x in _comparison(doc, "k=one")["rows"] if x["metric"] == "tail")
    assert one["verdict"] == "not tested" and "1 run vs 3 runs" in one["not_tested_because"]

    text = piped(tmp, "compare", "--experiment", "rows", "--baseline", "k=a", "--tail", "--db", db).out
    assert re.search(r"\n tail +[\d,.]+ +refused +n/a +- +- +not tested", text), text
    assert re.search(r"\n tail +[\d,.]+ +[\d,.]+ +\+\d+% .* worse", text), text
    assert "not tested: tail of k=ar: no bound: refused: independence" in text
    _fits_80(on_terminal(tmp, "compare", "--experiment", "rows", "--baseline", "k=a", "--tail", "--db", db).out)


def test_compare_without_tail_has_no_tail_row(cli, store):
    tmp, db, _ = store
    doc = json.loads(cli("compare", "--experiment", "rows", "--baseline", "k=a", "--db", db, "--json").out)
    assert doc["tail_row"] is False and "tail" not in doc["tests"]
    assert all(x["metric"] != "tail" for k in doc["comparisons"] for x in k["rows"])


def test_gate_on_the_tail(cli, store):
    tmp, db, ids = store
    junit = tmp / "tail-junit.xml"
    # naming the tail in the gate computes the row without --tail
    r = cli("compare", "--experiment", "rows", "--baseline", "k=a", "--where", "k=a", "--where", "k=b",
              "--where", "k=ar", "--fail-on", "worse:tail", "--junit", junit, "--db", db, "--json")
    assert r.code == 1, r.err
    gate = json.loads(r.out)["gate"]
    assert gate["metrics"] == ["tail"] and gate["passed"] is False
    assert [(f["configuration"], f["metric"]) for f in gate["failures"]] == [("k=b", "tail")]
    assert [(x["configuration"], x["metric"]) for x in gate["not_tested"]] == [("k=ar", "tail")]
    cases = {(c.get("classname"), c.get("name")): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert cases[("k=b", "tail")].find("failure") is not None
    assert "refused: independence" in cases[("k=ar", "tail")].find("skipped").get("message")
    # `worse` alone gates every row compare has: with --tail the tail too; without, the five metrics
    doc = json.loads(cli("compare", "--experiment", "rows", "--baseline", "k=a", "--fail-on", "worse",
                         "--db", db, "--json").out)
    assert doc["gate"]["metrics"] == ["mean", "median", "p99", "max", "stdev"]
    doc = json.loads(cli("compare", "--experiment", "rows", "--baseline", "k=a", "--fail-on", "worse",
                         "--tail", "--db", db, "--json").out)
    assert doc["gate"]["metrics"][-1] == "tail" and ("k=b", "tail") in {
        (f["configuration"], f["metric"]) for f in doc["gate"]["failures"]}
    r = cli("compare", "--experiment", "rows", "--baseline", "k=a", "--fail-on", "worse:tails", "--db", db)
    assert r.code == 2 and "valid metrics: mean, median, p99, max, stdev, tail" in r.err


def test_run_bound_is_tails_point_value():
    x = ts.spliced(N, 0.1, np.random.default_rng(4))
    full = tail_bound.analyse([x], {"run": 1}, gev=False)
    bound = tail_bound.run_bound(x, None)
    assert bound.short is None and bound.value == pytest.approx(next(lv.value for lv in full.levels
                                                                      if lv.p == 1e-9), rel=1e-12)
    assert tail_bound.run_bound(x[:5000], None).short == "fewer than 10,000 samples"
    assert tail_bound.run_bound(None, None).value is None


def test_a_configurations_checks_are_corrected_for_its_runs():
    """A check failing at p = 0.001..0.01 refuses one run alone, not one of 10 runs (Bonferroni: 0.01 / 10)."""
    from rtscope.analysis import tail_checks
    for seed in range(400):
        x = ts.spliced(20_000, 0.1, np.random.default_rng(seed))
        ind = [x > tail_checks.reference_threshold(x, tail_checks.reference_k(len(x)))]
        cks = [tail_checks.independence(ind), tail_checks.stationarity(ind)]
        failed = [c for c in cks if c.passed is False]
        if failed and all(0.001 < c.p < 0.01 for c in failed):
            break
    else:
        pytest.fail("no seed with a marginal check")
    alone = tail_bound.run_bound(x, None)
    assert alone.value is None and alone.short == f"refused: {failed[0].name}"
    among = tail_bound.run_bound(x, None, runs=10)
    assert among.value is not None and among.short is None and f"{failed[0].name} p" in among.note
    assert among.value == pytest.approx(tail_bound.analyse([x], {"run": 1}, gev=False, fit_below=0.001).levels[6].value)


# the histogram path's censored fits take 1-5 s each on this machine
def test_tail_row_of_histogram_runs(tmp_path):
    """Histogram-only runs (monitor, `-h` imports): each run's bound from its histogram (tail's censored fit)."""
    from rtscope.analysis.compare import compare_runs
    s = Store(str(tmp_path / "h.db"))
    rng = np.random.default_rng(3)
    for _ in range(2):
        for k, scale in (("a", 1), ("b", 2)):
            add_histogram_run(s, tmp_path, (scale * ts.spliced(N, 0.0, rng)).astype(np.int64), bucket_width=100,
                              buckets=400, settings={"k": k})
    row = compare_runs(s, s.runs(), ["k=a"], tail=True).comparisons[0].row("tail")
    maxima = {r.id: r.trailer["histograms"]["latency"]["max"] for r in s.runs()}
    for side in ("configuration", "baseline"):
        for rid, v in row.extra["per_run"][side].items():
            assert v["no_bound"] is None and maxima[int(rid)] < v["value_ns"] < 3 * maxima[int(rid)]
    assert row.p is not None and row.value > row.baseline and row.runs == (2, 2)
