"""Time `rtscope reproduce nerves-rt --tag T` over a stored study of 100 runs (the target: within 2 s).

Builds a store in a temporary directory shaped as study 1's BEAM blocks: exec sum and fib under
fullsweep_after 0 / 65535, min_heap_size 6765 and priority high / normal, 10 configurations × 10 runs of
10,000 samples each (written as sample files and added with Store.add_run: no probes). Then times, as a user
runs it (a fresh process, wall clock), `rtscope reproduce nerves-rt --tag study --json`, which judges the
spec's claims on those runs (the governor's as not measurable here).

usage: bench/reproduce.py [--check] [--samples N]
  --check   exit 1 if reproduce takes more than 2 s
"""

from __future__ import annotations

import argparse
import json
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
RUNS = 10
CONFIGS = [(variant, settings) for variant in ("sum", "fib") for settings in (
    {"fullsweep_after": 65535}, {"fullsweep_after": 0}, {"min_heap_size": 6765},
    {"priority": "normal"}, {"priority": "high"})]


def build(tmp: Path, samples: int) -> str:
    db = str(tmp / "study.db")
    store = Store(db)
    rng = np.random.default_rng(7)
    env = {"hostname": "bench", "kernel_release": os.uname().release, "preemption": "none", "cpu_count": 2}
    cols = [Column("time", "ns", "i64")]
    for i in range(RUNS * len(CONFIGS)):
        variant, settings = CONFIGS[i % len(CONFIGS)]
        mean = 5_000_000 * (1.04 if settings.get("fullsweep_after") == 0 else 1.0) * (1 + rng.normal(0, 0.01))
        values = (mean + rng.gamma(3, 30_000, samples)).astype(np.int64)
        header = samplefile.make_header("exec", variant, "beam", "bench", "0", "2026-01-01T00:00:00Z", cols,
                                        settings, {"iterations": samples, "pause_ms": 5})
        path = tmp / f"run{i}.rts"
        samplefile.write(path, header, {"time": values})
        store.add_run(samplefile.read(path), env, tags=["study"])
        path.unlink()
    return db


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--samples", type=int, default=10_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = build(Path(tmp), args.samples)
        argv = [sys.executable, "-m", "rtscope", "reproduce", "nerves-rt", "--tag", "study", "--db", db, "--json"]
        start = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True)
        took = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)   # CPU time: this VM's stolen time is not in it
        cpu = usage.ru_utime + usage.ru_stime
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return 1
    verdicts = [c["verdict"] for c in json.loads(out.stdout)["claims"]]
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    print(f"rtscope reproduce nerves-rt over {RUNS * len(CONFIGS)} stored runs × {args.samples:,} samples: "
          f"{took:.2f} s wall, {cpu:.2f} s CPU (target {TARGET_S:g} s); {len(verdicts)} claims: "
          + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return 1 if args.check and took > TARGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
