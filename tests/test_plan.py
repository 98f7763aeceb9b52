"""rtscope plan: the planning math on known numbers, a Monte-Carlo check of its power, the sized spec, and the
command's refusals. A real pilot → plan → sized experiment → compare on the native exec workload:
tests/test_plan_pilot.py."""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from scipy import stats as sps

from rtscope.analysis import plan_sizing
from rtscope.analysis.compare import welch
from rtscope.errors import UsageError

pytestmark = pytest.mark.fast


# --- inputs ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [("5%", 0.05), ("30%", 0.3), ("0.05", 0.05), (" 12.5% ", 0.125), ("1", 1.0)])
def test_detect_accepts_percent_and_fractions(text, value):
    assert plan_sizing.parse_detect(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["abc", "0", "0%", "-5%", "%", "nan", "2000%"])
def test_detect_refuses_what_is_not_a_change(text):
    with pytest.raises(UsageError, match="--detect"):
        plan_sizing.parse_detect(text)


# --- the statistics on known numbers --------------------------------------------------------------------------------

def test_power_is_the_noncentral_t_of_two_groups_of_runs():
    # 10 vs 10 runs, Δ = 1, per-run variance 1: df 18, noncentrality 1/√(2/10)
    t = sps.t.ppf(0.975, 18)
    ncp = 1 / math.sqrt(0.2)
    expected = 1 - sps.nct.cdf(t, 18, ncp) + sps.nct.cdf(-t, 18, ncp)
    assert plan_sizing.power_of(1.0, 1.0, 10, welch=False) == pytest.approx(expected, rel=1e-9)
    # Welch's critical value is at its estimated df (≤ 18): a little less power, most with few runs
    assert expected - 0.02 < plan_sizing.power_of(1.0, 1.0, 10) < expected
    assert plan_sizing.power_of(2.0, 1.0, 3) < plan_sizing.power_of(2.0, 1.0, 3, welch=False) - 0.05
    assert plan_sizing.power_of(0.0, 1.0, 10, welch=False) == pytest.approx(0.05, abs=1e-9)     # no change: α
    assert plan_sizing.power_of(0.0, 1.0, 10) == pytest.approx(0.05, abs=0.005)
    assert plan_sizing.power_of(1.0, 1.0, 100_000) == 1.0                           # beyond nctdtr's range


@pytest.mark.parametrize("effect, runs", [(1.0, 17), (0.8, 26), (0.5, 64)])
def test_runs_needed_match_the_textbook_sample_sizes(effect, runs):
    # Cohen's d 1.0 / 0.8 / 0.5, two-sided α 0.05, power 0.8: 17 / 26 / 64 per group (G*Power, Cohen 1988)
    assert plan_sizing.runs_needed(effect, 1.0, 0.05, 0.8, min_runs=2, welch=False) == runs
    assert plan_sizing.runs_needed(effect, 1.0, 0.05, 0.8, min_runs=2) in (runs, runs + 1)   # Welch
    # the closed form 2v(t_{1−α/2} + t_{power})²/Δ² of the brief agrees within a run
    assert abs(plan_sizing.runs_closed_form(effect, 1.0) - runs) < 1.0


def test_runs_needed_floor_and_limit():
    assert plan_sizing.runs_needed(100.0, 1.0) == plan_sizing.MIN_RUNS            # a huge change: the floor
    assert plan_sizing.runs_needed(1e-6, 1.0, limit=100) is None            # a tiny one: not within the limit
    # the smallest detectable change at r runs is the change that needs r runs
    d = plan_sizing.detectable(1.0, 17)
    assert plan_sizing.runs_needed(d, 1.0, min_runs=2) == 17
    assert plan_sizing.runs_needed(d * 0.97, 1.0, min_runs=2) > 17


def test_optimal_samples_is_kalibera_and_jones():
    # n* = √(c_w·T_start / (σ²_b·t_sample)) = √(100 · 1 s / (1 · 1 ms)) = √100000
    assert plan_sizing.optimal_samples(1.0, 100.0, 1e9, 1e6) == pytest.approx(math.sqrt(1e5))
    assert plan_sizing.optimal_samples(0.0, 100.0, 1e9, 1e6) == math.inf    # no between-run variance: one long run each
    assert plan_sizing.optimal_samples(1.0, 0.0, 1e9, 1e6) == 0.0           # no within-run variance: shortest runs


