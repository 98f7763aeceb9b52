"""The store under many writers: PostgreSQL beside SQLite (WAL), measured in one run.

  1. 8 concurrent writer processes x 100 runs x 10,000 samples into each backend: runs/s and samples/s,
     and a check that every run arrived once (0 lost, 0 duplicated, every run whole);
  2. `rtscope compare` + `rtscope report` over 10,000 stored runs (20 configurations x 500 repetitions,
     1,000 samples each) read from PostgreSQL (target: <= 60 s).

PostgreSQL is a real server started for the bench (tests/pgserver.py); run as root or as a user that can
run initdb. Usage: .venv/bin/python bench/store_writers.py [--writers 8] [--runs 100] [--samples 10000]
                   [--report-runs 10000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pgserver  # noqa: E402

from rtscope.experiment import execute as exp_mod
from rtscope import samplefile  # noqa: E402
from rtscope.experiment import spec as spec_mod  # noqa: E402
from rtscope.store import Store  # noqa: E402


def sample_file(n: int, seed: int, variant: str = "sum", settings: dict | None = None) -> samplefile.SampleFile:
    rng = np.random.default_rng(seed)
    cols = [samplefile.Column("duration", "ns", "i64")]
    header = samplefile.make_header("exec", variant, "native", "bench", "0", "2026-01-01T00:00:00Z", cols,
                                    settings or {}, {"iterations": n})
    return samplefile.SampleFile(header, cols, {"duration": rng.integers(1000, 5000, n)}, {"finished_at": "x"})


def writer(url: str, experiment_id: int, first: int, count: int, n: int) -> None:
    store = Store(url)
    for i in range(first, first + count):
        store.add_run(sample_file(n, i), {"bench": True}, experiment_id=experiment_id, plan_index=i,
                      cell="exec/sum/native", repetition=i + 1)


def writers(url: str, n_writers: int, runs: int, n: int) -> tuple[float, int]:
    store = Store(url)
    spec = spec_mod.parse('name = "writers"\n[[workload]]\nname = "exec"\nvariants = "sum"\n')
    exp = exp_mod.start(store, spec, [], 0, None)
    procs = [mp.Process(target=writer, args=(url, exp.id, w * runs, runs, n)) for w in range(n_writers)]
    start = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    wall = time.perf_counter() - start
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    stored = store.runs(experiment_id=exp.id)
    indexes = sorted(r["plan_index"] for r in stored)
    expected = list(range(n_writers * runs))
    lost = len(set(expected) - set(indexes))
    duplicated = len(indexes) - len(set(indexes))
    whole = all(len(store.primary_samples(r)) == n for r in stored[:: max(1, len(stored) // 50)])
    print(f"   {url.split(':')[0]:10} {wall:6.1f} s  {len(stored) / wall:7.1f} runs/s  "
          f"{len(stored) * n / wall / 1e6:6.2f} M samples/s  lost {lost}, duplicated {duplicated}, "
          f"runs whole (sampled): {whole}")
    return wall, len(stored)


def fill_for_report(url: str, total: int, n: int) -> None:
    store = Store(url)
    spec = spec_mod.parse('name = "many"\n[[workload]]\nname = "exec"\nvariants = "sum"\n')
    exp = exp_mod.start(store, spec, [], 0, None)
    configs = [{"fullsweep_after": f} for f in range(20)]
    with store.transaction() as conn:
        for i in range(total):
            settings = configs[i % len(configs)]
            store.add_run(sample_file(n, i, settings=settings), {"bench": True}, experiment_id=exp.id,
                          plan_index=i, cell=f"exec/sum/native fullsweep_after={settings['fullsweep_after']}",
                          repetition=i // len(configs) + 1, conn=conn)


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rtscope", *argv], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--report-runs", type=int, default=10_000)
    args = ap.parse_args()
    why = pgserver.available()
    if why:
        print(f"bench/store_writers.py: skipped: {why}")
        return 0
    server = pgserver.PgServer().start()
    try:
        with tempfile.TemporaryDirectory(prefix="rtscope-bench-store-") as tmp:
            print(f"1. {args.writers} writers x {args.runs} runs x {args.samples:,} samples:")
            pg_wall, _ = writers(server.create_database("writers"), args.writers, args.runs, args.samples)
            lite_wall, _ = writers(f"sqlite:///{tmp}/writers.db", args.writers, args.runs, args.samples)
            print(f"   PostgreSQL / SQLite wall time: {pg_wall / lite_wall:.2f}")
            url = server.create_database("many")
            start = time.perf_counter()
            fill_for_report(url, args.report_runs, 1000)
            fill = time.perf_counter() - start
            compare = timed(["compare", "--experiment", "many", "--db", url, "--baseline", "fullsweep_after=0"])
            report = timed(["report", "--experiment", "many", "--db", url, "-o", f"{tmp}/report.html"])
            print(f"2. {args.report_runs:,} runs x 1,000 samples in PostgreSQL (stored in {fill:.0f} s): compare "
                  f"{compare:.1f} s + report {report:.1f} s = {compare + report:.1f} s (target <= 60 s)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
