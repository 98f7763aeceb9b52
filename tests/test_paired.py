"""Interleaved runs on the real BEAM: arms in one VM stored as runs, compared pair by pair; `reproduce
--until-decided` interrupted and resumed. The statistics on data of known truth: tests/test_paired_units.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from rtscope.store import Store
from spec_texts import beam_beside_native

pytestmark = pytest.mark.real

SPEC = beam_beside_native('design = "auto"\nrepetitions = 2')

CLAIM = """
[[claim]]
id = "same-sum"
text = "fullsweep_after does not change sum's median much"
metric = "median"
where = { runtime = "beam", variant = "sum" }
baseline = { fullsweep_after = 65535 }
cell = { fullsweep_after = 0 }
expect = "same"
margin = 0.5
"""


@pytest.fixture(autouse=True)
def need_beam():
    from rtscope.runtimes import RUNTIMES
    why = RUNTIMES["beam"].unavailable()
    if why:
        pytest.skip(why)


def test_arms_of_one_vm_are_stored_as_runs_and_compared_in_pairs(cli, db, tmp_path):
    (tmp_path / "paired.toml").write_text(SPEC)
    r = cli("run", tmp_path / "paired.toml", "--db", db)
    assert r.code == 0, r.err
    runs = Store(db).runs()
    beam = [run for run in runs if run.runtime == "beam"]
    native = [run for run in runs if run.runtime == "native"]
    assert len(beam) == 4 and len(native) == 2 and all("pairing" not in run.header for run in native)
    ids = {run.header["pairing"]["id"] for run in beam}
    assert len(ids) == 2                                    # two interleaved runs of two arms each
    for run in beam:
        p = run.header["pairing"]
        assert p["design"] == "interleaved" and p["arms"] == 2 and p["block_samples"] == 5
        assert len(p["blocks"]) == 12 and run.n_samples == 60
        assert run.header["process"]["fullsweep_after"] == run.settings["fullsweep_after"]   # its own process
    # each round holds each arm once: the two arms' blocks of one run interleave
    for pid in ids:
        a, b = (run.header["pairing"]["blocks"] for run in beam if run.header["pairing"]["id"] == pid)
        assert sorted(a + b) == list(range(24)) and all({a[k], b[k]} <= {2 * k, 2 * k + 1} for k in range(12))
    r = cli("show", beam[0].id, "--db", db)
    assert f"design:   interleaved, arm {beam[0].header['pairing']['arm'] + 1} of 2 of run " in r.out
    assert "12 blocks of 5 samples" in r.out
    r = cli("export", beam[0].id, "--db", db)             # each sample says its block
    rows = [line.split(",") for line in r.out.splitlines()]
    assert rows[0][-1] == "block" and len(rows) == 61
    blocks = beam[0].header["pairing"]["blocks"]
    assert [int(row[-1]) for row in rows[1:]] == [b for b in blocks for _ in range(5)]
    r = cli("compare", "--db", db, "--runtime", "beam", "--baseline", "fullsweep_after=65535", "--json")
    assert r.code == 0, r.err
    (k,) = json.loads(r.out)["comparisons"]
    assert k["design"] == "interleaved"
    mean = next(row for row in k["rows"] if row["metric"] == "mean")
    assert mean["test"] == "paired t-test on window-pair differences"
    assert mean["paired"]["window_pairs"] == 24 and mean["paired"]["block_samples"] == 5 and mean["paired"]["paired_runs"] == 2
    low, high = mean["ci95_difference"]
    assert low <= mean["difference"] <= high or mean["verdict"] != "no significant difference"
    r = cli("compare", "--db", db, "--runtime", "beam", "--baseline", "fullsweep_after=65535")
    assert "design interleaved" in r.out + r.err and "pairing removed" in r.out + r.err


def test_until_decided_interrupted_resumes(tmp_path):
    """SIGINT during `reproduce --until-decided`: the experiment is marked interrupted with every finished run
    kept; `--resume` continues it (no run made twice) until the claim is decided or the budget is spent."""
    spec = tmp_path / "paired.toml"
    spec.write_text(SPEC + CLAIM)
    db = str(tmp_path / "s.db")
    env = {**os.environ, "COLUMNS": "80"}
    cmd = [sys.executable, "-m", "rtscope", "reproduce", str(spec), "--until-decided", "--budget", "3m",
           "--db", db]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:        # round 1 stored: the stop lands in round 2, before look 1
        time.sleep(0.05)
        if os.path.exists(db) and len(Store(db).runs()) >= 2:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "--until-decided --resume" in err
    before = Store(db).runs()
    assert before
    r = subprocess.run([*cmd, "--resume", "--json"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    (claim,) = doc["claims"]
    assert claim["design"] == "interleaved" and claim["verdict"] in ("holds", "contradicted", "undecided")
    seq = doc["until_decided"]
    assert seq["rounds"] >= 2 and seq["looks"] >= 1 and seq["experiment"] == before[0].experiment_id
    after = Store(db).runs()
    keys = [(run.experiment_id, run.plan_index) for run in after]
    assert len(keys) == len(set(keys))                     # no plan index stored twice
    assert {run.id for run in before} <= {run.id for run in after}
    assert claim["interval"]["level"] > 0.95               # a look's level: α spent over the looks, wider
    record = Store(db).experiment_row(seq["experiment"])["spec"]["until_decided"]   # what a resume continues
    assert record["budget_s"] == 180 and 0 < record["spent"] <= 0.05 + 1e-12 and record["looks"] == seq["looks"]
    assert record["elapsed_s"] >= seq["wall_s"] - 0.5 and "s of it used before" in r.stderr
