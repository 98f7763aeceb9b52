"""What setting explain costs: explain = 0 against explain = 10 in interleaved pairs, timer and exec (native).

Per workload, `--pairs` pairs of runs, each pair in a random order (0 then 10, or 10 then 0), on one CPU at
SCHED_FIFO 80, this machine's kernel traced into rtscope's own tracefs instance for the explain runs:

  - the median and p99 of each run; the ratio explain 10 / explain 0 of the medians of those, per statistic
    (goals: median ratio <= 1.05, p99 ratio <= 1.15);
  - the trace data read per explained sample (the windows that cross the target connection) and stored per
    explained sample (the causes as JSON);
  - a long timer run (`--long-loops`, 10^6 by default: 200 s at 200 us) with explain = 10: the trace memory
    is the kernel's ring buffer, fixed at 8 MiB per traced CPU whatever the length (how many of the worst
    samples it still held is printed); this process's peak RSS is printed beside it.

Run as root: .venv/bin/python bench/explain_overhead.py [--pairs 5] [--loops 20000] [--long-loops 1000000]
The machine is shared while others work: timing figures are noisy, say so with them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
from pathlib import Path

from rtscope.analysis.distribution import of_run
from rtscope.experiment.runner import execute
from rtscope.experiment.spec import build_request
from rtscope.settings.explain_record import check_target
from rtscope.store import Store
from rtscope.targets import LocalTarget

CPU = sorted(os.sched_getaffinity(0))[-1]
WORKLOADS = {
    "timer": ("absolute", lambda loops: {"loops": loops, "interval_us": 200}),
    "exec": ("sum", lambda loops: {"iterations": loops, "pause_ms": 0.2, "n": 4000}),
}


def run(store: Store, workload: str, loops: int, explain: int) -> int:
    variant, params = WORKLOADS[workload]
    req = build_request(workload, variant, "native", params(loops),
                        {"cpu": CPU, "rt_priority": 80, "mlock": True, "explain": explain})
    return execute(req, store)


def pairs(store: Store, workload: str, loops: int, n: int) -> dict[int, list[int]]:
    got: dict[int, list[int]] = {0: [], 10: []}
    rng = random.Random(1)
    for _ in range(n):
        order = [0, 10]
        rng.shuffle(order)
        for explain in order:
            got[explain].append(run(store, workload, loops, explain))
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--loops", type=int, default=20_000)
    ap.add_argument("--long-loops", type=int, default=1_000_000)
    a = ap.parse_args()
    why = check_target(10, LocalTarget())
    if why:
        sys.exit(f"bench/explain_overhead.py: {why}")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-explain-") as tmp:
        store = Store(str(Path(tmp) / "bench.db"))
        print(f"explain 0 vs 10, {a.pairs} interleaved pairs of {a.loops:,} samples, CPU {CPU}, SCHED_FIFO 80")
        print(f"{'workload':8} {'stat':6} {'explain 0 (us)':>15} {'explain 10 (us)':>16} {'ratio':>7}  goal")
        read, stored = [], []
        for workload in WORKLOADS:
            ids = pairs(store, workload, a.loops, a.pairs)
            for stat, goal in (("p50", 1.05), ("p99", 1.15)):
                med = {e: statistics.median(of_run(store, store.get_run(i)).stats[stat] for i in ids[e])
                       for e in ids}
                ratio = med[10] / med[0]
                print(f"{workload:8} {stat:6} {med[0] / 1000:15.2f} {med[10] / 1000:16.2f} {ratio:7.3f}  "
                      f"<= {goal} {'ok' if ratio <= goal else 'MISSED'}")
            for i in ids[10]:
                r = store.get_run(i)
                read.append(r.trailer["explain"]["trace_bytes_per_sample"])
                causes = store.causes(i)
                stored.append(len(json.dumps(causes)) / max(len(causes), 1))
        print(f"trace read per explained sample: median {statistics.median(read):,.0f} B "
              f"(max {max(read):,.0f} B); stored per explained sample (causes as JSON): "
              f"median {statistics.median(stored):,.0f} B")
        rid = run(store, "timer", a.long_loops, 10)
        r = store.get_run(rid)
        e = r.trailer["explain"]
        explained = store.causes(rid)
        traced = sum(1 for s in explained if not s.get("note"))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"long run: timer {a.long_loops:,} loops at 200 us: trace memory {e['buffer_kb_per_cpu'] // 1024} MiB "
              f"of kernel ring buffer per traced CPU ({len(e['cpus'])} CPU), fixed; {traced} of {len(explained)} "
              f"worst samples still in the buffer; {e['trace_bytes_read']:,} B read; rtscope peak RSS "
              f"{peak:,.0f} MiB (this process, including the samples of every run above)")


if __name__ == "__main__":
    main()
