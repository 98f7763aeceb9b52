"""The registry of workloads: what is measured, its variants and parameters."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import UsageError, choices
from .options import Option, boolean, integer, number


@dataclass(frozen=True)
class Workload:
    name: str
    help: str
    variants: tuple[str, ...]
    params: tuple[Option, ...]
    variant_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Rules across parameters, whatever the runtime: check(variant, params) raises UsageError.
    check: Callable[[str, dict[str, Any]], None] | None = None

    def param(self, name: str) -> Option:
        from .options import lookup
        return lookup({p.name: p for p in self.params}, f"{self.name} parameter", name)

    def defaults(self, variant: str) -> dict[str, Any]:
        out = {p.name: p.default for p in self.params if p.default is not None}
        out.update(self.variant_defaults.get(variant, {}))
        return out


WORKLOADS: dict[str, Workload] = {}


def register(w: Workload) -> Workload:
    WORKLOADS[w.name] = w
    return w


register(Workload(
    name="exec",
    help="execution time of a function called repeatedly (study 1: sum, fib, sleep; nothing = overhead; native "
         "only: touch = writing to n fresh pages, n page faults unless mlock; lock = taking a priority-inheritance "
         "mutex another thread holds for n µs one time in 20; BEAM only: dirty = a dirty CPU call while other "
         "processes hold every dirty CPU scheduler n ms about every 200 ms, port = writing 64 KiB to a port whose "
         "program stops reading n ms about every 200 ms, spawn_each / "
         "spawn_recursive = spawning n processes, nodeconnect = connecting to another node)",
    variants=("sum", "fib", "sleep", "nothing", "touch", "lock", "dirty", "port", "spawn_each", "spawn_recursive",
              "nodeconnect"),
    params=(
        Option("n", integer(0), "an integer >= 0",
               "problem size: sum 1..n, fib(n), sleep n ms, touch n pages, lock held n µs, dirty schedulers held "
               "n ms, port not read n ms, spawn n processes"),
        Option("iterations", integer(1), "an integer >= 1", "recorded calls (one extra warm-up call is not recorded)",
               10_000),
        Option("pause_ms", number(0), "a number of ms >= 0",
               "pause between calls (a run lasts at least iterations × pause_ms; 0 = back to back)", 5),
    ),
    variant_defaults={"sum": {"n": 4000}, "fib": {"n": 20}, "sleep": {"n": 5}, "touch": {"n": 256},
                      "lock": {"n": 10000}, "dirty": {"n": 10}, "port": {"n": 10}, "spawn_each": {"n": 1000},
                      "spawn_recursive": {"n": 1000}},
    check=lambda variant, params: _check_exec(variant, params),
))


def _check_exec(variant: str, params: dict[str, Any]) -> None:
    if variant in ("nothing", "nodeconnect") and "n" in params:
        raise UsageError(f"parameter n does not apply to exec {variant}")


# --- tasks (study 5): memory per task and switch cost --------------------------------------------------------

# The one list of task models (setting `model`): the runtime that measures each and the variants it has there,
# in the order the study's table shows them.
TASK_MODELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cbtask": ("native", ("memory", "switch")),
    "cbtask_receive": ("native", ("memory",)),
    "pthread": ("native", ("memory",)),
    "pthread_pipe": ("native", ("switch",)),
    "pthread_futex": ("native", ("switch",)),
    "std_thread": ("native", ("memory", "switch")),
    "erlang_process": ("beam", ("memory", "switch")),
    "callback_thread": ("beam", ("memory", "switch")),
}


def task_models(runtime: str, variant: str) -> tuple[str, ...]:
    """The models `runtime` measures for tasks `variant`."""
    return tuple(m for m, (rt, variants) in TASK_MODELS.items() if rt == runtime and variant in variants)


TASK_COUNTS = "1,10,100,1000,2000,5000,10000,20000,50000"  # the study's task counts
TASK_PARAMS = {"memory": ("counts",), "switch": ("iterations",)}


def task_counts(raw: Any) -> str:
    """'1,10,100' or [1, 10, 100] (a TOML list) -> '1,10,100'; each count an integer >= 1, no repeats."""
    items = raw if isinstance(raw, (list, tuple)) else str(raw).split(",")
    counts = []
    for item in items:
        text = str(item).strip()
        if isinstance(item, bool) or not text.lstrip("-").isdigit():
            raise ValueError(f"task count {text!r} is not an integer")
        counts.append(integer(1)(text))
    if not counts:
        raise ValueError("no task counts")
    if len(set(counts)) != len(counts):
        raise ValueError("a task count appears twice")
    return ",".join(str(c) for c in counts)


def check_task_request(req: Any, runtime: str) -> None:
    """For a runtime's prepare(): a tasks run needs setting `model` (one the runtime has for that
    variant) and only the parameters of its variant."""
    valid = task_models(runtime, req.variant)
    if "model" not in req.settings:
        raise UsageError(f"tasks {req.variant} on runtime {runtime} needs setting model; "
                         f"valid models: {choices(valid)}")
    if req.settings["model"] not in valid:
        raise UsageError(f"runtime {runtime} has no model {req.settings['model']!r} for tasks {req.variant}; "
                         f"valid models: {choices(valid)}")
    extra = sorted(set(req.params) - set(TASK_PARAMS[req.variant]))
    if extra:
        raise UsageError(f"parameter {extra[0]} does not apply to tasks {req.variant}; "
                         f"its parameters: {choices(TASK_PARAMS[req.variant])}")


register(Workload(
    name="tasks",
    help="memory per task and task switch cost (study 5): callback tasks, threads, Erlang processes, "
         "callback threads; see docs/tasks.md",
    variants=("memory", "switch"),
    params=(
        Option("counts", task_counts, "comma-separated task counts >= 1, e.g. 1,10,100",
               "memory: task counts measured, one record each"),
        Option("iterations", integer(1), "an integer >= 1", "switch: recorded batches of ping-pong switches"),
    ),
    variant_defaults={"memory": {"counts": TASK_COUNTS}, "switch": {"iterations": 100}},
))


# --- storage (study 4): passes of block I/O over one file; see docs/storage.md ---------------------


STORAGE_MAX_SIZE = 1 << 40
STORAGE_MAX_BLOCK = 64 << 20
_BYTE_SUFFIXES = {"": 0, "K": 10, "KIB": 10, "M": 20, "MIB": 20, "G": 30, "GIB": 30, "T": 40, "TIB": 40}


def byte_count(minimum: int, maximum: int):
    """Bytes as an integer or with a binary suffix: 4096, "4K", "4KiB", "1G"."""
    def parse(raw: Any) -> int:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise ValueError("not a byte count")
        text = str(int(raw) if isinstance(raw, float) else raw).strip()
        digits = len(text) - len(text.lstrip("0123456789"))
        suffix = text[digits:].strip().upper()
        if not digits or suffix not in _BYTE_SUFFIXES:
            raise ValueError("not a byte count")
        value = int(text[:digits]) << _BYTE_SUFFIXES[suffix]
        if not minimum <= value <= maximum:
            raise ValueError(f"must be {minimum}..{maximum} bytes")
        return value
    return parse


def check_storage(variant: str, params: dict[str, Any]) -> None:
    """Cross-parameter rules of workload storage."""
    size, block = params["size"], params["block_size"]
    if size % block:
        below = size // block * block
        near = f"nearest multiples: {below}, {below + block}" if below else f"smallest valid size: {block}"
        raise UsageError(f"storage size {size} is not a multiple of block_size {block} ({near})")
    if params.get("direct") and block % 512:
        raise UsageError(f"storage direct=true needs a block_size that is a multiple of 512, got {block}")
    if not str(params.get("dir", "")).strip():
        raise UsageError("storage dir must not be empty (default: the probe's working directory '.')")
    if params.get("fdatasync") and variant != "write_sync":
        raise UsageError(f"storage fdatasync=true applies to variant write_sync only, not {variant}")
    if params.get("drop_caches") and variant != "read":
        raise UsageError(f"storage drop_caches=true applies to variant read only, not {variant}")


register(Workload(
    name="storage",
    help="passes of block reads/writes over one file, opened once (study 4); see docs/storage.md",
    variants=("write_sync", "write", "read"),
    params=(
        Option("size", byte_count(1, STORAGE_MAX_SIZE), "bytes (4096, 4K, 1M, 1G), a multiple of block_size",
               "test file size", 4096),
        Option("repetitions", integer(1, 10_000_000), "an integer 1..10000000", "timed passes over the file",
               100_000),
        Option("block_size", byte_count(1, STORAGE_MAX_BLOCK), "bytes (4096, 4K, 1M), at most 64M",
               "bytes per read/write call", 4096),
        Option("dir", str, "a directory path (inside the environment)",
               "where the test file is created; relative to the probe's working directory", "."),
        Option("direct", boolean, "true or false", "O_DIRECT: bypass the page cache", False),
        Option("fdatasync", boolean, "true or false", "write_sync: fdatasync instead of fsync", False),
        Option("drop_caches", boolean, "true or false", "read: drop the page cache before each pass (root)",
               False),
    ),
    check=check_storage,
))


# --- timer (study 2): timer wake-up latency, cyclictest's method; see docs/timer.md ----------------------------

TIMER_MAX_INTERVAL_US = 10_000_000
TIMER_MAX_HISTOGRAM_US = 1_000_000


def timer_interval_us(raw: Any) -> float | int:
    """A period in µs: greater than 0 and not below the resolution of CLOCK_MONOTONIC (clock_getres)."""
    value = number(None, TIMER_MAX_INTERVAL_US)(raw)
    if value <= 0:
        raise ValueError("must be greater than 0")
    res_ns = max(1, round(time.clock_getres(time.CLOCK_MONOTONIC) * 1e9))
    if round(value * 1000) < res_ns:
        raise ValueError(f"{value} µs is below the resolution of CLOCK_MONOTONIC ({res_ns} ns)")
    return value


def positive_number(maximum: float) -> Any:
    def parse(raw: Any) -> float | int:
        value = number(None, maximum)(raw)
        if value <= 0:
            raise ValueError("must be greater than 0")
        return value
    return parse


def cpu_list(raw: Any) -> str:
    """'all', or a CPU list such as '0,2-3' / [0, 2, 3] (a TOML list), as normalised text."""
    if isinstance(raw, str) and raw.strip() == "all":
        return "all"
    return format_cpus(expand_cpus(",".join(str(x) for x in raw) if isinstance(raw, (list, tuple)) else str(raw)))


def expand_cpus(text: str) -> list[int]:
    """'all' -> the CPUs this process may use; '0,2-3' -> [0, 2, 3]. ValueError naming what is wrong."""
    if text.strip() == "all":
        return sorted(os.sched_getaffinity(0))
    cpus: set[int] = set()
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"cannot read CPU list {text!r}; expected 'all' or a list such as 0,2-3")
        first, last = int(lo), int(hi) if dash else int(lo)
        if first > last:
            raise ValueError(f"CPU range {part.strip()!r} runs backwards")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_cpus(cpus) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    out, cpus = [], sorted(cpus)
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def on_this_machine(req: Any) -> bool:
    """Whether a request runs on the local target (whose CPUs this process can see)."""
    return req.settings.get("target", "local") == "local"


def timer_cpus(req: Any) -> list[int] | None:
    """The CPUs of a timer run's threads ([] = one unpinned thread); UsageError for a CPU not usable here.
    None for threads = "all" on another target: its probe knows its own CPUs."""
    threads = req.params.get("threads")
    if threads and "cpu" in req.settings:
        raise UsageError("timer: setting cpu pins the one measurement thread, parameter threads pins one "
                         "thread per CPU: give one of them")
    if not on_this_machine(req):
        return None if threads == "all" else expand_cpus(threads) if threads else \
            [req.settings["cpu"]] if "cpu" in req.settings else []
    cpus = expand_cpus(threads) if threads else [req.settings["cpu"]] if "cpu" in req.settings else []
    allowed = os.sched_getaffinity(0)
    for c in cpus:
        if c not in allowed:
            raise UsageError(f"timer: CPU {c} does not exist, is offline or is not allowed for this process; "
                             f"allowed CPUs: {format_cpus(allowed)}")
    return cpus


def check_timer_request(req: Any) -> None:
    """Cross-parameter rules of workload timer, for a runtime's prepare()."""
    timer_cpus(req)
    duration, interval = req.params.get("duration_s"), req.params["interval_us"]
    if duration is not None and duration * 1e6 < interval:
        raise UsageError(f"timer duration_s {duration} is shorter than one interval ({interval} µs)")


