"""Interleaved runs of the native probe: a spec's exec cells that differ only in n, in design auto, measured as
the arms of one `rtprobe interleave` per repetition, stored as runs with their pairing and compared pair by pair.
The argv and the grouping: tests/test_native_interleave_units.py; the probe: probes/tests/test_interleave.sh."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rtscope.experiment import design
from rtscope.experiment.runner import execute_interleaved
from rtscope.experiment.spec.parse import analyse
from rtscope.store import Store
from rtscope.targets import LocalTarget
from fake_sysfs import CPU, fake_sysfs

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


def test_a_machine_wide_setting_switched_with_the_arms(tmp_path):
    """Arms that differ in the governor (a system setting that is file writes): one rtprobe interleave writes
    each arm's governor files before each of its blocks that follows the other's; the files' own text is
    journalled and put back; each arm records its governor."""
    cpu = fake_sysfs(tmp_path / "sysfs") / CPU
    target = LocalTarget(sysfs_root=str(tmp_path / "sysfs"))
    spec = analyse(SPEC.replace("n = [4000, 4120]", 'n = 4000\n[workload.settings]\n'
                                'governor = ["performance", "powersave"]'), "gov.toml")
    lay = design.layout(spec, "interleaved")
    [group] = lay.groups                                     # the governor does not keep them apart
    store = Store(str(tmp_path / "s.db"))
    reqs = [c.request for c in group.cells]
    ids = execute_interleaved(reqs, store, block=5, target=target, store_kwargs=[{}, {}])
    runs = [store.get_run(i) for i in ids]
    assert [run["settings"]["governor"] for run in runs] == ["performance", "powersave"]
    # an arm that does not set it runs with the files' own text: written before its blocks too
    unset = dataclasses.replace(reqs[1], settings={k: v for k, v in reqs[1].settings.items() if k != "governor"})
    run = store.get_run(execute_interleaved([reqs[0], unset], store, block=5, target=target,
                                            store_kwargs=[{}, {}])[1])
    assert "governor" not in run["settings"] and run["trailer"]["blocks_switched_to"] >= 1
    assert f"--write=1:{cpu}/cpu0/cpufreq/scaling_governor=schedutil" in run["source"]
    order = [run.header["pairing"]["blocks"] for run in runs]
    for run, blocks in zip(runs, order):
        # its files written before its first block and after each of the other arm's blocks
        runs_of_blocks = sum(1 for k in blocks if k == 0 or k - 1 not in blocks)
        assert run["trailer"]["blocks_switched_to"] == runs_of_blocks
        assert any("governor switched with the arms: 2 file(s)" in n for n in run["trailer"]["notes"])
    for c in (0, 1):
        assert (cpu / f"cpu{c}/cpufreq/scaling_governor").read_text().strip() == "schedutil"   # put back
