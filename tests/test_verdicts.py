"""Verdicts with the run as the unit: A/A false-positive rate under per-run offsets, power kept without them,
interval coverage, the agreement of direction, interval and verdict (an A/A on real BEAM runs:
tests/test_verdicts_beam.py).

The simulations draw latency-like samples (gamma, skewed) with a known per-run random offset; each is a
statistical claim of docs/analysis.md tested like code (bench/verdicts.py gives the full figures, with the
pooled tests of before side by side)."""

import math

import numpy as np
import pytest

from rtscope.analysis.compare import Baseline, cells_from_samples, compare, welch
from rtscope.analysis.variance import components

pytestmark = pytest.mark.fast

ALPHA = 0.05


def runs_of(rng, runs, n, mean=100_000.0, shape=4.0, run_sd=0.0, effect=0.0):
    """`runs` arrays of n gamma samples; each run scaled by its own random factor 1 + N(0, run_sd)."""
    out = []
    for _ in range(runs):
        factor = (1.0 + effect) * (1.0 + rng.normal(0.0, run_sd))
        out.append(rng.gamma(shape, mean / shape, n) * factor)
    return out


def one(rng, *, runs=5, n=400, run_sd=0.0, effect=0.0, alpha=ALPHA):
    cells = cells_from_samples({"a": runs_of(rng, runs, n, run_sd=run_sd, effect=effect),
                                "b": runs_of(rng, runs, n, run_sd=run_sd)})
    (k,) = compare(cells, Baseline.parse(["label=b"]), alpha=alpha).comparisons
    return k


def binomial_margin(p, trials):
    return 2.0 * math.sqrt(p * (1 - p) / trials)


def test_aa_false_positive_rate_with_run_offsets():
    """5 vs 5 runs whose offsets have SD 8 % (this machine's between-run variation): the fraction of A/A
    comparisons with any `better`/`worse` stays within alpha + its binomial margin. Pooling samples as
    replicates (Welch on all samples of the mean alone) calls most of them."""
    rng = np.random.default_rng(11)
    trials, any_verdict, pooled_mean = 300, 0, 0
    for _ in range(trials):
        k = one(rng, run_sd=0.08)
        any_verdict += any(r.verdict in ("better", "worse") for r in k.rows)
        pooled_mean += welch(k.cell.samples, k.base.samples)[0] <= ALPHA
    assert any_verdict / trials <= ALPHA + binomial_margin(ALPHA, trials)
    assert pooled_mean / trials > 0.5


def test_power_kept_without_run_offsets():
    """No between-run variation: a 6 % change of the mean (3.8 standard errors of 5 × 400 pooled samples) is
    called about as often as a pooled Welch test calls it (only the t distribution's 8 degrees of freedom
    differ)."""
    rng = np.random.default_rng(12)
    trials, run_level, pooled = 200, 0, 0
    for _ in range(trials):
        k = one(rng, effect=0.06)
        p = k.row("mean").p
        run_level += p is not None and p <= ALPHA
        pooled += welch(k.cell.samples, k.base.samples)[0] <= ALPHA
    assert pooled / trials > 0.9
    assert run_level / trials > 0.8 and run_level >= 0.85 * pooled


def test_interval_coverage_of_known_difference():
    """The 95 % interval of the mean difference covers the true one (10 %) in about 95 % of experiments with
    per-run offsets of SD 5 %."""
    rng = np.random.default_rng(13)
    trials, covered = 300, 0
    truth = 0.10 * 100_000.0
    for _ in range(trials):
        lo, hi = one(rng, run_sd=0.05, effect=0.10).row("mean").ci
        covered += lo <= truth <= hi
    assert abs(covered / trials - 0.95) <= binomial_margin(0.95, trials) + 0.01


def test_variance_components_recover_known_parts():
    """σ_b 4 % of the mean, σ_w from the gamma's SD: the estimates land near both, pooled over 40 runs."""
    rng = np.random.default_rng(14)
    (cell,) = cells_from_samples({"a": runs_of(rng, 40, 2000, run_sd=0.04)})
    c = components(cell, "mean")
    assert c.runs == 40 and c.samples_per_run == 2000
    assert math.sqrt(c.between_var) == pytest.approx(4000.0, rel=0.35)
    assert math.sqrt(c.within_var) == pytest.approx(50_000 / math.sqrt(2000), rel=0.1)
    for metric in ("median", "p99", "stdev"):
        assert components(cell, metric).within_var > 0
    assert components(cell, "max").within_var is None and components(cell, "max").between_var > 0
    (single,) = cells_from_samples({"a": runs_of(rng, 1, 100)})
    assert components(single, "mean").between_var is None


@pytest.mark.parametrize("seed", range(40))
def test_direction_interval_and_verdict_never_disagree(seed):
    """Random runs, counts, spreads, shifts and alphas: a `better` sits beside a lower value whose interval
    lies below 0, a `worse` beside a higher one above 0, the interval holds the difference shown, and an
    untested row has no p-value."""
    rng = np.random.default_rng(seed)
    groups = {}
    for name in ("base", "x", "y"):
        runs = int(rng.integers(1, 7))
        shift = rng.choice([0.0, 0.02, -0.3, 0.5])
        groups[name] = [rng.lognormal(10 + shift, float(rng.uniform(0.05, 1.0)), int(rng.integers(2, 300)))
                        * (1 + rng.normal(0, 0.1)) for _ in range(runs)]
    alpha = float(rng.choice([0.01, 0.05, 0.2]))
    cs = compare(cells_from_samples(groups), Baseline.parse(["label=base"]), alpha=alpha)
    for k in cs.comparisons:
        for r in k.rows:
            if r.verdict == "better":
                assert r.value < r.baseline and r.diff < 0 and r.ci[1] < 0 and r.p_holm <= alpha
            elif r.verdict == "worse":
                assert r.value > r.baseline and r.diff > 0 and r.ci[0] > 0 and r.p_holm <= alpha
            elif r.verdict == "not tested":
                assert r.p is None and r.reason
            if r.ci is not None:
                assert r.ci[0] <= r.diff <= r.ci[1]
            if r.ratio is not None and r.verdict in ("better", "worse"):
                assert (r.ratio < 1) == (r.verdict == "better")
