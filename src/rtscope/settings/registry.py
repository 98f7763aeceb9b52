"""The registry of settings: every knob a run can be measured under, listed here once.

Probe settings (`scope="probe"`) are passed to the probe by its runtime
adapter (a SCHED_FIFO priority, a CPU, mlockall, BEAM spawn options, VM
flags, the task model). System settings (`scope="system"`) change the
machine around the run (CPU governor, load, environment wrapper, IRQ affinity,
kernel files, a PM QoS request, a VM's kernel command line): each is defined
beside its code (governor.py, loadgen.py, environments.py, kernel_files.py,
pm_qos.py, kernel_cmdline.py here) and
provides `apply`, a context manager factory that makes the change and always
undoes it on exit. `Setting` and `RunContext` are in base.py.
"""

from __future__ import annotations

from ..options import boolean, integer, one_of
from ..targets import parse_target
from ..workloads import TASK_MODELS
from . import environments, explain_record, governor, kernel_cmdline, kernel_files, loadgen, pm_qos
from .base import RunContext, Setting
from .vm_flags import parse_vm_flags

__all__ = ["SETTINGS", "RunContext", "Setting", "system_settings"]

MAX_SMALL = (1 << 59) - 1  # the Erlang VM's largest small integer (64-bit): its limit for spawn option values

PROBE_SETTINGS = (
    Setting("rt_priority", integer(1, 99), "an integer 1..99", "run the probe under SCHED_FIFO at this priority"),
    Setting("cpu", integer(0), "a CPU number that is online", "pin the probe to this CPU"),
    Setting("mlock", boolean, "true or false", "lock the probe's memory (mlockall)"),
)

TARGET = Setting("target", parse_target, "local, a target defined in [targets.NAME] or $RTSCOPE_TARGETS, or a URL "
                 "(ssh://user@host:port)", "the machine the run executes on (docs/targets.md)", "local",
                 scope="system")

# The task model measured by workload `tasks` (docs/tasks.md); each runtime checks which ones it has.
_BY_RUNTIME = {rt: [m for m, (r, _) in TASK_MODELS.items() if r == rt] for rt, _ in TASK_MODELS.values()}
MODEL = Setting("model", one_of(*TASK_MODELS), f"one of {', '.join(TASK_MODELS)}",
                "tasks: the task model measured (" + "; ".join(f"{rt}: {', '.join(ms)}"
                                                               for rt, ms in _BY_RUNTIME.items()) + ")")



def beam_fullsweep_after(value: int) -> int:
    """The fullsweep_after a BEAM process runs with: ERTS keeps it in 16 bits (131071 runs as 65535, 65536 as 0;
    what `spawn_opt/2` and `process_info/2` give on OTP 25)."""
    return int(value) & 0xFFFF


BEAM_MIN_HEAP = 233   # ERTS's smallest heap (H_MIN_SIZE), words


def beam_heap_sizes() -> list[int]:
    """ERTS's heap sizes in words (erl_gc.c: Fibonacci-like with one word for the block header, then +20 % from
    the 23rd on), as `erlang:system_info(heap_sizes)` lists them."""
    sizes = [12, 38]
    while len(sizes) < 23:
        sizes.append(sizes[-1] + sizes[-2] + 1)
    while sizes[-1] < MAX_SMALL:
        sizes.append(sizes[-1] + sizes[-1] // 5)
    return sizes


def beam_min_heap_size(value: int) -> int:
    """The min_heap_size a BEAM process gets: the next heap size, at least 233 words (34 -> 233, 6765 -> 6772)."""
    want = max(int(value), BEAM_MIN_HEAP)
    return next(s for s in beam_heap_sizes() if s >= want)


def _clamped_fullsweep_after(value: int) -> int | None:
    return beam_fullsweep_after(value) if value > 0xFFFF else None


def _clamped_min_heap_size(value: int) -> int | None:
    return BEAM_MIN_HEAP if value < BEAM_MIN_HEAP else None    # above it, a heap size near the value: honoured


BEAM_SETTINGS = (
    Setting("fullsweep_after", integer(0, MAX_SMALL), "an integer >= 0 (minor collections)",
            "beam: full-sweep GC after this many minor collections (VM default 65535; the VM keeps 16 bits, so "
            "larger values run modulo 65536)", clamped=_clamped_fullsweep_after),
    Setting("min_heap_size", integer(0, MAX_SMALL), "an integer >= 0 (words)",
            "beam: minimum heap of the measuring process; the VM rounds up to its next heap size (default 233)",
            clamped=_clamped_min_heap_size),
    Setting("priority", one_of("low", "normal", "high", "max"), "one of low, normal, high, max",
            "beam: process priority of the measuring process"),
    Setting("message_queue_data", one_of("on_heap", "off_heap"), "on_heap or off_heap",
            "beam: where the measuring/receiving process keeps its message queue"),
    Setting("vm_flags", parse_vm_flags,
            "Erlang VM flags from beam/priv/vm_flags.json, e.g. '+sbwt none +hmqd off_heap'",
            "beam: flags the VM is started with (elixir --erl); see docs/beam.md"),
)

SETTINGS: dict[str, Setting] = {s.name: s for s in (
    *PROBE_SETTINGS, TARGET, MODEL, *BEAM_SETTINGS, *governor.SETTINGS, *loadgen.SETTINGS, *environments.SETTINGS,
    *explain_record.SETTINGS, *kernel_files.SETTINGS, *pm_qos.SETTINGS, *kernel_cmdline.SETTINGS)}


def system_settings() -> dict[str, Setting]:
    return {k: s for k, s in SETTINGS.items() if s.scope == "system"}


# What a run records for a knob it does not set (the runtime's default): `--baseline defaults` is the configuration
# whose every knob is unset or at this value (analysis.compare.at_defaults).
RECORDED_DEFAULTS = {"mlock": False, "fullsweep_after": 65535, "min_heap_size": 233, "priority": "normal",
                     "message_queue_data": "on_heap", "vm_flags": ""}
