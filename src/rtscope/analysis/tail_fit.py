"""Extreme-value fits of a tail: peaks over a threshold (scipy's genpareto), block maxima (genextreme).

Threshold rule. Candidates are the upper quantiles in CANDIDATES that leave between MIN_EXCEEDANCES and
MAX_EXCEEDANCES exceedances; from the lowest up, the first one is chosen whose generalised Pareto fit (a)
passes its goodness-of-fit test at GOF_ALPHA and (b) is stable: its shape lies within the 95 % Wald interval
(±1.96 (1+ξ)/√k) of the next candidate's shape. None passing: no model (the tail does not look generalised
Pareto at any candidate threshold).

Interval. A level's 95 % interval is the profile-likelihood interval: the range of the level over the
likelihood-ratio region {(ξ, σ): 2(ℓ̂ − ℓ(ξ, σ)) ≤ χ²₁(0.95) = 3.84}. The region's boundary is found
along RAYS directions from the maximum (in the frame of the parameters' asymptotic covariance), all at once, by
bisection; the level is monotone along the boundary's normal, so its range over the region is its range over
the boundary. The exceedance rate k/n is taken as known (its own error, ≈ 1/√k relative, is small next to the
shape's). How many samples would halve an interval: the same region shrunk by 1/√m (m times the samples at
the same threshold quantile, the likelihood's quadratic approximation), solved for half the width.

Exact samples: the excesses' likelihood and a Cramér–von Mises test (parameters estimated from the same
excesses: its p is conservative, it refuses only a clear misfit). Histogram-only runs: the excesses are
interval-censored by the buckets (scipy's CensoredData), the run's exact maximum uncensored; the test is a
χ² over the tail buckets (merged to ≥ 5 expected each). What is lost: the position within a bucket, so a
threshold can only be a bucket edge and a tail of few buckets gives a wide interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import genpareto
from .neldermead import fmin

CANDIDATES = (0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9998, 0.9999)
MIN_EXCEEDANCES = 100
MAX_EXCEEDANCES = 5000
QUANTISED = 0.02          # a step from this fraction of the mean excess on makes exact samples censored
MIN_GROUPS = 5             # censored excesses: buckets (≥ 5 expected each) a candidate needs to be tested
GOF_ALPHA = 0.05
RAYS = 48
CHI2_95 = 3.841458820694124
GEV_BLOCKS = 200           # about this many blocks; a block holds at least GEV_MIN_BLOCK samples
GEV_MIN_BLOCK = 100


@dataclass
class Excesses:
    """What exceeds a threshold u, as excesses x − u: exact values, or bucket intervals with counts."""

    u: float
    n: int                                   # samples the threshold was taken from
    y: np.ndarray | None = None              # exact excesses
    lo: np.ndarray | None = None             # histogram: interval lower ends of the excesses
    hi: np.ndarray | None = None             # ... upper ends (inf: overflow beyond the last bucket)
    counts: np.ndarray | None = None         # ... and how many samples each holds (the last: the maximum's)
    top: float | None = None                 # histogram: the exact maximum's excess
    resolution: float | None = None          # quantised exact samples: their step (no exact maximum)

    @property
    def censored(self) -> np.ndarray:
        """Histogram: the counts known only by their bucket (the maximum is known exactly)."""
        c = self.counts.copy()
        if self.top is not None:
            c[-1] -= 1
        return c

    @property
    def k(self) -> int:
        return len(self.y) if self.y is not None else int(self.counts.sum())

    @property
    def zeta(self) -> float:
        return self.k / self.n

    def loglik(self, c: np.ndarray, s: np.ndarray) -> np.ndarray:
        """The generalised Pareto log-likelihood at each (shape c, scale s) pair (−inf outside the support)."""
        c, s = np.atleast_1d(np.asarray(c, float)), np.atleast_1d(np.asarray(s, float))
        with np.errstate(all="ignore"):
            if self.y is not None:
                return _loglik_exact(self.y, c, s)
            # a bucket that holds only the exact maximum (its upper end clipped to the maximum: an empty
            # interval) counts nothing censored; 0 × log(0) would make every (shape, scale) impossible
            held = self.censored > 0
            mass = _sf(self.lo[held, None], c, s) - _sf(self.hi[held, None], c, s)
            out = np.sum(self.censored[held, None] * np.log(mass), axis=0)
            if self.top is not None:
                out = out + _loglik_exact(np.array([self.top]), c, s)
        return np.where(np.isnan(out) | (s <= 0), -np.inf, out)


def _sf(x: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    # scipy's genpareto survival function, (1 + ξ x/σ)^(−1/ξ) (ξ → 0: exp(−x/σ); 0 beyond the support's end
    # −σ/ξ when ξ < 0), in numpy: the grouped likelihood calls it hundreds of times per fit, where scipy's
    # argument checks cost a millisecond a call (tests check it against genpareto.sf).
    small = np.abs(c) < 1e-9
    cc = np.where(small, 1.0, c)
    t = np.maximum(1 + cc * x / s, 0.0)
    return np.where(small, np.exp(-x / s), t ** (-1 / cc))


def _loglik_exact(y: np.ndarray, c: np.ndarray, s: np.ndarray) -> np.ndarray:
    # scipy's genpareto density, log f = −log σ − (1 + 1/ξ) log(1 + ξ y/σ) (ξ → 0: −log σ − y/σ),
    # summed over the excesses for many (ξ, σ) at once (tests check it against genpareto.logpdf).
    small = np.abs(c) < 1e-9
    cc = np.where(small, 1.0, c)
    t = np.outer(y, cc / s)
    np.log1p(t, out=t)
    body = np.where(small, -float(np.sum(y)) / s, -(1 + 1 / cc) * t.sum(axis=0))
    out = -len(y) * np.log(s) + body
    return np.where(np.isfinite(out) & (s > 0), out, -np.inf)


@dataclass
class GpdFit:
    ex: Excesses
    shape: float
    scale: float
    gof_test: str
    gof_statistic: float
    gof_p: float
    quantile: float                          # the candidate quantile the threshold is
    region: np.ndarray | None = field(default=None, repr=False)   # boundary points (shape, scale)
    bounded: np.ndarray | None = field(default=None, repr=False)  # per ray: the boundary was found

    @property
    def shape_se(self) -> float:
        return (1 + max(self.shape, -0.45)) / math.sqrt(self.ex.k)

    def level(self, p, c=None, s=None):
        """The value exceeded with probability p per sample (p < k/n)."""
        c = self.shape if c is None else c
        s = self.scale if s is None else s
        return self.ex.u + genpareto.isf(p / self.ex.zeta, c, scale=s)


def excesses_exact(top: np.ndarray, n: int, k: int) -> Excesses:
    """The excesses over the value k samples exceed; `top` is the sorted largest samples (more than k).

    Quantised samples (fewer distinct excesses than half their number, a step r of at least QUANTISED of their
    mean: a clock's or a tool's µs resolution)
    are interval-censored like a histogram: a value v stands for [v, v + r) (truncation, as integer clocks
    and cyclictest's µs do: the conservative reading), the threshold becomes u + r."""
    u = float(top[-k - 1])
    if np.count_nonzero(top > u) < k / 2 and top[0] < u:         # ties at u: the next lower distinct value
        u = float(top[top < u].max())
    y = top[top > u] - u
    values, counts = np.unique(y, return_counts=True)
    r = float(np.min(np.diff(np.unique(top)))) if len(values) > 1 else 0.0
    if len(values) > 1 and len(values) <= len(y) / 2 and r >= QUANTISED * float(np.mean(y)):
        lo = values - r
        return Excesses(u + r, n, lo=lo, hi=lo + r, counts=counts.astype(float), resolution=r)
    return Excesses(u, n, y=y.astype(float))


def excesses_histogram(hist: dict, k: int) -> Excesses | None:
    """The excesses over the highest bucket edge that about k samples exceed (None: no such edge)."""
    counts = np.asarray(hist["counts"], dtype=np.int64)
    width, origin = float(hist["bucket_width"]), float(hist.get("min_value", 0))
    overflow = int(hist.get("overflow", 0))
    n = int(hist.get("n", counts.sum() + overflow))
    above = np.concatenate([np.cumsum(counts[::-1])[::-1][1:], [0]]) + overflow   # exceeding each upper edge
    usable = np.nonzero(above >= MIN_EXCEEDANCES // 2)[0]
    if not len(usable):
        return None
    j = int(usable[np.argmin(np.abs(above[usable] - k))])
    u = origin + width * (j + 1)
    mx = float(hist["max"])
    lo = origin + width * np.arange(j + 1, len(counts)) - u
    hi = np.minimum(lo + width, mx - u)
    c = counts[j + 1:].astype(float)
    if overflow:
        lo, hi, c = np.append(lo, origin + width * len(counts) - u), np.append(hi, mx - u), np.append(c, overflow)
    keep = c > 0
    lo, hi, c = lo[keep], hi[keep], c[keep]
    return Excesses(u, n, lo=lo, hi=hi, counts=c, top=mx - u)


def _start(m: float, v: float) -> tuple[float, float]:
    """Method-of-moments start for the optimiser from the excesses' mean m and variance v (ξ = (1 − m²/v)/2,
    σ = m(1 + m²/v)/2), shape kept in range."""
    r = m * m / v if v > 0 else 1.0
    return float(np.clip(0.5 * (1 - r), -0.4, 0.8)), 0.5 * m * (1 + r)


def fit_gpd(ex: Excesses, quantile: float) -> GpdFit:
    """genpareto's maximum-likelihood fit of the excesses (location 0) and its goodness-of-fit test.

    The excesses are divided by their mean before the fit (the estimate scales with them; scipy's optimiser
    then converges in a third of the steps) and it starts from the method-of-moments estimate. Bucketed
    excesses are fitted on their grouped likelihood (Excesses.loglik: each bucket's count times the log of its
    probability), by the optimiser scipy's fit uses: the same estimate as scipy's fit of interval-censored
    data with a row per sample, in milliseconds instead of a third of a second per candidate threshold."""
    if ex.y is not None:
        unit = float(np.mean(ex.y)) or 1.0
        z = ex.y / unit
        c0, s0 = _start(float(np.mean(z)), float(np.var(z)))
        c, s = genpareto.fit(z, c0, s0)
        s *= unit
        statistic, p = genpareto.cramervonmises(ex.y, c, s)
        return GpdFit(ex, float(c), float(s), "Cramér–von Mises", statistic, p, quantile)
    mids = (ex.lo + np.minimum(ex.hi, np.inf if ex.top is None else ex.top)) / 2
    unit = float(np.average(mids, weights=ex.counts)) or 1.0
    z = mids / unit
    mean_z = float(np.average(z, weights=ex.counts))
    c0, s0 = _start(mean_z, float(np.average((z - mean_z) ** 2, weights=ex.counts)))

    def nll(theta: np.ndarray) -> float:
        value = float(ex.loglik(theta[0], theta[1] * unit)[0])
        return -value if np.isfinite(value) else np.inf

    # The optimiser needs a start inside the support: a negative shape ends the support at σ/|ξ|, which the
    # moments' start may place below the maximum (every simplex point impossible: no fit, and numpy's
    # "invalid value" from the optimiser). The exponential (ξ = 0) reaches every bucket.
    start = next((x for x in ([c0, s0], [0.0, s0]) if np.isfinite(nll(np.array(x)))), None)
    if start is None:
        return GpdFit(ex, float("nan"), float("nan"), "no fit: the buckets' likelihood is zero at every start",
                      float("nan"), 0.0, quantile)
    c, s = fmin(nll, start)                     # scipy.optimize.fmin's steps (analysis.neldermead)
    s *= unit
    stat, p = _chi2_gof(ex, float(c), float(s))
    test = ("χ² over the tail buckets" if ex.resolution is None
            else f"χ² over the tail's values ({ex.resolution / 1e3:g} µs apart)")
    return GpdFit(ex, float(c), float(s), test, stat, p, quantile)


def _chi2_gof(ex: Excesses, c: float, s: float) -> tuple[float, float]:
    """χ² of the tail buckets' counts against the fit, buckets merged from the top until ≥ 5 expected."""
    from .special import chdtrc
    upper = np.append(ex.lo[1:], np.inf)          # each bucket up to the next non-empty one; the last open
    expected = ex.k * (genpareto.sf(ex.lo, c, scale=s) - genpareto.sf(upper, c, scale=s))
    groups_o, groups_e, o, e = [], [], 0.0, 0.0
    for oi, ei in zip(ex.counts[::-1], expected[::-1]):
        o, e = o + oi, e + ei
        if e >= 5:
            groups_o.append(o)
            groups_e.append(e)
            o, e = 0.0, 0.0
    if groups_o:
        groups_o[-1] += o
        groups_e[-1] += e
    if len(groups_o) < MIN_GROUPS:
        return float("nan"), 0.0      # too few buckets to test the fit: the candidate is not used
    go, ge = np.array(groups_o), np.array(groups_e)
    stat = float(np.sum((go - ge) ** 2 / ge))
    return stat, float(chdtrc(len(go) - 3, stat))     # stats.chi2.sf(stat, len(go) - 3)


def candidates(n: int) -> list[tuple[float, int]]:
    """(quantile, exceedances) of the candidate thresholds for n samples."""
    out = [(q, int(round(n * (1 - q)))) for q in CANDIDATES]
    out = [(q, k) for q, k in out if MIN_EXCEEDANCES <= k <= MAX_EXCEEDANCES]
    if not out and n > MAX_EXCEEDANCES:          # beyond 5·10^7 samples: the same exceedance counts, higher up
        out = [(1 - k / n, k) for k in (5000, 2000, 1000, 500, 200, 100)]
    return out


def choose(excesses_of, n: int) -> tuple[GpdFit | None, list[GpdFit]]:
    """The threshold rule (module docstring): the chosen fit (None: none passes) and the fits tried."""
    tried: list[GpdFit] = []
    cands = candidates(n)
    fits: dict[int, GpdFit] = {}
    at: dict[tuple[float, int], GpdFit] = {}   # by threshold: a histogram's coarse buckets give several
                                                # candidates the same edge, fitted once (a censored fit: 0.5 s)

    def fit(i: int) -> GpdFit | None:
        if i not in fits:
            ex = excesses_of(cands[i][1])
            if ex is None or ex.k < MIN_EXCEEDANCES // 2:
                return None
            if (ex.u, ex.k) not in at:
                at[ex.u, ex.k] = fit_gpd(ex, cands[i][0])
                tried.append(at[ex.u, ex.k])
            fits[i] = at[ex.u, ex.k]
        return fits[i]

    for i in range(len(cands)):
        f = fit(i)
        if f is None or f.gof_p < GOF_ALPHA:
            continue
        nxt = fit(i + 1) if i + 1 < len(cands) else None
        if nxt is None or abs(f.shape - nxt.shape) <= 1.96 * nxt.shape_se:
            return f, tried
    return None, tried


def profile_region(f: GpdFit) -> None:
    """The boundary of the 95 % likelihood-ratio region of (shape, scale), RAYS points (module docstring)."""
    c0, s0 = f.shape, f.scale
    cc = max(c0, -0.45)
    k = f.ex.k
    cov = (1 + cc) / k * np.array([[1 + cc, s0], [s0, 2 * s0 * s0]])      # (shape, scale)
    chol = np.linalg.cholesky(cov)
    phi = np.linspace(0, 2 * np.pi, RAYS, endpoint=False)
    dirs = chol @ np.vstack([np.cos(phi), np.sin(phi)])                 # 2 × RAYS
    top = float(f.ex.loglik(np.array([c0]), np.array([s0]))[0])
    target = top - CHI2_95 / 2

    def inside(r: np.ndarray) -> np.ndarray:
        return f.ex.loglik(c0 + r * dirs[0], s0 + r * dirs[1]) >= target

    lo, hi = np.zeros(RAYS), np.full(RAYS, 3.0)
    for _ in range(6):                                                   # widen until outside (to r = 192)
        still = inside(hi)
        if not still.any():
            break
        lo, hi = np.where(still, hi, lo), np.where(still, hi * 2, hi)
    else:
        still = inside(hi)
    bounded = ~still                                                     # (hi not evaluated twice)
    for _ in range(11):                                                  # to 1/2048 of the start
        mid = (lo + hi) / 2
        ok = inside(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    f.region = np.vstack([c0 + lo * dirs[0], s0 + lo * dirs[1]])
    f.bounded = bounded


def intervals(f: GpdFit, ps: list[float]) -> list[tuple[float, float | None, float | None]]:
    """Per level p: the 95 % interval (lo, hi; hi None when the region is open in the level's direction) and
    the factor m on the samples that would halve its width (None: unknown), from the region shrunk toward
    the maximum by 1/√m (module docstring)."""
    ps = np.asarray(ps, dtype=float)
    centre = np.array([[f.shape], [f.scale]])
    shrink = np.concatenate([np.geomspace(0.05, 0.25, 20, endpoint=False), np.linspace(0.25, 1.0, 301)])  # last: 1
    pts = centre[:, None, :] + shrink[None, :, None] * (f.region - centre)[:, None, :]   # 2 × shrinks × rays
    values = _levels_at(f, ps, pts)                                        # levels × shrinks × rays
    point = np.asarray(f.level(ps), dtype=float)
    lo = np.minimum(values.min(axis=2), point[:, None])
    hi = np.maximum(values.max(axis=2), point[:, None])
    out = []
    for i in range(len(ps)):
        open_top = bool((~f.bounded).any()) and values[i, -1, ~f.bounded].max() >= hi[i, -1]
        if open_top or not np.isfinite(hi[i, -1]):
            out.append((float(lo[i, -1]), None, None))
            continue
        width = hi[i] - lo[i]
        narrow = np.nonzero(width <= width[-1] / 2)[0]
        halve = float(1 / shrink[narrow[-1]] ** 2) if len(narrow) else None
        out.append((float(lo[i, -1]), float(hi[i, -1]), halve))
    return out


def _levels_at(f: GpdFit, ps: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """The level of each p at each (shape, scale) point of `pts` (2 × ...): levels × ... (inf where none)."""
    with np.errstate(all="ignore"):
        values = f.ex.u + genpareto.isf(ps.reshape(-1, *[1] * (pts.ndim - 1)) / f.ex.zeta, pts[0][None],
                                        scale=np.maximum(pts[1], 1e-300)[None])
    return np.where(np.isfinite(values), values, np.inf)


def band(f: GpdFit, ps) -> tuple[np.ndarray, np.ndarray]:
    """The 95 % interval of the level at each p (intervals()'s ends for many p at once, for a plot's band,
    without the samples to halve it): (lo, hi), hi inf where the region is open toward long latencies."""
    ps = np.asarray(ps, dtype=float)
    values = _levels_at(f, ps, f.region)                                   # levels × rays
    point = np.asarray(f.level(ps), dtype=float)
    lo = np.minimum(values.min(axis=1), point)
    hi = np.maximum(values.max(axis=1), point)
    if (~f.bounded).any():
        hi = np.where(values[:, ~f.bounded].max(axis=1) >= hi, np.inf, hi)
    return lo, hi


@dataclass
class GevFit:
    block: int
    blocks: int
    shape: float          # ξ (scipy's genextreme c is −ξ)
    loc: float
    scale: float
    gof_p: float

    def level(self, p: float) -> float:
        from scipy.stats import genextreme
        per_block = -math.expm1(self.block * math.log1p(-p))
        return float(genextreme.isf(per_block, -self.shape, loc=self.loc, scale=self.scale))

    def to_json(self, levels) -> dict:
        return {"method": "block maxima (generalised extreme value)", "block": self.block, "blocks": self.blocks,
                "shape": self.shape, "loc": self.loc, "scale": self.scale,
                "gof": {"test": "Cramér–von Mises", "p": self.gof_p},
                "levels": [{"p": p, "value_ns": self.level(p)} for p in levels]}


def fit_gev(series: list[np.ndarray]) -> GevFit | None:
    """genextreme fitted to block maxima (blocks within each run); None with fewer than 30 blocks."""
    from scipy import stats
    n = sum(len(x) for x in series)
    block = max(GEV_MIN_BLOCK, n // GEV_BLOCKS)
    maxima = [x[: len(x) // block * block].reshape(-1, block).max(axis=1) for x in series if len(x) >= block]
    if not maxima or sum(len(m) for m in maxima) < 30:
        return None
    m = np.concatenate(maxima).astype(float)
    centre, unit = float(np.mean(m)), float(np.std(m)) or 1.0
    z = (m - centre) / unit                                   # standardised: the optimiser's steps fit
    c, loc, scale = stats.genextreme.fit(z, 0.0, loc=-0.45, scale=0.78)   # from the Gumbel's moments
    loc, scale = centre + unit * loc, unit * scale
    p = float(stats.cramervonmises(m, stats.genextreme(c, loc=loc, scale=scale).cdf).pvalue)
    return GevFit(block, len(m), float(-c), float(loc), float(scale), p)
