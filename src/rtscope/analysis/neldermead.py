"""scipy.optimize.fmin with its defaults (Nelder–Mead, xtol = ftol = 1e-4, at most 200 iterations and 200
function calls per parameter), step for step as scipy 1.17 takes them, without importing scipy.optimize.

The tail fits (analysis.tail_fit, analysis.genpareto) are a report's only use of scipy.optimize, whose import
(linear programming, scipy.linalg, scipy.fft and scipy.spatial with it) costs about 0.2 s of CPU, a third of
every tail fit of a 100-run report together. The same vertices, the same comparisons in the same order and the
same sorting give scipy's result bit for bit (tests/test_tail.py checks it against scipy.optimize.fmin).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

RHO, CHI, PSI, SIGMA = 1, 2, 0.5, 0.5     # reflection, expansion, contraction, shrink (adaptive=False)
NONZDELT, ZDELT = 0.05, 0.00025           # the initial simplex: +5 % of each coordinate, 0.00025 for a zero
XATOL = FATOL = 1e-4


class _TooManyCalls(Exception):
    pass


def fmin(func: Callable[..., float], x0, args: tuple = ()) -> np.ndarray:
    """The vertex of the final simplex with the lowest value (scipy.optimize.fmin(func, x0, args, disp=0))."""
    x0 = np.atleast_1d(x0).flatten()
    x0 = np.asarray(x0, dtype=x0.dtype if np.issubdtype(x0.dtype, np.inexact) else np.float64)
    n = len(x0)
    sim = np.empty((n + 1, n), dtype=x0.dtype)
    sim[0] = x0
    for k in range(n):
        y = np.array(x0, copy=True)
        y[k] = (1 + NONZDELT) * y[k] if y[k] != 0 else ZDELT
        sim[k + 1] = y
    maxiter = maxfun = n * 200
    calls = [0]

    def f(x: np.ndarray) -> float:
        if calls[0] >= maxfun:
            raise _TooManyCalls
        calls[0] += 1
        fx = func(np.copy(x), *args)
        return fx if np.isscalar(fx) else np.asarray(fx).item()

    fsim = np.full((n + 1,), np.inf, dtype=float)
    try:
        for k in range(n + 1):
            fsim[k] = f(sim[k])
    except _TooManyCalls:
        pass
    finally:
        ind = np.argsort(fsim)
        sim, fsim = np.take(sim, ind, 0), np.take(fsim, ind, 0)
    ind = np.argsort(fsim)
    fsim, sim = np.take(fsim, ind, 0), np.take(sim, ind, 0)
    iterations = 1
    while calls[0] < maxfun and iterations < maxiter:
        try:
            if np.max(np.ravel(np.abs(sim[1:] - sim[0]))) <= XATOL and np.max(np.abs(fsim[0] - fsim[1:])) <= FATOL:
                break
            _step(f, sim, fsim, n)
            iterations += 1
        except _TooManyCalls:
            pass
        ind = np.argsort(fsim)
        sim, fsim = np.take(sim, ind, 0), np.take(fsim, ind, 0)
    return sim[0]


def _step(f: Callable[[np.ndarray], float], sim: np.ndarray, fsim: np.ndarray, n: int) -> None:
    """One Nelder–Mead iteration on the sorted simplex (in place): reflect, expand, contract or shrink."""
    xbar = np.add.reduce(sim[:-1], 0) / n
    xr = (1 + RHO) * xbar - RHO * sim[-1]
    fxr = f(xr)
    if fxr < fsim[0]:
        xe = (1 + RHO * CHI) * xbar - RHO * CHI * sim[-1]
        fxe = f(xe)
        sim[-1], fsim[-1] = (xe, fxe) if fxe < fxr else (xr, fxr)
        return
    if fxr < fsim[-2]:
        sim[-1], fsim[-1] = xr, fxr
        return
    if fxr < fsim[-1]:                  # outside contraction
        xc = (1 + PSI * RHO) * xbar - PSI * RHO * sim[-1]
        fxc = f(xc)
        if fxc <= fxr:
            sim[-1], fsim[-1] = xc, fxc
            return
    else:                               # inside contraction
        xcc = (1 - PSI) * xbar + PSI * sim[-1]
        fxcc = f(xcc)
        if fxcc < fsim[-1]:
            sim[-1], fsim[-1] = xcc, fxcc
            return
    for j in range(1, n + 1):           # shrink toward the best vertex
        sim[j] = sim[0] + SIGMA * (sim[j] - sim[0])
        fsim[j] = f(sim[j])
