"""The special functions that `compare` and `report` need, in numpy and math, without importing scipy.

`import scipy.special` costs 0.25-0.4 s of CPU in every command (its array-API layer imports numpy.testing,
numpy.f2py, numpy.ma...), more than the statistics it serves. These are scipy.special's functions of the same
names and arguments, on scalars (the ones marked so also on arrays):

- stdtr(df, t), stdtrit(df, p): Student's t distribution function and its inverse, any real df > 0 (Welch's
  df is fractional): the regularized incomplete beta by its continued fraction, the inverse by Newton steps on
  log|t|. Relative error within 1e-10 of scipy's from df 1 to 1e6, |t| to 1e3, p from 1e-300 to 1 − 1e-16
  (tests/test_special.py).
- pdtrc(k, m), chdtrc(df, x): the Poisson and χ² upper tails, the regularized incomplete gamma by the
  series of P or the continued fraction of Q; the same tolerance.
- kv(nu, z) for nu > 0 (the Cramér–von Mises p-value's 1/4, 3/4, 5/4): the trapezoid rule on
  K_ν(z) = ∫_0^∞ exp(−z cosh t) cosh(νt) dt, which converges exponentially; the same tolerance.
- gammaln, gamma: math.lgamma and math.gamma.
- boxcox, inv_boxcox, inv_boxcox1p, xlog1py (arrays): scipy's formulas with numpy's log, exp, log1p and
  expm1, which differ from the C library's (what scipy's ufuncs call) in the last bit of some values: within
  2e-15 relative of scipy's (tests/test_special.py).

Where scipy.special is itself off (stdtr(1, t) near t = 0 by 1e-9, stdtrit at df 1.5-3 and p ≤ 1e-200, values
it flushes to 0 below 2e-308), these are checked against closed forms and their own round trip instead.

Functions whose callers are not on the compare and report paths (analysis.plan_sizing's nctdtr, betaincinv,
chdtri) keep scipy, imported where they are called.
"""

from __future__ import annotations

import math

import numpy as np

_EPS = 2.220446049250313e-16
_TINY = 1e-300
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)

gammaln = math.lgamma
gamma = math.gamma


# --- log Γ without cancellation -----------------------------------------------------------------

def _stirlerr(x: float) -> float:
    """log Γ(x) − ((x − ½) log x − x + ½ log 2π) for x ≥ 10: the Stirling series (error below 1e-17 there)."""
    x2 = x * x
    return (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - 1.0 / (1188 * x2)) / x2) / x2) / x2) / x


def _lbeta_half(a: float) -> float:
    """log B(a, ½) = log Γ(a) + log Γ(½) − log Γ(a + ½), without the cancellation of two large lgammas."""
    if a < 10.0:
        return math.lgamma(a) + 0.5 * math.log(math.pi) - math.lgamma(a + 0.5)
    b = a + 0.5
    # (a − ½) log a − a − (b − ½) log b + b = −½ log a − a log(b/a) + ½
    return (0.5 * math.log(math.pi) - 0.5 * math.log(a) - a * math.log1p(0.5 / a) + 0.5
            + _stirlerr(a) - _stirlerr(b))


def _log_gamma_prefactor(a: float, x: float) -> float:
    """log(x^a e^−x / Γ(a)), the factor in front of the incomplete gamma's series and continued fraction."""
    if a < 10.0:
        return a * math.log(x) - x - math.lgamma(a)
    # a log(x/a) + a − x − ½ log a + ½ log 2π... with Γ(a) = √(2π/a) (a/e)^a e^stirlerr(a)
    d = (x - a) / a
    log_ratio = math.log1p(d) if abs(d) < 0.5 else math.log(x / a)   # log1p(d) near d = −1 would lose digits
    return a * (log_ratio - d) + 0.5 * math.log(a) - _HALF_LOG_2PI - _stirlerr(a)


# --- the regularized incomplete beta, b = ½ (Student's t) ---------------------------------------