def test_upper_limit_of_the_between_run_variance():
    # per-run values' variance 2.0 over 8 runs (7 df), within-run part 0.5: the 80 % upper limit of the total is
    # 2.0 · 7 / χ²_{0.2; 7}, less the within part
    expected = 2.0 * 7 / sps.chi2.ppf(0.2, 7) - 0.5
    assert plan_sizing.upper_between(2.0, 0.5, 8, 0.8) == pytest.approx(expected)
    assert plan_sizing.upper_between(2.0, 0.5, 8, 0.8) > 1.5                  # above the estimate 2.0 − 0.5
    assert plan_sizing.upper_between(0.1, 0.5, 8, 0.8) == 0.0                  # never below 0


def test_cost_by_regression_when_runs_differ_in_samples():
    ns = [100, 200, 400, 800]
    probe = [5e6 + n * 1e5 for n in ns]                       # 5 ms start-up in the probe + 0.1 ms a sample
    cost = plan_sizing.estimate_cost(ns, probe, gaps_ns=[40e6, 50e6, 60e6])
    assert cost.sample_ns == pytest.approx(1e5)
    assert cost.start_ns == pytest.approx(5e6 + 50e6)         # + the median gap between runs
    assert "regression" in cost.how
    assert cost.run_ns(1000) == pytest.approx(55e6 + 1e8)


def test_cost_split_by_the_workloads_sample_time_when_runs_are_alike():
    cost = plan_sizing.estimate_cost([200, 200, 200], [70e6, 72e6, 74e6], [], per_sample_ns=0.3e6)
    assert cost.sample_ns == 0.3e6
    assert cost.start_ns == pytest.approx(72e6 - 60e6)
    assert "no gap" in cost.how
    plain = plan_sizing.estimate_cost([200, 200], [60e6, 60e6])
    assert (plain.start_ns, plain.sample_ns) == (0.0, 0.3e6)


def test_plan_one_takes_n_star_then_the_runs_then_trims_n():
    cost = plan_sizing.Cost(start_ns=1e9, sample_ns=1e6)
    # value 100, σ²_b = 4, c_w = within_var × pilot n = 1 × 100 = 100; detect 10 % → Δ = 10
    p = plan_sizing.plan_one("mean", 100.0, 4.0, 1.0, 5, 100, cost, 0.10)
    assert p.optimal_samples == pytest.approx(math.sqrt(100 * 1e9 / (4 * 1e6)))      # 158.1
    assert p.samples <= 158
    var_run = plan_sizing.run_variance(4.0, 100.0, p.samples)
    assert p.power >= 0.8 and p.power == pytest.approx(plan_sizing.power_of(10.0, var_run, p.runs))
    assert plan_sizing.power_of(10.0, var_run, p.runs - 1) < 0.8 or p.runs == plan_sizing.MIN_RUNS
    # trimmed: one sample fewer would miss the power at these runs
    assert plan_sizing.power_of(10.0, plan_sizing.run_variance(4.0, 100.0, p.samples - 1), p.runs) < 0.8
    assert p.wall_ns == pytest.approx(p.runs * (1e9 + p.samples * 1e6))


def test_plan_one_without_between_run_variance_makes_few_long_runs():
    p = plan_sizing.plan_one("mean", 100.0, 0.0, 4.0, 5, 1000, plan_sizing.Cost(1e9, 1e6), 0.05)
    assert p.runs == plan_sizing.MIN_RUNS
    # c_w = 4000; 3 runs need 2·(4000/n)/3 ≤ (5/q)²: a few hundred samples, trimmed from "infinitely many"
    assert 100 < p.samples < 2000


def test_plan_one_says_when_between_run_variance_makes_it_impossible():
    # σ_b = 20 % of the value: 1 % is out of reach in 100 runs, whatever n
    p = plan_sizing.plan_one("mean", 100.0, 400.0, 1.0, 5, 100, plan_sizing.Cost(1e9, 1e6), 0.01)
    assert not p.feasible and p.runs is None and p.wall_ns is None
    variance = plan_sizing.run_variance(400, 100, p.samples)
    assert p.smallest_detectable == pytest.approx(plan_sizing.detectable(variance, 100) / 100)
    assert any("between-run variance alone" in n for n in p.notes)


