"""rtscope monitor: memory stays flat however long it runs, and how fast the store grows; with --explain K,
the same with and without setting explain, and what explaining keeps.

Runs `rtscope monitor` (rtprobe timer at 200 µs on every CPU, histogram mode) as a child process, samples
the RSS of rtscope and of the probe every few seconds, and prints RSS at the start, middle and end
(target <= 64 MB, flat) and the store's growth, extrapolated to an hour.

With `--explain K` it monitors twice, one after the other: without explain, then with `--explain K`. For the
second it also prints the trace data per explained sample (what the window keeper copied and rtscope read,
from each interval's trailer), the peak size of an interval's run directory on disk (the probe's marks and the
kept windows: they live there and go with it), and checks after every poll that at most one rtscope tracefs
instance and one run directory exist, and none at the end: nothing accumulates from interval to interval.

Usage: .venv/bin/python bench/monitor_memory.py [--duration 5m] [--interval 30s] [--explain 10 [--no-baseline]]
       (--duration 1h or 6h for the full)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rtscope.experiment.monitor import parse_duration

TRACEFS = Path("/sys/kernel/tracing/instances")


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def probes(under: Path) -> list[int]:
    """The monitoring's probes: rtprobe writing below `under` (not another rtscope's on this machine)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
                if Path(f"/proc/{entry}/comm").read_text().strip() == "rtprobe" and str(under).encode() in cmd:
                    out.append(int(entry))
            except OSError:
                pass
    return out


def instances_of(pid: int) -> list[str]:
    """The tracefs instances of the rtscope with this pid (its name carries the pid)."""
    try:
        return [p.name for p in TRACEFS.iterdir() if p.name.startswith("rtscope-") and f"-{pid}-" in p.name]
    except OSError:
        return []


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += (Path(root) / f).stat().st_size
            except OSError:
                pass
    return total


def monitor(args, explain: int) -> dict:
    """One monitoring; what it measured."""
    seconds = parse_duration(args.duration, "duration")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-monitor-") as tmp:
        db = Path(tmp) / "monitor.db"
        runs = Path(tmp) / "runs"
        runs.mkdir()
        proc = subprocess.Popen([sys.executable, "-m", "rtscope", "monitor", "--duration", args.duration,
                                 "--interval", args.interval, "--interval-us", "200", "--explain", str(explain),
                                 "--db", str(db)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": str(runs)})  # the intervals' run directories
        samples = []  # (t, rtscope kB, probe kB, store bytes)
        most_instances = most_dirs = peak_dir = 0
        start = time.monotonic()
        try:
            while proc.poll() is None:
                time.sleep(3)
                probe = max((rss_kb(p) for p in probes(runs)), default=0)
                size = sum(f.stat().st_size for f in Path(tmp).glob("monitor.db*"))
                dirs = list(runs.glob("rtscope-run-*"))
                most_dirs = max(most_dirs, len(dirs))
                peak_dir = max([peak_dir, *(tree_bytes(d) for d in dirs)])
                most_instances = max(most_instances, len(instances_of(proc.pid)))
                if proc.poll() is None:
                    samples.append((time.monotonic() - start, rss_kb(proc.pid), probe, size))
        finally:
            if proc.poll() is None:  # the bench stopped: the monitor undoes its interval and stops too
                proc.terminate()
                proc.wait()
        if proc.returncode != 0:
            print(proc.stderr.read())
            raise SystemExit(1)
        final = db.stat().st_size  # after the last checkpoint: what the intervals take in the store
        empty = empty_store_bytes(Path(tmp) / "empty.db")
        left = {"instances": len(instances_of(proc.pid)), "run_dirs": len(list(runs.glob("rtscope-run-*")))}
        explained = trailers(db) if explain else []
    return {"seconds": seconds, "samples": samples, "final": final, "empty": empty, "most_instances": most_instances,
            "most_dirs": most_dirs, "peak_dir": peak_dir, "left": left, "explained": explained}


def empty_store_bytes(path: Path) -> int:
    from rtscope.store import Store
    Store(str(path)).engine.dispose()
    return path.stat().st_size


def trailers(db: Path) -> list[dict]:
    """Per explained interval: its trailer's explain record and the stored causes' size per sample."""
    from rtscope.store import Store
    store = Store(str(db))
    out = []
    for run in store.runs():
        causes = store.causes(run.id)
        out.append({**run.trailer.get("explain", {}),
                    "stored_bytes_per_sample": len(json.dumps(causes)) / max(len(causes), 1)})
    return out


def report(m: dict, what: str, args) -> None:
    samples = m["samples"]
    picks = [samples[0], samples[len(samples) // 2], samples[-1]] if samples else []
    print(f"monitor for {args.duration} in intervals of {args.interval} (200 µs timer, every CPU, histograms), "
          f"{what}:")
    for t, rs, pr, size in picks:
        print(f"   t={t:6.0f} s  rtscope RSS {rs / 1024:6.1f} MB  rtprobe RSS {pr / 1024:5.1f} MB  "
              f"store {size / 1024:8.1f} KiB")
    interval = parse_duration(args.interval, "interval")
    peaks: dict[int, int] = {}
    for t, rs, *_ in samples:
        peaks[int(t // interval)] = max(peaks.get(int(t // interval), 0), rs)
    print("   rtscope's peak RSS in each interval (MB): " + " ".join(f"{v / 1024:.0f}" for _, v in sorted(peaks.items())))
    peak = max(s[1] for s in samples) / 1024
    peak_probe = max(s[2] for s in samples) / 1024
    # What the intervals add to the store, per hour: an empty store's own size (its schema) left out.
    growth = (m["final"] - m["empty"]) / m["seconds"] * 3600
    print(f"   peak rtscope RSS {peak:.1f} MB (target <= 64 MB; rtscope's own start-up, Python with numpy and "
          f"SQLAlchemy, is about 56 MB of it), peak rtprobe RSS {peak_probe:.1f} MB; store growth "
          f"{growth / 1024 / 1024:.2f} MiB per hour ({(m['final'] - m['empty']) / 1024:.0f} KiB for {m['seconds']} s "
          f"beside the empty store's {m['empty'] / 1024:.0f} KiB)")
    if m["explained"]:
        e = m["explained"]
        per = [x.get("trace_bytes_per_sample", 0) for x in e]
        print(f"   explained: {sum(x.get('samples', 0) for x in e)} samples in {len(e)} intervals; trace read per "
              f"explained sample: median {statistics.median(per) / 1024:.1f} KiB, max {max(per) / 1024:.1f} KiB "
              f"(windows kept per interval: median {statistics.median(x.get('windows_kept', 0) for x in e):.0f}); "
              f"stored per explained sample: median {statistics.median(x['stored_bytes_per_sample'] for x in e):.0f} B")
        print(f"   an interval's run directory (marks, kept windows) on disk: peak {m['peak_dir'] / 1024:.1f} KiB; "
              f"at once at most {m['most_dirs']} run directory and {m['most_instances']} tracefs instance; "
              f"left at the end: {m['left']['run_dirs']} run directories, {m['left']['instances']} instances")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="5m")
    ap.add_argument("--interval", default="30s")
    ap.add_argument("--explain", type=int, default=0, metavar="K",
                    help="also monitor with --explain K (after one without) and print what explaining keeps")
    ap.add_argument("--no-baseline", action="store_true", help="with --explain: skip the monitoring without it")
    args = ap.parse_args()
    if not (args.explain and args.no_baseline):
        report(monitor(args, 0), "without explain", args)
    if args.explain:
        report(monitor(args, args.explain), f"with --explain {args.explain}", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
