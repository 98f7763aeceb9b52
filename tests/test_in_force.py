"""What ran is what is shown: settings the runtime did not put in force, as the run recorded them, in every
command that labels, groups, compares, recommends, reproduces or reports.

The runs come from the synthetic runtime acting as the BEAM does with spawn options (tests/synthetic.py with
SYNTHETIC_IN_FORCE=1: fullsweep_after kept in 16 bits, min_heap_size rounded up to a heap size of at least 233
words; the header's `process` records what the process got) through the real runner and store; the CLI is
called in this process, piped at 80 columns. The real BEAM's own clamping is tests/test_in_force_beam.py's.
"""

from __future__ import annotations

import json
import sys

import pytest

import synthetic
from test_gate import _cli

pytestmark = pytest.mark.fast

SPEC = synthetic.spec_text("in-force", 2, ["fullsweep_after = [65535, 131071]", "min_heap_size = [34, 233, 6765]"], [
    ("sweep-never", "fullsweep_after 131071 lowers sum's STDEV", "stdev", "fullsweep_after = 65535",
     "fullsweep_after = 131071", "lower"),
    ("heap-never", "min_heap_size 34 raises sum's AVG", "mean", "min_heap_size = 233", "min_heap_size = 34", "higher"),
    ("heap-rounded", "min_heap_size 6765 lowers sum's AVG", "mean", "min_heap_size = 233", "min_heap_size = 6765",
     "lower")])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("in-force")
    db, spec = str(d / "store.db"), d / "in-force.toml"
    spec.write_text(SPEC)
    with pytest.MonkeyPatch.context() as mp:
        synthetic.enable(mp)
        mp.setenv("SYNTHETIC_IN_FORCE", "1")
        assert _cli("run", spec, "--db", db, "--seed", 3) == 0
    return db, spec


