"""The range a distribution figure shows: the bulk of the values, with what lies beyond it counted and named.

One far sample (a 4,917 µs wake-up among 10 µs ones) must not stretch a linear axis until every
configuration sits in its first bucket. `of_series` takes each configuration's raw samples or kept
histogram and returns a `Bulk`: the axis range (the largest p99.99 of the configurations, at most the
value below the top `MIN_BEYOND` samples, plus a small margin) and, per configuration, how many values lie
beyond it and their maximum, which every figure states on the plot. When the values do not stretch the
axis (their full span is at most `STRETCH` times the bulk's), the range is all of them and nothing is
beyond. `fd_width` picks a histogram's bucket width from the bulk (Freedman–Diaconis, rounded to 1, 2 or
5 × 10^k of the shown unit).

All values in the stored unit (ns, bytes); the renderers convert for display.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

LEVEL = 0.9999       # the bulk's upper end: p99.99 ...
MIN_BEYOND = 3       # ... but with n samples at most the level 1 - 3/n: a few far samples never set it
STRETCH = 2.0        # the axis is cut only when all values span more than this many times the bulk
MARGIN = 0.05        # space right of the bulk's end, as a fraction of its span
MIN_BINS, MAX_BINS = 10, 400


@dataclass
class Beyond:
    label: str
    count: int
    max: float


@dataclass
class Bulk:
    lo: float                   # smallest value of any configuration
    hi: float                   # the axis's upper end
    top: float                  # largest value of any configuration
    beyond: list[Beyond] = field(default_factory=list)   # per configuration with values > hi (only when cut)
    configurations: int = 1     # how many were drawn (one: the note need not name it)

    @property
    def cut(self) -> bool:
        return bool(self.beyond)

    def note(self, unit: str, scale: float) -> str:
        """'beyond 60.2 µs: a 1 (max 4,917 µs); b 2 (max 80.1 µs)', or '' when nothing is beyond."""
        if not self.beyond:
            return ""
        total = sum(b.count for b in self.beyond)
        head = f"{total:,} value{'s' if total != 1 else ''} beyond {num(self.hi * scale)} {unit}, off the axis"
        if self.configurations == 1:
            return f"{head} (max {num(self.beyond[0].max * scale)} {unit})"
        return head + " — " + "; ".join(f"{b.label}: {b.count:,} (max {num(b.max * scale)} {unit})"
                                         for b in self.beyond)


def num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}"


def level_for(n: int) -> float:
    """The bulk's quantile level for n values: p99.99, at most 1 - MIN_BEYOND/n."""
    return min(LEVEL, 1.0 - MIN_BEYOND / n) if n > MIN_BEYOND else 1.0


def hist_quantile(h: dict, q: float) -> float:
    """Upper edge of the bucket holding rank ceil(q n) of a kept histogram (its max beyond its range)."""
    counts = np.asarray(h["counts"], dtype=np.int64)
    n = int(counts.sum()) + int(h.get("overflow", 0))
    if n == 0:
        return float(h.get("max", 0))
    rank = max(1, math.ceil(q * n))
    cum = np.cumsum(counts)
    i = int(np.searchsorted(cum, rank, side="left"))
    if i >= len(counts):
        return float(h["max"])
    return min(float(h.get("min_value", 0)) + float(h["bucket_width"]) * (i + 1), float(h["max"]))


def _upper(values: np.ndarray | None, hist: dict | None) -> tuple[float, float, float]:
    """(min, bulk end, max) of one configuration."""
    if values is not None:
        a = np.asarray(values)
        return float(a.min()), float(np.quantile(a, level_for(a.size))), float(a.max())
    n = int(np.sum(hist["counts"])) + int(hist.get("overflow", 0))
    return float(hist["min"]), hist_quantile(hist, level_for(n)), float(hist["max"])


def of_series(samples: dict[str, np.ndarray], hists: dict[str, dict] | None = None) -> Bulk | None:
    """The bulk of configurations given as raw samples (label -> values) and kept histograms (label -> merged
    histogram in trailer form); None when there is nothing."""
    items = [(k, np.asarray(v), None) for k, v in samples.items() if len(v)]
    items += [(k, None, h) for k, h in (hists or {}).items() if h and h.get("n")]
    if not items:
        return None
    ends = [_upper(v, h) for _, v, h in items]
    lo, body, top = min(e[0] for e in ends), max(e[1] for e in ends), max(e[2] for e in ends)
    if body <= lo or top - lo <= STRETCH * (body - lo):
        return Bulk(lo, top, top, configurations=len(items))
    hi = body + MARGIN * (body - lo)
    beyond = []
    for (label, v, h), (_, _, mx) in zip(items, ends):
        if mx <= hi:
            continue
        if v is not None:
            count = int(np.count_nonzero(v > hi))
        else:
            counts = np.asarray(h["counts"], dtype=np.int64)
            lower = float(h.get("min_value", 0)) + float(h["bucket_width"]) * np.arange(len(counts))
            count = int(counts[lower >= hi].sum()) + int(h.get("overflow", 0))
        if count:
            beyond.append(Beyond(label, count, mx))
    return Bulk(lo, hi, top, beyond, len(items)) if beyond else Bulk(lo, top, top, configurations=len(items))


def nice(width: float) -> float:
    """The smallest 1, 2 or 5 × 10^k at least `width`."""
    if width <= 0:
        return 1.0
    exp = math.floor(math.log10(width))
    for m in (1, 2, 5, 10):
        w = m * 10.0 ** exp
        if w >= width * (1 - 1e-12):
            return w
    return 10.0 ** (exp + 1)


def fd_width(samples: list[np.ndarray], bulk: Bulk, scale: float = 1.0, integer: bool = False) -> float:
    """A common bucket width (stored unit) for these samples over the bulk's range: the smallest
    Freedman–Diaconis width (2 IQR n^(-1/3)) of the configurations' values inside it, kept to
    MIN_BINS..MAX_BINS buckets, rounded to 1, 2 or 5 × 10^k in the shown unit (`scale` converts)."""
    span = bulk.hi - bulk.lo
    if span <= 0:
        return 1.0 / scale          # all values equal: one bucket of one shown unit
    widths = []
    for a in samples:
        inside = a[(a >= bulk.lo) & (a <= bulk.hi)]
        if inside.size > 1:
            q1, q3 = np.percentile(inside, [25, 75])
            if q3 > q1:
                widths.append(2 * (q3 - q1) / inside.size ** (1 / 3))
    w = min(widths) if widths else span / 50
    w = min(max(w, span / MAX_BINS), span / MIN_BINS)
    w = nice(w * scale) / scale
    if integer:
        w = max(1.0, float(round(w)) if w >= 1 else 1.0)
    return w
