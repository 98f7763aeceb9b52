"""Load on `rtscope serve`: 50 concurrent clients × 40 requests each against 127.0.0.1 only (the goal: no
error, p99 ≤ 200 ms, server RSS growth ≤ 50 MB).

Builds a store in a temporary directory: one run of 10^6 timer samples, 20 smaller exec runs and a monitoring
of 12 histogram intervals on two CPUs (no probes: sample files added with Store.add_run). Starts the real
`rtscope serve` on a free port of 127.0.0.1, loads each URL once (the first request of a page computes it; the
load measures the server as a lab uses it, pages already seen), then each client, on its own keep-alive
connection, requests in turn the run's API document (`show --json` of the 10^6-sample run), the lab page and
/metrics. Bounded: at most CLIENTS × REQUESTS requests and TIME_LIMIT_S seconds. Prints p50/p99/max per
URL and overall, errors, throughput, and the server's RSS before and after.

usage: bench/serve_load.py [--check] [--clients N] [--requests N]
  --check   exit 1 if any request failed, p99 > 200 ms or RSS grew by more than 50 MB
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from rtscope import samplefile
from rtscope.samplefile import Column
from rtscope.store import Store

P99_GOAL_MS = 200.0
RSS_GOAL_MB = 50.0
TIME_LIMIT_S = 300.0
ENV = {"hostname": "bench", "kernel_release": os.uname().release, "preemption": "PREEMPT_RT", "cpu_count": 2,
       "target": "local", "target_kind": "local"}


def add(store: Store, tmp: Path, workload: str, variant: str, values: np.ndarray, settings: dict,
        trailer: dict | None = None, tags=(), experiment_id: int | None = None, params: dict | None = None) -> int:
    header = samplefile.make_header(workload, variant, "native", "bench", "0", "2026-01-01T00:00:00Z",
                                    [Column("latency" if workload == "timer" else "duration", "ns", "i64")],
                                    settings, {"iterations": len(values), **(params or {})})
    path = tmp / "run.rts"
    samplefile.write(path, header, {header["columns"][0]["name"]: values},
                     {"finished_at": "2026-01-01T00:00:01Z", **(trailer or {})})
    run_id = store.add_run(samplefile.read(path), ENV, tags=list(tags), experiment_id=experiment_id)
    path.unlink()
    return run_id


def build_store(tmp: Path) -> tuple[str, int]:
    db = str(tmp / "serve-bench.db")
    store = Store(db)
    rng = np.random.default_rng(1)
    big = add(store, tmp, "timer", "absolute", rng.gamma(4, 5_000, 1_000_000).astype(np.int64) + 20_000, {})
    for i in range(20):
        add(store, tmp, "exec", "sum", rng.gamma(3, 30_000, 10_000).astype(np.int64) + 5_000_000,
            {"governor": ("performance", "powersave")[i % 2]})
    for interval in range(12):   # a monitoring's histogram intervals: 1 µs buckets up to 10 ms, per CPU
        hists = {}
        for cpu in range(2):
            values = rng.gamma(4, 5_000, 200_000).astype(np.int64) + 20_000
            counts = np.bincount(values // 1000, minlength=10_000)
            hists[f"thread{cpu}"] = {"unit": "ns", "bucket_width": 1000, "min_value": 0,
                                     "counts": counts[:10_000].tolist(), "overflow": int(counts[10_000:].sum()),
                                     "n": len(values), "min": int(values.min()), "max": int(values.max()),
                                     "sum": int(values.sum()), "cpu": cpu}
        add(store, tmp, "timer", "absolute", np.empty(0, np.int64), {"load": "none" if interval < 6 else "cpu"},
            {"histograms": hists, "threads": [{"thread": c, "cpu": c} for c in range(2)]}, tags=("monitor",))
    return db, big


def start_serve(db: str, log) -> tuple[subprocess.Popen, int | None]:
    """`rtscope serve` of db on a free port of 127.0.0.1, its output in the open file `log`; its port once it
    listens (None, said on stderr: it did not start within 60 s)."""
    proc = subprocess.Popen([sys.executable, "-m", "rtscope", "serve", "--db", db, "--host", "127.0.0.1",
                             "--port", "0"], stdout=log, stderr=log, text=True)
    m, started = None, time.monotonic()
    while not m and proc.poll() is None and time.monotonic() - started < 60:
        time.sleep(0.1)
        m = re.search(r"read-only at http://127\.0\.0\.1:(\d+)/", Path(log.name).read_text())
    if not m:
        print(f"rtscope serve did not start: {Path(log.name).read_text()}", file=sys.stderr)
        return proc, None
    return proc, int(m.group(1))


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024


def client(port: int, paths: list[str], requests: int, deadline: float, out: list, errors: list,
           encoding: str = "identity") -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(requests):
        if time.monotonic() > deadline:
            errors.append("time limit reached")
            return
        path = paths[i % len(paths)]
        start = time.perf_counter()
        try:
            conn.request("GET", path, headers={"Accept-Encoding": encoding})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                errors.append(f"{path}: HTTP {resp.status}")
        except (OSError, http.client.HTTPException) as e:
            errors.append(f"{path}: {e}")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        out.append((path, time.perf_counter() - start, i))
    conn.close()


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--requests", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rtscope-serve-bench-") as tmp, \
            open(Path(tmp) / "serve.log", "w+") as log:
        db, big = build_store(Path(tmp))
        proc, port = start_serve(db, log)
        try:
            if port is None:
                return 1
            paths = [f"/api/runs/{big}", "/", "/metrics"]
            rss_start = rss_mb(proc.pid)
            for path in paths:                      # each computed once, as a lab's first visitor does
                first: list = []
                client(port, [path], 1, time.monotonic() + 120, first, [])
                print(f"first request of {path}: {first[0][1] * 1000:.0f} ms")
            rss_before = rss_mb(proc.pid)
            results: list[tuple[str, float]] = []
            errors: list[str] = []
            deadline = time.monotonic() + TIME_LIMIT_S
            threads = [threading.Thread(target=client, args=(port, paths[i % 3:] + paths[:i % 3], args.requests,
                                                               deadline, results, errors))
                       for i in range(args.clients)]
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            rss_after = rss_mb(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                log.seek(0)
                print("the server did not stop within 30 s of SIGTERM; its log ends:\n" + log.read()[-3000:])
    print(f"{args.clients} clients × {args.requests} requests: {len(results)} answered, {len(errors)} errors, "
          f"{wall:.1f} s, {len(results) / wall:.0f} requests/s")
    for path in paths:
        mine = [d for p, d, _ in results if p == path]
        if mine:
            print(f"  {path:16} n {len(mine):5}  p50 {percentile(mine, 50):7.1f} ms  p99 {percentile(mine, 99):7.1f} ms"
                  f"  max {max(mine) * 1000:7.1f} ms")
    overall = [d for _, d, _ in results]
    later = [d for _, d, i in results if i > 0]
    p99 = percentile(overall, 99) if overall else float("inf")
    print(f"  {'all':16} n {len(overall):5}  p50 {percentile(overall, 50) if overall else 0:7.1f} ms  p99 {p99:7.1f} ms")
    if later:
        print(f"  all but each client's first request (its connection's set-up): p50 {percentile(later, 50):.1f} ms  "
              f"p99 {percentile(later, 99):.1f} ms")
    print(f"server RSS: {rss_start:.0f} MB at start, {rss_before:.0f} MB before the load (pages computed), "
          f"{rss_after:.0f} MB after: growth {rss_after - rss_before:+.1f} MB under load")
    for e in sorted(set(errors))[:5]:
        print(f"error: {e}")
    ok = not errors and p99 <= P99_GOAL_MS and rss_after - rss_before <= RSS_GOAL_MB
    print(f"goal (no error, p99 ≤ {P99_GOAL_MS:.0f} ms, RSS growth ≤ {RSS_GOAL_MB:.0f} MB): "
          f"{'met' if ok else 'NOT met'}")
    return 1 if args.check and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