# The BEAM's own timers (runtime beam only): erlang:send_after, receive ... after, Process.sleep.
BEAM_TIMER_VARIANTS = ("send_after", "receive_after", "timer_sleep")

register(Workload(
    name="timer",
    help="timer wake-up latency: clock_nanosleep on an absolute schedule, latency = wake-up - deadline "
         "(study 2, cyclictest's method); see docs/timer.md",
    variants=("absolute", "relative", *BEAM_TIMER_VARIANTS),
    params=(
        Option("interval_us", timer_interval_us, "a number of µs > 0, at least the clock resolution",
               "period between deadlines", 1000),
        Option("loops", integer(1, 10_000_000_000), "an integer 1..10^10",
               "samples per thread (10000 unless duration_s is given; with both, the first limit wins)"),
        Option("duration_s", positive_number(366 * 86400), "a number of seconds > 0",
               "measure the deadlines within this time"),
        Option("threads", cpu_list, "all, or a CPU list such as 0,2-3",
               "one pinned measurement thread per CPU (default: one thread)"),
        Option("histogram_us", integer(1, TIMER_MAX_HISTOGRAM_US), f"an integer 1..{TIMER_MAX_HISTOGRAM_US}",
               "keep a histogram of 1 µs buckets over 0..N µs (exact min/max/sum, overflows counted) instead "
               "of every sample: memory independent of loops"),
    ),
))


