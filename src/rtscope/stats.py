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


def summarize(values: np.ndarray | list[np.ndarray]) -> dict[str, float | int | None]:
    """n, min, mean, max, var (n−1), stdev and the percentiles of PERCENTILES.

    `values` may be one array or a list of arrays (a run's stored chunks), taken as one sample.
    """
    # One float64 working copy (joined from chunks in the same pass), reordered in place below.
    if isinstance(values, list):
        work = np.concatenate(values, dtype=np.float64) if values else np.empty(0)
    else:
        work = np.asarray(values).astype(np.float64)
    n = int(work.size)
    if n == 0:
        return {k: (0 if k == "n" else None) for k in STAT_KEYS}
    quantiles, lowest, highest = _select_percentiles(work, list(PERCENTILES.values()))
    mean = float(work.sum() / n)
    work -= mean
    var = float(np.dot(work, work) / (n - 1)) if n > 1 else 0.0
    out: dict[str, float | int | None] = {
        "n": n, "min": _num(lowest), "mean": mean, "max": _num(highest), "var": var, "stdev": var ** 0.5,
    }
    out.update({k: float(q) for k, q in zip(PERCENTILES, quantiles)})
    return out


def _select_percentiles(work: np.ndarray, percentiles: list[float]) -> tuple[list[float], float, float]:
    """Type-7 percentiles (ascending), min and max by successive selection in `work` (reordered).

    Each selection partitions only the segment above the previous one, so the
    tail percentiles cost a fraction of a full pass: much cheaper than a sort.
    The first split leaves the minimum below it, the last the maximum above it.
    """
    n = len(work)
    out, lo, first = [], 0, None
    for p in percentiles:
        h = (n - 1) * p / 100.0
        k = int(np.floor(h))
        k2 = min(k + 1, n - 1)
        work[lo:].partition([k - lo, k2 - lo] if k2 != k else k - lo)
        x, y = work[k], work[k2]
        out.append(float(x + (h - k) * (y - x)))
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
        out[key] = float(lo + width * (i + 1)) if i < len(counts) else float(h["max"])
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
