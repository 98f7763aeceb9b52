"""Least-squares straight line y = slope·x + intercept, with Pearson's r and r².

Used for memory per task: the slope of memory (bytes) against the number of
tasks is the cost of one task, the intercept the fixed cost. Study 5 printed
r² and called it the correlation coefficient; rtscope reports both, each
under its own name: r (Pearson's correlation coefficient, signed) and r²
(the coefficient of determination of the fit).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ..errors import UsageError


@dataclass(frozen=True)
class Fit:
    slope: float
    intercept: float
    r: float | None    # None when y is constant (r is 0/0)
    r2: float | None
    n: int

    def at(self, x):
        """The fitted line's value(s) at x."""
        return self.slope * np.asarray(x, dtype=np.float64) + self.intercept

    def as_dict(self) -> dict:
        return asdict(self)


def least_squares(x, y) -> Fit:
    """Ordinary least squares of y on x; raises UsageError when the line is not determined."""
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(f"x and y must be 1-D and of equal length, got shapes {xs.shape} and {ys.shape}")
    n = int(xs.size)
    if n < 2:
        raise UsageError(f"a straight-line fit needs at least 2 points, got {n}")
    if not (np.all(np.isfinite(xs)) and np.all(np.isfinite(ys))):
        raise UsageError("a straight-line fit needs finite values")
    # Centred sums: exact enough for counts up to 1e9 and bytes up to 1e15.
    dx = xs - xs.mean()
    dy = ys - ys.mean()
    sxx = float(dx @ dx)
    syy = float(dy @ dy)
    sxy = float(dx @ dy)
    if sxx == 0.0:
        raise UsageError(f"every point has the same task count ({xs[0]:g}): the slope is undefined")
    slope = sxy / sxx
    intercept = float(ys.mean() - slope * xs.mean())
    if syy == 0.0:
        return Fit(slope, intercept, None, None, n)
    r = max(-1.0, min(1.0, sxy / np.sqrt(sxx * syy)))
    return Fit(slope, intercept, r, r * r, n)


# --- memory-per-task series of stored `tasks memory` runs ------------------------------------------------------

@dataclass
class Series:
    """All (tasks, value) points of one task model (runtime + settings), over one or more runs."""

    label: str
    runtime: str
    settings: dict
    run_ids: list[int]
    column: str  # the memory column the values come from
    tasks: np.ndarray
    values: np.ndarray
    fit: Fit | None = None
    fit_problem: str | None = None  # why there is no fit

    def by_count(self) -> dict[int, float]:
        """The median value at each task count (one value per count and run)."""
        return {int(c): float(np.median(self.values[self.tasks == c])) for c in np.unique(self.tasks)}


def memory_series(store, runs, column: str | None = None) -> list[Series]:
    """One Series per task model among `runs` (stored `tasks memory` runs), each with its least-squares fit
    of `column` (default: each run's primary column) against the `tasks` column."""
    groups: dict[tuple, list] = {}
    for run in runs:
        groups.setdefault((run.runtime, tuple(sorted(run.settings.items()))), []).append(run)
    varying = varying_settings([dict(k[1]) for k in groups])
    out = []
    for (runtime, settings), members in groups.items():
        settings = dict(settings)
        tasks, values, wanted = [], [], set()
        for run in members:
            names = [c["name"] for c in run.columns]
            want = column or run.primary["name"]
            wanted.add(want)
            for needed in ("tasks", want):
                if needed not in names:
                    raise UsageError(f"run {run.id} has no column {needed!r}; its columns: {', '.join(names)}")
            data = store.samples(run.id, ["tasks", want])
            tasks.append(data["tasks"])
            values.append(data[want])
        s = Series(model_label(runtime, settings, varying), runtime, settings, [r.id for r in members],
                   "/".join(sorted(wanted)), np.concatenate(tasks).astype(np.float64),
                   np.concatenate(values).astype(np.float64))
        try:
            s.fit = least_squares(s.tasks, s.values)
        except UsageError as e:
            s.fit_problem = str(e)
        out.append(s)
    return out


def model_label(runtime: str, settings: dict, varying: list[str]) -> str:
    """'model (runtime)', plus the settings in `varying` (those that differ between the series shown)."""
    extra = " ".join(f"{k}={settings[k]}" for k in varying if k in settings and k != "model")
    return f"{settings.get('model', '?')} ({runtime})" + (f" {extra}" if extra else "")


def varying_settings(all_settings: list[dict]) -> list[str]:
    """Settings with two or more values among the series that have them (a setting only one runtime
    records, such as the BEAM's vm_flags, does not vary just because the others lack it)."""
    names = sorted({k for s in all_settings for k in s})
    return [n for n in names if len({repr(s[n]) for s in all_settings if n in s}) > 1]
