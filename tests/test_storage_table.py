"""`rtscope storage-table`: study 4's table from stored runs (fixtures and short native runs). A real comparison
of environments (root): tests/test_storage_table_root.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rtscope.analysis.storage import column_label, column_rank, environment_order, merge_histograms
from rtscope.analysis.storage import human_time
from rtscope.paths import repo_file
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.store import Run, Store

pytestmark = pytest.mark.fast

FIXTURES = repo_file("tests", "fixtures", "fio")



def fake_run(settings: dict, runtime: str = "native") -> Run:
    return Run(1, settings=settings, runtime=runtime)


def test_column_labels():
    assert column_label(fake_run({"mlock": False})) == "local"
    assert column_label(fake_run({"env": "jail", "mlock": False})) == "jail"
    assert column_label(fake_run({"env": "local"}, "fio")) == "local (fio)"
    assert column_label(fake_run({"env": "ns", "cpu": 1, "mlock": False})) == "ns [cpu=1]"


def test_one_column_order_for_every_block(db):
    """Each environment beside its fio column, in the order the experiment's spec defines them, whatever order
    the runs were measured in (study 4's spec: local, a container, a VM)."""
    store = Store(db)
    exp = store.add_experiment({"name": "storage", "spec": {"parsed": {"environments": {"pod": {}},
                                                                      "targets": {"vm": {}}}},
                                "spec_path": "storage.toml", "seed": 1, "plan": [], "status": "done",
                                "created_at": "2026-01-01T00:00:00Z"})
    order = environment_order(store, [Run(1, experiment_id=exp)])
    assert order == ["local", "pod", "vm"]
    want = ["local", "local (fio)", "pod", "pod (fio)", "vm", "vm (fio)"]
    for measured in (["local (fio)", "local", "pod", "vm", "vm (fio)", "pod (fio)"],
                     ["local (fio)", "local", "vm (fio)", "pod (fio)", "vm", "pod"]):
        assert sorted(measured, key=lambda c: column_rank(c, order)) == want


def test_human_time_is_the_studys_style():
    assert [human_time(v) for v in (2_350_000, 13_580, 36_050_000_000, 512, None)] == \
        ["2.35 ms", "13.58 µs", "36.05 s", "512 ns", "-"]


def test_merge_histograms():
    a = {"bucket_width": 100, "min_value": 0, "counts": [1, 2], "overflow": 1, "n": 4, "min": 5, "max": 900, "sum": 1200}
    b = {"bucket_width": 100, "min_value": 0, "counts": [0, 1, 3], "overflow": 0, "n": 4, "min": 150, "max": 290,
         "sum": 900}
    m = merge_histograms([a, b])
    assert m["counts"] == [1, 3, 3] and m["n"] == 8 and m["overflow"] == 1 and (m["min"], m["max"]) == (5, 900)
    assert m["sum"] == 2100
    assert merge_histograms([a, {**b, "bucket_width": 50}]) is None


def run_storage(store, variant, env, target, runtime="native", **params):
    p = {"size": "16K", "repetitions": 20, "dir": target, **params}
    return execute(build_request("storage", variant, runtime, p, {"env": env}), store)


def test_table_from_native_and_imported_fio_runs(cli, db, tmp_path, rtprobe):
    store = Store(db)
    ids = [run_storage(store, v, "local", str(tmp_path)) for v in ("write_sync", "write", "read")]
    assert cli("import", "fio", FIXTURES / "write_sync.json", "--db", db).code == 0
    r = cli("storage-table", "--db", db)
    assert r.code == 0, r.err
    assert "16 KiB file, 4 KiB blocks" in r.out and "mean time per pass" in r.out
    for row in ("write(sync)", "write", "read"):
        assert row in r.out
    assert "local (fio)" in r.out
    r = cli("storage-table", *map(str, ids), "--db", db, "--json")
    assert r.code == 0, r.err
    [table] = json.loads(r.out)
    assert table["columns"] == ["local"] and table["params"]["size"] == 16384
    cells = {c["variant"]: c for c in table["cells"]}
    for variant, run_id in zip(("write_sync", "write", "read"), ids):
        samples = store.primary_samples(store.get_run(run_id))
        assert cells[variant]["runs"] == [run_id] and cells[variant]["passes"] == 20
        assert cells[variant]["pass_mean_ns"] == pytest.approx(float(np.mean(samples)))
        assert cells[variant]["block_p50_ns"] <= cells[variant]["block_p99_ns"]
        assert cells[variant]["bytes_per_s"] == pytest.approx(16384 / (cells[variant]["pass_mean_ns"] * 1e-9))


def test_fio_pass_mean_needs_enough_runtime(cli, db):
    # The fixture's jobs ran for a few ms: fio's whole-ms runtime would give a mean that is mostly rounding.
    assert cli("import", "fio", FIXTURES / "write_sync.json", "--db", db).code == 0
    [table] = json.loads(cli("storage-table", "--db", db, "--json").out)
    [cell] = table["cells"]
    assert cell["pass_mean_ns"] is None and cell["passes"] == 3 and cell["block_p99_ns"] > 0


def test_bad_selections(cli, db, make_samplefile):
    r = cli("storage-table", "--db", db)
    assert r.code == 2 and "no storage runs" in r.err
    assert cli("import", "rts", make_samplefile([1, 2, 3]), "--db", db).code == 0
    r = cli("storage-table", "1", "--db", db)
    assert r.code == 2 and "run 1 is a exec run, not storage" in r.err
    r = cli("storage-table", "7", "--db", db)
    assert r.code == 2 and "no run 7" in r.err
    r = cli("storage-table", "1", "--experiment", "1", "--db", db)
    assert r.code == 2 and "either --experiment or run ids" in r.err
    r = cli("storage-table", "--experiment", "nope", "--db", db)
    assert r.code == 2 and "no experiment 'nope'" in r.err
