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

Beside wall-clock throughput, the I/O-call throughput: file size / the time a
pass spends inside its read/write calls and its sync, from each tool's own
per-call timings (rtprobe: its per-block histogram's exact sum and the sync
column; fio: the mean of its per-I/O `lat_ns` times blocks per pass, plus its
sync time per pass: its sync statistics' total over passes − 1, as the last
pass's sync is fio's uncounted end_fsync; needs --repetitions >= 2). rtprobe
times its blocks back to back, one clock read per block, so its call time is
its whole pass. Both tools time the same system calls, so this ratio
shows whether rtprobe measures the I/O path as fio does; the gap between the
two ratios is each tool's own work between calls (fio's per-I/O
bookkeeping, large at 4 KiB blocks). Not available with --fio-gtod-reduce
(fio then records no latencies).

For reads rtprobe runs with --read-back, so both tools read pages in the same
state (fio drops the file after laying it out and reads it back with
pre_read; pages left by 4 KiB writes cost up to 4x more per copy on this
kernel); --rtprobe-own-pages reads the pages rtprobe's writes left, as
rtprobe does by default. What each tool does per call, measured with strace
and perf, is in docs/storage.md.

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
from dataclasses import asdict, dataclass
from pathlib import Path

from rtscope import paths, samplefile
from rtscope.importers.fio import load_report
from rtscope.runtimes.base import RunRequest
from rtscope.runtimes.fio import fio_args
from rtscope.workloads import WORKLOADS, check_storage

TARGET = 0.05


@dataclass
class Throughput:
    """Bytes per second: over the whole run (wall clock) and inside the I/O calls (None: not measured)."""
    wall: float
    calls: float | None


WHAT = {"wall": "throughput (wall clock)", "calls": "I/O-call throughput"}


def mib(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 2**20:9.1f} MiB/s"


def run_rtprobe(req: RunRequest, out: Path, read_back: bool) -> Throughput:
    p = req.params
    argv = [str(paths.rtprobe()), "storage", req.variant, "--dir", p["dir"], "--size", str(p["size"]),
            "--block-size", str(p["block_size"]), "--repetitions", str(p["repetitions"]), "--output", str(out)]
    if p["direct"]:
        argv.append("--direct")
    elif read_back and req.variant == "read":
        argv.append("--read-back")
    if "cpu" in req.settings:
        argv += ["--cpu", str(req.settings["cpu"])]
    if "rt_priority" in req.settings:
        argv += ["--priority", str(req.settings["rt_priority"])]
    subprocess.run(argv, check=True)
    sf = samplefile.read(out)
    block = sf.trailer["histograms"]["block"]
    call_ns = block["sum"] / block["n"] * sf.trailer["counters"]["blocks_per_pass"] + float(sf.data["sync"].mean())
    return Throughput(p["size"] / (float(sf.data["duration"].mean()) * 1e-9), p["size"] / (call_ns * 1e-9))


