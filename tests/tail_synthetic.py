"""Samples of known tail for the tail analysis' tests and bench/tail.py: a normal body with a spliced tail.

Below u0 (the body's 1 − w quantile) a normal body truncated at u0, with probability w; above it u0 plus a
generalised Pareto excess. The true latency exceeded with probability p (p < w) is then exactly
u0 + genpareto.isf(p / w, shape, scale).
"""

from __future__ import annotations

import numpy as np
from scipy import signal, stats

MU, SD, W, SCALE = 10_000.0, 300.0, 0.05, 400.0
TAILS = {"gpd 0.1": 0.1, "exponential": 0.0, "bounded -0.2": -0.2}


def spliced(n: int, shape: float, rng: np.random.Generator) -> np.ndarray:
    """n samples (ns, rounded to integers like a probe's) with a tail of this generalised Pareto shape."""
    u0 = MU + SD * stats.norm.ppf(1 - W)
    tail = rng.random(n) < W
    body = stats.truncnorm.rvs(-np.inf, (u0 - MU) / SD, loc=MU, scale=SD, size=n, random_state=rng)
    excess = stats.genpareto.rvs(shape, scale=SCALE, size=n, random_state=rng)
    return np.round(np.where(tail, u0 + excess, body))


def true_level(shape: float, p: float) -> float:
    return float(MU + SD * stats.norm.ppf(1 - W) + stats.genpareto.isf(p / W, shape, scale=SCALE))


def ar1(n: int, phi: float, rng: np.random.Generator) -> np.ndarray:
    """A dependent series: x_t = phi x_{t−1} + e_t with the spliced distribution's innovations (ns)."""
    e = spliced(n, 0.1, rng) - MU
    return np.round(MU + signal.lfilter([1.0], [1.0, -phi], e))


def iid_normal(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.round(rng.normal(MU, SD, n))
