#!/usr/bin/env python3
"""Benchmark: `rtprobe timer` against rt-tests cyclictest, and the memory of a histogram-mode run.

1. Latency. Both tools run back to back, interleaved A B A B ..., with the same options: SCHED_FIFO
   priority 90, mlockall, pinned to the same CPU, 200 µs interval, 20,000 loops each, every sample
   kept (cyclictest -v -N: ns, like rtprobe). Printed: median and p99 of each run and of the pooled
   runs (linear interpolation, type 7), and the ratios rtscope / cyclictest.
   Targets: median ratio <= 1.00, p99 ratio <= 1.10.

2. Memory. Maximum RSS (getrusage of the child, via wait4) of histogram-mode runs
   (--histogram-us 1000, 1 µs buckets) at a small interval for 10^4 and 10^6 loops, and of a run
   that asks for 10^8 loops but is cut by --duration-s (a 10^8-loop run at 200 µs takes 5.5 hours):
   the allocation does not depend on the loop count. A sample-keeping run is shown for contrast.
   Target: under 64 MiB. RSS by GNU time (`/usr/bin/time -f %M`, Debian package `time`).

The numbers depend on the machine and on what else runs on it: a shared or virtual machine makes
them noisy. Needs root (SCHED_FIFO, mlockall).

    bench/timer_vs_cyclictest.py [--pairs 3] [--loops 20000] [--interval-us 200] [--cpu N]
                                 [--memory-loops 1000000] [--memory-interval-us 20] [--check]

--check: exit 1 when a target is missed (by default the figures are only reported).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from rtscope import paths, samplefile  # noqa: E402
from rtscope.importers import cyclictest as ct  # noqa: E402

MEDIAN_TARGET, P99_TARGET, RSS_TARGET_MIB = 1.00, 1.10, 64


GNU_TIME = "/usr/bin/time"


def run_child(argv: list[str], measure: bool = False) -> tuple[subprocess.CompletedProcess, int]:
    """Run argv; return its result and, with measure, its maximum RSS in KiB.

    The RSS comes from GNU time (`%M`, wait4 of a child it forked itself). A child forked by this
    Python process would inherit Python's RSS as its high-water mark (ru_maxrss counts the memory
    before exec), so getrusage here would overstate the probe's memory by ~30 MiB.
    """
    rss_file = None
    if measure and os.access(GNU_TIME, os.X_OK):
        rss_file = tempfile.NamedTemporaryFile(prefix="rss-", delete=False)
        argv = [GNU_TIME, "-f", "%M", "-o", rss_file.name, *argv]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        res = subprocess.CompletedProcess(argv, proc.returncode, out.read().decode(), err.read().decode())
    if res.returncode != 0:
        sys.exit(f"timer_vs_cyclictest: {' '.join(argv)} failed (exit {res.returncode}): {res.stderr.strip()[-500:]}")
    if rss_file is not None:
        text = Path(rss_file.name).read_text().split()
        os.unlink(rss_file.name)
        return res, int(text[-1])
    return res, usage.ru_maxrss  # an upper bound: includes this Python process's RSS (see above)


def rtscope_run(probe: Path, out: Path, a) -> np.ndarray:
    run_child([str(probe), "timer", "--interval-us", str(a.interval_us), "--loops", str(a.loops),
               "--priority", str(a.priority), "--mlock", "--cpu", str(a.cpu), "--output", str(out)])
    sf = samplefile.read(out)
    return sf.data["latency"]


def cyclictest_run(a) -> np.ndarray:
    res, _ = run_child(["cyclictest", "-p", str(a.priority), "-m", "-a", str(a.cpu), "-i", str(a.interval_us),
                        "-l", str(a.loops), "-v", "-N"])
    log = ct.parse_verbose(res.stdout, "cyclictest", unit_ns=1)
    [(cycles, values)] = log.samples.values()
    if len(values) != a.loops:
        sys.exit(f"timer_vs_cyclictest: cyclictest printed {len(values)} samples, expected {a.loops}")
    return values


def q(values: np.ndarray, p: float) -> float:
    return float(np.percentile(values, p))  # linear interpolation (type 7), as rtscope's stats


def latency(a, probe: Path, tmp: Path) -> dict:
    print(f"== latency: {a.pairs} pairs, A = rtprobe timer, B = cyclictest; SCHED_FIFO {a.priority}, mlock, CPU {a.cpu}, "
          f"{a.interval_us} µs, {a.loops:,} loops each")
    print(f"{'run':>8} {'tool':<12} {'median µs':>10} {'p99 µs':>9} {'max µs':>9}")
    pooled: dict[str, list[np.ndarray]] = {"rtscope": [], "cyclictest": []}
    for k in range(a.pairs):
        for tool in ("rtscope", "cyclictest"):
            v = rtscope_run(probe, tmp / f"a{k}.rts", a) if tool == "rtscope" else cyclictest_run(a)
            pooled[tool].append(v)
            print(f"{k + 1:>8} {tool:<12} {q(v, 50) / 1e3:>10.2f} {q(v, 99) / 1e3:>9.2f} {v.max() / 1e3:>9.1f}")
    both = {t: np.concatenate(v) for t, v in pooled.items()}
    med = {t: q(v, 50) for t, v in both.items()}
    p99 = {t: q(v, 99) for t, v in both.items()}
    ratios = {"median": med["rtscope"] / med["cyclictest"], "p99": p99["rtscope"] / p99["cyclictest"]}
    pair_ratios = [(q(r, 50) / q(c, 50), q(r, 99) / q(c, 99)) for r, c in zip(pooled["rtscope"], pooled["cyclictest"])]
    for t in both:
        print(f"{'pooled':>8} {t:<12} {med[t] / 1e3:>10.2f} {p99[t] / 1e3:>9.2f} {both[t].max() / 1e3:>9.1f}")
    print("per pair (rtscope / cyclictest): " + ", ".join(f"median {m:.3f} p99 {p:.3f}" for m, p in pair_ratios))
    print(f"ratio of medians rtscope / cyclictest: {ratios['median']:.3f}  (target <= {MEDIAN_TARGET:.2f}: "
          f"{'met' if ratios['median'] <= MEDIAN_TARGET else 'MISSED'})")
    print(f"ratio of p99     rtscope / cyclictest: {ratios['p99']:.3f}  (target <= {P99_TARGET:.2f}: "
          f"{'met' if ratios['p99'] <= P99_TARGET else 'MISSED'})")
    return ratios


def memory(a, probe: Path, tmp: Path) -> float:
    how = f"{GNU_TIME} %M" if os.access(GNU_TIME, os.X_OK) else "wait4 (upper bound: includes the Python launcher)"
    print(f"\n== memory: maximum RSS of rtprobe timer (mlock, SCHED_FIFO {a.priority}, CPU {a.cpu}), by {how}")
    base = [str(probe), "timer", "--priority", str(a.priority), "--mlock", "--cpu", str(a.cpu)]
    cases = [
        ("histogram 0..1000 µs", f"{10_000:,} loops", ["--histogram-us", "1000", "--interval-us",
                                                      str(a.memory_interval_us), "--loops", "10000"]),
        ("histogram 0..1000 µs", f"{a.memory_loops:,} loops", ["--histogram-us", "1000", "--interval-us",
                                                               str(a.memory_interval_us), "--loops", str(a.memory_loops)]),
        ("histogram 0..1000 µs", "10^8 loops asked, cut at 5 s", ["--histogram-us", "1000", "--interval-us",
                                                                  str(a.memory_interval_us), "--loops", "100000000",
                                                                  "--duration-s", "5"]),
        ("every sample (contrast)", f"{100_000:,} loops", ["--interval-us", str(a.memory_interval_us),
                                                           "--loops", "100000"]),
    ]
    print(f"{'mode':<26} {'run':<30} {'samples/thread':>15} {'max RSS MiB':>12} {'seconds':>8}")
    worst = 0.0
    for mode, what, extra in cases:
        out = tmp / "mem.rts"
        t0 = time.monotonic()
        _, rss_kib = run_child(base + extra + ["--output", str(out)], measure=True)
        took = time.monotonic() - t0
        sf = samplefile.read(out)
        n = sum(h["n"] for h in sf.trailer.get("histograms", {}).values()) or sf.n
        mib = rss_kib / 1024
        if mode.startswith("histogram"):
            worst = max(worst, mib)
        print(f"{mode:<26} {what:<30} {n:>15,} {mib:>12.1f} {took:>8.1f}")
    print(f"largest histogram-mode RSS: {worst:.1f} MiB (target < {RSS_TARGET_MIB} MiB: "
          f"{'met' if worst < RSS_TARGET_MIB else 'MISSED'}); histogram memory = buckets x 8 bytes per thread "
          "+ overflow cycle list, whatever the loop count")
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="A B pairs (default 3)")
    ap.add_argument("--loops", type=int, default=20_000, help="loops per run (default 20000)")
    ap.add_argument("--interval-us", type=int, default=200)
    ap.add_argument("--priority", type=int, default=90)
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)), help="CPU for both (default: the last)")
    ap.add_argument("--memory-loops", type=int, default=1_000_000)
    ap.add_argument("--memory-interval-us", type=int, default=20)
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("timer_vs_cyclictest: skipped (needs root for SCHED_FIFO and mlockall)")
        return 0
    if shutil.which("cyclictest") is None:
        print("timer_vs_cyclictest: skipped (cyclictest not installed: apt-get install rt-tests)")
        return 0
    probe = paths.rtprobe()
    print(f"machine: {platform.node()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-") as d:
        ratios = latency(a, probe, Path(d))
        worst = 0.0 if a.skip_memory else memory(a, probe, Path(d))
    missed = (ratios["median"] > MEDIAN_TARGET or ratios["p99"] > P99_TARGET or worst >= RSS_TARGET_MIB)
    return 1 if a.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