def test_plan_of_a_maximum_keeps_the_pilots_samples():
    p = plan_sizing.plan_one("max", 100.0, 25.0, None, 5, 300, plan_sizing.Cost(1e9, 1e6), 0.2, total_var=30.0)
    assert p.samples == 300 and p.optimal_samples is None and p.c_w is None
    assert p.runs == plan_sizing.runs_needed(20.0, 30.0)


def test_plan_matrix_gives_every_configuration_its_power_at_one_runs_times_samples():
    cost = plan_sizing.Cost(0.5e9, 1e6)
    demands = [plan_sizing.Demand("a", "mean", 100.0, 4.0, 1.0, 5.0, 5, 100, cost),
               plan_sizing.Demand("b", "mean", 100.0, 16.0, 1.0, 17.0, 5, 100, cost, cells=2)]
    n, r, plans = plan_sizing.plan_matrix(demands, 0.1)
    assert r == max(plan_sizing.plan_one("mean", 100.0, d.between_var, 1.0, 5, 100, cost, 0.1, samples=n).runs
                    for d in demands)
    assert all(p.runs == r and p.samples == n and p.power >= 0.8 for p in plans.values())


# --- Monte-Carlo: the plan's runs × samples give the power it predicts ----------------------------------------------

def _simulated_power(rng, value, sd_b, sd_w, change, runs, samples, experiments=400):
    """Fraction of `experiments` simulated comparisons in which Welch's t-test on per-run means (α 0.05) calls a
    change of `change` × value: every run draws its own offset (SD sd_b), then `samples` samples (SD sd_w)."""
    hits = 0
    for _ in range(experiments):
        means = []
        for shift in (0.0, change * value):
            offsets = rng.normal(0.0, sd_b, runs)
            x = value + shift + offsets[:, None] + rng.normal(0.0, sd_w, (runs, samples))
            means.append(x.mean(axis=1))
        p, _, _ = welch(means[1], means[0])
        hits += p < 0.05
    return hits / experiments


@pytest.mark.parametrize("sd_b, sd_w, start_s", [(3.0, 40.0, 0.5), (8.0, 30.0, 0.05)])
def test_monte_carlo_power_of_a_plan(sd_b, sd_w, start_s, record_property):
    value, change = 100.0, 0.10
    # the pilot's components as variance.Components gives them: within_var is one pilot run's (n = 200) variance
    pilot_n = 200
    p = plan_sizing.plan_one("mean", value, sd_b ** 2, sd_w ** 2 / pilot_n, 5, pilot_n,
                      plan_sizing.Cost(start_s * 1e9, 1e6), change)
    assert p.feasible
    achieved = _simulated_power(np.random.default_rng(20261126), value, sd_b, sd_w, change, p.runs, p.samples)
    record_property("plan", f"{p.runs} x {p.samples}: predicted {p.power:.3f}, achieved {achieved:.3f}")
    print(f"σ_b {sd_b}, σ_w {sd_w}, start {start_s} s: plan {p.runs} runs × {p.samples} samples, "
          f"predicted power {p.power:.3f}, achieved {achieved:.3f} in 400 simulated experiments")
    # 400 experiments: binomial SE ≈ 0.02, so within 3 SE
    assert p.power >= 0.8
    assert abs(achieved - p.power) < 0.06


# --- the command --------------------------------------------------------------------------------------------------

PILOT = """\
name = "plan-pilot"
repetitions = 10
seed = 7

[[workload]]
name = "exec"
variants = "sum"
runtime = "native"
[workload.params]
n = [20000, 32000]        # sum 1..32000 takes about 60 % longer than sum 1..20000
iterations = 100
pause_ms = 0.2
"""


