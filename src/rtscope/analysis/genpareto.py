"""scipy.stats' generalised Pareto (location 0) and its Cramér–von Mises test, computed as scipy computes them
but without importing scipy.

Importing scipy.stats costs about 0.4 s of CPU (its distributions' docstrings are parsed at import), as
much as every tail fit of a 100-run report together; a fit through genpareto.fit pays a millisecond of
argument checks per likelihood evaluation on top. These functions make the same floating-point operations
in the same order (the same penalty outside the support, optimize.fmin from the same start:
analysis.neldermead), with analysis.special's functions for scipy.special's (numpy's log1p, expm1 and exp
where scipy calls the C library's, K_ν by the trapezoid rule). On the cases tests/test_tail.py checks, isf,
sf and cdf agree with scipy's within 2e-15 relative, the fit within 1e-12 (there bit for bit), the
Cramér–von Mises statistic within 1e-14 and its p-value within 1e-13 absolute.

- isf, sf, cdf: genpareto.isf/sf/cdf(x, c, scale=s) (`-boxcox(q, -c)`, `inv_boxcox(-x, -c)`,
  `-inv_boxcox1p(-x, -c)` on x/s, with scipy's values at and beyond the support's ends);
- fit: genpareto.fit(data, c0, floc=0, scale=s0): Nelder–Mead on scipy's penalised negative log-likelihood;
- cramervonmises: stats.cramervonmises(x, genpareto(c, scale=s).cdf), statistic and p-value (the
  Csörgő–Faraway approximation of the statistic's distribution at n samples, as scipy evaluates it).
"""

from __future__ import annotations

import math

import numpy as np

_LOGXMAX = float(np.log(np.finfo(float).max))    # scipy's penalty per sample outside the support: 100 × this


def _upper(c: np.ndarray) -> np.ndarray:
    """The support's upper end of the standard distribution: −1/c for c < 0, else inf."""
    return np.where(c < 0, -1.0 / np.where(c < 0, c, -1.0), np.inf)


def isf(q, c, scale=1.0):
    """genpareto.isf(q, c, scale=scale): the value exceeded with probability q (nan for q outside [0, 1] or
    scale ≤ 0). Arrays broadcast; a scalar in, a numpy scalar out."""
    from .special import boxcox
    q, c, s = np.broadcast_arrays(np.asarray(q, float), np.asarray(c, float), np.asarray(scale, float))
    out = np.full(q.shape, np.nan)
    ok = np.isfinite(c) & (s > 0)
    mid = ok & (q > 0) & (q < 1)
    out[mid] = -boxcox(q[mid], -c[mid]) * s[mid] + 0
    out[ok & (q == 1)] = 0.0
    top = ok & (q == 0)
    out[top] = _upper(c[top]) * s[top] + 0
    return out[()] if out.ndim == 0 else out


def _standard(x, c, scale, inside_value, below: float, beyond: float):
    """A distribution function of genpareto at x/scale as scipy's rv_continuous evaluates it: `inside_value`
    strictly inside the support, `below` at or below 0, `beyond` at or above the upper end."""
    x, c, s = np.broadcast_arrays(np.asarray(x, float), np.asarray(c, float), np.asarray(scale, float))
    z = x / s
    ok = np.isfinite(c) & (s > 0) & ~np.isnan(z)
    b = _upper(c)
    out = np.where(ok, 0.0, np.nan)
    out[ok & (z <= 0)] = below
    out[ok & (z >= b)] = beyond
    mid = ok & (z > 0) & (z < b)
    out[mid] = inside_value(z[mid], c[mid])
    return out[()] if out.ndim == 0 else out


def sf(x, c, scale=1.0):
    """genpareto.sf(x, c, scale=scale)."""
    from .special import inv_boxcox
    return _standard(x, c, scale, lambda z, c: inv_boxcox(-z, -c), 1.0, 0.0)


def cdf(x, c, scale=1.0):
    """genpareto.cdf(x, c, scale=scale)."""
    from .special import inv_boxcox1p
    return _standard(x, c, scale, lambda z, c: -inv_boxcox1p(-z, -c), 0.0, 1.0)


def penalized_nll(theta: np.ndarray, data: np.ndarray) -> float:
    """scipy's genpareto._penalized_nnlf at (shape, scale) with location 0: the negative log-likelihood of
    the samples inside the support, plus 100·log(float max) per sample outside it (inf: no distribution)."""
    from .special import xlog1py
    c, s = theta[0], theta[1]
    if not np.isfinite(c) or s <= 0:
        return math.inf
    x = (data - 0) / s
    n_log_scale = len(x) * np.log(s)
    inside = (0 <= x) & (x <= (-1.0 / c if c < 0 else np.inf))
    n_bad = np.count_nonzero(~inside)
    if n_bad > 0:
        x = x[inside]
    logpdf = -xlog1py(c + 1.0, c * x) / c if c != 0 else -x
    finite = np.isfinite(logpdf)
    n_bad += finite.size - np.count_nonzero(finite)
    return -(0 + np.sum(logpdf[finite])) + n_bad * _LOGXMAX * 100 + n_log_scale


