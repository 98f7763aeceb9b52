"""Interleaved runs of the native probe: a spec's exec cells that differ only in n, in design auto, measured as
the arms of one `rtprobe interleave` per repetition, stored as runs with their pairing and compared pair by pair.
The argv and the grouping: tests/test_native_interleave_units.py; the probe: probes/tests/test_interleave.sh."""

from __future__ import annotations

import json

import pytest

from rtscope.store import Store

pytestmark = pytest.mark.real

SPEC = """name = "native-paired"
design = "auto"
repetitions = 2
[[workload]]
name = "exec"
variants = "sum"
runtime = "native"
[workload.params]
iterations = 60
pause_ms = 0
n = [4000, 4120]
"""


def test_native_arms_are_stored_as_runs_and_compared_in_pairs(cli, db, tmp_path):
    (tmp_path / "paired.toml").write_text(SPEC)
    r = cli("run", tmp_path / "paired.toml", "--db", db)
    assert r.code == 0, r.err
    assert "design auto: 2 configurations interleaved in blocks of 5 samples" in r.out + r.err
    runs = Store(db).runs()
    assert len(runs) == 4 and all(run.runtime == "native" for run in runs)
    ids = {run.header["pairing"]["id"] for run in runs}
    assert len(ids) == 2                                    # one rtprobe interleave per repetition
    for run in runs:
        p = run.header["pairing"]
        assert p["design"] == "interleaved" and p["arms"] == 2 and p["block_samples"] == 5
        assert len(p["blocks"]) == 12 and run.n_samples == 60
        assert run.params["n"] == run.header["params"]["n"] in (4000, 4120)
    for pid in ids:
        arms = sorted((run for run in runs if run.header["pairing"]["id"] == pid),
                      key=lambda run: run.header["pairing"]["arm"])
        assert [run.params["n"] for run in arms] in ([4000, 4120], [4120, 4000])
        a, b = (run.header["pairing"]["blocks"] for run in arms)
        assert sorted(a + b) == list(range(24)) and all({a[k], b[k]} == {2 * k, 2 * k + 1} for k in range(12))
    r = cli("compare", "--db", db, "--baseline", "n=4000", "--json")
    assert r.code == 0, r.err
    (k,) = json.loads(r.out)["comparisons"]
    assert k["design"] == "interleaved"
    mean = next(row for row in k["rows"] if row["metric"] == "mean")
    assert mean["test"] == "paired t-test on window-pair differences"
    assert mean["paired"]["window_pairs"] == 24 and mean["paired"]["block_samples"] == 5 and mean["paired"]["paired_runs"] == 2
