#!/usr/bin/env python3
"""rtprobe storage against fio: same directory, file size, block size and mode, interleaved.

For each round and mode, both tools run the same storage job (the mapping of
docs/storage.md: rtscope's fio runtime builds fio's options), in alternating
order. Throughput:
  rtprobe: file size / mean pass time (its records)
  fio:     io_bytes / job runtime (fio's own bw_bytes)
The ratio rtprobe / fio per round, the median of those ratios and the ratio
of each tool's best run (the run least disturbed by anything else on the
machine) are printed; the target is within ±5 %. On a busy machine use more
rounds: single runs of page-cache reads vary by tens of percent.

    .venv/bin/python bench/storage_vs_fio.py --dir /var/tmp --size 1G --repetitions 3 --rounds 3

Needs `make -C probes` and fio. A 1 GiB run writes 1 GiB per pass: keep
--dir on the disk you mean to measure (not tmpfs), with room for the file.
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

from rtscope import paths, samplefile
from rtscope.importers.fio import load_report
from rtscope.runtimes.base import RunRequest
from rtscope.runtimes.fio import fio_args
from rtscope.workloads import WORKLOADS, check_storage

TARGET = 0.05


def run_rtprobe(req: RunRequest, out: Path) -> float:
    p = req.params
    argv = [str(paths.rtprobe()), "storage", req.variant, "--dir", p["dir"], "--size", str(p["size"]),
            "--block-size", str(p["block_size"]), "--repetitions", str(p["repetitions"]), "--output", str(out)]
    if p["direct"]:
        argv.append("--direct")
    if "cpu" in req.settings:
        argv += ["--cpu", str(req.settings["cpu"])]
    if "rt_priority" in req.settings:
        argv += ["--priority", str(req.settings["rt_priority"])]
    subprocess.run(argv, check=True)
    sf = samplefile.read(out)
    mean_ns = float(sf.data["duration"].mean())
    return p["size"] / (mean_ns * 1e-9)


def run_fio(req: RunRequest, work: Path, extra: list[str]) -> float:
    report = work / "fio.json"
    filename = f"{req.params['dir']}/rtscope-bench-fio.dat"
    # fio has no scheduling-policy option: chrt gives it (and the job process it forks) the same SCHED_FIFO.
    chrt = ["chrt", "-f", str(req.settings["rt_priority"])] if "rt_priority" in req.settings else []
    subprocess.run([*chrt, "fio", *fio_args(req, filename, str(report)), *extra], check=True)
    job = load_report(report)["jobs"][0]
    ddir = job["read" if req.variant == "read" else "write"]
    return float(ddir["bw_bytes"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=".", help="directory for the test files (default: .)")
    ap.add_argument("--size", default="1G", help="file size (default 1G)")
    ap.add_argument("--block-size", default="4K", help="block size (default 4K)")
    ap.add_argument("--repetitions", type=int, default=3, help="passes per run (default 3)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds per mode (default 3)")
    ap.add_argument("--modes", default="write_sync,read", help="comma-separated modes (default write_sync,read)")
    ap.add_argument("--direct", action="store_true", help="O_DIRECT for both tools")
    ap.add_argument("--cpu", type=int, help="pin both tools to this CPU")
    ap.add_argument("--rt-priority", type=int, help="run both tools under SCHED_FIFO at this priority (root): "
                                                    "the rest of a busy machine then disturbs them less")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    ap.add_argument("--fio-gtod-reduce", action="store_true",
                    help="run fio with --gtod_reduce=1 (its throughput mode: no per-I/O timestamps), to separate "
                         "fio's own per-call bookkeeping from the I/O path at small block sizes")
    a = ap.parse_args()

    w = WORKLOADS["storage"]
    params = {"size": w.param("size").value(a.size), "block_size": w.param("block_size").value(a.block_size),
              "repetitions": a.repetitions, "dir": str(Path(a.dir).resolve()), "direct": a.direct,
              "fdatasync": False, "drop_caches": False}
    fio_extra = ["--gtod_reduce=1"] if a.fio_gtod_reduce else []
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in w.variants]
    if bad:
        ap.error(f"unknown mode {bad[0]!r}; valid modes: {', '.join(w.variants)}")
    for mode in modes:
        check_storage(mode, params)
    print(f"rtprobe storage vs fio: dir {params['dir']}, size {params['size']:,} bytes, block {params['block_size']:,}, "
          f"{a.repetitions} passes per run, {a.rounds} rounds, direct={a.direct}, cpu={a.cpu}, "
          f"rt_priority={a.rt_priority}, fio extra options {fio_extra or 'none'}; "
          f"load average {os.getloadavg()[0]:.1f} (others on the machine disturb both tools)")
    results = {}
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-") as tmp:
        work = Path(tmp)
        for mode in modes:
            knobs = {k: v for k, v in (("cpu", a.cpu), ("rt_priority", a.rt_priority)) if v is not None}
            req = RunRequest("storage", mode, "fio", params, knobs)
            ratios, rows = [], []
            for r in range(a.rounds):
                order = ("rtprobe", "fio") if r % 2 == 0 else ("fio", "rtprobe")
                got = {}
                for tool in order:
                    t0 = time.monotonic()
                    got[tool] = run_rtprobe(req, work / "run.rts") if tool == "rtprobe" else run_fio(req, work, fio_extra)
                    got[tool + "_s"] = time.monotonic() - t0
                ratio = got["rtprobe"] / got["fio"]
                ratios.append(ratio)
                rows.append(got)
                print(f"  {mode:10s} round {r + 1}: rtprobe {got['rtprobe'] / 2**20:9.1f} MiB/s  "
                      f"fio {got['fio'] / 2**20:9.1f} MiB/s  ratio {ratio:.3f}  "
                      f"(wall {got['rtprobe_s']:.1f} s / {got['fio_s']:.1f} s)", flush=True)
            med = statistics.median(ratios)
            best = max(g["rtprobe"] for g in rows) / max(g["fio"] for g in rows)
            verdict = "within" if abs(med - 1) <= TARGET else "OUTSIDE"
            print(f"{mode}: median ratio rtprobe/fio {med:.3f} ({verdict} ±{TARGET:.0%}); best run vs best run "
                  f"{best:.3f}; rtprobe median {statistics.median(g['rtprobe'] for g in rows) / 2**20:.1f} MiB/s, "
                  f"fio median {statistics.median(g['fio'] for g in rows) / 2**20:.1f} MiB/s")
            results[mode] = {"ratios": ratios, "median_ratio": med, "best_ratio": best, "rounds": rows}
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if a.json:
        print(json.dumps({"params": params, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
