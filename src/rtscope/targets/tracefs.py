"""rtscope's own tracefs instance on a target: the kernel events of the probe's CPUs while a run measures.

Never the global buffer another tool (trace-cmd, rtla, a user's ftrace) may be using: each run gets
`instances/rtscope-<host>-<pid>-<random>` below the target's tracefs, with its own per-CPU ring buffer of a
bounded size (overwrite mode: a long run keeps its last part), restricted to the probe's CPUs
(tracing_cpumask), stamped with trace_clock `mono` (CLOCK_MONOTONIC, what the probes stamp samples with).
Everything goes through the Target interface (one shell script per step, so an SSH or QEMU target costs a
round trip per step), and the instance is removed when the run ends, whatever ends it. An instance left by a
killed rtscope of this host is removed at the next start; `rtscope check` reports any.
"""

from __future__ import annotations

import posixpath
import re
import secrets
import shlex
from bisect import bisect_left, bisect_right

from .. import explain_trace
from .base import Target, TargetError
from .owners import Owner, owned_name, owner_of

PREFIX = "rtscope-"
TRACEFS = "sys/kernel/tracing"
# Required on every kernel; the x86 local timer vectors where the kernel has them (an ARM board's timer is an
# ordinary irq, seen by irq_handler_entry).
EVENTS = ("sched/sched_switch", "sched/sched_wakeup", "irq/irq_handler_entry", "irq/irq_handler_exit",
          "irq/softirq_entry", "irq/softirq_exit", "timer/hrtimer_expire_entry", "timer/hrtimer_expire_exit")
# Where the kernel has them: on x86 the inter-processor interrupts (function calls, TLB shootdowns among them;
# rescheduling; irq work) and the probe's own page faults (filtered to the probe's comm, so another task's
# faults fill no buffer); priority inheritance's boosts (a lock holder run at its waiter's priority); the probe's
# moves between CPUs (filtered to the probe, as its faults: an unpinned probe's sample is followed across them).
TRACED_IPIS = ("call_function", "call_function_single", "reschedule", "irq_work")
OPTIONAL_EVENTS = ("irq_vectors/local_timer_entry", "irq_vectors/local_timer_exit",
                   *(f"irq_vectors/{v}_{end}" for v in TRACED_IPIS for end in ("entry", "exit")),
                   "exceptions/page_fault_user", "sched/sched_pi_setprio", "sched/sched_migrate_task")
CLOCK = "mono"
# The probe's own wake-up is never a cause: its sched_wakeup and the hrtimer_wakeup callback that wakes it
# are filtered out where the kernel writes them, so their events fill no buffer (the callback's time stays in
# the interrupt around it). The tracepoints still run: what explain costs a timer's median is theirs
# (bench/explain_overhead.py, docs/explain.md).
PROBE_COMM = "rtprobe"
BUFFER_KB = 8192  # per traced CPU: the memory the kernel holds for a run, and the window it covers


def tracefs(target: Target) -> str:
    return target.sys_path(TRACEFS)


def _sh(target: Target, script: str, *args: str, what: str, timeout: float = 60) -> str:
    return target.check(["sh", "-c", script, "sh", *args], what, timeout=timeout).stdout


def missing(target: Target) -> str | None:
    """Why this target cannot trace a run (no tracefs, not root, events or the clock missing), else None."""
    root = tracefs(target)
    script = r"""
root=$1; shift
if [ ! -d "$root/instances" ]; then echo "mount"; exit 0; fi
if [ "$(id -u)" != 0 ] && [ ! -w "$root/instances" ]; then echo "root"; exit 0; fi
for e; do [ -d "$root/events/$e" ] || echo "event $e"; done
grep -qw mono "$root/trace_clock" 2>/dev/null || echo "clock"
"""
    try:
        said = _sh(target, script, root, *EVENTS, what="checking tracefs").split("\n")
    except TargetError as e:
        return str(e)
    said = [s.strip() for s in said if s.strip()]
    where = f"target {target.name}"
    if "mount" in said:
        return (f"{where}: tracefs not mounted at {root}; mount -t tracefs nodev {root} "
                "(or a kernel with CONFIG_FTRACE)")
    if "root" in said:
        return f"{where}: not root, and tracefs instances at {root} need root; connect as root"
    events = [s.split(" ", 1)[1] for s in said if s.startswith("event ")]
    if events:
        return f"{where}: the kernel has no trace event(s) {', '.join(events)} (CONFIG_FTRACE's event tracing)"
    if "clock" in said:
        return f"{where}: tracefs at {root} has no trace_clock {CLOCK}"
    return None


