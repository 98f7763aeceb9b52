"""Time `rtscope compare` and `rtscope report` over 100 runs × 10,000 samples (the target: within 2 s wall, issue 50).

Builds a store in a temporary directory: 10 configurations (governor × fullsweep_after)
× 10 repetitions of exec sum, each run 10,000 samples with heap_size and minor_gcs
columns, written as sample files and added with Store.add_run (no probes). Then times,
as a user runs them (fresh processes, wall clock):

    rtscope compare --baseline ...          the significance-tested table
    rtscope compare --baseline ... --tail   the same with the tail row (a tail fit per run; --tail-row)
    rtscope report  --baseline ...          the HTML report
    rtscope report  ... --figures --tables  the same plus PNG/SVG figures and tables

Each command runs once untimed first, with Python's bytecode cache allowed (PYTHONDONTWRITEBYTECODE unset for
the children): an installed rtscope runs from compiled modules, as pip installs them, and compiling numpy's,
scipy's and rtscope's sources on every call (1-3 s here) is not what a user waits for.

usage: bench/compare_report.py [--check] [--runs N] [--samples N] [--tail-row] [--repeat N]
  --check     exit 1 if compare + report (HTML) take more than 2 s wall, or the report is over 1 MB
  --tail-row  also time `compare --tail` (not part of the target: the row is opt-in)
  --repeat N  time each command N times and print the fastest (wall and CPU each): on a machine shared with
              other work, the run least disturbed by it
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rtscope import samplefile
from rtscope.samplefile import Column
from rtscope.store import Store

TARGET_S = 2.0
TARGET_MB = 1.0      # the HTML report of 100 runs (every raw sample stays in the store; the plots embed a thinned view)
GOVERNORS = ("conservative", "performance")
FULLSWEEP = (0, 32767, 65535, 131071, 262143)
BASELINE = ["--baseline", "governor=conservative", "--baseline", "fullsweep_after=65535"]


def build_store(tmp: Path, runs: int, samples: int) -> str:
    db = str(tmp / "bench.db")
    store = Store(db)
    rng = np.random.default_rng(1)
    # the baseline's configuration first, so that any --runs >= 2 has it and another to compare with
    configs = sorted(((g, f) for g in GOVERNORS for f in FULLSWEEP), key=lambda c: c != ("conservative", 65535))
    cols = [Column("duration", "ns", "i64"), Column("heap_size", "words", "i64"), Column("minor_gcs", "count", "i64")]
    env = {"hostname": "bench", "kernel_release": os.uname().release, "preemption": "none", "cpu_count": 2}
    for i in range(runs):
        governor, fullsweep = configs[i % len(configs)]
        scale = (0.45 if governor == "performance" else 1.0) * (1.0 + fullsweep / 2_621_430)
        values = (5_000_000 * scale + rng.gamma(3, 30_000, samples)).astype(np.int64)
        gcs = np.arange(samples) // 40
        heap = 233 + (np.arange(samples) % 40) * 17
        header = samplefile.make_header("exec", "sum", "beam", "bench", "0", "2026-01-01T00:00:00Z", cols,
                                        {"governor": governor, "fullsweep_after": fullsweep},
                                        {"n": 4000, "iterations": samples})
        path = tmp / f"run{i}.rts"
        samplefile.write(path, header, {"duration": values, "heap_size": heap, "minor_gcs": gcs})
        store.add_run(samplefile.read(path), env, tags=["bench"])
        path.unlink()
    return db


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], repeat: int = 1) -> tuple[float, float]:
    """Wall-clock and CPU (user + system, its child processes included) seconds of one command, after an
    untimed run of it (the bytecode cache written, the store's pages in the page cache); CPU time is what a
    busy machine cannot inflate. repeat: the fastest of that many runs, wall and CPU each."""
    subprocess.run(argv, capture_output=True, text=True, env=ENV)
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, env=ENV)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return min(walls), min(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help=f"exit 1 if compare + report exceed {TARGET_S:g} s")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--tail-row", action="store_true", help="also time compare --tail (a tail fit per run)")
    ap.add_argument("--repeat", type=int, default=1, help="time each command this many times, print the fastest")
    args = ap.parse_args()
    if args.runs < 2:
        ap.error(f"--runs {args.runs}: a comparison needs 2 runs or more (the baseline's and another)")
    if args.repeat < 1:
        ap.error(f"--repeat {args.repeat}: give 1 or more")
    rtscope = [sys.executable, "-m", "rtscope"]
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-") as d:
        tmp = Path(d)
        t = time.perf_counter()
        db = build_store(tmp, args.runs, args.samples)
        print(f"store: {args.runs} runs × {args.samples:,} samples built in {time.perf_counter() - t:.1f} s")
        compare_s = timed([*rtscope, "compare", "--db", db, *BASELINE, "--json"], args.repeat)
        tail_s = timed([*rtscope, "compare", "--db", db, *BASELINE, "--json", "--tail"], args.repeat) \
            if args.tail_row else None
        report_s = timed([*rtscope, "report", "--db", db, *BASELINE, "-o", str(tmp / "r.html")], args.repeat)
        full_s = timed([*rtscope, "report", "--db", db, *BASELINE, "-o", str(tmp / "r2.html"),
                        "--figures", str(tmp / "fig"), "--tables", str(tmp / "tab")])
        size = (tmp / "r.html").stat().st_size / 1e6
        figures = len(list((tmp / "fig").iterdir()))
    total = compare_s[0] + report_s[0]
    print(f"{'' if args.repeat == 1 else f'fastest of {args.repeat} runs':34} {'wall':>7} {'CPU':>7}")
    print(f"{'rtscope compare':34} {compare_s[0]:6.2f}s {compare_s[1]:6.2f}s")
    if tail_s:
        print(f"{'rtscope compare --tail':34} {tail_s[0]:6.2f}s {tail_s[1]:6.2f}s")
    print(f"{f'rtscope report (HTML, {size:.2f} MB)':34} {report_s[0]:6.2f}s {report_s[1]:6.2f}s")
    print(f"{'compare + report':34} {total:6.2f}s {compare_s[1] + report_s[1]:6.2f}s   target {TARGET_S:g} s wall: "
          f"{'met' if total <= TARGET_S else 'MISSED'}")
    print(f"{f'report --figures --tables ({figures} files)':34} {full_s[0]:6.2f}s {full_s[1]:6.2f}s")
    print(f"report size: {size:.3f} MB (target {TARGET_MB:g} MB: {'met' if size <= TARGET_MB else 'MISSED'})")
    print(f"machine: {os.cpu_count()} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.check and (total > TARGET_S or size > TARGET_MB):
        sys.exit(1)


if __name__ == "__main__":
    main()
