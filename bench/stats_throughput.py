"""Statistics throughput: summarise 10^7 stored samples (load from the store + summary).

Target: >= 20 M samples/s on the 2-core reference machine. Prints the best
and median of several repetitions, for load+summarise and summarise alone.
Usage: python bench/stats_throughput.py [N_SAMPLES] [REPETITIONS]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rtscope import samplefile, stats
from rtscope.results import run_stats
from rtscope.store import Store

TARGET = 20e6


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
        full, only = [], []
        for _ in range(reps):
            t0 = time.perf_counter()
            s = run_stats(st, run)
            t1 = time.perf_counter()
            stats.summarize(values)
            t2 = time.perf_counter()
            full.append(t1 - t0)
            only.append(t2 - t1)
        assert s["n"] == n
    for label, times in (("load + summarise", full), ("summarise only", only)):
        print(f"{label:17}: {n:,} samples, best {n / min(times) / 1e6:6.1f} M samples/s, "
              f"median {n / statistics.median(times) / 1e6:6.1f} M samples/s")
    best = n / min(full)
    print(f"target >= {TARGET / 1e6:.0f} M samples/s (load + summarise): {'met' if best >= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
