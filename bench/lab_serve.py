"""`rtscope serve` with a lab of N boards, measured alone: the lab page and /metrics while intervals arrive.

Builds a store in a temporary directory (SQLite): N boards (monitorings of their own), K intervals each of
2 CPUs with 1 µs histograms up to 10 ms (no probes: sample files added with Store.add_run), and, as a
controller records it, the running bound of each board's newest interval. Starts the real
`rtscope serve` on a free port of 127.0.0.1, then for --seconds stores one more interval (and its bound) every
--every seconds (0.6 s: a hundred boards at 1-minute intervals), round robin over the boards, in a process of
its own as a controller is, while one client
requests the lab page `/` and `/metrics` in turn every 0.5 s. Prints p50/p99/max of each, beside the goals of
docs/lab.md (page p99 <= 200 ms, scrape <= 100 ms). --busy K adds K processes that spin beside the server at
the same priority: a controller host that also runs controllers, PostgreSQL and more (bench/lab_scale.py
measures that host whole, and what the controllers and boards cost).

usage: bench/lab_serve.py [--boards 100] [--intervals 20] [--seconds 40] [--every 0.6] [--busy 0]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rtscope.experiment import monitor
from rtscope.store import Store
from serve_load import add, start_serve

PAGE_P99_GOAL_MS = 200.0
SCRAPE_GOAL_MS = 100.0


def histograms(rng: np.random.Generator) -> dict:
    out = {}
    for cpu in range(2):
        values = rng.gamma(4, 5_000, 60_000).astype(np.int64) + 20_000
        counts = np.bincount(values // 1000, minlength=10_000)
        out[f"thread{cpu}"] = {"unit": "ns", "bucket_width": 1000, "min_value": 0, "counts": counts[:10_000].tolist(),
                               "overflow": int(counts[10_000:].sum()), "n": len(values), "min": int(values.min()),
                               "max": int(values.max()), "sum": int(values.sum()), "cpu": cpu}
    return out


class Lab:
    """The boards' monitorings in a store, and their next intervals."""

    def __init__(self, db: str, tmp: Path, boards: int):
        self.store, self.tmp, self.boards = Store(db), tmp, boards
        rng = np.random.default_rng(1)
        self.pool = [histograms(rng) for _ in range(8)]
        self.experiments = [self.store.add_experiment({
            "name": f"monitor:board{b}", "spec": {}, "spec_path": f"monitor:board{b}", "seed": 0, "plan": [],
            "status": "running", "created_at": "2026-01-01T00:00:00Z"}) for b in range(boards)]
        self.stored = 0

    def keep_storing(self, every: float, stop, stored) -> None:
        """One interval every `every` seconds until stop is set (in a process of its own, as a controller is:
        storing in the timing client's process would hold its GIL and show up in its timings)."""
        self.store = Store(self.store.url)
        while not stop.wait(every):
            self.interval()
            stored.value += 1

    def interval(self, bound: bool = True) -> None:
        """Store the next board's next interval and, as its controller does, its running bound (`bound`)."""
        b = self.stored % self.boards
        run_id = add(self.store, self.tmp, "timer", "absolute", np.empty(0, np.int64),
                     {"target": f"board{b}", "load": "none"},
                     {"histograms": self.pool[self.stored % 8], "threads": [{"thread": c, "cpu": c} for c in range(2)]},
                     tags=("monitor",), experiment_id=self.experiments[b],
                     params={"duration_s": 60})   # 1-minute intervals: a board stays up between its intervals
        if bound:
            monitor.worst_case_so_far(self.store, self.store.get_run(run_id))
        self.stored += 1


def spin(stop) -> None:
    while not stop.is_set():
        sum(range(10_000))


def timed(path: str, conn: http.client.HTTPConnection) -> float:
    start = time.perf_counter()
    conn.request("GET", path, headers={"Accept-Encoding": "gzip" if path == "/metrics" else "identity"})  # as Prometheus
    resp = conn.getresponse()
    resp.read()
    if resp.status != 200:
        raise SystemExit(f"{path}: HTTP {resp.status}")
    return (time.perf_counter() - start) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=100)
    ap.add_argument("--intervals", type=int, default=20, help="intervals per board stored before serve starts")
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--every", type=float, default=0.6, help="seconds between two intervals stored")
    ap.add_argument("--busy", type=int, default=0, help="processes spinning beside the server")
    args = ap.parse_args()
    if args.boards < 1 or args.intervals < 1 or args.seconds <= 0 or args.every <= 0 or args.busy < 0:
        raise SystemExit("--boards and --intervals must be >= 1, --seconds and --every > 0, --busy >= 0")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-lab-serve-") as tmp, \
            open(Path(tmp) / "serve.log", "w+") as log:
        db = str(Path(tmp) / "lab.db")
        lab = Lab(db, Path(tmp), args.boards)
        for i in range(args.boards * args.intervals):   # the bounds of each board's newest interval only
            lab.interval(bound=i >= args.boards * (args.intervals - 1))
        print(f"{args.boards} boards x {args.intervals} intervals stored", flush=True)
        proc, port = start_serve(db, log)
        fork = multiprocessing.get_context("fork")
        stop, stored = fork.Event(), fork.Value("i", 0)
        try:
            if port is None:
                return 1
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for path in ("/", "/metrics"):                  # each made once, as a lab's first visitor does
                print(f"first request of {path}: {timed(path, conn):.0f} ms", flush=True)

            writer = fork.Process(target=lab.keep_storing, args=(args.every, stop, stored), daemon=True)
            writer.start()
            spinners = [fork.Process(target=spin, args=(stop,), daemon=True) for _ in range(args.busy)]
            for p in spinners:
                p.start()
            out: dict[str, list[float]] = {"/": [], "/metrics": []}
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                for path in out:
                    out[path].append(timed(path, conn))
                time.sleep(0.5)
        finally:
            stop.set()
            if "writer" in locals():
                writer.join(30)
            for p in locals().get("spinners", []):
                p.join(30)
            proc.terminate()
            proc.wait(30)
        print(f"{args.boards} boards, an interval stored every {args.every} s for {args.seconds:g} s "
              f"({stored.value} new), {args.busy} processes spinning beside the server:")
        for path, goal in (("/", PAGE_P99_GOAL_MS), ("/metrics", SCRAPE_GOAL_MS)):
            v = np.asarray(out[path])
            p99 = float(np.percentile(v, 99))
            print(f"  {path:9s} n={len(v)}  p50 {np.percentile(v, 50):.0f} ms  p99 {p99:.0f} ms  max {v.max():.0f} ms"
                  f"  (goal p99 <= {goal:.0f} ms: {'met' if p99 <= goal else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
