"""A/A false-positive rate and power of compare's verdicts on this machine: the run as the unit (rtscope's
method) beside the pooled tests it replaced (every sample a replicate), side by side on the same draws.

1. Real runs: 10 repetitions of one configuration (native exec sum, or BEAM exec sum with --beam), made by
   `rtscope run` in a temporary store. Their between-run and within-run variance is this machine's.
2. A/A: TRIALS random splits of those runs into 5 vs 5, each compared by both methods; the fraction with any
   `better`/`worse` verdict (any of mean, median, p99, max, stdev, Holm over the five) is the false-positive
   rate, with its binomial 95 % margin.
3. Power: the same splits with one side's samples scaled by 1 + change; the smallest change (of a grid) each
   method calls on the mean in 80 % of the splits.
4. With --beam, then, the designs with a known effect (`--designs` rounds; 0 skips). Each round makes one real
   A/A trial per design, a `rtscope run` in a temporary store of BEAM exec sum n = N, two arms that are the same
   process (fullsweep_after 65535 vs 65534: no arm reaches a full sweep), 5 repetitions × ITERATIONS calls an
   arm: design `interleaved` (5 VMs, both arms in each, the default block) or design `runs` (5 vs 5 VMs of
   their own) -- the same total calls. Each trial is judged by compare (Holm over its five metrics) as it is
   (the A/A), and with one arm's samples multiplied by 1 + change for every change of --changes: a mean that
   differs by exactly that change, on this machine's real noise. (A change of n is not one: sum's time per
   call steps where a call crosses the VM's reduction budget; n = 4000 → 4120 is 11-14 % slower, 3000 → 3090
   no slower.) The trials alternate between the designs, so both get the same drift.

The pooled method of before: Welch on all samples (mean), Mann-Whitney U (median), a bootstrap z-test (p99),
exact Mann-Whitney on the per-run maxima (max), Brown-Forsythe (stdev), Holm over the five; written here with
scipy.stats, as it was.

usage: bench/verdicts.py [--beam] [--trials N] [--iterations N] [--designs ROUNDS] [--budget MINUTES]
                         [--changes 0,1,2,3,5,10] [--calls 1000] [--n 4000] [--keep DIR] [--rejudge DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats as sps

from rtscope.analysis import stats
from rtscope.analysis.compare import Baseline, Cell, cells_from_samples, compare, holm, load_cells
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


TRIAL_SPEC = """name = "trial"
design = "{design}"
repetitions = {runs}
[[workload]]
name = "exec"
variants = ["sum"]
runtime = "beam"
[workload.params]
iterations = {calls}
pause_ms = 0
n = {n}
[workload.settings]
fullsweep_after = [65535, 65534]
"""
BASELINE, SCALED_FULLSWEEP = "fullsweep_after=65535", 65534   # the scaled arm: fullsweep_after 65534
DESIGNS = ("interleaved", "runs")


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


@dataclass
class Point:
    """The judgements of one (change, design)."""

    change: float
    design: str
    called: int = 0             # the mean's verdict in the change's direction (change 0: any direction)
    any_verdict: int = 0        # any of the five metrics better/worse (the A/A rate)
    median_called: int = 0      # the median's verdict, likewise
    trials: int = 0
    estimates: list[float] = field(default_factory=list)    # the mean's relative change
    medians: list[float] = field(default_factory=list)      # the median's
    removed: list[float] = field(default_factory=list)      # variance_removed of the mean (interleaved)
    halfwidths: list[float] = field(default_factory=list)   # the mean's 95 % interval half-width / baseline
    cluster: int = 0            # trials whose standard error was the run-level one


def run_trial(design: str, args: argparse.Namespace, index: int) -> str | None:
    """One real A/A trial: `rtscope run` into a store in --keep's directory or a temporary one; its path."""
    where = Path(args.keep or args.scratch)
    where.mkdir(parents=True, exist_ok=True)
    stem = f"{design}-{index}"
    spec, db = where / f"{stem}.toml", str(where / f"{stem}.db")
    spec.write_text(TRIAL_SPEC.format(design=design, runs=args.runs, calls=args.calls, n=args.n))
    r = subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        print(f"  trial {stem} failed (exit {r.returncode}): {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return db


def scaled(cell: Cell, factor: float) -> Cell:
    """The cell with every sample multiplied by `factor` (its statistics recomputed): a configuration whose mean
    differs by exactly factor − 1, with the noise the real one had."""
    samples = cell.samples * factor
    per_run = {r.id: stats.summarize(samples[a:b]) for r, (a, b) in zip(cell.sample_runs, cell.bounds)}
    return dataclasses.replace(cell, samples=samples, per_run=per_run, stats=stats.summarize(samples),
                               _sorted=None, _bounds=None)


def judge(points: list[Point], design: str, db: str) -> None:
    """Count one stored A/A trial at every change of `points`: compare's verdicts with the scaled arm."""
    store = Store(db)
    cells = load_cells(store, store.runs())
    for pt in (p for p in points if p.design == design):
        trial = [scaled(c, 1 + pt.change) if c.config.get("fullsweep_after") == SCALED_FULLSWEEP else c for c in cells]
        (k,) = compare(trial, Baseline.parse([BASELINE]), alpha=ALPHA).comparisons
        if k.design != design:
            raise SystemExit(f"{db}: compare judged design {k.design}, the trial ran {design}")
        mean, median = k.row("mean"), k.row("median")
        pt.trials += 1
        pt.any_verdict += any(row.verdict in ("better", "worse") for row in k.rows)
        wanted = ("worse",) if pt.change > 0 else ("better", "worse")
        pt.called += mean.verdict in wanted
        pt.median_called += median.verdict in wanted
        pt.estimates.append(mean.value / mean.baseline - 1)
        pt.medians.append(median.value / median.baseline - 1)
        if mean.ci:
            pt.halfwidths.append((mean.ci[1] - mean.ci[0]) / 2 / mean.baseline)
        paired = mean.extra.get("paired")
        if paired:
            if paired.get("variance_removed") is not None:
                pt.removed.append(paired["variance_removed"])
            pt.cluster += bool(paired.get("run_as_cluster"))


def grid(text: str) -> list[Point]:
    changes = sorted({float(c) / 100 for c in text.split(",")} | {0.0})
    if any(c < 0 for c in changes):
        raise SystemExit("--changes: percentages of 0 or more, e.g. 0,1,2,3,5,10")
    return [Point(c, d) for c in changes for d in DESIGNS]


def rejudge(directory: str, changes: str) -> list[Point]:
    """The trials kept by --keep in `directory`, judged again (by today's compare)."""
    points = grid(changes)
    dbs = sorted(Path(directory).glob("*.db"))
    for db in dbs:
        try:
            judge(points, db.stem.split("-")[0], str(db))
        except ValueError:      # a trial cut short: no comparison
            print(f"  {db.name}: no comparison (cut short?)", file=sys.stderr)
    if not dbs:
        raise SystemExit(f"--rejudge: no trial stores (*.db) in {directory}")
    return points


def margin(k: int, n: int) -> float:
    """The binomial 95 % half-width of k / n (Wilson's, usable at 0 and n)."""
    if n == 0:
        return math.nan
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(centre + half - p, p - (centre - half))


def design_trials(args: argparse.Namespace) -> None:
    points = grid(args.changes)
    deadline = time.monotonic() + args.budget * 60 if args.budget else math.inf
    calls = 2 * args.runs * args.calls
    print(f"\ndesigns with a known effect: real A/A trials of BEAM exec sum n = {args.n}, {args.runs} repetitions × "
          f"{args.calls} calls an arm ({calls:,} calls a trial in either design), pause_ms 0, one arm's samples × "
          f"(1 + change); up to {args.designs} rounds of {len(DESIGNS)} trials"
          + (f" or {args.budget:g} minutes" if args.budget else ""), flush=True)
    start, failed = time.monotonic(), 0
    with tempfile.TemporaryDirectory() as scratch:
        args.scratch = scratch
        for rnd in range(args.designs):
            per_round = (time.monotonic() - start) / rnd if rnd else 0.0
            if rnd and time.monotonic() + per_round > deadline:
                print(f"  budget: stopped after {rnd} rounds", flush=True)
                break
            for design in (DESIGNS if rnd % 2 == 0 else DESIGNS[::-1]):
                db = run_trial(design, args, rnd)
                if db is None:
                    failed += 1
                    continue
                judge(points, design, db)
                if not args.keep:
                    Path(db).unlink()
            print(f"  round {rnd + 1}: {time.monotonic() - start:.0f} s", flush=True)
    print_points(points)
    print(f"wall time {time.monotonic() - start:.0f} s" + (f"; {failed} trials failed (not counted)" if failed else ""))


def print_points(points: list[Point]) -> None:
    changes = sorted({p.change for p in points})
    print(f"\nfraction of trials whose mean compare calls (Holm over the five metrics, alpha {ALPHA}; change 0: "
          "the A/A, any direction), ± its 95 % binomial margin (Wilson)")
    print(f"  {'change':>6s}  " + "  ".join(f"{d:>42s}" for d in DESIGNS))
    smallest: dict[str, float | None] = {d: None for d in DESIGNS}
    for c in changes:
        cells = []
        for d in DESIGNS:
            p = next(q for q in points if q.change == c and q.design == d)
            if not p.trials:
                cells.append(f"{'no trials':>42s}")
                continue
            est, med = float(np.mean(p.estimates)), float(np.median(p.medians))
            cells.append(f"{p.called / p.trials:6.2f} ±{margin(p.called, p.trials):.2f} "
                         f"of {p.trials:3d} (Δ {est:+6.1%}, median {med:+6.1%})")
            if c > 0 and smallest[d] is None and p.called / p.trials >= 0.8:
                smallest[d] = c
        print(f"  {c:6.0%}  " + "  ".join(cells))
    print("  (Δ: the trials' measured change of the mean, averaged; median: the median over the trials of the measured "
          "change of the median)")
    aa = [p for p in points if p.change == 0 and p.trials]
    for p in aa:
        print(f"A/A {p.design}: any of the five metrics called in {p.any_verdict} of {p.trials} "
              f"({p.any_verdict / p.trials:.3f} ± {margin(p.any_verdict, p.trials):.3f}; alpha {ALPHA})")
    print("smallest change of the grid called in 80 % of the trials: " +
          json.dumps({d: (f"{v:.0%}" if v is not None else f"above {changes[-1]:.0%}") for d, v in smallest.items()},
                     ensure_ascii=False))
    removed = [r for p in points if p.design == "interleaved" for r in p.removed]
    inter = [p for p in points if p.design == "interleaved" and p.trials]
    if removed:
        print(f"interleaved, the mean: pairing removed {np.median(removed):.0%} of the variance (median of "
              f"{len(removed)} trials, {np.min(removed):.0%}..{np.max(removed):.0%}); the run-level (cluster) "
              f"standard error was the larger in {sum(p.cluster for p in inter)} of "
              f"{sum(p.trials for p in inter)} trials")
    for d in DESIGNS:
        hw = [h for p in points if p.design == d for h in p.halfwidths]
        if hw:
            need = 1.43 * float(np.median(hw))   # called in 80 % where the change is 1.43 half-widths (z .84/1.96)
            print(f"{d}: the mean's 95 % interval ±{np.median(hw):.1%} (median of {len(hw)} trials): called in "
                  f"80 % from about {need:.1%} (before Holm); a 3 % change would need about "
                  f"{(need / 0.03) ** 2:.0f}× the calls")
    print("the median's verdict (block medians paired; Welch on per-run medians), same trials: " + "; ".join(
        f"{p.design} {p.change:.0%} {p.median_called}/{p.trials}" for p in points if p.trials))
    print("; ".join(f"{d}: {max((p.trials for p in points if p.design == d), default=0)} trials" for d in DESIGNS))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--beam", action="store_true", help="BEAM exec sum instead of native")
    ap.add_argument("--trials", type=int, default=300, help="random 5 vs 5 splits of the 10 real runs")
    ap.add_argument("--iterations", type=int, default=2000, help="calls of each of the 10 real runs")
    ap.add_argument("--designs", type=int, default=3, metavar="ROUNDS",
                    help="--beam: rounds of real interleaved and runs trials, one per change and design (0: none)")
    ap.add_argument("--budget", type=float, default=0.0, metavar="MINUTES",
                    help="--beam: stop the design rounds when the next would end after this (0: no limit)")
    ap.add_argument("--changes", default="0,1,2,3,5,10",
                    help="--beam: changes of one arm's samples in %%; 0, the A/A, is always judged")
    ap.add_argument("--calls", type=int, default=1000, help="--beam: calls of a configuration per run")
    ap.add_argument("--runs", type=int, default=5, help="--beam: repetitions of a configuration per trial")
    ap.add_argument("--n", type=int, default=4000, help="--beam: sum's n of the baseline arm")
    ap.add_argument("--keep", metavar="DIR", help="--beam: keep every trial's spec and store in DIR")
    ap.add_argument("--skip-splits", action="store_true", help="--beam: only the design trials")
    ap.add_argument("--rejudge", metavar="DIR", help="judge the trials kept by --keep in DIR again (no runs)")
    args = ap.parse_args()
    if args.rejudge:
        print_points(rejudge(args.rejudge, args.changes))
        return
    for name in ("designs", "calls", "runs", "n", "trials", "iterations"):
        if getattr(args, name) < (0 if name == "designs" else 2 if name in ("runs", "calls") else 1):
            raise SystemExit(f"--{name}: too small ({getattr(args, name)})")
    if args.skip_splits:
        if not args.beam:
            raise SystemExit("--skip-splits: only with --beam (the design trials are the BEAM's)")
        design_trials(args)
        return
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
    if args.beam and args.designs:
        design_trials(args)


if __name__ == "__main__":
    main()
