"""The false-positive rate of compare --tail's row: A/A comparisons of simulated runs (bench for docs/analysis.md).

Each comparison is 5 vs 5 runs of the same distribution (a normal body with a generalised Pareto tail of the
given shape, tests/tail_synthetic.py), each run's bound at p = 1e-9 from tail_bound.run_bound (its checks corrected
for 5 runs), then compare's run_level_row: the Welch t-test of the row. Prints, per shape, how many
comparisons were tested (every run with a bound) and the share with p < 0.05 (the nominal rate is 0.05).

With --factor F (power): the second side's samples are the same distribution × F (its bound × F), and the
share is that of the comparisons called worse at p < 0.05 (one test, no Holm).

usage: bench/tail_row.py [--comparisons M] [--runs R] [--samples N] [--seed S] [--factor F] [--shape X]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import tail_synthetic as ts  # noqa: E402

from rtscope.analysis import tail_bound  # noqa: E402
from rtscope.analysis.compare import TAIL_TEST, run_level_row  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--comparisons", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5, help="runs a side")
    ap.add_argument("--samples", type=int, default=10_000, help="samples a run")
    ap.add_argument("--seed", type=int, default=123)
    ap.add_argument("--factor", type=float, default=1.0, help="the second side × F (1: A/A)")
    ap.add_argument("--shape", type=float, action="append", help="tail shape (repeatable; default 0.1 and 0)")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    r = args.runs
    for shape in args.shape or (0.1, 0.0):
        start = time.perf_counter()
        hits = tested = 0
        for _ in range(args.comparisons):
            values = [tail_bound.run_bound((1.0 if i < r else args.factor) * ts.spliced(args.samples, shape, rng), None,
                                     r).value for i in range(2 * r)]
            if any(v is None for v in values):
                continue
            tested += 1
            row = run_level_row("tail", values[r:], values[:r], TAIL_TEST)
            hits += row.p < 0.05 and (args.factor == 1.0 or row.direction > 0)
        what = "A/A" if args.factor == 1.0 else f"× {args.factor:g}"
        print(f"shape {shape:+.1f}: {what} {r} vs {r} runs of {args.samples:,}: tested {tested} of {args.comparisons}, "
              f"p < 0.05 in {hits} ({hits / max(tested, 1):.3f}); {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()
