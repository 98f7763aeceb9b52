"""The runtime adapter interface."""

from __future__ import annotations

import posixpath
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import RtscopeError
from ..targets import LocalTarget, Target
from ..targets.deploy import place_file, place_tree


@dataclass(frozen=True)
class RunRequest:
    """One run to execute: workload, variant, runtime, complete params and parsed settings."""

    workload: str
    variant: str
    runtime: str
    params: dict[str, Any]
    settings: dict[str, Any]
    tags: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        knobs = ",".join(f"{k}={v}" for k, v in sorted(self.settings.items()))
        return f"{self.workload} {self.variant} ({self.runtime}{': ' + knobs if knobs else ''})"


@dataclass
class Site:
    """Where a run's command executes: the target, and the tools as the command sees them there."""

    target: Target
    overrides: dict[str, str] = field(default_factory=dict)  # set by an environment wrapper

    def tool(self, name: str, local: Callable[[Target], Path], tree: bool = False) -> str:
        """The path of tool `name` for the command; `local(target)` finds this host's build for the target,
        which is deployed (cached by content) unless the target is this machine."""
        if name in self.overrides:
            return self.overrides[name]
        return (place_tree if tree else place_file)(self.target, local(self.target))


@dataclass
class Runtime:
    """Base class: subclasses say what they run and how to launch it."""

    name: str
    help: str
    workloads: dict[str, tuple[str, ...]]   # workload -> variants this runtime can run
    settings: tuple[str, ...] = ()          # probe settings it understands
    extra: dict[str, Any] = field(default_factory=dict)

    def unavailable(self, target: Target | None = None) -> str | None:
        """None when usable on the target (this machine by default), else what is missing and the
        command that installs it."""
        return None

    def prepare(self, req: RunRequest) -> None:
        """Validate anything beyond the registries before a process starts (raise UsageError)."""

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        """The argv, on the target; `out` is the sample file's path there."""
        raise NotImplementedError

    def outputs(self, req: RunRequest, out: str) -> list[str]:
        """Names of the files the command leaves beside `out` that collect() reads (fetched from the target)."""
        return [posixpath.basename(out)]

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc: subprocess.CompletedProcess) -> Path:
        """The sample file produced by the command (peer tools convert their output here)."""
        return out

    def version(self, site: Site | None = None) -> str | None:
        return None

    def stopped(self, target: Target) -> None:
        """After a run that did not end on its own (an error, a timeout, Ctrl-C, SIGTERM: its processes were
        killed): undo what the tool leaves behind on the target when it is killed."""

    # Interleaved arms (experiment/design.py): several configurations measured in one process, block by block.
    arm_settings: tuple[str, ...] = ()      # settings the arms of one run may differ in (per process or thread)
    arm_params: tuple[str, ...] = ()        # parameters they may differ in (besides the variant)
    # Whether the arms may also differ in system settings that are file writes (Setting.block_writes): the
    # process writes each arm's files before its blocks (interleaved_command's `writes`).
    switches_files: bool = False

    def arm_unavailable(self, req: RunRequest) -> str | None:
        """None when `req` can be an arm of an interleaved run of this runtime, else why not."""
        return f"runtime {self.name} runs one configuration per process"

    def interleaved_command(self, reqs: list[RunRequest], outs: list[str], site: Site, block: int,
                            order: list[int], writes: list[dict[str, str]] | None = None) -> list[str]:
        """The argv of one process that measures every arm: arm order[k] makes block k of `block` samples, and
        arm i writes its own sample file to outs[i] (with a `pairing` header); writes[i]: the files (path ->
        text) arm i writes before each of its blocks (switches_files)."""
        raise NotImplementedError

    # Duets (experiment/design.py): configurations measured at the same time, a process each on a CPU of its
    # own, started together: the harness of these workloads waits at the duet's start gate (RTSCOPE_DUET_GATE).
    duet_workloads: tuple[str, ...] = ()

    def duet_unavailable(self, req: RunRequest) -> str | None:
        """None when `req` can be an arm of a duet of this runtime, else why not."""
        if req.workload in self.duet_workloads:
            return None
        which = f"duet arms: {', '.join(self.duet_workloads)}" if self.duet_workloads else "it has no duets"
        return f"{req.workload} on runtime {self.name} does not wait at a duet's start gate ({which})"


def printed_version(site: Site | None, argv: list[str], pattern: str) -> str | None:
    """A peer tool's version: group 1 of `pattern` in what `argv` prints on the site's target (this machine
    by default); None when it does not run or says no version."""
    target = site.target if site else LocalTarget()
    try:
        res = target.run(argv, timeout=10)
    except RtscopeError:
        return None
    m = re.search(pattern, res.stdout + res.stderr)
    return m.group(1) if m else None
