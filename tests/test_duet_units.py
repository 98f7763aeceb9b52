"""Design duet on paper: the statistics of simulated duets (a shared drift, a CPU slower than the other, the arms
swapping CPUs between repetitions: the A/A rate, the power, the interval's coverage) and the layout a spec's
cells get (experiment/design.py). Real duets: tests/test_duet.py."""

from __future__ import annotations

import numpy as np
import pytest

from rtscope.analysis.paired import Estimate, paired, welch_estimate
from rtscope.errors import UsageError
from rtscope.experiment import design
from rtscope.experiment.execute import plan
from rtscope.experiment.spec.parse import analyse
from spec_texts import duet_spec

pytestmark = pytest.mark.fast

ALPHA = 0.05


# --- statistics on simulated duets ----------------------------------------------------------------------

def duet_runs(rng, effect: float, runs: int = 4, samples: int = 1000, cpu_gap: float = 0.05,
              between: float = 0.2, drift: float = 0.02, within: float = 0.3) -> list[tuple[np.ndarray, np.ndarray]]:
    """`runs` duets of (cell, baseline): a speed both arms share (a run factor and a random walk per sample),
    CPU 1 `cpu_gap` slower than CPU 0, the arms swapping CPUs every run, the cell `effect` slower."""
    out = []
    for r in range(runs):
        speed = (1 + rng.normal(0, between)) * np.exp(np.cumsum(rng.normal(0, drift, samples)))
        cpus = (r % 2, 1 - r % 2)
        arms = [60_000.0 * (1 + effect) * (1 + cpu_gap * cpus[0]), 60_000.0 * (1 + cpu_gap * cpus[1])]
        out.append(tuple(m * speed * (1 + rng.normal(0, within, samples)).clip(0.2) for m in arms))
    return out


def duet_estimate(runs: list, metric: str = "mean") -> Estimate:
    """The cell's arm ran on CPU r % 2 in run r (duet_runs): the arrangements the estimate balances."""
    return paired(runs, 1, metric, "duet", [r % 2 for r in range(len(runs))]).estimate


def test_duet_aa_rate_at_most_alpha_although_one_cpu_is_faster():
    rng = np.random.default_rng(11)
    for metric in ("mean", "p99"):
        hits = sum(duet_estimate(duet_runs(rng, 0.0), metric).p() <= ALPHA for _ in range(500))
        assert hits / 500 <= ALPHA + 0.025, (metric, hits / 500)


def test_duet_sees_what_runs_apart_cannot():
    """+3 %: the duet calls it in most of 200 trials of 6 runs a side (0.98 measured); Welch on the same runs'
    means, as if they had run apart, almost never (the runs' own speeds differ by 20 %)."""
    rng = np.random.default_rng(12)
    duet = apart = 0
    for _ in range(200):
        runs = duet_runs(rng, 0.03, runs=6)
        duet += duet_estimate(runs).p() <= ALPHA
        apart += welch_estimate(np.log([a.mean() for a, _ in runs]), np.log([b.mean() for _, b in runs])).p() <= ALPHA
    assert duet / 200 >= 0.9 and apart / 200 <= 0.2, (duet, apart)


def test_duet_interval_covers_the_true_ratio():
    rng = np.random.default_rng(13)
    truth = np.log(1.1)
    inside = 0
    for _ in range(400):
        lo, hi = duet_estimate(duet_runs(rng, 0.1)).interval(ALPHA)
        inside += lo <= truth <= hi
    assert inside / 400 >= 0.93, inside / 400


# --- the layout ----------------------------------------------------------------------------------------

def test_duet_pairs_configurations_that_differ_in_their_own_processes_across_blocks():
    extra = ('[[workload]]\nname = "exec"\nvariants = "sum"\nruntime = "beam"\n'
             '[workload.params]\niterations = 200\npause_ms = 0\n[workload.settings]\nvm_flags = "+sbwt none"\n')
    spec = analyse(duet_spec('priority = "high"', extra=extra), "duet.toml")
    lay = design.layout(spec)
    [group] = lay.groups
    assert group.design == "duet" and group.block == 1 and len(group.cells) == 2 and not lay.alone
    assert lay.notes() == ["design duet: 2 configurations side by side (a duet), a CPU each"]
    planned = plan(spec, seed=3)
    assert len(planned) == 4 and {p.design for p in planned} == {"duet"}
    assert [p.repetition for p in planned] == [1, 1, 2, 2] and len({p.pair for p in planned}) == 2


def test_duet_refuses_what_cannot_run_side_by_side():
    with pytest.raises(UsageError, match="cannot run side by side with another: 1 repetition: .* 2 repetitions"):
        design.layout(analyse(duet_spec('vm_flags = ["", "+sbwt none"]', repetitions=1), "d.toml"))
    with pytest.raises(UsageError, match="setting cpu: a duet pins each of its arms"):
        design.layout(analyse(duet_spec('vm_flags = ["", "+sbwt none"]\ncpu = 0'), "d.toml"))
    with pytest.raises(UsageError, match="no other configuration differs from it only in its own process"):
        design.layout(analyse(duet_spec('vm_flags = "+sbwt none"'), "d.toml"))
    text = duet_spec('vm_flags = ["", "+sbwt none"]').replace('variants = "sum"', 'variants = "memory"')
    text = text.replace('name = "exec"', 'name = "tasks"').replace("iterations = 200\npause_ms = 0", "")
    text = text.replace("[workload.settings]", '[workload.settings]\nmodel = "erlang_process"')
    with pytest.raises(UsageError, match="tasks on runtime beam does not wait at a duet's start gate"):
        design.layout(analyse(text, "d.toml"))


def test_auto_interleaves_first_then_pairs_two_side_by_side():
    spec = analyse(duet_spec('vm_flags = ["", "+sbwt none"]\npriority = ["normal", "high"]', "auto"), "d.toml")
    lay = design.layout(spec)
    assert sorted((g.design, len(g.cells)) for g in lay.groups) == [("interleaved", 2), ("interleaved", 2)]
    spec = analyse(duet_spec('vm_flags = ["", "+sbwt none"]', "auto"), "d.toml")
    [group] = design.layout(spec).groups
    assert group.design == "duet"
    spec = analyse(duet_spec('vm_flags = ["", "+sbwt none", "+sbwt long"]', "auto"), "d.toml")
    lay = design.layout(spec)
    assert not lay.groups and len(lay.alone) == 3
    assert any("design auto runs 2 side by side" in n for n in lay.notes())
    # one round of a sequence (--until-decided) pairs them too: its rounds give the arms their turns
    spec = analyse(duet_spec('vm_flags = ["", "+sbwt none"]', "auto", repetitions=1), "d.toml")
    assert not design.layout(spec).groups and design.layout(spec, min_repetitions=1).groups


