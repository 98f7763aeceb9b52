"""The runtime adapter interface."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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
class Runtime:
    """Base class: subclasses say what they run and how to launch it."""

    name: str
    help: str
    workloads: dict[str, tuple[str, ...]]   # workload -> variants this runtime can run
    settings: tuple[str, ...] = ()          # probe settings it understands
    extra: dict[str, Any] = field(default_factory=dict)

    def unavailable(self) -> str | None:
        """None when usable here, else what is missing and the command that installs it."""
        return None

    def prepare(self, req: RunRequest) -> None:
        """Validate anything beyond the registries before a process starts (raise UsageError)."""

    def command(self, req: RunRequest, out: Path) -> list[str]:
        raise NotImplementedError

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc: subprocess.CompletedProcess) -> Path:
        """The sample file produced by the command (peer tools convert their output here)."""
        return out

    def version(self) -> str | None:
        return None


RUNTIMES: dict[str, Runtime] = {}


def register(rt: Runtime) -> Runtime:
    RUNTIMES[rt.name] = rt
    return rt