def _betacf(a: float, b: float, x: float, y: float) -> float:
    """The continued fraction of I_x(a, b) (x + y = 1, y given exactly), modified Lentz; converges for
    x < (a + 1)/(a + b + 2)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    if abs(d) < _TINY:
        d = _TINY
    d = 1.0 / d
    h = d
    for m in range(1, 100000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + aa / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = _TINY if abs(d) < _TINY else d
        c = 1.0 + aa / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            return h
    raise ArithmeticError(f"incomplete beta's continued fraction did not converge (a={a}, b={b}, x={x})")


def _t_tails(df: float, t: float) -> tuple[float, float]:
    """(F(−|t|), ½ − F(−|t|)) of Student's t with df degrees of freedom, each to full relative precision:
    F(−|t|) = ½ I_x(df/2, ½) with x = df/(df + t²), ½ − F = ½ I_{1−x}(½, df/2)."""
    a, b = 0.5 * df, 0.5
    t = abs(t)
    if t == 0.0:
        return 0.5, 0.0
    if t > 1e150:                                   # t² overflows: x = df/t², 1 − x = 1
        x, y = (df / t) / t, 1.0
        log_x, log_y = math.log(df) - 2.0 * math.log(t), 0.0
    else:
        t2 = t * t
        x, y = df / (df + t2), t2 / (df + t2)
        log_x = -math.log1p(t2 / df)
        log_y = 2.0 * math.log(t) - math.log(df + t2) if y < 0.5 else -math.log1p(df / t2)
    front = math.exp(a * log_x + b * log_y - _lbeta_half(a))
    if x < (a + 1.0) / (a + b + 2.0):
        lower = 0.5 * front * _betacf(a, b, x, y) / a
        return lower, 0.5 - lower
    upper = 0.5 * front * _betacf(b, a, y, x) / b
    return 0.5 - upper, upper


def stdtr(df: float, t: float) -> float:
    """Student's t distribution function at t, df > 0 degrees of freedom (scipy.special.stdtr)."""
    df, t = float(df), float(t)
    if math.isnan(df) or math.isnan(t) or df <= 0:
        return math.nan
    if math.isinf(t):
        return 0.0 if t < 0 else 1.0
    if math.isinf(df):
        return 0.5 * math.erfc(-t / math.sqrt(2.0))
    lower, centre = _t_tails(df, t)
    return lower if t <= 0 else 0.5 + centre


def stdtrit(df: float, p: float) -> float:
    """The t with stdtr(df, t) = p (scipy.special.stdtrit): Newton steps on y = log|t|, where log F is about
    linear in the tails (F ~ |t|^−df) and log(½ − F) near the centre (½ − F ~ f(0)|t|)."""
    df, p = float(df), float(p)
    if math.isnan(df) or math.isnan(p) or df <= 0 or not 0.0 <= p <= 1.0:
        return math.nan
    if p == 0.0 or p == 1.0:
        return -math.inf if p == 0.0 else math.inf
    if p == 0.5:
        return 0.0
    q = p if p < 0.5 else 1.0 - p                  # exact for p in [½, 1]
    if math.isinf(df):
        t = -_normal_isf_lower(q)
    else:
        t = _t_lower_quantile(df, q)
    return t if p < 0.5 else -t


def _normal_isf_lower(q: float) -> float:
    """−Φ^−1(q) for q < ½ by Newton steps on log erfc (a df = inf quantile)."""
    z = math.sqrt(-2.0 * math.log(q))
    for _ in range(100):
        f = 0.5 * math.erfc(z / math.sqrt(2.0))
        step = (math.log(f) - math.log(q)) * f / (math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi))
        z += step
        if abs(step) <= 1e-15 * abs(z):
            break
    return z


