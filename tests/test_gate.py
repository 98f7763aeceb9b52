"""rtscope compare as a CI gate: --fail-on, --junit (read back with junitparser), baselines stored earlier
(--baseline-experiment, --baseline-tag), on runs of the synthetic runtime (tests/synthetic.py: exec sum's
times with known noise within and between runs, through the real runner and store; a verdict on real runs of
the native probe, judged by the timing rule: tests/test_plan_pilot.py).

The slower configuration sums 1..100000 instead of 1..4000: 25 times the work, so every verdict method (pooled
samples or the run as the unit) calls its median worse with 5 vs 5 runs (see GATE_SPEC). The A/A pair is one
configuration run in two blocks of one experiment, interleaved, under two tags.
"""

import json
import sys

import pytest
from junitparser import Failure, JUnitXml, Skipped

import synthetic

pytestmark = pytest.mark.fast

# Interleaved in one experiment: the baseline block (tag base) and two candidate blocks (tag cand): n=4000, the
# A/A twin of the baseline, and n=100000, 25 times the work. The twins differ in `iterations` only (a spec gives
# each cell once), which says how long to measure, not what: to compare they are one configuration. The twins
# take 200 and 100 calls a run: the run is the unit of every verdict, so the many samples do not make an A/A
# "significant". The slower one takes 20 calls per run; the tests below require its median to be called worse,
# not its mean or tail (on the real probe one preempted call, 4 or 12 ms among samples of 75 µs, can make their
# difference not significant).
GATE_SPEC = """
name = "gate"
repetitions = 5
[[workload]]
name = "exec"
variants = "sum"
runtime = "synthetic"
tags = "base"
[workload.params]
iterations = 200
pause_ms = 0
n = 4000
[[workload]]
name = "exec"
variants = "sum"
runtime = "synthetic"
tags = "cand"
[workload.params]
iterations = 100
pause_ms = 0
n = 4000
[[workload]]
name = "exec"
variants = "sum"
runtime = "synthetic"
tags = "cand"
[workload.params]
iterations = 20
pause_ms = 0
n = 100000
"""

NIGHTLY_SPEC = """
name = "{name}"
repetitions = 5
tags = "{tag}"
[[workload]]
name = "exec"
variants = "sum"
runtime = "synthetic"
[workload.params]
iterations = 20
pause_ms = 0
n = {n}
"""

METRICS = ["mean", "median", "p99", "max", "stdev"]