def test_bad_input_is_refused_with_the_valid_choices(cli, db, tmp_path):
    spec = tmp_path / "pilot.toml"
    spec.write_text(PILOT)
    for args, words in ((("--detect", "abc"), ("--detect", "5%", "0.05")),
                        (("--detect", "0"), ("--detect", "above 0")),
                        (("--detect", "5%", "--metric", "p95"), ("p95", "mean, median, p99, max, stdev")),
                        (("--detect", "5%", "--power", "1.5"), ("--power",)),
                        (("--detect", "5%", "--alpha", "0"), ("--alpha",)),
                        (("--detect", "5%", "--upper", "2"), ("--upper",))):
        r = cli("plan", spec, *args, "--db", db)
        assert r.code == 2, (args, r)
        for w in words:
            assert w in r.err, (args, r.err)
    # no stored runs: the pilot to run first
    r = cli("plan", spec, "--detect", "5%", "--db", db)
    assert r.code == 2
    assert f"rtscope run {spec}" in r.err and "pilot" in r.err


def test_a_pilot_of_one_run_per_configuration_is_refused(cli, db, tmp_path, rtprobe):
    spec = tmp_path / "one.toml"
    spec.write_text(PILOT.replace("repetitions = 10", "repetitions = 1").replace("iterations = 100", "iterations = 20"))
    assert cli("run", spec, "--db", db).code == 0
    r = cli("plan", spec, "--detect", "10%", "--db", db)
    assert r.code == 2
    assert "has 1 run: the between-run variance needs at least 2" in r.err and "repetitions = 3" in r.err


SCALED = """\
name = "scaled"
description = "a spec whose scales set the runs and samples"
repetitions = 2
tags = ["a", "b c"]

[scale.quick]
repetitions = 1
[scale.quick.params]
iterations = 50
[scale.full.params]
iterations = 10000

[[workload]]
name = "exec"
variants = ["sum", "fib"]
runtime = "native"
[workload.params]
pause_ms = [0, 0.5]
[[workload.exclude]]
variant = "fib"
pause_ms = 0.5
[workload.scale.quick]
repetitions = 4

[[workload]]
name = "exec"
variants = "nothing"
[workload.settings]
mlock = true
"""


def test_the_sized_spec_sets_runs_and_samples_at_every_scale(tmp_path):
    from rtscope.experiment import plan_spec
    from rtscope.experiment.spec import parse
    blocks = [plan_spec.BlockPlan(0, "exec", 3, 3, samples=700, runs=12, param="iterations", param_value=700),
              plan_spec.BlockPlan(1, "exec", 1, 0)]
    sp = plan_spec.SpecPlan("scaled.toml", 3, "scaled", "quick", "mean", 0.05, 0.05, 0.8, [], blocks, tests=5)
    text = plan_spec.sized_text(SCALED, sp)
    assert text.startswith("# Sized by `rtscope plan` from experiment 3 (scaled)")
    for scale in ("quick", "full"):
        spec = parse(text, "sized.toml", scale)
        assert spec.name == "scaled-sized"
        first = [c for c in spec.cells if c.block == 0]
        assert len(first) == 3                       # the exclude rule survived
        assert all(c.repetitions == 12 and c.request.params["iterations"] == 700 for c in first)
        # the unplanned block keeps what the spec's scales gave it
        assert [c.repetitions for c in spec.cells if c.block == 1] == [1 if scale == "quick" else 2]
        assert [c.request.params["iterations"] for c in spec.cells if c.block == 1] == \
            [50 if scale == "quick" else 10000]
    raw = tomllib.loads(text)
    assert raw["tags"] == ["a", "b c"] and raw["description"] == "a spec whose scales set the runs and samples"
    assert "repetitions" not in raw["scale"]["quick"] and "iterations" not in raw["scale"]["full"]["params"]
    assert raw["workload"][1]["settings"] == {"mlock": True}


def test_plan_matrix_out_of_reach_keeps_a_sensible_n():
    cost = plan_sizing.Cost(0.5e9, 1e6)
    demands = [plan_sizing.Demand("a", "mean", 100.0, 400.0, 1.0, 401.0, 5, 100, cost),
               plan_sizing.Demand("b", "mean", 100.0, 4.0, 1.0, 5.0, 5, 100, cost)]
    n, r, plans = plan_sizing.plan_matrix(demands, 0.01)
    assert r is None and not plans["a"].feasible
    assert n == max(plan_sizing.plan_one("mean", 100.0, d.between_var, 1.0, 5, 100, cost, 0.01).samples
                    for d in demands)
