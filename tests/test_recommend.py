"""rtscope recommend: the best configuration for a goal, its evidence, its cost, ties, none better."""

import json

import numpy as np
import pytest

from rtscope.analysis.compare import compare_runs
from rtscope.analysis.recommend import change, recommend
from rtscope.analysis.select import Selection, select_runs
from rtscope.store import Store

from report_fixtures import add_run, study_store

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("rec"))[0]


def test_change_text():
    assert change(0.42) == "−58%" and change(1.05) == "+5.0%" and change(None) == "n/a"


def test_cli_recommend_p99(cli, study):
    r = cli("recommend", "--db", study, "--goal", "p99", "--baseline", "fullsweep_after=65535",
            "--baseline", "governor=conservative", "--json")
    assert r.code == 0, r.err
    (rec,) = json.loads(r.out)["recommendations"]
    assert rec["recommended"] == "fullsweep_after=65535 governor=performance" and not rec["keep_baseline"]
    assert rec["evidence"]["verdict"] == "better" and rec["evidence"]["magnitude"] == "large"
    assert rec["evidence"]["ratio"] == pytest.approx(0.5, rel=0.01)
    lo, hi = rec["evidence"]["ci95_difference"]
    assert lo < rec["evidence"]["difference"] < hi < 0
    assert set(rec["cost"]) == {"mean", "median", "max", "stdev"}
    assert rec["cost"]["mean"]["verdict"] == "better"
    others = {o["configuration"]: o["verdict"] for o in rec["others"]}
    assert others == {"fullsweep_after=0 governor=conservative": "worse",
                      "fullsweep_after=65535 governor=powersave": "no significant difference"}

    text = cli("recommend", "--db", study, "--goal", "mean", "--baseline", "fullsweep_after=65535",
               "--baseline", "governor=conservative")
    assert text.code == 0
    flat = " ".join(text.out.split())
    assert "minimise mean: fullsweep_after=65535 governor=performance" in flat
    assert "mean −50%" in flat and "fullsweep_after=65535 governor=powersave: no significant difference" in flat
    assert "cost: median −50% (better)" in flat


def test_tie_and_keep_baseline(tmp_path):
    store = Store(str(tmp_path / "t.db"))
    rng = np.random.default_rng(0)
    for _ in range(3):
        add_run(store, tmp_path, rng.normal(1000, 20, 2000), settings={"knob": "base"})
        add_run(store, tmp_path, rng.normal(800, 20, 2000), settings={"knob": "a"})
        add_run(store, tmp_path, rng.normal(800, 20, 2000), settings={"knob": "b"})
        add_run(store, tmp_path, rng.normal(1000, 20, 2000), settings={"knob": "same"})
    cs = compare_runs(store, select_runs(store, Selection()), ["knob=base"])
    (rec,) = recommend(cs, "mean")
    assert rec.best.cell.config.settings_dict["knob"] in ("a", "b") and rec.tied
    assert "tied with knob=" in rec.summary(cs.labels)

    cs = compare_runs(store, select_runs(store, Selection(where=[("knob", "base"), ("knob", "same")])),
                      ["knob=base"])
    (rec,) = recommend(cs, "p99")
    assert rec.best is None
    assert rec.summary(cs.labels) == "keep knob=base: no configuration is significantly better on p99"
    assert rec.to_json(cs.labels)["keep_baseline"] is True


def test_cli_recommend_errors(cli, study):
    r = cli("recommend", "--db", study, "--goal", "fastest")
    assert r.code == 2 and "valid goals: max, p99, stdev, mean, median" in r.err
    r = cli("recommend", "--db", study)     # no --baseline and no configuration without settings
    assert r.code == 2 and "--baseline NAME=VALUE" in " ".join(r.err.split())


def test_untestable_goal_is_not_a_keep(cli, tmp_path):
    """One run a configuration: nothing is tested, so nothing is recommended, and the baseline is not 'kept'."""
    db = study_store(tmp_path, reps=1)[0]
    r = cli("recommend", "--db", db, "--goal", "max", "--baseline", "fullsweep_after=65535",
            "--baseline", "governor=conservative", "--json")
    (rec,) = json.loads(r.out)["recommendations"]
    assert rec["keep_baseline"] is False and "between-run variation is unknown" in rec["not_tested_because"]
    assert rec["summary"].startswith("no recommendation against fullsweep_after=65535 governor=conservative: "
                                     "max is not tested")