@pytest.fixture
def run80(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")

    def call(*args):
        r = cli(*args)
        assert r.code == 0, r.err
        return r
    return call


def test_check_warns_about_values_beyond_the_beams_limits(run80, tmp_path):
    spec = tmp_path / "beam.toml"
    spec.write_text(SPEC.replace('"synthetic"', '"beam"'))
    err = " ".join(run80("check", spec).err.split())
    assert "fullsweep_after 131071 is beyond the runtime's limits: its runs will have 65535 in force" in err
    assert "min_heap_size 34 is beyond the runtime's limits: its runs will have 233 in force" in err
    assert "6765" not in err and "fullsweep_after 0 " not in err     # a heap size rounded up is honoured


def test_compare_labels_what_was_in_force_and_compares_a_twin_as_an_a_a(run80, store):
    db, _ = store
    out = " ".join(run80("compare", "--experiment", "in-force", "--baseline", "fullsweep_after=65535", "--where",
                         "fullsweep_after=131071", "--where", "fullsweep_after=65535", "--db", db).out.split())
    assert "fullsweep_after=131071 (in force: 65535)" in out
    assert ("ran with the baseline's settings (fullsweep_after 131071 requested, 65535 in force): an A/A "
            "comparison, not a test of fullsweep_after=131071") in out
    doc = json.loads(run80("compare", "--experiment", "in-force", "--baseline", "min_heap_size=233",
                           "--where", "fullsweep_after=65535", "--where", "min_heap_size=34",
                           "--where", "min_heap_size=233", "--where", "min_heap_size=6765", "--db", db, "--json").out)
    by_heap = {c["configuration"]["settings"]["min_heap_size"]: c for c in doc["configurations"]}
    assert by_heap[34]["configuration"]["not_in_force"] == [
        {"setting": "min_heap_size", "requested": 34, "in_force": 233}]
    assert by_heap[6765]["configuration"]["not_in_force"] == [
        {"setting": "min_heap_size", "requested": 6765, "in_force": 6772}]
    assert by_heap[233]["configuration"]["not_in_force"] == []
    assert by_heap[34]["label"] == "min_heap_size=34 (in force: 233)"
    notes = {k["configuration"]: k["notes"] for k in doc["comparisons"]}
    assert any("A/A" in n for n in notes["min_heap_size=34 (in force: 233)"])
    assert not any("A/A" in n for n in notes["min_heap_size=6765 (in force: 6772)"])


def test_recommend_never_picks_a_setting_that_was_not_in_force(run80, store):
    db, _ = store
    doc = json.loads(run80("recommend", "--experiment", "in-force", "--goal", "mean",
                           "--baseline", "min_heap_size=233", "--where", "fullsweep_after=65535",
                           "--where", "min_heap_size=34",
                           "--where", "min_heap_size=233", "--db", db, "--json").out)
    [rec] = doc["recommendations"]
    assert rec["recommended"] == "min_heap_size=233" and rec["not_in_force"] == []
    assert [o["not_in_force"] for o in rec["others"]] == [
        [{"setting": "min_heap_size", "requested": 34, "in_force": 233}]]


def test_reproduce_a_claim_whose_cell_never_had_its_setting_is_not_measurable(run80, store, monkeypatch):
    db, spec = store
    synthetic.enable(monkeypatch)
    doc = json.loads(run80("reproduce", spec, "--experiment", "in-force", "--db", db, "--json").out)
    claims = {c["id"]: c for c in doc["claims"]}
    for cid, text in (("sweep-never", "fullsweep_after 131071 requested, 65535 in force"),
                      ("heap-never", "min_heap_size 34 requested, 233 in force")):
        assert claims[cid]["verdict"] == "not measurable here", claims[cid]
        assert text in claims[cid]["reason"] and "never had the setting" in claims[cid]["reason"]
    rounded = claims["heap-rounded"]
    assert rounded["verdict"] != "not measurable here"
    assert "measured as in force" in rounded["reason"] and "6772 in force" in rounded["reason"]
    out = " ".join(run80("reproduce", spec, "--experiment", "in-force", "--db", db).out.split())
    assert "not measurable here" in out


def test_report_and_runs_show_the_settings_in_force(run80, store, tmp_path):
    db, _ = store
    html = tmp_path / "r.html"
    run80("report", "--experiment", "in-force", "--baseline", "fullsweep_after=65535", "--db", db, "-o", html)
    text = html.read_text()
    assert "fullsweep_after=131071 (in force: 65535)" in text
    assert "min_heap_size=34 (in force: 233)" in text
    assert "an A/A comparison, not a test of fullsweep_after=131071" in text


def test_show_and_runs_say_what_was_in_force(run80, store, monkeypatch):
    db, _ = store
    from rtscope.store import Store
    [run_id] = [r.id for r in Store(db).runs() if r.settings.get("fullsweep_after") == 131071][:1]
    assert "fullsweep_after=131071 (in force: 65535)" in " ".join(run80("show", run_id, "--db", db).out.split())
    monkeypatch.setenv("COLUMNS", "250")     # a wide table: the settings column on one line
    listed = " ".join(run80("runs", "--db", db).out.split())
    assert "fullsweep_after=131071 (in force: 65535)" in listed


def test_a_configuration_that_ran_as_its_baseline_is_never_recommended_even_when_it_tests_better():
    """An A/A pair whose runs happen to differ: compare may call it better (runs of one configuration differ
    from run to run), recommend must not offer a setting that was never in force."""
    from dataclasses import replace

    import numpy as np

    from rtscope.analysis.compare import Baseline, cells_from_samples, compare
    from rtscope.analysis.recommend import recommend
    rng = np.random.default_rng(1)
    base, twin, other = cells_from_samples({
        "a": [rng.normal(100_000, 500, 200) for _ in range(5)],
        "b": [rng.normal(80_000, 500, 200) for _ in range(5)],
        "c": [rng.normal(90_000, 500, 200) for _ in range(5)]})
    base.config = replace(base.config, settings=(("fullsweep_after", 65535),))
    twin.config = replace(twin.config, settings=(("fullsweep_after", 131071),),
                          not_in_force=(("fullsweep_after", 131071, 65535),))
    other.config = replace(other.config, settings=(("fullsweep_after", 0),))
    assert twin.config.ran_as(base.config) and not other.config.ran_as(base.config)
    cs = compare([base, twin, other], Baseline.parse(["fullsweep_after=65535"]))
    assert {cs.labels[k.cell.config]: k.row("mean").verdict for k in cs.comparisons} == {
        "fullsweep_after=131071 (in force: 65535)": "better", "fullsweep_after=0": "better"}
    [rec] = recommend(cs, "mean")
    assert rec.best.cell is other
    assert any("an A/A comparison" in n for k in cs.comparisons if k.cell is twin for n in k.notes)
