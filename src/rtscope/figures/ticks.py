"""Readable ticks for a log axis, the same in the HTML report (plotly) and the static figures (matplotlib).

A log axis labelled by its plotting library shows bare mantissas between decades (`2`, `5` for 0.2 and 0.5,
or for 20 and 50): a reader cannot tell 0.5 from 5. `log_ticks(lo, hi)` gives tick values and full texts
instead: powers of ten when the range spans more than MAX_DECADES_125 decades, else 1, 2 and 5 times each
power; every text a whole number (1k, 10M) or a decimal (0.05), never a mantissa alone.
"""

from __future__ import annotations

import math

MAX_DECADES_125 = 3    # up to this many decades: 1-2-5 ticks; beyond: powers of ten only (a tick per decade,
MAX_TICKS = 10         # at most MAX_TICKS of them: every second or third decade on a very long axis)
SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def tick_text(v: float) -> str:
    """1 → '1', 0.05 → '0.05', 2000 → '2k', 1e7 → '10M'."""
    for size, suffix in SI:
        if v >= size:
            return f"{v / size:g}{suffix}"
    return f"{v:g}" if v >= 1e-4 else f"{v:.0e}".replace("e-0", "e-")


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[str]]:
    """Tick values within [lo, hi] (both > 0) of a log axis and their texts."""
    if not (lo > 0 and hi > 0) or not (math.isfinite(lo) and math.isfinite(hi)):
        return [], []
    lo, hi = min(lo, hi), max(lo, hi)
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if last - first <= MAX_DECADES_125:
        values = [m * 10.0 ** e for e in range(first, last + 1) for m in (1, 2, 5)]
    else:
        step = max(1, math.ceil((last - first + 1) / MAX_TICKS))
        values = [10.0 ** e for e in range(first, last + 1) if (e - first) % step == 0]
    values = [float(f"{v:.6g}") for v in values if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    return values, [tick_text(v) for v in values]


def set_log_ticks(ax, arrays, axis: str = "y") -> None:
    """A matplotlib log axis labelled by log_ticks over the positive values of `arrays` (its minor ticks unlabelled)."""
    from matplotlib.ticker import NullFormatter
    import numpy as np
    values = [np.asarray(a, float) for a in arrays]
    values = np.concatenate([v[np.isfinite(v) & (v > 0)] for v in values]) if values else np.empty(0)
    if not values.size:
        return
    ticks, texts = log_ticks(float(values.min()), float(values.max()))
    if len(ticks) < 2:
        return
    (ax.set_yticks if axis == "y" else ax.set_xticks)(ticks, texts)
    (ax.yaxis if axis == "y" else ax.xaxis).set_minor_formatter(NullFormatter())
