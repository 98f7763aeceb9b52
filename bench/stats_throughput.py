"""Statistics throughput: summarise 10^7 stored samples (load from the store + summary).

Target: >= 100 M samples/s (median, load + summarise) on the 2-core reference
machine. Prints the best and median of several repetitions for load +
summarise and for summarise alone, and, side by side on the same data, the
float path (one float64 copy, successive np.partition) that integer samples
took before the counting selection.
Usage: python bench/stats_throughput.py [N_SAMPLES] [REPETITIONS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rtscope import samplefile
from rtscope.analysis import stats
from rtscope.analysis.results import run_stats
from rtscope.store import Store

TARGET = 100e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    rng = np.random.default_rng(1)
    values = (5_000_000 + rng.gamma(2.0, 20_000, n)).astype(np.int64)  # exec-like durations, ns
    with tempfile.TemporaryDirectory() as tmp:
        st = Store(str(Path(tmp) / "bench.db"))
        cols = [samplefile.Column("duration", "ns", "i64")]
        header = samplefile.make_header("exec", "sum", "native", "bench", "0", "now", cols)
        run_id = st.add_run(samplefile.SampleFile(header, cols, {"duration": values}), {})
        run = st.get_run(run_id)
        times: dict[str, list[float]] = {"load + summarise": [], "summarise only": [], "float path": []}
        for _ in range(reps):
            t0 = time.perf_counter()
            s = run_stats(st, run)
            t1 = time.perf_counter()
            fast = stats.summarize(values)
            t2 = time.perf_counter()
            slow = stats._summarize_floats(values.astype(np.float64))
            t3 = time.perf_counter()
            for key, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
                times[key].append(dt)
        assert s["n"] == n and all(np.isclose(fast[k], slow[k], rtol=1e-9) for k in fast)
    for label, ts in times.items():
        print(f"{label:17}: {n:,} samples, best {n / min(ts) / 1e6:6.1f} M samples/s, "
              f"median {n / statistics.median(ts) / 1e6:6.1f} M samples/s")
    ratio = statistics.median(times["float path"]) / statistics.median(times["summarise only"])
    print(f"summarise: integer selection {ratio:.2f}x faster than the float path (medians, same data)")
    median = n / statistics.median(times["load + summarise"])
    print(f"target >= {TARGET / 1e6:.0f} M samples/s (load + summarise, median): {'met' if median >= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
