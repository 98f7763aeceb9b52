"""The tail analysis on this machine: coverage of its intervals, refusal of dependent samples, its speed, and
its calibration against fresh real runs (docs/tail.md).

1. Coverage: SEEDS seeds per synthetic distribution of known tail (tests/tail_synthetic.py: a normal body with
   a generalised Pareto tail of shape 0.1, an exponential tail, a bounded tail of shape −0.2), 10^5 samples
   each: how often a bound is claimed, and how often the true latency exceeded with p = 1e-5 and 1e-7 lies in
   the 95 % interval (of the seeds claimed, and of all seeds: a refusal counts as a miss). AR(1) series
   (φ = 0.3, 0.5, 0.7): how often the independence check refuses; i.i.d. normal samples: how often claimed.
2. Speed: `tail_bound.of_run` on a stored run of 10^6 samples (loading included), median of 5.
3. Real runs (--real): a native exec sum run and a native timer run of 10^5 samples each (`rtscope run`);
   when a bound is claimed at p = 1e-4 and 1e-5, a fresh run of 10^6 samples of the same configuration is
   counted against it: observed exceedances of the upper 95 % limit against the Poisson 99 % upper limit of
   n·p, and of the point estimate against n·p (the point is "pessimistic beyond 3×" when observed < n·p/3).

   --synthetic-calibration does the same with stored synthetic runs (the code path where this machine refuses).

usage: bench/tail.py [--seeds N] [--real] [--synthetic-calibration] [--skip-coverage]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import tail_synthetic as ts  # noqa: E402
from report_fixtures import add_run  # noqa: E402

from rtscope.analysis import tail_bound  # noqa: E402
from rtscope.store import Store  # noqa: E402

N = 100_000


def coverage(seeds: int) -> None:
    print(f"coverage: {seeds} seeds × {N:,} samples per distribution; true level inside the 95 % interval")
    print(f"  {'distribution':14s} {'claimed':>8s} {'p=1e-5 (of claimed / all)':>27s} "
          f"{'p=1e-7 (of claimed / all)':>27s} {'fit s':>6s}")
    for name, shape in ts.TAILS.items():
        inside = {1e-5: 0, 1e-7: 0}
        claimed, times = 0, []
        for seed in range(seeds):
            x = ts.spliced(N, shape, np.random.default_rng(seed))
            t0 = time.perf_counter()
            t = tail_bound.analyse([x], {"run": seed})
            times.append(time.perf_counter() - t0)
            if not t.claimed:
                continue
            claimed += 1
            for lv in t.levels:
                if lv.p in inside:
                    lo, hi = lv.ci
                    inside[lv.p] += lo <= ts.true_level(shape, lv.p) <= (np.inf if hi is None else hi)
        cells = [f"{inside[p] / max(claimed, 1):.2f} / {inside[p] / seeds:.2f}" for p in inside]
        print(f"  {name:14s} {claimed / seeds:8.2f} {cells[0]:>27s} {cells[1]:>27s} {statistics.median(times):6.2f}")
    for phi in (0.3, 0.5, 0.7):
        refused = 0
        for seed in range(seeds):
            t = tail_bound.analyse([ts.ar1(N, phi, np.random.default_rng(seed))], {"run": seed}, gev=False)
            refused += (not t.claimed) and t.failed.name == "independence"
        print(f"  AR(1) φ = {phi}: refused by the independence check in {refused / seeds:.2f} of the seeds")
    claimed = sum(tail_bound.analyse([ts.iid_normal(N, np.random.default_rng(s))], {"run": s}, gev=False).claimed
                  for s in range(seeds))
    print(f"  i.i.d. normal: claimed in {claimed / seeds:.2f} of the seeds")


def speed() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(str(Path(tmp) / "speed.db"))
        x = ts.spliced(1_000_000, 0.1, np.random.default_rng(1)).astype(np.int64)
        run = store.get_run(add_run(store, Path(tmp), x))
        tail_bound.of_run(store, run)
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            t = tail_bound.of_run(store, run)
            times.append(time.perf_counter() - t0)
        print(f"\nspeed: tail of a stored 10^6-sample run (loading its samples included): median "
              f"{statistics.median(times):.2f} s of 5 (min {min(times):.2f}, max {max(times):.2f}); "
              f"claimed {t.claimed}")


SPEC = """name = "tail-{name}"
[[workload]]
name = "{workload}"
variants = ["{variant}"]
runtime = "native"
[workload.params]
{count} = {n}
{extra}
"""
CONFIGS = {"exec": ("exec", "sum", "iterations", "pause_ms = 0"),
           "timer": ("timer", "absolute", "loops", "interval_us = 100")}


def real_run(tmp: Path, name: str, n: int):
    workload, variant, count, extra = CONFIGS[name]
    spec, db = tmp / f"{name}-{n}.toml", str(tmp / f"{name}-{n}.db")
    spec.write_text(SPEC.format(name=name, workload=workload, variant=variant, count=count, n=n, extra=extra))
    subprocess.run([sys.executable, "-m", "rtscope", "run", str(spec), "--db", db], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(db)
    (run,) = store.runs()
    return store, run


def synthetic_run(tmp: Path, name: str, n: int):
    """A stored run of the generalised Pareto (shape 0.1) synthetic distribution in place of a real one."""
    store = Store(str(tmp / f"{name}-{n}.db"))
    add_run(store, tmp, ts.spliced(n, 0.1, np.random.default_rng([n, len(name)])).astype(np.int64))
    return store, store.runs()[0]


def calibration(make_run=real_run, what: str = "real runs") -> None:
    print(f"\n{what}: a bound from 10^5 samples checked against a fresh run of 10^6 of the same configuration")
    with tempfile.TemporaryDirectory() as tmp:
        for name in CONFIGS:
            store, run = make_run(Path(tmp), name, 100_000)
            t0 = time.perf_counter()
            t = tail_bound.of_run(store, run)
            fit_s = time.perf_counter() - t0
            if not t.claimed:
                print(f"  {name}: refused ({fit_s:.2f} s): {t.refused_because}")
                continue
            f = t.fit
            print(f"  {name}: claimed ({fit_s:.2f} s): threshold {f.ex.u / 1e3:.2f} µs, shape {f.shape:+.3f}, "
                  f"{f.ex.k} exceedances")
            store2, run2 = make_run(Path(tmp), name, 1_000_000)
            fresh = np.asarray(store2.primary_samples(run2), dtype=float)
            for lv in t.levels:
                if lv.p not in (1e-4, 1e-5):
                    continue
                expected = len(fresh) * lv.p
                limit = stats.poisson.ppf(0.99, expected)
                hi = lv.ci[1]
                over_hi = int(np.count_nonzero(fresh > hi)) if hi is not None else 0
                over_point = int(np.count_nonzero(fresh > lv.value))
                print(f"    p {lv.p:.0e}: point {lv.value / 1e3:.2f} µs exceeded {over_point} times (n·p = "
                      f"{expected:.0f}{', pessimistic beyond 3×' if over_point < expected / 3 else ''}); "
                      f"upper limit {'-' if hi is None else f'{hi / 1e3:.2f} µs'} exceeded {over_hi} times "
                      f"(Poisson 99 % limit {limit:.0f}: {'ok' if over_hi <= limit else 'EXCEEDED'})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--real", action="store_true", help="also make real runs (about 3 minutes)")
    ap.add_argument("--skip-coverage", action="store_true")
    ap.add_argument("--synthetic-calibration", action="store_true",
                    help="the calibration on stored synthetic runs (shape 0.1) instead of real ones")
    args = ap.parse_args()
    if not args.skip_coverage:
        coverage(args.seeds)
    speed()
    if args.real:
        calibration()
    if args.synthetic_calibration:
        calibration(synthetic_run, "synthetic runs")


if __name__ == "__main__":
    main()
