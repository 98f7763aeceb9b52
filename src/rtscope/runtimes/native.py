"""Runtime `native`: the C probe rtprobe, one subcommand per workload."""

from __future__ import annotations

from dataclasses import dataclass

from .. import paths
from ..errors import RtscopeError, UsageError
from ..settings.explain_record import EXPLAINED
from ..settings.registry import system_settings
from ..targets import LocalTarget, Target
from ..workloads import check_task_request
from ..workloads import check_timer_request
from .base import RunRequest, Runtime, Site

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


# Workload `tasks` is measured by cbtask's taskmem, not rtprobe (docs/tasks.md).
def check_tasks(req: RunRequest) -> None:
    check_task_request(req, "native")
    other = sorted(set(req.settings) - {"model"} - set(system_settings()))
    if other:
        raise UsageError(f"setting {other[0]} is not supported by taskmem (native tasks); it takes: model")
    paths.taskmem()  # not built -> the build command


def taskmem_command(req: RunRequest, out: str, site: Site) -> list[str]:
    argv = [site.tool("taskmem", lambda t: paths.for_arch("taskmem", t.arch, t.is_local)), req.variant,
            "--model", req.settings["model"]]
    for name, value in req.params.items():
        argv += [param_flag(name), str(value)]
    return argv + ["--output", out]


def rtprobe(site: Site) -> str:
    return site.tool("rtprobe", lambda t: paths.for_arch("rtprobe", t.arch, t.is_local))


@dataclass
class Native(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        try:
            here = target is None or target.is_local
            paths.for_arch("rtprobe", paths.host_arch() if here else target.arch, here)
        except RtscopeError as e:
            return str(e)
        return None

    def prepare(self, req: RunRequest) -> None:
        if req.workload == "tasks":
            check_tasks(req)
        elif "model" in req.settings:
            raise UsageError("setting model applies to workload tasks only")
        if req.workload == "timer":
            check_timer_request(req)

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        if req.workload == "tasks":
            return taskmem_command(req, out, site)
        argv = [rtprobe(site), req.workload, req.variant]
        for name, value in req.params.items():
            argv += [param_flag(name), str(value).lower() if isinstance(value, bool) else str(value)]
        if req.settings.get("explain") and req.workload in EXPLAINED[self.name]:
            # What setting explain matches kernel events against, and the worst samples' windows it keeps.
            argv += ["--start-times", "--mark-worst", str(req.settings["explain"])]
        return argv + probe_flags(req.settings) + ["--output", out]

    def version(self, site: Site | None = None) -> str | None:
        site = site or Site(LocalTarget())
        try:
            res = site.target.run([rtprobe(site), "--version"], timeout=10)
        except RtscopeError:
            return None
        return res.stdout.strip() or None


RUNTIME = Native(
    name="native",
    help="C probe rtprobe (build: make -C probes)",
    workloads={"exec": ("sum", "fib", "sleep", "nothing", "touch", "lock"), "tasks": ("memory", "switch"),
               "storage": ("write_sync", "write", "read"), "timer": ("absolute", "relative"),
               "gpio": ("write", "read", "blink")},
    settings=("rt_priority", "cpu", "mlock", "model"),
)
