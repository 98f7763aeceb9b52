"""Runtime `rtla`: the kernel's timerlat tracer through `rtla timerlat hist`, beside `rtprobe timer`.

Workload `timer`, variant `absolute` (timerlat's per-CPU threads wake on a periodic timer), mapped to
rtla's options:

  interval_us -> -p (whole µs, at most 1 s)   loops or duration_s -> -d (whole seconds: loops x interval,
  cpu -> -c CPU    threads -> -c LIST          rounded up; timerlat counts the periods it woke for)
  rt_priority -> -P f:N (SCHED_FIFO)          histogram_us -> -E N (entries; 10000 = 10 ms by default)
  always -n -b 1000 (ns figures, 1 µs buckets)

rtla is never given a stop threshold (-a, -i, -T), so it measures for the whole duration and its
auto-analysis (rtla >= 6.3, which runs only when a threshold stops the trace) stays off: the run is
comparable to rtprobe's. Its stdout is converted with the importer (importers/rtla.py): the thread latency
per CPU is the run, the IRQ latency is kept beside it.

It needs root and a kernel with the timerlat tracer (CONFIG_TIMERLAT_TRACER: Debian's PREEMPT_RT kernels
have it, its stock kernels do not); `unavailable(target)` names what is missing on each target.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from .. import samplefile
from ..errors import ProbeError, RtscopeError, UsageError
from ..importers import rtla as parser
from ..targets import LocalTarget, Target
from ..workloads import check_timer_request, format_cpus, timer_cpus
from .base import RunRequest, Runtime, Site, printed_version

DEFAULT_LOOPS = 10_000           # as rtprobe timer
DEFAULT_ENTRIES_US = 10_000      # histogram over 0..10 ms in 1 µs buckets unless histogram_us says otherwise
BUCKET_NS = 1000
MAX_PERIOD_US = 1_000_000        # rtla: "Period longer than 1 s"
MIN_ENTRIES = 10                 # rtla: "Entries must be > 10 ..."
TRACEFS = "sys/kernel/tracing"
INSTALL = "sudo apt-get install -y rtla (a QEMU target: packages = [\"rtla\"] in its table)"

# One round trip: root, tracefs, the tracer, the tool.
_CHECK = r"""
root=$1
[ "$(id -u)" = 0 ] || { echo "notroot"; exit 0; }
[ -r "$root/available_tracers" ] || { echo "notracefs"; exit 0; }
echo "tracers $(cat "$root/available_tracers")"
command -v rtla >/dev/null 2>&1 || echo "nortla"
"""


# rtla stops cleanly (tracer off, its tracefs instance removed, the histogram printed) on SIGINT or at -d's
# end, but SIGTERM or SIGKILL would leave the timerlat tracer running in its instance, its kernel threads
# waking every period on every CPU. rtscope stops a run by signalling its process group (TERM, then KILL):
# this wrapper keeps TERM/HUP from rtla and turns them into the SIGINT it handles. (A wrapper killed outright
# leaves rtla to end at -d's end, cleanly.)
_WRAPPER = r"""
(trap '' TERM HUP; exec "$@") &
pid=$!
trap 'kill -INT $pid 2>/dev/null' TERM HUP INT
wait $pid; rc=$?
while kill -0 $pid 2>/dev/null; do wait $pid; rc=$?; done
exit $rc
"""


# What a killed rtla leaves: its tracefs instance with the timerlat tracer on (rtla 6.x names it after the
# mode), its kernel threads waking every period. Removed unless an rtla still runs (then the instance is its).
_LEFTOVER = r"""
root=$1
running() { for c in /proc/[0-9]*/comm; do [ "$(cat "$c" 2>/dev/null)" = rtla ] && return 0; done; return 1; }
i=0; while running; do i=$((i + 1)); [ $i -gt 30 ] && exit 0; sleep 0.1; done
for d in "$root/instances/timerlat_hist" "$root/instances/timerlat_top"; do
  [ -d "$d" ] || continue
  echo 0 > "$d/tracing_on"; echo nop > "$d/current_tracer"; rmdir "$d"
