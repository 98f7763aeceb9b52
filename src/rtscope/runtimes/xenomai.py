"""Runtime `xenomai`: Xenomai's `latency` tool, beside cyclictest, on a target whose kernel has Xenomai (study 2).

Workload `timer`, variant `absolute` (latency's periodic task), mapped to latency's options:

  interval_us -> -p (whole µs)     loops or duration_s -> -T (whole seconds: loops x interval, rounded up)
  rt_priority -> -P                cpu -> -c
  always -h (a histogram of every sample, 1 µs buckets) and -s

latency runs until -T expires and prints RTD/RTS lines on stdout and its
histograms on stderr; collect() parses both (importers/xenomai.py). rtscope
cannot boot a Xenomai kernel here (Debian ships none); point this runtime at
a board that runs one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .. import samplefile
from ..errors import UsageError
from ..importers import xenomai as parser
from ..targets import LocalTarget, Target
from ..workloads import check_timer_request
from .base import RunRequest, Runtime, Site

PLACES = ("/usr/xenomai/bin/latency", "latency")  # Xenomai's own prefix first, then PATH
DEFAULT_LOOPS = 10_000
INSTALL = "a Xenomai kernel and its user space (the latency tool from Xenomai's testsuite)"


def _find(target: Target) -> str | None:
    for place in PLACES:
        found = target.which(place)
        if found:
            return found
    return None


@dataclass
class Xenomai(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        target = target or LocalTarget()
        if _find(target) is None:
            return f"Xenomai's latency tool is not on target {target.name}: it needs {INSTALL}"
        return None

    def prepare(self, req: RunRequest) -> None:
        check_timer_request(req)
        p = req.params
        if float(p["interval_us"]) != int(p["interval_us"]):
            raise UsageError(f"runtime xenomai takes whole µs for interval_us (-p), got {p['interval_us']}")
        unsupported = sorted({"threads", "histogram_us"} & set(p))
        if unsupported:
            raise UsageError(f"parameter {unsupported[0]} is not supported by runtime xenomai (one periodic task, "
                             "always a 1 µs histogram)")

    def seconds(self, req: RunRequest) -> int:
        p = req.params
        if "duration_s" in p:
            return max(1, math.ceil(float(p["duration_s"])))
        return max(1, math.ceil(p.get("loops", DEFAULT_LOOPS) * float(p["interval_us"]) / 1e6))

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        s = req.settings
        argv = [_find(site.target) or "latency", "-p", str(int(req.params["interval_us"])), "-T",
                str(self.seconds(req)), "-h", "-s"]
        if "rt_priority" in s:
            argv += ["-P", str(s["rt_priority"])]
        if "cpu" in s:
            argv += ["-c", str(s["cpu"])]
        return argv

    def outputs(self, req: RunRequest, out: str) -> list[str]:
        return []  # everything is on stdout and stderr

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc) -> Path:
        log = parser.parse((proc.stdout or "") + "\n" + (proc.stderr or ""), "latency output")
        settings = {k: v for k, v in req.settings.items() if k in self.settings}
        sf = parser.to_samplefile(log, settings=settings, params=dict(req.params), runtime="xenomai",
                                  extra_notes=[f"latency ran for {self.seconds(req)} s (-T)"])
        sf.header.pop("imported_from", None)
        samplefile.write(out, sf.header, sf.data, sf.trailer)
        return out

    def version(self, site: Site | None = None) -> str | None:
        target = site.target if site else LocalTarget()
        found = target.read_files(["/proc/xenomai/version"]).get("/proc/xenomai/version")
        return f"xenomai {found.strip()}" if found else None


RUNTIME = Xenomai(
    name="xenomai",
    help=f"Xenomai's latency tool, the reference on a Xenomai kernel (needs {INSTALL})",
    workloads={"timer": ("absolute",)},
    settings=("rt_priority", "cpu"),
)
