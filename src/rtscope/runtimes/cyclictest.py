"""Runtime `cyclictest`: rt-tests' cyclictest as the peer of `rtprobe timer`.

Workload `timer` with the same parameters and settings, mapped to cyclictest's options:

  interval_us -> -i (whole µs)     loops -> -l      duration_s -> -D (whole seconds)
  relative    -> -r                rt_priority -> -p   mlock -> -m
  threads     -> -t N -a LIST      cpu -> -a CPU
  histogram_us -> -h N -q (histogram text), otherwise -v -N (every sample, in ns)

plus -d 0 (every thread on the same interval, like rtprobe; -h implies it) and --json=FILE
(version, command line, per-thread CPU and a 2-decimal average). Its stdout is
converted into a sample file in collect(); the importer's parsers do the reading.
"""

from __future__ import annotations

import posixpath
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import samplefile
from ..errors import ProbeError, UsageError
from ..importers import cyclictest as parser
from ..targets import LocalTarget, Target
from ..workloads import check_timer_request, format_cpus, timer_cpus
from .base import RunRequest, Runtime, Site, printed_version

DEFAULT_LOOPS = 10_000  # as rtprobe timer
PROBE_SETTINGS = ("rt_priority", "cpu", "mlock")


def json_path(out: str) -> str:
    return posixpath.splitext(out)[0] + ".json"


def _whole(value, what: str, unit: str, flag: str) -> int:
    if float(value) != int(value):
        raise UsageError(f"runtime cyclictest takes whole {unit} for {what} ({flag}), got {value}; "
                         "runtime native takes fractions")
    return int(value)


@dataclass
class Cyclictest(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        target = target or LocalTarget()
        if target.which("cyclictest") is None:
            return f"cyclictest is not installed on target {target.name}: sudo apt-get install -y rt-tests"
        return None

    def prepare(self, req: RunRequest) -> None:
        check_timer_request(req)
        _whole(req.params["interval_us"], "interval_us", "µs", "-i")
        if "duration_s" in req.params:
            _whole(req.params["duration_s"], "duration_s", "seconds", "-D")

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        p, s = req.params, req.settings
        argv = ["cyclictest", "-i", str(int(p["interval_us"]))]
        if "loops" in p or "duration_s" not in p:
            argv += ["-l", str(p.get("loops", DEFAULT_LOOPS))]
        if "duration_s" in p:
            argv += ["-D", str(int(p["duration_s"]))]
        if req.variant == "relative":
            argv.append("-r")
        cpus = timer_cpus(req)
        if "threads" in p and cpus is None:
            argv += ["-t", "-a"]  # every CPU of the target, as cyclictest itself finds them
        elif "threads" in p:
            argv += ["-t", str(len(cpus)), "-a", format_cpus(cpus)]
        elif "cpu" in s:
            argv += ["-a", str(s["cpu"])]
        if "rt_priority" in s:
            argv += ["-p", str(s["rt_priority"])]
        if s.get("mlock"):
            argv.append("-m")
        if "histogram_us" in p:
            argv += ["-h", str(p["histogram_us"]), "-q"]  # -h puts every thread on the same interval
        else:
            # -d 0: every thread on the same interval. Without -q the samples stream out as they are
            # measured, so none is lost from cyclictest's ring buffer.
            argv += ["-d", "0", "-v", "-N"]
        return argv + [f"--json={json_path(out)}"]

    def outputs(self, req: RunRequest, out: str) -> list[str]:
        return [posixpath.basename(json_path(out))]  # the sample file is written by collect(), from stdout

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc: subprocess.CompletedProcess) -> Path:
        text = proc.stdout or ""
        meta = self._json(Path(json_path(str(out))))
        if "histogram_us" in req.params:
            log = parser.parse_histogram_text(text, "cyclictest output", unit_ns=1000)
            if meta is not None:  # the JSON's average has 2 decimals, the text's none; it also knows CPUs
                for t, h in log.histograms.items():
                    jt = meta.histograms.get(t)
                    if jt is not None:
                        h.avg, h.cpu = jt.avg, jt.cpu
        else:
            log = parser.parse_verbose(text, "cyclictest output", unit_ns=1)
        if meta is not None:
            log.version, log.cmdline, log.started_at, log.sysinfo = (meta.version, meta.cmdline, meta.started_at,
                                                                       meta.sysinfo)
        notes = ["cyclictest skips periods it misses without counting them"]
        expected = req.params.get("loops", DEFAULT_LOOPS if "duration_s" not in req.params else None)
        ran = {t: len(v[0]) for t, v in log.samples.items()} or {t: h.n for t, h in log.histograms.items()}
        if expected is not None and max(ran.values(), default=0) != expected:
            raise ProbeError(f"cyclictest reported {ran} samples per thread, expected {expected}")
        short = {t: n for t, n in ran.items() if expected is not None and n < expected}
        if short:
            # cyclictest ends every thread as soon as the first one has run its -l loops.
            notes.append("cyclictest stopped every thread when the first reached its loops: "
                         + ", ".join(f"thread {t} has {n} of {expected}" for t, n in sorted(short.items())))
        settings = {k: v for k, v in req.settings.items() if k in PROBE_SETTINGS}
        if re.search(r"^# /dev/cpu_dma_latency set to 0us", text, re.MULTILINE):
            settings["cpu_dma_latency_us"] = 0
        sf = parser.to_samplefile(log, variant=req.variant, settings=settings, params=dict(req.params),
                                  cpus=timer_cpus(req) or None,
                                  extra_notes=notes)
        samplefile.write(out, sf.header, sf.data, sf.trailer)
        return out

    @staticmethod
    def _json(path: Path):
        try:
            return parser.parse_json(path.read_text(), path, require_histogram=False)
        except (OSError, UsageError):
            return None

    def version(self, site: Site | None = None) -> str | None:
        return printed_version(site, ["cyclictest", "--help"], r"cyclictest V\s*(\S+)")


RUNTIME = Cyclictest(
    name="cyclictest",
    help="rt-tests cyclictest, the reference for workload timer (apt-get install rt-tests)",
    workloads={"timer": ("absolute", "relative")},
    settings=PROBE_SETTINGS,
)