# --- msgq (study 3): message passing, the receiver's queue on_heap or off_heap (runtime beam) -----------

register(Workload(
    name="msgq",
    help="message passing with the receiver's queue on_heap or off_heap (study 3): pmap = Task.async/await "
         "parallel map, fan_in = many senders, one busy receiver; runtime beam; see docs/beam.md",
    variants=("pmap", "fan_in"),
    params=(
        Option("elements", integer(1), "an integer >= 1", "pmap: list length (one task per element)"),
        Option("iterations", integer(1), "an integer >= 1",
               "pmap: recorded pmap calls (one more warms up); fan_in: rounds, each sender sends `messages` per round"),
        Option("senders", integer(1), "an integer >= 1", "fan_in: sending processes"),
        Option("messages", integer(1), "an integer >= 1", "fan_in: messages per sender"),
        Option("message_words", integer(0), "an integer >= 0", "fan_in: payload words per message"),
        Option("work", integer(0), "an integer >= 0", "fan_in: receiver work per message (sum 1..work)"),
        Option("send_interval_ms", integer(0), "an integer >= 0", "fan_in: pause of a sender between messages"),
        Option("queue_sample_every", integer(1), "an integer >= 1",
               "fan_in: read the receiver's queue length and memory every N messages"),
    ),
    variant_defaults={
        "pmap": {"elements": 10_000, "iterations": 10},
        "fan_in": {"senders": 100, "messages": 100, "iterations": 1, "message_words": 16, "work": 1000,
                   "send_interval_ms": 0, "queue_sample_every": 100},
    },
))
MSGQ_PARAMS = {"pmap": ("elements", "iterations"),
               "fan_in": ("senders", "messages", "iterations", "message_words", "work", "send_interval_ms",
                          "queue_sample_every")}


