"""Runtime `native`: the C probe rtprobe, one subcommand per workload."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from ..errors import RtscopeError
from .base import RunRequest, Runtime, register

# Probe settings -> rtprobe flags.
FLAG_SETTINGS = {"rt_priority": "--priority", "cpu": "--cpu"}


def probe_flags(settings: dict) -> list[str]:
    """rtprobe's realtime flags for the settings in force (shared by every subcommand)."""
    argv: list[str] = []
    for name, flag in FLAG_SETTINGS.items():
        if name in settings:
            argv += [flag, str(settings[name])]
    if settings.get("mlock"):
        argv.append("--mlock")
    return argv


def param_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass
class Native(Runtime):
    def unavailable(self) -> str | None:
        try:
            paths.rtprobe()
        except RtscopeError as e:
            return str(e)
        return None

    def command(self, req: RunRequest, out: Path) -> list[str]:
        argv = [str(paths.rtprobe()), req.workload, req.variant]
        for name, value in req.params.items():
            argv += [param_flag(name), str(value).lower() if isinstance(value, bool) else str(value)]
        return argv + probe_flags(req.settings) + ["--output", str(out)]

    def version(self) -> str | None:
        try:
            res = subprocess.run([str(paths.rtprobe()), "--version"], capture_output=True, text=True, timeout=10)
        except (OSError, RtscopeError, subprocess.TimeoutExpired):
            return None
        return res.stdout.strip() or None


register(Native(
    name="native",
    help="C probe rtprobe (build: make -C probes)",
    workloads={"exec": ("sum", "fib", "sleep", "nothing")},
    settings=("rt_priority", "cpu", "mlock"),
))
