"""rtscope monitor: memory stays flat however long it runs, and how fast the store grows.

Runs `rtscope monitor` (rtprobe timer at 200 µs on every CPU, histogram mode) as a child process, samples
the RSS of rtscope and of the probe every few seconds, and prints RSS at the start, middle and end
(target <= 64 MB, flat) and the store's growth, extrapolated to an hour.

Usage: .venv/bin/python bench/monitor_memory.py [--duration 5m] [--interval 30s]   (--duration 1h for the full)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rtscope.experiment.monitor import parse_duration


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def probes() -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() == "rtprobe":
                    out.append(int(entry))
            except OSError:
                pass
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", default="5m")
    ap.add_argument("--interval", default="30s")
    args = ap.parse_args()
    seconds = parse_duration(args.duration, "duration")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-monitor-") as tmp:
        db = Path(tmp) / "monitor.db"
        proc = subprocess.Popen([sys.executable, "-m", "rtscope", "monitor", "--duration", args.duration,
                                 "--interval", args.interval, "--interval-us", "200", "--db", str(db)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        samples = []  # (t, rtscope kB, probe kB, store bytes)
        start = time.monotonic()
        while proc.poll() is None:
            time.sleep(3)
            probe = max((rss_kb(p) for p in probes()), default=0)
            size = sum(f.stat().st_size for f in Path(tmp).glob("monitor.db*"))
            if proc.poll() is None:
                samples.append((time.monotonic() - start, rss_kb(proc.pid), probe, size))
        if proc.returncode != 0:
            print(proc.stderr.read())
            return 1
        final = db.stat().st_size  # after the last checkpoint: what the intervals take in the store
    picks = [samples[0], samples[len(samples) // 2], samples[-1]] if samples else []
    print(f"monitor for {args.duration} in intervals of {args.interval} (200 µs timer, every CPU, histograms):")
    for t, rs, pr, size in picks:
        print(f"   t={t:6.0f} s  rtscope RSS {rs / 1024:6.1f} MB  rtprobe RSS {pr / 1024:5.1f} MB  "
              f"store {size / 1024:8.1f} KiB")
    peak = max(s[1] for s in samples) / 1024
    growth = final / seconds * 3600
    print(f"   peak rtscope RSS {peak:.1f} MB (target <= 64 MB; rtscope's own start-up, Python with numpy and "
          f"SQLAlchemy, is about 56 MB of it); store growth {growth / 1024 / 1024:.2f} MiB per hour "
          f"({final / 1024:.0f} KiB for {seconds} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
