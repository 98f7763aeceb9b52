"""rtscope compare: the statistics against scipy and hand-worked cases, the run as the unit, baselines, the CLI."""

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from rtscope.analysis.compare import Baseline, compare, compare_runs, cliffs_delta, holm, load_cells, magnitude, welch
from rtscope.errors import UsageError
from rtscope.analysis.select import Selection, select_runs
from rtscope.store import Store

from report_fixtures import add_histogram_run, add_run, study_store

pytestmark = pytest.mark.fast

BASE = ["fullsweep_after=65535", "governor=conservative"]


# --- statistics --------------------------------------------------------------------------------------------

def test_holm_hand_worked():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 -> max(0.06, 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # step-down stops at the first non-rejection; adjusted values never exceed 1
    assert holm([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm([0.02]) == [0.02]
    assert holm([]) == []


def test_holm_is_monotone_in_sorted_order():
    rng = np.random.default_rng(5)
    p = rng.uniform(0, 0.2, 50).tolist()
    adj = holm(p)
    order = np.argsort(p)
    assert all(np.diff(np.asarray(adj)[order]) >= 0)
    assert all(a >= x for a, x in zip(adj, p))


@pytest.mark.parametrize("delta,label", [(0.0, "negligible"), (0.146, "negligible"), (0.147, "small"),
                                         (-0.329, "small"), (0.33, "medium"), (0.473, "medium"),
                                         (0.474, "large"), (-1.0, "large")])
def test_cliffs_delta_magnitude_thresholds(delta, label):
    assert magnitude(delta) == label


def test_cliffs_delta_matches_brute_force():
    rng = np.random.default_rng(1)
    x = np.sort(rng.integers(0, 20, 300).astype(float))     # ties on purpose
    y = np.sort(rng.integers(3, 25, 250).astype(float))
    brute = (np.sign(x[:, None] - y[None, :])).mean()
    assert cliffs_delta(x, y) == pytest.approx(brute, abs=1e-12) and cliffs_delta(x, y) < 0
    same = np.arange(100.0)
    assert cliffs_delta(same, same) == 0.0 and cliffs_delta(same + 1000, same) == 1.0


def test_welch_matches_scipy():
    rng = np.random.default_rng(4)
    for a, b in ((rng.normal(10, 1, 40), rng.normal(10.6, 3, 25)), (rng.gamma(2, 3, 3000), rng.gamma(2, 3.1, 2000)),
                 (np.array([1.0, 2.0]), np.array([1.5, 9.0, 3.0]))):
        p, lo, hi = welch(a, b)
        ref = sps.ttest_ind(a, b, equal_var=False)
        ci = ref.confidence_interval(0.95)
        assert p == pytest.approx(ref.pvalue, rel=1e-9)
        assert (lo, hi) == pytest.approx((ci.low, ci.high), rel=1e-9)
    same = np.full(20, 3.0)
    assert welch(same, same)[0] == 1.0
    assert welch(same, same + 1)[0] == 0.0


# --- compare on a store ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("study")
    db, ids = study_store(tmp)
    return db, ids


def by_label(cs):
    return {k["configuration"]: k for k in cs.to_json()["comparisons"]}


def test_verdicts_per_run_and_holm(study):
    db, ids = study
    store = Store(db)
    cs = compare_runs(store, select_runs(store, Selection(experiment="study1")), BASE)
    got = by_label(cs)
    assert set(got) == {"fullsweep_after=0 governor=conservative", "fullsweep_after=65535 governor=performance",
                        "fullsweep_after=65535 governor=powersave"}
    perf = got["fullsweep_after=65535 governor=performance"]
    assert perf["baseline"] == "fullsweep_after=65535 governor=conservative"
    assert perf["runs"] == 3 and perf["n_samples"] == 3 * 2000
    rows = {r["metric"]: r for r in perf["rows"]}
    # 3 vs 3 runs, each a replicate: a halving is called on every metric, max included
    assert {m: rows[m]["verdict"] for m in rows} == dict.fromkeys(("mean", "median", "p99", "max", "stdev"), "better")
    assert all(rows[m]["runs"] == 3 and rows[m]["baseline_runs"] == 3 for m in rows)
    assert rows["mean"]["ratio"] == pytest.approx(0.5, rel=0.01)
    # the value is the mean of the per-run values; the interval is centred on its difference
    lo, hi = rows["median"]["ci95_difference"]
    assert lo <= rows["median"]["difference"] <= hi < 0
    assert perf["cliffs_delta"] == -1.0 and perf["magnitude"] == "large"
    save = {r["metric"]: r for r in got["fullsweep_after=65535 governor=powersave"]["rows"]}
    assert all(save[m]["verdict"] == "no significant difference" for m in save)
    fs0 = {r["metric"]: r for r in got["fullsweep_after=0 governor=conservative"]["rows"]}
    assert all(fs0[m]["verdict"] == "worse" for m in ("mean", "median", "p99"))
    # Holm: one family over every tested row of every comparison
    tested = [r for k in got.values() for r in k["rows"] if r["p"] is not None]
    assert [r["p_holm"] for r in tested] == pytest.approx(holm([r["p"] for r in tested]))
    assert cs.to_json()["warnings"] == [] and cs.to_json()["unit_of_replication"] == "run"


def test_row_value_is_the_mean_of_per_run_values(study):
    db, ids = study
    store = Store(db)
    cells = {c.config.settings_dict["governor"]: c for c in load_cells(store, select_runs(store, Selection()))
             if c.config.settings_dict["fullsweep_after"] == 65535}
    cs = compare(list(cells.values()), Baseline.parse(BASE))
    k = next(k for k in cs.comparisons if k.cell is cells["performance"])
    for metric, key in (("p99", "p99"), ("max", "max"), ("stdev", "stdev")):
        values = [cells["performance"].per_run[r.id][key] for r in cells["performance"].runs]
        assert k.row(metric).value == pytest.approx(np.mean(values))
        base = [cells["conservative"].per_run[r.id][key] for r in cells["conservative"].runs]
        p, lo, hi = welch(np.asarray(values, float), np.asarray(base, float))
        assert (k.row(metric).p, k.row(metric).ci) == (pytest.approx(p), pytest.approx((lo, hi)))


def test_same_data_same_verdicts(study):
    db, _ = study
    store = Store(db)
    runs = select_runs(store, Selection())
    assert compare_runs(store, runs, BASE).to_json() == compare_runs(store, runs, BASE).to_json()


def test_baseline_by_most_shared_settings(study):
    """--baseline governor=conservative: two configurations match; each other one takes the one sharing
    its fullsweep_after (a factorial design), and the matching ones are baselines themselves."""
    db, _ = study
    store = Store(db)
    cs = compare_runs(store, select_runs(store, Selection()), ["governor=conservative"])
    got = by_label(cs)
    assert set(got) == {"fullsweep_after=65535 governor=performance", "fullsweep_after=65535 governor=powersave"}
    assert {k["baseline"] for k in got.values()} == {"fullsweep_after=65535 governor=conservative"}


def test_ambiguous_baseline_is_reported_not_guessed(tmp_path):
    store = Store(str(tmp_path / "a.db"))
    rng = np.random.default_rng(0)
    for s in ({"a": 1, "b": 1}, {"a": 1, "b": 2}, {"a": 2, "c": 5}):
        add_run(store, tmp_path, rng.integers(100, 200, 50), settings=s)
    cs = compare_runs(store, select_runs(store, Selection()), ["a=1"])
    assert cs.comparisons == [] and len(cs.unmatched) == 1
    assert "ambiguous baseline" in cs.unmatched[0][1]


def test_baseline_errors_name_valid_choices(study):
    db, _ = study
    store = Store(db)
    runs = select_runs(store, Selection())
    with pytest.raises(UsageError, match="valid names: .*fullsweep_after.*governor"):
        compare_runs(store, runs, ["fullsweep=1"])
    with pytest.raises(UsageError, match="values of governor: conservative, performance, powersave"):
        compare_runs(store, runs, ["governor=ondemand"])
    with pytest.raises(UsageError, match="settings of the selected runs: fullsweep_after: 0, 65535"):
        compare_runs(store, runs, ["defaults"])
    with pytest.raises(UsageError, match="name a baseline"):
        compare_runs(store, runs, [])
    with pytest.raises(UsageError, match="expected NAME=VALUE"):
        Baseline.parse(["governor"])


def test_defaults_and_unset_values(tmp_path):
    store = Store(str(tmp_path / "d.db"))
    rng = np.random.default_rng(0)
    for _ in range(3):
        add_run(store, tmp_path, rng.integers(1000, 1100, 300))
        add_run(store, tmp_path, rng.integers(500, 550, 300), settings={"priority": "high"})
    for items in (["defaults"], ["priority="]):
        cs = compare_runs(store, select_runs(store, Selection()), items)
        (k,) = cs.comparisons
        assert k.cell.config.settings_dict == {"priority": "high"} and k.row("median").verdict == "better"


def test_one_run_each_is_not_tested_and_says_why(tmp_path):
    store = Store(str(tmp_path / "r.db"))
    rng = np.random.default_rng(0)
    add_run(store, tmp_path, rng.integers(1000, 1100, 400), settings={"k": 0})
    add_run(store, tmp_path, rng.integers(500, 600, 400), settings={"k": 1})
    cs = compare_runs(store, select_runs(store, Selection()), ["k=0"])
    assert ("fewer than 3 runs of 2 configurations (1 run each): k=0; k=1; the between-run variation rests on too "
            "few runs") in cs.warnings[0]
    (k,) = cs.comparisons
    assert {r.verdict for r in k.rows} == {"not tested"}
    assert all("each side has a single run, so the between-run variation is unknown" in r.reason for r in k.rows)

    store = Store(str(tmp_path / "r5.db"))
    for _ in range(5):
        add_run(store, tmp_path, rng.integers(1000, 1100, 400), settings={"k": 0})
        add_run(store, tmp_path, rng.integers(500, 600, 400), settings={"k": 1})
    cs = compare_runs(store, select_runs(store, Selection()), ["k=0"])
    verdicts = {r.metric: r.verdict for r in cs.comparisons[0].rows}
    assert verdicts == {**dict.fromkeys(("mean", "median", "p99", "max"), "better"),
                        "stdev": "no significant difference"}      # both uniform over 100 ns: the same spread
    assert cs.warnings == []


def test_run_offsets_larger_than_the_difference_are_not_significant(tmp_path):
    """The trap of pooled tests: 3,000 samples a run, runs 1,000 apart, configurations 30 apart. Pooled, the
    median test called this `worse`; with the run as the unit it is not significant."""
    store = Store(str(tmp_path / "o.db"))
    rng = np.random.default_rng(0)
    for offset in (0, 1000, 2000):
        add_run(store, tmp_path, 10_000 + offset + rng.integers(0, 100, 3000), settings={"k": 0})
        add_run(store, tmp_path, 10_030 + offset + rng.integers(0, 100, 3000), settings={"k": 1})
    cs = compare_runs(store, select_runs(store, Selection()), ["k=0"])
    assert {r.verdict for r in cs.comparisons[0].rows} == {"no significant difference"}
    comps = cs.to_json()["configurations"][0]["variance_components"]["median"]
    assert comps["between_run_share"] > 0.99 and comps["runs"] == 3


def test_histogram_only_runs(tmp_path):
    store = Store(str(tmp_path / "h.db"))
    rng = np.random.default_rng(0)
    for _ in range(4):
        add_histogram_run(store, tmp_path, rng.integers(10_000, 50_000, 5000), workload="timer", variant="sleep",
                          settings={"kernel": "normal"})
        add_histogram_run(store, tmp_path, rng.integers(5_000, 20_000, 5000), workload="timer", variant="sleep",
                          settings={"kernel": "rt"})
    cells = load_cells(store, select_runs(store, Selection()))
    assert all(len(c.samples) == 0 and c.stats["n"] == 20_000 for c in cells)
    cs = compare(cells, Baseline.parse(["kernel=normal"]))
    (k,) = cs.comparisons
    assert k.cliffs_delta is None
    # every metric has a per-run value from the run's histogram: all tested at the run level
    assert {r.metric: r.verdict for r in k.rows} == dict.fromkeys(("mean", "median", "p99", "max", "stdev"),
                                                                    "better")
    assert "histogram-only" in k.notes[0] and "bucket upper edges" in k.notes[0]
    assert k.row("mean").value == pytest.approx(12_500, rel=0.01)    # exact mean from the histogram sums


# --- CLI --------------------------------------------------------------------------------------------------

def test_cli_compare_json_and_table(cli, study):
    db, _ = study
    r = cli("compare", "--db", db, "--experiment", "study1", "--baseline", "fullsweep_after=65535",
            "--baseline", "governor=conservative", "--json")
    assert r.code == 0, r.err
    out = json.loads(r.out)
    assert out["correction"] == "holm" and out["unit_of_replication"] == "run" and len(out["comparisons"]) == 3
    comps = out["configurations"][0]["variance_components"]
    assert set(comps) == {"mean", "median", "p99", "max", "stdev"} and comps["max"]["within_run_var"] is None
    assert comps["mean"]["between_run_var"] >= 0 and comps["mean"]["within_run_var"] > 0
    assert {c["is_baseline"] for c in out["configurations"]} == {True, False}
    r = cli("compare", "--db", db, "--baseline", "governor=conservative", "--where", "fullsweep_after=65535")
    assert r.code == 0, r.err
    assert "better" in r.out and "Holm" in r.out and "Cliff's δ" in r.out
    assert "no significant difference" in r.out and "n.s." not in r.out   # the verdict's one spelling
    assert "variance components" in r.out and "the run is the unit" in r.out


@pytest.mark.parametrize("args,message", [
    ([], "name a baseline"),
    ([], "settings of the selected runs: fullsweep_after: 0, 65535; governor: conservative, performance, powersave"),
    (["--baseline", "governor=turbo"], "values of governor"),
    (["--baseline", "governor=conservative", "--where", "nosuch=1"], "valid: fullsweep_after, governor"),
    (["--baseline", "governor=conservative", "--experiment", "nope"], "valid experiments: 1 (study1)"),
    (["--baseline", "governor=conservative", "--alpha", "2"], "alpha must be between 0 and 1"),
    (["--baseline", "governor=conservative", "--tag", "missing"], "no run with tag 'missing'"),
])
def test_cli_compare_usage_errors(cli, study, args, message):
    db, _ = study
    r = cli("compare", "--db", db, *args)
    assert r.code == 2
    assert message in " ".join(r.err.split())


def test_a_parameter_only_one_runtime_has_does_not_prevent_the_comparison(tmp_path):
    """The demo's axis: BEAM runs record warmup_calls, native runs do not; --baseline runtime=native pairs them."""
    store = Store(str(tmp_path / "rt.db"))
    rng = np.random.default_rng(3)
    for _ in range(3):
        add_run(store, tmp_path, rng.integers(1000, 1100, 200), runtime="native", params={"n": 4000})
        add_run(store, tmp_path, rng.integers(5000, 5100, 200), runtime="beam", params={"n": 4000, "warmup_calls": 1})
        add_run(store, tmp_path, rng.integers(5000, 5100, 200), runtime="beam", params={"n": 20, "warmup_calls": 1})
    cs = compare_runs(store, select_runs(store, Selection()), ["runtime=native"])
    (k,) = cs.comparisons
    assert k.cell.config.params_dict["n"] == 4000 and k.row("median").verdict == "worse"
    assert "no baseline configuration" in cs.unmatched[0][1]     # n=20 has no native twin
