"""The registry of settings: knobs that a run is measured under.

Probe settings (`scope="probe"`) are passed to the probe by its runtime
adapter (a SCHED_FIFO priority, a CPU, mlockall, BEAM spawn options).
System settings (`scope="system"`) change the machine around the run (CPU
governor, load, environment wrapper); they provide `apply`, a context manager
factory that makes the change and always undoes it on exit.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable

from .options import Option, boolean, integer, one_of
from .targets import parse_target
from .workloads import TASK_MODELS


@dataclass(frozen=True)
class Setting(Option):
    scope: str = "probe"  # "probe" | "system"
    apply: Callable[[Any, "RunContext"], AbstractContextManager] | None = None
    # None when the value can be applied on the target, else why not (experiments skip or fail by spec):
    # unavailable(value, target).
    unavailable: Callable[[Any, Any], str | None] | None = None


@dataclass
class RunContext:
    """What a system setting may need to know about the run it surrounds."""

    request: Any
    workdir: Any                  # this host's per-run directory (a Path): outputs are fetched into it
    notes: list[str]
    target: Any = None            # the Target the run executes on (targets.base.Target)
    run_dir: str = ""             # the per-run directory on the target
    # Prepended to the probe's argv: an environment wrapper (container, chroot, namespace) sets it.
    command_prefix: list[str] = field(default_factory=list)
    # Set by an environment whose files the target does not see directly (see environments.py):
    out_dir: str | None = None    # where the probe writes, as the wrapped command sees it
    tool_paths: dict[str, str] = field(default_factory=dict)  # tool -> path as the wrapped command sees it
    fetch: Callable[[str, Any], bool] | None = None           # fetch(file name, local Path) -> found?
    command_name: str | None = None  # how errors name the command ("rtprobe@jail"); default: its file name


SETTINGS: dict[str, Setting] = {}


def register(setting: Setting) -> Setting:
    SETTINGS[setting.name] = setting
    return setting


register(Setting("rt_priority", integer(1, 99), "an integer 1..99",
                 "run the probe under SCHED_FIFO at this priority"))
register(Setting("cpu", integer(0), "a CPU number that is online",
                 "pin the probe to this CPU"))
register(Setting("mlock", boolean, "true or false", "lock the probe's memory (mlockall)"))


register(Setting("target", parse_target, "local, a target defined in [targets.NAME] or $RTSCOPE_TARGETS, or a URL "
                 "(ssh://user@host:port)", "the machine the run executes on (docs/targets.md)", "local",
                 scope="system"))


def system_settings() -> dict[str, Setting]:
    return {k: s for k, s in SETTINGS.items() if s.scope == "system"}


# The task model measured by workload `tasks` (docs/tasks.md); each runtime checks which ones it has.
_BY_RUNTIME = {rt: [m for m, (r, _) in TASK_MODELS.items() if r == rt] for rt, _ in TASK_MODELS.values()}
register(Setting("model", one_of(*TASK_MODELS), f"one of {', '.join(TASK_MODELS)}",
                 "tasks: the task model measured (" + "; ".join(f"{rt}: {', '.join(ms)}"
                                                                for rt, ms in _BY_RUNTIME.items()) + ")"))
