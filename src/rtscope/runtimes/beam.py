"""Runtime `beam`: the BEAM harness (beam/, an Elixir Mix project) in a fresh Erlang VM per run.

The VM is started the way docs/beam.md describes:

    env -u ERL_FLAGS -u ERL_AFLAGS -u ERL_ZFLAGS -u ELIXIR_ERL_OPTIONS ERL_CRASH_DUMP_SECONDS=0 \
      elixir [--erl VM_FLAGS] -pa beam/_build/prod/lib/rtscope/ebin -e 'RtScope.CLI.main(System.argv())' -- \
      WORKLOAD VARIANT [--param value ...] [spawn options] [--vm-flags VM_FLAGS] --output RUN.rts

The VM flags come from setting `vm_flags` only (the user's ERL_FLAGS and friends are cleared so a run
records what it was asked for), validated against beam/priv/vm_flags.json before any VM starts; the
harness checks again that they are in force and records them. A VM that dies (out of memory, a bad
flag) exits non-zero with its message on stderr, which the runner reports; nothing is stored.

On a BEAM node target (targets/beam_node.py, docs/nerves.md) no VM is started: the same harness command
line runs inside the running node, which holds the harness's modules for the session.

Settings of this runtime: the measuring process's spawn options (fullsweep_after, min_heap_size,
priority, message_queue_data), vm_flags, cpu and rt_priority (the VM's process pinned with `taskset -c`,
run under SCHED_FIFO with `chrt -f`), and model for workload tasks (defined in settings/registry.py, the
VM flag rules in settings/vm_flags.py); workload msgq, which only this runtime runs, and the three BEAM
variants of workload timer are in workloads.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import paths, samplefile
from ..errors import RtscopeError, UsageError, choices
from ..targets import Target
from ..targets.beam_node import HARNESS, BeamNodeTarget
from ..workloads import BEAM_TIMER_VARIANTS, MSGQ_PARAMS, check_task_request
from .base import RunRequest, Runtime, Site
from .native import rtprobe

CLEARED_ENV = ("ERL_FLAGS", "ERL_AFLAGS", "ERL_ZFLAGS", "ELIXIR_ERL_OPTIONS")

SPAWN_SETTINGS = ("fullsweep_after", "min_heap_size", "priority", "message_queue_data")
# What the harness can measure as interleaved arms of one VM (docs/beam.md, "Interleaved arms"): one timed call
# per sample, each arm its own measuring process with its own spawn options, n or elements.
ARM_WORKLOADS = (("exec", "sum"), ("exec", "fib"), ("exec", "sleep"), ("exec", "nothing"), ("exec", "spawn_each"),
                 ("exec", "spawn_recursive"), ("msgq", "pmap"))


# --- the adapter --------------------------------------------------------------------------------------

def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _whole(value: Any, what: str) -> int:
    if float(value) != int(value):
        raise UsageError(f"runtime beam takes whole numbers for {what}, got {value}")
    return int(value)


def harness_args(req: RunRequest) -> list[str]:
    """The harness's argv after `--`, without --output (checked by prepare())."""
    p, s = req.params, req.settings
    argv = [req.workload, req.variant]
    if req.workload == "tasks":
        argv += ["--model", s["model"]]
        argv += [a for name, value in p.items() for a in (_flag(name), str(value))]
    elif req.workload == "exec":
        argv += ["--iterations", str(p["iterations"]), "--pause-ms", str(_whole(p["pause_ms"], "pause_ms"))]
        if s.get("explain"):
            argv += ["--explain", str(s["explain"])]  # the K worst samples' GCs and times scheduled out
        if "n" in p:
            argv += ["--n", str(p["n"])]
    elif req.workload == "timer":
        argv += ["--interval-ms", str(_whole(p["interval_us"] / 1000, "interval_us (whole ms, ERTS timers)")),
                 "--cycles", str(p.get("loops", 10_000))]
    elif req.workload == "msgq":
        argv += [a for name in MSGQ_PARAMS[req.variant] for a in (_flag(name), str(p[name]))]
    elif req.workload == "gpio":
        for name, value in p.items():  # pause_ms, period_ms: whole ms (ERTS timers)
            argv += [_flag(name), str(_whole(value, name) if name.endswith("_ms") else value)]
    for name in SPAWN_SETTINGS:
        if name in s:
            argv += [_flag(name), str(s[name])]
    if s.get("vm_flags"):
        argv += ["--vm-flags", s["vm_flags"]]
    return argv


