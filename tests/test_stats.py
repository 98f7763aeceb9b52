import math
import os
import subprocess
import sys

import numpy as np
import pytest

from rtscope.analysis import stats

pytestmark = pytest.mark.fast


def test_summary_against_hand_computed_values():
    # values 1..10: mean 5.5, sample variance 55/6, type-7 percentiles at h = 9p/100
    s = stats.summarize(np.arange(1, 11))
    assert s["n"] == 10 and s["min"] == 1 and s["max"] == 10
    assert s["mean"] == pytest.approx(5.5)
    assert s["var"] == pytest.approx(55 / 6)
    assert s["stdev"] == pytest.approx((55 / 6) ** 0.5)
    assert s["p50"] == pytest.approx(5.5)
    assert s["p90"] == pytest.approx(9.1)       # h = 8.1 -> 9 + 0.1
    assert s["p99"] == pytest.approx(9.91)      # h = 8.91
    assert s["p999"] == pytest.approx(9.991)
    assert s["p9999"] == pytest.approx(9.9991)


def test_summary_of_study_like_values():
    s = stats.summarize(np.array([4990, 5715, 4900, 5000]))
    assert s["mean"] == pytest.approx(5151.25)
    assert s["var"] == pytest.approx(np.var([4990, 5715, 4900, 5000], ddof=1))
    assert s["p50"] == pytest.approx(4995)


def test_single_and_empty():
    one = stats.summarize(np.array([7]))
    assert one["var"] == 0.0 and one["p99"] == 7 and one["n"] == 1
    empty = stats.summarize(np.array([]))
    assert empty["n"] == 0 and empty["mean"] is None


def test_histogram_counts_and_overflow():
    h = stats.histogram(np.array([0, 999, 1000, 2500, 2999, 3000, 50_000, -1]), bucket_width=1000, buckets=3)
    assert h.counts.tolist() == [2, 1, 2]
    assert h.overflow == 2 and h.underflow == 1
    assert h.total == 8
    assert h.edges.tolist() == [0, 1000, 2000, 3000]


def test_histogram_rejects_bad_width():
    with pytest.raises(ValueError, match="bucket width"):
        stats.histogram(np.array([1]), 0, 10)
    with pytest.raises(ValueError, match="bucket count"):
        stats.histogram(np.array([1]), 1, 0)


def test_summarize_histogram_is_exact_where_it_can_be():
    # 1 µs buckets: 90 values in [1,2) µs, 9 in [5,6) µs, one overflow of 400 µs
    h = {"unit": "ns", "bucket_width": 1000, "min_value": 0, "counts": [0, 90, 0, 0, 0, 9], "overflow": 1,
         "n": 100, "min": 1100, "max": 400_000, "sum": 90 * 1500 + 9 * 5500 + 400_000}
    s = stats.summarize_histogram(h)
    assert s["n"] == 100 and s["min"] == 1100 and s["max"] == 400_000
    assert s["mean"] == pytest.approx(h["sum"] / 100)
    assert s["p50"] == 2000          # upper edge of the bucket holding rank 50
    assert s["p99"] == 6000          # rank 99 is the last value in [5,6) µs
    assert s["p999"] == 400_000      # rank 100 lies in the overflow: the exact max


@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 10_001])
def test_summary_matches_numpy_reference(n):
    a = np.random.default_rng(n).integers(-10**9, 10**9, n)
    s = stats.summarize(a)
    ref = np.percentile(a, list(stats.PERCENTILES.values()))
    assert s["min"] == a.min() and s["max"] == a.max()
    assert [s[k] for k in stats.PERCENTILES] == pytest.approx(ref, rel=1e-12)
    assert s["mean"] == pytest.approx(a.mean(), rel=1e-12)
    assert s["var"] == pytest.approx(np.var(a, ddof=1) if n > 1 else 0.0, rel=1e-9)


def test_summary_of_chunks_equals_summary_of_joined_array():
    a = np.random.default_rng(3).integers(0, 10**6, 1001)
    assert stats.summarize([a[:10], a[10:500], a[500:]]) == stats.summarize(a)
    assert stats.summarize([])["n"] == 0


def test_variance_of_many_floats_is_exact_to_an_ulp_and_the_same_whatever_the_threads():
    """A float (or a wide integer) sample's variance: within a few ulps of the exact value, and not from BLAS,
    whose dot of more than 10,000 values runs on threads (slow on a busy machine) and gives a last digit that
    depends on their number: the same in a process limited to one BLAS thread."""
    code = ("import numpy as np; from rtscope.analysis import stats; "
            "x = np.random.default_rng(7).gamma(3, 30_000, 200_000) + 5e6; "
            "w = (np.random.default_rng(8).integers(0, 2 ** 40, 300_000) * 1024); "
            "print(repr((stats.summarize(x)['var'], stats.summarize(w)['var'])))")
    here = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    one = eval(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}).stdout)
    assert here == one
    x = np.random.default_rng(7).gamma(3, 30_000, 200_000) + 5e6
    mean = math.fsum(x.tolist()) / len(x)
    exact = math.fsum(((x - mean) ** 2).tolist()) / (len(x) - 1)
    assert here[0] == pytest.approx(exact, rel=1e-14)