def _cli(*args):
    """rtscope in this process (the conftest `cli` fixture is per test; the store here is per module)."""
    from rtscope.cli import main
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "argv", ["rtscope", *map(str, args)])
        try:
            main()
        except SystemExit as e:
            return e.code
    return 0


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Experiment 1 `gate` (GATE_SPEC), 2 `last-week` (n=4000, tag nightly-2026-11-20), 3 `tonight`
    (n=4000 and n=100000, tag nightly-2026-11-27)."""
    d = tmp_path_factory.mktemp("gate")
    db = str(d / "store.db")
    specs = {"gate": GATE_SPEC,
             "last-week": NIGHTLY_SPEC.format(name="last-week", tag="nightly-2026-11-20", n=4000),
             "tonight": NIGHTLY_SPEC.format(name="tonight", tag="nightly-2026-11-27", n="[4000, 100000]")}
    with pytest.MonkeyPatch.context() as mp:
        synthetic.enable(mp)
        for name, text in specs.items():
            spec = d / f"{name}.toml"
            spec.write_text(text)
            assert _cli("run", spec, "--db", db, "--seed", 5) == 0, name
    return db


def junit_cases(path):
    """{(classname, name): testcase} of the single test suite of a JUnit file, and that suite."""
    xml = JUnitXml.fromfile(str(path))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    cases = {(c.classname, c.name): c for c in suite}
    assert len(cases) == suite.tests == len(list(suite))
    return cases, suite


def kinds(case):
    return [type(r) for r in case.result]


# --- (a) a slower configuration fails the gate ------------------------------------------------------------

def test_slower_configuration_fails_the_gate_with_junit_failures(cli, store, tmp_path):
    out = tmp_path / "gate.xml"
    r = cli("compare", "--db", store, "--experiment", "gate", "--tag", "cand", "--baseline", "n=4000",
            "--fail-on", "worse", "--junit", out)
    assert r.code == 1, r.err
    assert "gate failed" in r.out and "size n=100000 median" in " ".join(r.out.split())
    cases, suite = junit_cases(out)
    # one comparison (n=100000 against n=4000) × 5 metrics
    assert set(cases) == {("size n=100000", m) for m in METRICS}
    failed = {name for (_, name), c in cases.items() if Failure in kinds(c)}
    assert "median" in failed
    assert suite.failures == len(failed) and suite.errors == 0
    median = next(x for x in cases[("size n=100000", "median")].result if isinstance(x, Failure))
    # value, change, interval, p (Holm), verdict
    for part in ("value ", "µs (baseline ", "change +", "95% CI of Δ ", "p (Holm) ", "verdict worse"):
        assert part in median.message
    change = float(median.message.split("change +")[1].split("%")[0])
    assert change > 400          # 25 times the work: far more than 2x
    assert median.type == "worse"

    # only the metrics named fail it; the others are still reported, as not gated
    r = cli("compare", "--db", store, "--experiment", "gate", "--tag", "cand", "--baseline", "n=4000",
            "--fail-on", "worse:median", "--junit", out, "--json")
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    gate = doc["gate"]
    assert gate["fail_on"] == "worse:median" and gate["passed"] is False and gate["enforced"] is True
    assert [(f["configuration"], f["metric"], f["verdict"]) for f in gate["failures"]] == \
        [("size n=100000", "median", "worse")]
    assert gate["failures"][0]["ratio"] > 10
    cases, suite = junit_cases(out)
    assert suite.failures == 1 and Failure in kinds(cases[("size n=100000", "median")])
    assert "not gated: --fail-on worse:median" in cases[("size n=100000", "mean")].system_out


def test_junit_without_fail_on_reports_failures_and_exits_0(cli, store, tmp_path):
    out = tmp_path / "report.xml"
    r = cli("compare", "--db", store, "--experiment", "gate", "--tag", "cand", "--baseline", "n=4000",
            "--junit", out)
    assert r.code == 0, r.err
    assert "no --fail-on" in " ".join(r.err.split())
    cases, suite = junit_cases(out)
    assert suite.failures >= 1 and Failure in kinds(cases[("size n=100000", "median")])


# --- (b) A/A passes --------------------------------------------------------------------------------------

AA_GATED = list(METRICS)


def test_a_a_passes_the_gate(cli, store, tmp_path):
    """The same configuration in two interleaved blocks: tag cand checked against tag base.

    At α = 0.01 (a false alarm at most about once in a hundred suites), gated on every metric: 500 vs 1,000
    samples, but 5 vs 5 runs, the replicates of every test."""
    out = tmp_path / "aa.xml"
    args = ("compare", "--db", store, "--experiment", "gate", "--where", "n=4000", "--tag", "cand",
            "--baseline-tag", "base", "--alpha", "0.01", "--fail-on", "worse:" + ",".join(AA_GATED),
            "--junit", out)
    r = cli(*args)
    assert r.code == 0, r.err + r.out
    assert "gate passed" in r.out
    cases, suite = junit_cases(out)
    (label,) = {classname for classname, _ in cases}     # one configuration: its whole label
    assert label.startswith("exec sum (synthetic)") and sorted(name for _, name in cases) == sorted(METRICS)
    assert suite.failures == 0 and not any(Failure in kinds(c) for c in cases.values())
    r = cli(*args, "--json")
    assert r.code == 0
    doc = json.loads(r.out)
    assert doc["gate"]["passed"] is True and doc["gate"]["failures"] == []
    (k,) = doc["comparisons"]
    assert k["runs"] == k["baseline_runs"] == 5 and (k["n_samples"], k["baseline_n_samples"]) == (500, 1000)
    assert [row["verdict"] for row in k["rows"] if row["metric"] in AA_GATED].count("worse") == 0
    assert doc["gate"]["metrics"] == AA_GATED


# --- (c) usage errors ------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    ([], "name a baseline: --baseline NAME=VALUE (a setting, parameter, workload, variant or runtime), --baseline "
         "defaults (every setting at its default), or runs stored earlier: --baseline-experiment ID|NAME, "
         "--baseline-tag TAG"),
    (["--fail-on", "better"], "unknown mode 'better'; valid: worse (the only mode so far)"),
    (["--fail-on", "worse:p95"], "unknown metric 'p95'; valid metrics: mean, median, p99, max, stdev"),
    (["--fail-on", "worse:mean,"], "valid metrics: mean, median, p99, max, stdev"),
    (["--fail-on", "worse:"], "no metric after ':'"),
    (["--baseline-experiment", "nope"], "baseline runs (experiment nope): no experiment 'nope'"),
    (["--baseline-tag", "missing"], "no run with tag 'missing'"),
    (["--experiment", "gate", "--baseline-experiment", "gate"], "is a baseline run"),
    (["--baseline-experiment", "last-week", "--baseline", "n=5"],
     "baseline runs (experiment last-week): no selected run has the baseline n=5; values of n: 4000"),
])
def test_usage_errors_exit_2_and_write_nothing(cli, store, tmp_path, args, message):
    out = tmp_path / "junit.xml"
    out.write_text("the previous file")
    r = cli("compare", "--db", store, "--experiment", "tonight", *args, "--junit", out)
    assert r.code == 2
    assert message in " ".join(r.err.split())
    assert out.read_text() == "the previous file"
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]      # no temp file left


def test_junit_path_errors(cli, store, tmp_path):
    r = cli("compare", "--db", store, "--experiment", "gate", "--baseline", "n=4000", "--junit", tmp_path)
    assert r.code == 2 and "is a directory" in r.err
    r = cli("compare", "--db", store, "--experiment", "gate", "--baseline", "n=4000",
            "--junit", tmp_path / "no" / "x.xml")
    assert r.code == 2 and "does not exist" in r.err
    assert list(tmp_path.iterdir()) == []


# --- (d) baselines stored earlier ------------------------------------------------------------------------

def test_baseline_tag_pairs_each_configuration_with_the_same_one(cli, store, tmp_path):
    out = tmp_path / "nightly.xml"
    r = cli("compare", "--db", store, "--tag", "nightly-2026-11-27", "--baseline-tag", "nightly-2026-11-20",
            "--json", "--junit", out)
    assert r.code == 0, r.err      # --junit without --fail-on does not gate
    doc = json.loads(r.out)
    assert doc["baseline_selection"] == "tag nightly-2026-11-20"
    runs = {(c["label"], c["is_baseline"]): c["runs"] for c in doc["configurations"]}
    last_week = runs[("size n=4000", True)]
    tonight = runs[("size n=4000", False)]
    assert len(last_week) == len(tonight) == 5 and max(last_week) < min(tonight)
    assert set(runs) == {("size n=4000", True), ("size n=4000", False), ("size n=100000", False)}
    (k,) = doc["comparisons"]
    assert (k["configuration"], k["baseline"], k["runs"], k["baseline_runs"]) == ("size n=4000", "size n=4000", 5, 5)
    (unmatched,) = doc["unmatched"]
    assert unmatched["configuration"] == "size n=100000"
    assert "among the runs of tag nightly-2026-11-20" in unmatched["reason"]
    assert doc["gate"]["not_compared"][0]["configuration"] == "size n=100000"
    cases, suite = junit_cases(out)
    assert suite.skipped == 5
    for m in METRICS:
        (skip,) = [x for x in cases[("size n=100000", m)].result if isinstance(x, Skipped)]
        assert skip.message.startswith("not compared: no configuration with the same workload")
    assert {("size n=4000", m) for m in METRICS} <= set(cases)


@pytest.mark.parametrize("ref", ["last-week", "2"])
def test_baseline_experiment_with_a_named_baseline_fails_the_slower_one(cli, store, ref):
    r = cli("compare", "--db", store, "--experiment", "tonight", "--baseline-experiment", ref,
            "--baseline", "n=4000", "--fail-on", "worse", "--json")
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    assert doc["baseline_selection"] == f"experiment {ref}"
    pairs = {(k["configuration"], k["baseline"]) for k in doc["comparisons"]}
    assert pairs == {("size n=4000", "size n=4000"), ("size n=100000", "size n=4000")}
    base_runs = {r for c in doc["configurations"] if c["is_baseline"] for r in c["runs"]}
    assert base_runs == set(range(16, 21))    # experiment 2's runs: after gate's 15
    failed = {(f["configuration"], f["metric"]) for f in doc["gate"]["failures"]}
    assert ("size n=100000", "median") in failed
    assert doc["unmatched"] == []