def run_fio(req: RunRequest, work: Path, extra: list[str]) -> Throughput:
    report = work / "fio.json"
    filename = f"{req.params['dir']}/rtscope-bench-fio.dat"
    # fio has no scheduling-policy option: chrt gives it (and the job process it forks) the same SCHED_FIFO.
    chrt = ["chrt", "-f", str(req.settings["rt_priority"])] if "rt_priority" in req.settings else []
    subprocess.run([*chrt, "fio", *fio_args(req, filename, str(report)), *extra], check=True)
    job = load_report(report)["jobs"][0]
    ddir = job["read" if req.variant == "read" else "write"]
    lat = ddir.get("lat_ns") or {}
    if not lat.get("N"):  # --gtod_reduce: no latencies
        return Throughput(float(ddir["bw_bytes"]), None)
    blocks = req.params["size"] // req.params["block_size"]
    sync_ns = 0.0
    if req.variant == "write_sync":
        # fio's sync statistics hold the syncs of every pass but the last (that one is its
        # end_fsync, not counted), plus empty syncs after each reopen (docs/storage.md).
        loops = req.params["repetitions"]
        sync = (job.get("sync") or {}).get("lat_ns") or {}
        if loops < 2 or not sync.get("N"):
            return Throughput(float(ddir["bw_bytes"]), None)
        sync_ns = sync["mean"] * sync["N"] / (loops - 1)
    return Throughput(float(ddir["bw_bytes"]), req.params["size"] / ((lat["mean"] * blocks + sync_ns) * 1e-9))


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
    ap.add_argument("--rtprobe-own-pages", action="store_true",
                    help="reads: rtprobe reads the pages its own writes left (its default) instead of the file "
                         "dropped and read back as fio's pre_read leaves it (--read-back)")
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
          f"rt_priority={a.rt_priority}, fio extra options {fio_extra or 'none'}, "
          f"rtprobe reads {'its own written pages' if a.rtprobe_own_pages else 'the file read back (--read-back)'}; "
          f"load average {os.getloadavg()[0]:.1f} (others on the machine disturb both tools)")
    results = {}
    with tempfile.TemporaryDirectory(prefix="rtscope-bench-") as tmp:
        work = Path(tmp)
        for mode in modes:
            knobs = {k: v for k, v in (("cpu", a.cpu), ("rt_priority", a.rt_priority)) if v is not None}
            req = RunRequest("storage", mode, "fio", params, knobs)
            rows = []
            for r in range(a.rounds):
                order = ("rtprobe", "fio") if r % 2 == 0 else ("fio", "rtprobe")
                got, wall_s = {}, {}
                for tool in order:
                    t0 = time.monotonic()
                    got[tool] = run_rtprobe(req, work / "run.rts", not a.rtprobe_own_pages) if tool == "rtprobe" else run_fio(req, work, fio_extra)
                    wall_s[tool] = time.monotonic() - t0
                row = {"rtprobe": asdict(got["rtprobe"]), "fio": asdict(got["fio"]), "seconds": wall_s,
                       "wall_ratio": got["rtprobe"].wall / got["fio"].wall,
                       "calls_ratio": got["rtprobe"].calls / got["fio"].calls if got["fio"].calls else None}
                rows.append(row)
                calls = (f"I/O calls: rtprobe {mib(got['rtprobe'].calls)}  fio {mib(got['fio'].calls)}  "
                         f"ratio {row['calls_ratio']:.3f}" if row["calls_ratio"] else "I/O calls: n/a")
                print(f"  {mode:10s} round {r + 1}: wall: rtprobe {mib(got['rtprobe'].wall)}  fio {mib(got['fio'].wall)}"
                      f"  ratio {row['wall_ratio']:.3f} | {calls}  ({wall_s['rtprobe']:.1f} s / {wall_s['fio']:.1f} s)",
                      flush=True)
            results[mode] = {"rounds": rows}
            for kind in ("wall", "calls"):
                ratios = [row[f"{kind}_ratio"] for row in rows if row[f"{kind}_ratio"] is not None]
                if not ratios:
                    continue
                med = statistics.median(ratios)
                best = max(row["rtprobe"][kind] for row in rows) / max(row["fio"][kind] for row in rows)
                verdict = "within" if abs(med - 1) <= TARGET else "OUTSIDE"
                print(f"{mode} {WHAT[kind]}: median ratio rtprobe/fio {med:.3f} ({verdict} ±{TARGET:.0%}); "
                      f"best run vs best run {best:.3f}; rtprobe median "
                      f"{mib(statistics.median(row['rtprobe'][kind] for row in rows))}, "
                      f"fio median {mib(statistics.median(row['fio'][kind] for row in rows))}")
                results[mode][kind] = {"ratios": ratios, "median_ratio": med, "best_ratio": best}
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    if a.json:
        print(json.dumps({"params": params, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