done
"""


def missing(target: Target) -> str | None:
    """What keeps rtla timerlat from running on the target, else None."""
    root = target.sys_path(TRACEFS)
    try:
        said = target.check(["sh", "-c", _CHECK, "sh", root], "checking for rtla and the timerlat tracer",
                            timeout=30).stdout
    except RtscopeError as e:
        return str(e)
    where = f"target {target.name}"
    if "notroot" in said:
        return f"{where}: rtla needs root (the timerlat tracer is set up through tracefs); connect as root"
    if "notracefs" in said:
        return f"{where}: tracefs not mounted at {root}; mount -t tracefs nodev {root}"
    m = re.search(r"^tracers (.*)$", said, re.M)
    tracers = m.group(1).split() if m else []
    if "timerlat" not in tracers:
        return (f"{where}: kernel has no timerlat tracer (available_tracers: {' '.join(tracers) or 'none'}); "
                "a PREEMPT_RT kernel such as Debian's linux-image-rt has it (CONFIG_TIMERLAT_TRACER)")
    if "nortla" in said:
        return f"{where}: rtla is not installed: {INSTALL}"
    return None


def seconds(req: RunRequest) -> int:
    """rtla's -d: whole seconds covering the run's duration, or its loops at its interval."""
    p = req.params
    if "duration_s" in p:
        return max(1, math.ceil(float(p["duration_s"])))
    return max(1, math.ceil(p.get("loops", DEFAULT_LOOPS) * float(p["interval_us"]) / 1e6))


@dataclass
class Rtla(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        return missing(target or LocalTarget())

    def prepare(self, req: RunRequest) -> None:
        check_timer_request(req)
        interval = req.params["interval_us"]
        if float(interval) != int(interval) or int(interval) > MAX_PERIOD_US:
            raise UsageError(f"runtime rtla takes whole µs up to {MAX_PERIOD_US} for interval_us (-p), got {interval}")
        entries = req.params.get("histogram_us", DEFAULT_ENTRIES_US)
        if entries < MIN_ENTRIES:
            raise UsageError(f"runtime rtla needs histogram_us >= {MIN_ENTRIES} (rtla's -E), got {entries}")

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        p, s = req.params, req.settings
        argv = ["rtla", "timerlat", "hist", "-d", str(seconds(req)), "-p", str(int(p["interval_us"])), "-n",
                "-b", str(BUCKET_NS), "-E", str(p.get("histogram_us", DEFAULT_ENTRIES_US))]
        cpus = timer_cpus(req)
        if cpus:
            argv += ["-c", format_cpus(cpus)]  # else (threads = "all" or one unpinned thread) every CPU
        if "rt_priority" in s:
            argv += ["-P", f"f:{s['rt_priority']}"]
        return ["sh", "-c", _WRAPPER, "sh", *argv]

    def outputs(self, req: RunRequest, out: str) -> list[str]:
        return []  # everything is on stdout

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc) -> Path:
        text = proc.stdout or ""
        try:
            hist = parser.parse(text, "rtla output")
        except UsageError as e:
            raise ProbeError(f"{e}; rtla said: {(proc.stderr or text)[-400:]}") from None
        settings = {k: v for k, v in req.settings.items() if k in self.settings}
        notes = [f"rtla ran for {seconds(req)} s (-d): timerlat counts the periods its threads woke for, so n per "
                 "CPU is about duration / interval, not loops"]
        sf = parser.to_samplefile(hist, settings=settings, params=dict(req.params), runtime="rtla",
                                  bucket=BUCKET_NS, extra_notes=notes)
        sf.header.pop("imported_from", None)
        samplefile.write(out, sf.header, sf.data, sf.trailer)
        return out

    def version(self, site: Site | None = None) -> str | None:
        return printed_version(site, ["rtla", "--help"], r"rtla version\s*(\S+)")

    def stopped(self, target: Target) -> None:
        """rtla needs seconds to stop cleanly on SIGINT under a slow guest, more than the TERM-to-KILL grace of
        a stopped run: turn off the tracer a killed rtla left on."""
        target.check(["sh", "-c", _LEFTOVER, "sh", target.sys_path(TRACEFS)], "turning off a killed rtla's timerlat",
                     timeout=30)


RUNTIME = Rtla(
    name="rtla",
    help="rtla timerlat hist, the kernel's timerlat tracer (needs root and a kernel with it, e.g. PREEMPT_RT; "
         "apt-get install rtla)",
    workloads={"timer": ("absolute",)},
    settings=("rt_priority", "cpu"),
)
