"""A/A false-positive rate and power of compare's verdicts on this machine: the run as the unit (rtscope's
method) beside the pooled tests it replaced (every sample a replicate), side by side on the same draws.

1. Real runs: 10 repetitions of one configuration (native exec sum, or BEAM exec sum with --beam), made by
   `rtscope run` in a temporary store. Their between-run and within-run variance is this machine's.
2. A/A: TRIALS random splits of those runs into 5 vs 5, each compared by both methods; the fraction with any
   `better`/`worse` verdict (any of mean, median, p99, max, stdev, Holm over the five) is the false-positive
   rate, with its binomial 95 % margin.
3. Power: the same splits with one side's samples scaled by 1 + change; the smallest change (of a grid) each
   method calls on the mean in 80 % of the splits.

The pooled method of before: Welch on all samples (mean), Mann-Whitney U (median), a bootstrap z-test (p99),
exact Mann-Whitney on the per-run maxima (max), Brown-Forsythe (stdev), Holm over the five; written here with
scipy.stats, as it was.

usage: bench/verdicts.py [--beam] [--trials N] [--iterations N]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats as sps

from rtscope.analysis.compare import Baseline, cells_from_samples, compare, holm
from rtscope.analysis.variance import components
from rtscope.store import Store

ALPHA = 0.05
SPEC = """name = "aa"
repetitions = 10
[[workload]]
name = "exec"
variants = ["sum"]
runtime = "{runtime}"
[workload.params]
iterations = {iterations}
pause_ms = 0
"""


def real_runs(runtime: str, iterations: int) -> list[np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        spec, db = Path(tmp) / "aa.toml", str(Path(tmp) / "aa.db")
        spec.write_text(SPEC.format(runtime=runtime, iterations=iterations))
        subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db], check=True,
                       stdout=subprocess.DEVNULL)
        store = Store(db)
        return [np.asarray(store.samples(r.id)[r.primary["name"]], dtype=np.float64) for r in store.runs()]


def pooled_any(a: list[np.ndarray], b: list[np.ndarray], rng: np.random.Generator) -> tuple[bool, float]:
    """The pooled tests of before: any significant after Holm, and the mean's p."""
    x, y = np.concatenate(a), np.concatenate(b)
    p_mean = sps.ttest_ind(x, y, equal_var=False).pvalue
    p_median = sps.mannwhitneyu(x, y).pvalue
    reps = [np.percentile(rng.choice(x, len(x)), 99) - np.percentile(rng.choice(y, len(y)), 99) for _ in range(200)]
    se = float(np.std(reps, ddof=1))
    diff = np.percentile(x, 99) - np.percentile(y, 99)
    p_p99 = 1.0 if se == 0 else float(math.erfc(abs(diff) / se / math.sqrt(2)))
    p_max = sps.mannwhitneyu([v.max() for v in a], [v.max() for v in b], method="exact").pvalue
    p_stdev = sps.levene(x, y, center="median").pvalue
    return min(holm([p_mean, p_median, p_p99, p_max, p_stdev])) <= ALPHA, p_mean


def run_level(a: list[np.ndarray], b: list[np.ndarray]) -> tuple[bool, float]:
    (k,) = compare(cells_from_samples({"a": a, "b": b}), Baseline.parse(["label=b"]), alpha=ALPHA).comparisons
    return any(r.verdict in ("better", "worse") for r in k.rows), k.row("mean").p


def splits(n_runs: int, trials: int, rng: np.random.Generator):
    for _ in range(trials):
        order = rng.permutation(n_runs)
        yield order[:n_runs // 2], order[n_runs // 2:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beam", action="store_true", help="BEAM exec sum instead of native")
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--iterations", type=int, default=2000)
    args = ap.parse_args()
    runtime = "beam" if args.beam else "native"
    runs = real_runs(runtime, args.iterations)
    (cell,) = cells_from_samples({"real": runs})
    c = components(cell, "mean")
    means = [float(r.mean()) for r in runs]
    print(f"{len(runs)} real runs of {runtime} exec sum × {args.iterations} calls: per-run means "
          f"{min(means) / 1e3:.2f}..{max(means) / 1e3:.2f} µs; between-run SD {c.between_sd / 1e3:.3f} µs, "
          f"within-run SE of a run's mean {c.within_se / 1e3:.3f} µs (between share {c.between_share:.0%})")

    rng = np.random.default_rng(1)
    margin = 1.96 * math.sqrt(ALPHA * (1 - ALPHA) / args.trials)
    fp = {"run level (rtscope)": 0, "pooled (before)": 0}
    for ia, ib in splits(len(runs), args.trials, rng):
        a, b = [runs[i] for i in ia], [runs[i] for i in ib]
        fp["run level (rtscope)"] += run_level(a, b)[0]
        fp["pooled (before)"] += pooled_any(a, b, rng)[0]
    print(f"\nA/A, {args.trials} random 5 vs 5 splits: fraction with any better/worse verdict "
          f"(alpha {ALPHA}, allowed ≤ {ALPHA + margin:.3f})")
    for name, k in fp.items():
        print(f"  {name:22s} {k / args.trials:.3f}")

    print("\npower on the mean, 5 vs 5 runs (one side scaled by 1 + change): fraction called")
    grid = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1.2)
    smallest = {}
    print("  change  " + "  ".join(f"{n:>20s}" for n in fp))
    for change in grid:
        hits = {name: 0 for name in fp}
        trials = max(60, args.trials // 3)
        for ia, ib in splits(len(runs), trials, rng):
            a, b = [runs[i] * (1 + change) for i in ia], [runs[i] for i in ib]
            hits["run level (rtscope)"] += run_level(a, b)[1] <= ALPHA
            hits["pooled (before)"] += pooled_any(a, b, rng)[1] <= ALPHA
        print(f"  {change:6.1%}  " + "  ".join(f"{hits[n] / trials:20.2f}" for n in fp))
        for name in fp:
            if name not in smallest and hits[name] / trials >= 0.8:
                smallest[name] = change
    print("smallest change of the grid called in 80 % of the splits: " +
          json.dumps({n: f"{v:.1%}" for n, v in smallest.items()}, ensure_ascii=False))
    print("(the pooled method's 'power' is worthless where its A/A rate is far above alpha)")


if __name__ == "__main__":
    main()
