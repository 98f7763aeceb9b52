"""The claims' false-positive rate on A/A data and their power, by a small fixed-seed simulation
(bench/claims_aa.py runs the large one whose figures are in docs/analysis.md)."""

from __future__ import annotations

import sys

import pytest

from rtscope.paths import repo_file

sys.path.insert(0, str(repo_file("bench")))
from claims_aa import simulate  # noqa: E402

pytestmark = pytest.mark.fast


def test_aa_false_positives_at_most_alpha_and_power():
    r = simulate(300, runs=5, seed=11)
    slack = 2 * (0.05 * 0.95 / 300) ** 0.5       # two standard errors of a rate of 0.05 over 300 trials
    assert r["aa_lower_holds"] <= 0.05 + slack and r["aa_higher_holds"] <= 0.05 + slack
    assert r["aa_same_contradicted"] <= 0.05 + slack
    assert r["power_lower_holds"] >= 0.4       # 10 % lower, 5 runs a side: 0.57 in the large simulation
    assert r["ab_higher_holds"] == 0.0          # never the wrong direction
