"""`rtscope tune` against the full grid on study 1's space, side by side in one run.

The space: exec sum on the BEAM, fullsweep_after (0, 32767, 65535, 131071) × min_heap_size (34, 233, 6765,
46422, 196418) × priority (low, normal, high) = 60 cells. The grid runs every cell 3 times (`rtscope run`);
`rtscope tune` searches the same space (the same lists) with 30 % of the grid's runs, the confirmation
included, goal mean, baseline fullsweep_after=0 min_heap_size=233. Both in fresh processes, wall clock.

The check: the tune's confirmed winner must not be significantly worse than the grid's best, judged by the
grid's own runs (Welch's t-test on the mean, as `rtscope compare` does). Prints both winners, the budgets and
the wall times.

usage: bench/tune_vs_grid.py [--check] [--iterations N] [--keep DIR]
  --check   exit 1 if the tune's winner is significantly worse than the grid's best
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FULLSWEEP = (0, 32767, 65535, 131071)
MIN_HEAP = (34, 233, 6765, 46422, 196418)
PRIORITY = ("low", "normal", "high")
REPETITIONS = 3
SHARE = 0.30


def body(iterations: int) -> str:
    return (f'[[workload]]\nname = "exec"\nvariants = "sum"\nruntime = "beam"\n'
            f'params = {{ iterations = {iterations}, pause_ms = 0 }}\n\n[workload.settings]\n'
            f"fullsweep_after = {list(FULLSWEEP)}\nmin_heap_size = {list(MIN_HEAP)}\n"
            f"priority = {json.dumps(list(PRIORITY))}\n")


def rtscope(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "rtscope", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"rtscope {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - start, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--iterations", type=int, default=1000, help="calls per run (default 1000)")
    ap.add_argument("--keep", type=Path, help="keep the store and specs in this directory")
    a = ap.parse_args()

    from rtscope.analysis.compare import compare_cells, load_cells
    from rtscope.runtimes import RUNTIMES
    from rtscope.store import Store
    why = RUNTIMES["beam"].unavailable()
    if why:
        print(f"skipped: runtime beam is not available: {why}")
        return 0
    cells = len(FULLSWEEP) * len(MIN_HEAP) * len(PRIORITY)
    grid_runs = cells * REPETITIONS
    budget = int(grid_runs * SHARE)
    tmp = a.keep or Path(tempfile.mkdtemp(prefix="rtscope-tune-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    db = str(tmp / "bench.db")
    grid = tmp / "grid.toml"
    grid.write_text(f'name = "grid"\nseed = 1\nrepetitions = {REPETITIONS}\n\n' + body(a.iterations))
    tune = tmp / "tune.toml"
    tune.write_text(f'name = "tune"\nseed = 1\n\n[tune]\ngoal = "mean"\nbudget = {budget}\n'
                    'baseline = { fullsweep_after = 0, min_heap_size = 233 }\n\n' + body(a.iterations))

    grid_s, _ = rtscope("run", str(grid), "--db", db)
    tune_s, proc = rtscope("tune", str(tune), "--db", db, "--json")
    doc = json.loads(proc.stdout)

    store = Store(db)
    grid_exp = min(r.experiment_id for r in store.runs() if r.experiment_id != doc["experiment"])
    grid_cells = load_cells(store, store.runs(experiment_id=grid_exp))
    best_grid = min(grid_cells, key=lambda c: c.metric("mean"))

    def grid_cell_of(settings: dict):
        return next(c for c in grid_cells if all(c.config.settings_dict.get(k) == v for k, v in settings.items())
                    and all(c.config.settings_dict.get(k) in (None, d) for k, d in
                            (("priority", "normal"),) if k not in settings))

    tuned = grid_cell_of(doc["best"]["settings"])
    row = compare_cells(tuned, best_grid).row("mean")
    worse = row.p is not None and row.p <= 0.05 and row.direction > 0

    def knobs(settings: dict) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(settings.items()) if k in ("fullsweep_after", "min_heap_size",
                                                                                   "priority"))

    print(f"space: {cells} cells (fullsweep_after × min_heap_size × priority), exec sum on the BEAM, "
          f"{a.iterations} calls per run; goal mean")
    print(f"grid : {grid_runs} runs ({REPETITIONS} per cell) in {grid_s:.1f} s; best {knobs(best_grid.config.settings_dict)}"
          f" mean {best_grid.metric('mean') / 1e3:.2f} µs")
    print(f"tune : {doc['runs_used']} runs (budget {budget} = {SHARE:.0%} of the grid's, confirmation included) in "
          f"{tune_s:.1f} s; verdict {doc['verdict']}; best {knobs(doc['best']['settings']) or 'the baseline'}; "
          f"{doc['improvement']['change']:+.1%} on the mean against the baseline")
    print(f"the tune's winner by the grid's own runs: mean {tuned.metric('mean') / 1e3:.2f} µs, "
          f"{(row.ratio or 1) - 1:+.1%} against the grid's best (Welch p = {row.p:.2g}): "
          + ("SIGNIFICANTLY WORSE" if worse else "not significantly worse" if row.direction > 0 else
             "as good or better"))
    print("(timings on a machine shared with other work: noisy)")
    return 1 if a.check and worse else 0


if __name__ == "__main__":
    sys.exit(main())