def cpumask(cpus: list[int]) -> str:
    """tracing_cpumask text: hex, in groups of 32 bits separated by commas."""
    mask = 0
    for c in cpus:
        mask |= 1 << c
    text = f"{mask:x}"
    groups = []
    while text:
        groups.insert(0, text[-8:])
        text = text[:-8]
    return ",".join(groups)


def owner(name: str) -> Owner | None:
    return owner_of(PREFIX, name)


def instances(target: Target) -> list[str]:
    """The names of the rtscope instances on the target."""
    out = _sh(target, 'cd "$1/instances" 2>/dev/null && for d in rtscope-*; do [ -d "$d" ] && echo "$d"; done; true',
              tracefs(target), what="listing tracefs instances")
    return [line for line in out.split() if line.startswith(PREFIX)]


def stale(target: Target) -> list[tuple[str, Owner | None]]:
    """Instances whose rtscope no longer runs (or cannot be told: made on another host)."""
    found = []
    for name in instances(target):
        who = owner(name)
        if who is None or not who.alive:
            found.append((name, who))
    return found


def remove_stale(target: Target) -> list[str]:
    """Remove the instances a killed rtscope of this host left behind; their names."""
    gone = [name for name, who in stale(target) if who is not None and who.alive is False]
    for name in gone:
        _remove(target, posixpath.join(tracefs(target), "instances", name))
    return gone


def _remove(target: Target, path: str) -> None:
    _sh(target, 'echo 0 > "$1/tracing_on" 2>/dev/null; rmdir "$1" 2>/dev/null || [ ! -d "$1" ] || '
                '{ sleep 0.2; rmdir "$1"; }', path, what=f"removing tracefs instance {path}")


# Windows of trace lines: every line of one CPU's buffer whose time falls in one of the windows (seconds,
# as the trace prints them). The trace is filtered where it lies: only the windows cross the connection.
_AWK = r"""
BEGIN { n = split(W, w, " ") }
/^#/ { next }
{
  t = -1
  for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { t = substr($i, 1, length($i) - 1) + 0; break }
  for (j = 1; j < n; j += 2) if (t >= w[j] && t <= w[j + 1]) { print; next }
}
"""


# The window keeper: every KEEP_S, copies the windows of the samples the probe marked since its last pass
# (rtprobe --mark-worst appends "START END CPU" to $RTSCOPE_MARKS when a sample enters its thread's worst so
# far; the BEAM harness, which cannot know its CPU, writes CPU `*`: every traced CPU, as does every mark of a
# probe that may move between CPUs, `spread` 1: its sample is followed across its moves) out of the ring
# buffer's per-CPU `trace` files, while the buffer still holds them. It sleeps between passes and never waits
# on trace_pipe: a waiting reader would make the kernel wake it at every event.
# Each pass writes one file (kept atomically by a rename); `once` makes the last pass after the run.
_WINDOW_LINES = r"""
BEGIN { n = split(W, w, " ") }
/^#/ { next }
{
  t = -1
  for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) { t = substr($i, 1, length($i) - 1) + 0; break }
  if (t < 0) next
  for (j = 1; j < n; j += 2) if (t >= w[j] / 1e9 - LOOK && t <= w[j + 1] / 1e9) print w[j] " " w[j + 1] "\t" $0
}
"""
_KEEPER = r"""
marks=$1; dir=$2; inst=$3; prog=$4; look=$5; every=$6; mode=$7; traced=$8; spread=$9
mkdir -p "$dir"
pass() {
  [ -f "$marks" ] || return 0
  done_=$(cat "$dir/.n" 2>/dev/null || echo 0)
  total=$(wc -l < "$marks")
  [ "$total" -gt "$done_" ] || return 0
  sed -n "$((done_ + 1)),${total}p" "$marks" |
    awk -v all="$traced" -v spread="$spread" '$3 == "*" || spread == 1 { n = split(all, c, ","); for (i = 1; i <= n; i++) print $1, $2, c[i]; next } { print }' \
    > "$dir/.new"
  : > "$dir/.part"
  for cpu in $(awk '{ print $3 }' "$dir/.new" | sort -u); do
    w=$(awk -v c="$cpu" '$3 == c { printf "%s %s ", $1, $2 }' "$dir/.new")
    awk -v W="$w" -v LOOK="$look" "$prog" "$inst/per_cpu/cpu$cpu/trace" >> "$dir/.part"
  done
  mv "$dir/.part" "$dir/kept-$total"
  echo "$total" > "$dir/.n"
}
if [ "$mode" = once ]; then pass; exit 0; fi
while :; do sleep "$every"; pass; done
"""
# The kept windows' lines of the wanted windows only (W: "START END,START END,...", as the marks wrote them).
_PICK = r"""
BEGIN { n = split(W, w, ","); for (i = 1; i <= n; i++) want[w[i]] = 1 }
{ key = $0; sub(/\t.*/, "", key); if (key in want) print }
"""
KEEP_S = 0.2    # between the keeper's passes: the ring buffer must hold this long of events (it holds seconds)
LOOK_S = 0.002  # kept before a marked sample's start: the context its CPU was in when it began
LOOK_NS = round(LOOK_S * 1e9)


