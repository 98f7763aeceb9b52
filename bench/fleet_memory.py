"""rtscope monitor of a fleet: the controller's memory per board, flat over time, with and without --explain.

Starts N boards (OpenSSH servers in their own namespaces, tests/sshd.py), then runs one controller
(`rtscope monitor --target fleet`) over 1 board and over N boards for the same duration, sampling the
controller's RSS every 2 s. Prints, for each: RSS a quarter in, at the middle and at the end
(flat = bounded whatever the duration), the peak, and the cost per board: (peak with N - peak with 1) / (N - 1).

Run as root (sshd in namespaces):
    .venv/bin/python bench/fleet_memory.py [--boards 4] [--duration 2m] [--interval 10s] [--explain 10 [--no-baseline]]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import sshd  # noqa: E402
from monitor_memory import rss_kb  # noqa: E402


def controller(base: Path, servers: dict, args, explain: int) -> list[tuple[float, int]]:
    """One controller over `servers` (name -> SshServer); its (seconds, RSS kB) samples."""
    targets = base / f"targets-{len(servers)}-{explain}.toml"
    names = ", ".join(f'"{n}"' for n in servers)
    targets.write_text("".join(s.table(n) for n, s in servers.items()) + f"[fleets]\nbench = [{names}]\n")
    db = base / f"fleet-{len(servers)}-{explain}.db"
    proc = subprocess.Popen([sys.executable, "-m", "rtscope", "monitor", "--target", "bench", "--duration",
                             args.duration, "--interval", args.interval, "--interval-us", "1000",
                             "--explain", str(explain), "--db", str(db)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "RTSCOPE_TARGETS": str(targets)})
    samples, start = [], time.monotonic()
    try:
        while proc.poll() is None:
            time.sleep(2)
            kb = rss_kb(proc.pid)
            if kb:
                samples.append((time.monotonic() - start, kb))
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    if proc.returncode != 0:
        raise SystemExit(f"controller failed: {proc.stderr.read()}")
    return samples


def report(label: str, samples: list[tuple[float, int]]) -> int:
    first = samples[len(samples) // 4][1]   # a quarter in: imports done, every board connected
    mid, end = samples[len(samples) // 2][1], samples[-1][1]
    peak = max(kb for _, kb in samples)
    print(f"{label:28} RSS MB: at 1/4 {first / 1024:6.1f}  middle {mid / 1024:6.1f}  end {end / 1024:6.1f}  "
          f"peak {peak / 1024:6.1f}  (end - 1/4 {(end - first) / 1024:+.1f})")
    return peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=4)
    ap.add_argument("--duration", default="2m")
    ap.add_argument("--interval", default="10s")
    ap.add_argument("--explain", type=int, default=0, help="also measure with --explain K")
    ap.add_argument("--no-baseline", action="store_true", help="with --explain: only the runs with explain")
    args = ap.parse_args()
    why = sshd.available()
    if why:
        raise SystemExit(f"cannot start boards here: {why}")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-fleet-") as tmp:
        base = Path(tmp)
        servers = {f"board{i}": sshd.SshServer(base / f"board{i}", f"rtscope-bench-{i}").start()
                   for i in range(1, args.boards + 1)}
        try:
            for explain in sorted({args.explain} if args.no_baseline and args.explain else {0, args.explain}):
                what = f" --explain {explain}" if explain else ""
                one = report(f"1 board{what}", controller(base, dict(list(servers.items())[:1]), args, explain))
                many = report(f"{args.boards} boards{what}", controller(base, servers, args, explain))
                print(f"  per board{what}: {(many - one) / 1024 / (args.boards - 1):.2f} MB "
                      f"({args.duration} at {args.interval} intervals)")
        finally:
            for s in servers.values():
                s.stop()


if __name__ == "__main__":
    main()
