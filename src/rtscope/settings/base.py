"""What a setting is: an `Option` a run is measured under, and what a system setting gets to apply itself."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Callable

from ..options import Option


@dataclass(frozen=True)
class Setting(Option):
    scope: str = "probe"  # "probe" | "system"
    apply: Callable[[Any, "RunContext"], AbstractContextManager] | None = None
    # None when the value can be applied on the target, else why not (experiments skip or fail by spec):
    # unavailable(value, target).
    unavailable: Callable[[Any, Any], str | None] | None = None
    # Called before every run on a target, before anything is made there, with the run's value or None when the
    # run does not set it: a change that needs the target booted again (kernel_cmdline). prepare(value, target).
    prepare: Callable[[Any, Any], None] | None = None
    # The value the runtime runs with instead of a requested one beyond its limits, where that is known before
    # running (the BEAM clamps some spawn options): clamped(value), None when the value is honoured (rounding to
    # the runtime's granularity, a heap size, counts as honoured; the run records what it got either way).
    clamped: Callable[[Any], Any] | None = None
    # A system setting that is a few file writes, switched in milliseconds (kernel files, the governor): the
    # files a value writes on a target, (path, text, current text), so that an interleaved run's arms can
    # differ in it, each arm's files written before its blocks (experiment/design.py). block_writes(value, target).
    block_writes: Callable[[Any, Any], list[tuple[str, str, str]]] | None = None


def without_shell(setting: str, target: Any) -> str | None:
    """Why a setting that runs commands on its target cannot on this one (a running BEAM node), else None."""
    if getattr(target, "runtimes", None) is None:
        return None
    return (f"{setting} runs commands on its target, and target {target.name} ({target.kind}) runs the BEAM "
            "harness only: use an ssh target for the board's Linux")


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
    # Set by setting explain: the sample file -> the causes of its worst samples, stored with the run.
    explain: Callable[[Any], list[dict]] | None = None