# Settings of the VM's OS process (all its threads: schedulers, dirty schedulers, the rest): `cpu` pins it to
# one CPU with taskset (the VM then brings one scheduler online: it counts the CPUs it may use); `rt_priority`
# runs it under SCHED_FIFO with chrt.
VM_PROCESS_SETTINGS = ("cpu", "rt_priority")


def vm_process_prefix(s: dict) -> list[str]:
    prefix = ["chrt", "-f", str(s["rt_priority"])] if "rt_priority" in s else []
    return prefix + (["taskset", "-c", str(s["cpu"])] if "cpu" in s else [])


def gpio_port_program(site: Site) -> str:
    """rtprobe, the GPIO port program, where the harness runs: deployed like runtime native's, or on a running
    node into the session's directory (removed with the harness)."""
    if isinstance(site.target, BeamNodeTarget):
        return site.target.place_program(paths.for_arch("rtprobe", site.target.arch))
    return rtprobe(site)


@dataclass
class Beam(Runtime):
    def unavailable(self, target: Target | None = None) -> str | None:
        try:
            if isinstance(target, BeamNodeTarget):
                pass  # the node is the VM; its modules come from this host's build
            elif target is None or target.is_local:
                paths.elixir()
            elif target.which("elixir") is None:
                return (f"elixir is not installed on target {target.name}: sudo apt-get install -y elixir "
                        "(the harness needs only elixir/erl there; rtscope copies its compiled modules)")
            paths.beam_ebin()
        except RtscopeError as e:
            return str(e)
        return None

    def prepare(self, req: RunRequest) -> None:
        p, s = req.params, req.settings
        if req.workload == "tasks":
            check_task_request(req, "beam")
            spawn = sorted(set(s) & set(SPAWN_SETTINGS))
            if spawn:
                raise UsageError(f"setting {spawn[0]} does not apply to tasks on runtime beam (it sets the "
                                 f"measuring process of exec, timer and msgq); tasks takes: model, vm_flags")
        elif "model" in s:
            raise UsageError("setting model applies to workload tasks only")
        if req.workload == "exec":
            _whole(p["pause_ms"], "pause_ms")
        if req.workload == "gpio" and p.get("period_ms", 10) < 2:
            raise UsageError(f"runtime beam takes period_ms >= 2 for gpio blink (ERTS timers), got {p['period_ms']}")
        if req.workload == "timer":
            unsupported = sorted({"duration_s", "threads", "histogram_us"} & set(p))
            if unsupported:
                raise UsageError(f"parameter {unsupported[0]} is not supported by runtime beam (one process, "
                                 "every wake-up kept); it takes interval_us and loops")
            if p["interval_us"] < 1000 or float(p["interval_us"]) % 1000:
                raise UsageError(f"runtime beam takes interval_us in whole ms (ERTS timers have ms resolution): "
                                 f"1000, 2000, ...; got {p['interval_us']}")
        if req.workload == "msgq":
            extra = sorted(set(p) - set(MSGQ_PARAMS[req.variant]))
            if extra:
                raise UsageError(f"parameter {extra[0]} does not apply to msgq {req.variant}; "
                                 f"its parameters: {choices(MSGQ_PARAMS[req.variant])}")
        harness_args(req)

    def command(self, req: RunRequest, out: str, site: Site) -> list[str]:
        gpio = ["--rtprobe", gpio_port_program(site)] if req.workload == "gpio" else []
        return self._launch(req, site, [*harness_args(req), *gpio, "--output", out])

    def _launch(self, req: RunRequest, site: Site, args: list[str]) -> list[str]:
        """The harness with `args` after `--`: in a fresh VM with req's VM settings, or in a running node."""
        if isinstance(site.target, BeamNodeTarget):  # a running node: the harness is loaded there already
            started = sorted(set(req.settings) & set(VM_PROCESS_SETTINGS))
            if started:
                raise UsageError(f"setting {started[0]} applies to a VM rtscope starts; target {site.target.name} "
                                 "is a running BEAM node (set it where its VM is started, e.g. taskset, chrt)")
            return [HARNESS, *args]
        env = [*vm_process_prefix(req.settings), "env", *(a for name in CLEARED_ENV for a in ("-u", name)), "ERL_CRASH_DUMP_SECONDS=0"]
        vm = ["--erl", req.settings["vm_flags"]] if req.settings.get("vm_flags") else []
        exe = paths.elixir() if site.target.is_local else "elixir"
        harness = site.tool("beam_ebin", lambda target: paths.beam_ebin(), tree=True)  # BEAM files run on any arch
        return [*env, exe, *vm, "-pa", harness, "-e", "RtScope.CLI.main(System.argv())", "--", *args]

    def collect(self, req: RunRequest, out: Path, workdir: Path, proc: Any) -> Path:
        """The harness's sample file, with the VM process's settings recorded (the harness does not know them:
        taskset and chrt set them before the VM starts)."""
        applied = {name: req.settings[name] for name in VM_PROCESS_SETTINGS if name in req.settings}
        if applied:
            sf = samplefile.read(out)
            sf.header["settings"].update(applied)
            samplefile.write(out, sf.header, sf.data, sf.trailer)
        return out

    def arm_unavailable(self, req: RunRequest) -> str | None:
        if (req.workload, req.variant) not in ARM_WORKLOADS:
            return (f"{req.workload} {req.variant} on runtime beam measures in one loop per process; interleaved "
                    f"arms: {', '.join(f'{w} {v}' for w, v in ARM_WORKLOADS)}")
        return None

    def interleaved_command(self, reqs: list[RunRequest], outs: list[str], site: Site, block: int,
                            order: list[int], writes: list[dict[str, str]] | None = None) -> list[str]:
        arms = [a for req, out in zip(reqs, outs) for a in ("--arm", *harness_args(req), "--output", out)]
        head = ["interleave", "--block", str(block), "--order", ",".join(map(str, order))]
        return self._launch(reqs[0], site, [*head, *arms])

    def version(self, site: Site | None = None) -> str | None:
        try:
            app = (paths.beam_ebin() / "rtscope.app").read_text()
        except (OSError, RtscopeError):
            return None
        m = re.search(r'\{vsn,\s*"([^"]+)"\}', app)
        return f"rtscope-beam {m.group(1)}" if m else None


RUNTIME = Beam(
    name="beam",
    help=f"BEAM harness in a fresh Erlang VM per run, or in a running node target (build: {paths.BEAM_BUILD_HINT})",
    workloads={"exec": ("sum", "fib", "sleep", "nothing", "dirty", "port", "spawn_each", "spawn_recursive", "nodeconnect"),
               "timer": BEAM_TIMER_VARIANTS,
               "msgq": ("pmap", "fan_in"), "tasks": ("memory", "switch"),
               "gpio": ("write", "read", "blink", "genserver_write")},
    settings=(*SPAWN_SETTINGS, "vm_flags", "model", *VM_PROCESS_SETTINGS),
    arm_settings=SPAWN_SETTINGS,
    arm_params=("n", "elements"),
    duet_workloads=("exec", "timer", "msgq", "gpio"),   # the workloads measured by RtScope.Harness.run
)
