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


# What rtprobe interleave measures as the arms of one process (probes/README.md, "interleave"): exec variants that
# make one timed call per sample with nothing of their own running between calls (touch's reservation and lock's
# holder thread would go on in the other arms' blocks). The arms may differ in the variant, n and the measuring
# thread's CPU and SCHED_FIFO priority, set before each of an arm's blocks; mlock is the process's.
ARM_VARIANTS = ("sum", "fib", "sleep", "nothing")
ARM_SETTINGS = ("rt_priority", "cpu")


def exec_args(req: RunRequest, out: str) -> list[str]:
    """What `rtprobe exec` takes for one run of `req` (without the explain flags), from the word exec on."""
    argv = [req.workload, req.variant]
    for name, value in req.params.items():
        argv += [param_flag(name), str(value).lower() if isinstance(value, bool) else str(value)]
    return argv + probe_flags(req.settings) + ["--output", out]


def interleave_args(reqs: list[RunRequest], outs: list[str], block: int, order: list[int]) -> list[str]:
    """`rtprobe interleave`'s arguments: arm i is reqs[i], writing outs[i]; block k is arm order[k]'s."""
    head = ["interleave", "--block", str(block), "--order", ",".join(map(str, order))]
    return head + [a for req, out in zip(reqs, outs) for a in ("--arm", *exec_args(req, out))]


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
        argv = [rtprobe(site), *exec_args(req, out)]
        if req.settings.get("explain") and req.workload in EXPLAINED[self.name]:
            # What setting explain matches kernel events against, and the worst samples' windows it keeps.
            argv[-2:-2] = ["--start-times", "--mark-worst", str(req.settings["explain"])]
        return argv

    def arm_unavailable(self, req: RunRequest) -> str | None:
        if req.workload != "exec" or req.variant not in ARM_VARIANTS:
            return (f"{req.workload} {req.variant} on runtime native is not one timed call per sample with nothing "
                    f"of its own between calls; interleaved arms: exec {', '.join(ARM_VARIANTS)}")
        return None

    def interleaved_command(self, reqs: list[RunRequest], outs: list[str], site: Site, block: int,
                            order: list[int], writes: list[dict[str, str]] | None = None) -> list[str]:
        args = interleave_args(reqs, outs, block, order)
        files = [f"--write={i}:{path}={text}" for i, arm in enumerate(writes or []) for path, text in arm.items()]
        return [rtprobe(site), args[0], *files, *args[1:]]

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
    arm_settings=ARM_SETTINGS,
    arm_params=("n",),
    duet_workloads=("exec", "timer", "storage", "gpio"),   # the subcommands that open their run with rtp_run_open
    switches_files=True,                                    # rtprobe interleave --write
)