def _t_lower_quantile(df: float, q: float) -> float:
    """The t ≤ 0 with F(t) = q < ½."""
    centre = q > 0.25
    target = math.log(0.5 - q) if centre else math.log(q)     # 0.5 − q exact for q in [¼, ½]
    log_f0 = math.lgamma(0.5 * df + 0.5) - math.lgamma(0.5 * df) - 0.5 * math.log(df * math.pi)
    # starting point: the centre's linear term, or the tail's power law F ~ f(0)-scaled |t|^−df
    if centre:
        y = target - log_f0
    else:
        lb = _lbeta_half(0.5 * df)
        # F ≈ ½ (df/t²)^(df/2) / (df/2 · B(df/2, ½)), solved for log|t|
        y = 0.5 * math.log(df) - (target + math.log(0.5 * df) + lb - math.log(0.5)) / df
        y = max(y, math.log(1e-3))
    lo, hi = -700.0, 700.0                           # a bracket on y, narrowed as the steps go
    for _ in range(200):
        t = math.exp(y)
        lower, half_minus = _t_tails(df, t)
        log_pdf = log_f0 - 0.5 * (df + 1.0) * math.log1p(t * t / df) if t < 1e150 else \
            log_f0 + 0.5 * (df + 1.0) * (math.log(df) - 2.0 * math.log(t))
        if centre:
            if half_minus <= 0.0:
                g, slope = -math.inf, 1.0
            else:
                g, slope = math.log(half_minus) - target, math.exp(log_pdf + y) / half_minus   # increasing in y
            if g > 0:
                hi = min(hi, y)
            else:
                lo = max(lo, y)
        else:
            if lower <= 0.0:
                g, slope = -math.inf, -1.0
            else:
                g, slope = math.log(lower) - target, -math.exp(log_pdf + y) / lower            # decreasing in y
            if g > 0:
                lo = max(lo, y)
            else:
                hi = min(hi, y)
        if g == 0.0:
            break
        new = y - g / slope if math.isfinite(g) and slope != 0.0 else math.nan
        if not lo < new < hi:                       # outside the bracket: bisect
            new = 0.5 * (lo + hi)
        if abs(new - y) <= 1e-15 * max(1.0, abs(y)):
            y = new
            break
        y = new
    return -math.exp(y)


# --- the regularized upper incomplete gamma (Poisson and χ² tails) ------------------------------

