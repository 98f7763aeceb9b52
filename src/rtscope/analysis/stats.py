"""Summary statistics of raw samples and latency histograms.

Percentiles use the linear-interpolation definition (Hyndman & Fan type 7,
numpy's default, R's default, Excel's PERCENTILE.INC): for sorted x[0..n-1]
the p-th percentile is x[h] interpolated at h = (n-1)·p/100. Variance uses
n−1 (sample variance). All values stay in the unit of the samples (ns).

Runs that kept only a histogram (long timer runs) are summarised from it:
min, max and mean are exact; percentiles are the upper edge of the bucket
that holds the rank (a conservative bound, never an underestimate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9, "p9999": 99.99}
STAT_KEYS = ("n", "min", "mean", "max", "var", "stdev", *PERCENTILES)
PERCENTILE_DEFINITION = "linear interpolation (Hyndman & Fan type 7)"
HISTOGRAM_PERCENTILE_DEFINITION = "the upper edge of the bucket that holds the rank"   # a histogram-only run's

# Integer selection: up to 2^16 values (a run's worth) are sorted; more are counted in
# 2^16 buckets per level (what is left sorted below 2^16) and passed over in blocks of
# 2^18 that stay in cache and in reused heap memory (large fresh arrays cost more in
# page faults than in arithmetic).
_BUCKET_BITS = 16
_SORT_BELOW = 1 << 16
_BLOCK = 1 << 18


def summarize(values: np.ndarray | list[np.ndarray]) -> dict[str, float | int | None]:
    """n, min, mean, max, var (n−1), stdev and the percentiles of PERCENTILES.

    `values` may be one array or a list of arrays (a run's stored chunks), taken as one sample.
    The input is never modified. Integer samples (every probe's ns and bytes) take the
    exact integer path; floating-point ones a selection in one float64 copy.
    """
    chunks = [np.asarray(c) for c in values] if isinstance(values, list) else [np.asarray(values)]
    chunks = [c.ravel() for c in chunks if c.size]
    n = sum(c.size for c in chunks)
    if n == 0:
        return {k: (0 if k == "n" else None) for k in STAT_KEYS}
    if all(c.dtype.kind in "iu" for c in chunks):
        extremes = [(int(b.min()), int(b.max())) for b in _blocks(chunks)]  # both while a block is in cache
        lowest, highest = min(lo for lo, _ in extremes), max(hi for _, hi in extremes)
        if highest - lowest < 2 ** 62:
            return _summarize_integers(chunks, n, lowest, highest)
    work = np.concatenate(chunks, dtype=np.float64) if len(chunks) > 1 else chunks[0].astype(np.float64)
    return _summarize_floats(work)


def _summary(n, lowest, highest, mean, var, quantiles) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {
        "n": n, "min": _num(lowest), "mean": mean, "max": _num(highest), "var": var, "stdev": var ** 0.5,
    }
    out.update({k: float(q) for k, q in zip(PERCENTILES, quantiles)})
    return out


def _type7_ranks(n: int) -> list[tuple[int, int, float]]:
    """For each percentile: the two order statistics (0-based ranks) it interpolates, and the weight."""
    out = []
    for p in PERCENTILES.values():
        h = (n - 1) * p / 100.0
        k = int(np.floor(h))
        out.append((k, min(k + 1, n - 1), h - k))
    return out


def _summarize_integers(chunks: list[np.ndarray], n: int, lowest: int, highest: int) -> dict:
    """Exact statistics of integer samples: no sort and no copy of the data.

    Two passes over blocks of int64 offsets from the minimum: the first sums
    them and counts them in buckets of their high bits; the second keeps only
    the values in the buckets that hold a wanted rank (a _Selection), where
    _order_statistics finishes. Sums are exact integers while a block's sum of
    squares fits an int64 (spans up to ~4 ms in ns), and so is the variance;
    wider spans take a two-pass float variance.
    """
    span = highest - lowest
    plan = _type7_ranks(n)
    ranks = np.asarray(sorted({r for k, k2, _ in plan for r in (k, k2)}))
    exact_sums = span * _BLOCK < 2 ** 63
    exact_squares = span * span * _BLOCK < 2 ** 63
    if n <= _SORT_BELOW and exact_squares:
        # a run's worth of samples: one sort costs less than the counting passes' 2^16 buckets (the same
        # numbers: exact integer sums and order statistics either way)
        d, at = np.empty(n, dtype=np.int64), 0
        for c in chunks:
            np.subtract(c, lowest, out=d[at:at + c.size], casting="unsafe")
            at += c.size
        total, squares = int(d.sum()), int(np.einsum("i,i->", d, d))
        var = (squares * n - total * total) / (n * (n - 1)) if n > 1 else 0.0
        d.sort()
        at_rank = dict(zip(ranks.tolist(), d[ranks].tolist()))
        quantiles = [lowest + at_rank[k] + w * (at_rank[k2] - at_rank[k]) for k, k2, w in plan]
        return _summary(n, lowest, highest, lowest + total / n, var, quantiles)
    shift = _bucket_shift(span)
    counts = np.zeros((span >> shift) + 1, dtype=np.int64)
    offsets = np.empty(min(n, _BLOCK), dtype=np.int64)
    total = squares = 0
    for block in _blocks(chunks):
        d = offsets[:block.size]
        np.subtract(block, lowest, out=d, casting="unsafe")
        total += int(d.sum()) if exact_sums else float(d.sum(dtype=np.float64))
        if exact_squares:
            squares += int(np.einsum("i,i->", d, d))
        d >>= shift
        counts += np.bincount(d, minlength=counts.size)
    mean_offset = total / n
    selection = _Selection(counts, ranks, shift)
    kept, centred_squares = [], 0.0
    if not (exact_squares and selection.done):
        buckets = np.empty_like(offsets)
        for block in _blocks(chunks):
            d = offsets[:block.size]
            np.subtract(block, lowest, out=d, casting="unsafe")
            if not exact_squares:
                centred_squares += sum_of_squares(d - mean_offset)
            if not selection.done:
                kept.append(d[selection.keep[np.right_shift(d, shift, out=buckets[:block.size])]])
    if n < 2:
        var = 0.0
    elif exact_squares:
        var = (squares * n - total * total) / (n * (n - 1))  # exact in Python integers
    else:
        var = centred_squares / (n - 1)
    if selection.done:
        found = selection.values
    else:
        found = _order_statistics(np.concatenate(kept), selection.local, *selection.offset_range(span))
    at_rank = dict(zip(ranks.tolist(), found))
    quantiles = [lowest + at_rank[k] + w * (at_rank[k2] - at_rank[k]) for k, k2, w in plan]
    return _summary(n, lowest, highest, lowest + mean_offset, var, quantiles)


def _order_statistics(values: np.ndarray, ranks: np.ndarray, low: int, high: int) -> list[int]:
    """The values at the given sorted 0-based ranks of int64 `values` that lie in [low, high].

    A counting selection: each level counts the values in 2^16 buckets of their
    high bits and keeps only the buckets that hold a wanted rank, narrowing the
    range by 16 bits — at most four levels whatever the distribution. Exact,
    like a sort, but linear.
    """
    if values.size <= _SORT_BELOW or high == low:
        return np.sort(values)[ranks].tolist()
    shift = _bucket_shift(high - low)
    buckets = np.right_shift(values - low, shift)
    selection = _Selection(np.bincount(buckets), ranks, shift)
    if selection.done:
        return [low + v for v in selection.values]
    first, last = selection.offset_range(high - low)
    return _order_statistics(values[selection.keep[buckets]], selection.local, low + first, low + last)


class _Selection:
    """Which buckets of a counting pass hold the wanted ranks, and each rank's place among their values."""

    def __init__(self, counts: np.ndarray, ranks: np.ndarray, shift: int):
        ends = np.cumsum(counts)
        holding = np.searchsorted(ends, ranks, side="right")  # the bucket of each rank
        # The distinct buckets (ranks are sorted, so is holding): np.unique would import numpy.ma, some 20 ms
        # of `rtscope show`.
        self.wanted = holding[np.diff(holding, prepend=-1) != 0]
        self.keep = np.zeros(counts.size, dtype=bool)
        self.keep[self.wanted] = True
        self.shift = shift
        self.done = shift == 0  # one value per bucket: the bucket is the answer
        self.values = holding.tolist()
        # A rank's position among the kept values: less what lies in the skipped buckets below it.
        wanted_counts = counts[self.wanted]
        skipped_below = (ends[self.wanted] - wanted_counts) - (np.cumsum(wanted_counts) - wanted_counts)
        self.local = ranks - skipped_below[np.searchsorted(self.wanted, holding)]

    def offset_range(self, span: int) -> tuple[int, int]:
        """The lowest and highest offset a kept value can have."""
        return int(self.wanted[0]) << self.shift, min(((int(self.wanted[-1]) + 1) << self.shift) - 1, span)


def _bucket_shift(span: int) -> int:
    return max(0, span.bit_length() - _BUCKET_BITS)


def _blocks(chunks: list[np.ndarray]):
    for c in chunks:
        for at in range(0, c.size, _BLOCK):
            yield c[at:at + _BLOCK]


def _summarize_floats(work: np.ndarray) -> dict:
    """Statistics of a float64 working copy (reordered in place)."""
    n = int(work.size)
    quantiles, lowest, highest = _select_percentiles(work, _type7_ranks(n))
    mean = float(work.sum() / n)
    work -= mean
    var = float(sum_of_squares(work) / (n - 1)) if n > 1 else 0.0
    return _summary(n, lowest, highest, mean, var, quantiles)


def sum_of_squares(work: np.ndarray) -> float:
    """Σ x² of a float64 working array (squared in place), by numpy's pairwise summation. Not np.dot: BLAS
    runs a dot of more than 10,000 values on threads, which on a busy 2-CPU machine takes 20 ms instead of
    0.1 ms, and gives a last digit that depends on how many CPUs the machine has."""
    return float(np.add.reduce(np.square(work, out=work)))


def _select_percentiles(work: np.ndarray, plan) -> tuple[list[float], float, float]:
    """Type-7 percentiles (ascending), min and max by successive selection in `work` (reordered).

    Each selection partitions only the segment above the previous one, so the
    tail percentiles cost a fraction of a full pass: much cheaper than a sort.
    The first split leaves the minimum below it, the last the maximum above it.
    """
    out, lo, first = [], 0, None
    for k, k2, w in plan:
        work[lo:].partition([k - lo, k2 - lo] if k2 != k else k - lo)
        x, y = work[k], work[k2]
        out.append(float(x + w * (y - x)))
        first = k if first is None else first
        lo = k
    return out, float(work[: first + 1].min()), float(work[lo:].max())


def _num(x) -> float | int:
    f = float(x)
    return int(f) if f.is_integer() else f


@dataclass
class Histogram:
    """Counts of values per bucket [min_value + i·width, min_value + (i+1)·width).

    Values below min_value are counted in `underflow`, values at or beyond the
    last bucket in `overflow`: nothing is dropped silently.
    """

    bucket_width: float
    min_value: float
    counts: np.ndarray
    underflow: int = 0
    overflow: int = 0

    @property
    def edges(self) -> np.ndarray:
        return self.min_value + self.bucket_width * np.arange(len(self.counts) + 1)

    @property
    def total(self) -> int:
        return int(self.counts.sum()) + self.underflow + self.overflow

    def to_dict(self) -> dict:
        return {"bucket_width": self.bucket_width, "min_value": self.min_value, "counts": self.counts.tolist(),
                "underflow": self.underflow, "overflow": self.overflow}


def histogram(values: np.ndarray, bucket_width: float, buckets: int, min_value: float = 0) -> Histogram:
    """Bucket values into `buckets` buckets of `bucket_width`, counting under- and overflow."""
    if bucket_width <= 0:
        raise ValueError(f"bucket width must be positive, got {bucket_width}")
    if buckets < 1:
        raise ValueError(f"bucket count must be at least 1, got {buckets}")
    a = np.asarray(values, dtype=np.float64)
    idx = np.floor((a - min_value) / bucket_width)
    under = int(np.count_nonzero(idx < 0))
    over = int(np.count_nonzero(idx >= buckets))
    inside = idx[(idx >= 0) & (idx < buckets)].astype(np.int64)
    counts = np.bincount(inside, minlength=buckets)
    return Histogram(bucket_width, min_value, counts, under, over)


def summarize_histogram(h: dict) -> dict[str, float | int | None]:
    """Summarise a probe-kept histogram (sample-file trailer form, see docs/sample-format.md)."""
    counts = np.asarray(h["counts"], dtype=np.int64)
    n = int(h.get("n", int(counts.sum()) + int(h.get("overflow", 0))))
    if n == 0:
        return {k: (0 if k == "n" else None) for k in STAT_KEYS}
    width, lo = float(h["bucket_width"]), float(h.get("min_value", 0))
    cum = np.cumsum(counts)
    out: dict[str, float | int | None] = {"n": n, "min": h["min"], "max": h["max"], "mean": h["sum"] / n}
    # Variance from bucket midpoints: an approximation, flagged by the caller's note.
    mids = lo + width * (np.arange(len(counts)) + 0.5)
    inside = int(cum[-1]) if len(cum) else 0
    if inside > 1:
        m = float((mids * counts).sum() / inside)
        out["var"] = float((counts * (mids - m) ** 2).sum() / (inside - 1))
    else:
        out["var"] = 0.0
    out["stdev"] = out["var"] ** 0.5
    for key, p in PERCENTILES.items():
        rank = int(np.ceil(p / 100.0 * n))
        i = int(np.searchsorted(cum, rank))
        # The bucket's upper edge, but never beyond the largest value measured.
        out[key] = float(min(lo + width * (i + 1), h["max"])) if i < len(counts) else float(h["max"])
    return out


def merge_histograms(hists) -> dict | None:
    """Sum probe-kept histograms of one bucket layout (e.g. one per thread, or per repetition).

    Count arrays of different lengths are padded; None when bucket widths or
    origins differ (such histograms cannot be summed bucket by bucket).
    """
    hists = [h for h in hists if h]
    if not hists:
        return None
    width, lo, unit = hists[0]["bucket_width"], hists[0].get("min_value", 0), hists[0].get("unit", "ns")
    if any((h["bucket_width"], h.get("min_value", 0), h.get("unit", "ns")) != (width, lo, unit) for h in hists):
        return None
    counts = np.zeros(max(len(h["counts"]) for h in hists), dtype=np.int64)
    for h in hists:
        counts[:len(h["counts"])] += np.asarray(h["counts"], dtype=np.int64)
    n = [int(h.get("n", int(np.sum(h["counts"])) + int(h.get("overflow", 0)))) for h in hists]
    filled = [h for h, k in zip(hists, n) if k]
    return {"unit": unit, "bucket_width": width, "min_value": lo, "counts": counts.tolist(),
            "overflow": sum(int(h.get("overflow", 0)) for h in hists), "n": sum(n),
            "min": min((h["min"] for h in filled), default=0), "max": max((h["max"] for h in filled), default=0),
            "sum": sum(h.get("sum", 0) for h in hists)}
