"""rtscope.load: runs and samples as pandas DataFrames for notebooks."""

import subprocess
import sys

import numpy as np
import pytest

import rtscope
from rtscope.errors import UsageError
from rtscope.store import Store

from report_fixtures import add_histogram_run, add_run, study_store

pytestmark = pytest.mark.fast


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return study_store(tmp_path_factory.mktemp("api"), reps=2, n=500)


def test_import_rtscope_stays_light():
    code = "import sys, rtscope; print('pandas' in sys.modules, 'scipy' in sys.modules, 'sqlalchemy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_runs_frame(study):
    db, ids = study
    d = rtscope.load(db, experiment="study1")
    runs = d.runs
    assert len(runs) == 8 and list(runs["run_id"]) == sorted(i for v in ids.values() for i in v)
    assert list(runs.columns[:16]) == ["run_id", "experiment_id", "cell", "repetition", "workload", "variant",
                                       "runtime", "configuration", "measure", "unit", "n_samples", "tool",
                                       "tool_version", "started_at", "finished_at", "tags"]
    assert {"fullsweep_after", "governor", "param.iterations"} <= set(runs.columns)
    perf = runs[runs["governor"] == "performance"]
    assert list(perf["run_id"]) == ids["perf"] and perf["configuration"].nunique() == 1
    assert runs["unit"].unique().tolist() == ["ns"] and runs["measure"].unique().tolist() == ["duration"]
    assert runs.iloc[0]["tags"] == ["rep0", "study1"]


def test_filters(study):
    db, ids = study
    assert list(rtscope.load(db, settings={"governor": "performance"}).runs["run_id"]) == ids["perf"]
    both = rtscope.load(db, settings={"governor": ["performance", "powersave"], "fullsweep_after": 65535})
    assert sorted(both.runs["run_id"]) == sorted(ids["perf"] + ids["save"])
    assert len(rtscope.load(db, tag="rep1").runs) == 4
    assert len(rtscope.load(db, tag=["rep1", "study1"], workload="exec", variant="sum", runtime="native").runs) == 4
    with pytest.raises(UsageError, match="values of governor: conservative, performance, powersave"):
        rtscope.load(db, settings={"governor": "turbo"})
    with pytest.raises(UsageError, match="no run with tag 'nope'"):
        rtscope.load(db, tag="nope")


def test_samples_lazy_long_format(study):
    db, ids = study
    d = rtscope.load(db, settings={"governor": "performance"})
    assert d._samples is None                     # nothing loaded until asked
    s = d.samples
    assert list(s.columns) == ["run_id", "sample", "value", "heap_size", "minor_gcs"]
    assert len(s) == 2 * 500 and sorted(s["run_id"].unique()) == ids["perf"]
    first = s[s["run_id"] == ids["perf"][0]]
    assert first["sample"].tolist() == list(range(500))
    raw = Store(db).samples(ids["perf"][0])
    assert np.array_equal(first["value"].to_numpy(), raw["duration"])
    assert d.samples is s                         # cached
    with pytest.raises(UsageError, match="not in this dataset"):
        d.samples_of(ids["base"][0])


def test_stats_and_compare(study):
    db, _ = study
    d = rtscope.load(db)
    st = d.stats()
    assert len(st) == 8 and {"run_id", "n", "mean", "max", "stdev", "p99"} <= set(st.columns)
    assert (st["n"] == 500).all()
    cs = d.compare(["fullsweep_after=65535", "governor=conservative"])
    assert {k.cell.config.settings_dict["governor"] for k in cs.comparisons} >= {"performance", "powersave"}


def test_histogram_only_runs_have_no_sample_rows(tmp_path):
    db = str(tmp_path / "h.db")
    store = Store(db)
    add_histogram_run(store, tmp_path, np.arange(1000, 50_000, 7), workload="timer", variant="cyclic")
    add_run(store, tmp_path, np.arange(10), workload="timer", variant="cyclic", settings={"k": 1})
    d = rtscope.load(db)
    assert d.runs["n_samples"].tolist() == [0, 10]
    assert d.samples["run_id"].unique().tolist() == [d.runs["run_id"][1]]
    assert d.stats()["n"].tolist() == [7000, 10]