# --- gpio (study 1, nerves_rt_perf): GPIO writes and reads through the Linux GPIO character device ---------------

GPIO_TIMED = ("write", "read", "genserver_write")  # variants timed per call (pause_ms); blink keeps a period


def check_gpio(variant: str, params: dict[str, Any]) -> None:
    if not str(params["chip"]).startswith("/"):
        raise UsageError(f"gpio chip must be an absolute path such as /dev/gpiochip0, got {params['chip']!r}")
    if variant == "blink" and "pause_ms" in params:
        raise UsageError("parameter pause_ms does not apply to gpio blink (it keeps period_ms)")
    if variant != "blink" and "period_ms" in params:
        raise UsageError(f"parameter period_ms applies to gpio blink only, not {variant}")


register(Workload(
    name="gpio",
    help="GPIO write/read latency per call, an LED blink loop, a GenServer writing GPIO (study 1's nerves_rt_perf); "
         "see docs/gpio.md",
    variants=("write", "read", "blink", "genserver_write"),
    params=(
        Option("chip", str, "a GPIO chip device path", "the GPIO chip", "/dev/gpiochip0"),
        Option("line", integer(0, 511), "an integer 0..511", "the line's offset on the chip", 0),
        Option("iterations", integer(1, 100_000_000), "an integer >= 1", "recorded calls (blink: periods)", 1000),
        Option("pause_ms", number(0), "a number of ms >= 0", "pause between calls (write, read, genserver_write)"),
        Option("period_ms", positive_number(3_600_000), "a number of ms > 0", "blink: the LED's period"),
    ),
    variant_defaults={**{v: {"pause_ms": 1} for v in GPIO_TIMED}, "blink": {"period_ms": 10}},
    check=check_gpio,
))
