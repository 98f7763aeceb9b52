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

from .options import Option, boolean, integer


@dataclass(frozen=True)
class Setting(Option):
    scope: str = "probe"  # "probe" | "system"
    apply: Callable[[Any, "RunContext"], AbstractContextManager] | None = None
    # None when the value can be applied on this machine, else why not (experiments skip or fail by spec).
    unavailable: Callable[[Any], str | None] | None = None


@dataclass
class RunContext:
    """What a system setting may need to know about the run it surrounds."""

    request: Any
    workdir: Any
    notes: list[str]
    # Prepended to the probe's argv: an environment wrapper (container, chroot, ssh) sets it.
    command_prefix: list[str] = field(default_factory=list)


SETTINGS: dict[str, Setting] = {}


def register(setting: Setting) -> Setting:
    SETTINGS[setting.name] = setting
    return setting


register(Setting("rt_priority", integer(1, 99), "an integer 1..99",
                 "run the probe under SCHED_FIFO at this priority"))
register(Setting("cpu", integer(0), "a CPU number that is online",
                 "pin the probe to this CPU"))
register(Setting("mlock", boolean, "true or false", "lock the probe's memory (mlockall)"))


def system_settings() -> dict[str, Setting]:
    return {k: s for k, s in SETTINGS.items() if s.scope == "system"}


# The task model measured by workload `tasks` (docs/tasks.md); each runtime checks which ones it has.
from .options import one_of  # noqa: E402  (kept with the registration that uses it)

TASK_MODELS = ("cbtask", "cbtask_receive", "pthread", "pthread_pipe", "pthread_futex", "std_thread",
               "erlang_process", "callback_thread")
register(Setting("model", one_of(*TASK_MODELS), f"one of {', '.join(TASK_MODELS)}",
                 "tasks: the task model measured (native: cbtask, cbtask_receive, pthread, std_thread, pthread_pipe, "
                 "pthread_futex; beam: erlang_process, callback_thread)"))
