"""`rtscope reproduce` of the five shipped studies at quick scale, on this machine: every claim gets a verdict,
and what this machine cannot make (a governor without cpufreq, Xenomai, solo5, Xen, a virtual Raspberry Pi
emulated on an x86_64 host) is `not measurable here` with its reason. Kept cheap: only the configurations the
claims name are run, at the quick scale's one repetition, narrowed with --where where a study is large."""

from __future__ import annotations

import json
import os

import pytest

from rtscope.experiment.spec import load
from rtscope.paths import repo_file

pytestmark = pytest.mark.real

STUDIES = {            # study -> --where that keeps its run cheap
    "nerves-rt": ["variant=fib"],
    "kernels": [],
    "msgq": ["elements=1000"],
    "storage": ["env=local"],
    "tasks": [],
}
VERDICTS = {"holds", "contradicted", "undecided", "not measurable here"}


@pytest.mark.parametrize("study", sorted(STUDIES))
def test_reproduce_a_shipped_study(cli, tmp_path, study):
    db = str(tmp_path / "s.db")
    args = [a for w in STUDIES[study] for a in ("--where", w)]
    r = cli("reproduce", study, "--scale", "quick", "--db", db, "--json", *args)
    assert r.code == 0, r.err
    claims = {c["id"]: c for c in json.loads(r.out)["claims"]}
    assert set(claims) == {c.id for c in load(repo_file("specs", f"{study}.toml")).claims}
    for c in claims.values():
        assert c["verdict"] in VERDICTS, c
        if c["verdict"] in ("undecided", "not measurable here"):
            assert c["reason"], c
    if study == "nerves-rt" and not os.path.exists("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"):
        for cid in ("governor-sum-mean", "governor-sum-max", "governor-sum-stdev", "governor-powersave-same"):
            assert claims[cid]["verdict"] == "not measurable here" and "cpufreq" in claims[cid]["reason"]
        # one interleaved run at quick scale (design auto): its block pairs are the replicates, so even one run a
        # side is tested
        assert claims["priority-fib-max"]["measured"]["runs"] == 1
        assert claims["priority-fib-max"]["design"] == "interleaved" and claims["priority-fib-max"]["p"] is not None
    if study == "kernels":
        for cid in ("xenomai-max-lowest", "xenomai-mean-lowest"):
            assert claims[cid]["verdict"] == "not measurable here" and "Xenomai" in claims[cid]["reason"]
        if os.uname().machine != "aarch64":
            assert claims["rt-max-half"]["verdict"] == "not measurable here"
            assert "TCG" in claims["rt-max-half"]["reason"]
    if study == "storage":
        assert "solo5" in claims["solo5-write-sync-slowest"]["reason"]
        assert claims["xen-write-sync-slower"]["verdict"] == "not measurable here"
        assert "scale full" in claims["qemu-read-1g-slower"]["reason"]