def _gamma_pq(a: float, x: float) -> tuple[float, float]:
    """(P(a, x), Q(a, x)), the regularized lower and upper incomplete gamma: the series of P below
    x = a + 1 (Q = 1 − P), the continued fraction of Q above (P = 1 − Q); the small one to full relative
    precision."""
    if x <= 0.0:
        return 0.0, 1.0
    if math.isinf(x):
        return 1.0, 0.0
    front = _log_gamma_prefactor(a, x)
    if x < a + 1.0:
        ap, term = a, 1.0 / a
        total = term
        for _ in range(100000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-17:
                break
        p = math.exp(front) * total
        return p, 1.0 - p
    b = x + 1.0 - a
    c, d = 1.0 / _TINY, 1.0 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = _TINY if abs(d) < _TINY else d
        c = b + an / c
        c = _TINY if abs(c) < _TINY else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    q = math.exp(front) * h
    return 1.0 - q, q


def pdtrc(k: float, m: float) -> float:
    """P(X > k) for X Poisson with mean m (scipy.special.pdtrc): P(floor(k) + 1, m), the lower regularized
    incomplete gamma."""
    k, m = float(k), float(m)
    if math.isnan(k) or math.isnan(m) or m < 0:
        return math.nan
    if k < 0:
        return 1.0
    return _gamma_pq(math.floor(k) + 1.0, m)[0]


def chdtrc(df: float, x: float) -> float:
    """P(X > x) for X χ² with df degrees of freedom (scipy.special.chdtrc): Q(df/2, x/2)."""
    df, x = float(df), float(x)
    if math.isnan(df) or math.isnan(x) or df <= 0:
        return math.nan
    return _gamma_pq(0.5 * df, 0.5 * x)[1] if x > 0 else 1.0


# --- the modified Bessel function of the second kind --------------------------------------------

def kv(nu: float, z):
    """K_ν(z) for z ≥ 0 (scipy.special.kv; a scalar or an array of z): the trapezoid rule on
    ∫_0^∞ exp(−z cosh t) cosh(νt) dt, the integrand analytic in a strip around the real axis, so the rule
    converges exponentially in 1/h; summed as exp(−z) ∫ exp(−z (cosh t − 1)) cosh(νt) dt until its terms
    are below 1e-18 of the sum."""
    z = np.asarray(z, dtype=float)
    out = np.array([_kv1(float(nu), float(v)) for v in z.ravel()]).reshape(z.shape)
    return out[()] if out.ndim == 0 else out


_H = 1.0 / 16


def _kv1(nu: float, z: float) -> float:
    if math.isnan(z) or z < 0:
        return math.nan
    if z == 0:
        return math.inf
    if z > 745.0:
        return 0.0
    # up to where z (cosh t − 1) − ν t exceeds 45 (e^−45 ≈ 3e-20 of the t = 0 term, which is 1)
    t_max = math.acosh(1.0 + (45.0 + 2.0 * nu * math.log1p(45.0 / z) + 10.0 * nu) / z) + 1.0
    h = min(_H, 0.5 / math.sqrt(z))                 # the peak at t = 0 is about 1/√z wide
    t = np.arange(0.0, t_max + h, h)
    e = -z * (np.cosh(t) - 1.0)
    f = 0.5 * (np.exp(e + nu * t) + np.exp(e - nu * t))
    total = h * (float(np.sum(f)) - 0.5 * float(f[0]))
    return math.exp(-z) * total


# --- Box-Cox and xlog1py (scipy's formulas, numpy's log1p/expm1) ---------------------------------

def boxcox(x, lmbda):
    """scipy.special.boxcox: log x for |λ| < 1e-19, else expm1(λ log x)/λ."""
    x, lmbda = np.broadcast_arrays(np.asarray(x, float), np.asarray(lmbda, float))
    with np.errstate(all="ignore"):
        small = np.abs(lmbda) < 1e-19
        out = np.where(small, np.log(x), np.expm1(lmbda * np.log(x)) / np.where(small, 1.0, lmbda))
    return out[()] if out.ndim == 0 else out


def inv_boxcox(y, lmbda):
    """scipy.special.inv_boxcox: exp(y) for λ = 0, else exp(log1p(λ y)/λ)."""
    y, lmbda = np.broadcast_arrays(np.asarray(y, float), np.asarray(lmbda, float))
    with np.errstate(all="ignore"):
        zero = lmbda == 0
        out = np.where(zero, np.exp(y), np.exp(np.log1p(lmbda * y) / np.where(zero, 1.0, lmbda)))
    return out[()] if out.ndim == 0 else out


def inv_boxcox1p(y, lmbda):
    """scipy.special.inv_boxcox1p: expm1(y) for λ = 0, y where |λ y| < 1e-154, else expm1(log1p(λ y)/λ)."""
    y, lmbda = np.broadcast_arrays(np.asarray(y, float), np.asarray(lmbda, float))
    with np.errstate(all="ignore"):
        zero = lmbda == 0
        ly = lmbda * y
        out = np.where(zero, np.expm1(y),
                       np.where(np.abs(ly) < 1e-154, y, np.expm1(np.log1p(ly) / np.where(zero, 1.0, lmbda))))
    return out[()] if out.ndim == 0 else out


def xlog1py(x, y):
    """scipy.special.xlog1py: x log1p(y), 0 where x = 0 and y is not nan."""
    x, y = np.broadcast_arrays(np.asarray(x, float), np.asarray(y, float))
    with np.errstate(all="ignore"):
        out = np.where((x == 0) & ~np.isnan(y), 0.0, x * np.log1p(y))
    return out[()] if out.ndim == 0 else out