def parse_windows(text: str) -> dict[tuple[int, int], list[str]]:
    """The keeper's files: (start_ns, end_ns) -> the window's trace lines (a window copied twice, once)."""
    out: dict[tuple[int, int], list[str]] = {}
    seen: set[str] = set()
    for line in text.splitlines():
        key, tab, rest = line.partition("\t")
        if not tab or line in seen:
            continue
        seen.add(line)
        start, _, end = key.partition(" ")
        out.setdefault((int(start), int(end)), []).append(rest)
    return out


class Instance:
    """One run's tracefs instance on a target."""

    def __init__(self, target: Target, cpus: list[int], buffer_kb: int | None = None, follow: bool = False):
        self.target = target
        self.cpus = sorted(set(cpus))
        # the probe may move between the traced CPUs (it is not pinned): a sample's window is kept of each
        self.follow = follow and len(self.cpus) > 1
        self.buffer_kb = buffer_kb or BUFFER_KB
        self.name = owned_name(PREFIX) + secrets.token_hex(3)
        self.path = posixpath.join(tracefs(target), "instances", self.name)
        self.created = False
        self.keeper = None          # the Spawned window keeper
        self.kept = ""              # its directory on the target
        self.marks = ""             # the probe's marks file on the target
        self.marked = 0             # windows it marked (the keeper copied), once read

    def start(self) -> None:
        """Create, configure and enable the instance (one round trip)."""
        script = r"""
set -e
d=$1; mask=$2; kb=$3; probe=$4; shift 4
mkdir "$d"
echo mono > "$d/trace_clock"
echo "$mask" > "$d/tracing_cpumask"
echo "$kb" > "$d/buffer_size_kb"
# the filters only spare the probe's own wake-up events: a kernel that refuses one just writes them
echo "comm != \"$probe\"" 2>/dev/null > "$d/events/sched/sched_wakeup/filter" || true
# and the page fault and migration events keep the probe's own
for e in exceptions/page_fault_user sched/sched_migrate_task; do
  if [ -d "$d/events/$e" ]; then echo "comm == \"$probe\"" 2>/dev/null > "$d/events/$e/filter" || true; fi
done
addr=$(awk '$3 == "hrtimer_wakeup" { print $1; exit }' /proc/kallsyms 2>/dev/null || true)
case "$addr" in  # all zeros where kptr_restrict hides addresses: unfiltered
  *[!0]*) echo "function != 0x$addr" 2>/dev/null > "$d/events/timer/hrtimer_expire_entry/filter" || true ;;
esac
for e; do
  if [ -d "$d/events/$e" ]; then echo 1 > "$d/events/$e/enable"; fi
done
echo 1 > "$d/tracing_on"
"""
        self.created = True  # before the mkdir: a failure half-way is removed too
        _sh(self.target, script, self.path, cpumask(self.cpus), str(self.buffer_kb), PROBE_COMM, *EVENTS,
            *OPTIONAL_EVENTS, what=f"creating tracefs instance {self.path}")

    def _keeper_argv(self, mode: str) -> list[str]:
        return ["sh", "-c", _KEEPER, "sh", self.marks, self.kept, self.path, _WINDOW_LINES, str(LOOK_S), str(KEEP_S),
                mode, ",".join(map(str, self.cpus)), "1" if self.follow else "0"]

    def keep_windows(self, run_dir: str, online: list[int]) -> None:
        """Start the window keeper on the target, on the CPUs the probe does not use when there are any
        (and the target has taskset); the probe's marks go to `self.marks`."""
        self.kept = posixpath.join(run_dir, "trace-windows")
        self.marks = posixpath.join(run_dir, "trace-marks.txt")
        others = ",".join(str(c) for c in online if c not in self.cpus)
        argv = self._keeper_argv("loop")
        if others and self.target.which("taskset"):
            argv = ["taskset", "-c", others, *argv]
        self.keeper = self.target.spawn(argv, cwd=run_dir, log=posixpath.join(run_dir, "trace-keeper.log"))

    def stop(self) -> None:
        """Stop tracing; stop the keeper and make its last pass."""
        self.target.write_file(posixpath.join(self.path, "tracing_on"), "0\n")
        if self.keeper is not None:
            self.stop_keeper()
            self.target.check(self._keeper_argv("once"), "keeping the last trace windows", timeout=300)

    def stop_keeper(self) -> None:
        if self.keeper is not None:
            try:
                self.keeper.stop()
            finally:
                self.keeper = None

    def kept_windows(self, wanted: list[tuple[int, int]] | None = None) -> tuple[dict[tuple[int, int], list[str]], int]:
        """The windows the keeper copied (only the `wanted` ones, picked on the target: the rest never crosses
        the connection nor fills rtscope's memory), and their size in bytes; nothing without a keeper.
        `self.marked` is then how many windows the probe marked (the keeper copied)."""
        if not self.kept:
            return {}, 0
        pick = "cat" if wanted is None else 'awk -v W="$2" "$3"'
        script = f'wc -l < "$4" 2>/dev/null || echo 0; cat "$1"/kept-* 2>/dev/null | {pick}; true'
        keys = ",".join(f"{a} {b}" for a, b in wanted or [])
        text = self.target.run(["sh", "-c", script, "sh", self.kept, keys, _PICK, self.marks], timeout=300).stdout
        count, _, text = text.partition("\n")
        self.marked = int(count.strip() or 0)
        return parse_windows(text), len(text)

    def remove(self) -> None:
        try:
            self.stop_keeper()  # a reader of trace_pipe keeps the instance busy
        finally:
            if self.created:
                _remove(self.target, self.path)
                self.created = False

    @staticmethod
    def ring_holds(oldest: dict[int, int | None], cpu: int, start_ns: int) -> bool:
        """Whether `cpu`'s ring buffer (`oldest`: oldest_ns()) still holds a sample that started at start_ns."""
        return oldest.get(cpu) is not None and oldest[cpu] <= start_ns - LOOK_NS // 2

    def oldest_ns(self) -> dict[int, int | None]:
        """Per traced CPU, the time of the oldest event its buffer still holds (None: empty)."""
        files = {c: posixpath.join(self.path, "per_cpu", f"cpu{c}", "stats") for c in self.cpus}
        got = self.target.read_files(list(files.values()))
        out: dict[int, int | None] = {}
        for c, f in files.items():
            m = re.search(r"oldest event ts:\s*(\d+)\.(\d{6})", got.get(f) or "")
            out[c] = int(m[1]) * 1_000_000_000 + int(m[2]) * 1000 if m else None
        return out

    def ring_windows(self, cpu: int, spans: list[tuple[int, int]]) -> tuple[list[list[explain_trace.Event]], int]:
        """What the ring buffer still holds of `cpu` in each span (CLOCK_MONOTONIC ns, from LOOK_S before its
        start): the events per span, and the bytes read (filtered on the target: only the spans cross)."""
        spans = [(a - LOOK_NS, b) for a, b in spans]
        lines = self.windows(cpu, spans)
        events = explain_trace.parse(lines)
        stamps = [e.ts_ns for e in events]
        return ([events[bisect_left(stamps, a):bisect_right(stamps, b)] for a, b in spans],
                sum(len(line) + 1 for line in lines))

    def windows(self, cpu: int, spans: list[tuple[int, int]]) -> list[str]:
        """The trace lines of `cpu` inside any of `spans` (CLOCK_MONOTONIC ns, inclusive)."""
        if not spans:
            return []
        w = " ".join(f"{a / 1e9:.6f} {b / 1e9:.6f}" for a, b in spans)
        trace = posixpath.join(self.path, "per_cpu", f"cpu{cpu}", "trace")
        proc = self.target.run(["awk", "-v", f"W={w}", _AWK, trace], timeout=300)
        if proc.returncode != 0:
            raise TargetError(f"target {self.target.name}: reading {trace} failed: `awk ... {shlex.quote(trace)}` "
                              f"exited {proc.returncode}: {proc.said()}")
        return proc.stdout.splitlines()