def fit(data: np.ndarray, c0: float, s0: float) -> tuple[float, float]:
    """genpareto.fit(data, c0, floc=0, scale=s0): (shape, scale), the maximum of the likelihood that
    optimize.fmin finds from (c0, s0)."""
    from .neldermead import fmin
    data = np.asarray(data, float).ravel()
    if not np.isfinite(data).all():
        raise ValueError("The data contains non-finite values.")
    c, s = fmin(penalized_nll, [c0, s0], args=(data,))
    return float(c), float(s)


def cramervonmises(x: np.ndarray, c: float, scale: float) -> tuple[float, float]:
    """stats.cramervonmises(x, genpareto(c, scale=scale).cdf): (statistic, p-value)."""
    n = np.asarray(len(x), dtype=float)
    values = np.sort(np.asarray(x, float), axis=-1)
    u = (2 * np.arange(1, n + 1, dtype=n.dtype) - 1) / (2 * n)
    w = 1 / (12 * n) + np.sum((u - cdf(values, c, scale)) ** 2, axis=-1)
    return float(w), float(np.clip(1. - _cdf_cvm(w, n), 0., None))


# The distribution of the statistic (scipy.stats._hypotests' _cdf_cvm, _cdf_cvm_inf and _psi1_mod, for one
# statistic): Csörgő, S. and Faraway, J. (1996), equations 1.2, 1.8 and 1.10, each series summed until its
# term is below 1e-7.

def _cdf_cvm_inf(x: np.ndarray) -> np.ndarray:
    from .special import gammaln, kv
    tot, k = np.zeros_like(x), 0
    while True:
        u = math.exp(gammaln(k + 0.5) - gammaln(k + 1)) / (np.pi ** 1.5 * np.sqrt(x))
        y = 4 * k + 1
        q = y ** 2 / (16 * x)
        z = u * math.sqrt(y) * np.exp(-q) * np.asarray(kv(0.25, np.asarray(q)), dtype=u.dtype)
        tot = tot + z
        if not np.abs(z) >= 1e-7:
            return tot
        k += 1


def _psi1_mod(x: np.ndarray) -> np.ndarray:
    from .special import gamma, kv

    def ed2(y):
        z = y ** 2 / 4
        return np.exp(-z) * (y / 2) ** (3 / 2) * np.asarray(kv(1 / 4, z) + kv(3 / 4, z)) / math.sqrt(np.pi)

    def ed3(y):
        z = y ** 2 / 4
        return np.exp(-z) / math.sqrt(np.pi) * (y / 2) ** (5 / 2) * np.asarray(2 * kv(1 / 4, z) + 3 * kv(3 / 4, z)
                                                                             - kv(5 / 4, z))

    def a_k(k, x):
        m = 2 * k + 1
        sx = 2 * np.sqrt(x)
        y1, y2 = x ** (3 / 4), x ** (5 / 4)
        g1, g3 = float(gamma(k + 1 / 2)), float(gamma(k + 3 / 2))
        e1 = m * g1 * ed2((4 * k + 3) / sx) / (9 * y1)
        e2 = g1 * ed3((4 * k + 1) / sx) / (72 * y2)
        e3 = 2 * (m + 2) * g3 * ed3((4 * k + 5) / sx) / (12 * y2)
        e4 = 7 * m * g1 * ed2((4 * k + 1) / sx) / (144 * y1)
        e5 = 7 * m * g1 * ed2((4 * k + 5) / sx) / (144 * y1)
        return e1 + e2 + e3 + e4 + e5

    tot, k = np.zeros_like(x), 0
    while True:
        z = -a_k(k, x) / (np.pi * float(gamma(k + 1)))
        tot = tot + z
        if not np.abs(z) >= 1e-7:
            return tot
        k += 1


def _cdf_cvm(w: np.ndarray, n: np.ndarray) -> float:
    """The statistic's distribution function at w for n samples (0 below its support 1/(12n), 1 from n/3)."""
    if w >= n / 3:
        return 1.0
    if not 1. / (12 * n) < w:
        return 0.0
    x = np.atleast_1d(w)
    return float((_cdf_cvm_inf(x) * (1 + 1. / (12 * n)) + _psi1_mod(x) / n)[0])
